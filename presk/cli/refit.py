"""`presk refit P.json`: fit a cost profile's constants again on its samples, and report them.

The samples keep their measured times and their terms under every rule
set, so a refit (another form, `--compare` of the nine, `--recost` under
other rules) needs no kernel lowered or timed. The form defaults to the
profile's own (for a new profile the seed's: loads per group, p-norm, no
rules); q is searched at every fit.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from typing import Any

from presk.cli.source import check_output
from presk.cost.fit import FormScore
from presk.cost.models import COMBINES, LOAD_TERMS, PROFILE_ERROR, Constants
from presk.cost.profile import (
    Profile,
    load_profile,
    parse_rules,
    refit_profile,
    rules_key,
    save_profile,
)
from presk.cost.terms import group_key
from presk.diagnostics import PreskError


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("refit", help="fit a cost profile's constants again on its samples")
    p.add_argument("profile", metavar="P.json", help="the profile (its samples are in P.samples.jsonl)")
    p.add_argument("--compare", action="store_true", help="also fit the nine forms (load term x combine) and compare u")
    p.add_argument("--recost", action="store_true", help="price every sample again under --rules (default: no rules)")
    p.add_argument("--rules", help="with --recost: the rules, comma-separated (lines, shared, overhead)")
    p.add_argument("--relower", action="store_true", help="read every calibration sample's terms again from its point, "
                   "lowered against the profile's machine_desc (after editing it, or after presk's quantities changed)")
    p.add_argument("--load-term", choices=LOAD_TERMS, help="how loads are priced (default: the profile's, else group)")
    p.add_argument("--combine", choices=COMBINES, help="how the terms combine (default: the profile's, else pnorm)")
    p.add_argument("--best", action="store_true",
                   help="fit the nine forms and keep the one of least u (prints the comparison; not with "
                        "--load-term or --combine)")
    p.add_argument("-o", "--output", metavar="OTHER.json", help="write the refitted profile here instead of P.json")
    p.add_argument("--plot", metavar="FIT.png", help="draw the fit: each model's predictions against the measured "
                   "times, log-log, and the share of the samples within each error (matplotlib)")  # fmt: skip
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.rules is not None and not args.recost:
        raise PreskError(PROFILE_ERROR, "--rules prices the samples again: give it with --recost")
    if args.best and (args.load_term or args.combine):
        raise PreskError(PROFILE_ERROR, "--best chooses the load term and the combine: give neither with it")
    rules = parse_rules(args.rules or "") if args.recost else None
    if args.plot:
        check_output(args.plot)
    profile = load_profile(args.profile)
    if args.relower:
        profile = _relower(profile, args)
    refitted = refit_profile(profile, args.load_term, args.combine, rules, compare_forms=args.compare,
                             best_form=args.best)
    output = args.output or args.profile
    save_profile(refitted, output)
    print(report(refitted))
    if refitted.comparison is not None:
        print()
        print(comparison_table(refitted.comparison))
    print(f"\nwrote {output}")
    if args.plot:
        draw_fit(refitted, args.plot)
    return 0


def draw_fit(profile: Profile, path: str) -> None:
    """`--plot`: the fit drawn (`presk.cost.fit_plot`), and where."""
    from presk.cost.fit_plot import plot_fit

    drawn = plot_fit(profile, path)
    print(f"drew {path}: {drawn.samples} samples, " + ", ".join(f"{name} u = {u:.2%}" for name, u in drawn.errors.items()))


def _relower(profile: Profile, args: argparse.Namespace) -> Profile:
    """The profile with its samples priced again against its machine_desc (saved with the fitted profile)."""
    from presk.tuning.calibration import relowered

    if profile.machine_desc is None:
        raise PreskError(PROFILE_ERROR, f"{args.profile} has no machine_desc to price its samples against")
    profile, kept = relowered(profile)
    print(f"repriced {len(profile.samples) - kept} samples against the machine_desc"
          + (f"; {kept} samples of entries kept their terms" if kept else ""))  # fmt: skip
    return profile


def _si(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "∞"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _seconds(value: float) -> str:
    return f"{value * 1e6:.4g} µs"


def _constant(constants: Constants, name: str, unit: str) -> str:
    if name in constants.unidentified:
        return "not identified"
    value = constants.values[name]
    return _seconds(value) if unit == "s" else _si(value, unit)


def report(profile: Profile) -> str:
    """The fitted constants, u and the Spearman figures, as the user reads them."""
    layout, roofline = profile.layout, profile.roofline
    assert layout is not None and roofline is not None
    form = profile.form
    q = f" (q = {form.q:.3g})" if form.q is not None else ""
    lines = [
        f"{profile.fitted_samples} samples, rules: {rules_key(profile.rules) or 'none'}, "
        f"layout model: loads {form.load_term}, combine {form.combine}{q}",
        f"  λ = {_constant(layout, 'lambda', 's')}, spawn = {_constant(layout, 'spawn', 's')}",
        "  " + ", ".join(f"{label} = {_constant(layout, name, 'B/s')}" for label, name in
                         (("β_L2", "beta_l2"), ("β_L3", "beta_l3"), ("β_L2 scattered", "beta_l2_scattered"),
                          ("β_L3 scattered", "beta_l3_scattered"), ("β_L2 written", "beta_l2_written"),
                          ("β_mem", "beta_mem"))),  # fmt: skip
    ]
    if "rho" in layout.values:
        lines.append(f"  ρ = {_constant(layout, 'rho', 'access/s')}")
    taus = sorted(n for n in layout.values if n.startswith("tau_"))
    if taus:
        lines.append("  τ (transcendentals, one a register) = "
                     + ", ".join(f"{n[4:]} {_constant(layout, n, '/s')}" for n in taus))
    if "omega_walk" in layout.values:
        lines.append(f"  ω (page walks) = {_constant(layout, 'omega_walk', '/s')}")
    sizes = Counter(group_key(s.terms[rules_key(profile.rules)]) for s in profile.samples)
    per_group = form.load_term == "group"
    lines.append("  | group | samples | π (op/s) |" + (" ρ (access/s) |" if per_group else ""))
    lines.append("  |---|---|---|" + ("---|" if per_group else ""))
    for group in sorted(sizes):
        row = f"  | {group} | {sizes[group]} | {_constant(layout, f'pi[{group}]', 'op/s')} |"
        if per_group:
            row += f" {_constant(layout, f'rho[{group}]', 'access/s')} |"
        lines.append(row)
    pis = ", ".join(f"π[{n[3:-1]}] = {_constant(roofline, n, 'op/s')}" for n in sorted(roofline.values) if n.startswith("pi["))
    lines.append(f"roofline: λ = {_constant(roofline, 'lambda', 's')}, β = {_constant(roofline, 'beta', 'B/s')}, {pis}")
    lines.append(f"u = {_fraction(profile.u)} (roofline: {_fraction(profile.u_roofline)}): the median |predicted/measured - 1|")
    names = (("counts", "operation counts"), ("work", "work W"), ("model", "layout model"))
    figures = ", ".join(f"{label} {_rho(profile.spearman.get(key))}" for key, label in names)
    lines.append(f"Spearman's rank correlation with the measured times: {figures}")
    return "\n".join(lines)


def _fraction(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def _rho(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def comparison_table(scores: tuple[FormScore, ...]) -> str:
    """u per form, the best (smallest u) marked."""
    best = min(range(len(scores)), key=lambda i: scores[i].u)
    lines = ["| load term | combine | q | u | |", "|---|---|---|---|---|"]
    for i, score in enumerate(scores):
        q = "" if score.form.q is None else f"{score.form.q:.3g}"
        mark = "best" if i == best else ""
        lines.append(f"| {score.form.load_term} | {score.form.combine} | {q} | {score.u:.2%} | {mark} |")
    return "\n".join(lines)
