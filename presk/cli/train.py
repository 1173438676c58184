"""`presk train`: train a model written in PSK-Core: the loss, its gradient and an optimiser step, N times.

    presk train corpus/minigpt.mlir --loss loss --step adamw.step --steps 20 --dim B=4 --dim T=8

The program gives the loss, `(params, ids, targets) -> real`, and the step,
`(params, grads, m, v, b1t, b2t, lr) -> (params', m', v')` as the corpus's
`adamw.step` is written. presk adds one function to the program,
`<loss>.train_step(params, m, v, b1t, b2t, lr, ids, targets) -> (loss,
params', m', v')`, which asks for `value_and_grad @loss wrt [0]` and calls the
step; `psk-autodiff` expands it like any other request (`presk.cli.program`),
so a whole training step is one entry: compiled once into one host program
(on the kernel backends, its kernels built once), then called once a step with
the state it returned. Nothing of the loop is written in numpy but the data
and the two bias-correction scalars, b1t = beta1^t and b2t = beta2^t.

Data are next-token windows of a token stream (`presk.training.streams`):
a synthetic Markov chain by default, the characters of standard-library
docstrings (`--data stdlib`), of a text file (`--data text:PATH`), or an
`.npz` of tokens; the last tenth of every stream is held out, and
`--eval-every N` prints and logs the mean loss over fixed windows of it.
The parameters start as GPT-2's (`--init gpt2`: std 0.02, unit gains, zero
biases) or as `presk run` generates an entry's inputs (`--init normal`).
`--checkpoint DIR` saves the state after every step and resumes from it
(`presk.training.checkpoint`); `--plot FILE.png` draws both losses.

Everything is deterministic given the flags, so a run is reproduced on every
backend: the kernel interpreter and native give the same losses bit for bit,
and the reference interpreter gives them within its bound (docs/training.md).
Ctrl-C stops after the step under way; `--log` (and `--checkpoint`) then hold
every finished step.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Region
from xdsl.passes import ModulePass

from presk.cli.auto_plan import auto_plan
from presk.cli.backends import KERNEL_BACKENDS, host_program
from presk.cli.guard import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
from presk.cli.program import (
    AUTO,
    Program,
    add_auto_plan_arguments,
    add_input_arguments,
    add_realize_arguments,
    add_size_arguments,
    load_program,
    opt_of,
    pipeline_of,
    plan_of,
    plan_options,
    realize_program,
    seed,
)
from presk.cli.source import Source, check_output, read_input
from presk.cost.launches import LaunchRow, launch_table, percent
from presk.diagnostics import PreskError
from presk.dialects import psk_core as core
from presk.dialects.psk_core_types import IndexTensorType, RealType, TensorType, TupleType, describe, leaves
from presk.dialects.psk_realize import STORAGE_BYTES
from presk.interp.inputs import bind, bound_shape, make_inputs
from presk.interp.values import leaf_items
from presk.ir.calls import find_entry
from presk.ir.parse import ParsedModule
from presk.jit.buffers import on_a_line
from presk.jit.executor import HostProgram, flatten_inputs
from presk.passes.autodiff import REMAT_MODES
from presk.plans import Plan
from presk.training import checkpoint
from presk.training.plot import plot_losses
from presk.training.streams import TokenWindows, load_stream, validation_batches

DEFAULT_LR = 1e-2
"""AdamW's usual range is 1e-4 to 1e-2; at the small sizes this command is tried at, 1e-2 trains MiniGPT on its
synthetic stream best of 1e-2, 3e-3 and 1e-3 (the corpus GPT on characters does best at 1e-3; docs/training.md)."""

TRAIN_INITS = ("gpt2", "normal")
DEFAULT_INIT = "gpt2"
"""GPT-2's initialisation: the corpus GPT's loss starts near ln V and falls faster (docs/training.md §4)."""

EVAL_BATCHES = 16
"""Batches of validation windows per evaluation: at B=4, T=32, 2 048 positions of the split."""

STATE = ("params", "m", "v")
"""The names of the state arguments of the generated step, also the prefixes of their leaves' paths."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a PSK-Core model: the loss's gradient (psk-autodiff) and an optimiser step, N steps",
        description="Train a model written in PSK-Core. Each step computes the loss and its gradient with respect "
        "to the parameters (value_and_grad, expanded by psk-autodiff), then calls the step function; the whole step "
        "is compiled once and run --steps times. Prints one line per step (step, loss, ms).",
    )
    add_input_arguments(p)
    p.add_argument("--loss", required=True, metavar="F", help="the loss: F(params, ids, targets) -> real")
    p.add_argument(
        "--step",
        required=True,
        metavar="F",
        help="the optimiser step: F(params, grads, m, v, b1t, b2t, lr) -> (params, m, v), e.g. adamw.step",
    )
    p.add_argument("--steps", type=int, default=20, metavar="N", help="the step to train to (default 20); with "
                   "--checkpoint, a resumed run continues from its checkpoint's step")  # fmt: skip
    add_size_arguments(p)
    add_realize_arguments(p)
    add_auto_plan_arguments(p, profile=True)
    p.add_argument(
        "--backend",
        default="native",
        choices=("interp", *KERNEL_BACKENDS),
        help="interp: the reference interpreter; kernel: the kernels, interpreted exactly; "
        "native: the kernels compiled by LLVM (default native)",
    )
    p.add_argument("--threads", type=int, metavar="N", help="workers of the native backend (default: PRESK_THREADS, else every core)")
    p.add_argument("--no-fuse", action="store_true", help="launch every primitive by itself (psk-fuse{max-nodes=1})")
    p.add_argument("--seed", type=seed, default=0, help="seed of the initial parameters, the synthetic stream and the "
                   "windows' offsets (default 0)")  # fmt: skip
    p.add_argument("--lr", type=float, default=DEFAULT_LR, help=f"learning rate (default {DEFAULT_LR:g})")
    p.add_argument("--beta1", type=float, default=0.9, help="the step's beta1, for b1t = beta1^t (default 0.9, "
                   "adamw.step's constant)")  # fmt: skip
    p.add_argument("--beta2", type=float, default=0.999, help="the step's beta2, for b2t = beta2^t (default 0.999)")
    p.add_argument("--data", default="synthetic", metavar="SPEC", help="the token stream: synthetic (a Markov chain "
                   "from --seed, the default), stdlib (the characters of standard-library docstrings), text:PATH "
                   "(the characters of a UTF-8 file) or FILE.npz (a 1-D integer array 'tokens'); its last tenth "
                   "is the validation split")  # fmt: skip
    p.add_argument("--init", choices=TRAIN_INITS, default=DEFAULT_INIT, help="the initial parameters: gpt2 (normal, "
                   "std 0.02, for matrices and embeddings, ones for gains, zeros for biases) or normal (as presk run "
                   f"generates the loss's inputs: N(0, 1), or the argument's psk_core.init) (default {DEFAULT_INIT})")  # fmt: skip
    p.add_argument("--eval-every", type=int, default=0, metavar="N", help="every N steps (and at the last), the mean "
                   "loss over fixed windows of the validation split, printed and logged as val_loss (default: never)")  # fmt: skip
    p.add_argument("--eval-batches", type=int, default=EVAL_BATCHES, metavar="N", help="batches of windows the "
                   f"validation loss averages (default {EVAL_BATCHES})")  # fmt: skip
    p.add_argument("--checkpoint", metavar="DIR", help="save the parameters, moments, step and data position to "
                   "DIR/checkpoint.npz after every step, and resume from it when DIR holds one (--steps is the total)")  # fmt: skip
    p.add_argument("--checkpoint-every", type=int, default=1, metavar="N",
                   help="with --checkpoint: save after every N-th step (default 1), and after the last one or the "
                   "one Ctrl-C stopped; a crash between two saves loses at most N - 1 steps")  # fmt: skip
    p.add_argument("--plot", metavar="FILE.png", help="plot the training and validation losses against the step")
    p.add_argument("--remat", choices=REMAT_MODES, default="save", help="save: loss.fwd keeps the residuals loss.bwd "
                   "reads (default); recompute: one loss.vjp recomputes them (psk-autodiff{remat=recompute})")  # fmt: skip
    p.add_argument("--log", metavar="TRAIN.jsonl", help="append one JSON line per finished step")
    p.set_defaults(handler=main)


