"""The course GPT's loss (corpus/nlp/gpt.mlir, entry `loss`): presk native against PyTorch eager and torch.compile.

    python bench/bench_gpt.py                                  # D=384, H=6, L=6, C=256, B=8, T=256; 2 threads
    python bench/bench_gpt.py --threads 1,2 --rounds 11 --plan auto --profile P.json
    python bench/bench_gpt.py --plan gpt-plan.json --const L=4 --dims B=4,T=128
    python bench/bench_gpt.py --quick                          # D=64, H=2, L=2, C=64, B=2, T=32, 3 rounds
    python bench/bench_gpt.py --grad --no-default --plan bench/plans/gpt_grad_plan.json   # loss_grad vs forward+backward
    python bench/bench_gpt.py --step --no-default --plan bench/plans/gpt_grad_plan.json   # a training step, AdamW too
    python bench/bench_gpt.py --step --no-default --plan auto --profile P.json --opt    # and the step after --opt

The model is the program's (`--const` overrides its constants, default the
course GPT's D=384, H=6, L=6, C=256 with the file's V=92; `--dims` binds B
and T): token and position embeddings, L pre-norm blocks (LayerNorm, causal
self-attention with H heads scaled by 1/sqrt(D/H), LayerNorm, MLP D -> 4D ->
D with exact, erf-based GELU), the final LayerNorm, the head, and the mean
cross-entropy. The inputs are presk's own (`make_inputs` from `--seed`, or
`--inputs FILE.npz`), generated once per process; every parameter leaf,
named by its `.npz` key (`params.blocks.attn.wq`: record fields joined by
dots), becomes a tensor of an equivalent `torch.nn.Module` written here
(the stacked `[layer, ...]` leaves split per block, the dots' `[in, out]`
weights transposed into `nn.Linear`'s `[out, in]`, LayerNorm with eps 1e-5
and the biased variance, `scaled_dot_product_attention(is_causal=True)`,
`F.gelu` without approximation, `F.cross_entropy`).

Checks, before anything is timed (a failure ends the run, loudly):
torch's f32 loss against every presk contender's native f32 loss (relative
`F32_RTOL`), and, in the first worker, torch's f64 loss against presk's
native f64 loss (`F64_RTOL`).

Timed, for each thread count of `--threads` in a fresh process
(`timing.run_per_thread_count`, every pool sized by `timing.thread_env`):
presk native at the default layouts (`--realize f32`); presk native under
each `--plan` (a plan JSON, or `auto`: `presk.tuning.plan.make_plan` priced
with `--profile`, else `$PRESK_PROFILE`, else the host's own profile,
measured first if missing; planned in the worker, since a plan's splits
depend on the thread count, and its time reported apart); torch eager (f32,
`torch.no_grad()`); torch.compile (default mode, compiled before the
timing; skipped, saying why, if it fails). Every contender is compiled and
prepared once (presk: `HostProgram` on inputs converted once, as
bench_programs.py does); with `--opt`, each presk contender again on the
program `presk train --opt` compiles (differentiated, then rewritten by
psk-egraph-opt), at the default layouts and under `--plan auto` (a plan of
its own: the rewrite renumbers the nests a plan file names, so a plan file
is not applied to it). Then `timing.side_by_side`: a warm-up call each,
`--rounds` interleaved rounds of `--block` calls, medians and quartiles,
and each contender's median over torch eager's (above 1: slower than
eager). Output: a markdown table and one JSON line per thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import positive_int, run_per_thread_count

PROGRAM = ROOT / "corpus" / "nlp" / "gpt.mlir"
ENTRY = "loss"
GRAD_ENTRY = "loss_grad"
"""`--grad`: the file's loss and its gradient wrt every parameter (`psk_core.value_and_grad`), its parameters
from GPT-2's initialisation (`psk_core.init = "gpt2"`)."""
COURSE_CONSTS = {"D": 384, "H": 6, "L": 6, "C": 256}
COURSE_DIMS = {"B": 8, "T": 256}
QUICK_CONSTS = {"D": 64, "H": 2, "L": 2, "C": 64}
QUICK_DIMS = {"B": 2, "T": 32}

