"""Fill the caches a visitor's kernel reads (run by postBuild, at image build time).

Runs the quickstart and every chapter of the tour once, each on a fresh kernel, with the outputs thrown away: the
prepared weights (~/.cache/jupyter_chatflow/weights) and the XLA programs the notebooks compile
(~/.cache/jupyter_chatflow/xla) stay in the image. A notebook that fails fails the build.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def main() -> int:
    notebooks = [EXAMPLES / "quickstart.ipynb", *sorted((EXAMPLES / "tour").glob("[0-9][0-9]*_*.ipynb"))]
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["CHATFLOW_DB"] = str(Path(scratch) / "warm.db")  # the visitor starts with an empty history
        for path in notebooks:
            started = time.perf_counter()
            notebook = nbformat.read(path, as_version=4)
            nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
            print(f"warmed {path.relative_to(EXAMPLES.parent)} in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
