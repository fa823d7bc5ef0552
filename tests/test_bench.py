"""`workbench bench`: nccl-tests' definitions, real gloo runs at 2 and 4 ranks, the CLI's JSON,
text and plot, bad input, and no process left behind on any outcome."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import psutil
import pytest

from tests.conftest import ROOT
from workbench.bench import COLLECTIVES, COLUMNS, BenchFailed, busbw_factor, run_bench
from workbench.bench import runner
from workbench.bench.definitions import buffer_bytes, parse_size, size_ladder
from workbench.bench.result import op_time, to_json, to_text
from workbench.cli import main

SIZES = [1024, 4096]
WORLDS = [2, 4]


def _alive_children() -> list:
    """Live children of this process, but multiprocessing's resource tracker: spawn starts one
    per parent and it lives as long as the parent (it is not a rank)."""
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() == psutil.STATUS_ZOMBIE or "resource_tracker" in " ".join(c.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        out.append(c)
    return out


@pytest.fixture(scope="module")
def sweep():
    """One real run: every collective, 1 and 4 KiB, 2 and 4 ranks (1-5 s here)."""
    events = []
    df = run_bench(WORLDS, min_bytes="1K", max_bytes="4K", step_factor=4, warmup=1, iters=3,
                   on_event=events.append)
    return df, events


# --- definitions (pure) -----------------------------------------------------------------------

@pytest.mark.parametrize("n", range(2, 9))
def test_busbw_factors_are_nccl_tests_and_the_estimators(n):
    from workbench.estimate.time.collectives import FACTORS

    assert busbw_factor("all_reduce", n) == 2 * (n - 1) / n
    for name in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(name, n) == (n - 1) / n
    assert busbw_factor("broadcast", n) == busbw_factor("send_recv", n) == 1.0
    for name, factor in FACTORS.items():      # the estimator models with the same factors
        assert busbw_factor(name, n) == factor(n)


def test_sizes_follow_nccl_tests():
    assert size_ladder(1024, 256 << 20, 4) == [1024 * 4 ** k for k in range(10)]
    assert size_ladder(1024, 5000, 4) == [1024, 4096, 5000]
    assert parse_size("64K") == 65536 and parse_size("1MiB") == 1 << 20 and parse_size(8) == 8
    with pytest.raises(ValueError):
        parse_size("1 MB/s")
    # the chunked collectives move a whole number of float32 chunks, as nccl-tests rounds
    assert buffer_bytes("all_gather", 1024, 3) == 1020     # 255 of 256 float32
    assert buffer_bytes("all_reduce", 1024, 3) == 1024


def test_time_is_the_slowest_ranks_median():
    assert op_time({0: [1.0, 2.0, 100.0], 1: [3.0, 3.0, 3.0]}) == 3.0


# --- real runs ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_rows_columns_and_bytes_as_requested(sweep):
    df, _ = sweep
    assert list(df.columns) == list(COLUMNS) == ["collective", "bytes", "world_size", "time_s",
                                                 "algbw_gb_per_s", "busbw_gb_per_s"]
    got = sorted(zip(df.collective, df.world_size, df.bytes))
    assert got == sorted((c, w, b) for c in COLLECTIVES for w in WORLDS for b in SIZES)
    assert df.attrs["backend"] == "gloo" and len(df.attrs["iterations"]) == len(df)


@pytest.mark.slow
def test_bandwidths_follow_the_definitions(sweep):
    df, _ = sweep
    for r in df.itertuples():
        assert r.time_s > 0 and math.isfinite(r.time_s)
        assert r.algbw_gb_per_s == r.bytes / r.time_s / 1e9
        factor = busbw_factor(r.collective, r.world_size)
        assert r.busbw_gb_per_s == r.algbw_gb_per_s * factor
        assert math.isclose(r.busbw_gb_per_s / r.algbw_gb_per_s, factor, rel_tol=1e-12)


@pytest.mark.slow
def test_events_stream_and_outputs_render(sweep):
    df, events = sweep
    assert [e["type"] for e in events].count("start") == len(WORLDS)
    assert events[-1]["type"] == "end" and events[-1]["wall_s"] > 0
    rows = json.loads(to_json(df))
    assert len(rows) == len(df) and all(list(r) == list(COLUMNS) for r in rows)
    text = to_text(df)
    assert "busbw (GB/s)" in text and len(text.splitlines()) == len(df) + 2


@pytest.mark.slow
def test_no_process_left_after_runs(sweep):
    assert _alive_children() == []


@pytest.mark.slow
@pytest.mark.parametrize("how, expected", [
    ("raise", "rank 1 failed while all_reduce 1 KiB"),
    ("kill", "rank 1 was killed by signal 9"),
    ("hang", "rank 1 stopped making progress"),
])
def test_a_failing_rank_is_named_and_reaped(how, expected):
    with pytest.raises(BenchFailed) as info:
        run_bench(2, quick=True, collectives="all_reduce", stall_s=2,
                  _inject={"inject": how, "inject_rank": 1})
    msg = str(info.value)
    assert expected in msg and "\n" not in msg
    assert _alive_children() == []


def test_spawned_ranks_get_everything_by_pickle():
    """nccl ranks are spawned (a fresh interpreter unpickles the target and its arguments);
    no GPU here to run them, and a real spawn costs 5-12 s on this box, so check the parts."""
    import pickle

    from workbench.bench.collectives import RankArgs, run_rank

    assert runner.start_method("nccl") == "spawn" and runner.start_method("gloo") == "fork"
    args = RankArgs(rank=1, world=2, port=1, backend="nccl", collectives=COLLECTIVES,
                    sizes=(1024,), warmup=1, iters=3, min_iters=3, budget_s=0.0, timeout_s=5)
    assert pickle.loads(pickle.dumps((run_rank, args))) == (run_rank, args)


# --- command line -------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_json_and_plot(tmp_path):
    html = tmp_path / "bench.html"
    out = subprocess.run(
        [sys.executable, "-m", "workbench", "bench", "--quick", "--world-size", "4",
         "--collectives", "all_reduce,send_recv", "--max-bytes", "4K", "--step-factor", "4",
         "--json", "--plot", str(html)],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["collective"], r["bytes"], r["world_size"]) for r in rows] == [
        (c, b, 4) for c in ("all_reduce", "send_recv") for b in (1024, 4096)]
    assert all(list(r) == list(COLUMNS) and r["time_s"] > 0 for r in rows)
    page = html.read_text()
    # plotly.js inlined (its bundle is ~4.7 MB), no <script src=...> from a CDN
    assert '<script src="http' not in page and "busbw" in page and len(page) > 1_000_000


@pytest.mark.parametrize("argv, option", [
    (["--world-size", "1"], "--world-size"),
    (["--world-size", "99"], "--world-size"),
    (["--world-size", "two"], "--world-size"),
    (["--collectives", "all_reduce,all_reduce_perf"], "--collectives"),
    (["--min-bytes", "1M", "--max-bytes", "4K"], "--min-bytes"),
    (["--min-bytes", "lots"], "--min-bytes"),
    (["--step-factor", "x"], "--step-factor"),
    (["--iters", "0"], "--iters"),
    (["--backend", "mpi"], "--backend"),
])
def test_bad_input_exits_2_with_one_line_naming_the_option(argv, option, capsys):
    try:
        rc = main(["bench", *argv])
    except SystemExit as exc:       # argparse's own checks (type=int)
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and option in err and "Traceback" not in err


def test_refuses_more_memory_than_the_machine_has():
    from workbench.errors import ScenarioError

    with pytest.raises(ScenarioError, match="--max-bytes.*this machine has 1.9 GiB available"):
        runner.make_config(8, max_bytes="256M", _available=2e9)


def test_package_import_is_light_and_the_figure_needs_no_widgets():
    code = (
        "import sys, workbench.bench; "
        "light = [m for m in ('torch', 'pandas', 'plotly') if m in sys.modules]; "
        "import pandas as pd; from workbench.bench import figure; "
        "df = pd.DataFrame({'collective': ['all_reduce', 'all_reduce', 'broadcast'], "
        "'bytes': [1024, 4096, 1024], 'world_size': [2, 2, 4], 'time_s': [1e-3, 2e-3, 1e-3], "
        "'algbw_gb_per_s': [1e-3, 2e-3, 1e-3], 'busbw_gb_per_s': [1e-3, 2e-3, 1e-3]}); "
        "fig = figure(df); "
        "print(light, type(fig).__name__, fig.layout.xaxis.type, len(fig.data), "
        "'ipywidgets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.split() == ["[]", "Figure", "log", "2", "False"]
