"""What every panel shares: widgets bound to document paths, the validator's message under each
field, and syncing the widgets when the document changes elsewhere (an example, an upload, a
planner row)."""
from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as w
import traitlets
from traitlets import TraitError

from widgets.state import ScenarioState, get_path
from widgets.words import problem_words
from workbench.glossary import explain
from workbench.units import count_text, hours_text, parse_count

# as wide as the panel allows: choices name products ("400GbE RoCE v2 (GPUDirect RDMA,
# ConnectX-7)", "1: ZeRO-1 / distributed optimizer") beside a 128 px description
FIELD_LAYOUT = w.Layout(width="96%", max_width="640px")
STYLE = {"description_width": "128px"}


class Panel:
    """A titled box of fields bound to one scenario section."""

    title = ""

    def __init__(self, state: ScenarioState) -> None:
        self.state = state
        self.fields: dict[str, tuple[w.ValueWidget, w.HTML, Callable, Callable]] = {}
        self._syncing = False
        self.box = w.VBox()
        state.on_change(lambda _s: self.refresh())

    def bind(self, path: str, widget: w.ValueWidget, to_doc: Callable = lambda v: v,
             from_doc: Callable = lambda v: v, on_set: Callable | None = None) -> w.VBox:
        """Write ``widget``'s value to ``path`` on every user change (``on_set`` may add
        dependent fields to the same update) and show that path's problems under it."""
        message = w.HTML(layout=w.Layout(margin="0 0 0 8px"))
        message.add_class("wb-field-message")
        self.fields[path] = (widget, message, to_doc, from_doc)

        def changed(change: dict) -> None:
            if self._syncing:
                return
            new = None if change["new"] is NULL else change["new"]
            if isinstance(widget, NumberBox):
                new = widget.parse(new)
                if not isinstance(new, (int, float)):
                    # what was typed goes into the document as typed (text, an empty field):
                    # the validator refuses it and the field keeps it beside the message
                    self.state.update({path: new})
                    return
            changes = {path: to_doc(new)}
            if on_set is not None:
                changes.update(on_set(new))
            self.state.update(changes)

        widget.observe(changed, names="value")
        return w.VBox([widget, message], layout=w.Layout(margin="0 0 2px 0"))

    def current(self, path: str, default: Any = None) -> Any:
        """The field's value: from the last valid scenario's full document (defaults filled
        in) unless the user's document says otherwise and the validator took it. A value the
        validator refused (a date in a number field, a degree of 10**40, an unknown preset)
        never drives the panels' options or arithmetic: they keep the last valid value, and the
        field's message says what was refused."""
        mine = get_path(self.state.doc, path, None)
        if mine is not None and not self._refused(path):
            return mine
        if self.state.scenario is not None:
            return get_path(self.state.scenario.document, path, default)
        return default

    def _refused(self, path: str) -> bool:
        """Whether the validator refused ``path``, a table holding it, or a field inside it."""
        return any(p.path == path or path.startswith(p.path + ".")
                   or p.path.startswith((path + ".", path + "["))
                   for p in self.state.problems)

    def refresh(self) -> None:
        """Sync widget values from the document and show each field's problems."""
        self._syncing = True
        try:
            self.before_refresh()
            for path, (widget, message, _to, from_doc) in self.fields.items():
                # the field shows what the document says, refused or not (beside the message)
                value = get_path(self.state.doc, path, None)
                value = self.current(path) if value is None else value
                try:
                    # a dropdown shows its word for null ("auto", "none", "any") as well
                    if value is not None or isinstance(widget, w.Dropdown):
                        show_value(widget, from_doc(value))
                except (TypeError, ValueError, ArithmeticError):   # from_doc on a refused value
                    pass
                message.value = "".join(
                    f"<div class='wb-error' style='color:#cf222e;font-size:12px'>"
                    f"{html.escape(m)}</div>" for m in self.field_messages(path))
        finally:
            self._syncing = False

    def labels(self) -> dict[str, str]:
        """Each bound path's label as the page shows it ("GPUs per node")."""
        return {p: f[0].description for p, f in self.fields.items() if f[0].description}

    def field_messages(self, path: str) -> list[str]:
        """The problems on ``path`` in words, with the values the field offers where it is
        a list of choices."""
        widget = self.fields[path][0]
        allowed = None
        if isinstance(widget, w.Dropdown):
            allowed = [v for v in widget._options_values if v is not NULL]
            if all(isinstance(v, int) and not isinstance(v, bool) for v in allowed):
                # a refused value shown as one more option is not on offer
                # a list: a refused value may be a list or a table (unhashable)
                bad = [p.value for p in self.state.problems if p.path == path]
                allowed = [v for v in allowed if v not in bad]
            else:
                allowed = None
        labels = self.state.labels if hasattr(self.state, "labels") else {}
        mine = [p for p in self.state.problems if p.path == path
                or p.path.startswith((path + ".", path + "["))]
        # the choices on offer once, after the first message
        return [problem_words(p, {**labels, **self.labels()}, allowed if i == 0 else None)
                for i, p in enumerate(mine)]

    def before_refresh(self) -> None:
        """Hook: recompute options (e.g. valid divisors) before values are synced."""


