"""`presk refit P.json --plot FIT.png` (and `presk bench --calibrate ... --plot`): a profile's fit, drawn.

Three panels over the profile's samples: the layout model's predictions
against the measured times, the roofline's beside it (both log-log, the
diagonal and the band of ± u drawn, so the half of the samples u promises
lie between the two dashed lines), and the cumulative share of the samples
within each relative error, where u is the median; a fourth panel spreads
the first model's predicted / measured by the layout's order, where a
model that misprices one order's traffic shows it. The samples are
coloured by machine type and marked by workers, the groups the constants
are fitted per: a group the model misprices stands apart as a cloud of one
colour off the diagonal, which the table of constants does not show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from presk.cost.models import predict_many
from presk.cost.profile import Profile, fit_samples
from presk.diagnostics import PreskError
from presk.dialects.psk_realize_layout import ORDERS_WITH_KBLOCK, ORDERS_WITHOUT_KBLOCK
from presk.plots import png_figure

COLOURS = {"f64": "tab:blue", "f32": "tab:orange", "bf16": "tab:green", "i64": "tab:purple"}
"""Each machine type's colour (i64: the index kernels); another is grey."""


@dataclass(frozen=True)
class FitPlot:
    """What was drawn: per model, the samples and the median relative error (u as the profile computes it)."""

    samples: int
    errors: dict[str, float]
    by_order: dict[str, float]
    """The first model's median predicted / measured over the samples of each order (the last panel)."""


def plot_fit(profile: Profile, path: str) -> FitPlot:
    """Write `path` (PNG) for `profile`'s samples under its rules; E8001 when it has no fitted constants."""
    models = [(name, c) for name, c in (("layout model", profile.layout), ("roofline", profile.roofline)) if c]
    if not models:
        raise PreskError("E8001", "the profile has no fitted constants to draw: run `presk refit` on it first")
    samples = fit_samples(profile)
    terms = [t for t, _ in samples]
    measured = np.array([s for _, s in samples]) * 1e6
    dtypes = np.array([t.dtype for t in terms])
    parallel = np.array([t.workers > 1 for t in terms])
    predicted = {name: np.asarray(predict_many(constants, terms)) * 1e6 for name, constants in models}
    errors = {name: np.abs(p / measured - 1.0) for name, p in predicted.items()}
    medians = {name: float(np.median(e)) for name, e in errors.items()}
    orders = [str((sample.extra.get("layout") or {}).get("order", "default")) for sample in profile.samples]
    with png_figure(path, 2, 2, size=(10.0, 8.6), dpi=110) as (figure, grid):
        axes = grid.flat
        if len(models) == 1:
            axes[1].set_visible(False)
        low = min(float(measured.min()), *(float(p.min()) for p in predicted.values()))
        high = max(float(measured.max()), *(float(p.max()) for p in predicted.values()))
        line = np.geomspace(low, high, 2)
        for ax, (name, _) in zip(axes, models):
            u = medians[name]
            for dtype in sorted(set(dtypes.tolist())):
                for several, marker in ((False, "o"), (True, "^")):
                    chosen = (dtypes == dtype) & (parallel == several)
                    if chosen.any():
                        label = f"{dtype}, {'several workers' if several else 'one worker'}"
                        ax.scatter(predicted[name][chosen], measured[chosen], s=7, alpha=0.5, marker=marker,
                                   color=COLOURS.get(dtype, "tab:gray"), label=label)  # fmt: skip
            ax.plot(line, line, color="black", linewidth=0.8)
            if u < 1.0:  # measured = predicted / (1 ± u): the band half the samples lie in
                ax.plot(line, line / (1 + u), color="gray", linestyle="--", linewidth=0.8, label=f"± u ({u:.1%})")
                ax.plot(line, line / (1 - u), color="gray", linestyle="--", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(low / 1.5, high * 1.5)
            ax.set_ylim(low / 1.5, high * 1.5)
            ax.set_xlabel(f"{name}: predicted µs")
            ax.set_ylabel("measured µs")
            ax.set_title(f"{name}: u = {u:.1%} over {len(samples)} samples", fontsize=9)
            ax.grid(alpha=0.3, which="both", linewidth=0.4)
            ax.legend(fontsize=7, loc="upper left")
        ax = axes[2]
        for name, e in errors.items():
            ordered = np.sort(e)
            ax.plot(ordered * 100, np.arange(1, len(ordered) + 1) / len(ordered), label=f"{name} (u = {medians[name]:.1%})")
        ax.axhline(0.5, color="gray", linestyle=":", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=1.0)  # linear to 1 %, logarithmic beyond
        ax.set_xlim(0, 100 * max(float(e.max()) for e in errors.values()) * 1.2)
        ax.set_xlabel("|predicted / measured − 1|, %")
        ax.set_ylabel("share of the samples within it")
        ax.set_title(f"{profile.machine.split('|')[1] if '|' in profile.machine else profile.machine}: "
                     f"rules {', '.join(profile.rules) or 'none'}", fontsize=9)  # fmt: skip
        ax.grid(alpha=0.3, linewidth=0.4)
        ax.legend(fontsize=7, loc="lower right")
        by_order = _by_order(orders, predicted[models[0][0]] / measured)
        ax = axes[3]
        ax.boxplot(list(by_order.values()), showfliers=False, whis=(10, 90))
        ax.set_xticks(range(1, len(by_order) + 1), [f"{name}\n{len(v)}" for name, v in by_order.items()], fontsize=7)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylabel(f"{models[0][0]}: predicted / measured")
        ax.set_title("by the layout's order (samples under each name;\nboxes 25–75 %, whiskers 10–90 %)", fontsize=9)
        ax.grid(alpha=0.3, axis="y", linewidth=0.4)
        if profile.layout is not None:  # the form is the layout model's; a roofline alone has none
            figure.suptitle(f"{profile.form.load_term} loads, {profile.form.combine} combine", fontsize=9)
    return FitPlot(len(samples), medians, {name: float(np.median(v)) for name, v in by_order.items()})


def _by_order(orders: list[str], ratios: np.ndarray) -> dict[str, np.ndarray]:
    """The ratios of the samples of each order, the orders as the layout domain lists them, "default" (a
    sample stating none: an elementwise kernel, a default layout) last."""
    known = (*ORDERS_WITHOUT_KBLOCK, *ORDERS_WITH_KBLOCK)
    names = [o for o in known if o in orders] + sorted(set(orders) - set(known) - {"default"})
    names += ["default"] if "default" in orders else []
    picked = np.array(orders)
    return {name: ratios[picked == name] for name in names}