@dataclass(frozen=True)
class Signature:
    """What the loss takes, checked before anything is generated."""

    params: Attribute
    data: tuple[Attribute, ...]


def check_loss(module: ModuleOp, name: str) -> Signature:
    """`name`(params, ids, targets) -> real: params of reals, ids and targets index tensors [batch, seq] alike."""
    loss = find_entry(module, name)
    inputs, outputs = loss.function_type.inputs.data, loss.function_type.outputs.data
    shown = f"({', '.join(describe(t) for t in inputs)}) -> ({', '.join(describe(t) for t in outputs)})"
    if len(outputs) != 1 or not isinstance(outputs[0], RealType):
        raise PreskError("E4001", f"--loss {name}: a loss returns one real, @{name} is {shown}")
    if not inputs or any(isinstance(leaf, IndexTensorType) for _, leaf in leaves(inputs[0])):
        raise PreskError("E4001", f"--loss {name}: its first argument is the parameters, reals to differentiate; "
                         f"@{name} is {shown}")  # fmt: skip
    data = tuple(inputs[1:])
    if len(data) != 2 or not all(isinstance(t, IndexTensorType) and len(t.sizes) == 2 for t in data) or data[0] != data[1]:
        raise PreskError("E4001", f"--loss {name}: presk train feeds next-token windows, so the loss takes "
                         f"(params, ids, targets) with ids and targets index tensors [batch, seq] of one type; "
                         f"@{name} is {shown}")  # fmt: skip
    return Signature(inputs[0], data)


