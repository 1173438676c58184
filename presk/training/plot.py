"""`presk train --plot FILE.png`: the training loss and the validation loss against the step, and ln V for scale."""

from __future__ import annotations

import math
from collections.abc import Sequence

from presk.plots import png_figure


def plot_losses(
    path: str,
    train: Sequence[tuple[int, float]],
    validation: Sequence[tuple[int, float]],
    vocab: int,
    title: str,
) -> None:
    """Write the PNG: (step, loss) of every step, (step, validation loss) of every evaluation."""
    from matplotlib.ticker import MaxNLocator

    with png_figure(path) as (_, panels):
        axes = panels[0, 0]
        if train:
            axes.plot(*zip(*train), label="train (one batch)", linewidth=1, color="tab:blue", alpha=0.8)
        if validation:
            axes.plot(*zip(*validation), label="validation", marker="o", markersize=3, color="tab:orange")
        axes.axhline(math.log(vocab), linestyle="--", linewidth=1, color="gray", label=f"ln V = {math.log(vocab):.2f}")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlabel("step")
        axes.set_ylabel("cross-entropy (nats a token)")
        axes.set_title(title, fontsize=9)
        axes.grid(alpha=0.3)
        axes.legend()
