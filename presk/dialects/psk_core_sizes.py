"""Size expressions in PSK-Core types (`"D / H"`): their grammar, which the dialect's verifiers check.

Evaluating one against bound sizes is `presk.sizes`' business; reading one
is the dialect's, so that a type can be verified without binding anything.
"""

from __future__ import annotations

import re

__all__ = ["parse_size_expr"]

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|([*/]))")


def parse_size_expr(text: str) -> list[str | int]:
    """`"D / H"` → [`D`, `/`, `H`]: names and integers joined by `*` and `/`, left to right."""
    tokens: list[str | int] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"size expression '{text}': unexpected '{text[pos:].strip()[:1]}'")
        number, name, op = m.groups()
        expect_operand = len(tokens) % 2 == 0
        if (op is not None) == expect_operand:
            raise ValueError(f"size expression '{text}': expected {'a name or integer' if expect_operand else '* or /'}")
        tokens.append(int(number) if number is not None else (name or op))
        pos = m.end()
    if not tokens or len(tokens) % 2 == 0:
        raise ValueError(f"size expression '{text}' is incomplete")
    if 0 in tokens:
        raise ValueError(f"size expression '{text}' has a 0, which would make a size 0 or divide by it")
    return tokens
