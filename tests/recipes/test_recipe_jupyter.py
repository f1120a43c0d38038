"""docs/recipes/jupyter.ipynb runs on a real IPython kernel (this interpreter), top to bottom."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

import jetstream_sync

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "recipes" / "jupyter.ipynb"
PACKAGE_ROOT = Path(jetstream_sync.__file__).resolve().parent.parent


def _kernel(tmp_path: Path) -> KernelManager:
    """A kernel manager for a ``python3`` kernel that runs ``sys.executable``, nothing else."""
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "Python 3 (tests)", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def _text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_the_notebook_runs_on_a_real_kernel(nats_server, tmp_path: Path, monkeypatch):
    """Every cell runs without error inside the kernel's running event loop."""
    monkeypatch.setenv("NATS_URL", nats_server.url)  # the kernel inherits the environment
    monkeypatch.setenv("PYTHONPATH", str(PACKAGE_ROOT))  # the package under test
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "saved outputs"
    probe = "import sys, jetstream_sync\nprint(sys.executable)\nprint(jetstream_sync.__file__)"
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    km = _kernel(tmp_path)
    assert km.kernel_spec.argv[0] == sys.executable
    client = NotebookClient(
        nb, km=km, timeout=60, startup_timeout=60, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    outputs = [_text(c) for c in nb.cells if c.cell_type == "code"]
    assert outputs[-1].splitlines() == [sys.executable, jetstream_sync.__file__]
    assert outputs[0] == "connected: True\n"
    loop_cell = outputs[1].splitlines()
    assert loop_cell[0] == "event loop running: True"
    assert loop_cell[1].startswith("asyncio.run: asyncio.run() cannot be called from a running")
    assert loop_cell[2] == "blocking request still works: True"
    assert outputs[2] == "last sequence: 3\nfetched: ['Lisbon', 'Oslo', 'Quito']\n"
    assert outputs[3] == "theme: dark\n"
    assert outputs[4] == "stored: report.csv 28 bytes\nread back equal: True\n"
    for cell in nb.cells:
        assert all(o.output_type != "error" for o in cell.get("outputs", ()))
        assert all(o.get("name") != "stderr" for o in cell.get("outputs", ())), cell.outputs
    assert (tmp_path / "report.csv").exists()  # the kernel ran in the given directory
    with jetstream_sync.connect(nats_server.url) as nc:  # its last cell cleaned up
        assert list(nc.jetstream().stream_names()) == []
