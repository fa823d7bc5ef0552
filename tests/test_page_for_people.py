"""Issue 41, the page's part: a bad value never changes silently and never blanks the page;
labels and lists a person reads; the glossary's tooltips; what a trial ran; Compare any two;
saved scenarios by name. Widgets in the kernel, no browser (tests/test_dashboard.py has the
browser walk)."""
from __future__ import annotations

import base64
import html
import json
import os
import re

import pytest

from workbench.errors import Problem, ScenarioError
from workbench.glossary import GLOSSARY, explain, term


@pytest.fixture
def app(tmp_path):
    from widgets.app import App

    return App(store_dir=tmp_path / "scenarios")


def _figure(plot) -> dict:
    return json.loads(plot.figure)


def _links(html_text: str) -> dict[str, str]:
    return {name: base64.b64decode(data).decode() for name, data in re.findall(
        r"download='([^']+)' href='data:text/plain;base64,([^']+)'", html_text)}


def test_a_bad_number_stays_as_typed_with_the_validators_sentence(app):
    hw = app.panels["Hardware"]
    before = app.state.estimate
    par = dict(app.state.doc["parallel"])
    for box, path, typed, words in (
            (hw.gpus_per_node, "hardware.gpus_per_node", "0",
             "GPUs per node must be between 1 and 1024 (you gave 0)"),
            (hw.host_gb, "hardware.host.memory_gb", "-5",
             "Host memory (GiB) must be > 0 (you gave -5)"),
            (hw.gpus_per_node, "hardware.gpus_per_node", "",
             "GPUs per node is empty: type a whole number"),
            (hw.nodes, "hardware.nodes", "two", "Nodes must be a whole number")):
        before = app.state.estimate
        box.value = typed
        assert str(box.value) == typed                 # the field shows what was typed
        assert not app.state.valid
        assert html.escape(words) in hw.fields[path][1].value   # with the sentence beside it
        assert app.state.estimate is before            # the charts keep the last valid one
        assert app.state.doc["parallel"] == par        # nothing else moved (dp stays 8)
        assert "last valid scenario" in _figure(app.memory.widget)["layout"]["title"]["text"]
        box.value = {"hardware.gpus_per_node": "8", "hardware.host.memory_gb": "256",
                     "hardware.nodes": "1"}[path]
        assert app.state.valid, app.state.problems
        assert "last valid" not in json.dumps(_figure(app.memory.widget)["layout"]["title"])


def test_six_gpus_under_tp_8_keeps_every_chart_and_speaks_in_words(app):
    par, hw = app.panels["Parallelism"], app.panels["Hardware"]
    par.tp.value = 8
    assert app.state.valid
    hw.gpus_per_node.value = "6"
    assert not app.state.valid and str(hw.gpus_per_node.value) == "6"
    page = app.verdict.value + par.dp.value + hw.fields["hardware.gpus_per_node"][1].value
    assert "{" not in page and "&#x27;" not in page and "got" not in page     # no repr
    assert "dp 1, tp 8, pp 1, cp 1" in app.verdict.value
    assert "the charts show the last valid scenario" in app.verdict.value
    assert "cannot fill the 6 GPUs" in par.dp.value and "fills" not in par.dp.value
    for chart in (app.memory, app.step, app.timeline, app.mesh):
        fig = _figure(chart.widget)
        assert chart.widget.message == "" and fig["data"], chart   # drawn, not blank
        assert "last valid scenario" in fig["layout"]["title"]["text"]
    links = _links(app.files.download.value)
    assert set(links) == {"scenario-not-valid.yaml", "scenario-last-valid.yaml"}
    assert "gpus_per_node: 6" in links["scenario-not-valid.yaml"]
    assert links["scenario-not-valid.yaml"].startswith("# NOT VALID")
    assert "gpus_per_node: 8" in links["scenario-last-valid.yaml"]
    assert "gpus_per_node: 6" in app.files.yaml_text.value          # the YAML tab as edited
    hw.gpus_per_node.value = "8"
    assert app.state.valid and set(_links(app.files.download.value)) == {"scenario.yaml"}


def test_a_refused_degree_names_what_is_offered(app):
    app.state.update({"parallel.tp": 3})
    text = app.panels["Parallelism"].fields["parallel.tp"][1].value
    assert "Tensor (tp) must divide Heads = 64 (you gave 3); offered: 1, 2, 4 or 8" in text
    assert text.count("offered") == 1


def test_lists_offer_each_thing_once_and_in_its_place(app):
    hw = app.panels["Hardware"]
    gpus = [label for label, _ in hw.gpu.options]
    assert not any("epyc" in g.lower() or "cpu" in g.lower() for g in gpus)
    intra = [label for label, _ in hw.intra.options]
    assert len({label.rsplit(" (", 1)[0] for label in intra}) == len(intra)   # NVLink 4 once
    inter = [key for _, key in hw.inter.options]
    assert inter and not any(k.startswith(("nvlink", "pcie")) for k in inter)
    assert any(k.startswith("pcie") for _, k in hw.intra.options)


def test_one_glossary_gives_the_page_its_tooltips(app):
    for word in ("TP", "PP", "DP", "ZeRO", "SP", "CP", "EP", "MFU", "micro-batch", "bubble",
                 "Pareto"):
        assert term(word) is not None and len(explain(word)) > 40, word
    assert term("tensor parallel") is GLOSSARY["tp"]
    par = app.panels["Parallelism"]
    assert par.tp.tooltip == explain("TP") and par.zero.tooltip == explain("ZeRO")
    assert app.panels["Training"].micro_batch.tooltip == explain("micro-batch")
    assert "What the words mean" in app.glossary.value and "Pareto front" in app.glossary.value