def check_step(module: ModuleOp, name: str, params: Attribute) -> None:
    """`name`(params, grads, m, v, b1t, b2t, lr) -> tuple<params, params, params>, params the loss's."""
    step = find_entry(module, name)
    inputs, outputs = list(step.function_type.inputs.data), list(step.function_type.outputs.data)
    real = RealType()
    if inputs != [params] * 4 + [real] * 3 or outputs != [TupleType([params] * 3)]:
        shown = f"({', '.join(describe(t) for t in inputs)}) -> ({', '.join(describe(t) for t in outputs)})"
        raise PreskError("E4001", f"--step {name}: a step takes (params, grads, m, v, b1t, b2t, lr) and returns "
                         f"(params, m, v), with params the loss's {describe(params)}; @{name} is {shown}")  # fmt: skip


def add_train_step(parsed: ParsedModule, loss: str, step: str) -> str:
    """Add `<loss>.train_step` (its name made unique) to the module; returns its name.

    Built in the IR rather than in Python so that the gradient, the step and
    what joins them are compiled as one program, fused and realized together.
    """
    module = parsed.module
    signature = check_loss(module, loss)
    check_step(module, step, signature.params)
    taken = {op.sym_name.data for op in module.walk() if isinstance(op, func.FuncOp)}
    name, n = f"{loss}.train_step", 1
    while name in taken:
        n += 1
        name = f"{loss}.train_step{n}"
    P, real = signature.params, RealType()
    block = Block(arg_types=[P, P, P, real, real, real, *signature.data])
    for arg, hint in zip(block.args, [*STATE, "b1t", "b2t", "lr", "ids", "targets"]):
        arg.name_hint = hint
    params, m, v, b1t, b2t, lr, *data = block.args
    value_grad = core.ValueAndGradOp(loss, [params, *data], [0])
    value, grads = core.ProjOp(value_grad.result, 0), core.ProjOp(value_grad.result, 1)
    call = func.CallOp(step, [params, grads.result, m, v, b1t, b2t, lr], [TupleType([P, P, P])])
    new_state = [core.ProjOp(call.res[0], i) for i in range(3)]
    result = core.TupleOp([value.result, *(s.result for s in new_state)])
    block.add_ops([value_grad, value, grads, call, *new_state, result, func.ReturnOp(result.result)])
    module.body.block.add_op(
        func.FuncOp(name, (block.arg_types, [result.result.type]), Region(block))
    )
    return name


