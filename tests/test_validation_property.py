"""Thousands of random scenarios: each is rejected with a clear message or yields finite,
non-negative memory figures."""
from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.catalog import GPUS, LINKS, MODELS
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.spec import parse_scenario

small = st.sampled_from([1, 2, 4, 8])
anything = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**7), st.floats(allow_nan=True),
                     st.text(max_size=6))


def _maybe(strategy):
    return st.one_of(strategy, anything)


scenarios = st.fixed_dictionaries(
    {
        "hardware": st.fixed_dictionaries({
            "gpu": _maybe(st.sampled_from(sorted(GPUS))),
            "gpus_per_node": _maybe(small),
            "nodes": _maybe(st.sampled_from([1, 2, 4, 16])),
            "intra_node": st.sampled_from(sorted(LINKS)),
        }),
        "model": st.one_of(
            st.fixed_dictionaries({"preset": _maybe(st.sampled_from(sorted(MODELS)))}),
            st.fixed_dictionaries({
                "layers": _maybe(st.integers(1, 64)), "hidden": st.sampled_from([64, 128, 4096]),
                "heads": st.sampled_from([1, 4, 8, 32]), "kv_heads": st.sampled_from([1, 2, 4, 8]),
                "ffn_hidden": st.sampled_from([128, 344, 11008]), "vocab": _maybe(st.integers(1, 10**5)),
                "mlp": _maybe(st.sampled_from(["swiglu", "gelu"])),
            }),
        ),
        "parallel": st.fixed_dictionaries({
            "dp": _maybe(st.sampled_from([1, 2, 4, 8, 16, 32])), "tp": small, "pp": small,
            "cp": st.sampled_from([1, 2]), "ep": st.sampled_from([1, 2, 8]),
            "zero": _maybe(st.sampled_from([0, 1, 2, 3])),
            "pp_schedule": st.sampled_from(["gpipe", "1f1b", "interleaved-1f1b", "zero-bubble",
                                            "dualpipev"]),
            "virtual_stages": st.sampled_from([1, 2]),
            "sequence_parallel": st.booleans(),
        }),
        "training": st.fixed_dictionaries({
            "seq_len": _maybe(st.sampled_from([128, 2048, 8192])),
            "micro_batch": st.sampled_from([1, 2, 4]),
            "global_batch": st.sampled_from([8, 64, 256, 1000]),
            "precision": _maybe(st.sampled_from(["fp32", "bf16", "fp16", "fp8"])),
            "recompute": st.sampled_from(["none", "selective", "full"]),
            "offload": st.sampled_from(["none", "cpu", "nvme"]),
            "attention": st.sampled_from(["flash2", "flash3", "cudnn", "eager"]),
        }),
    }
)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_random_scenarios_are_rejected_clearly_or_estimated(doc):
    try:
        s = parse_scenario(doc)
    except ScenarioError as err:
        assert err.problems
        for p in err.problems:
            assert p.path and p.message and "\n" not in str(p)
        return
    est = estimate(s)
    values = list(est.memory.per_gpu.as_dict().values())
    for g in est.memory.per_stage:
        values += list(g.memory.as_dict().values()) + [g.host, g.nvme]
    values += [est.memory.host_per_node, est.memory.nvme_per_node]
    assert all(math.isfinite(v) and v >= 0 for v in values)
    assert est.memory.per_gpu.total >= max(g.memory.total for g in est.memory.per_stage) - 1e-6