def test_labels_sit_apart(app):
    from workbench.plan import Constraints, plan

    tl = _figure(app.timeline.widget)["layout"]
    assert tl["legend"]["x"] > 1 and tl["legend"]["orientation"] == "v"   # off the axis title
    st = _figure(app.step.widget)["layout"]
    assert st["xaxis"]["automargin"] and st["margin"]["b"] >= 100
    assert _figure(app.mesh.widget)["layout"]["title"]["xanchor"] == "left"
    assert all(d.layout.width == "300px" for d in app.planner.fix.values())   # "any" whole
    app.planner.result = plan(app.state.scenario, Constraints())
    app.planner._show()
    notes = _figure(app.planner.chart.widget)["layout"]["annotations"]
    assert [a["text"] for a in notes] == ["#1", "#2", "#3", "#4", "#5"]
    assert len({(a["ax"], a["ay"]) for a in notes}) == 5                      # fanned out


def test_the_trial_says_what_ran_and_what_it_cannot_test(app):
    from widgets.panels.trial import untested, what_ran_html
    from workbench.trial import prepare_trial

    app.state.update({"training.offload": "cpu"})
    assert app.state.valid
    trial, notes = prepare_trial(app.state.scenario, 2, "gloo")
    words = untested(app.state.scenario, trial)
    assert any(w.startswith("offload cpu") for w in words)
    text = what_ran_html(app.state.scenario, trial, words, notes)
    assert f"scaled down to {trial.model.layers} layers" in text and "offload cpu" in text
    assert app.trial.what_ran in app.trial.box.children                # on the page
    bars = [t for t in app.trial_charts.widget.data if t.type == "bar"]
    assert bars and all(t.texttemplate for t in bars)          # memory bars say their value


def test_compare_any_two_and_saved_scenarios(app, tmp_path):
    app.files.save("brief box")
    assert "saved as" in app.files.store_status.value
    app.panels["Parallelism"].tp.value = 8
    app.files.save("tp 8")
    app.files.save("../etc/passwd")
    assert "a scenario name is" in app.files.store_status.value
    assert sorted(p.name for p in (tmp_path / "scenarios").iterdir()) == [
        "brief box.yaml", "tp 8.yaml"]
    assert list(app.files.saved.options) == ["brief box", "tp 8"]
    app.comparer.a.value, app.comparer.b.value = "saved: brief box", "saved: tp 8"
    table = app.compare.value
    assert "dp 8 tp 1" in table and "dp 1 tp 8" in table and "fff8c5" in table
    app.files.open_saved("brief box")
    assert app.state.doc["parallel"]["tp"] == 1 and "opened" in app.files.store_status.value
    name = app.comparer.add_trial({"world_size": 2, "backend": "gloo", "layout": {
        "dp": 2, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero": 3}, "model": {"layers": 2},
        "ranks": [{"step_time_s": [0.5, 0.1, 0.1], "measured": {"allocated": 2048},
                   "predicted": {"params": 1024}}]}, "Llama 3.1 70B", ["offload cpu: x"])
    app.comparer.a.value, app.comparer.b.value = name, "saved: tp 8"
    assert "100.0 ms measured" in app.compare.value and "offload cpu: x" in app.compare.value


def test_compare_names_method_quantisation_engine_and_optimizer(app):
    """Issue 54: QLoRA against LoRA could not be told apart in Compare."""
    from widgets.compare import scenario_rows

    qlora, lora = (dict(app.state.doc, training={**app.state.doc["training"], "method": m})
                   for m in ("qlora", "lora"))
    a, b = scenario_rows(qlora), scenario_rows(lora)
    assert a["method"].startswith("QLoRA (rank ") and b["method"].startswith("LoRA (rank ")
    assert a["quantisation"].startswith("nf4") and b["quantisation"].startswith("none")
    assert a["engine"] == b["engine"] == "generic (idealised)"
    assert a["optimizer"] == "adamw"
    app.comparer.a.value = app.comparer.b.value = "the scenario on the page"
    for row in ("method", "quantisation", "engine", "optimizer"):
        assert f">{row}</th>" in app.compare.value


def test_the_store_refuses_bad_names_and_unsafe_folders(tmp_path):
    from workbench.scenario.store import ScenarioStore, check_name

    for bad in ("", "..", "../x", "a/b", ".hidden", "x" * 65, None, "a\x00b"):
        with pytest.raises(ScenarioError):
            check_name(bad)
    assert check_name(" my box-2.v1 ") == "my box-2.v1"
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    os.symlink(real, link)
    with pytest.raises(ScenarioError, match="symlink"):
        ScenarioStore(link).save("x", "hardware: {}\n")
    store = ScenarioStore(tmp_path / "ok")
    assert store.names() == [] and not (tmp_path / "ok").exists()   # nothing made on reading
    with pytest.raises(ScenarioError):
        store.save("x", "a: [unclosed")                               # only documents stored
    store.save("x", "model: llama3-8b\n")
    assert store.load("x") == {"model": "llama3-8b"}
    assert (os.stat(tmp_path / "ok").st_mode & 0o077) == 0


def test_words_never_quote_python():
    from widgets.words import problem_words

    p = Problem("parallel", {"tp": 8, "dp": 1, "pp": 1, "cp": 1},
                "dp*tp*pp*cp = 1*8*1*1 = 8 must equal hardware.gpus_per_node*nodes = 6*1 = 6")
    text = problem_words(p, {"hardware.gpus_per_node": "GPUs per node"})
    assert text == ("Layout dp × tp × pp × cp = 1 × 8 × 1 × 1 = 8 must equal GPUs per node × "
                    "nodes = 6 × 1 = 6 (you gave dp 1, tp 8, pp 1, cp 1)")
    assert "'" not in problem_words(Problem("training.optimizer", "adam", "choose adamw"))
