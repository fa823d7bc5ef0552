"""The engines a layout can run on, one module each; ``ENGINES[name]`` is its record."""
from __future__ import annotations

from workbench.engines import deepspeed, fsdp, generic, hf, megatron, nanotron, torchtitan, torchtune
from workbench.engines.types import FP8_RECIPES, SWITCHES, Engine, Fp8Recipe

ENGINES: dict[str, Engine] = {m.ENGINE.name: m.ENGINE for m in (
    generic, megatron, torchtitan, deepspeed, fsdp, nanotron, torchtune, hf)}
ENGINE_NAMES = tuple(ENGINES)


__all__ = ["ENGINES", "ENGINE_NAMES", "FP8_RECIPES", "SWITCHES", "Engine", "Fp8Recipe"]
