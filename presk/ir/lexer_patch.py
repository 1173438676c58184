"""Two guards on xDSL 0.74's MLIR lexer, so that no input can hang presk or crash it.

**String literals in linear time.** xDSL lexes a string literal with

    "(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"

The `+` nested in the `*` lets `re` split a run of n plain characters
into loop iterations in 2^(n-1) ways. When the closing quote is missing
before the end of the line (one stray `"` in a file), `re` tries every
split before giving up: 24 characters take over a second, each one more
doubles it, and a typo in an ordinary line of IR hangs every presk command.

The same pattern with possessive quantifiers (Python 3.11) matches exactly
the same strings in linear time. The literal grammar is unambiguous: a loop
iteration starting with `\\` can only be an escape, any other iteration is a
maximal run of plain characters, and the two escape alternatives start with
disjoint characters. Backtracking could only stop the loop just before a
plain character or a backslash, never before the closing `"`, so it never
turns a failure into a match; forbidding it changes no result, only the time
to fail. The pattern is replaced only when xDSL's is exactly the one above,
so an xDSL that fixes or changes it is left alone.

**Integer literals too large to print.** Python refuses to convert an int
of more than `sys.get_int_max_str_digits()` (4300) decimal digits to or from
text. xDSL converts a decimal literal with `int()`, whose `ValueError` is not
a `ParseError`, and a hexadecimal one converts fine but then fails when
printed or quoted in a message, far from the parser. Both are refused at the
literal instead, as a located parse error.

docs/xdsl-lexer-fix.md has the reproducers and the argument in full. Delete
this module (and its import in `presk/ir/__init__.py`) once the xDSL that
presk pins does both itself.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRTokenKind

__all__ = ["APPLIED", "LINEAR_PATTERN", "XDSL_PATTERN", "apply", "check_int_literal"]

XDSL_PATTERN = r'"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
"""xDSL 0.74's pattern (`MLIRLexer._unescaped_characters_regex`)."""

LINEAR_PATTERN = r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"'
"""The same language, with no backtracking into a run or into the loop."""


def check_int_literal(span: Span[str]) -> None:
    """Raise a `ParseError` at `span` if its integer cannot round-trip through text."""
    limit = sys.get_int_max_str_digits()
    if not limit:
        return
    text = span.text
    if text[:2] in ("0x", "0X"):
        # Only a value of more than `limit` decimal digits is refused; ~3.32 bits a digit.
        value = int(text, 16)
        too_large = value.bit_length() > 3 * limit and value >= 10**limit
    else:
        too_large = len(text) > limit
    if too_large:
        raise ParseError(span, f"integer literal too large: more than {limit} decimal digits")


def _guarded_get_int_value(original: Callable[[MLIRTokenKind, Span[str]], int]) -> Callable[..., int]:
    def get_int_value(self: MLIRTokenKind, span: Span[str]) -> int:
        if self == MLIRTokenKind.INTEGER_LIT:
            check_int_literal(span)
        return original(self, span)

    get_int_value.__doc__ = original.__doc__
    get_int_value.presk_guarded = True  # type: ignore[attr-defined]
    return get_int_value


def apply() -> bool:
    """Install both guards; idempotent.

    Returns whether string literals are now lexed with `LINEAR_PATTERN`
    (also when an earlier call installed it).
    """
    get_int_value = MLIRTokenKind.get_int_value
    if not getattr(get_int_value, "presk_guarded", False):
        MLIRTokenKind.get_int_value = _guarded_get_int_value(get_int_value)  # type: ignore[method-assign]

    current: re.Pattern[str] = MLIRLexer._unescaped_characters_regex
    if current.pattern == LINEAR_PATTERN:
        return True
    if current.pattern != XDSL_PATTERN or current.flags != re.compile(XDSL_PATTERN).flags:
        return False
    MLIRLexer._unescaped_characters_regex = re.compile(LINEAR_PATTERN)
    return True


APPLIED: bool = apply()
"""Whether the installed xDSL lexes string literals with the linear pattern."""
