"""The widget layer driven from Python: panels write the scenario, the backend's numbers reach
the charts, invalid input shows the validator's message by the field and keeps the charts, a
live trial streams into its charts and can be cancelled, the planner loads and exports."""
from __future__ import annotations

import re
import time

import psutil
import pytest
import yaml

from tests.conftest import ROOT, upstream
from widgets.charts.labels import band_words
from widgets.charts.memory import GIB, MemoryChart
from widgets.charts.step_time import StepTimeChart, step_terms
from widgets.panels.base import NULL, chosen
from widgets.panels.hardware import HardwarePanel
from widgets.panels.model import ModelPanel
from widgets.panels.parallel import ParallelPanel
from widgets.panels.training import TrainingPanel
from widgets.state import ScenarioState
from workbench.estimate import estimate
from workbench.scenario import load_scenario
from workbench.units import memory_text


def _state(name: str = "llama3-8b-8xh100") -> ScenarioState:
    return ScenarioState(yaml.safe_load((ROOT / f"examples/{name}.yaml").read_text()))


def _wired(state: ScenarioState):
    charts = (MemoryChart(), StepTimeChart())

    def draw(s):
        for c in charts:
            c.update(s.estimate)

    state.on_change(draw)
    draw(state)
    return charts


def test_hardware_panel_gpu_count_reaches_the_charts_with_dp_refilled():
    st = _state()
    hw, par = HardwarePanel(st), ParallelPanel(st)
    mem, step = _wired(st)
    hw.nodes.value = 2                                   # 16 GPUs: dp fills them
    assert st.valid and st.scenario.hardware.world == 16 and st.scenario.parallel.dp == 16
    expected = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml",
                                      ["hardware.nodes=2", "parallel.dp=16"]))
    assert mem.widget.data[0].y[0] == pytest.approx(expected.memory.per_gpu.params / GIB)
    assert step.widget.data[0].y[-1] == pytest.approx(expected.time.step)
    assert "16 GPUs" in par.dp.value


def test_parallel_panel_offers_valid_divisors_and_tp_changes_memory():
    st = _state()
    par = ParallelPanel(st)
    mem, _ = _wired(st)
    assert list(par.tp.options) == [1, 2, 4, 8]          # divides 8 GPUs and 32/8 heads
    acts = next(t for t in mem.widget.data if t.name == "activations")
    before = acts.y[0]                                   # rank 0
    par.tp.value = 4
    assert st.scenario.parallel.tp == 4 and st.scenario.parallel.dp == 2
    assert acts.y[0] == pytest.approx(
        st.estimate.memory.per_stage[0].memory.activations / GIB)
    assert acts.y[0] < before


def test_parallel_panel_offers_what_the_rule_table_allows():
    """The panel's choices come from the rule table: TP must divide the experts' width too,
    EP the experts and dp x cp, and an HSDP group needs ZeRO."""
    doc = yaml.safe_load((ROOT / "examples/llama3-8b-8xh100.yaml").read_text())
    doc["model"] = {"preset": "tiny-moe", "moe": {"experts": 8, "top_k": 2,
                                                  "expert_ffn_hidden": 66}}
    doc["parallel"] = {"dp": 8, "zero": 0}
    doc["training"] = {"seq_len": 256, "global_batch": 16}
    st = ScenarioState(doc)
    par = ParallelPanel(st)
    assert st.valid
    # 8 heads, 4 KV heads and ffn 128 allow tp 4; the experts' width 66 does not
    assert list(par.tp.options) == [1, 2]
    assert list(par.ep.options) == [1, 2, 4, 8]
    assert [v for _, v in par.shard.options] == [NULL]  # ZeRO 0: no HSDP group
    par.zero.value = 3
    assert [v for _, v in par.shard.options] == [NULL, 2, 4]


def test_training_panel_expert_tp_only_for_moe_models_on_engines_offering_it():
    from workbench.engines import ENGINES

    st = _state("mixtral-8x7b-ep")
    tr = TrainingPanel(st)
    assert tr.rows["expert_tp"].layout.display == "none"        # generic: no switches
    with_etp = [n for n, e in ENGINES.items() if e.offers("expert_tp")]
    without = [n for n, e in ENGINES.items() if not e.offers("expert_tp")
               and "pretrain" in e.methods]   # the scenario pre-trains
    if not with_etp:
        return
    tr.engine.value = with_etp[0]
    assert tr.rows["expert_tp"].layout.display == ""
    values = [v for _, v in tr.expert_tp.options]
    assert values[0] is NULL and tr.expert_tp.label == "same as tp"
    if len(values) > 1:
        tr.expert_tp.value = values[1]
        assert st.valid and st.scenario.parallel.expert_tp == values[1], st.problems
    if without:
        tr.engine.value = without[-1]
        assert st.valid and st.scenario.parallel.expert_tp is None, st.problems
        assert tr.rows["expert_tp"].layout.display == "none"


def test_invalid_input_shows_the_message_by_the_field_and_keeps_the_charts():
    st = _state()
    tr = TrainingPanel(st)
    mem, step = _wired(st)
    kept = (mem.widget.data[0].y, step.widget.data[0].y)
    tr.global_batch.value = 7
    assert not st.valid
    message = tr.fields["training.global_batch"][1].value
    assert "Global batch must be a multiple of micro-batch × dp = 1 × 8 = 8 (you gave 7)" in message
    assert (mem.widget.data[0].y, step.widget.data[0].y) == kept
    tr.global_batch.value = 64
    assert st.valid and tr.fields["training.global_batch"][1].value == ""


