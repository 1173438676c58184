"""`psk-in-place`: write results over donated arguments (buffer donation, PSK-Kernel).

A program is functional: AdamW's step returns new arrays p', m', v' and
leaves p, m, v as they were, so the host allocates three outputs and the
step moves 7 arrays, each output line first read for ownership. A training
loop drops the old state as soon as it has the new one, so it may *donate*
those arguments (as JAX's `donate_argnums`): this pass then lets a result be
written over a donated argument of the same type, and the step moves 4
arrays read and 3 of them written back in place (what
`torch.optim.AdamW(fused=True)` does).

Which arguments are donated is the caller's choice (`donate`: argument
paths as the host program names them, e.g. `params,m,v`, a name standing
for every leaf under it, or `all`). A donated argument `a` takes the place
of a result buffer `o` (the host's `psk_kernel.alloc` of a value it
returns) when all of this holds, so that every element computed is the
same as without donation, bit for bit:

- one launch L writes `o`, and nothing before L uses `o`;
- L's kernel is a pure parallel nest (`presk.passes.fuse_launches.pure_nest`)
  whose only access to `o` is one store at the iteration's own index, and
  whose accesses to `a` are loads at the iteration's own index, all of
  them before that store in the body (iteration i reads a[i] and then
  writes o[i]; no iteration touches another's element: any split, any
  vector width and the kernel interpreter's whole-array evaluation read
  the old a[i]);
- `a` and `o` have the same type; `a` appears once among L's buffers;
- no launch after L reads `a`, no view shows it, and it is not itself a
  result (its old value is dead once L has read it).

Then L launches a variant of its kernel in which the buffer `o` is `a`
(the store goes to `a`, the argument list loses `o`; the variant is shared
by the launches that donate the same way, e.g. the leaves of a parameter
tree), every later use of `o` uses `a`, and the allocation is removed.
After a call, a donated argument holds the result written over it (the
executor returns that very array), or is unchanged when nothing was
written over it.

When several donated arguments could take one result, the first one found
in the stored value's expression, leftmost operand first (the `m` of
`m·β₁ + g·(1 − β₁)`, the `p` of `p − lr·(...)`) is preferred, then the
others in the order the kernel loads them. With explicit names every
donated leaf must be used, otherwise the pass fails (E3003) and says why;
with `all` the arguments that cannot be donated are left alone.

The executor (`presk.jit.executor.HostProgram`) sees a donated argument as
one a kernel writes: it takes the caller's array as it is (it must already
be a writable, C-contiguous array of the buffer's dtype and shape, sharing
memory with no other argument; E4003 otherwise) and returns it as the
result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from presk.diagnostics import PreskError
from presk.dialects import psk_kernel as pk
from presk.passes.fuse_launches import PureNest, pure_nest
from presk.passes.kernel_layout import unique_name

__all__ = ["Donation", "InPlace", "donate", "donated_paths", "select_paths"]


@dataclass
class Donation:
    """What `donate` did: per donated argument path, the result path now written over it."""

    reused: dict[str, str] = field(default_factory=dict)
    """Argument path → result path."""
    refused: dict[str, str] = field(default_factory=dict)
    """Argument path → why it could not be donated (only arguments that were asked for)."""


def select_paths(spec: str | Iterable[str], paths: Sequence[str]) -> list[str]:
    """The argument paths `spec` names: `all`, or names each standing for itself and every leaf under it."""
    names = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec) if n.strip()]
    if names == ["all"]:
        return list(paths)
    chosen: list[str] = []
    for name in names:
        hits = [p for p in paths if p == name or p.startswith(name + ".")]
        if not hits:
            raise PreskError(
                "E3003",
                f"pass 'psk-in-place' failed: no argument '{name}' to donate (arguments: {', '.join(paths)})",
            )
        chosen += [p for p in hits if p not in chosen]
    return chosen


def _host(module: ModuleOp) -> pk.HostOp:
    hosts = [op for op in module.body.block.ops if isinstance(op, pk.HostOp)]
    if len(hosts) != 1:
        raise PreskError("E3003", f"pass 'psk-in-place' failed: a kernel module has one host program, this one has {len(hosts)}")
    return hosts[0]


def _leftmost_loads(value: SSAValue, block: Block) -> list[memref.LoadOp]:
    """The loads feeding `value` within `block`, depth first, leftmost operand first."""
    out: list[memref.LoadOp] = []
    seen: set[Operation] = set()

    def visit(v: SSAValue) -> None:
        owner = v.owner
        if not isinstance(owner, Operation) or owner in seen or owner.parent_block() is not block:
            return
        seen.add(owner)
        if isinstance(owner, memref.LoadOp):
            out.append(owner)
            return
        for operand in owner.operands:
            visit(operand)

    visit(value)
    return out


def _position(op: Operation, block: Block) -> int:
    for i, other in enumerate(block.ops):
        if other is op:
            return i
    raise AssertionError("op not in block")


@dataclass
class _Candidate:
    arg: BlockArgument
    """The donated host argument."""
    output: SSAValue
    """The result buffer it replaces (an alloc)."""
    a: int
    o: int
    """Their positions among the kernel's buffers."""


