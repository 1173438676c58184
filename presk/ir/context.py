"""The xDSL context presk parses in: every dialect of the `xdsl.universe` multiverse.

Dialects are registered lazily (by factory), so xDSL's own dialects, presk's
and those of installed plugins cost nothing until a file uses them. presk's
own dialects are registered even when its entry point is not installed
(running from a source tree), so a checkout works before `pip install`.
A plugin that fails to load is skipped (`presk.universe.load_multiverse`),
so it breaks only the programs that use what it would have added.
"""

from __future__ import annotations

from xdsl.context import Context


def presk_context() -> Context:
    from presk.universe import PRESK_UNIVERSE, load_multiverse

    ctx = Context()
    dialects = {**PRESK_UNIVERSE.all_dialects, **load_multiverse().universe.all_dialects}
    for name, factory in dialects.items():
        ctx.register_dialect(name, factory)
    return ctx
