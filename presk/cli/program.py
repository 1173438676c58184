"""Loading a program for the `presk` subcommands: read, parse, verify, transform, bind sizes, realize.

The input is read by `presk.cli.source` (`-` is standard input), and the
user's own `--pass-pipeline` (presk's passes, xDSL's or a plugin's) runs on
the PSK-Core program right after it is parsed and verified, before any
size is resolved and before fusion and lowering, so a plugin pass changes
what every later stage sees. Then the gradients the program asks for
(`psk_core.grad`, `value_and_grad`) are expanded by `psk-autodiff`, after
`psk-bind` when the program has a `fold` (whose gradient writes its layers
out), as `presk.pipeline.realize` does on the way to kernels: so the
reference interpreter, `presk launches` and `presk dump --stage core|realize`
see the functions the kernel backends run. A pipeline that already ran
`psk-autodiff` (with `remat=recompute`, say) leaves no request, and its
choice stands.

Every step raises `PreskError`, so each subcommand only formats and exits.
Errors placed at an operation of the program carry its source line
(`in_program`), so a plan refused at a nest prints as
`file:line:col: error: E7002: ...` with the line of the nest's root.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.context import Context
from xdsl.dialects.func import FuncOp
from xdsl.ir import BlockArgument
from xdsl.passes import ModulePass

from presk import sizes
from presk.cli.pipeline import build_pipeline, pipeline_spec, run_pass
from presk.cli.source import Source, read_input
from presk.diagnostics import PreskError
from presk.dialects.psk_core import ConstDimOp, FoldOp
from presk.dialects.psk_core_autodiff import GradientRequestOp, ValueAndGradOp
from presk.interp.inputs import argument_names
from presk.ir.calls import reachable_functions
from presk.ir.context import presk_context
from presk.ir.parse import ParsedModule, parse_module
from presk.universe import load_multiverse
from presk.passes.autodiff import AutoDiff
from presk.passes.bind import BindSizes
from presk.passes.fuse import FuseElementwise
from presk.passes.realize import apply_plan
from presk.plans import Plan, plan_from_options, realization_record

if TYPE_CHECKING:
    from presk.passes.egraph import FunctionReport


def seed(text: str) -> int:
    """`--seed`'s type: numpy's generators take a non-negative integer, of any size."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, not '{text[:20]}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, not {value}")
    return value


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dim", action="append", default=[], metavar="NAME=N", help="bind a run-time dimension variable (repeatable)"
    )
    parser.add_argument(
        "--const", action="append", default=[], metavar="NAME=N", help="override a declared constant (repeatable)"
    )


def add_input_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The program (`-` reads standard input) and the PSK-Core pipeline run on it first."""
    parser.add_argument("file", nargs=None if required else "?", help="a PSK-Core program (.mlir); '-' reads standard input")
    parser.add_argument(
        "--pass-pipeline",
        action="append",
        default=[],
        metavar="'builtin.module(...)'",
        help="passes to run on the PSK-Core program right after parsing, before fusion and lowering, "
        "in MLIR syntax as presk-opt takes them (presk's, xDSL's and installed plugins' passes)",
    )
    parser.add_argument(
        "--opt",
        action="store_true",
        help="rewrite the PSK-Core program by equality saturation (psk-egraph-opt, docs/egraph.md) after "
        "--pass-pipeline and differentiation; a summary line on stderr",
    )
    parser.add_argument(
        "--opt-profile",
        metavar="P.json",
        help="with --opt (implied): extract the program the cost profile's roofline predicts fastest at the bound "
        "sizes, elementwise operations priced inside their fusion groups, instead of by operation counts",
    )


@dataclass(frozen=True)
class OptPricing:
    """`--opt-profile`: psk-egraph-opt's extraction priced by this profile's roofline, in `realize`'s types."""

    profile: str
    realize: str = "f64"