def _kernel_pairs(nest: PureNest, donated: dict[int, BlockArgument], outputs: dict[int, SSAValue]) -> list[tuple[int, int]] | str:
    """Kernel buffer pairs (a, o) that can share memory, in order of preference per output; or why none."""
    kernel = nest.kernel
    args = list(kernel.body.block.args)
    body = nest.levels[-1]
    written = nest.written()
    pairs: list[tuple[int, int]] = []
    reason = ""
    for o in sorted(outputs, key=lambda i: min((_position(s, body) for s in nest.stores if s.memref is args[i]), default=0)):
        stores = [s for s in nest.stores if s.memref is args[o]]
        if len(stores) != 1 or any(l.memref is args[o] for l in nest.loads):
            reason = "its kernel writes the result more than once or reads it back"
            continue
        (store,) = stores
        if not nest.at_iteration(store.indices, store.memref):
            reason = "its kernel does not write the result at the iteration's own element"
            continue
        at = _position(store, body)
        order = [l.memref for l in _leftmost_loads(store.value, body)] + [l.memref for l in nest.loads]
        for value in order:
            a = args.index(value)
            if a not in donated or (a, o) in pairs:
                continue
            if donated[a].type != args[o].type:
                reason = "no result of its type is written over it"
                continue
            if a in written:
                reason = "its kernel writes it"
                continue
            loads = [l for l in nest.loads if l.memref is value]
            if not all(nest.at_iteration(l.indices, l.memref) for l in loads):
                reason = "its kernel reads it at another element than the one it writes"
                continue
            if any(_position(l, body) > at for l in loads):
                reason = "its kernel reads it after writing the result"
                continue
            pairs.append((a, o))
    return pairs or (reason or "no result is computed from it element by element")


