"""The engine and its switches (contract 1 additions): what each engine accepts, what each
switch changes in the estimate, the three memory figures, the error band, and the planner's
search over switches."""
from __future__ import annotations

import dataclasses

import pytest

from workbench.engines import ENGINES
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.memory.device import communicators
from workbench.estimate.memory.device import device_terms
from workbench.plan import Constraints, plan
from workbench.plan.explain import switch_lines
from workbench.scenario import parse_scenario


def doc(training=None, parallel=None, model="llama3-8b", nodes=1, gpu="h100-sxm"):
    return {"hardware": {"gpu": gpu, "gpus_per_node": 8, "nodes": nodes},
            "model": {"preset": model},
            "parallel": {"dp": 8, "zero": 3, **(parallel or {})},
            "training": {"seq_len": 8192, "global_batch": 64, **(training or {})}}


def problems(d) -> list[str]:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(d)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


def test_generic_offers_no_switch_and_each_refusal_names_the_field():
    assert ENGINES["generic"].switches == ()
    msgs = problems(doc({"compile": True}))
    assert msgs == ["training.compile: engine generic does not offer it (its switches: none); "
                    "pick another training.engine"]
    assert problems(doc(parallel={"dp": 4, "tp": 2, "async_tp": True}))[0].startswith(
        "parallel.async_tp: engine generic does not offer it")
    assert problems(doc({"recompute": "op"})) == [
        "training.recompute: engine generic offers none, selective, full (op is torchtitan's "
        "per-op selective checkpointing)"]


def test_an_unknown_engine_lists_the_engines():
    msgs = problems(doc({"engine": "jax"}))
    assert msgs == ["training.engine: must be one of generic, megatron, torchtitan, deepspeed, "
                    "fsdp, nanotron, torchtune, hf, litgpt"]


def test_fp8_recipe_needs_fp8_and_one_the_engine_offers():
    assert problems(doc({"engine": "torchtitan", "fp8_recipe": "rowwise"})) == [
        "training.fp8_recipe: needs training.precision fp8 (got bf16)"]
    assert problems(doc({"engine": "megatron", "precision": "fp8", "fp8_recipe": "rowwise"},
                        {"zero": 1})) == [
        "training.fp8_recipe: engine megatron offers "
        + ", ".join(ENGINES["megatron"].fp8_recipes)]


def test_engine_zero_stages_are_a_layout_rule():
    msgs = problems(doc({"engine": "nanotron"}, {"zero": 3}))
    assert msgs == ["parallel.zero: engine nanotron offers zero 0, 1"]


def test_generic_attention_default_and_engine_attention_default():
    assert parse_scenario(doc()).training.attention == "flash2"
    s = parse_scenario(doc({"engine": "megatron"}, {"zero": 1}))
    assert s.training.attention == ENGINES["megatron"].attention
    s = parse_scenario(doc({"engine": "megatron", "attention": "flash2"}, {"zero": 1}))
    assert s.training.attention == "flash2"


def test_compile_fuses_the_eager_elementwise_work_and_its_saved_activations():
    for recompute in ("none", "op"):
        tr = {"engine": "torchtitan", "recompute": recompute}
        eager = estimate(parse_scenario(doc(tr)))
        compiled = estimate(parse_scenario(doc({**tr, "compile": True})))
        assert compiled.time.step < eager.time.step
        e, c = eager.memory.per_gpu, compiled.memory.per_gpu
        # fewer saved activations (the silu output, the norms' fp32 copies ...), nothing else
        assert c.activations < e.activations
        assert (c.params, c.grads, c.optimizer, c.buffers) == (e.params, e.grads, e.optimizer,
                                                                e.buffers)
    assert ENGINES["torchtitan"].elementwise_traffic > 1 and ENGINES["torchtitan"].eager_activations
    terms_e = eager.to_dict()["memory"]["activation_terms_per_layer"]
    terms_c = compiled.to_dict()["memory"]["activation_terms_per_layer"]
    assert sum(terms_c.values()) < sum(terms_e.values())


