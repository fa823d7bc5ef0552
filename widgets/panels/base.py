"""What every panel shares: widgets bound to document paths, the validator's message under each
field, and syncing the widgets when the document changes elsewhere (an example, an upload, a
planner row)."""
from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as w
from traitlets import TraitError

from widgets.state import ScenarioState, get_path

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
        self.fields[path] = (widget, message, to_doc, from_doc)

        def changed(change: dict) -> None:
            if self._syncing:
                return
            new = None if change["new"] is NULL else change["new"]
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
                lines = self.state.messages(path)
                message.value = "".join(
                    f"<div class='wb-error' style='color:#cf222e;font-size:12px'>"
                    f"{html.escape(m)}</div>" for m in lines)
        finally:
            self._syncing = False

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


def int_box(label: str, lo: int = 1, hi: int = 1_000_000) -> w.BoundedIntText:
    return w.BoundedIntText(min=lo, max=hi, description=label, style=STYLE, layout=FIELD_LAYOUT)


def float_box(label: str, lo: float = 0.0, hi: float = 1e21) -> w.BoundedFloatText:
    return w.BoundedFloatText(min=lo, max=hi, description=label, style=STYLE,
                              layout=FIELD_LAYOUT)


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
