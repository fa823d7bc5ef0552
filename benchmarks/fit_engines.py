"""Fit the engines' underivable constants on measured runs, and say how well they predict
runs they were not fitted on.

The constants (``workbench/estimate/engine_terms.py``): per engine a ``time_factor`` (its
kernels' sustained speed in a real step against the idealised stack); for every engine one
``attention_factor`` (fused attention inside a training step against its published kernel
benchmarks) and one ``moe_layer_s`` (an MoE layer's fixed routing/dispatch cost per pass).
Everything else an engine changes is derived from its source (workbench/engines/).

How: every run is estimated three times — at (k, a, m) = (1, 1, 0), with the attention
factor 2, and with 1 ms per MoE layer — and its step is taken as linear in a and m between
those (exact where no overlap changes which term is exposed), times k. Over a grid of (a, m),
each engine's k is the one that makes its runs' median error 0; the (a, m) kept is the one with
the smallest mean over sources of each source's median |error| (every publication weighs the
same, so the 201 rows of one benchmark table do not decide the shared constants alone). An
engine without runs takes the run-weighted geometric mean of the fitted factors (``pooled``);
``generic`` is never fitted. Every figure reported is then an exact estimate with the fitted
constants.

Leave-one-source-out (LOSO): for each source (a benchmark table, paper or repository: the
record id's first word), refit on every other source and score the left-out one; an engine
whose only source is left out falls back to the pooled factor, as a user of an engine with no
published runs would. The LOSO error per engine and regime (dense / MoE) is the band each
estimate carries. Also reported: the in-sample error, runs off by more than 2x, and, within
each published comparison (records sharing ``comparison``), the pairs ordered as measured and
whether the estimated best is the measured best.

    .venv/bin/python benchmarks/fit_engines.py            # fit, report, write fitted.json
    .venv/bin/python benchmarks/fit_engines.py --check    # report the committed fit only
    .venv/bin/python benchmarks/fit_engines.py --plots    # also docs/engine-accuracy.md and
                                                          # one predicted-vs-measured SVG per
                                                          # engine under docs/engine-accuracy/
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import yaml  # noqa: E402

from accuracy import DATA, compare, source_of, to_scenario  # noqa: E402
from workbench.errors import ScenarioError  # noqa: E402
from workbench.estimate.engine_terms import FITTED, fitted, trying  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402

ATTENTION_GRID = np.round(np.arange(0.8, 2.51, 0.05), 3)
MOE_GRID_S = np.round(np.arange(0.0, 0.01001, 0.0002), 6)


def load() -> list[tuple[dict, object]]:
    """(record, scenario) of every record the estimator accepts and that measured a speed."""
    out = []
    for rec in yaml.safe_load(DATA.read_text()):
        try:
            s = parse_scenario(to_scenario(rec))
        except ScenarioError:
            continue
        if "error" in compare(rec, s):
            out.append((rec, s))
    return out


def errors(runs, constants: dict) -> list[dict]:
    """Each run's comparison row under ``constants``."""
    with trying(constants):
        return [{**compare(rec, s), "source_key": source_of(rec),
                 "comparison": rec.get("comparison")} for rec, s in runs]


def basis(runs) -> dict:
    """Per run: the measured step, the estimated step at (1, 1, 0) and its slopes in the
    attention factor and in the MoE-layer seconds; the engine of each run."""
    flat = {"engines": {}, "pooled": {"time_factor": 1.0}, "attention_factor": 1.0,
            "moe_layer_s": 0.0}
    r0 = errors(runs, flat)
    ra = errors(runs, {**flat, "attention_factor": 2.0})
    rm = errors(runs, {**flat, "moe_layer_s": 0.001})
    s0 = np.array([r["step"] for r in r0])
    return {"measured": s0 / (1 + np.array([r["error"] for r in r0])), "s0": s0,
            "da": np.array([r["step"] for r in ra]) - s0,
            "dm": (np.array([r["step"] for r in rm]) - s0) / 0.001,
            "engine": np.array([r["engine"] for r in r0]),
            "source": np.array([r["source_key"] for r in r0])}