class _Null:
    """The value of a dropdown option that stands for null ("auto", "none", "any", "the
    layout's"). ipywidgets reads a value of None as "no selection" and shows a blank field even
    when an option holds None, so no option holds None: ``dropdown`` and ``set_options`` put
    NULL in its place, and ``chosen`` reads it back as None."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


def _options(options) -> list:
    return [(o[0], NULL if o[1] is None else o[1]) if isinstance(o, tuple) else o
            for o in options]


def chosen(widget: w.Dropdown) -> Any:
    """A dropdown's value, None for its null option."""
    return None if widget.value is NULL else widget.value


def _index_of(widget: w.Dropdown, value: Any) -> int | None:
    """The index of the option whose value is ``value`` (None: the null option; a bool only
    matches a bool: 1 is not True)."""
    value = NULL if value is None else value
    for i, v in enumerate(widget._options_values):
        if v is NULL or value is NULL:
            if v is value:
                return i
        elif isinstance(v, bool) == isinstance(value, bool) and v == value:
            return i
    return None


def select(widget: w.Dropdown, value: Any) -> bool:
    """Select the option holding ``value`` (None: the null option); False if none holds it."""
    i = _index_of(widget, value)
    if i is None:
        return False
    if widget.index != i:
        widget.index = i
    return True


def set_options(widget: w.Dropdown, options) -> None:
    """Replace a dropdown's options and keep a choice shown: the current one where it is still
    offered, else the first option (never a blank field)."""
    old = widget.value if widget.index is not None else object()
    widget.options = _options(options)
    if widget.options and not select(widget, old):
        widget.index = 0


def show_value(widget: w.ValueWidget, value: Any) -> bool:
    """Put a document's value into its widget. A dropdown without that choice gets it as one
    more (label, value) option, so the field shows what the document says beside the
    validator's message (null shows the dropdown's word for it, where it has one); a value
    the widget cannot hold at all (text in a number box, a list or a table anywhere) leaves the
    widget as it was, and returns False: the message under the field says what is wrong, and
    the page never stops on it."""
    try:
        if isinstance(widget, w.Dropdown):
            if isinstance(value, (list, dict, set)):
                return False
            if select(widget, value) or value is None:
                return True
            widget.options = [*zip(widget._options_labels, widget._options_values),
                              (str(value), value)]
            return select(widget, value)
        if widget.value != value:
            widget.value = value
    except (TraitError, TypeError, ValueError):
        return False
    return True


def dropdown(label: str, options, **kw) -> w.Dropdown:
    """A labelled dropdown showing its first option (see ``select``)."""
    d = w.Dropdown(options=_options(options), description=label, style=STYLE,
                   layout=FIELD_LAYOUT, **kw)
    if d.index is None and d.options and "value" not in kw:
        d.index = 0
    return d


