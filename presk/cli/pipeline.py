"""Pass pipelines from the command line, in xDSL's and MLIR's syntax.

`-p a,b{k=v}` is xDSL's syntax; `--pass-pipeline='builtin.module(a,b{k=v})'`
is MLIR's, which is the same list wrapped in the operation the passes are
anchored on. presk passes work on whole modules, so the MLIR form is
accepted when it is anchored on the module (`builtin.module(...)` or
`any(...)`) and refused, not silently flattened, when a pass is nested on
another operation (`func.func(cse)`).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterator, Mapping

from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from presk.diagnostics import PreskError

PassFactory = Callable[[], type[ModulePass]]

_MODULE_ANCHOR = re.compile(r"^\s*(builtin\.module|any)\s*\(")
_ANCHORED = re.compile(r"^\s*([\w.$-]+)\s*\(")


def mlir_pipeline_to_xdsl(text: str) -> str:
    """`builtin.module(a, b{k=v})` -> `a,b{k=v}`; raises E3002 on what cannot be run."""
    inner = text.strip()
    while (match := _MODULE_ANCHOR.match(inner)) is not None:
        close = _matching_paren(inner, match.end() - 1)
        if close != len(inner) - 1:
            raise PreskError("E3002", f"bad pass pipeline '{text}': unbalanced parentheses after '{match.group(1)}'")
        inner = inner[match.end() : close].strip()
    if not inner:
        return ""
    elements = [element.strip() for element in _split_top_level(inner)]
    for element in elements:
        if not element:
            raise PreskError("E3002", f"bad pass pipeline '{text}': empty pass name")
        if (nested := _ANCHORED.match(element)) is not None:
            raise PreskError(
                "E3002",
                f"bad pass pipeline '{text}': passes nested on '{nested.group(1)}' are not supported; "
                "presk passes run on the whole module, list them inside builtin.module(...)",
            )
    return ",".join(_tidy_options(element) for element in elements)


def _matching_paren(text: str, open_index: int) -> int:
    """Index of the `)` closing the `(` at `open_index`, or -1."""
    depth = 0
    for index, char in _unquoted(text, open_index):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside parentheses, braces and quotes."""
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in _unquoted(text, 0):
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _unquoted(text: str, start: int) -> Iterator[tuple[int, str]]:
    """The characters of `text` from `start` that are not inside a string literal."""
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        else:
            yield index, char


def _tidy_options(element: str) -> str:
    """`a{ k=v }` -> `a{k=v}`: MLIR tolerates the spaces, xDSL's lexer does not."""
    brace = element.find("{")
    if brace == -1 or not element.endswith("}"):
        return element
    return f"{element[:brace].strip()}{{{element[brace + 1 : -1].strip()}}}"


def parse_pass_specs(spec: str) -> list[ArgSpec]:
    """xDSL's pipeline syntax -> one `ArgSpec` per pass; raises E3002 on bad syntax."""
    try:
        return list(parse_pipeline(spec))
    except ArgSpecParseError as error:
        # Its text is "header / name:line:col / source / caret / message".
        lines = str(error).rstrip().splitlines()
        column = int(lines[1].rsplit(":", 1)[1]) if len(lines) > 1 else 1
        rest = spec[column - 1 :][:20]
        where = f"at '{rest}'" if rest else "at the end"
        raise PreskError("E3002", f"bad pass pipeline '{spec}': {lines[-1].strip()} ({where})") from None


def build_pipeline(available: Mapping[str, PassFactory], spec: str) -> tuple[ModulePass, ...]:
    """The passes `spec` (xDSL syntax) names, with their options; E3001/E3002 otherwise."""
    passes: list[ModulePass] = []
    for arg_spec in parse_pass_specs(spec):
        pass_class = _load_pass(available, arg_spec.name)
        try:
            passes.append(pass_class.from_pass_spec(arg_spec))
        except (ValueError, TypeError) as error:
            raise PreskError(
                "E3002", f"bad options for pass '{arg_spec.name}': {error}; {_describe_options(pass_class)}"
            ) from None
    return tuple(passes)


def _load_pass(available: Mapping[str, PassFactory], name: str) -> type[ModulePass]:
    if name not in available:
        close = difflib.get_close_matches(name, list(available), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "; see presk-opt --help"
        raise PreskError("E3001", f"unknown pass '{name}'{hint}")
    try:
        return available[name]()
    except ImportError as error:
        raise PreskError("E3001", f"pass '{name}' is registered but could not be loaded: {error}") from None


def _describe_options(pass_class: type[ModulePass]) -> str:
    if not dataclasses.is_dataclass(pass_class) or not (infos := get_pass_option_infos(pass_class)):
        return "it takes no options"
    options = ", ".join(f"{info.name.replace('_', '-')}: {info.expected_type}" for info in infos)
    return f"its options are {options}"
