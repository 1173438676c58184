"""`presk plan ... --plot SPACE.png`: how decided each nest's choice is.

A panel per nest: every priced point's predicted time over the chosen
one's, in increasing order (the points' ranks on a log scale, the ratios up
to 4×), with the line at 1 + u. What the
report's "K of N points within 1 + u" says in one number the panel shows
as a shape: a choice the model makes by a wide margin is one point under
the line and a steep rise after it; a flat start of dozens of points under
the line is a choice the model cannot make, which `presk autotune
--candidates` then measures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from presk.plots import png_figure
from presk.tuning.plan import NestChoice

TOP = 4.0
"""The highest ratio drawn: what matters is near 1 + u, and the slowest points are a hundred times the best."""


def plot_choices(choices: Sequence[NestChoice], u: float, path: str) -> None:
    """Write `path` (PNG): a panel per nest of `choices`, its sorted predicted times over the chosen point's."""
    from matplotlib.ticker import NullFormatter

    count = max(len(choices), 1)
    cols = min(count, 3)
    rows = math.ceil(count / cols)
    with png_figure(path, rows, cols, size=(4.6 * cols, 3.6 * rows), dpi=110) as (_, axes):
        for ax, choice in zip(axes.flat, choices):
            ratios = np.sort(np.array(choice.prices) / choice.seconds)
            ranks = np.arange(1, len(ratios) + 1)
            close = ratios <= 1 + u
            ax.scatter(ranks[~close], ratios[~close], s=5, color="tab:blue", alpha=0.6, label="priced points")
            ax.scatter(ranks[close], ratios[close], s=9, color="tab:orange", label=f"within 1 + u ({int(close.sum())})")
            ax.scatter([1], [1], marker="x", s=70, color="red", label="chosen", zorder=3)
            ax.axhline(1 + u, color="gray", linestyle="--", linewidth=0.8)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # a narrow range's minor labels overlap
            above = int((ratios > TOP).sum())
            ax.set_ylim(0.97, min(float(ratios[-1]) * 1.1, TOP))
            if above:  # said in the legend, where no point lies
                ax.plot([], [], " ", label=f"{above} points above {TOP:g}× not shown")
            ax.set_xlabel("points, cheapest first")
            ax.set_ylabel("predicted / chosen")
            ax.set_title(f"{choice.nest.site} ({choice.nest.kind})\n{choice.within} of {choice.priced} within "
                         f"1 + u = {1 + u:.3f}", fontsize=9)  # fmt: skip
            ax.grid(alpha=0.3, which="both", linewidth=0.4)
            ax.legend(fontsize=7, loc="upper left")
        for ax in list(axes.flat)[len(choices):]:
            ax.set_visible(False)
