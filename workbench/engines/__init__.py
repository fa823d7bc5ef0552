"""The engines a layout can run on, one module each; ``ENGINES[name]`` is its record."""
from __future__ import annotations

from workbench.engines import (deepspeed, fsdp, generic, hf, litgpt, megatron, nanotron, torchtitan,
                               torchtune)
from workbench.engines.types import FP8_RECIPES, SWITCHES, CastBytes, Engine, Fp8Recipe

ENGINES: dict[str, Engine] = {m.ENGINE.name: m.ENGINE for m in (
    generic, megatron, torchtitan, deepspeed, fsdp, nanotron, torchtune, hf, litgpt)}
ENGINE_NAMES = tuple(ENGINES)


def engine_of(training) -> Engine:
    """The record that runs ``training`` (a ``scenario.types.Training``): its engine's, and for
    the Hugging Face stack the one of its ``backend`` and ``liger`` switch (``hf.record``)."""
    if training.engine == "hf":
        return hf.record(training.backend, bool(training.liger))
    return ENGINES[training.engine]


__all__ = ["ENGINES", "ENGINE_NAMES", "engine_of", "FP8_RECIPES", "SWITCHES", "CastBytes", "Engine", "Fp8Recipe"]
