"""`presk run`: run an entry function on the reference interpreter and show its outputs.

Without `--realize`/`--plan` the interpreter computes in numpy f64 (or in
mpmath at `--bits N`). With them the program is fused and realized first
(`psk-fuse`, then `psk-realize`), and the interpreter honours each site's
realization: a launch computes in its arithmetic type and rounds its value
to its storage type where it reaches memory (bf16 stores in bf16 and
computes in f32), so the partition into groups is part of what runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from presk.cli.program import (
    AUTO,
    GradientResult,
    add_auto_plan_arguments,
    add_input_arguments,
    add_realize_arguments,
    add_size_arguments,
    entries_of,
    load_program,
    opt_of,
    pipeline_of,
    plan_of,
    plan_options,
    realize_program,
    seed,
)
from presk.cli.source import Source, check_output, read_input
from presk.cli.backends import add_backend_arguments, host_program
from presk.diagnostics import PreskError
from presk.dialects.psk_core_types import describe
from presk.interp.inputs import check_inputs, load_inputs, make_inputs
from presk.interp.values import leaf_items
from presk.ir.calls import find_entry
from presk.plans import Plan


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run a function: on the reference interpreter, or its kernels")
    add_input_arguments(p)
    p.add_argument("--entry", required=True, help="the function to run, e.g. loss")
    add_size_arguments(p)
    p.add_argument("--inputs", metavar="IN.npz", help="arguments by name (record fields joined by '.')")
    p.add_argument("--seed", type=seed, default=0, help="seed of the generated inputs (default 0)")
    p.add_argument(
        "--bits", type=int, metavar="N", help="compute with mpmath at N bits instead of numpy f64 (not with --realize/--plan)"
    )
    add_realize_arguments(p)
    add_auto_plan_arguments(p, profile=True)
    add_backend_arguments(p, default="interp")
    p.add_argument(
        "--output",
        metavar="OUT.npz",
        help="save every output leaf to this file: as f64, or realized in its storage type "
        "(f64, f32; bf16 values as the float32 numbers that hold them)",
    )
    p.add_argument("--print-values", action="store_true", help="print every value, not only a summary")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    # The plan's own errors (its file, its JSON, its shape) have no place in the program.
    plan = plan_options(args)
    if plan is not None and args.bits is not None:
        raise PreskError(
            "E4001",
            f"--bits computes in mpmath, but {'--plan' if args.plan is not None else '--realize'} runs the "
            "program in its machine types: pass one or the other",
        )
    passes = pipeline_of(args)
    source = read_input(args.file)
    try:
        return _run(args, plan, source, passes)
    except PreskError as error:
        raise error.located(source.name) from None


def _run(args: argparse.Namespace, plan: Plan | None, source: Source, passes: tuple[ModulePass, ...]) -> int:
    if args.bits is not None and not 8 <= args.bits <= 100_000:
        raise PreskError("E4001", f"--bits {args.bits}: choose a precision between 8 and 100000 bits")
    if args.output:
        check_output(args.output)
    program = load_program(source, args.dim, args.const, passes, opt=opt_of(args), entries=entries_of(args))
    module, env = program.parsed.module, program.env
    func = find_entry(module, args.entry)
    if args.inputs:
        inputs = load_inputs(args.inputs, func, env)
    else:
        inputs = make_inputs(func, env, args.seed)
        check_inputs(func, inputs, env)
    if args.donate and args.backend == "interp":
        raise PreskError("E4001", "--donate writes results over arguments in the kernels: give --backend kernel or native")
    if args.backend != "interp":
        if args.bits is not None:
            raise PreskError("E4001", f"--bits runs the reference interpreter; --backend {args.backend} runs machine types")
        if args.plan == AUTO:
            from presk.cli.auto_plan import auto_plan  # the tuning layer: a fifth of a second of every run's start

            plan = auto_plan(program, args.entry, args.realize, args.profile, args.save_plan)
        plan = plan or plan_of("f64", None)
        from presk.jit.executor import flatten_inputs, rebuild_results  # the kernel backends' layers, imported here

        host = host_program(program, args.entry, plan, args.backend, args.threads, not args.no_fuse, args.donate)
        leaves = host(host.prepare_inputs(flatten_inputs(inputs)) if host.donated else flatten_inputs(inputs))
        outputs = rebuild_results(leaves, host.result_paths, len(func.function_type.outputs.data))
        realized = True
    else:
        from presk.interp.reference import run_entry  # xDSL's interpreters take a tenth of a second to import

        if plan is not None:
            realize_program(program, plan)
        outputs = run_entry(module, args.entry, inputs, env, bits=args.bits)
        realized = plan is not None
    backend = "" if args.backend == "interp" else f", {args.backend} backend"
    print(f"@{args.entry} ({_arithmetic(args, plan)}{backend}):")
    digits = 17 if args.bits is None else max(17, int(args.bits * 0.30103) + 1)
    gradients = program.gradients.get(args.entry, {})
    for i, (value, t) in enumerate(zip(outputs, func.function_type.outputs.data)):
        print_output(f"result {i}", value, t, digits, args.print_values, gradients.get(i))
    if args.output:
        save_outputs(args.output, outputs, realized=realized, gradients=gradients)
        print(f"saved to {args.output}")
    return 0


def print_output(
    label: str, value: Any, t: Attribute, digits: int, full: bool, gradient: GradientResult | None = None
) -> None:
    """A result's type, then a line per leaf; a gradient's leaves named as `--output` keys them (`params.w`)."""
    print(f"  {label}: {describe(t)}")
    leaves = output_keys([value], {0: gradient}) if gradient is not None else leaf_items(value)
    for path, leaf in leaves:
        name = f"    {path}: " if path else "    "
        if np.ndim(leaf) == 0:
            print(f"{name}{_number(leaf, digits)}")
            continue
        a = np.asarray(leaf)
        f = a.astype(np.float64)
        print(
            f"{name}shape {tuple(a.shape)}  min {f.min():.6g}  max {f.max():.6g}  "
            f"mean {f.mean():.6g}  l2 {np.sqrt((f * f).sum()):.6g}"
        )
        if full:
            with np.printoptions(precision=digits, threshold=sys.maxsize, linewidth=120):
                print(f if a.dtype == object else a)


def _number(x: Any, digits: int) -> str:
    mpmath = sys.modules.get("mpmath")  # imported by the reference interpreter when --bits computes in it
    if mpmath is not None and isinstance(x, mpmath.mpf):
        return mpmath.nstr(x, digits)
    return repr(float(x))


def _arithmetic(args: argparse.Namespace, plan: Plan | None) -> str:
    if plan is None:
        return "numpy f64" if args.bits is None else f"mpmath, {args.bits} bits"
    record = plan.realization
    if record.sites:
        apart = f"{len(record.sites)} site{'s' if len(record.sites) != 1 else ''} apart"
        what = f"realization {record.source}: {record.default} by default, {apart}"
    elif record.default == "bf16":
        what = "realization bf16: stored in bf16, computed in f32"
    else:
        what = f"realization {record.default}"
    return f"plan {plan.source}, {what}" if args.plan is not None else what


def _stored(leaf: Any, realized: bool) -> np.ndarray:
    """A leaf as the .npz keeps it: integers as int64; reals as f64, or realized in their storage dtype."""
    a = np.asarray(leaf)
    if a.dtype.kind in "iub":
        return a.astype(np.int64)
    if realized and a.dtype in (np.float32, np.float64):
        return a  # a bf16 value is the float32 that holds it
    return a.astype(np.float64)


def output_keys(outputs: list[Any], gradients: Mapping[int, GradientResult]) -> list[tuple[str, Any]]:
    """Every output leaf with its key in the .npz: `result0.w`, and a gradient's under its argument's name.

    A result that a `grad`/`value_and_grad` gives is written as its
    gradients, each under the name of the argument it is taken with respect
    to (`params.blocks.attn.wq`, the key `--inputs` gives that leaf), and
    its value as `value`; with several results, under `result{i}.` as well.
    """
    keyed: list[tuple[str, Any]] = []

    def add(prefix: str, tree: Any) -> None:
        keyed.extend((f"{prefix}.{p}" if p else prefix, leaf) for p, leaf in leaf_items(tree))

    for i, value in enumerate(outputs):
        gradient = gradients.get(i)
        if gradient is None:
            add(f"result{i}", value)
            continue
        scope = f"result{i}." if len(outputs) > 1 else ""
        if gradient.value:
            add(f"{scope}value", value[0])
            value = value[1]
        for name, tree in zip(gradient.names, [value] if len(gradient.names) == 1 else value):
            add(scope + name, tree)
    return keyed


def save_outputs(
    path: str, outputs: list[Any], realized: bool = False, gradients: Mapping[int, GradientResult] | None = None
) -> None:
    arrays = {key: _stored(leaf, realized) for key, leaf in output_keys(outputs, gradients or {})}
    try:
        np.savez(path, **arrays)
    except OSError as e:
        raise PreskError("E0001", f"cannot write {path}: {e}") from None
