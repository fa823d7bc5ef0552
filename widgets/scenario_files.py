"""The scenario as files: the example picker, "Open scenario" (a scenario file, or the configs a
person already has, read by ``workbench import``), the download link, saving and opening by
name (``workbench.scenario.store``) and the YAML tab. It loads documents into the page's
``ScenarioState`` and shows the scenario back as YAML; the estimate is the state's."""
from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as w
import yaml

from widgets.panels.base import error_html, set_options
from widgets.planner import download_link
from widgets.import_view import import_problems_html, imported_html
from widgets.state import ScenarioState
from widgets.words import problem_words
from workbench.documents.text import DocumentError, load_text
from workbench.errors import ScenarioError
from workbench.imports import detect, import_uploads
from workbench.scenario import dump_scenario
from workbench.scenario.store import ScenarioStore


def example_files(folder: Path) -> dict[str, Path]:
    """The example scenarios of ``folder`` by name (the file's stem), sorted."""
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


def read_example(path: Path) -> dict:
    """An example scenario's document."""
    return yaml.safe_load(path.read_text())


class ScenarioFiles:
    """``bar`` (picker, Open, download, import status, save / open by name) above the tabs and
    ``yaml_tab``; ``show()`` writes the scenario back after every change. ``verdict`` is the
    Plan tab's message, where unreadable text is reported too; ``on_saved`` runs after the
    saved list changes (the Compare tab's choices)."""

    def __init__(self, state: ScenarioState, examples: dict[str, Path], first: str,
                 store_dir: Path | None, verdict: w.HTML) -> None:
        self.state, self.examples, self.verdict = state, examples, verdict
        self.on_saved = lambda: None
        self.picker = w.Dropdown(options=list(examples), value=first,
                                 description="Example", layout=w.Layout(width="360px"))
        self.picker.observe(self._pick, names="value")
        # a scenario file, or the configs a person already has (Accelerate YAML,
        # TrainingArguments, DeepSpeed JSON, torchtitan TOML, Megatron script, torchtune recipe,
        # config.json): those go through workbench import
        self.upload = w.FileUpload(accept=".yaml,.yml,.json,.toml,.sh,.sbatch,.slurm,.txt",
                                   multiple=True, description="Open scenario")
        self.upload.observe(self.on_upload, names="value")
        self.upload.add_class("wb-open-scenario")
        self.import_status = w.HTML()
        self.import_status.add_class("wb-import-status")
        self.download = w.HTML()
        # saved scenarios by name (a folder the server's user owns: workbench.scenario.store)
        self.store = ScenarioStore(store_dir)
        self.save_name = w.Text(placeholder="name to save as", layout=w.Layout(width="180px"))
        self.save_button = w.Button(description="Save", icon="save",
                                    layout=w.Layout(width="80px"))
        self.saved = w.Dropdown(description="Saved", layout=w.Layout(width="240px"),
                                style={"description_width": "44px"})
        self.open_button = w.Button(description="Open", icon="folder-open",
                                    layout=w.Layout(width="80px"))
        self.store_status = w.HTML()
        self.save_button.on_click(lambda _b: self.save(self.save_name.value))
        self.open_button.on_click(lambda _b: self.open_saved(self.saved.value))
        self.yaml_text = w.Textarea(layout=w.Layout(width="100%", height="480px"),
                                    continuous_update=False)
        self.yaml_text.observe(self._yaml_edit, names="value")
        # the validator's messages beside the YAML (the verdict is on another tab)
        self.yaml_status = w.HTML()
        self._editing_yaml = False
        for widget, cls in ((self.picker, "wb-example"), (self.save_name, "wb-save-name"),
                            (self.save_button, "wb-save"), (self.saved, "wb-saved"),
                            (self.open_button, "wb-open-saved"),
                            (self.store_status, "wb-store-status"), (self.yaml_text, "wb-yaml"),
                            (self.yaml_status, "wb-yaml-status")):
            widget.add_class(cls)
        self.bar = w.VBox([
            w.HBox([self.picker, self.upload, self.download]), self.import_status,
            w.HBox([self.save_name, self.save_button, self.saved, self.open_button,
                    self.store_status])])
        self.yaml_tab = w.VBox([self.yaml_status, self.yaml_text])

    def show(self) -> None:
        """The scenario as edited, after a change: the download link, the YAML tab (the
        refused edit included: the message above it says what is wrong, never silently the
        last valid one) and its message (the verdict's, while the edit is refused)."""
        s = self.state
        self.yaml_status.value = "" if s.valid else self.verdict.value
        self._show_download()
        if s.estimate is not None and not self._editing_yaml:
            self._editing_yaml = True
            self.yaml_text.value = (dump_scenario(s.scenario) if s.valid
                                    else _doc_text(s.doc) or self.yaml_text.value)
            self._editing_yaml = False

    def _show_download(self) -> None:
        """The download: the scenario as shown; while an edit is refused, the edited
        document (with a warning that it is not valid) and the last valid scenario, each
        named for what it is."""
        s = self.state
        if s.valid:
            self.download.value = download_link(dump_scenario(s.scenario), "scenario.yaml")
            return
        text = _doc_text(s.doc)
        edited = ("# NOT VALID: the workbench refused this scenario:\n" + "".join(
            f"#   {problem_words(p, s.labels)}\n" for p in s.problems) + (text or ""))
        links = [download_link(edited, "scenario-not-valid.yaml")
                 + " <span class='wb-error' style='color:#cf222e'>(your edits, not valid)</span>"
                 if text is not None else
                 "<span class='wb-error' style='color:#cf222e'>your edits cannot be written "
                 "back as YAML</span>"]
        if s.scenario is not None:
            links.append(download_link(dump_scenario(s.scenario), "scenario-last-valid.yaml")
                         + " (the last valid scenario, which the charts show)")
        self.download.value = "<span class='wb-download'>" + " &middot; ".join(links) + "</span>"

    def refresh_saved(self) -> None:
        """The saved names as the folder holds them now."""
        try:
            names = self.store.names()
        except (ScenarioError, OSError) as exc:
            self.store_status.value = error_html(_store_words(exc))
            names = []
        if self.saved.index is None or list(self.saved.options) != names:
            set_options(self.saved, names or [("nothing saved yet", "")])
        self.on_saved()

    def save(self, name: str) -> None:
        """Save the scenario as edited under ``name`` (a refused edit is saved with it, and
        the status says so)."""
        s = self.state
        text = dump_scenario(s.scenario) if s.valid else _doc_text(s.doc)
        if text is None:
            self.store_status.value = error_html("this document cannot be saved as YAML")
            return
        try:
            saved = self.store.save(name, text)
        except (ScenarioError, OSError) as exc:
            self.store_status.value = error_html(_store_words(exc))
            return
        self.refresh_saved()
        self.saved.value = saved
        self.store_status.value = html.escape(f"saved as \u201c{saved}\u201d" + (
            "" if s.valid else " (with the edit the validator refused)"))

    def open_saved(self, name: str | None) -> None:
        """Load the scenario saved as ``name``."""
        if not name:
            self.store_status.value = error_html("nothing saved yet: type a name and Save")
            return
        try:
            doc = self.store.load(name)
        except (ScenarioError, OSError) as exc:
            self.store_status.value = error_html(_store_words(exc))
            return
        self.state.load(doc)
        self.store_status.value = html.escape(f"opened \u201c{name}\u201d")

    def _pick(self, change: dict) -> None:
        if change["new"] is None:      # cleared: the scenario is no longer an example's
            return
        self.import_status.value = ""
        self.state.load(read_example(self.examples[change["new"]]))

    def on_upload(self, change: dict) -> None:
        """The "Open scenario" button's files (its ``value`` change)."""
        files = change["new"]
        if not files:
            return
        items = list(files) if isinstance(files, (list, tuple)) else list(files.values())
        self.open_files([(str(i["name"]), bytes(i["content"])) for i in items])

    def open_files(self, files: list[tuple[str, bytes]]) -> None:
        """"Open scenario": one scenario file loads as it is; anything else — an Accelerate
        config with its TrainingArguments, a DeepSpeed JSON, ... — is read by ``workbench
        import``, and the page says what no file stated."""
        self.import_status.value = ""
        if len(files) == 1:
            name, data = files[0]
            text = data.decode("utf-8", errors="replace")
            if detect(name, text) is None:     # no config format claims it: a scenario
                self.load_text(text)
                return
        try:
            # the box on the page stays where no file states other hardware
            page = self.state.scenario.document.get("hardware") if self.state.scenario else None
            out = import_uploads(files, hardware=page)
        except ScenarioError as exc:        # unreadable: too large, not UTF-8, unknown format
            self.import_status.value = import_problems_html(exc.problems)
            return
        if out.problems:
            self.import_status.value = import_problems_html(out.problems)
            return
        self.state.load(out.scenario)
        self.picker.value = None            # the page no longer shows an example
        self.import_status.value = imported_html(out)

    def _yaml_edit(self, change: dict) -> None:
        if not self._editing_yaml:
            self._editing_yaml = True
            try:
                self.load_text(change["new"])
            finally:
                self._editing_yaml = False

    def load_text(self, text: str) -> None:
        """A YAML/JSON scenario from text (upload or the YAML tab); bad text shows a message."""
        try:
            doc = load_text(text, "The scenario")
        except DocumentError as exc:
            p = exc.problems[0]
            self.verdict.value = self.yaml_status.value = (
                f"<div class='wb-error' style='color:#cf222e'>"
                f"{html.escape(p.path)} {html.escape(p.message)}.</div>")
            return
        if not isinstance(doc, dict):
            self.verdict.value = self.yaml_status.value = (
                "<div class='wb-error' style='color:#cf222e'>A scenario is a "
                "table with hardware, model, parallel and training.</div>")
            return
        self.state.load(doc)


def _store_words(exc: Exception) -> str:
    problems = getattr(exc, "problems", None)
    if problems:
        return "; ".join(p.message for p in problems)
    return f"the scenario folder cannot be used: {getattr(exc, 'strerror', None) or exc}"


def _doc_text(doc) -> str | None:
    """A document as edited (refused or not) as YAML, or None when it cannot be written back
    (the document limits have read it, but a hostile one may still not dump: too deep, too
    large)."""
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    return text if len(text) <= 1_000_000 else None
