"""Execute one notebook headless in its own folder: ``python run_notebook.py NOTEBOOK.ipynb FOLDER``.

A process of its own, so the suite can run two notebooks at once (tests/interface/test_notebooks.py); a failing
cell exits 1 with nbclient's message on stderr."""

from __future__ import annotations

import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main(path: str, folder: str) -> int:
    nb = nbformat.read(path, as_version=4)
    # timeout: a hang guard only (an hour per cell); a slow, shared 2-core machine must not fail the test
    try:
        NotebookClient(nb, kernel_name="python3", timeout=3600, resources={"metadata": {"path": folder}}).execute()
    except CellExecutionError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