def test_async_tp_hides_tp_collectives_behind_the_gemms():
    par = {"dp": 4, "tp": 2}
    sync = estimate(parse_scenario(doc({"engine": "torchtitan"}, par)))
    overlapped = estimate(parse_scenario(doc({"engine": "torchtitan"}, {**par,
                                                                       "async_tp": True})))
    assert sync.time.comm_exposed["tp"] > 0
    assert overlapped.time.comm_exposed["tp"] < sync.time.comm_exposed["tp"]
    assert overlapped.time.step < sync.time.step
    assert overlapped.memory.per_gpu.total == sync.memory.per_gpu.total


def test_op_recompute_saves_less_than_none_and_more_than_full():
    runs = {rc: estimate(parse_scenario(doc({"engine": "torchtitan", "recompute": rc})))
            for rc in ("none", "op", "full")}
    act = {rc: e.memory.per_gpu.activations for rc, e in runs.items()}
    rec = {rc: e.time.recompute for rc, e in runs.items()}
    assert act["full"] < act["op"] < act["none"]
    assert rec["none"] == 0 < rec["op"] < rec["full"]


def test_op_saved_tensors_of_a_llama_layer():
    from workbench.estimate.memory import activations as act
    s = parse_scenario(doc({"engine": "torchtitan", "recompute": "op", "micro_batch": 1}))
    x = act.activation_shape(s.training, s.parallel)
    m = s.model
    terms = act.op_saved_terms(m, x, moe_layer=False)
    sb, h, q, kv = 8192, m.hidden, m.heads * m.dim_per_head, m.kv_dim
    assert terms == {"block_input": sb * h * 2, "wq_out": sb * q * 2, "wv_out": sb * kv * 2,
                     "attn_out": sb * q * 2, "softmax_lse": sb * m.heads * 4,
                     "fc1_out": sb * m.ffn_hidden * 2, "fc2_out": sb * h * 2}


def test_fp8_recipe_changes_the_step():
    base = {"engine": "torchtitan", "precision": "fp8", "compile": True}
    # on a B200: MXFP8 runs on Blackwell only (the rule table's engine_numerics)
    steps = {r: estimate(parse_scenario(doc({**base, "fp8_recipe": r}, gpu="b200"))).time.step
             for r in ENGINES["torchtitan"].fp8_recipes}
    rates = {r: ENGINES["torchtitan"].fp8_recipes[r].gemm_rate for r in steps}
    slowest_rate = min(rates, key=rates.get)
    assert steps[slowest_rate] > steps["tensorwise"]


def test_three_memory_figures_and_fit_judged_on_the_device():
    """Reserved holds FSDP2's sharded gradients cached on the reduce-scatter stream where they
    are not alive at the peak (one microbatch: ``zero_grad(set_to_none)`` freed them before
    the forward); accumulating microbatches keeps them alive, and nothing is cached then."""
    e = estimate(parse_scenario(doc({"engine": "torchtitan", "global_batch": 8})))
    g = e.memory.per_gpu
    assert g.total < g.reserved < g.device
    assert g.reserved == pytest.approx(g.phases[g.peak_phase] + g.grads, rel=1e-12)
    assert g.device_least == pytest.approx(g.device - g.reserved + g.total, rel=1e-12)
    many = estimate(parse_scenario(doc({"engine": "torchtitan"}))).memory.per_gpu
    assert many.reserved == many.total and many.device_least == many.device
    out = e.to_dict()["memory"]["per_gpu"]
    assert out["reserved"] == g.reserved and out["device"] == g.device
    # the fit reads the device figure and the least it could need (the allocator's cache freed)
    # with the memory band: between them the answer is "tight", below the least a failure
    band = e.memory.band
    assert band is not None and e.memory.gpu_fit == "pass"
    squeezed = dataclasses.replace(e.memory, capacity=(g.total + g.device) / 2)
    assert squeezed.gpu_fit == "tight" and squeezed.fits
    short = dataclasses.replace(e.memory, capacity=g.device_least / (1 + band["q90"]) * 0.99)
    assert short.gpu_fit == "fail" and not short.fits


