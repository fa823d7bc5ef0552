"""Random scenarios built from the rules: most are valid by construction and must be accepted
and estimated with sound figures; the rest break exactly one rule on purpose and must be
refused naming that field.

Invariants on every valid scenario: finite, non-negative memory figures, the worst GPU at
least every pipeline rank; a positive, finite step time, throughput and MFU; and per-GPU
model-state bytes that never grow with more sharding (a higher ZeRO stage, twice the data
parallelism under ZeRO) or more model parallelism (twice the TP or PP degree on twice the GPUs).
"""
from __future__ import annotations

import copy
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.catalog import GPUS, MODELS
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.scenario import parse_scenario
from workbench.scenario.rules import min_microbatches

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev")


def _divisors(n: int, within=(1, 2, 4, 8)) -> list[int]:
    return [d for d in within if n % d == 0]


@st.composite
def _model(draw) -> dict:
    """A preset, or a shape whose widths the rules accept (hidden = heads x head size)."""
    if draw(st.booleans()):
        return {"preset": draw(st.sampled_from(sorted(MODELS)))}
    heads = draw(st.sampled_from([4, 8, 16, 32]))
    doc = {"layers": draw(st.integers(1, 48)), "heads": heads,
           "kv_heads": draw(st.sampled_from(_divisors(heads, (1, 2, 4, 8, 16, 32)))),
           "hidden": heads * draw(st.sampled_from([16, 32, 64, 128])),
           "ffn_hidden": draw(st.sampled_from([256, 688, 1024, 11008])),
           "vocab": draw(st.integers(1, 100_000)),
           "mlp": draw(st.sampled_from(["swiglu", "gelu"])),
           "tied_embeddings": draw(st.booleans())}
    if draw(st.integers(0, 3)) == 0:
        experts = draw(st.sampled_from([4, 8, 16]))
        doc["moe"] = {"experts": experts, "top_k": draw(st.integers(1, experts)),
                      "expert_ffn_hidden": draw(st.sampled_from([128, 256, 512])),
                      "shared_experts": draw(st.integers(0, 1)),
                      "dense_layers": draw(st.integers(0, doc["layers"]))}
    return doc


def _shape(model: dict):
    """The resolved shape of a model document (presets from the catalog)."""
    return parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                           "model": model}).model


