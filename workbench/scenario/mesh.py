"""The rank layout of a parallel configuration as plain data (no torch): which pipeline, data,
context and tensor index each global rank holds, and which ranks share each process group.

The order is the trial's and torchtitan's device mesh, ``init_device_mesh(..., (pp, dp, cp, tp),
mesh_dim_names=("pp", "dp", "cp", "tp"))``: TP innermost (neighbouring ranks, so TP stays inside
a node), then CP, DP, and PP outermost, i.e. ``rank = ((pp * dp + d) * cp + c) * tp + t``.
Expert parallelism is drawn from dp x cp (contract 1): an EP group is ``ep`` consecutive ranks of
the flattened dp x cp index (the ``dp_cp`` mesh), and the expert-data-parallel group (the ranks
holding the same experts) strides across those groups — as ``trial.expert_parallel.expert_groups``
builds them. tests/test_charts_timeline_mesh_scaling.py holds both in agreement with torch.
"""
from __future__ import annotations

from workbench.scenario.types import Parallel

GROUP_KINDS = ("tp", "cp", "dp", "pp", "ep", "edp")


def _check_rank(parallel: Parallel, rank: int) -> None:
    if not 0 <= rank < parallel.world:
        raise ValueError(f"rank {rank} is outside 0..{parallel.world - 1}")


def _rank(parallel: Parallel, pp: int, dp: int, cp: int, tp: int) -> int:
    return ((pp * parallel.dp + dp) * parallel.cp + cp) * parallel.tp + tp


def coords_of(parallel: Parallel, rank: int) -> dict[str, int]:
    """Rank ``rank``'s mesh indices: ``{"rank", "pp", "dp", "cp", "tp"}``."""
    _check_rank(parallel, rank)
    return _coords(parallel, rank)


def _coords(parallel: Parallel, rank: int) -> dict[str, int]:
    rest, tp = divmod(rank, parallel.tp)
    rest, cp = divmod(rest, parallel.cp)
    pp, dp = divmod(rest, parallel.dp)
    return {"rank": rank, "pp": pp, "dp": dp, "cp": cp, "tp": tp}


def rank_coords(parallel: Parallel) -> list[dict[str, int]]:
    """Every rank's mesh indices, in rank order (entry i is rank i): ``{"rank", "pp", "dp",
    "cp", "tp"}`` in the mesh order (pp, dp, cp, tp), TP innermost."""
    return [_coords(parallel, r) for r in range(parallel.world)]


def groups_of(parallel: Parallel, rank: int) -> dict[str, list[int]]:
    """The ranks sharing each process group with ``rank``, sorted, ``rank`` included:

    - ``tp``, ``cp``, ``dp``, ``pp``: the mesh dimension's group (the other indices fixed);
    - ``ep``: the expert-parallel group, ``ep`` consecutive ranks of the flattened dp x cp
      index (same pp and tp);
    - ``edp``: the expert-data-parallel group, the ranks of the same dp x cp slice whose
      position within their EP group equals this rank's (they hold the same experts).

    A degree of 1 gives a one-rank group. With ``ep == 1`` the ``edp`` group is the whole
    dp x cp slice (the group FSDP2 shards dense weights over)."""
    c = coords_of(parallel, rank)
    p, d, cc, t = c["pp"], c["dp"], c["cp"], c["tp"]
    par = parallel
    out = {
        "tp": [_rank(par, p, d, cc, x) for x in range(par.tp)],
        "cp": [_rank(par, p, d, x, t) for x in range(par.cp)],
        "dp": [_rank(par, p, x, cc, t) for x in range(par.dp)],
        "pp": [_rank(par, x, d, cc, t) for x in range(par.pp)],
    }
    # The flattened dp x cp index (dp outer, cp inner, as in the (pp, dp, cp, tp) mesh).
    dc, ep = d * par.cp + cc, par.ep
    slice_ranks = [_rank(par, p, x // par.cp, x % par.cp, t) for x in range(par.dp * par.cp)]
    g0 = dc // ep * ep
    out["ep"] = slice_ranks[g0:g0 + ep]
    out["edp"] = slice_ranks[dc % ep::ep]
    return {k: sorted(out[k]) for k in GROUP_KINDS}


def node_of(rank: int, gpus_per_node: int) -> int:
    """The node holding global rank ``rank`` when ranks fill nodes in order (torchrun's
    ``--node-rank`` x ``--nproc-per-node`` numbering)."""
    if gpus_per_node < 1:
        raise ValueError("gpus_per_node must be at least 1")
    return rank // gpus_per_node
