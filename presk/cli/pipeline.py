"""Pass pipelines from the command line, in xDSL's and MLIR's syntax.

`-p a,b{k=v}` is xDSL's syntax; `--pass-pipeline='builtin.module(a,b{k=v})'`
is MLIR's, which is the same list wrapped in the operation the passes are
anchored on. presk passes work on whole modules, so the MLIR form is
accepted when it is anchored on the module (`builtin.module(...)` or
`any(...)`) and refused, not silently flattened, when a pass is nested on
another operation (`func.func(cse)`). As in `mlir-opt`, the anchor is
required: a bare `--pass-pipeline='a,b'` is refused with a hint.

Option names are spelled with dashes in every message (`max-nodes`), as
users write them, never with the underscores of the pass's dataclass fields.

`run_pass` applies one pass for `presk-opt` and for `presk --pass-pipeline`
alike, so a failing pass reads the same from every command.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from xdsl.context import Context
from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, VerifyException

from presk.diagnostics import PreskError
from presk.ir.parse import ParsedModule
from presk.ir.verify import exception_message

PassFactory = Callable[[], type[ModulePass]]

_MODULE_ANCHOR = re.compile(r"^\s*(builtin\.module|any)\s*\(")
_ANCHORED = re.compile(r"^\s*([\w.$-]+)\s*\(")


def mlir_pipeline_to_xdsl(text: str) -> str:
    """`builtin.module(a, b{k=v})` -> `a,b{k=v}`; raises E3002 on what cannot be run."""
    inner = text.strip()
    if inner and _MODULE_ANCHOR.match(inner) is None:
        hint = f"write 'builtin.module({inner})'"
        if (nested := _ANCHORED.match(inner)) is not None:
            hint = f"passes nested on '{nested.group(1)}' are not supported; list them inside builtin.module(...)"
        raise PreskError(
            "E3002", f"bad pass pipeline '{text}': --pass-pipeline is anchored on the module: {hint}"
        )
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
        passes.append(_instantiate(pass_class, arg_spec))
    return tuple(passes)


def _dashed(name: str) -> str:
    return name.replace("_", "-")


def _instantiate(pass_class: type[ModulePass], arg_spec: ArgSpec) -> ModulePass:
    """The pass with the options `arg_spec` gives; E3002, naming options with dashes, otherwise.

    xDSL's `from_spec` does the conversions; the names it reports (unknown or
    missing options) are checked first, so every message spells them as the
    user does.
    """

    def refuse(reason: str) -> PreskError:
        return PreskError("E3002", f"bad options for pass '{arg_spec.name}': {reason}; {_describe_options(pass_class)}")

    given = arg_spec.normalize_parameter_names().parameters
    fields = (
        {field.name: field for field in dataclasses.fields(pass_class) if field.init and field.name != "name"}
        if dataclasses.is_dataclass(pass_class)
        else {}
    )
    unknown = [name for name in given if name not in fields]
    if unknown:
        names = ", ".join(f"'{_dashed(name)}'" for name in unknown)
        raise refuse(f"it has no option {names}" if len(unknown) == 1 else f"it has no options {names}")
    missing = sorted(_dashed(name) for name in pass_class.required_fields() if name not in given and name in fields)
    if missing:
        raise refuse(f"option '{missing[0]}' is required")
    try:
        return pass_class.from_pass_spec(arg_spec)
    except (ValueError, TypeError) as error:
        raise refuse(_bad_value(pass_class, arg_spec, str(error))) from None


def _bad_value(pass_class: type[ModulePass], arg_spec: ArgSpec, reason: str) -> str:
    """Which option's value could not be converted, tried one option at a time."""
    parameters = arg_spec.normalize_parameter_names().parameters
    if pass_class.required_fields() - {"name"}:
        # Options cannot be tried one by one when others are required.
        return reason if len(parameters) > 1 else f"option '{_dashed(next(iter(parameters)))}': {reason}"
    for name, value in parameters.items():
        try:
            pass_class.from_pass_spec(ArgSpec(arg_spec.name, {name: value}))
        except (ValueError, TypeError):
            shown = " ".join(str(v) for v in value) if isinstance(value, tuple) else str(value)
            expected = _option_types(pass_class).get(name, "another value")
            return f"option '{_dashed(name)}' takes {expected}, not '{shown}'"
    return reason