def fit(b: dict, train: np.ndarray) -> dict:
    """The constants fitted on the runs ``train`` (a mask) of basis ``b``."""
    fitted_e = [str(e) for e in sorted(set(b["engine"][train])) if e != "generic"]
    on = train & (b["engine"] != "generic")
    sources = [on & (b["source"] == src) for src in sorted(set(b["source"][on]))]
    best = None
    for a, m in itertools.product(ATTENTION_GRID, MOE_GRID_S):
        ratio = (b["s0"] + (a - 1) * b["da"] + m * b["dm"]) / b["measured"]
        k = {e: 1 / np.median(ratio[on & (b["engine"] == e)]) for e in fitted_e}
        scale = np.array([k.get(e, 1.0) for e in b["engine"]])
        err = np.abs(scale * ratio - 1)
        score = np.mean([np.median(err[mask]) for mask in sources])
        if best is None or score < best[0]:
            best = (score, a, m, k)
    _, a, m, k = best
    runs = {e: int((on & (b["engine"] == e)).sum()) for e in fitted_e}
    n = sum(runs.values())
    pooled = math.exp(sum(runs[e] * math.log(k[e]) for e in fitted_e) / n) if n else 1.0
    return {"engines": {e: {"time_factor": round(float(k[e]), 4), "runs": runs[e]}
                        for e in fitted_e},
            "pooled": {"time_factor": round(pooled, 4)}, "attention_factor": float(a),
            "moe_layer_s": float(m)}


def loso(runs, b: dict) -> list[dict]:
    """Every run scored exactly by the fit that left its source out."""
    out = []
    for src in sorted(set(b["source"])):
        train = b["source"] != src
        c = fit(b, train)
        out += errors([run for run, t in zip(runs, train) if not t], c)
    return out


def summary(rows: list[dict]) -> dict:
    errs = sorted(abs(r["error"]) for r in rows)
    if not errs:
        return {"runs": 0}
    return {"runs": len(errs), "median": statistics.median(errs),
            "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))],
            "off_by_2x": sum(1 for r in rows if not 0.5 <= 1 + r["error"] <= 2)}


def choices(rows: list[dict]) -> dict:
    """Pair ordering and best-of-comparison agreement within published comparisons."""
    groups = defaultdict(list)
    for r in rows:
        if r.get("comparison"):
            groups[r["comparison"]].append(r)
    pairs = agree = best_ok = n_groups = 0
    for group in groups.values():
        if len(group) < 2:
            continue
        n_groups += 1
        meas = [r["step"] / (1 + r["error"]) for r in group]
        est = [r["step"] for r in group]
        for i, j in itertools.combinations(range(len(group)), 2):
            if abs(meas[i] / meas[j] - 1) <= 0.05:
                continue
            pairs += 1
            agree += (meas[i] < meas[j]) == (est[i] < est[j])
        best_ok += min(range(len(group)), key=lambda i: est[i]) == min(
            range(len(group)), key=lambda i: meas[i])
    return {"comparisons": n_groups, "pairs": pairs,
            "pairs_ordered": agree / pairs if pairs else None,
            "best_is_best": best_ok / n_groups if n_groups else None}


def bands(rows: list[dict], kind: str) -> dict:
    """Median |error| per engine and regime (the band an estimate shows)."""
    out: dict = {}
    by = defaultdict(list)
    for r in rows:
        by[r["engine"], "moe" if r["moe"] else "dense"].append(r)
        by[r["engine"], "all"].append(r)
    for (e, regime), rs in sorted(by.items()):
        sm = summary(rs)
        out.setdefault(e, {})[regime] = {"median": round(sm["median"], 4), "runs": sm["runs"],
                                         "kind": kind}
    return out