def donate(module: ModuleOp, spec: str | Iterable[str], strict: bool | None = None) -> Donation:
    """Rewrite `module`'s host program to write results over the donated arguments (see the module docstring).

    `strict` (default: unless `spec` is `all`): every donated argument must
    be used, else E3003 naming the first one and why; the module is then
    unchanged.
    """
    host = _host(module)
    block = host.body.block
    paths = [p.data for p in (host.argument_paths or [])]
    if len(paths) != len(block.args):
        paths = [str(i) for i in range(len(block.args))]
    results = [p.data for p in (host.result_paths or [])]
    chosen = select_paths(spec, paths)
    if strict is None:
        strict = not (isinstance(spec, str) and spec.strip() == "all")
    kernels = {k.sym_name.data: k for k in module.body.block.ops if isinstance(k, pk.KernelOp)}
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    ret = block.last_op
    returned = list(ret.operands) if isinstance(ret, pk.ReturnOp) else []
    donation = Donation()

    # Arguments that may be donated at all, and the last launch reading each.
    eligible: dict[BlockArgument, pk.LaunchOp] = {}
    for path in chosen:
        arg = block.args[paths.index(path)]
        uses = [u.operation for u in arg.uses]
        if arg in returned:
            donation.refused[path] = "it is itself a result"
        elif any(isinstance(u, pk.ViewOp) for u in uses):
            donation.refused[path] = "the program reads it through a view"
        elif not uses:
            donation.refused[path] = "the program does not read it"
        else:
            last = max(uses, key=lambda u: index[u])
            if not isinstance(last, pk.LaunchOp):
                donation.refused[path] = "the program does not read it in a kernel"
            elif sum(1 for b in last.buffers if b is arg) != 1:
                donation.refused[path] = "its last kernel takes it twice"
            else:
                eligible[arg] = last
    taken_outputs: set[SSAValue] = set()
    plans: list[tuple[pk.LaunchOp, list[_Candidate]]] = []
    nests: dict[str, PureNest | None] = {}
    by_launch: dict[pk.LaunchOp, list[BlockArgument]] = {}
    for arg, launch in eligible.items():
        by_launch.setdefault(launch, []).append(arg)
    for launch in sorted(by_launch, key=lambda l: index[l]):
        name = launch.kernel.string_value()
        if name not in nests:
            nests[name] = pure_nest(kernels[name]) if name in kernels else None
        nest = nests[name]
        args = by_launch[launch]
        if nest is None:
            for arg in args:
                donation.refused[paths[arg.index]] = f"its last kernel ({name}) is not an elementwise nest"
            continue
        buffers = list(launch.buffers)
        donated = {buffers.index(arg): arg for arg in args}
        outputs: dict[int, SSAValue] = {}
        for o in nest.written():
            value = buffers[o]
            if (
                isinstance(value.owner, pk.AllocOp)
                and value in returned
                and buffers.count(value) == 1
                and value not in taken_outputs
                and all(index[u.operation] >= index[launch] for u in value.uses)
            ):
                outputs[o] = value
        found = _kernel_pairs(nest, donated, outputs) if outputs else "its last kernel writes no result of its own"
        if isinstance(found, str):
            for arg in args:
                donation.refused[paths[arg.index]] = found
            continue
        chosen_pairs: list[_Candidate] = []
        used_a: set[int] = set()
        used_o: set[int] = set()
        for a, o in found:
            if a in used_a or o in used_o:
                continue
            used_a.add(a)
            used_o.add(o)
            chosen_pairs.append(_Candidate(donated[a], buffers[o], a, o))
            taken_outputs.add(buffers[o])
        for a, arg in donated.items():
            if a not in used_a:
                donation.refused[paths[arg.index]] = "every result its last kernel writes is taken by another argument"
        plans.append((launch, chosen_pairs))
    refused = {p: why for p, why in donation.refused.items()}
    if strict and refused:
        path, why = next(iter(refused.items()))
        raise PreskError("E3003", f"pass 'psk-in-place' failed: argument '{path}' cannot be donated: {why}")

    # -- the rewrite ---------------------------------------------------------
    variants: dict[tuple[str, tuple[tuple[int, int], ...]], str] = {}
    for launch, pairs in plans:
        name = launch.kernel.string_value()
        key = (name, tuple(sorted((c.a, c.o) for c in pairs)))
        variant = variants.get(key)
        if variant is None:
            variant = unique_name(f"{name}.in_place", kernels)
            kernel = _in_place_kernel(kernels[name], [(c.a, c.o) for c in pairs], variant)
            module.body.block.insert_op_before(kernel, host)
            kernels[variant] = kernel
            variants[key] = variant
        drop = {c.o for c in pairs}
        buffers = [b for i, b in enumerate(launch.buffers) if i not in drop]
        new = pk.LaunchOp(variant, buffers, launch.attributes["site"].data)  # type: ignore[attr-defined]
        for key_, value in launch.attributes.items():
            if key_ != "site":
                new.attributes[key_] = value
        block.insert_op_before(new, launch)
        launch.detach()
        launch.erase()
        for c in pairs:
            alloc = c.output.owner
            c.output.replace_all_uses_with(c.arg)
            assert isinstance(alloc, pk.AllocOp)
            alloc.detach()
            alloc.erase()
            where = returned.index(c.output)
            donation.reused[paths[c.arg.index]] = results[where] if where < len(results) else str(where)
    launched = {l.kernel.string_value() for l in block.ops if isinstance(l, pk.LaunchOp)}
    replaced = {name for name, _ in variants}
    for k in [k for k in module.body.block.ops if isinstance(k, pk.KernelOp)]:
        if k.sym_name.data in replaced and k.sym_name.data not in launched:
            k.detach()
            k.erase()
    return donation


def _in_place_kernel(kernel: pk.KernelOp, pairs: Sequence[tuple[int, int]], name: str) -> pk.KernelOp:
    """A copy of `kernel` where buffer o of each pair is buffer a (o's argument removed)."""
    clone = kernel.clone()
    clone.sym_name = StringAttr(name)
    args = list(clone.body.block.args)
    for a, o in pairs:
        args[o].replace_all_uses_with(args[a])
    for o in sorted((o for _, o in pairs), reverse=True):
        clone.body.block.erase_arg(args[o])
    return clone


def donated_paths(module: ModuleOp) -> list[str]:
    """The argument paths of `module`'s host program that a kernel writes (donated by `psk-in-place`)."""
    host = _host(module)
    block = host.body.block
    kernels = {k.sym_name.data: k for k in module.body.block.ops if isinstance(k, pk.KernelOp)}
    paths = [p.data for p in (host.argument_paths or [])]
    written: set[SSAValue] = set()
    for launch in block.ops:
        if isinstance(launch, pk.LaunchOp):
            kernel = kernels[launch.kernel.string_value()]
            kargs = list(kernel.body.block.args)
            for op in kernel.walk():
                target = op.operands[1] if op.name in ("memref.store", "vector.store") and len(op.operands) > 1 else None
                if target is not None and target in kargs:
                    written.add(launch.buffers[kargs.index(target)])
    return [paths[a.index] if a.index < len(paths) else str(a.index) for a in block.args if a in written]


@dataclass(frozen=True)
class InPlace(ModulePass):
    """Write results over donated arguments (see the module docstring).

    `donate`: comma-separated argument paths (a name stands for every leaf
    under it), or `all` (the default: every argument that can be, the
    others left alone).
    """

    name = "psk-in-place"
    donate: str = "all"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        donate(op, self.donate)
