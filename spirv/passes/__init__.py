"""Module rewriting passes built on tessera.spirv.editor (block counters first)."""