def opt_of(args: argparse.Namespace) -> bool | OptPricing:
    """`load_program`'s `opt` for `--opt`/`--opt-profile` (in `--realize`'s types, f64 without it)."""
    if getattr(args, "opt_profile", None):
        return OptPricing(args.opt_profile, getattr(args, "realize", None) or "f64")
    return bool(getattr(args, "opt", False))


def program_of(args: argparse.Namespace) -> Program:
    """FILE through `--pass-pipeline`, bound at `--dim`/`--const`; its errors placed in FILE."""
    passes = pipeline_of(args)
    source = read_input(args.file)
    try:
        return load_program(source, args.dim, args.const, passes, opt=opt_of(args), entries=entries_of(args))
    except PreskError as error:
        raise error.located(source.name) from None


def entries_of(args: argparse.Namespace) -> list[str] | None:
    """The functions a command works on (`--entry`, once or repeated), or None for the whole file."""
    entry = getattr(args, "entry", None)
    if not entry:
        return None
    return [entry] if isinstance(entry, str) else list(entry)


def pipeline_of(args: argparse.Namespace) -> tuple[ModulePass, ...]:
    """The passes `--pass-pipeline` names, checked before the input is read (E3001, E3002)."""
    return build_pipeline(load_multiverse().universe.all_passes, pipeline_spec((), args.pass_pipeline))


@dataclass(frozen=True)
class GradientResult:
    """A result of a function that is a gradient request's, as the source wrote it: what its leaves are."""

    value: bool
    """`value_and_grad`: the result is (value, gradients)."""
    names: tuple[str, ...]
    """The argument each gradient is taken with respect to, named as `--inputs` names it."""


def gradient_results(func: FuncOp) -> dict[int, GradientResult]:
    """The results of `func` that a `grad`/`value_and_grad` gives directly, by result position.

    A gradient is named after the argument of `func` passed at its `wrt`
    position (`params`), so that `presk run --output` writes the gradient
    of `params.blocks.attn.wq` under that key; an operand that is no
    argument of `func` is named by its position in the request (`arg0`).
    """
    block = func.body.block
    names = argument_names(func)
    found: dict[int, GradientResult] = {}
    returned = block.last_op.operands if block.last_op is not None else ()
    for i, value in enumerate(returned):
        request = value.owner
        if not isinstance(request, GradientRequestOp):
            continue
        wrt = []
        for position in request.positions:
            operand = request.arguments[position]
            mine = isinstance(operand, BlockArgument) and operand.owner is block
            wrt.append(names[operand.index] if mine else f"arg{position}")  # type: ignore[union-attr]
        found[i] = GradientResult(isinstance(request, ValueAndGradOp), tuple(wrt))
    return found


@dataclass
class Program:
    parsed: ParsedModule
    env: dict[str, int]
    """Every constant and every bound dimension variable."""
    reports: list[FunctionReport] = field(default_factory=list)
    """With `--opt`: psk-egraph-opt's report of each function, in module order."""
    gradients: dict[str, dict[int, GradientResult]] = field(default_factory=dict)
    """The results of each function that are gradient requests' (`gradient_results`), read before
    psk-autodiff replaced the requests by calls."""


