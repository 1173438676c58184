"""The PNG figures the commands' `--plot` draws (`presk train`, `rank`, `refit`, `plan`, `bench --calibrate`).

matplotlib draws with its Agg backend (a file, no display), selected here
before pyplot is imported, so that a machine without a display never tries
to open one; and it is imported only when a figure is drawn, since it costs
a command's start about half a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from presk.diagnostics import PreskError


@contextmanager
def png_figure(path: str, rows: int = 1, cols: int = 1, size: tuple[float, float] = (7.0, 4.2),
               dpi: int = 120) -> Iterator[tuple[Any, Any]]:  # fmt: skip
    """A figure of `rows` × `cols` panels (an array of axes, always two-dimensional), laid out and written
    to `path` as PNG when the block ends without an error; E0001 when the file cannot be written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(rows, cols, figsize=size, dpi=dpi, squeeze=False)
    try:
        yield figure, axes
        figure.tight_layout()
        figure.savefig(path, format="png")
    except OSError as error:
        raise PreskError("E0001", f"cannot write {path}: {error.strerror}") from None
    finally:
        plt.close(figure)
