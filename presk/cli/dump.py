"""`presk dump`: print a program at a stage of the compiler.

`--stage kernel` and `--stage llvm` print one `--entry`'s kernels and host
program (PSK-Kernel), and the LLVM IR the native backend compiles.
`--stage core` prints the verified PSK-Core program, bound to the given
sizes when `--dim`/`--const` are passed (so the types show the integers a
run would use); `--stage core-opt` prints it after `psk-egraph-opt` (what
`--opt` runs), with the report of every function on stderr. `--stage realize` (alias `sched`, its name until PSK-Sched
was renamed) prints it after `psk-fuse` and `psk-realize`: every launch a
`psk_realize.group` or `psk_realize.nest` carrying its site name, its
realization (`--realize`, f64 by default, or the plan's) and its layout,
the decisions the plan states and, inside `default(...)`, the defaults of
the others at the site's types. Both print with the file's type aliases.

The realize stage keeps the names `--stage core` prints: every value is
printed with its binding in the core dump, and a site with its root's, so
`%6 = psk_realize.group "LayerNorm.apply/%6"` is the group whose root is
the core dump's `%6`, the name a plan uses. (`presk-opt -p psk-fuse` numbers
the values afresh, in printing order.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from io import StringIO
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass

from presk.cli.program import (
    add_input_arguments,
    add_realize_arguments,
    add_size_arguments,
    entries_of,
    load_program,
    opt_of,
    pipeline_of,
    plan_of,
    realize_program,
)
from presk.cli.source import Source, read_input
from presk.cli.backends import compile_entry
from presk.diagnostics import PreskError
from presk.dialects.psk_core_types import map_type
from presk.dialects.psk_realize import SiteOp
from presk.ir.context import presk_context
from presk.ir.names import binding_names
from presk.ir.print import AliasPrinter, _alias_table, print_module
from presk.passes.bind import BindSizes

STAGES = ("core", "core-opt", "realize", "kernel", "llvm")
ALIASES = {"sched": "realize"}
"""`--stage sched` is kept as an alias of `--stage realize`."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("dump", help="print a program at a stage of the compiler")
    add_input_arguments(p)
    p.add_argument(
        "--stage",
        default="core",
        help=f"the stage to print: {', '.join(STAGES)} (default core; sched is an alias of realize)",
    )
    add_size_arguments(p)
    add_realize_arguments(p)
    p.add_argument("--entry", help="the entry whose kernels --stage kernel and --stage llvm print; at the other "
                   "stages the whole file is printed, with only the gradients this entry reaches expanded")
    p.add_argument("--no-fuse", action="store_true", help="launch every primitive by itself (psk-fuse{max-nodes=1})")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    stage = ALIASES.get(args.stage, args.stage)
    if stage not in STAGES:
        known = ", ".join([*STAGES, *ALIASES])
        raise PreskError("E4001", f"--stage {args.stage}: this presk knows the stages {known}")
    plan = plan_of(args.realize, args.plan)
    if stage in ("kernel", "llvm") and not args.entry:
        raise PreskError("E4001", f"--stage {stage} prints one entry's kernels: pass --entry F")
    if plan is not None and stage in ("core", "core-opt"):
        given = "--plan" if args.plan is not None else "--realize"
        raise PreskError("E4001", f"{given} realizes the program: it applies to --stage realize, not --stage {stage}")
    passes = pipeline_of(args)
    source = read_input(args.file)
    try:
        return _dump(args, stage, plan, source, passes)
    except PreskError as error:
        raise error.located(source.name) from None


def _dump(args: argparse.Namespace, stage: str, plan: Any, source: Source, passes: tuple[ModulePass, ...]) -> int:
    core_opt = stage == "core-opt"  # the program rewritten, and the report of every function on stderr
    program = load_program(source, args.dim, args.const, passes, opt=opt_of(args) or core_opt, opt_report=core_opt,
                           entries=entries_of(args))
    module, aliases = program.parsed.module, program.parsed.aliases
    if stage in ("kernel", "llvm"):
        kernels = compile_entry(program, args.entry, plan or plan_of("f64", None), fuse=not args.no_fuse)
        if stage == "kernel":
            sys.stdout.write(print_module(kernels, {}))
        else:
            from presk.target import target_machine
            from presk.lowering.kernel_to_llvm import translate_module

            sys.stdout.write(translate_module(kernels, target_machine()))
        return 0
    if args.dim or args.const:
        bind = BindSizes(dims=",".join(args.dim), consts=",".join(args.const))
        bind.apply(presk_context(), module)
        # The file's aliases name the bound types too, so the dump stays as short as the source.
        aliases = {name: map_type(value, lambda s: program.env.get(s, s) if isinstance(s, str) else s)
                   for name, value in aliases.items()}  # fmt: skip
    if stage in ("core", "core-opt"):
        sys.stdout.write(print_module(module, aliases))
        return 0
    names = core_names(module)
    realize_program(program, plan or plan_of("f64", None))
    sys.stdout.write(print_named(module, aliases, names))
    return 0


def core_names(module: ModuleOp) -> dict[SSAValue, str]:
    """Every value of every function with its binding as `--stage core` prints it."""
    names: dict[SSAValue, str] = {}
    for func in (op for op in module.walk() if isinstance(op, FuncOp)):
        names.update(binding_names(func))
    return names


def print_named(module: ModuleOp, aliases: Mapping[str, Attribute], names: Mapping[SSAValue, str]) -> str:
    """`print_module`, with each value named as in the core dump and each site as its root.

    Falls back to fresh numbering if a pass made a value the core dump did
    not have (a fresh number could then repeat a kept one).
    """
    seeded = dict(names)
    for site in (op for op in module.walk() if isinstance(op, SiteOp)):
        if site.root in seeded:
            seeded[site.result] = seeded[site.root]
    values = [v for op in module.walk() for v in op.results]
    values += [arg for op in module.walk() for region in op.regions for block in region.blocks for arg in block.args]
    text = print_module(module, aliases)
    if any(v not in seeded for v in values):
        return text
    body = StringIO()
    # The alias table print_module builds, so both print the same attributes by the same names.
    printer = AliasPrinter(stream=body, aliases=_alias_table(list(aliases.items())))
    printer._ssa_values.update(seeded)  # xDSL has no public way to name values, as presk.ir.names reads them
    printer.print_op(module)
    # The alias definitions are the same, since the same attributes are printed: keep print_module's.
    header = text[: text.index("builtin.module")]
    return header + body.getvalue() + "\n"
