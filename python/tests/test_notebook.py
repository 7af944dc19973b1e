"""docs/opencc-sweep.ipynb executes top to bottom and leaves its figure behind."""

import pytest


def test_the_opencc_sweep_notebook_runs_and_writes_its_figure(repo):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    figure = repo / "docs" / "figures" / "opencc_sweep.png"
    figure.unlink(missing_ok=True)
    nb = nbformat.read(repo / "docs" / "opencc-sweep.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(repo / "docs")}}).execute()
    assert figure.exists() and figure.stat().st_size > 10_000
    table = next(o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "data" in o)
    # Three query algorithms x three backup algorithms.
    assert "classes.query.cc" in table["data"]["text/plain"] and "newreno" in table["data"]["text/plain"]