def test_the_model_panel_finds_a_model_by_part_of_its_name():
    from workbench.catalog import MODELS
    st = _state()
    mp = ModelPanel(st)
    # the browser filters the labels by what is typed; every catalog model is one of them
    assert len(mp.find.options) == len(MODELS) >= 60
    assert [o for o in mp.find.options if "gemma 2 9b" in o.lower()] == [
        "Gemma 2 9B (gemma2-9b)"]
    mp.find.value = "Gemma 2 9B (gemma2-9b)"
    assert st.scenario.model.name == "Gemma 2 9B" and mp.preset.value == "gemma2-9b"
    mp.find.value = "gemma"                  # still typing: nothing changes
    assert st.scenario.model.name == "Gemma 2 9B"


def test_model_panel_preset_and_custom_fields():
    st = _state()
    mp = ModelPanel(st)
    mp.preset.value = "mixtral-8x7b"
    assert st.scenario.model.moe is not None and mp.moe_box.layout.display == ""
    assert mp.moe_inputs["experts"].value == 8
    mp.inputs["layers"].value = 16                       # customise the preset
    assert st.scenario.model.layers == 16 and st.doc["model"]["preset"] == "mixtral-8x7b"
    mp.preset.value = "llama3-8b"                        # a new preset drops custom fields
    assert st.scenario.model.layers == 32 and mp.moe_box.layout.display == "none"


def test_memory_chart_marks_out_of_memory_ranks_and_the_capacity_line():
    est = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml"))
    chart = MemoryChart()
    chart.update(est)
    cap = est.memory.capacity / GIB
    assert list(chart.widget.data[-2].y) == pytest.approx([cap] * len(est.memory.per_stage))
    over = [f"pp rank {g.rank}" for g in est.memory.per_stage
            if g.memory.device > est.memory.capacity]        # the fit is judged on device
    assert list(chart.widget.data[-1].x) == over and over   # the brief's box does not fit
    assert "does NOT fit" in chart.widget.layout.title.text


def test_memory_chart_shows_allocated_reserved_and_device():
    """The bars add up to the allocated total; a marker per rank for the allocator's reserved
    and the device figure; the title states the device figure and says which tool shows which."""
    est = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml",
                                 ["training.engine=torchtitan", "training.recompute=op"]))
    chart = MemoryChart()
    chart.update(est)
    by_name = {t.name: t for t in chart.widget.data}
    stages = est.memory.per_stage
    # the drawn bars but the paged optimizer states (outside the allocator: not in the total)
    bars = [t for t in chart.widget.data if t.type == "bar" and len(t.y)
            and t.name != "optimizer (paged)"]
    for i, g in enumerate(stages):
        assert sum(t.y[i] for t in bars) == pytest.approx(g.memory.total / GIB)
    assert list(by_name["reserved (allocator)"].y) == pytest.approx(
        [g.memory.reserved / GIB for g in stages])
    assert list(by_name["device (nvidia-smi)"].y) == pytest.approx(
        [g.memory.device / GIB for g in stages])
    title = chart.widget.layout.title.text
    assert f"{memory_text(est.memory.per_gpu.device)} on the device" in title
    assert "nvidia-smi / DCGM report the device figure" in title
    assert "max_memory_allocated" in title and "max_memory_reserved" in title
    assert all("GiB" in t.hovertemplate for t in chart.widget.data)


def test_step_time_waterfall_adds_up_to_the_step():
    est = estimate(load_scenario(ROOT / "examples/llama3-405b-h200-cluster.yaml"))
    chart = StepTimeChart()
    chart.update(est)
    wf = chart.widget.data[0]
    assert wf.x[-1] == "step" and wf.y[-1] == pytest.approx(est.time.step)
    assert sum(wf.y[:-1]) == pytest.approx(est.time.step, rel=1e-9)
    assert dict(zip(wf.x, wf.y))["pipeline bubble"] == pytest.approx(est.time.bubble)
    assert [k for k, _ in step_terms(est)] == list(wf.x[:-1])
    assert band_words(est) in chart.widget.layout.title.text


def test_step_time_title_states_the_error_band():
    est = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml"))
    chart = StepTimeChart()
    chart.update(est)
    title = chart.widget.layout.title.text
    band = est.error_band
    # the brief's generic engine has 3 runs of its own: its band is the 361 dense runs'
    assert band["group"] == "dense" and band["runs"] >= 20 and band["kind"] == "in-sample"
    assert (f"typical error: half of {band['runs']} published dense runs within "
            f"{band['median']:.0%}, nine in ten within {band['p90']:.0%}; in-sample") in title