def report(name: str, rows: list[dict]) -> None:
    sm, ch = summary(rows), choices(rows)
    line = (f"{name:28} runs {sm['runs']:4}  median |error| {sm['median']:6.1%}  p90 "
            f"{sm['p90']:6.1%}  off by >2x {sm['off_by_2x']:3}")
    if ch["pairs"]:
        line += f"  pairs ordered {ch['pairs_ordered']:5.1%} of {ch['pairs']}"
    if ch["comparisons"]:
        line += f"  best = measured best {ch['best_is_best']:5.1%} of {ch['comparisons']}"
    print(line)


DOCS = ROOT / "docs"


def svg_plot(engine: str, rows_in: list[dict], rows_cv: list[dict]) -> str:
    """Predicted against measured step time (log-log), in-sample and leave-one-source-out,
    with the y = x line and the 2x band: a self-contained SVG."""
    pairs = [(r["step"] / (1 + r["error"]), r["step"]) for r in rows_in + rows_cv]
    lo = min(min(p) for p in pairs) / 1.5
    hi = max(max(p) for p in pairs) * 1.5
    size, pad = 420, 56

    def xy(meas: float, est: float) -> tuple[float, float]:
        f = lambda v: (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return pad + f(meas) * (size - 2 * pad), size - pad - f(est) * (size - 2 * pad)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{size}" height="{size}" fill="white"/>',
           f'<text x="{size / 2}" y="18" text-anchor="middle" font-size="13">{engine}: '
           f'estimated vs measured step time ({len(rows_in)} runs)</text>']
    for k, dash in ((1, ""), (2, ' stroke-dasharray="4 3"'), (0.5, ' stroke-dasharray="4 3"')):
        (x0, y0), (x1, y1) = xy(lo, lo * k), xy(hi, hi * k)
        out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" '
                   f'stroke="#888"{dash}/>')
    decade = 10 ** math.floor(math.log10(lo))
    while decade <= hi:
        if decade >= lo:
            x, _ = xy(decade, lo)
            _, y = xy(lo, decade)
            out += [f'<text x="{x:.1f}" y="{size - pad + 16}" text-anchor="middle">'
                    f'{decade:g} s</text>',
                    f'<text x="{pad - 6}" y="{y + 4:.1f}" text-anchor="end">{decade:g} s</text>']
        decade *= 10
    out += [f'<text x="{size / 2}" y="{size - 14}" text-anchor="middle">measured step '
            '(published)</text>',
            f'<text x="14" y="{size / 2}" text-anchor="middle" transform="rotate(-90 14 '
            f'{size / 2})">estimated step</text>']
    for rows, colour, label, ly in ((rows_in, "#1f77b4", "in-sample", 40),
                                    (rows_cv, "#d62728", "leave-one-source-out", 56)):
        for r in rows:
            x, y = xy(r["step"] / (1 + r["error"]), r["step"])
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.6" fill="{colour}" '
                       f'fill-opacity="0.6"><title>{r["id"]}: {r["error"]:+.1%}</title>'
                       '</circle>')
        out += [f'<circle cx="{pad + 8}" cy="{ly - 4}" r="3" fill="{colour}"/>',
                f'<text x="{pad + 16}" y="{ly}">{label}, median |error| '
                f'{summary(rows)["median"]:.1%}</text>']
    return "\n".join(out + ["</svg>"]) + "\n"


