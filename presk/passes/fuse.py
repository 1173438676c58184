"""`psk-fuse`: partition each function into fusion groups, and wrap every launch (PSK-Core → PSK-Realize).

A group is a set of elementwise lets of one function that share one loop
nest: every member has the group's result type (smaller inputs broadcast),
and every member but the root is read only by members, since a value read
from outside must reach memory for its reader. Reductions, contractions,
softmax and calls end a group; a group stops growing at `max-nodes` (64:
a value read twice is computed twice in the emitted expression, a bounded
trade); `pow n` with n > 2 joins none (it expands to n − 1 products).

The partition is structural: it depends on the body, not on shapes or the
realization, so it is computed once per function. Every other primitive
that computes or moves data is wrapped in a `psk_realize.nest` of its own,
so that after this pass every kernel launch is one op carrying its site.
`max-nodes=1` gives the unfused program (one launch per primitive), which
is what `presk launches` compares against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from presk.dialects import psk_core as core
from presk.dialects.psk_realize import MAX_GROUP_NODES, GroupOp, NestOp, SiteOp
from presk.dialects.psk_realize_nests import LAUNCHING_OPS, is_elementwise
from presk.ir.locations import error_at
from presk.ir.names import binding_names, site_name


def joins_groups(op: Operation) -> bool:
    """Elementwise, and not a `pow` that expands to more than one product."""
    return is_elementwise(op) and not (isinstance(op, core.PowOp) and op.n > 2)


def partition(block: Block, max_nodes: int = MAX_GROUP_NODES) -> list[list[Operation]]:
    """The fusion groups of a function body, each in program order, its root last.

    Greedy from the last let backwards: each elementwise let not yet taken
    roots a group, which takes every producer of its type whose readers are
    all members already, until no producer qualifies or the cap is reached.
    """
    order = {op: i for i, op in enumerate(block.ops)}
    taken: set[Operation] = set()
    groups: list[list[Operation]] = []
    for root in reversed(list(block.ops)):
        if not is_elementwise(root) or root in taken:
            continue
        members = [root]
        taken.add(root)
        if joins_groups(root):
            _grow(members, taken, block, max_nodes)
        groups.append(sorted(members, key=order.__getitem__))
    groups.reverse()
    return groups


def _grow(members: list[Operation], taken: set[Operation], block: Block, max_nodes: int) -> None:
    result_type = members[0].results[0].type
    member_set = set(members)
    grew = True
    while grew and len(members) < max_nodes:
        grew = False
        for member in list(members):
            for operand in member.operands:
                producer = operand.owner
                if (
                    len(members) >= max_nodes
                    or not isinstance(producer, Operation)
                    or producer in taken
                    or producer.parent_block() is not block
                    or not joins_groups(producer)
                    or producer.results[0].type != result_type
                    or any(use.operation not in member_set for use in producer.results[0].uses)
                ):
                    continue
                members.append(producer)
                member_set.add(producer)
                taken.add(producer)
                grew = True


def _wrap(kind: type[SiteOp], func: FuncOp, members: Sequence[Operation], names: dict) -> None:  # type: ignore[type-arg]
    """Move `members` (root last) into a new site op placed where the root was."""
    root_op = members[-1]
    root = root_op.results[0]
    block = root_op.parent_block()
    assert block is not None
    anchor = root_op.next_op
    outside_uses = [(use.operation, use.index) for use in root.uses]
    for op in members:
        op.detach()
    site = kind(site_name(func, names[root]), members, root)
    site.location = root_op.location
    site.result.name_hint = root.name_hint
    block.insert_op_before(site, anchor) if anchor is not None else block.add_op(site)
    for user, index in outside_uses:
        user.operands[index] = site.result


@dataclass(frozen=True)
class FuseElementwise(ModulePass):
    """Partition every function into fusion groups and wrap every other launch in a nest."""

    name = "psk-fuse"

    max_nodes: int = MAX_GROUP_NODES
    """The cap on a group's members; 1 launches every primitive by itself."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not 1 <= self.max_nodes <= MAX_GROUP_NODES:
            raise error_at(op, "E3002", f"psk-fuse: max-nodes is between 1 and {MAX_GROUP_NODES}, not {self.max_nodes}")
        for func in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            names = binding_names(func)
            block = func.body.block
            for members in partition(block, self.max_nodes):
                _wrap(GroupOp, func, members, names)
            for nest in [o for o in block.ops if isinstance(o, LAUNCHING_OPS)]:
                _wrap(NestOp, func, [nest], names)