def test_generic_keeps_its_allowance_in_total_and_reserved_equals_total():
    e = estimate(parse_scenario(doc()))
    g = e.memory.per_gpu
    assert g.reserved == g.total
    assert g.device == pytest.approx(g.total + sum(device_terms(
        "hopper", [(8, False)]).values()))
    assert "allocator_allowance" in e.memory.worst.buffers


def test_communicators_of_a_layout():
    s = parse_scenario(doc(parallel={"dp": 2, "tp": 2, "pp": 2}))
    groups = [(int(n), bool(c)) for n, c in communicators(s.parallel, 8) if int(n) > 1]
    assert groups == [(2, False), (2, False), (2, False), (2, False)]   # dp, tp, two pp peers


def test_moe_parallel_folding_takes_ep_from_tp_ranks():
    d = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
         "model": {"preset": "mixtral-8x7b"},
         "parallel": {"dp": 4, "tp": 4, "ep": 8, "zero": 1},
         "training": {"engine": "megatron", "seq_len": 4096, "global_batch": 64}}
    assert problems(d)[0].startswith("parallel.ep: must divide dp*cp = 4")
    d["parallel"]["expert_tp"] = 1
    s = parse_scenario(d)
    assert s.parallel.expert_data_parallel == 2     # 4 * 4 / (1 * 8)
    folded = estimate(s)
    d["parallel"].update(ep=4, expert_tp=None)
    plain = estimate(parse_scenario(d))
    # each GPU holds 8/8 = 1 whole expert (etp 1) instead of 8/4 = 2 experts split over tp 4
    assert folded.memory.worst.expert_params == pytest.approx(
        plain.memory.worst.expert_params * 2)


def test_the_estimate_carries_its_engine_error_band():
    e = estimate(parse_scenario(doc({"engine": "megatron"}, {"zero": 1})))
    band = e.error_band
    assert band["group"] == "megatron/dense" and band["kind"] == "in-sample"
    assert band["runs"] >= 20 and 0 < band["median"] < band["p90"]
    assert e.to_dict()["time"]["error_band"] == band
    from workbench.render.text import render_estimate
    assert (f"half of {band['runs']} published megatron dense runs within {band['median']:.0%}, "
            f"nine in ten within {band['p90']:.0%}; in-sample") in render_estimate(e)


def test_the_band_comes_from_the_narrowest_group_of_twenty_runs(monkeypatch):
    from workbench.engines import accuracy as et

    def b(runs, median):
        return {"runs": runs, "median": median, "p90": 2 * median, "kind": "in-sample"}
    bands = {"megatron/moe": b(19, 0.3), "megatron": b(40, 0.2), "moe": b(60, 0.25),
             "torchtitan/dense": b(20, 0.1), "fine-tuning": b(25, 0.15), "all": b(400, 0.14)}
    monkeypatch.setattr(et, "measured", lambda path: {"bands": bands})
    assert et.error_band("megatron", True) == {"group": "megatron", **bands["megatron"]}
    assert et.error_band("torchtitan", False)["group"] == "torchtitan/dense"
    assert et.error_band("torchtitan", True)["group"] == "moe"
    assert et.error_band("hf", False, "lora")["group"] == "fine-tuning"
    assert et.error_band("deepspeed", False)["group"] == "all"
    monkeypatch.setattr(et, "measured", lambda path: {})
    assert et.error_band("megatron", False) is None