F32_RTOL = 1e-4
"""torch f32 against presk f32, relative to the loss. Both sum in f32 but in
different orders (presk an FMA chain in increasing k, torch's BLAS blocked
and vectorized), over D = 384 terms in the projections and the LayerNorm
means, 4D = 1536 in the MLP's second product, T in the attention values and
V = 92 in the logsumexp: about sqrt(K) * 6e-8 relative per sum; erf, exp and
log are each within a few ulps. What could grow it: the N(0, 1) weights give
attention scores of a few hundred (q . k over HD = 64 terms of entries
~ N(0, D)), so an absolute error e of a score is a relative error e of the
softmax's weights. Measured (seed 0): 1.9e-7 at --quick, 6.6e-8 at the
course size, and presk f32 is 1.7e-6 from the f64 loss there. 1e-4 leaves
room for other seeds and shapes and still catches the structural mistakes,
measured in f64 against the right model (at --quick, and with the course's
constants at B=2, T=64): a dot weight left untransposed (2.7e-2 to 7.9e-2),
the causal mask dropped (5.5e-3, 4.2e-4). Subtler ones hide below it (LayerNorm's eps at 1e-3: 2e-5
to 3e-4; the scale 1 % off: 1.3e-5 to 5.3e-5; GELU's tanh form: 2.4e-6 to
3.6e-6); the f64 check is for those."""
F64_RTOL = 1e-12
"""torch f64 against presk f64: the same sums in other orders, about sqrt(K)
ulps each, amplified by the attention scores' magnitude (hundreds) in the
softmax. Measured: 0 to 3.5e-16 at --quick, 5.6e-15 at the course size; the
smallest of the mistakes above moves the loss by 2.4e-6."""


STEP_LR = 1e-3
STEP_BETAS = (0.9, 0.999)
"""`--step`: AdamW's learning rate and betas on both sides, from the state of step 1 (m = v = 0,
b1t = beta1, b2t = beta2); each side carries its state from call to call (presk's bias corrections
stay at step 1's, which changes no kernel's work)."""

GRAD_RTOL = 1e-4
"""`--grad`: presk's f32 gradient against torch's, the relative L2 difference of each leaf (GPT-2's
initialisation, `loss_grad`'s). Both sum in f32 in different orders; the largest sums are a weight's
gradient over every position (B·T = 2048 terms at the course size, about sqrt(2048) · 6e-8 = 3e-6
relative each), compounded through the L layers' backward. Measured (seed 0): 5.9e-7 at --quick,
1.9e-6 at the course size. 1e-4 leaves a factor of 50; a wrong rule (a transposed or missing term)
moves a leaf by O(1)."""


