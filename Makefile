# Tessera: `make demo` and `make test` set everything up on a fresh Debian/Ubuntu machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
APT_PACKAGES := libvulkan1 libvulkan-dev mesa-vulkan-drivers vulkan-tools glslang-tools xvfb \
                vulkan-validationlayers spirv-tools gcc vkbasalt mangohud chromium valgrind
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt venv backend shims graph-shaders examples test demo bench clean doctor

setup: apt venv backend shims graph-shaders examples

# Install only what is missing; quick when everything is there.
apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

venv: $(STAMPS)/venv
$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# Debian 12: a private Mesa 25 lavapipe from bookworm-backports under build/backend (system apt untouched);
# elsewhere, or offline, the system lavapipe. One line of output; instant when already done.
backend: venv apt
	@$(PY) -m tessera.tools.backend_setup

# The generator rebuilds only when the intercept set or generator changed (content hash).
shims: venv
	@$(PY) -m tessera.tools.build_shims

# The emulated Mali's data-graph operator shaders (icd/data_graph/shaders/*.comp -> build/data_graph/*.spv).
GRAPH_SHADERS := $(patsubst icd/data_graph/shaders/%.comp,build/data_graph/%.spv,$(wildcard icd/data_graph/shaders/*.comp))
graph-shaders: $(GRAPH_SHADERS)
build/data_graph/%.spv: icd/data_graph/shaders/%.comp $(wildcard icd/data_graph/shaders/*.glsl)
	@mkdir -p $(@D)
	@glslangValidator -V --target-env vulkan1.2 -o $@ $< >/dev/null

examples: apt
	@$(MAKE) -s -C examples

test: setup
	$(PY) -m pytest -q tests

demo: setup
	$(VENV)/bin/tessera demo

bench: setup
	$(PY) bench/run_all.py

doctor: venv
	$(VENV)/bin/tessera doctor

clean:
	rm -rf build $(STAMPS)
