"""notebooks/analysis.ipynb executes end to end on a small synthetic run (so it never rots)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "analysis.ipynb"


def test_analysis_notebook_executes(report_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQBENCH_RUNS", str(report_run))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3
    text = " ".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)
    assert "-> compared: ['mqcore', 'zmq']" in text