def load_program(
    source: str | Source,
    dims: list[str],
    consts: list[str],
    passes: Sequence[ModulePass] = (),
    extend: Callable[[ParsedModule], None] | None = None,
    remat: str = "save",
    opt: bool | OptPricing = False,
    opt_report: bool = False,
    entries: Sequence[str] | None = None,
) -> Program:
    """Parse and verify `source` (a path, or what `read_input` read), run `passes`, resolve the sizes, differentiate.

    `extend` adds to the parsed module before the passes run (`presk train`
    adds the function of its step there, so the user's pipeline sees it too);
    `remat` is the mode of the `psk-autodiff` run here (`presk train --remat`).
    `opt` (`--opt`) then rewrites every function `entries` reach (every
    function when None) by equality saturation (`psk-egraph-opt` at its
    default limits), gradients included, its
    extraction priced by operation counts, or with `OptPricing`
    (`--opt-profile`) by the profile's roofline at these sizes, fusion-aware; it
    writes the report's summary line on stderr (with `opt_report`, a line
    per function before it: `presk dump --stage core-opt`).
    `entries` (read after `extend` ran, so it may name what `extend` adds)
    limits differentiation to the gradients those functions reach; None
    (a command on the whole file) differentiates every request.
    A pass's error placed in the program carries its source line.
    """
    if isinstance(source, str):
        source = read_input(source)
    ctx = presk_context()
    parsed = parse_module(ctx, source.text, source.name)
    parsed.verify()
    if extend is not None:
        extend(parsed)
        parsed.verify()
    for pass_ in passes:
        _run_located(ctx, pass_, parsed)
    env = sizes.resolve(
        parsed.module, sizes.parse_bindings(consts, "--const"), sizes.parse_bindings(dims, "--dim")
    )
    module = parsed.module
    gradients = {f.sym_name.data: found for f in module.body.block.ops if isinstance(f, FuncOp)
                 if (found := gradient_results(f))}  # fmt: skip
    reached = None if entries is None else reachable_functions(module, entries)
    functions = [
        f for f in module.body.block.ops if isinstance(f, FuncOp) and (reached is None or f.sym_name.data in reached)
    ]
    if any(isinstance(op, GradientRequestOp) for f in functions for op in f.walk()):
        if any(isinstance(op, FoldOp) for op in module.walk()):
            # A fold's gradient runs its layers one by one: the layer count must be an integer.
            _bind_keeping_declarations(ctx, parsed, env)
        _run_located(ctx, AutoDiff(remat=remat, entries=",".join(entries or ())), parsed)
    reports: list[FunctionReport] = []
    if opt:
        # egglog (and the black it imports) takes a third of a second to import: only `--opt` pays it.
        from presk.passes.egraph import format_reports, optimize_module
        from presk.passes.egraph_prices import profile_prices

        prices = profile_prices(opt.profile, opt.realize, env) if isinstance(opt, OptPricing) else None
        # What the entries reach after differentiation (their derivatives' functions included), only:
        # the others never run, and saturating them took most of `presk run --opt`'s time on the
        # GPT's `loss_grad` (its optimiser step the largest e-graph of the file).
        only = None if entries is None else reachable_functions(module, entries)
        reports = optimize_module(parsed.module, prices=prices, only=only)
        lines = format_reports(reports).splitlines()
        sys.stderr.write("".join(line + "\n" for line in (lines if opt_report else lines[-1:])))
    return Program(parsed, env, reports, gradients)


def _bind_keeping_declarations(ctx: Context, parsed: ParsedModule, env: dict[str, int]) -> None:
    """`psk-bind` at `env`, with the `const_dim` declarations put back as the source wrote them.

    The types are bound either way; the declarations stay so that the later
    stages that bind again with the user's `--const` flags (`presk dump`,
    `presk.pipeline.realize`) find the constants those flags name, and
    resolve them to the same values.
    """
    declarations = [op.clone() for op in parsed.module.body.block.ops if isinstance(op, ConstDimOp)]
    constants = sizes.declared_constants(parsed.module)
    bind = BindSizes(
        dims=",".join(f"{k}={v}" for k, v in env.items() if k not in constants),
        consts=",".join(f"{k}={v}" for k, v in env.items() if k in constants),
    )
    _run_located(ctx, bind, parsed)
    block = parsed.module.body.block
    for declaration in reversed(declarations):
        if block.first_op is None:
            block.add_op(declaration)
        else:
            block.insert_op_before(declaration, block.first_op)


def _run_located(ctx: Context, pass_: ModulePass, parsed: ParsedModule) -> None:
    try:
        run_pass(ctx, pass_, parsed)
    except PreskError as error:
        raise _with_source(error.located(parsed.filename), parsed) from None