def test_training_panel_offers_only_the_engines_switches():
    """The engine dropdown lists every engine by label; the panel shows only that engine's
    switches and recompute policies, and switching engine resets what the new one lacks, so
    the scenario stays valid."""
    from workbench.engines import ENGINES

    st = _state()
    tr, par = TrainingPanel(st), ParallelPanel(st)
    shown = lambda: {k for k, row in tr.rows.items() if row.layout.display == ""}  # noqa: E731
    assert [v for _, v in tr.engine.options] == list(ENGINES)
    assert [lbl for lbl, _ in tr.engine.options] == [e.label for e in ENGINES.values()]
    assert shown() == set() and tr.switches.layout.display == "none"
    assert list(tr.recompute.options) == list(ENGINES["generic"].recompute)
    assert "op" not in tr.recompute.options
    if "torchtitan" not in ENGINES:
        return
    tt = ENGINES["torchtitan"]
    tr.engine.value = "torchtitan"
    assert st.valid, st.problems
    assert list(tr.recompute.options) == list(tt.recompute) and "op" in tr.recompute.options
    assert "compile" in shown() and "async_tp" in shown()
    assert "fp8_recipe" not in shown()                   # bf16: no FP8 recipe
    assert "expert_tp" not in shown()                    # a dense model: no expert TP
    assert [z for _, z in par.zero.options] == list(tt.zero)
    tr.compile.value = True
    tr.recompute.value = "op"
    tr.precision.value = "fp8"
    assert "fp8_recipe" in shown()
    # on this H100 the recipes Hopper runs (MXFP8 is Blackwell only: the rule table's limit)
    assert [v for _, v in tr.fp8_recipe.options] == [NULL, "tensorwise", "rowwise"]
    assert "mxfp8" in tt.fp8_recipes
    tr.fp8_recipe.value = "rowwise"
    assert st.valid and st.scenario.training.compile and st.scenario.training.fp8_recipe == \
        "rowwise"
    tr.precision.value = "bf16"                           # a recipe only goes with fp8
    assert st.valid and st.scenario.training.fp8_recipe is None
    tr.precision.value = "fp8"
    tr.fp8_recipe.value = "rowwise"
    tr.engine.value = "generic"                           # resets what generic lacks
    assert st.valid, st.problems
    t = st.scenario.training
    assert not t.compile and t.fp8_recipe is None and t.recompute in ENGINES["generic"].recompute
    assert shown() == set() and "op" not in tr.recompute.options
    assert chosen(tr.fp8_recipe) is None and tr.fp8_recipe.label.startswith("engine default")
    assert tr.compile.value is False
    for name in ENGINES:     # every engine that pre-trains: still valid; the others refuse
        tr.engine.value = name   # the method in words, naming the engines that train it
        if "pretrain" in ENGINES[name].methods:
            assert st.valid, (name, st.problems)
            assert st.scenario.parallel.zero in ENGINES[name].zero
        else:
            said = tr.fields["training.method"][1].value
            assert not st.valid and "the engines that train pretrain: generic" in said, said
            assert st.doc["training"].get("method", "pretrain") == "pretrain"
            assert tr.method.value == "pretrain"     # the field keeps the person's method