def test_the_planner_keeps_dominant_switches_on_and_says_what_they_buy():
    s = parse_scenario({**doc({"engine": "torchtitan"}), "parallel": {}},
                       layout_required=False)
    r = plan(s, Constraints(fixed={"tp": 2}))
    best = r.table.iloc[0]
    assert best["engine"] == "torchtitan" and best["compile"] and best["async_tp"]
    top = r.scenario_of(1)
    assert top.training.compile and top.parallel.async_tp
    lines = switch_lines(estimate(top))
    assert any(line.startswith("switch compile on:") for line in lines)
    assert any(line.startswith("switch async_tp on:") for line in lines)
    off = plan(s, Constraints(fixed={"tp": 2, "compile": False}))
    assert not off.table["compile"].any()


def test_the_planner_searches_engines_when_asked():
    s = parse_scenario({**doc(), "parallel": {}}, layout_required=False)
    r = plan(s, Constraints(engines=("generic", "torchtitan")))
    assert set(r.table["engine"]) == {"generic", "torchtitan"}
    assert r.counts["settings"] == 2          # bf16: one switch setting per engine
    from workbench.render.text import settings_text
    assert settings_text(r.counts) == " (over 2 engine/switch settings)"
    with pytest.raises(ScenarioError, match="engines"):
        Constraints(engines=("jax",))
    # "all" compares the stacks people run; generic, the idealised one, only when named
    assert Constraints.parse(engines="all").engines == (
        "megatron", "torchtitan", "deepspeed", "fsdp", "nanotron", "torchtune", "hf", "litgpt")


def test_a_trial_runs_the_plain_pytorch_of_the_layout():
    from workbench.trial.shrink import trial_scenario
    s = parse_scenario(doc({"engine": "torchtitan", "compile": True}, {"dp": 4, "tp": 2,
                                                                       "async_tp": True}))
    t = trial_scenario(dataclasses.replace(s))
    assert t.training.engine == "generic" and not t.training.compile
    assert not t.parallel.async_tp


def test_tp_comm_overlap_is_megatrons_switch_and_needs_tp_and_sequence_parallel():
    bad = doc({"engine": "megatron"}, {"dp": 4, "tp": 2, "zero": 1, "tp_comm_overlap": True,
                                       "sequence_parallel": False})
    assert problems(bad) == [
        "parallel.tp_comm_overlap: validate_args: --tp-comm-overlap needs --sequence-parallel"]
    assert problems(doc({"engine": "megatron"}, {"zero": 1, "tp_comm_overlap": True})) == [
        "parallel.tp_comm_overlap: overlaps tensor-parallel communication: needs "
        "parallel.tp > 1 (got tp 1); set it false"]
    # torchtitan's overlap is async TP (parallel.async_tp); Megatron's is not
    assert problems(doc({"engine": "torchtitan", "recompute": "op"},
                        {"dp": 4, "tp": 2, "tp_comm_overlap": True}))[0].startswith(
        "parallel.tp_comm_overlap: engine torchtitan does not offer it")
    assert problems(doc({"engine": "megatron"}, {"dp": 4, "tp": 2, "zero": 1,
                                                 "async_tp": True}))[0].startswith(
        "parallel.async_tp: engine megatron does not offer it")
    # nanotron's column-parallel overlap runs without SP
    parse_scenario(doc({"engine": "nanotron"}, {"dp": 4, "tp": 2, "zero": 1, "async_tp": True,
                                                "sequence_parallel": False}))
    parse_scenario(doc({"engine": "megatron"}, {"dp": 4, "tp": 2, "zero": 1,
                                                "tp_comm_overlap": True}))