def _option_types(pass_class: type[ModulePass]) -> dict[str, str]:
    return {info.name: info.expected_type.strip("'") for info in get_pass_option_infos(pass_class)}


def _load_pass(available: Mapping[str, PassFactory], name: str) -> type[ModulePass]:
    """The pass class `name` registers; E3001 naming the plugin at fault when it cannot be had.

    A pass no universe defines may belong to a plugin that failed to load, so
    each such plugin's reason is added to the message.
    """
    from presk.universe import load_multiverse

    multiverse = load_multiverse()
    if name not in available:
        close = difflib.get_close_matches(name, list(available), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "; see presk-opt --help"
        broken = "".join(
            f"; it may be a pass of plugin '{failure.distribution}' (entry point '{failure.entry_point}'), "
            f"which could not be loaded: {failure.reason}"
            for failure in multiverse.failures
        )
        raise PreskError("E3001", f"unknown pass '{name}'{hint}{broken}")
    origin = multiverse.origins.get(name)
    owner = f" (plugin '{origin}')" if origin not in (None, "presk", "xdsl") else ""
    try:
        return available[name]()
    except Exception as error:  # noqa: BLE001 - a plugin's factory can raise anything
        raise PreskError(
            "E3001", f"pass '{name}'{owner} is registered but could not be loaded: {type(error).__name__}: {error}"
        ) from None


def _describe_options(pass_class: type[ModulePass]) -> str:
    if not dataclasses.is_dataclass(pass_class) or not (infos := get_pass_option_infos(pass_class)):
        return "it takes no options"
    options = ", ".join(f"{_dashed(info.name)}: {info.expected_type.strip(chr(39))}" for info in infos)
    return f"its options are {options}"


def pipeline_spec(passes: Sequence[str], pass_pipeline: Sequence[str]) -> str:
    """The one pipeline `-p` and `--pass-pipeline` give, in xDSL syntax; E3002 when given twice. `-p` takes
    xDSL's list (`a,b{k=v}`) or, as mlir-opt's `-p` does, the anchored `builtin.module(...)`.

    Each option may be given once, as `mlir-opt` allows `--pass-pipeline`
    once, and not both: a second pipeline would otherwise replace the first
    or be appended to it without a word.
    """
    if len(passes) + len(pass_pipeline) > 1:
        if passes and pass_pipeline:
            raise PreskError("E3002", "give the passes with either -p or --pass-pipeline, not both")
        option = "-p" if passes else "--pass-pipeline"
        raise PreskError("E3002", f"{option} is given {len(passes) + len(pass_pipeline)} times: give one pipeline")
    if passes:
        # mlir-opt's -p is its --pass-pipeline: its anchored form is read as that (no pass is named builtin.module).
        return mlir_pipeline_to_xdsl(passes[0]) if _MODULE_ANCHOR.match(passes[0]) else passes[0]
    return mlir_pipeline_to_xdsl(pass_pipeline[0]) if pass_pipeline else ""


def run_pass(ctx: Context, pass_: ModulePass, parsed: ParsedModule, verify: bool = True) -> None:
    """Apply one pass to the parsed program, then verify it; every failure becomes a `PreskError`.

    A failure the pass placed at an operation keeps its place and message.
    One with no place in the file (a module-level `error_at` on an implicit
    module, xDSL's `DiagnosticException`, a `VerifyException`) reads
    `pass 'x' failed: ...`, so the user learns which pass gave up; it is
    matched by `// expected-error @unknown {{...}}`.
    """
    try:
        pass_.apply(ctx, parsed.module)
    except PreskError as error:
        if error.line is None:
            # Messages that already start with the pass's name are not made to say it twice.
            message = error.message.removeprefix(f"{pass_.name}: ")
            error = replace(error, message=f"pass '{pass_.name}' failed: {message}")
        raise error from None
    except VerifyException as error:
        raise PreskError("E2001", f"pass '{pass_.name}' failed: {exception_message(error)}") from None
    except DiagnosticException as error:
        raise PreskError("E3003", f"pass '{pass_.name}' failed: {exception_message(error)}") from None
    if verify:
        verify_after(pass_, parsed)


def verify_after(pass_: ModulePass, parsed: ParsedModule) -> None:
    """Verify the program a pass left; an error notes that the pass made invalid IR."""
    try:
        parsed.verify()
    except PreskError as error:
        raise error.with_note(f"the IR does not verify after pass '{pass_.name}'") from None