def _children():
    return [c for c in psutil.Process().children(recursive=True) if c.is_running()
            and c.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_a_live_trial_streams_into_the_charts_then_the_comparison():
    from widgets.charts.trial import TrialCharts
    from widgets.panels.trial import TrialPanel

    st = _state()
    panel = TrialPanel(st, TrialCharts())
    panel.world.value = 2
    panel.steps.value = 2
    arrived = []
    charts_on_event = panel.charts.on_event
    panel.charts.on_event = lambda ev: (arrived.append((ev["type"], time.time())),
                                        charts_on_event(ev))
    panel.run()
    assert panel.wait(120)
    kinds = [k for k, _ in arrived]
    assert kinds[0] == "start" and kinds.count("step") == 4 and kinds[-1] == "result"
    rank0 = panel.charts.widget.data[0]
    assert list(rank0.x) == [0, 1] and all(y > 0 for y in rank0.y)
    assert panel.result is not None and "exact" in panel.compare.value
    assert panel.progress.value == panel.progress.max and not panel.run_button.disabled
    assert re.fullmatch(r"done in [\d.]+ s from the click \(the processes ran [\d.]+ s of it\)",
                        panel.status.value)
    # the trial served Prometheus metrics on 127.0.0.1 while it ran, and the panel said where
    assert re.search(r"served at <a href='http://127\.0\.0\.1:\d+/metrics'", panel.metrics.value)
    assert not _children()


@pytest.mark.slow
def test_a_trial_stopped_by_a_fault_is_shown_partial_and_not_compared():
    from widgets.panels.trial import TrialPanel

    panel = TrialPanel(_state())
    panel.world.value = 2
    panel.steps.value = 3
    panel.inject.value = "kill"
    panel.rank.value = 1
    panel.at_step.value = 1
    panel.run()
    assert panel.wait(120)
    assert "trial failed" in panel.status.value
    table = panel.compare.value
    assert "Its measurements are partial" in table and "partial, not compared" in table
    assert "DIFFERS" not in table and "exact" not in table
    names = {t.name for t in panel.charts.widget.data}
    assert "memory measured (partial: the trial stopped)" in names
    assert not _children()


@pytest.mark.slow
def test_a_hanging_trial_is_cancelled_and_leaves_no_process():
    from widgets.panels.trial import TrialPanel

    st = _state()
    panel = TrialPanel(st)
    panel.world.value = 2
    panel.steps.value = 5
    panel.inject.value = "hang"
    panel.rank.value = 1
    panel.run()
    deadline = time.time() + 60
    while panel.charts.events < 2 and time.time() < deadline:   # started and stepping
        time.sleep(0.1)
    panel.cancel()
    assert panel.wait(30)
    time.sleep(0.3)
    assert not _children()
    assert not panel.run_button.disabled


def test_planner_ranks_loads_a_row_and_exports_it():
    from widgets.planner import PlannerPanel

    st = _state()
    pp = PlannerPanel(st)
    pp.fix["tp"].value = 2
    pp.search(wait=True)
    assert pp.result is not None and (pp.result.table["tp"] == 2).all()
    assert "<table class='wb-plan'>" in pp.table.value and pp.why.value.startswith("#1 ")
    pp.pick.value = 1
    pp.load(1)
    best = pp.result.layout(1)["parallel"]
    assert st.scenario.parallel.tp == 2 and st.scenario.parallel.pp == best["pp"]
    assert st.estimate.time.step == pytest.approx(pp.result.table["step"].iloc[0], rel=1e-9)
    pp.target.value = "deepspeed"           # tp 2 is Megatron-DeepSpeed's launch flag: a note
    pp.export()
    assert ("parallel.tp = 2: set in Megatron-DeepSpeed's launch: "
            "--tensor-model-parallel-size 2") in pp.export_text.value
    pp.fix["cp"].value = 2                  # ring attention: DeepSpeed refuses it
    pp.search(wait=True)
    pp.load(1)
    pp.export()
    assert "parallel.cp" in pp.download.value and pp.export_text.value == ""
    pp.target.value = "torchtitan"
    pp.export()
    assert "tensor_parallel_degree = 2" in pp.export_text.value
    assert "download layout-torchtitan.txt" in pp.download.value


def test_planner_table_shows_the_engines_switches_and_the_nvidia_smi_figure():
    from widgets.planner import PlannerPanel

    st = _state()
    st.update({"training.engine": "torchtitan", "training.recompute": "op"})
    pp = PlannerPanel(st)
    pp.fix["tp"].value = 2
    pp.search(wait=True)
    head = pp.table.value.split("</tr>")[0]
    assert "<th>switches</th>" in head and "<th>GiB/GPU nvidia-smi</th>" in head
    first = pp.table.value.split("</tr>")[1]
    top = pp.result.table.iloc[0]
    assert "<td>compile, async TP</td>" in first and f"<td>{top['device_gib']:.1f}</td>" in first


def test_planner_fixes_the_experts_widths_only_for_an_moe_model():
    """"Fix ep" and "Fix expert TP" appear for an MoE model (expert TP where the engine
    offers it) and are hidden, reset to "any", for a dense one; a fixed expert TP is searched
    and shown in the table's "expert TP" column."""
    from widgets.planner import PlannerPanel

    st = _state()                                    # Llama 3 8B: dense
    pp = PlannerPanel(st)
    assert pp.fix["ep"].layout.display == "none" == pp.fix["expert_tp"].layout.display
    st.load(load_scenario(ROOT / "examples/mixtral-8x7b-ep.yaml").to_dict())
    assert st.scenario.model.moe is not None and not st.problems
    assert pp.fix["ep"].layout.display == ""
    assert st.scenario.training.engine == "generic"  # the idealised stack folds no experts
    assert pp.fix["expert_tp"].layout.display == "none"
    st.update({"training.engine": "megatron"})
    assert pp.fix["expert_tp"].layout.display == ""
    pp.fix["expert_tp"].value = 1
    pp.fix["pp"].value = 1
    pp.search(wait=True)
    assert pp.result is not None and (pp.result.table["expert_tp"] == 1).all()
    head, first = pp.table.value.split("</tr>")[:2]
    cells = re.findall(r"<t[hd]>(.*?)</t[hd]>", head), re.findall(r"<td>(.*?)</td>", first)
    assert cells[1][cells[0].index("expert TP")] == "1"
    st.load(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml").to_dict())
    assert pp.fix["expert_tp"].layout.display == "none" and chosen(pp.fix["expert_tp"]) is None


def test_the_planner_says_when_its_table_answers_another_scenario():
    """The table's status names the scenario searched; changing the model (or the hardware,
    or training beyond what the search chooses) says "search again" above it; loading a row
    does not, and a new search clears it."""
    from widgets.planner import PlannerPanel

    st = _state()
    pp = PlannerPanel(st)
    pp.fix["tp"].value = 2
    pp.search(wait=True)
    assert pp.status.value.startswith("Llama 3.1 8B on 8 x ")
    pp.load(2)                                      # a row of its own answer: not stale
    assert "search again" not in pp.status.value
    st.update({"training.global_batch": st.scenario.training.global_batch * 2})
    assert "the scenario has changed since: search again" in pp.status.value
    assert "these layouts were searched for Llama 3.1 8B on 8 x" in pp.status.value
    pp.search(wait=True)
    assert "search again" not in pp.status.value


def test_planner_search_can_be_cancelled():
    from widgets.planner import PlannerPanel

    st = _state("llama3-405b-h200-cluster")
    pp = PlannerPanel(st)
    pp.search()
    pp.cancel_button.click()          # the search checks between its passes
    pp._thread.join(60)
    assert "cancelled" in pp.status.value and pp.result is None


def test_app_charts_follow_every_edit():
    import base64

    from widgets.app import App

    app = App("llama3-8b-8xh100")
    assert app.trial.charts is app.trial_charts
    app.panels["Parallelism"].pp.value = 2
    est = app.state.estimate
    assert est.scenario.parallel.pp == 2
    bars = sum(len(t.x) for t in app.timeline.widget.data)
    assert bars == len(est.timeline())
    assert app.memory.widget.data[0].y[0] == pytest.approx(
        est.memory.per_stage[0].memory.params / GIB)
    # the YAML download holds the current scenario
    data = app.files.download.value.split("base64,")[1].split("'")[0]
    assert yaml.safe_load(base64.b64decode(data))["parallel"]["pp"] == 2


def test_app_yaml_tab_upload_and_bad_files():
    from widgets.app import App

    app = App("llama3-8b-8xh100")
    doc = yaml.safe_load(app.files.yaml_text.value)
    doc["parallel"].update({"dp": 2, "tp": 4})
    app.files.yaml_text.value = yaml.safe_dump(doc)          # edit in the YAML tab
    assert app.state.scenario.parallel.tp == 4
    assert app.panels["Parallelism"].tp.value == 4      # the panels follow
    text = (ROOT / "examples/mixtral-8x7b-ep.yaml").read_bytes()
    app.files.on_upload({"new": [{"name": "m.yaml", "content": memoryview(text)}]})
    assert app.state.scenario.model.moe is not None
    app.files.load_text("hardware: [unclosed")
    assert "not valid YAML at line 1" in app.verdict.value
    assert app.state.scenario.model.moe is not None     # the last valid scenario stays


def test_open_scenario_reads_a_persons_own_configs():
    """"Open scenario" with an Accelerate config and SFT arguments: workbench import makes the
    scenario, the page says what no file stated; a bad key is one line and changes nothing."""
    from widgets.app import App

    app = App("llama3-8b-8xh100")
    acc = upstream("trl-trl-accelerate_configs-fsdp2.yaml").read_bytes()
    args = (b"model_name_or_path: meta-llama/Llama-3.2-1B\nper_device_train_batch_size: 2\n"
            b"gradient_accumulation_steps: 4\nmax_length: 2048\nbf16: true\n")
    app.files.on_upload({"new": [{"name": "fsdp2.yaml", "content": memoryview(acc)},
                         {"name": "sft.yaml", "content": memoryview(args)}]})
    s = app.state.scenario
    assert (s.model.name, s.parallel.dp, s.parallel.zero, s.training.micro_batch,
            s.training.global_batch, s.training.engine, s.training.backend) == (
        "Llama 3.2 1B", 8, 3, 2, 64, "hf", "fsdp2")
    said = app.files.import_status.value
    assert app.files.picker.value is None                      # no longer an example's scenario
    assert "Read fsdp2.yaml, sft.yaml" in said
    assert "<code>hardware.gpu</code> = h100-sxm" in said and "workbench default" in said
    app.files.open_files([("ds.json", b'{"zero_optimization": {"stage": 3}, '
                                b'"train_micro_batch_size": 2}')])
    assert "train_micro_batch_size" in app.files.import_status.value and "wb-error" in \
        app.files.import_status.value
    assert app.state.scenario.model.name == "Llama 3.2 1B"      # the last scenario stays
    # a scenario file still opens as itself
    app.files.open_files([("m.yaml", (ROOT / "examples/mixtral-8x7b-ep.yaml").read_bytes())])
    assert app.state.scenario.model.moe is not None and app.files.import_status.value == ""


@pytest.mark.slow
def test_collective_benchmark_tab_draws_busbw_and_leaves_no_process():
    from widgets.panels.bench import BenchPanel

    panel = BenchPanel()
    panel.run(wait=True)
    df = panel.frame
    assert list(df.columns)[:6] == ["collective", "bytes", "world_size", "time_s",
                                    "algbw_gb_per_s", "busbw_gb_per_s"]
    lines = panel.chart.widget.data
    assert len(lines) == df.groupby(["collective", "world_size"]).ngroups
    ys = sorted(v for t in lines for v in t.y)
    assert ys == pytest.approx(sorted(df["busbw_gb_per_s"]))
    assert not _children()


def test_app_scaling_curve_runs_in_the_background_and_can_be_cancelled():
    from workbench.plan.scaling import scaling_curve
    from widgets.app import App

    app = App("llama3-8b-8xh100")
    app.scaling.over.value = "tp"
    app.scaling.draw(wait=True)
    df = scaling_curve(app.state.scenario, over="tp")
    drawn = [y for t in app.scaling.chart.widget.data for y in (t.y or ())]
    assert app.scaling.progress.value == 1.0 and app.scaling.status.value == ""
    for v in df[df["valid"] & df["fits"]]["tokens_per_s"]:
        assert any(v == pytest.approx(y) for y in drawn)
    app.scaling.over.value = "gpus"
    app.scaling.draw()
    app.scaling.cancel_button.click()
    app.scaling.wait(60)
    assert app.scaling.status.value == "cancelled" and not app.scaling.draw_button.disabled


def test_rdma_box_switches_the_inter_node_link_and_the_estimate_follows():
    st = _state()
    hw = HardwarePanel(st)
    hw.nodes.value = 2
    hw.inter.value = "400gbe"
    assert hw.rdma.value is False and not hw.rdma.disabled
    hw.rdma.value = True
    assert st.scenario.hardware.inter_node.link.rdma and st.doc["hardware"]["inter_node"][
        "link"] == "400gbe-rdma"
    link = st.scenario.hardware.inter_node.link
    assert st.estimate.scenario.hardware.inter_node.link == link     # estimated with it
    hw.inter.value = "ib-ndr"
    assert hw.rdma.value is True and hw.rdma.disabled


def test_host_fields_edit_the_host_as_shown_and_the_cpu_may_be_left_out():
    """Editing host memory alone keeps the CPU the panel shows (the host is written whole);
    choosing "not given" leaves the CPU out, and the build check says it was not checked."""
    st = _state()
    hw = HardwarePanel(st)
    shown = hw.cpu.value
    hw.host_gb.value = 256
    assert st.valid, st.problems
    assert st.doc["hardware"]["host"]["cpu"] == shown and st.scenario.hardware.host.memory_gb == 256
    hw.cpu.value = ""
    assert st.valid, st.problems
    assert st.scenario.hardware.host.cpu is None and "cpu" not in st.doc["hardware"]["host"]
    checks = {c.name: c for c in st.estimate.checks}
    assert checks["pcie_lanes"].status == "skip"
    hw.refresh()
    assert hw.cpu.value == ""


def _dropdowns(widget) -> list:
    import ipywidgets as w
    out = [widget] if isinstance(widget, w.Dropdown) else []
    for child in getattr(widget, "children", ()):
        out += _dropdowns(child)
    return out


def test_no_dropdown_is_ever_blank_and_null_has_a_word():
    """ipywidgets shows a blank field for a value of None, even where an option holds None:
    every dropdown of the page shows a choice, null as its word ("any", "none", "engine
    default", "torchtitan default"), through edits, engine changes and a search."""
    from widgets.app import App

    app = App("llama3-8b-8xh100")
    blank = lambda: [d.description for d in _dropdowns(app.widget) if d.index is None]  # noqa
    assert blank() == []
    par, tr = app.panels["Parallelism"], app.panels["Training"]
    assert par.reshard.label == "torchtitan default" and par.shard.label.startswith("none")
    assert app.trial.world.label == "the layout's" and app.trial.inject.label == "none"
    assert {d.label for d in app.planner.fix.values()} == {"any"}
    app.state.update({"parallel.reshard_after_forward": True})
    assert par.reshard.label == "yes"
    app.state.update({"parallel.reshard_after_forward": None})
    assert par.reshard.label == "torchtitan default" and blank() == []
    tr.engine.value = "torchtitan"
    tr.precision.value = "fp8"
    assert tr.fp8_recipe.label == "engine default (tensorwise)" and blank() == []
    tr.fp8_recipe.value = "rowwise"
    app.state.update({"training.fp8_recipe": None})
    assert tr.fp8_recipe.label == "engine default (tensorwise)" and blank() == []
    # a search offers its first row at once: Load puts rank 1 into the scenario
    app.planner.search(wait=True)
    assert app.planner.pick.label == "#1" and blank() == []
    app.planner.load_button.click()
    best = app.planner.result.layout(1)["parallel"]
    assert app.state.scenario.parallel.tp == best["tp"]
    assert app.state.scenario.parallel.dp == best["dp"]


def test_an_invalid_yaml_edit_is_named_beside_the_yaml_and_the_page_stays_consistent():
    from widgets.app import App

    app = App("llama3-8b-8xh100")
    assert "Only the scenario on the page so far" in app.compare.value   # says what to do
    before = app.state.estimate
    app.files.yaml_text.value = app.files.yaml_text.value.replace("  tp: 1", "  tp: 3")
    assert not app.state.valid
    assert "Tensor (tp) must divide Heads = 32 (you gave 3)" in app.files.yaml_status.value
    assert "the charts show the last valid scenario" in app.files.yaml_status.value
    tp = app.panels["Parallelism"].tp
    assert tp.label == "3" and [label for label, _ in tp.options].count("3") == 1
    assert "must divide Heads" in app.panels["Parallelism"].fields["parallel.tp"][1].value
    assert app.state.estimate is before                      # charts keep the valid scenario
    app.files.yaml_text.value = app.files.yaml_text.value.replace("  tp: 3", "  tp: 1")
    assert app.state.valid and app.files.yaml_status.value == "" and tp.label == "1"


def test_scaling_names_the_host_memory_points_and_says_when_it_is_out_of_date():
    """The 70B brief on 1 and 2 GPUs fits the GPUs only by offloading more than the node's
    256 GiB of host memory: drawn as orange diamonds with their own legend entry and a note,
    not as red crosses below the capacity line; after an edit the chart says it is stale."""
    from widgets.app import App

    app = App()
    app.scaling.draw(wait=True)
    df = app.scaling.chart.data
    tok, mem, capl, above, beyond = app.scaling.chart.widget.data
    host_short = [int(v) for v, f in zip(df["value"], df["fits"]) if not f]
    assert host_short == [1, 2]
    symbols = dict(zip(tok.x, tok.marker.symbol))
    assert [symbols[v] for v in host_short] == ["diamond", "diamond"]
    assert beyond.visible and beyond.name == "offload beyond host memory" and not above.visible
    title = app.scaling.chart.widget.layout.title.text
    assert title.endswith("2 of 4 points fit in memory;<br>2 fit the GPUs only with offload "
                          "beyond the host's memory")
    note = app.scaling.chart.widget.layout.annotations[0].text
    assert note.startswith("gpus 1 does not fit: hardware.host:")
    gb = app.panels["Training"].global_batch
    gb.value = 2 * gb.value
    assert app.state.valid
    assert app.scaling.chart.widget.layout.title.text.startswith("OUT OF DATE (drawn for ")
    assert title in app.scaling.chart.widget.layout.title.text


def test_the_pareto_axis_keeps_the_useful_cluster_and_says_what_is_off_it():
    from types import SimpleNamespace

    from widgets.charts.pareto import SPAN, ParetoChart
    from workbench.plan import Constraints, plan

    result = plan(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml"), Constraints())
    chart = ParetoChart()
    chart.update(result)
    fastest = float(result.table["step"].min())
    assert float(result.table["step"].max()) < SPAN * fastest
    assert chart.widget.layout.xaxis.range is None          # nothing far out: autorange
    table = result.table.copy()
    table.loc[table.index[-3:], "step"] = 20 * fastest      # three very slow layouts
    chart.update(SimpleNamespace(table=table))
    assert tuple(chart.widget.layout.xaxis.range) == pytest.approx((0, SPAN * fastest * 1.03))
    assert chart.widget.layout.title.text.endswith(
        "<br>3 slower than 3x the fastest are right of the axis (zoom out to see them)")


def test_training_panel_method_shows_the_adapters_and_writes_the_document():
    """The method: LoRA/QLoRA show the adapters' fields (QLoRA also its storage), the others
    hide them; the scenario and its YAML get training.method and training.lora; going back
    removes what the new method refuses, so the scenario stays valid. Every new field has a
    one-line tooltip; the optimizers have plain labels; the engine's fine-tuning switches show
    only where it offers them."""
    from widgets.panels.training import OPTIMIZER_LABELS
    from workbench.engines import ENGINES
    from workbench.scenario import dump_scenario

    st = _state("brief-8xh200-70b")
    tr = TrainingPanel(st)
    shown = lambda row: row.layout.display == ""               # noqa: E731
    assert [v for _, v in tr.method.options] == ["pretrain", "full", "lora", "qlora"]
    assert not shown(tr.lora_box)
    tr.method.value = "lora"
    assert st.valid, st.problems
    assert shown(tr.lora_box) and not shown(tr.lora_rows["quant"])
    assert tr.lora_rank.value == 16 and tr.lora_targets.label.startswith("all linear")
    tr.lora_rank.value = 64
    tr.lora_targets.value = ("q", "k", "v", "o")
    tr.trainable["norms"].value = True
    lora = st.scenario.training.lora
    assert (lora.rank, lora.targets, lora.trainable) == (64, ("q", "k", "v", "o"), ("norms",))
    doc = yaml.safe_load(dump_scenario(st.scenario))
    assert doc["training"]["method"] == "lora"
    assert doc["training"]["lora"]["rank"] == 64 and "quant" not in doc["training"]["lora"]
    tr.method.value = "qlora"
    assert st.valid and shown(tr.lora_rows["quant"]) and shown(tr.lora_rows["double_quant"])
    tr.lora_quant.value = "int8"
    assert st.scenario.training.lora.quant == "int8" and not shown(tr.lora_rows["double_quant"])
    assert yaml.safe_load(dump_scenario(st.scenario))["training"]["lora"]["quant"] == "int8"
    tr.method.value = "lora"                            # quant is QLoRA's: removed
    assert st.valid, st.problems
    assert "quant" not in st.doc["training"]["lora"] and st.scenario.training.lora.rank == 64
    tr.method.value = "full"                            # no adapters: the table goes
    assert st.valid and st.scenario.training.lora is None and "lora" not in st.doc["training"]
    assert not shown(tr.lora_box)
    # plain labels, and a tooltip on every new field
    assert [lbl for lbl, _ in tr.optimizer.options] == list(OPTIMIZER_LABELS.values())
    assert "AdamW 8-bit (bitsandbytes)" in tr.optimizer.options[2]
    for widget in (tr.method, tr.lora_rank, tr.lora_alpha, tr.lora_targets, tr.lora_quant,
                   tr.lora_double_quant, tr.optimizer, tr.optimizer_in_backward,
                   tr.activation_offload, *tr.trainable.values()):
        assert widget.tooltip and "\n" not in widget.tooltip, widget.description
    # the engine's switches: generic offers neither; torchtune both (the step inside backward
    # for full fine-tuning only); torchtune does not pre-train
    assert not any(shown(r) for r in tr.ft_rows.values())
    tr.engine.value = "torchtune"
    assert st.valid, st.problems
    assert all(shown(r) for r in tr.ft_rows.values())
    assert [v for _, v in tr.method.options] == list(ENGINES["torchtune"].methods)
    assert not tr.optimizer_in_backward.disabled        # method full
    tr.activation_offload.value = True
    tr.optimizer.value = "paged_adamw8bit"
    assert st.valid and st.scenario.training.activation_offload
    assert st.scenario.training.optimizer == "paged_adamw8bit"
    tr.method.value = "lora"
    assert st.valid and tr.optimizer_in_backward.disabled
    tr.engine.value = "torchtitan"                      # no LoRA, no 8-bit optimizers there
    assert not st.valid and st.doc["training"]["method"] == "lora"   # refused, not changed
    assert "the engines that train lora: generic, torchtune, hf, litgpt" in \
        tr.fields["training.method"][1].value
    tr.method.value = "full"
    assert st.valid, st.problems
    t = st.scenario.training
    assert t.method == "full" and t.lora is None and t.optimizer == "adamw"
    assert not t.activation_offload and not any(shown(r) for r in tr.ft_rows.values())


def _fine_tuned(est, frozen: float, paged: float):
    """``est`` with a share ``frozen`` of every GPU's weights frozen and ``paged`` bytes of
    paged optimizer states (the estimator's fields, as LoRA and bitsandbytes will fill them)."""
    import dataclasses

    def mem(g):
        return dataclasses.replace(g, memory=dataclasses.replace(
            g.memory, params_frozen=frozen * g.memory.params, paged=paged))

    stages = [mem(g) for g in est.memory.per_stage]
    worst = next(s for s in stages if s.rank == est.memory.worst.rank)
    return dataclasses.replace(est, memory=dataclasses.replace(
        est.memory, per_stage=stages, worst=worst))


def test_memory_chart_and_table_split_frozen_weights_and_show_paged_states():
    from widgets.memory_table import memory_table_html

    est = estimate(load_scenario(ROOT / "examples/llama3-405b-h200-cluster.yaml"))
    chart = MemoryChart()
    legend = lambda: [t.name for t in chart.widget.data if t.showlegend is not False  # noqa
                      and len(t.x)]
    chart.update(est)
    assert legend()[:5] == ["parameters", "gradients", "optimizer states", "activations",
                            "buffers"]
    assert "weights (frozen)" not in memory_table_html(est)
    ft = _fine_tuned(est, 0.9, 3 * GIB)
    chart.update(ft)
    names = legend()
    assert names[:6] == ["weights (frozen)", "weights (trainable)", "gradients",
                         "optimizer states", "optimizer (paged)", "activations"]
    assert "parameters" not in names
    by = {t.name: t for t in chart.widget.data}
    for i, g in enumerate(ft.memory.per_stage):
        assert by["weights (frozen)"].y[i] == pytest.approx(g.memory.params_frozen / GIB)
        assert by["weights (trainable)"].y[i] == pytest.approx(g.memory.params_trainable / GIB)
        assert by["optimizer (paged)"].y[i] == pytest.approx(3.0)
    assert by["optimizer (paged)"].marker.pattern.shape == "/"
    assert "3.0 GiB paged" in chart.widget.layout.title.text
    table = memory_table_html(ft)
    assert "weights (frozen)" in table and "weights (trainable)" in table
    assert "optimizer (paged, not in the total)" in table and "<td>params</td>" not in table
    chart.update(est)                                   # and back: one weights bar
    assert "weights (frozen)" not in legend() and "parameters" in legend()


def test_the_plan_tab_says_what_would_fit_instead():
    """The brief's 70B does not fit its 8 H200: the Plan tab lists the planner's best layout
    per fine-tuning method (in a thread); a scenario that fits shows how to go faster (the
    planner's fastest layout when more than 5 % faster), or that its layout is the fastest."""
    from widgets.app import App
    from workbench.plan.methods import compare_methods

    app = App("brief-8xh200-70b")
    assert not app.state.estimate.memory.fits
    # built in the notebook's cell, the first search waits for the page to draw
    assert "wb-fit-searching" in app.fit_instead.widget.value
    app.memory.widget._on_page_message(None, {"event": "render"}, [])    # the page draws
    app.fit_instead.wait()
    text = app.fit_instead.widget.value
    assert "What would fit instead" in text and "tokens/s" in text
    for f in compare_methods(app.state.scenario):
        assert f">{f.label}<" in text
        if f.fits:
            assert f"{f.tokens_per_s:,.0f}" in text
    app.panels["Training"].method.value = "lora"        # LoRA of the 70B fits this box
    app.fit_instead.wait()
    if app.state.estimate.memory.fits:
        assert "How to go faster" in app.fit_instead.widget.value
        assert "(yours: " in app.fit_instead.widget.value
    else:
        assert "What would fit instead of LoRA" in app.fit_instead.widget.value
    app.panels["Training"].method.value = "full"
    app.fit_instead.wait()
    assert "What would fit instead of full fine-tuning" in app.fit_instead.widget.value
    app.files.picker.value = "llama3-8b-8xh100"          # fits, and fast as laid out
    app.fit_instead.wait()
    assert app.state.estimate.memory.fits
    assert "Your layout is the planner's fastest" in app.fit_instead.widget.value


def test_the_verdict_at_the_top_of_plan_is_never_green_while_a_part_fails():
    """The Plan tab's first lines are the backend's verdict: with CPU offload the brief's 70B
    fits its GPUs but not its 256 GB of host memory — the verdict says No in red with the host
    part failed, and the thread adds the planner's next steps with their figures; a scenario
    whose every part passes says Yes in green."""
    import re

    from widgets.app import App
    from workbench.estimate.run.verdict import verdict

    app = App("brief-8xh200-70b")
    app.panels["Training"].offload.value = "cpu"
    est = app.state.estimate
    assert est.memory.gpu_fits and not est.memory.host_fits and not est.memory.fits
    box = app.verdict.value
    assert "color:#cf222e" in box.split(">", 1)[0] and "#1a7f37'" not in box.split(">", 1)[0]
    v = verdict(est.scenario, est)
    assert not v.ok and v.says.split(":")[0] in box
    assert re.search(r"wb-part-fail'.*host memory", box)
    assert "fits the GPU, but the host cannot hold the offload" in box   # the memory line
    assert "1,051" in box and "256 GiB" in box
    app.fit_instead.wait()
    assert "The planner's options" in app.fit_instead.widget.value
    assert "fastest layout that fits this hardware" in app.fit_instead.widget.value
    app.files.picker.value = "llama3-8b-8xh100"
    est = app.state.estimate
    if verdict(est.scenario, est).ok:
        assert "color:#1a7f37" in app.verdict.value.split(">", 1)[0]
    else:
        assert "color:#cf222e" in app.verdict.value.split(">", 1)[0]


def test_training_panel_drops_megatron_only_settings_it_has_no_field_for():
    """An imported Megatron config's state dtypes, recomputed modules and FP8 gathers have no
    field on the panel: another recompute policy drops the modules (they apply under selective
    only), and an engine without them drops what it lacks, so the scenario stays valid."""
    st = _state()
    st.update({"training.engine": "megatron", "training.precision": "fp8",
               "training.fp8_param_gather": True, "training.recompute": "selective",
               "training.recompute_modules": ["layernorm"],
               "training.state_dtypes": {"grads": "bf16"}})
    assert st.valid, st.problems
    tr = TrainingPanel(st)
    tr.recompute.value = "full"
    assert st.valid and st.scenario.training.recompute_modules is None
    assert st.scenario.training.state_dtypes is not None
    tr.engine.value = "torchtitan"
    assert st.valid, st.problems
    t = st.scenario.training
    assert t.state_dtypes is None
    assert t.fp8_param_gather          # torchtitan gathers FP8 weights too: kept


def test_a_trial_of_a_lora_scenario_says_the_adapters_run():
    """Issue 54: a trial of a LoRA scenario did not say adapters ran."""
    from widgets.panels.trial import what_ran_html
    from workbench.trial import prepare_trial

    for sets, said in ((["training.method=lora"], "LoRA: adapters of rank 16 on q, k, v, o"),
                       (["training.method=qlora", "parallel.zero=0"],
                        "QLoRA: adapters of rank 16"),
                       (["training.method=full"], "full fine-tuning: every weight trains")):
        s = load_scenario(ROOT / "examples" / "llama3-8b-8xh100.yaml", sets)
        trial, notes = prepare_trial(s, 2, "gloo")
        assert said in what_ran_html(s, trial, [], notes), sets