def test_torchtitan_layouts_are_ones_torchtitan_runs():
    """0.2.x: SP whenever TP is on; DDP only as the whole mesh; ZeRO-2 exported as FSDP2
    without resharding after forward."""
    from workbench.export import export
    assert problems(doc({"engine": "torchtitan", "recompute": "op"},
                        {"dp": 4, "tp": 2, "sequence_parallel": False})) == [
        "parallel.sequence_parallel: torchtitan 0.2.x always applies sequence parallelism "
        "with TP (0.3.0 has parallelism.enable_sequence_parallel); set "
        "parallel.sequence_parallel true"]
    assert problems(doc({"engine": "torchtitan", "recompute": "op"},
                        {"dp": 4, "tp": 2, "zero": 0})) == [
        "parallel.zero: torchtitan applies DDP only to pure data parallelism (it uses FSDP "
        "whenever CP is on and raises 'DDP has not supported > 1D parallelism' otherwise); "
        "use zero 3"]
    parse_scenario(doc({"engine": "torchtitan", "recompute": "op"}, {"zero": 0}))
    s = parse_scenario({**doc({"engine": "torchtitan", "recompute": "op"}), "parallel": {}},
                       layout_required=False)
    t = plan(s, Constraints()).table
    assert t["sequence_parallel"][t["tp"] > 1].all()
    assert not ((t["zero"] == 0) & (t["tp"] * t["pp"] * t["cp"] * t["ep"] > 1)).any()
    z2 = parse_scenario(doc({"engine": "torchtitan", "recompute": "op"}, {"zero": 2}))
    text = str(export(z2, "torchtitan"))
    assert 'fsdp_reshard_after_forward = "never"' in text
    assert "data_parallel_shard_degree = 8" in text


def test_layer_checkpointing_keeps_one_block_in_k_as_its_input():
    """torchtitan's selective_ac_option = k: every k-th block checkpointed whole, the others
    keep everything; memory and recompute time lie between none and full in proportion."""
    est = {r: estimate(parse_scenario(doc({"engine": "torchtitan", "recompute": r})))
           for r in ("none", "full")}
    for k in (1, 2, 4):
        lay = estimate(parse_scenario(doc({"engine": "torchtitan", "recompute": "layer",
                                           "recompute_every": k})))
        a = {r: e.memory.per_gpu.activations for r, e in est.items()}
        # full's working set (one layer rebuilt in its backward) is held under layer too
        assert a["full"] <= lay.memory.per_gpu.activations <= a["none"]
        rc = {r: e.time.recompute for r, e in est.items()}
        # Llama 3 8B: 32 layers, floor(32 / k) checkpointed (k = 1, 2, 4 divide 32)
        assert lay.time.recompute == pytest.approx(rc["full"] / k, rel=1e-9)
    from workbench.estimate.memory.activations import checkpointed_fraction
    assert checkpointed_fraction(parse_scenario(doc()).model, 3) == 10 / 32
    one = estimate(parse_scenario(doc({"engine": "torchtitan", "recompute": "layer",
                                       "recompute_every": 1})))
    assert one.memory.per_gpu.activations == pytest.approx(
        est["full"].memory.per_gpu.activations, rel=1e-9)


def test_layer_checkpointing_is_offered_where_the_engine_has_it_and_bounded_by_the_layers():
    assert problems(doc({"engine": "nanotron", "recompute": "layer"}, {"zero": 1})) == [
        "training.recompute: engine nanotron offers none, full (layer: one block in "
        "training.recompute_every checkpointed whole)"]
    msgs = problems(doc({"engine": "torchtitan", "recompute": "layer",
                         "recompute_every": 1000}))
    assert msgs and msgs[0].startswith("training.recompute_every: checkpoints every k-th block")


def test_layer_checkpointing_exports_as_torchtitans_integer_option():
    from workbench.export import export
    s = parse_scenario(doc({"engine": "torchtitan", "recompute": "layer",
                            "recompute_every": 3}))
    text = export(s, "torchtitan")
    assert 'mode = "selective"' in text and 'selective_ac_option = "3"' in text
    meg = parse_scenario(doc({"engine": "megatron", "recompute": "layer", "recompute_every": 4},
                             {"zero": 1}))
    args = export(meg, "megatron")
    assert "--recompute-method block" in args and "--recompute-num-layers 8" in args


def test_deepspeed_refuses_zero3_with_pipelining():
    msgs = problems(doc({"engine": "deepspeed"}, {"zero": 3, "pp": 2, "dp": 4}))
    assert any(m.startswith("parallel.zero: DeepSpeed's PipelineEngine refuses it") for m in msgs)