def add_realize_arguments(parser: argparse.ArgumentParser) -> None:
    """`--realize R | --plan @P.json`: the machine types (and layouts) the program is realized in."""
    parser.add_argument(
        "--realize",
        metavar="R",
        help="realize the program: f64, f32, bf16 (stored in bf16, computed in f32), "
        "or @FILE, a record of types per site ({\"default\": \"f32\", \"f/%%3\": \"bf16\"})",
    )
    parser.add_argument(
        "--plan",
        metavar="@P.json",
        help="a realization plan (its realization and a layout per nest), in place of --realize; or 'auto': "
        "layouts chosen from this machine's cost profile, or as presk autotune measured them best here "
        "($PRESK_TUNED=off: the profile alone; docs/plans.md), in --realize's types",
    )


def add_auto_plan_arguments(parser: argparse.ArgumentParser, profile: bool) -> None:
    """`--save-plan` (and `--profile`, where the command has none of its own) for `--plan auto`."""
    if profile:
        parser.add_argument("--profile", metavar="P.json", help="with --plan auto: the cost profile that prices the "
                            "layouts (default $PRESK_PROFILE, else this machine's own, measured on first use)")  # fmt: skip
    parser.add_argument("--save-plan", metavar="PLAN.json", help="with --plan auto: write the chosen plan here")


AUTO = "auto"
"""`--plan auto`: layouts chosen from this machine's cost profile (`presk.cli.auto_plan`)."""


def plan_options(args: Any) -> Plan | None:
    """The plan `--realize`/`--plan` give, None with `--plan auto` (planned once the program is loaded).

    For commands that run an entry on a chosen backend (`presk run`,
    `presk train`): auto needs the kernels, and `--save-plan`/`--profile`
    need auto.
    """
    auto = args.plan == AUTO
    if auto and args.backend == "interp":
        raise PreskError("E4001", "--plan auto chooses kernel layouts: give --backend kernel or native")
    if not auto and (args.save_plan or args.profile):
        raise PreskError("E4001", f"{'--save-plan' if args.save_plan else '--profile'} goes with --plan auto")
    plan = plan_of(args.realize, None if auto else args.plan)  # --realize is checked either way
    return None if auto else plan


def plan_of(realize: str | None, plan: str | None) -> Plan | None:
    """The plan `--realize`/`--plan` give, or None when neither is given (E4001 when both are)."""
    if realize is not None and plan is not None:
        raise PreskError("E4001", "--plan gives the realization too: pass --plan or --realize, not both")
    if realize is None and plan is None:
        return None
    if realize == "":
        realization_record(realize, "--realize")  # refuses it, E7001
    if plan is not None and plan.lstrip("@") == "":
        raise PreskError("E7002", "--plan names a plan file: --plan @P.json")
    if plan == AUTO:
        raise PreskError("E4001", "--plan auto chooses layouts for `presk run` and `presk bench`; "
                         "here give a plan file (`presk plan` writes one)")  # fmt: skip
    return plan_from_options(realize, plan)


def in_program(error: PreskError, program: Program) -> PreskError:
    """`error` with its source line when it is placed in the program's file.

    A plan refused (E7002) on a program `--opt` rewrote gets a note: the
    rewrite renumbers the lets, so a plan written for the program as the
    file has it names other nests.
    """
    if error.code == "E7002" and any(r.rewritten for r in program.reports):
        error = error.with_note(
            "--opt rewrote the program and renumbered its nests: a plan written for the file names other nests; "
            "write it for `presk dump --stage core-opt`'s program, or use --plan auto"
        )
    return _with_source(error, program.parsed)


def _with_source(error: PreskError, parsed: ParsedModule) -> PreskError:
    if error.file == parsed.filename:
        return error.with_source(parsed.text, parsed.line_offset)
    return error


def realize_program(program: Program, plan: Plan) -> None:
    """`psk-fuse`, then `psk-realize` with `plan`: every launch a site with its realization and layout.

    A plan refused at a nest (E7002) or a realization that names no launch
    (E7001) is reported with the nest's source line; the result is verified.
    """
    module = program.parsed.module
    try:
        FuseElementwise().apply(presk_context(), module)
        apply_plan(module, plan)
        program.parsed.verify()
    except PreskError as error:
        raise in_program(error, program) from None