def _on_lines(state: Sequence[Any]) -> list[Any]:
    """The state's arrays on cache lines: the step overwrites them in place for the whole run (they are
    donated, so `prepare_inputs` keeps them where they are), and its products read the parameters with
    vector loads that would split lines off one (`presk.jit.buffers.on_a_line`)."""
    return [on_a_line(a) if isinstance(a, np.ndarray) else a for a in state]


class Stepper:
    """One call a step, on the reference interpreter or a compiled host program; holds the training state.

    The validation loss is computed by the loss entry itself, compiled on
    first use for the same backend and plan, on the parameters the state holds.
    """

    def __init__(self, program: Program, entry: str, plan: Plan | None, args: argparse.Namespace, params: Any) -> None:
        func_op = find_entry(program.parsed.module, entry)
        self.template = [params, zeros_like_tree(params), zeros_like_tree(params)]
        self.program, self.entry, self.loss, self.args = program, entry, args.loss, args
        self.plan = plan
        self.host: HostProgram | None = None
        self.loss_host: HostProgram | None = None
        if args.backend == "interp":
            if plan is not None:
                realize_program(program, plan)
            self.state: list[Any] = list(self.template)
            return
        self.host = host_program(program, entry, plan or plan_of("f64", None), args.backend, args.threads,
                                 not args.no_fuse)  # fmt: skip
        self.n = len(list(leaves(func_op.function_type.inputs.data[0])))
        if self.host.argument_paths[: 3 * self.n] != list(state_shapes(params)):
            raise PreskError("E3003", f"the step's state leaves are {self.host.argument_paths[: 3 * self.n]}, not the "
                             "parameters' and the moments' paths")  # fmt: skip
        self.state = self.host.prepare_inputs(_on_lines(flatten_inputs(self.template)))[: 3 * self.n]
        self.feedback = _feedback(self.host, self.n)

    def __call__(self, b1t: float, b2t: float, lr: float, ids: np.ndarray, targets: np.ndarray) -> float:
        if self.host is None:
            from presk.interp.reference import run_entry  # imported where used: see presk/cli/run.py

            # A step that overflows is reported once, by its non-finite loss, not by numpy's warnings.
            with np.errstate(all="ignore"):
                (result,) = run_entry(self.program.parsed.module, self.entry, [*self.state, b1t, b2t, lr, ids, targets],
                                      self.program.env)  # fmt: skip
            loss, *self.state = result
            return float(loss)
        scalars = [np.float64(b1t), np.float64(b2t), np.float64(lr)]
        out = self.host([*self.state, *scalars, ids, targets])
        self.state = [out[i] for i in self.feedback]
        return float(out[0])

    def evaluate(self, batches: list[tuple[np.ndarray, np.ndarray]]) -> float:
        """The mean of the loss entry over `batches`, at the current parameters (the state is not changed)."""
        total = 0.0
        for ids, targets in batches:
            if self.host is None:
                from presk.interp.reference import run_entry

                with np.errstate(all="ignore"):
                    (value,) = run_entry(self.program.parsed.module, self.loss, [self.state[0], ids, targets],
                                         self.program.env)  # fmt: skip
            else:
                if self.loss_host is None:
                    self.loss_host = host_program(self.program, self.loss, self.plan or plan_of("f64", None),
                                                  self.args.backend, self.args.threads, not self.args.no_fuse)  # fmt: skip
                value = self.loss_host([*self.state[: self.n], ids, targets])[0]
            total += float(value)
        return total / len(batches)

    def leaves(self) -> dict[str, np.ndarray]:
        """The state's leaves by path (params.…, m.…, v.…), as the step computes them: what a checkpoint saves."""
        if self.host is None:
            return {path: np.asarray(leaf) for name, tree in zip(STATE, self.state) for path, leaf in
                    leaf_items(tree, f"{name}.")}  # fmt: skip
        return dict(zip(self.host.argument_paths[: 3 * self.n], self.state))

    def restore(self, saved: dict[str, np.ndarray]) -> None:
        """Take the state from `saved` (leaves by path, those `leaves` gives): a checkpoint's."""
        if self.host is None:
            trees = []
            for name, tree in zip(STATE, self.template):
                paths = iter(path for path, _ in leaf_items(tree, f"{name}."))
                trees.append(_replace_leaves(tree, lambda: saved[next(paths)]))
            self.state = trees
            return
        self.state = self.host.prepare_inputs(_on_lines([saved[path] for path in self.host.argument_paths[: 3 * self.n]]))


