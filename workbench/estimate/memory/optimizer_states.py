"""Optimizer-state bytes of one parameter tensor, per optimizer the scenario can name, as the
libraries allocate them (no torch: a calculation the estimator and the trial prediction share).

Each number is read from the library that allocates the state (versions in the trial's
environment: torch 2.13, bitsandbytes 0.50.2, torchao 0.18):

- ``adamw`` — torch/optim/adamw.py (``_init_group`` of torch/optim/adam.py): ``exp_avg`` and
  ``exp_avg_sq`` like the parameter (fp32: 8 B per element), a 0-d ``step``.
- ``sgd`` (momentum) — torch/optim/sgd.py: ``momentum_buffer`` like the gradient (4 B).
- ``adamw8bit`` / ``paged_adamw8bit`` — bitsandbytes/optim/optimizer.py,
  ``Optimizer2State.init_state``: a tensor of fewer than ``min_8bit_size`` = 4096 elements keeps
  fp32 ``state1``/``state2`` (8 B per element); otherwise ``state1``/``state2`` are uint8 (2 B
  per element) with fp32 ``absmax1``/``absmax2`` per block of 256 (``blocks = n // 256 +
  bool(n % 256)``), and ``qmap1``/``qmap2`` point at the optimizer's two 256-entry fp32 maps
  (``self.name2qmap["dynamic"]`` / ``["udynamic"]``), shared by every tensor: 2 x 1024 B once
  per optimizer (``SHARED``), not per tensor. Paged: the same tensors in CUDA managed memory
  (on the CPU bitsandbytes falls back to ordinary tensors).
- ``adamw4bit`` — torchao/optim/adam.py ``_AdamBase._new_buffer`` and
  torchao/optim/subclass_4bit.py ``OptimState4bit.zeros``: a (local) tensor of at least 4096
  elements whose count divides by ``block_size`` = 128 (``AdamW4bit``'s default) keeps each
  moment as ``codes`` (uint8, n // 2), ``scale`` (fp32, n // 128) and its own ``qmap``
  (16 fp32 = 64 B, a new tensor per state); otherwise fp32 zeros like the parameter.
- ``adafactor`` — torch/optim/_adafactor.py (``Adafactor._init_group``): a tensor of 2 or more
  dims keeps ``row_var`` (the shape with the last dim 1) and ``col_var`` (the second-to-last
  dim 1); a 1-D tensor a full ``variance``; all in the gradient's dtype; no first moment.
"""
from __future__ import annotations

import math

BNB_MIN_8BIT_SIZE = 4096     # bitsandbytes Optimizer8bit / AdamW8bit(min_8bit_size=4096)
BNB_BLOCK = 256              # bitsandbytes Optimizer2State.init_state: blocksize = 256
BNB_QMAP = 256               # F.create_dynamic_map(): 256 fp32 entries
AO_MIN_SIZE = 4096           # torchao _AdamBase._new_buffer: numel >= 4096
AO_BLOCK_4BIT = 128          # torchao AdamW4bit(block_size=128)
AO_QMAP_4BIT = 16            # torchao subclass_4bit: 16-entry qmap per state tensor


def state_bytes(optimizer: str, shape: tuple[int, ...], dtype_bytes: int = 4) -> int:
    """Bytes of the state ``optimizer`` keeps for one parameter tensor of ``shape`` (the local
    shard a rank steps), excluding the 0-d step counters and the maps shared across tensors
    (``shared_bytes``). ``dtype_bytes``: the parameter's element size (the trial runs fp32)."""
    n = math.prod(shape)
    if n == 0:
        return 0
    if optimizer == "adamw":
        return 2 * n * dtype_bytes
    if optimizer == "sgd":
        return n * dtype_bytes
    if optimizer in ("adamw8bit", "paged_adamw8bit"):
        if n < BNB_MIN_8BIT_SIZE:
            return 2 * n * 4                  # fp32 state1, state2
        blocks = n // BNB_BLOCK + bool(n % BNB_BLOCK)
        return 2 * n + 2 * 4 * blocks         # uint8 state1, state2; fp32 absmax1, absmax2
    if optimizer == "adamw4bit":
        if n < AO_MIN_SIZE or n % AO_BLOCK_4BIT:
            return 2 * n * dtype_bytes
        return 2 * (n // 2 + 4 * (n // AO_BLOCK_4BIT) + 4 * AO_QMAP_4BIT)
    if optimizer == "adafactor":
        if len(shape) >= 2:
            return (n // shape[-1] + n // shape[-2]) * dtype_bytes
        return n * dtype_bytes
    raise ValueError(f"unknown optimizer {optimizer}")


def shared_bytes(optimizer: str, shapes: list[tuple[int, ...]]) -> int:
    """Bytes one optimizer instance shares across the tensors it steps (``shapes``):
    bitsandbytes' two 256-entry fp32 quantization maps, once any tensor is kept in 8 bits."""
    if optimizer in ("adamw8bit", "paged_adamw8bit") and any(
            math.prod(s) >= BNB_MIN_8BIT_SIZE for s in shapes):
        return 2 * BNB_QMAP * 4
    return 0


def optimizer_bytes(optimizer: str, shapes: list[tuple[int, ...]], dtype_bytes: int = 4) -> int:
    """One optimizer instance's state bytes over the tensors it steps."""
    return (sum(state_bytes(optimizer, s, dtype_bytes) for s in shapes)
            + shared_bytes(optimizer, shapes))
