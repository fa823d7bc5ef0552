"""Property: whatever a scenario document, a ``--set`` value or an option holds, ``workbench``
ends with success or exit 2 and one line — never a traceback, a hang, a leftover process, a
raw control character on the terminal, or a command run from a value (an exported launch
script is run with stub launchers to see that).

Hypothesis draws the values (its own integers, floats and text besides tests/hostile.py's
lists); each case runs in a forked child with a deadline (tests/hostile.py: ``run_case``). The
thousands-of-cases run is benchmarks/hostile_fuzz.py. The dashboard takes the same documents
in its YAML tab: each shows the scenario or a message, never an exception, within a deadline.
"""
from __future__ import annotations

import copy
import json
import random
import signal

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.hostile import (
    EDGE_VALUES, EXPORT_TARGETS, HOSTILE_VALUES, OPTIONS, RAW_YAML, Case, example_docs,
    key_paths, mutated_document, refused_by_parser, run_case, special_file_cases,
)

pytestmark = pytest.mark.slow
DOCS = example_docs()
DEADLINE_S = 60.0        # a case that takes longer on a loaded 2-core machine is a hang
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

values = st.one_of(
    st.sampled_from(HOSTILE_VALUES), st.sampled_from(EDGE_VALUES),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.lists(st.integers(-3, 3), max_size=3), st.booleans(), st.none())


@st.composite
def documents(draw) -> str:
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(key_paths(doc)))
        node = doc
        for k in path[:-1]:
            node = node[k] if isinstance(node.get(k), dict) else node.setdefault(k, {})
        node[path[-1]] = draw(values)
    return yaml.safe_dump(doc, allow_unicode=True, width=10 ** 6)


def _verb(draw) -> list[str]:
    # plan searches for seconds: one case in eight, so the property stays a minute
    verb = draw(st.sampled_from(["estimate"] * 3 + ["export"] * 4 + ["plan"]))
    if verb == "export":
        return ["export", "{dir}/s.yaml", "--to", draw(st.sampled_from(EXPORT_TARGETS))]
    if verb == "plan":
        return ["plan", "{dir}/s.yaml", "--top", "2"]
    return ["estimate", "{dir}/s.yaml"]


def _check(case: Case) -> None:
    out = run_case(case, DEADLINE_S)
    assert out.verdict in ("ok", "refused"), (
        f"{out.verdict} (exit {out.code}, {out.seconds:.1f} s) for workbench "
        f"{case.describe()}\n{case.files.get('s.yaml', '')[:2000]}\nstderr: {out.stderr[-2000:]}")


@SETTINGS
@given(st.data())
def test_a_hostile_document_is_refused_in_one_line_or_runs(data):
    argv = _verb(data.draw)
    _check(Case("document", argv, {"s.yaml": data.draw(documents())}))


@SETTINGS
@given(st.data())
def test_a_hostile_override_is_refused_in_one_line_or_runs(data):
    argv = _verb(data.draw)
    doc = data.draw(st.sampled_from(DOCS))
    key = data.draw(st.sampled_from([".".join(map(str, p)) for p in key_paths(doc)]
                                    + ["", "a.b.c", "hardware", ".", "model.moe.experts"]))
    raw = data.draw(st.one_of(st.sampled_from(RAW_YAML), values.map(
        lambda v: v if isinstance(v, str) else json.dumps(v))))
    _check(Case("override", argv + ["--set", f"{key}={raw}"],
                {"s.yaml": yaml.safe_dump(doc)}))


@SETTINGS
@given(st.data())
def test_a_hostile_option_is_refused_in_one_line(data):
    verb = data.draw(st.sampled_from(sorted(OPTIONS)))
    option = data.draw(st.sampled_from(OPTIONS[verb]))
    text = data.draw(st.one_of(st.text(max_size=30), st.integers().map(str),
                               st.floats().map(repr)))
    argv = [verb] + (["{dir}/s.yaml"] if verb in ("trial", "monitor", "plan") else [])
    argv += [option, text]
    # a value the parser accepts would start a trial, a server or a measurement: not here
    assume(verb == "plan" or refused_by_parser(argv))
    _check(Case("option", argv, {"s.yaml": yaml.safe_dump(DOCS[0])}))


def _alarm(*_):
    raise TimeoutError(f"a document took more than {DEADLINE_S:g} s in the dashboard")


def test_the_dashboard_yaml_tab_takes_any_hostile_document():
    """The YAML tab (and an upload, the same path) with hostile documents: the page shows the
    scenario or the validator's message — no exception from a panel that cannot show a value
    (a date in a number box, an unknown preset in its dropdown, 8.0 GPUs), no hang."""
    from widgets.app import App

    app = App("llama3-8b-8xh100")
    rng = random.Random(11)
    texts = [mutated_document(rng, DOCS) for _ in range(120)]
    texts += [t for c in special_file_cases()[:9] for t in c.files.values()]   # bombs, deep...
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for text in texts:
            signal.alarm(int(DEADLINE_S))
            app.files.load_text(text)
            signal.alarm(0)
            assert not any("internal error" in str(p) for p in app.state.problems), text
            if app.state.problems:          # the last valid scenario stays beside the message
                assert app.state.scenario is not None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