def initial_parameters(program: Program, args: argparse.Namespace) -> Any:
    """The parameters' tree before step 1: `--init gpt2`, or as `presk run` generates the loss's first argument."""
    inits = {0: args.init} if args.init != "normal" else None
    return make_inputs(find_entry(program.parsed.module, args.loss), program.env, args.seed, inits)[0]


def state_shapes(params: Any) -> dict[str, tuple[int, ...]]:
    """The shape of every leaf of the state (params, m, v, the moments shaped as the parameters), by path."""
    return {f"{name}.{path}": np.shape(leaf) for name in STATE for path, leaf in leaf_items(params)}


def map_leaves(tree: Any, fn: Callable[[Any], Any]) -> Any:
    """`tree` (records as dicts, tuples) with `fn` of each leaf in its place, in `leaf_items` order."""
    if isinstance(tree, dict):
        return {k: map_leaves(v, fn) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(map_leaves(v, fn) for v in tree)
    return fn(tree)


def _replace_leaves(tree: Any, leaf: Callable[[], Any]) -> Any:
    """`tree` with each leaf, in `leaf_items` order, replaced by the next `leaf()`."""

    def next_leaf(_: Any) -> Any:
        value = leaf()
        return float(value) if np.ndim(value) == 0 else value

    return map_leaves(tree, next_leaf)


def zeros_like_tree(tree: Any) -> Any:
    return map_leaves(tree, lambda x: np.zeros_like(x) if isinstance(x, np.ndarray) else 0.0)


def _feedback(host: HostProgram, n: int) -> list[int]:
    """For each state input (params, m, v leaves, in order), the result leaf that replaces it the next step.

    Matched by path ("1.blocks.attn.wq" is "params.blocks.attn.wq") rather than
    assumed from the order, so a change in how paths are laid out is caught here.
    """
    results = {path: i for i, path in enumerate(host.result_paths)}
    order = []
    for path in host.argument_paths[: 3 * n]:
        head, _, rest = path.partition(".")
        key = f"{STATE.index(head) + 1}" + (f".{rest}" if rest else "")
        if key not in results:
            raise PreskError("E3003", f"the step's result has no leaf {key} for its argument {path}")
        order.append(results[key])
    if host.result_paths[0] != "0":
        raise PreskError("E3003", f"the step's first result leaf is {host.result_paths[0]}, not the loss")
    return order


@dataclass
class Run:
    """What the loop needs besides the stepper: where to log, save and plot, and what happened so far."""

    log: TextIO | None = None
    checkpoint_path: str | None = None
    resumed: checkpoint.Checkpoint | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    history: list[list[Any]] = field(default_factory=list)
    """[step, loss, val_loss or None] of every finished step, those before a resume included (for --plot)."""
    vocab: int = 0
    stopped_by: int | None = None
    """The signal that stopped the run before its last step (SIGINT or SIGTERM), if one did."""


def main(args: argparse.Namespace) -> int:
    if args.steps < 1:
        raise PreskError("E4001", f"--steps {args.steps}: give at least one step")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise PreskError("E4001", f"--lr {args.lr}: give a positive learning rate")
    if not all(0 <= b < 1 for b in (args.beta1, args.beta2)):
        raise PreskError("E4001", "--beta1 and --beta2 lie in [0, 1)")
    if args.threads is not None and args.backend != "native":
        raise PreskError("E4001", "--threads divides the native backend's kernels: give --backend native")
    if args.checkpoint_every < 1:
        raise PreskError("E4001", f"--checkpoint-every {args.checkpoint_every}: save every N steps, N at least 1")
    if args.eval_every < 0 or args.eval_batches < 1:
        raise PreskError("E4001", "--eval-every is 0 (never) or a number of steps; --eval-batches at least 1")
    plan = plan_options(args)
    passes = pipeline_of(args)
    source = read_input(args.file)
    run = Run()
    # Refused before minutes of compiling, not after.
    if args.checkpoint:
        run.checkpoint_path = checkpoint.prepare(args.checkpoint)
        run.resumed = checkpoint.load(run.checkpoint_path)
        if run.resumed is not None and run.resumed.step >= args.steps:
            print(f"presk train: {run.checkpoint_path} is at step {run.resumed.step}; --steps {args.steps} is done")
            return 0
    if args.plot:
        check_output(args.plot)
    run.log = _open_log(args.log) if args.log else None
    try:
        done = _train(args, plan, passes, source, run)
    finally:
        if run.log is not None:
            run.log.close()
    if args.plot and run.history:
        _plot(args, run)
    print(f"peak resident memory: {peak_memory_mib():.0f} MiB")
    if done < args.steps:
        kept = [f"{args.log} holds every finished step"] if args.log else []
        kept += [f"{run.checkpoint_path} resumes it"] if run.checkpoint_path else []
        how = "terminated" if run.stopped_by == signal.SIGTERM else "interrupted"
        print(f"presk: {how}: stopped after step {done} of {args.steps}" + "".join(f"; {k}" for k in kept),
              file=sys.stderr)  # fmt: skip
        return EXIT_TERMINATED if run.stopped_by == signal.SIGTERM else EXIT_INTERRUPTED
    return 0


def _train(
    args: argparse.Namespace, plan: Plan | None, passes: tuple[ModulePass, ...], source: Source, run: Run
) -> int:
    """Load, differentiate and compile the step, then run it; returns the steps finished."""
    names: list[str] = []

    def extend(parsed: ParsedModule) -> None:
        names.append(add_train_step(parsed, args.loss, args.step))

    start = time.perf_counter()
    try:
        program = load_program(source, args.dim, args.const, passes, extend=extend, remat=args.remat, opt=opt_of(args),
                               entries=names)
        entry = names[0]
        ids_type = check_loss(program.parsed.module, args.loss).data[0]
        assert isinstance(ids_type, IndexTensorType)
        batch, seq = bound_shape(ids_type, program.env, "ids")
        vocab = bind(ids_type.range, program.env, "ids")
        # Counted before the reference interpreter's realization fuses the module in place.
        row = launch_table(program.parsed.module, [entry], program.env)[0]
        if args.plan == AUTO:
            # The whole step's nests, the gradient's and the optimiser's, planned at once.
            plan = auto_plan(program, entry, args.realize, args.profile, args.save_plan)
    except PreskError as error:
        raise error.located(source.name) from None
    stream = load_stream(args.data, vocab, seq, args.seed)
    realization = plan.realization.default if plan is not None else "f64"
    run.vocab, run.flags = vocab, _flags(args, realization, program.env)
    params = initial_parameters(program, args)
    if run.resumed is not None:
        # Before compiling; the leaves first, since a leaf of another shape says more than a size that differs.
        assert run.checkpoint_path is not None
        checkpoint.check_leaves(run.checkpoint_path, run.resumed, state_shapes(params))
        checkpoint.check_flags(run.checkpoint_path, run.resumed, run.flags)
    try:
        stepper = Stepper(program, entry, plan, args, params)
    except PreskError as error:
        raise error.located(source.name) from None
    windows = TokenWindows(stream.train, batch, seq, args.seed)
    first = 1
    if run.resumed is not None:
        stepper.restore(run.resumed.leaves)
        windows.position = run.resumed.position
        run.history = list(run.resumed.history)
        first = run.resumed.step + 1
    validation = validation_batches(stream.validation, batch, seq, args.eval_batches) if args.eval_every else []
    print(f"presk train: @{args.loss} and its gradient, then @{args.step}; {args.backend} backend, {realization}; "
          f"remat={args.remat}; B={batch} T={seq} V={vocab}, lr {args.lr:g}, init {args.init}, seed {args.seed}; "
          f"ready in {time.perf_counter() - start:.1f} s")  # fmt: skip
    print(_launches_line(row, stepper.host))
    print(_residuals_line(program, args.loss, args.remat, realization))
    print(f"data: {stream.description}")
    if run.resumed is not None:
        print(f"resumed from {run.checkpoint_path} after step {run.resumed.step}")
    return _loop(args, stepper, windows, validation, realization, run, first)


def _flags(args: argparse.Namespace, realization: str, env: dict[str, int]) -> dict[str, Any]:
    """What the steps compute depends on, besides the state: a checkpoint resumes only under the same."""
    return {"--loss": args.loss, "--step": args.step, "--data": args.data, "--seed": args.seed, "--init": args.init,
            "--lr": args.lr, "--beta1": args.beta1, "--beta2": args.beta2, "--backend": args.backend,
            "--realize/--plan": args.plan or args.realize or realization, "sizes": dict(sorted(env.items()))}  # fmt: skip


def _launches_line(row: LaunchRow, host: HostProgram | None) -> str:
    """The launches of one whole training step, as `presk launches` counts them, and the host program's own.

    `row` is counted on the program as loaded (differentiated, not yet
    fused), so it is the same on every backend; the host program's count is lower again
    where psk-fuse-launches and psk-fuse-slices merged launches.
    """
    line = (f"launches of a training step: {row.unfused} without fusion, {row.fused} with psk-fuse "
            f"({percent(1 - row.fused / max(row.unfused, 1))} removed)")  # fmt: skip
    if host is not None:
        line += f"; the host program makes {host.launch_count} (psk-fuse-launches, psk-fuse-slices)"
    return line


def residual_bytes(program: Program, loss: str, storage: str) -> tuple[int, int] | None:
    """The residuals `<loss>.fwd` saves for `<loss>.bwd`: how many leaves, and their bytes in `storage`.

    None where nothing is saved (`--remat recompute` writes one `.vjp`).
    Every leaf is stored in the realization's default type; a realization
    record typing sites apart would make this an estimate.
    """
    fwd = next((f for f in program.parsed.module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == f"{loss}.fwd"), None)
    if fwd is None:
        return None
    saved = fwd.function_type.outputs.data[1]
    count, total = 0, 0
    for _, leaf in leaves(saved):
        shape = bound_shape(leaf, program.env, f"{loss}.fwd") if isinstance(leaf, TensorType | IndexTensorType) else ()
        count += 1
        total += math.prod(shape) * (8 if isinstance(leaf, IndexTensorType) else STORAGE_BYTES.get(storage, 8))
    return count, total


def _residuals_line(program: Program, loss: str, remat: str, storage: str) -> str:
    saved = residual_bytes(program, loss, storage)
    if saved is None:
        return f"residuals: none saved (remat={remat}: the backward recomputes what it reads)"
    count, total = saved
    return f"residuals: {count} saved by @{loss}.fwd for @{loss}.bwd, {total / 2**20:.1f} MiB in {storage}"


def peak_memory_mib() -> float:
    """The process's peak resident memory so far (Linux reports `ru_maxrss` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _open_log(path: str) -> TextIO:
    try:
        return open(path, "a", encoding="utf-8")
    except OSError as error:
        raise PreskError("E0001", f"cannot write {path}: {error.strerror}") from None


def _loop(
    args: argparse.Namespace,
    stepper: Stepper,
    windows: TokenWindows,
    validation: list[tuple[np.ndarray, np.ndarray]],
    realization: str,
    run: Run,
    first: int,
) -> int:
    """Run steps `first` to `--steps`; returns the last finished (fewer when Ctrl-C asked to stop)."""
    with _StopOnInterrupt() as stop:
        for t in range(first, args.steps + 1):
            ids, targets = windows.next()
            began = time.perf_counter()
            loss = stepper(args.beta1**t, args.beta2**t, args.lr, ids, targets)
            ms = (time.perf_counter() - began) * 1e3
            evaluate = math.isfinite(loss) and validation and (t % args.eval_every == 0 or t == args.steps)
            val_loss = stepper.evaluate(validation) if evaluate else None
            print(f"step {t:>4}  loss {loss!r:<22}  {ms:9.2f} ms" + (f"  val_loss {val_loss!r}" if evaluate else ""),
                  flush=True)  # fmt: skip
            if run.log is not None:
                # A loss that is not finite is null: NaN and Infinity are not JSON.
                record = {"step": t, "loss": loss if math.isfinite(loss) else None, "ms": round(ms, 3), "backend": args.backend,
                          "realization": realization, "seed": args.seed, "lr": args.lr}  # fmt: skip
                if val_loss is not None:
                    record["val_loss"] = val_loss if math.isfinite(val_loss) else None
                run.log.write(json.dumps(record) + "\n")
                run.log.flush()
            if not math.isfinite(loss):
                hint = f"lower --lr (it is {args.lr:g})"
                if realization == "bf16":
                    # bf16 keeps 8 bits: beta2 = 0.999 and 0.999^t (small t) are 1, so 1 - beta2 and 1 - b2t are 0.
                    hint += ", or realize in f32: in bf16, 0.999 rounds to 1, so AdamW's 1 - beta2 and 1 - b2t are 0"
                raise PreskError("E4001", f"step {t}: the loss is {loss}, training diverged; {hint}")
            run.history.append([t, loss, val_loss if val_loss is not None and math.isfinite(val_loss) else None])
            stopping = stop.requested
            # A saved checkpoint costs about a step at the course GPT's size: every N-th step, the last and
            # the one Ctrl-C stopped.
            if run.checkpoint_path is not None and (t % args.checkpoint_every == 0 or t == args.steps or stopping):
                checkpoint.save(run.checkpoint_path, checkpoint.Checkpoint(t, stepper.leaves(), run.flags,
                                                                           windows.position, run.history))  # fmt: skip
            if stopping:
                run.stopped_by = stop.signum
                return t
    return args.steps


def _plot(args: argparse.Namespace, run: Run) -> None:
    train = [(t, loss) for t, loss, _ in run.history]
    validation = [(t, v) for t, _, v in run.history if v is not None]
    sizes = " ".join(f"{k}={v}" for k, v in run.flags["sizes"].items())
    title = (f"presk train {args.file}: {args.backend}, {run.flags['--realize/--plan']}, --data {args.data}, "
             f"lr {args.lr:g}, init {args.init}\n{sizes}")  # fmt: skip
    plot_losses(args.plot, train, validation, run.vocab, title)


class _StopOnInterrupt:
    """Ctrl-C or SIGTERM asks the loop to stop after the step under way; a second one stops at once.

    A batch system's time limit sends SIGTERM, then SIGKILL after a grace period: the step under way, its
    log line and its checkpoint are kept if they fit in it. `signum` is the signal that asked."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        self.signum = signum
        again = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        print(f"presk: stopping after this step ({again} again to stop now)", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
