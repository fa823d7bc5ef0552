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

FIELD_LAYOUT = w.Layout(width="260px")
STYLE = {"description_width": "130px"}


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
            changes = {path: to_doc(change["new"])}
            if on_set is not None:
                changes.update(on_set(change["new"]))
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
                    if value is not None:
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


def _values(dropdown: w.Dropdown) -> list:
    return [o[1] if isinstance(o, tuple) else o for o in dropdown.options]


def show_value(widget: w.ValueWidget, value: Any) -> bool:
    """Put a document's value into its widget. A dropdown without that choice gets it as one
    more (label, value) option, so the field shows what the document says beside the
    validator's message; a value the widget cannot hold at all (text in a number box, a list
    or a table anywhere) leaves the widget as it was, and returns False: the message under the
    field says what is wrong, and the page never stops on it."""
    try:
        if isinstance(widget, w.Dropdown) and value not in widget._options_values:
            if isinstance(value, (list, dict, set)):
                return False
            widget.options = [*zip(widget._options_labels, widget._options_values),
                              (str(value), value)]
        if widget.value != value:
            widget.value = value
    except (TraitError, TypeError, ValueError):
        return False
    return True


def dropdown(label: str, options, **kw) -> w.Dropdown:
    return w.Dropdown(options=options, description=label, style=STYLE, layout=FIELD_LAYOUT, **kw)


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