def parse_sizes(items: list[str], flag: str) -> dict[str, int]:
    """`NAME=N` items, each possibly a comma-separated list of them."""
    out: dict[str, int] = {}
    for item in items:
        for part in item.split(","):
            if not part:
                continue
            name, _, value = part.partition("=")
            if not name or not value.isdecimal() or int(value) < 1:
                raise SystemExit(f"{flag} {part}: expected NAME=N with N a positive integer")
            out[name.strip()] = int(value)
    return out


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _fail(text: str) -> None:
    _say("\n" + "!" * 72 + f"\nbench_gpt: CHECK FAILED: {text}\n" + "!" * 72)
    sys.exit(3)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def torch_gpt(torch: Any, named: dict[str, Any], env: dict[str, int], dtype: Any, grad: bool = False) -> Any:
    """A `torch.nn.Module` computing the program's loss from `named` (`.npz` key -> array), in `dtype`.

    Every parameter is a copy of one leaf (or one layer of a stacked leaf);
    `forward(ids, targets)` returns the mean cross-entropy. With `grad` the
    parameters require gradients, and `model.sources` lists each one's
    (key, layer, transposed) so that its gradient maps back to presk's leaf.
    """
    nn, F = torch.nn, torch.nn.functional
    d, h, n_layers, v = env["D"], env["H"], env["L"], env["V"]
    sources: list[tuple[Any, str, int | None, bool]] = []

    def tensor(key: str, layer: int | None = None, transpose: bool = False) -> Any:
        a = named[key] if layer is None else named[key][layer]
        t = torch.tensor(a, dtype=dtype)
        parameter = nn.Parameter((t.T if transpose else t).contiguous(), requires_grad=grad)
        sources.append((parameter, key, layer, transpose))
        return parameter

    def linear(key: str, bias: str | None, layer: int) -> Any:
        # presk's dot weight is [in, out] (x . w); nn.Linear holds [out, in] (x w^T).
        w = named[key][layer]
        lin = nn.Linear(w.shape[0], w.shape[1], bias=bias is not None, dtype=dtype)
        lin.weight = tensor(key, layer, transpose=True)
        if bias is not None:
            lin.bias = tensor(bias, layer)
        return lin

    def layer_norm(prefix: str, layer: int | None) -> Any:
        # (x - mean) / sqrt(mean((x - mean)^2) + 1e-5) * g + b over embed: nn.LayerNorm's biased variance.
        ln = nn.LayerNorm(d, eps=1e-5, dtype=dtype)
        ln.weight, ln.bias = tensor(prefix + ".g", layer), tensor(prefix + ".b", layer)
        return ln

    class Block(nn.Module):
        def __init__(self, layer: int) -> None:
            super().__init__()
            p = "params.blocks."
            self.ln1 = layer_norm(p + "ln1", layer)
            self.wq, self.wk, self.wv, self.wo = (linear(p + f"attn.{w}", None, layer) for w in ("wq", "wk", "wv", "wo"))
            self.ln2 = layer_norm(p + "ln2", layer)
            self.fc = linear(p + "mlp.fc.w", p + "mlp.fc.b", layer)
            self.proj = linear(p + "mlp.proj.w", p + "mlp.proj.b", layer)

        def attention(self, x: Any) -> Any:
            b, t, _ = x.shape
            # split embed -> (heads, hd), row-major, then [batch, heads, seq, hd].
            q, k, val = (w(x).view(b, t, h, d // h).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            # softmax(q k^T / sqrt(hd)) with the causal mask (key <= query), times v.
            y = F.scaled_dot_product_attention(q, k, val, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(b, t, d))

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.ln1(x))
            return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="none"))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok_emb = nn.Embedding(v, d, dtype=dtype)
            self.tok_emb.weight = tensor("params.tok_emb")
            self.pos_emb = tensor("params.pos_emb")  # [C, embed]; positions 0..T-1 gathered
            self.blocks = nn.ModuleList(Block(i) for i in range(n_layers))
            self.ln_f = layer_norm("params.ln_f", None)
            self.head = nn.Linear(d, v, bias=False, dtype=dtype)
            self.head.weight = tensor("params.head", transpose=True)

        def forward(self, ids: Any, targets: Any) -> Any:
            x = self.tok_emb(ids) + self.pos_emb[: ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.reshape(-1, v), targets.reshape(-1))

    model = GPT().eval()
    model.sources = sources
    return model


def torch_gradient(torch: Any, model: Any, named: dict[str, Any]) -> dict[str, Any]:
    """torch's gradient (after a backward) as presk's leaves: `.npz` key -> array, stacked layers restacked."""
    import numpy as np

    out: dict[str, Any] = {key: np.zeros(np.shape(named[key]), dtype=np.float64) for _, key, _, _ in model.sources}
    for parameter, key, layer, transpose in model.sources:
        g = parameter.grad.detach().double().numpy() if parameter.grad is not None else 0.0
        g = g.T if transpose else g
        if layer is None:
            out[key] = out[key] + g
        else:
            out[key][layer] = g
    return out