def write_docs(c: dict, in_sample: list[dict], cv: list[dict]) -> None:
    """docs/engine-accuracy.md and one SVG per engine (docs/engine-accuracy/ENGINE.svg)."""
    folder = DOCS / "engine-accuracy"
    folder.mkdir(exist_ok=True)
    lines = ["# Step-time accuracy per engine", "",
             "Generated by `.venv/bin/python benchmarks/fit_engines.py --plots` from "
             "`benchmarks/data/published_runs.yaml` and the committed fit "
             "(`workbench/engines/fitted.json`); do not edit by hand.", "",
             "| engine | runs | time factor | in-sample median | LOSO median | LOSO p90 | "
             "LOSO off by >2x |", "|---|---|---|---|---|---|---|"]
    for e in sorted({r["engine"] for r in in_sample}):
        ri = [r for r in in_sample if r["engine"] == e]
        rc = [r for r in cv if r["engine"] == e]
        k = c["engines"].get(e, {}).get("time_factor")
        si, sc = summary(ri), summary(rc)
        lines.append(f"| {e} | {si['runs']} | {f'{k:.3f}' if k else 'unfitted'} | "
                     f"{si['median']:.1%} | {sc['median']:.1%} | {sc['p90']:.1%} | "
                     f"{sc['off_by_2x']} |")
        (folder / f"{e}.svg").write_text(svg_plot(e, ri, rc))
    si, sc, ch = summary(in_sample), summary(cv), choices(cv)
    lines += ["", f"All engines: in-sample median |error| {si['median']:.1%}, "
              f"leave-one-source-out {sc['median']:.1%} (p90 {sc['p90']:.1%}), "
              f"{sc['off_by_2x']} runs off by more than 2x; within {ch['comparisons']} "
              f"published comparisons {ch['pairs_ordered']:.0%} of {ch['pairs']} pairs are "
              f"ordered as measured and the estimated best is the measured best in "
              f"{ch['best_is_best']:.0%}.", "",
              f"Shared constants: attention factor {c['attention_factor']:.2f}, MoE layer "
              f"{c['moe_layer_s'] * 1e3:.1f} ms per pass.", ""]
    lines += [f"![{e}](engine-accuracy/{e}.svg)" for e in sorted({r["engine"]
                                                                  for r in in_sample})]
    (DOCS / "engine-accuracy.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report the committed fit only")
    ap.add_argument("--plots", action="store_true",
                    help="write docs/engine-accuracy.md and its SVGs")
    args = ap.parse_args(argv)
    runs = load()
    b = None if args.check else basis(runs)
    c = fitted() if args.check else fit(b, np.ones(len(runs), bool))
    in_sample = errors(runs, c)
    unfitted = errors(runs, {})       # every engine's derived conventions, constants 1, 1, 0
    cv = loso(runs, b) if not args.check else None
    for e in sorted({r["engine"] for r in in_sample}):
        k = c["engines"].get(e, {}).get("time_factor")
        print(f"engine {e:11} time_factor " + (f"{k:.3f}" if k else "unfitted" if
                                               e == "generic" else "pooled"))
    print(f"attention_factor {c.get('attention_factor', 1):.2f}; moe_layer_s "
          f"{c.get('moe_layer_s', 0) * 1e3:.2f} ms\n")
    report("unfitted (1, 1, 0 ms)", unfitted)
    report("in-sample", in_sample)
    if cv is not None:
        report("leave-one-source-out", cv)
        by_src = defaultdict(list)
        for r in cv:
            by_src[r["source_key"]].append(r)
        for src, rs in sorted(by_src.items()):
            sm = summary(rs)
            print(f"  LOSO {src:14} runs {sm['runs']:4}  median |error| {sm['median']:6.1%}")
        by_eng = defaultdict(list)
        for r in cv:
            by_eng[r["engine"]].append(r)
        for e, rs in sorted(by_eng.items()):
            report(f"  LOSO engine {e}", rs)
        c["bands"] = bands(cv, "leave-one-source-out")
        c["fitted_on"] = f"{len(runs)} runs of benchmarks/data/published_runs.yaml"
        c["command"] = "benchmarks/fit_engines.py"
        FITTED.write_text(json.dumps(c, indent=1, sort_keys=True) + "\n")
        print(f"\nwrote {FITTED.relative_to(ROOT)}")
        if args.plots:
            write_docs(c, in_sample, cv)
            print("wrote docs/engine-accuracy.md and docs/engine-accuracy/*.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