class NumberBox(w.Text):
    """A number field that shows what was typed. A bounded number box of ipywidgets clamps
    (GPUs per node 0 became 1, host memory -5 became 1 GiB) and puts back the old value when
    emptied, both silently; this one keeps the text, ``parse`` turns it into a number where it
    is one, and the validator's message under the field says what is wrong with the rest.
    The kernel may set a number (``box.value = 8``); the page sends text."""

    value = traitlets.Union([traitlets.Unicode(), traitlets.Int(), traitlets.Float()],
                            default_value="").tag(sync=True)

    def __init__(self, kind: type = int, count: bool = False, **kw) -> None:
        super().__init__(continuous_update=False, **kw)
        self.kind = kind
        self.count = count

    def parse(self, value):
        """A number for a number ("8", " 1,024 ", "1.4e12", 8.0 in a whole-number field; in a
        count field also "100M", "1.5 B", "2T": ``units.parse_count``), else the text as typed
        (stripped; "" for an empty field)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return int(value) if self.kind is int and float(value).is_integer() else value
        if self.count and parse_count(str(value)) is not None:
            return parse_count(str(value))
        text = str(value).strip().replace(",", "").replace("_", "")
        try:
            number = float(text)
        except ValueError:
            return str(value).strip()
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                return int(number) if number.is_integer() else number
        return number


def int_box(label: str, lo: int = 1, hi: int = 1_000_000) -> NumberBox:
    """A whole-number field bound to the document (the validator owns the range)."""
    return NumberBox(int, description=label, style=STYLE, layout=FIELD_LAYOUT)


def float_box(label: str, lo: float = 0.0, hi: float = 1e21) -> NumberBox:
    return NumberBox(float, description=label, style=STYLE, layout=FIELD_LAYOUT)


def count_box(label: str) -> NumberBox:
    """A count field ("Tokens to train"): typed as people write counts ("100M", "1.5B"), shown
    the same way (``shown_count``)."""
    return NumberBox(float, count=True, description=label, style=STYLE, layout=FIELD_LAYOUT)


def shown_count(value):
    """A count as its field shows it (``units.count_text``: "100 M"; a document's "1.4e12",
    which YAML 1.1 reads as text, too); other text as typed."""
    if isinstance(value, str) and parse_count(value) is not None:
        value = parse_count(value)
    return count_text(value) if isinstance(value, (int, float)) and not isinstance(
        value, bool) else value


def shown_hours(value):
    """A duration in hours as its field shows it (``units.hours_text``: "24 h"); text as
    typed."""
    return hours_text(value) if isinstance(value, (int, float)) and not isinstance(
        value, bool) else value


def bounded_int_box(label: str, lo: int, hi: int) -> w.BoundedIntText:
    """A whole number that is no document field (a trial's faulty rank): clamped to range."""
    return w.BoundedIntText(min=lo, max=hi, description=label, style=STYLE, layout=FIELD_LAYOUT)


def add_tip(widget: w.Widget, word: str) -> w.Widget:
    """Give ``widget`` the glossary's explanation of ``word`` as its tooltip."""
    tip = explain(word)
    if tip:
        widget.tooltip = tip
    return widget


def check(label: str) -> w.Checkbox:
    return w.Checkbox(description=label, indent=False, layout=FIELD_LAYOUT)


def run_controls(label: str, icon: str, progress: str, integer: bool = False):
    """A primary Run button, a Cancel button (disabled until something runs) and a progress
    bar: what every long action on the page gets."""
    run = w.Button(description=label, button_style="primary", icon=icon)
    cancel = w.Button(description="Cancel", icon="stop", disabled=True)
    bar = (w.IntProgress if integer else w.FloatProgress)(
        value=0, min=0, max=1, description=progress, style=STYLE, layout=FIELD_LAYOUT)
    return run, cancel, bar


def error_html(text: str) -> str:
    """A one-line message in the page's error style (escaped: it may echo user input)."""
    return f"<span class='wb-error' style='color:#cf222e'>{html.escape(text)}</span>"