def training(host: Any, prepared: list[Any]) -> Any:
    """A step that carries its state to the next call, as `presk train` does (and torch's optimiser).

    The step's inputs are (params, m, v) leaves, then b1t, b2t, lr, ids and
    targets; its results the loss, then (params', m', v') in the same
    order. Both sides keep training from call to call, so neither times
    one state over and over while the other moves on.
    """
    n = len(host.result_paths) - 1
    state, rest = list(prepared[:n]), list(prepared[n:])

    def step() -> Any:
        out = host([*state, *rest])
        state[:] = out[1:]
        return out[0]

    return step


def _rewritten_module(text: str, entry: str, step: bool, consts: dict[str, int], dims: dict[str, int]) -> Any:
    """`--opt`: the program as `presk train --opt` compiles it, differentiated, then rewritten by psk-egraph-opt.

    Loaded as the commands load it (with `step`, the training step added
    first, and `entry` its name), so the rewrite sees the same gradient
    functions `entry` reaches.
    """
    from presk.cli.program import load_program
    from presk.cli.source import Source
    from presk.cli.train import add_train_step

    def extend(parsed: Any) -> None:
        if step:
            add_train_step(parsed, ENTRY, "adamw.step")

    start = time.perf_counter()
    program = load_program(Source(str(PROGRAM), text), [f"{k}={v}" for k, v in dims.items()],
                           [f"{k}={v}" for k, v in consts.items()], extend=extend, opt=True, entries=[entry])  # fmt: skip
    _say(f"  --opt: psk-egraph-opt in {time.perf_counter() - start:.1f} s")
    return program.parsed.module


class NotTimed(Exception):
    """A contender this mode does not time, and why."""