@st.composite
def valid_docs(draw) -> dict:
    """A scenario every rule accepts: each degree drawn from what the rules allow."""
    model = draw(_model())
    m = _shape(model)
    width = math.gcd(m.heads, m.kv_heads, m.ffn_hidden,
                     m.moe.expert_ffn_hidden if m.moe else m.ffn_hidden)
    tp = draw(st.sampled_from(_divisors(width)))
    schedule = draw(st.sampled_from(SCHEDULES))
    v = draw(st.sampled_from([2, 3])) if schedule in ("interleaved-1f1b", "zero-bubble") else 1
    chunks = 2 if schedule == "dualpipev" else v
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if p == 1 or p * chunks <= m.layers]))
    if pp == 1:
        schedule, v = "1f1b", 1
    cp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    ep = draw(st.sampled_from(_divisors(math.gcd(dp * cp, m.moe.experts)))) if m.moe else 1
    zero = draw(st.sampled_from([z for z in (0, 1, 2, 3)
                                 if not (z == 2 and pp > 1 and dp * cp > 1)]))
    parallel = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "zero": zero,
                "pp_schedule": schedule, "virtual_stages": v,
                "sequence_parallel": draw(st.booleans())}
    if zero and draw(st.integers(0, 3)) == 0:
        parallel["shard_group"] = draw(st.sampled_from(_divisors(dp * cp, (1, 2, 4, 8, 16, 32))))
    world = dp * tp * pp * cp
    per_node = draw(st.sampled_from(_divisors(world, (1, 2, 4, 8))))
    gpu = draw(st.sampled_from(sorted(GPUS)))
    precisions = ["fp32", "fp16", "bf16"] + (["fp8"] if GPUS[gpu].fp8_tflops > 0 else [])
    micro_batch = draw(st.sampled_from([1, 2, 4]))
    need = min_microbatches(schedule, pp)
    microbatches = need * draw(st.integers(1, 4))
    training = {"seq_len": draw(st.sampled_from([128, 512, 2048, 8192])),
                "micro_batch": micro_batch, "global_batch": micro_batch * dp * microbatches,
                "precision": draw(st.sampled_from(precisions)),
                "recompute": draw(st.sampled_from(["none", "selective", "full"])),
                "attention": draw(st.sampled_from(["flash2", "flash3", "cudnn", "eager"])),
                "offload": draw(st.sampled_from(["none", "cpu", "nvme"])) if zero else "none"}
    hardware = {"gpu": gpu, "gpus_per_node": per_node, "nodes": world // per_node}
    return {"hardware": hardware, "model": model, "parallel": parallel, "training": training}


def _break(doc: dict, how: str) -> tuple[dict, str] | None:
    """``doc`` with one rule or field broken, and the field the refusal must name (None when
    this scenario cannot be broken that way)."""
    d = copy.deepcopy(doc)
    par, tr, hw = d["parallel"], d["training"], d["hardware"]
    if how == "world":
        par["dp"] += 1
        tr["global_batch"] *= par["dp"]
        return d, "parallel"
    if how == "tp_width":
        m = _shape(d["model"])
        par["tp"] = m.heads + 1 if m.heads + 1 <= 1024 else 1023
        hw["nodes"] = par["dp"] * par["tp"] * par["pp"] * par["cp"]
        hw["gpus_per_node"] = 1
        return d, "parallel.tp"
    if how == "global_batch":
        if tr["micro_batch"] * par["dp"] == 1:
            return None
        tr["global_batch"] += 1
        return d, "training.global_batch"
    if how == "ep_dense":
        if _shape(d["model"]).moe is not None:
            return None
        par["ep"] = 2
        return d, "parallel.ep"
    if how == "virtual_stages":
        if par["pp"] == 1:
            return None
        par["pp_schedule"], par["virtual_stages"] = "1f1b", 2
        return d, "parallel.virtual_stages"
    if how == "seq_split":
        if par["cp"] == 1:
            return None
        tr["seq_len"] += 1
        return d, "training.seq_len"
    if how == "unknown_key":
        par["degree"] = 2
        return d, "parallel.degree"
    if how == "bad_choice":
        tr["precision"] = "fp9"
        return d, "training.precision"
    if how == "bad_number":
        hw["gpus_per_node"] = "eight"
        return d, "hardware.gpus_per_node"
    if how == "no_layers":
        d["model"] = {**d["model"], "layers": 0}
        return d, "model.layers"
    raise AssertionError(how)


BREAKS = ("world", "tp_width", "global_batch", "ep_dense", "virtual_stages", "seq_split",
          "unknown_key", "bad_choice", "bad_number", "no_layers")
# three valid scenarios for each broken one
CASES = st.tuples(valid_docs(), st.sampled_from((None,) * 3 * len(BREAKS) + BREAKS))


def _states(est) -> list[float]:
    """Model-state bytes per GPU of every pipeline rank."""
    return [g.memory.params + g.memory.grads + g.memory.optimizer for g in est.memory.per_stage]


def _variant(doc: dict, **changes) -> dict:
    d = copy.deepcopy(doc)
    for path, value in changes.items():
        section, key = path.split("__")
        d[section][key] = value
    return d


COMPARED = {"zero": 0, "dp": 0, "tp": 0, "pp": 0}


def _no_more_states(est, doc: dict, what: str) -> bool:
    """The variant ``doc``, when the rules accept it, holds no more state bytes per GPU on its
    worst pipeline rank than ``est`` does."""
    try:
        other = estimate(parse_scenario(doc))
    except ScenarioError:
        return True
    COMPARED[what] += 1
    return max(_states(other)) <= max(_states(est)) * (1 + 1e-12)


def _check_valid(doc: dict) -> None:
    s = parse_scenario(doc)            # valid by construction: a refusal is a bug
    est = estimate(s)
    values = list(est.memory.per_gpu.as_dict().values())
    for g in est.memory.per_stage:
        values += list(g.memory.as_dict().values()) + [g.host, g.nvme]
    values += [est.memory.host_per_node, est.memory.nvme_per_node]
    assert all(math.isfinite(v) and v >= 0 for v in values), values
    assert est.memory.per_gpu.total >= max(g.memory.total for g in est.memory.per_stage) - 1e-6
    t, r = est.time, est.run
    assert math.isfinite(t.step) and t.step > 0
    assert all(math.isfinite(x) and x >= 0 for x in (t.compute, t.recompute, t.bubble,
                                                     t.optimizer, t.offload,
                                                     *t.comm_exposed.values()))
    assert math.isfinite(r.tokens_per_s) and r.tokens_per_s > 0 and 0 <= r.mfu < math.inf
    par, hw, tr = doc["parallel"], doc["hardware"], doc["training"]
    if par["zero"] < 3:
        assert _no_more_states(est, _variant(doc, parallel__zero=par["zero"] + 1), "zero")
    if par["zero"] >= 1 and "shard_group" not in par:
        assert _no_more_states(est, _variant(
            doc, parallel__dp=2 * par["dp"], hardware__nodes=2 * hw["nodes"],
            training__global_batch=2 * tr["global_batch"]), "dp")
    assert _no_more_states(est, _variant(doc, parallel__tp=2 * par["tp"],
                                         hardware__nodes=2 * hw["nodes"]), "tp")
    assert _no_more_states(est, _variant(
        doc, parallel__pp=2 * par["pp"], hardware__nodes=2 * hw["nodes"],
        training__global_batch=2 * tr["global_batch"]), "pp")


def test_random_scenarios_are_estimated_soundly_or_refused_naming_the_field():
    seen = {"valid": 0, "broken": 0}
    COMPARED.update(dict.fromkeys(COMPARED, 0))

    @settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(CASES)
    def run(case):
        doc, how = case
        if how is not None:
            broken = _break(doc, how)
            if broken is not None:
                bad, path = broken
                try:
                    parse_scenario(bad)
                except ScenarioError as err:
                    assert all(p.path and p.message and "\n" not in str(p)
                               for p in err.problems)
                    assert path in {p.path for p in err.problems}, (how, err.problems)
                else:
                    raise AssertionError(f"{how}: accepted {bad}")
                seen["broken"] += 1
                return
        _check_valid(doc)
        seen["valid"] += 1

    run()
    total = seen["valid"] + seen["broken"]
    print(f"{seen['valid']} valid scenarios estimated, {seen['broken']} broken ones refused; "
          f"state bytes compared with more sharding / parallelism: {COMPARED}")
    assert seen["valid"] >= total / 2 and seen["broken"] >= total / 20
    # the monotonicity checks ran on a good share of the valid scenarios, each kind
    assert all(n >= seen["valid"] / 10 for n in COMPARED.values()), COMPARED


def test_the_zero_stage_lookup_equals_isin():
    """The ZeRO-stage lookup of the rule table and the peak phases (``scenario.types.zero_in``)
    is ``np.isin`` for scalars, stage arrays and arrays holding stages it does not know."""
    import numpy as np

    from workbench.scenario.types import zero_in

    rng = np.random.default_rng(0)
    for stages in ((), (0,), (3,), (1, 2), (0, 1, 2, 3), (2, 7)):
        for z in (rng.integers(0, 4, 50), rng.integers(-2, 9, 50), np.array([], dtype=int)):
            assert (np.asarray(zero_in(z, stages)) == np.isin(z, stages)).all()
        for z in range(-1, 6):
            assert bool(zero_in(z, stages)) == bool(np.isin(z, stages))
