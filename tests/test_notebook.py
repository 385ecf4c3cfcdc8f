"""The quickstart notebook runs top to bottom on a clean ``python3`` kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.mark.notebook
@pytest.mark.slow
def test_quickstart_notebook_runs(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOKS / "01-quickstart.ipynb", as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the cell if any cell fails
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "identical to Archive.extract" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)


@pytest.mark.notebook
@pytest.mark.slow
def test_fleet_notebook_runs(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOKS / "fleet.ipynb", as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "9 archives, " in text
    # 2.14.1 and 2.17.0 are in every day of both Maven repositories: 6 archives x 2 POMs
    assert "12 vulnerable POMs, every one fetched from its archive" in text
    assert text.count(" True\n") == 12
    assert any("image/png" in o.get("data", {}) for o in outputs)
