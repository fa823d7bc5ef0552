"""The comparison as text: the matrix (one line per trial), its summary, and one trial's rows."""
from __future__ import annotations

import statistics
from collections.abc import Iterable

from workbench.proof.compare import STEP_TIME_BOUND, Row
from workbench.proof.matrix import Outcome
from workbench.units import memory_text

HEADER = (f"{'trial':30} {'depth':5} {'ranks':>5}  {'states':>8} {'traffic':>8} "
          f"{'activations':>12}  {'step predicted':>14} {'measured':>9} {'error':>7}")


def _exact(rows: list[Row], prefix: str | tuple) -> str:
    mine = [r for r in rows if r.kind == "exact" and r.component.startswith(prefix)]
    good = sum(r.ok for r in mine)
    return f"{good}/{len(mine)}" if mine else "-"


def _step(rows: list[Row]) -> Row | None:
    return next((r for r in rows if r.component == "step time"), None)


def matrix_line(out: Outcome) -> str:
    """One trial of the matrix: exact rows passed / total (model states, traffic), the largest
    activation error, and step time predicted vs measured."""
    c = out.case
    head = f"{c.label:30} {c.depth:5} {c.world:>5}  "
    if out.error:
        return head + f"FAILED: {out.error}"
    act = [r.error for r in out.rows if r.component == "activations"]
    worst = max(act, key=abs) if act else 0.0
    line = (head + f"{_exact(out.rows, ('params', 'grads', 'optimizer')):>8} "
            f"{_exact(out.rows, 'comm'):>8} {worst:>+12.1%}  ")
    st = _step(out.rows)
    if st is not None:
        line += (f"{st.predicted * 1e3:>11.1f} ms {st.measured * 1e3:>6.1f} ms "
                 f"{st.error:>+7.0%}{'' if st.ok else ' *'}")
    return line


def summary(outcomes: Iterable[Outcome]) -> list[str]:
    """Totals over the matrix."""
    outcomes = list(outcomes)
    rows = [r for o in outcomes for r in o.rows]
    exact = [r for r in rows if r.kind == "exact"]
    act = [r for r in rows if r.component == "activations"]
    steps = [r for r in rows if r.component == "step time"]
    failed = [o.case.label for o in outcomes if o.error]
    lines = [f"trials: {len(outcomes) - len(failed)} of {len(outcomes)} ran"
             + (f" (failed: {', '.join(failed)})" if failed else ""),
             f"exact rows (model-state bytes per rank, traffic bytes and counts per dimension): "
             f"{sum(r.ok for r in exact)} of {len(exact)} equal"]
    if act:
        lines.append(f"activations: {sum(r.ok for r in act)} of {len(act)} ranks within 5 %, "
                     f"errors {min(r.error for r in act):+.1%} .. {max(r.error for r in act):+.1%}")
    if steps:
        errs = [abs(r.error) for r in steps]
        lines.append(f"step time on the calibrated profile: {sum(r.ok for r in steps)} of "
                     f"{len(steps)} trials within {STEP_TIME_BOUND:.0%}; median |error| "
                     f"{statistics.median(errs):.0%}, largest {max(errs):.0%} "
                     "(error = measured / predicted - 1; * = outside the bound)")
    return lines


def cells(r: Row) -> tuple[str, str, str, str, str, str]:
    """(rank, component, predicted, measured, error, check) of a row, as text."""
    err = "" if r.error is None else f"{r.error:+.1%}"
    check = ("exact" if r.ok else "DIFFERS") if r.kind == "exact" else (
        f"{'ok' if r.ok else 'OUTSIDE'} (+-{r.bound:.0%})")

    def fmt(v):
        if v is None:
            return "-"
        if r.unit == "s":
            return f"{v * 1e3:,.2f} ms"
        if r.unit == "B":    # for people, with the exact count the check compares
            return f"{memory_text(v)} ({v:,.0f} B)" if v else "0 B"
        return f"{v:,.0f}{' ' + r.unit if r.unit else ''}"

    return ("all" if r.rank is None else str(r.rank), r.component, fmt(r.predicted),
            fmt(r.measured), err, check)


def trial_rows(rows: list[Row]) -> list[str]:
    """Every row of one trial: rank, component, predicted, measured, error, verdict."""
    out = [f"{'rank':>4}  {'component':42} {'predicted':>26} {'measured':>26} {'error':>8}  "
           "check"]
    for r in rows:
        rank, comp, pred, meas, err, check = cells(r)
        out.append(f"{rank:>4}  {comp:42} {pred:>26} {meas:>26} {err:>8}  {check}")
    return out