def _check_gradients(torch_grads: dict[str, Any], presk_grads: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each presk contender's gradient against torch's: the largest relative L2 difference over the leaves."""
    import numpy as np

    worst: dict[str, float] = {}
    for label, leaves in presk_grads.items():
        diffs = {}
        for key, want in torch_grads.items():
            got = leaves["1." + key.removeprefix("params.")]
            diffs[key] = float(np.linalg.norm(got - want) / max(float(np.linalg.norm(want)), 1e-300))
        key = max(diffs, key=diffs.__getitem__)
        worst[label] = diffs[key]
        _say(f"  f32 gradient: {label} against torch, largest relative L2 difference {diffs[key]:.2e} ({key}; "
             f"tolerance {GRAD_RTOL:g})")  # fmt: skip
        if not diffs[key] <= GRAD_RTOL:
            _fail(f"{label}'s gradient of {key} differs from torch's by {diffs[key]:.3e} relative (> {GRAD_RTOL:g})")
    return worst


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """One thread count: checks, then the side-by-side timing; returns the JSON record."""
    import numpy as np

    from timing import side_by_side, torch_or_none

    from presk import sizes
    from presk.interp.inputs import argument_names, load_inputs, make_inputs
    from presk.interp.values import leaf_items
    from presk.ir.calls import find_entry
    from presk.ir.context import presk_context
    from presk.ir.parse import parse_module
    from presk.jit.executor import HostProgram, flatten_inputs
    from presk.jit.native import NativeRunner
    from presk.pipeline import lower
    from presk.plans import Plan, parse_plan, plan_from_options, read_plan

    torch = torch_or_none(args.threads)
    if torch is None:
        _fail("torch is not installed: nothing to compare against")
    torch.manual_seed(0)

    text = PROGRAM.read_text()
    parsed = parse_module(presk_context(), text, str(PROGRAM))
    parsed.verify()
    module = parsed.module
    env = sizes.resolve(module, args.consts, args.dims)
    entry = GRAD_ENTRY if args.grad or args.step else ENTRY
    func = find_entry(module, entry)
    values = load_inputs(args.inputs, func, env) if args.inputs else make_inputs(func, env, args.seed)
    named = {key: np.asarray(leaf) for name, value in zip(argument_names(func), values)
             for key, leaf in leaf_items(value, name + ".")}  # fmt: skip
    if args.step:
        # The whole training step `presk train` compiles: loss_grad's inputs, then AdamW's state at t = 1.
        from presk.cli.train import add_train_step, zeros_like_tree

        entry = add_train_step(parsed, ENTRY, "adamw.step")
    rewritten = _rewritten_module(text, entry, args.step, args.consts, args.dims) if args.opt else None
    variants = [("", module)] + ([(" --opt", rewritten)] if rewritten is not None else [])
    if args.step:
        zeros = [zeros_like_tree(values[0])] * 2
        values = [values[0], *zeros, np.float64(STEP_BETAS[0]), np.float64(STEP_BETAS[1]), np.float64(STEP_LR),
                  *values[1:]]  # fmt: skip
    leaves = flatten_inputs(values)
    assert args.step or len(leaves) == len(named)
    runner = NativeRunner()
    record: dict[str, Any] = {"threads": args.threads, "env": env, "seed": None if args.inputs else args.seed,
                              "inputs": args.inputs, "rounds": args.rounds, "block": args.block,
                              "compile_s": {}, "planning_s": {}, "loss": {}}  # fmt: skip

    def host_of(plan: Plan, label: str, source: Any) -> tuple[Any, list[Any], float]:
        start = time.perf_counter()
        host = HostProgram(lower(source, entry, env, plan), runner)
        prepared = host.prepare_inputs(leaves)
        outputs = host(prepared)  # compiles the kernels (or reads the cache)
        loss = float(np.asarray(outputs[0], dtype=np.float64))
        if args.grad:
            gradients[label] = {path: np.array(leaf, dtype=np.float64) for path, leaf in zip(host.result_paths, outputs)}
        record["compile_s"][label] = time.perf_counter() - start
        _say(f"  {label}: lowered and compiled in {record['compile_s'][label]:.1f} s, loss {loss!r}")
        return host, prepared, loss

    _say(f"threads={args.threads}: {' '.join(f'{k}={v}' for k, v in env.items())}")
    gradients: dict[str, dict[str, Any]] = {}
    presk: dict[str, tuple[Any, list[Any], float]] = {}
    if not args.no_default:
        for suffix, source in variants:
            presk["presk" + suffix] = host_of(plan_from_options("f32", None), "presk" + suffix, source)
    plans: dict[str, Any] = {}
    for spec in args.plan:
        for suffix, source in variants:
            if spec == "auto":
                # Each program planned for itself: a plan names the nests of the program it was made for.
                from presk.cli.auto_plan import resolve_profile
                from presk.target import target_machine
                from presk.tuning.plan import make_plan
                from presk.tuning.tuned import host_tuned

                label = "presk plan auto" + suffix
                start = time.perf_counter()
                profile = resolve_profile(args.profile, target_machine(), sys.stderr)  # measured or relowered
                record["planning_s"].setdefault("profile", time.perf_counter() - start)
                start = time.perf_counter()
                tuned_file, tuned = host_tuned(target_machine())  # as `--plan auto` does: PRESK_TUNED=off for none
                result = make_plan(source, entry, env, "f32", profile, warn=sys.stderr, tuned=tuned)
                record["planning_s"][label] = time.perf_counter() - start
                applied = sum(1 for choice in result.choices if choice.measured_s is not None)
                from_tuned = f"; {applied} nests as presk autotune measured them best ({tuned_file})" if applied else ""
                _say(f"  {label}: {len(result.choices)} nests planned with {profile} in "
                     f"{record['planning_s'][label]:.1f} s ({result.lowered} points priced){from_tuned}")  # fmt: skip
                plan, plans[label] = parse_plan(result.plan, "--plan auto"), result.plan
            elif suffix:
                _say(f"  {spec} --opt: not timed, the plan names the nests of the program before the rewrite")
                continue
            else:
                label = f"presk plan {Path(spec.lstrip('@')).name}" + suffix
                plan = read_plan(spec)
                plans[label] = {"file": spec, "layout": plan.layout}
            if plan.realization.default != "f32" or plan.realization.sites:
                _say(f"  warning: {label} realizes {plan.realization.default} {plan.realization.sites or ''}, "
                     "not f32 throughout: its times are not f32's")  # fmt: skip
            presk[label] = host_of(plan, label, source)
    record["plans"] = plans

    ids, targets = (torch.from_numpy(np.ascontiguousarray(named[k], dtype=np.int64)) for k in ("ids", "targets"))
    model = torch_gpt(torch, named, env, torch.float32, grad=args.grad or args.step)
    optimizer = None
    if args.step:
        # AdamW as adamw.step writes it (decoupled decay 0.01, eps 1e-8), torch's fused kernel.
        optimizer = torch.optim.AdamW([p for p, *_ in model.sources], lr=STEP_LR, betas=STEP_BETAS, eps=1e-8,
                                      weight_decay=0.01, fused=True)  # fmt: skip
        with torch.no_grad():
            torch_loss = float(model(ids, targets))
    elif args.grad:
        model.zero_grad(set_to_none=True)
        loss_t = model(ids, targets)
        loss_t.backward()
        torch_loss = float(loss_t.detach())
        record["grad_rel_diff"] = _check_gradients(torch_gradient(torch, model, named), gradients)
    else:
        with torch.no_grad():
            torch_loss = float(model(ids, targets))
    record["loss"]["torch eager"] = torch_loss
    default_loss = presk["presk"][2] if "presk" in presk else None
    for label, (_, _, loss) in presk.items():
        record["loss"][label] = loss
        rel = _rel(loss, torch_loss)
        _say(f"  f32 loss: {label} {loss!r}, torch {torch_loss!r}: relative difference {rel:.2e} (tolerance {F32_RTOL:g})")
        if not rel <= F32_RTOL:
            _fail(f"{label}'s f32 loss {loss!r} and torch's {torch_loss!r} differ by {rel:.3e} relative "
                  f"(> {F32_RTOL:g}): the two models do not compute the same thing")  # fmt: skip
    record["f32_rel_diff"] = {label: _rel(loss, torch_loss) for label, (_, _, loss) in presk.items()}
    record["plan_bits_equal_default"] = {label: loss == default_loss for label, (_, _, loss) in presk.items()
                                         if label != "presk" and default_loss is not None}  # fmt: skip

    if args.check_f64 and not (args.grad or args.step):
        host64, prepared64, loss64 = host_of(plan_from_options("f64", None), "presk f64", module)
        del host64, prepared64
        with torch.no_grad():
            torch64 = float(torch_gpt(torch, named, env, torch.float64)(ids, targets))
        rel = _rel(loss64, torch64)
        _say(f"  f64 loss: presk {loss64!r}, torch {torch64!r}: relative difference {rel:.2e} (tolerance {F64_RTOL:g})")
        record["f64"] = {"presk": loss64, "torch": torch64, "rel_diff": rel}
        if not rel <= F64_RTOL:
            _fail(f"presk's f64 loss {loss64!r} and torch's {torch64!r} differ by {rel:.3e} relative (> {F64_RTOL:g})")

    def eager() -> Any:
        if optimizer is not None:  # forward, backward and the optimiser's step
            optimizer.zero_grad(set_to_none=True)
            loss = model(ids, targets)
            loss.backward()
            optimizer.step()
            return loss
        if args.grad:  # forward and backward, the gradients set afresh
            model.zero_grad(set_to_none=True)
            loss = model(ids, targets)
            loss.backward()
            return loss
        with torch.no_grad():
            return model(ids, targets)

    contenders: dict[str, Any] = {}
    for label, (host, prepared, _) in presk.items():
        contenders[label] = training(host, prepared) if args.step else (lambda host=host, prepared=prepared: host(prepared))
    contenders["torch eager"] = eager
    record["torch_compile_error"] = None
    try:
        if optimizer is not None:
            raise NotTimed("not timed with --step: compiling the optimiser's step is another program")
        compiled = torch.compile(model)
        start = time.perf_counter()
        if args.grad:
            compiled_loss = float(compiled(ids, targets).detach())  # the compilation, forward and backward
            compiled(ids, targets).backward()
        else:
            with torch.no_grad():
                compiled_loss = float(compiled(ids, targets))  # the compilation
                compiled(ids, targets)
        record["compile_s"]["torch.compile"] = time.perf_counter() - start
        record["loss"]["torch.compile"] = compiled_loss
        _say(f"  torch.compile: compiled in {record['compile_s']['torch.compile']:.1f} s, loss {compiled_loss!r}")
        if not _rel(compiled_loss, torch_loss) <= F32_RTOL:
            _fail(f"torch.compile's loss {compiled_loss!r} and eager's {torch_loss!r} differ beyond {F32_RTOL:g}")

        def compiled_call() -> Any:
            if args.grad:
                model.zero_grad(set_to_none=True)
                loss = compiled(ids, targets)
                loss.backward()
                return loss
            with torch.no_grad():
                return compiled(ids, targets)

        contenders["torch.compile"] = compiled_call
    except NotTimed as reason:
        record["torch_compile_error"] = str(reason)
    except Exception as error:  # noqa: BLE001 - whatever inductor raises on this machine: reported, skipped
        record["torch_compile_error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else ''}"
        _say(f"  torch.compile failed, skipped: {record['torch_compile_error']}")

    _say(f"  side by side: {len(contenders)} contenders, {args.rounds} rounds of {args.block} call(s)")
    timings = side_by_side(contenders, rounds=args.rounds, warmup=1, block=args.block)
    eager_s = timings["torch eager"].median_s
    record["ms"] = {n: t.median_s * 1e3 for n, t in timings.items()}
    record["quartiles_ms"] = {n: [q * 1e3 for q in t.spread] for n, t in timings.items()}
    record["vs_torch_eager"] = {n: t.median_s / eager_s for n, t in timings.items()}
    return record


def _table(records: list[dict[str, Any]]) -> str:
    lines = ["| threads | contender | ms per call, median (quartiles) | / torch eager | f32 loss | setup |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        for name, ms in r["ms"].items():
            lo, hi = r["quartiles_ms"][name]
            setup = []
            if name == "presk plan auto" and r["planning_s"].get("profile", 0.0) >= 1.0:
                setup.append(f"profile measured or relowered in {r['planning_s']['profile']:.0f} s")
            if name in r["planning_s"]:
                setup.append(f"planned in {r['planning_s'][name]:.1f} s")
            if name in r["compile_s"]:
                setup.append(f"compiled in {r['compile_s'][name]:.1f} s")
            lines.append(f"| {r['threads']} | {name} | {ms:.2f} ({lo:.2f}–{hi:.2f}) | {r['vs_torch_eager'][name]:.2f}× | "
                         f"{r['loss'].get(name, float('nan')):.6f} | {', '.join(setup)} |")  # fmt: skip
        if r["torch_compile_error"]:
            lines.append(f"| {r['threads']} | torch.compile | skipped: {r['torch_compile_error']} | – | – | – |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--const", action="append", default=[], metavar="NAME=N",
                        help="override a constant of the program, e.g. --const D=384 (default D=384, H=6, L=6, C=256)")
    parser.add_argument("--dims", action="append", default=[], metavar="B=N,T=N", help="default B=8,T=256")
    parser.add_argument("--threads", default="2", help="comma-separated thread counts (default 2)")
    parser.add_argument("--rounds", type=positive_int, default=None, help="side-by-side rounds (default 11; 3 with --quick)")
    parser.add_argument("--block", type=positive_int, default=1,
                        help="consecutive calls of a contender per round, the first not counted (default 1)")
    parser.add_argument("--plan", action="append", default=[], metavar="FILE|auto",
                        help="also time presk under this plan (a plan JSON, or auto); repeatable")
    parser.add_argument("--profile", metavar="P.json", help="the cost profile --plan auto prices with")
    parser.add_argument("--seed", type=int, default=0, help="seed of presk's generated inputs (default 0)")
    parser.add_argument("--inputs", metavar="FILE.npz", help="the loss's inputs instead (keys as presk run's)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: D=64, H=2, L=2, C=64, B=2, T=32, 3 rounds")
    parser.add_argument("--no-default", action="store_true",
                        help="do not time presk at its default layouts (with --grad at the course size, minutes a call)")
    parser.add_argument("--step", action="store_true",
                        help="time a whole training step (loss, gradient, AdamW; `presk train`'s) against torch's "
                             "forward, backward and fused AdamW")  # fmt: skip
    parser.add_argument("--grad", action="store_true",
                        help=f"time @{GRAD_ENTRY}, the loss and its gradient, against torch's forward and backward")
    parser.add_argument("--opt", action="store_true",
                        help="also time each presk contender on the program rewritten by psk-egraph-opt "
                             "(docs/egraph.md), side by side with the plain one")  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write the records to FILE")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check-f64", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.consts = {**(QUICK_CONSTS if args.quick else COURSE_CONSTS), **parse_sizes(args.const, "--const")}
    args.dims = {**(QUICK_DIMS if args.quick else COURSE_DIMS), **parse_sizes(args.dims, "--dims")}
    if args.rounds is None:
        args.rounds = 3 if args.quick else 11
    if args.profile and "auto" not in args.plan:
        parser.error("--profile is the profile of --plan auto; pass --plan auto too")
    for spec in args.plan:
        if spec != "auto" and not Path(spec.lstrip("@")).is_file():
            parser.error(f"--plan {spec}: no such file")

    if args.worker:
        args.threads = int(args.threads)
        # Only the JSON record goes to stdout: whatever else writes there (compilers run by
        # torch.compile, say) is sent to stderr.
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        from presk.diagnostics import PreskError

        try:
            record = _worker(args)
        except PreskError as error:  # a plan that does not fit the program, say: its message, not a traceback
            sys.exit(f"bench_gpt.py: error: {error}")
        out.write(json.dumps(record) + "\n")
        out.flush()
        return

    try:
        thread_counts = [int(t) for t in str(args.threads).split(",") if t]
    except ValueError:
        parser.error(f"--threads {args.threads}: expected comma-separated counts")
    worker_args = [f"--rounds={args.rounds}", f"--block={args.block}", f"--seed={args.seed}",
                   *(f"--const={k}={v}" for k, v in args.consts.items()),
                   *(f"--dims={k}={v}" for k, v in args.dims.items()),
                   *(f"--plan={p}" for p in args.plan),
                   *([f"--profile={args.profile}"] if args.profile else []),
                   *([f"--inputs={args.inputs}"] if args.inputs else []),
                   *(["--grad"] if args.grad else []), *(["--no-default"] if args.no_default else []),
                   *(["--step"] if args.step else []), *(["--opt"] if args.opt else [])]  # fmt: skip
    start = time.perf_counter()
    records: list[dict[str, Any]] = []
    for i, threads in enumerate(thread_counts):
        # The f64 check once, in the first worker: it does not depend on the thread count.
        extra = ["--check-f64"] if i == 0 else []
        records += run_per_thread_count(__file__, [threads], worker_args + extra, lambda t, r: None)
    wall = time.perf_counter() - start

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    env = records[0]["env"]
    timed = "a training step (loss_grad and adamw.step)" if args.step else f"@{GRAD_ENTRY if args.grad else ENTRY}"
    print(f"\ncorpus/nlp/gpt.mlir {timed}, {' '.join(f'{k}={env[k]}' for k in ('V', 'D', 'H', 'L', 'C', 'B', 'T'))}, "
          f"f32; medians (quartiles) of {args.rounds} interleaved rounds of {args.block} call(s); "
          f"load average {load:.1f} at the end; whole run {wall:.0f} s")  # fmt: skip
    f64 = records[0].get("f64")
    if f64:
        print(f"losses: f32 relative differences to torch eager "
              f"{', '.join(f'{k} {v:.1e}' for k, v in records[0]['f32_rel_diff'].items())} (tolerance {F32_RTOL:g}); "
              f"f64 presk {f64['presk']!r} vs torch {f64['torch']!r}: {f64['rel_diff']:.1e} (tolerance {F64_RTOL:g})")  # fmt: skip
    print()
    print(_table(records))
    print()
    for record in records:
        print(json.dumps(record))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
