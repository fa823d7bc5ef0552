"""The teaching labs (notebooks/labs/) and the claims check (notebooks/claims_check.ipynb).

Each notebook runs headless with nbclient and must finish without an error: the labs assert
that the estimator's exact predictions equal what their real trials measured, so a regression
in the estimator or the trials fails here. A few key outputs are checked per notebook; the
labs are stored without outputs, with 2-3 answer cells a teacher can strip with the command
each lab documents."""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from tests.conftest import ROOT

LAB_DIR = ROOT / "notebooks" / "labs"
LAB_STEMS = ["01_ddp", "02_zero_fsdp2", "03_tensor_sequence_parallel", "04_pipeline_schedules",
             "05_context_parallel", "06_expert_parallel_moe", "07_3d_4d_composition",
             "08_collectives_and_networks", "09_lora_qlora_full"]
LABS = [LAB_DIR / f"{stem}.ipynb" for stem in LAB_STEMS]
CLAIMS = ROOT / "notebooks" / "claims_check.ipynb"
NOTEBOOKS = LABS + [CLAIMS]

# Printed lines each notebook must produce (its estimate-vs-measured table and key results).
EXPECTED = {
    "01_ddp": ["dp=4: dp all_reduce bytes", "all exact rows exact"],
    "02_zero_fsdp2": ["zero3 dp=4: params bytes, rank 0..3", "zero1 dp=4: optimizer bytes",
                      "zero3 dp=4: dp all_gather count"],
    "03_tensor_sequence_parallel": ["TP+SP", "tp=4 SP: tp all_gather bytes"],
    "04_pipeline_schedules": ["m=8: pp send_recv count, rank 0 / 1", "fitted time per microbatch"],
    "05_context_parallel": ["cp=4: cp send_recv bytes", "cp=4: sends = 3(cp-1)"],
    "06_expert_parallel_moe": ["ep=4: all_to_all bytes, sum over 4 ranks"],
    "07_3d_4d_composition": ["4-D, 8 ranks: pp send_recv bytes", "4-D, 8 ranks: cp send_recv count",
                             "rank 5's tp group"],
    "08_collectives_and_networks": ["FSDP2: dp all_gather bytes", "DDP: dp all_reduce count"],
    "09_lora_qlora_full": ["on one H100 SXM, memory per GPU in GiB",
                           "lora dp=2: params bytes, rank 0..1", "lora dp=2: grads bytes",
                           "lora dp=2: params_trainable, rank 0..1",
                           "all exact rows exact"],
    "claims_check": ["VERDICT: false", "VERDICT: misleading",
                     "70B on 8 x H200 within a day? (the planner's fastest fitting layout per "
                     "method)", "1.4 T (pre-training's)"],
}
STRIP_ARGS = ["nbconvert", "--to", "notebook", "--TagRemovePreprocessor.enabled=True",
              '--TagRemovePreprocessor.remove_cell_tags={"answer"}']


def _isolate_jupyter(monkeypatch, tmp_path) -> None:
    """Keep Jupyter out of ~ (docs/platform.md); the kernel inherits these."""
    for var, sub in [("JUPYTER_CONFIG_DIR", "jcfg"), ("JUPYTER_DATA_DIR", "jdata"),
                     ("JUPYTER_RUNTIME_DIR", "jrun"), ("IPYTHONDIR", "ipy"),
                     ("XDG_CONFIG_HOME", "xcfg"), ("XDG_CACHE_HOME", "xcache")]:
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs if o.output_type == "stream")


def _answers(nb) -> list:
    return [c for c in nb.cells if "answer" in c.metadata.get("tags", [])]


def test_every_lab_and_the_claims_check_is_stored_clean_with_hideable_answers():
    assert sorted(p.name for p in LAB_DIR.glob("*.ipynb")) == sorted(p.name for p in LABS)
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for c in nb.cells:
            if c.cell_type == "code":
                assert c.outputs == [] and c.execution_count is None, path.name
    for path in LABS:
        nb = nbformat.read(path, as_version=4)
        assert 2 <= len(_answers(nb)) <= 3, path.name
        top = nb.cells[0].source
        assert "TagRemovePreprocessor.enabled=True" in top and f"{path.stem}.ipynb" in top
        text = "\n".join(c.source for c in nb.cells)
        # a real trial (workbench.labs.trial, or the launcher's stream), checked
        assert ("trial(" in text or "stream(" in text) and "check_table(" in text, path.name
        # the shared setup is imported (workbench/labs.py), not pasted: a short first cell
        setup = next(c.source for c in nb.cells if c.cell_type == "code")
        assert len(setup.splitlines()) <= 12 and "def " not in setup, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_prints_its_checks(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    _isolate_jupyter(monkeypatch, tmp_path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, errors
    printed = _printed(nb)
    for line in EXPECTED[path.stem]:
        assert line in printed, (path.stem, line)
    if path.stem == "claims_check":
        summary = [ln for ln in printed.splitlines() if ln.strip().startswith(("H200 has 32 GB",
                                                                               "70B on 6 GPUs"))]
        assert len(summary) == 2 and all(" false " in ln for ln in summary), summary
        assert printed.count("VERDICT: ") == 9


@pytest.mark.slow
def test_the_documented_command_strips_the_answer_cells(tmp_path, monkeypatch):
    _isolate_jupyter(monkeypatch, tmp_path)
    lab = LABS[0]
    (tmp_path / lab.name).write_text(lab.read_text())
    r = subprocess.run([sys.executable, "-m", "jupyter", *STRIP_ARGS, "--output",
                        f"{lab.stem}_student.ipynb", lab.name], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    full = nbformat.read(lab, as_version=4)
    student = nbformat.read(tmp_path / f"{lab.stem}_student.ipynb", as_version=4)
    assert _answers(student) == []
    assert len(student.cells) == len(full.cells) - len(_answers(full))
