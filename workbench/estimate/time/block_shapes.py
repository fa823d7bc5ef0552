"""What the formulas of every block share, for a grid of shapes at once: the shapes' degrees and
tokens as arrays and the scenario's switches (``block_costs.block_cost_arrays`` builds it;
``block_costs`` and ``moe_block`` read it)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.scenario.types import Scenario


@dataclass(frozen=True)
class BlockShapes:
    """What every block's formulas share: the shapes' degrees and tokens (arrays), the scenario's
    switches (plain values)."""

    s: Scenario
    t: np.ndarray            # TP
    cp: np.ndarray
    ep: np.ndarray
    et: np.ndarray           # the experts' TP degree (``Parallel.etp``)
    tokens: np.ndarray       # tokens on this GPU per microbatch
    sp: bool                 # sequence parallelism (it takes effect where t > 1: Parallel.sp)
    passes: float            # forward, backward, recomputed forward
    layer_share: float       # recompute "layer": the checkpointed share of the blocks
    gpu: object
    run: object              # engine_terms.RunConventions
    eng: object              # the engine
    tp_span: object          # the TP group's placement (``placement.group_span``; every block's)
    hidden_bytes: np.ndarray  # one microbatch's hidden states on a TP rank (tokens x hidden x
    #                           the compute dtype's bytes): the buffer of most TP collectives
    recomputed: frozenset = frozenset()   # Megatron's recomputed modules beyond core_attn
    # what ``collectives.collective_times`` has timed over these shapes (blocks share buffers)
    timed: dict = field(default_factory=dict, compare=False)

    def full(self, x) -> np.ndarray:
        """``x`` (a number or an array) as one float per shape."""
        a = np.asarray(x, dtype=float)
        if a.shape == self.t.shape:
            return a
        out = np.empty(self.t.shape)      # (np.full's value, at a third of its cost)
        out[...] = a
        return out
