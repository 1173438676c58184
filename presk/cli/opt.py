"""`presk-opt`: parse, verify, transform and print IR, like `mlir-opt`.

Built on xDSL's `xDSLOptMain`, which provides the context with every
registered dialect and pass (presk's, xDSL's and plugins', through the
`xdsl.universe` entry point), argument parsing and output targets. presk
replaces what must behave like MLIR rather than like xDSL: located `EXXXX`
diagnostics instead of exceptions, `--pass-pipeline`, `--verify-diagnostics`
with `expected-error` annotations, and printing with the file's type aliases.

Exit codes: 0 success, 1 a diagnostic (or a failed `--verify-diagnostics`
check), 2 bad command line, 70 internal error.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Sequence

from xdsl.passes import ModulePass, PassPipeline
from xdsl.transforms import get_all_passes
from xdsl.xdsl_opt_main import VersionAction, xDSLOptMain

from presk.cli.collector import collect_less_often
from presk.cli.expected import check_diagnostics, collect_expectations
from presk.cli.guard import EXIT_ERROR, run_guarded
from presk.cli.march import add_march_argument, apply_march, command_settings
from presk.cli.pipeline import build_pipeline, pipeline_spec, run_pass, verify_after
from presk.cli.plugins import report_plugin_failures
from presk.cli.source import read_input
from presk.cli.split import SPLIT_MARKER, Chunk, split_input
from presk.cli.version import presk_version
from presk.diagnostics import PreskError
from presk.ir.parse import ParsedModule, parse_module
from presk.ir.print import print_module
from presk.universe import load_multiverse

class PreskOptMain(xDSLOptMain):
    """The `presk-opt` driver; `run()` returns the exit code."""

    version_format = f"presk-opt {presk_version()} (xDSL {{xdsl_version}})"

    passes: tuple[ModulePass, ...]
    """The pipeline, parsed and checked before any input is read."""

    def __init__(self, args: Sequence[str] | None = None) -> None:
        super().__init__(description="presk modular optimizer driver (mlir-opt for PSK-Core)", args=args)

    # -- what is registered ------------------------------------------------------

    def register_all_dialects(self) -> None:
        """Every loaded universe's dialects; a plugin that fails to load is skipped (`load_multiverse`)."""
        for name, factory in load_multiverse().universe.all_dialects.items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in load_multiverse().universe.all_passes.items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        for name, factory in load_multiverse().universe.all_targets.items():
            self.available_targets.setdefault(name, factory)

    # -- command line ---------------------------------------------------------

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        """presk-opt's own set: only options it honours, with MLIR's meaning.

        xDSLOptMain's set is not inherited because several of its options
        (`--verify-diagnostics`, `--parsing-diagnostics`, `--shrink`) mean
        something else there; the ones presk keeps are declared again here.
        """
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        arg_parser.epilog = self._pass_listing()
        add = arg_parser.add_argument
        add("input_file", nargs="?", help="input file; '-' or none reads standard input")
        add("-o", "--output-file", help="write the output here instead of standard output (only on success)")
        # Appended, so that giving either twice is refused rather than silently keeping the last.
        add("-p", "--passes", action="append", default=[], help="passes in xDSL syntax: a,b{opt=value} (listed "
            "below), or as --pass-pipeline takes them: 'builtin.module(a,b{opt=value})'")  # fmt: skip
        add(
            "--pass-pipeline",
            action="append",
            default=[],
            help="passes in MLIR syntax: 'builtin.module(a,b{opt=value})'",
        )
        add("--split-input-file", action="store_true", help=f"process each '{SPLIT_MARKER}'-separated chunk on its own")
        add(
            "--verify-diagnostics",
            action="store_true",
            help="check the errors against the input's expected-error annotations (MLIR semantics)",
        )
        add("--allow-unregistered-dialect", action="store_true", help="accept operations of unknown dialects")
        add("--no-implicit-module", action="store_true", help="require an explicit top-level builtin.module")
        add("--disable-verify", action="store_true", help="do not verify the IR after parsing and after each pass")
        add("--print-op-generic", action="store_true", help="print operations in the generic format")
        add("--print-no-properties", action="store_true", help="print properties as attributes")
        add("--print-debuginfo", action="store_true", help="print the source location of each operation")
        add("--print-between-passes", action="store_true", help="print the IR after each pass to standard error")
        add("--time-passes", action="store_true", help="print how long each pass took to standard error")
        add("--syntax-highlight", action="store_true", help="colour the output (prints without aliases)")
        add_march_argument(arg_parser)
        add("-t", "--target", default="mlir", help=f"output target: {', '.join(self.available_targets)}")
        add("-v", "--version", action=VersionAction, version_format=self.version_format)

    def _pass_listing(self) -> str:
        """The `--help` epilog: presk's and plugins' passes first, then xDSL's."""
        xdsl_passes = set(get_all_passes())
        own = sorted(name for name in self.available_passes if name not in xdsl_passes)
        upstream = sorted(name for name in self.available_passes if name in xdsl_passes)

        def block(title: str, names: list[str]) -> str:
            body = textwrap.fill(", ".join(names) or "(none)", width=88, initial_indent="  ", subsequent_indent="  ")
            return f"{title}:\n{body}"

        return block("presk and plugin passes", own) + "\n\n" + block("xDSL passes", upstream)

    def setup_pipeline(self) -> None:
        spec = pipeline_spec(self.args.passes, self.args.pass_pipeline)
        self.passes = build_pipeline(self.available_passes, spec)
        self.pipeline = PassPipeline(self.passes)

    # -- running ---------------------------------------------------------------

    def run(self) -> int:  # type: ignore[override]  # xDSL's returns None
        with command_settings():
            apply_march(self.args.march)
            return self._run()

    def _run(self) -> int:
        source = read_input(self.args.input_file)
        filename, text = source.name, source.text
        outputs: list[str] = []
        failed = False
        for chunk in split_input(text, self.args.split_input_file):
            output, ok = self._run_chunk(filename, chunk)
            outputs.append(output)
            failed |= not ok
        result = f"{SPLIT_MARKER}\n".join(outputs)
        if self.args.output_file is None:
            sys.stdout.write(result)
            sys.stdout.flush()
        elif not failed:
            self._write_output(self.args.output_file, result)
        return EXIT_ERROR if failed else 0

    @staticmethod
    def _write_output(path: str, text: str) -> None:
        try:
            with open(path, "w", encoding="utf-8") as stream:
                stream.write(text)
        except OSError as error:
            raise PreskError("E0001", f"cannot write output file '{path}': {error.strerror}") from None

    def _run_chunk(self, filename: str, chunk: Chunk) -> tuple[str, bool]:
        """The chunk's output and whether it went as expected; reports its errors."""
        errors: list[PreskError] = []
        output = ""
        try:
            output = self._compile(filename, chunk)
        except PreskError as error:
            located = error.located(filename)
            if located.file == filename:
                located = located.with_source(chunk.text, chunk.line_offset)
            errors.append(located)
        if self.args.verify_diagnostics:
            expected = collect_expectations(chunk.text, chunk.line_offset)
            failures = check_diagnostics(expected, errors, filename)
            for failure in failures:
                print(failure, file=sys.stderr)
            return ("" if errors else output), not failures
        for error in errors:
            print(error.format(), file=sys.stderr)
        return output, not errors

    def _compile(self, filename: str, chunk: Chunk) -> str:
        parsed = parse_module(
            self.ctx,
            chunk.text,
            filename,
            chunk.line_offset,
            allow_implicit_module=not self.args.no_implicit_module,
        )
        if not self.args.disable_verify:
            parsed.verify()
        for pass_ in self.passes:
            self._apply(pass_, parsed)
        return self._print(parsed)

    def _apply(self, pass_: ModulePass, parsed: ParsedModule) -> None:
        """Run one pass, then verify; every failure becomes a `PreskError`."""
        start = time.perf_counter()
        run_pass(self.ctx, pass_, parsed, verify=False)
        if self.args.time_passes:
            print(f"presk-opt: pass {pass_.name} took {time.perf_counter() - start:.6f} s", file=sys.stderr)
        if not self.args.disable_verify:
            verify_after(pass_, parsed)
        if self.args.print_between_passes:
            print(f"// IR after {pass_.name}:\n{self._print(parsed)}", file=sys.stderr)

    def _print(self, parsed: ParsedModule) -> str:
        if self.args.target != "mlir" or self.args.syntax_highlight:
            return self.output_resulting_program(parsed.module)
        return print_module(
            parsed.module,
            parsed.aliases,
            print_generic_format=self.args.print_op_generic,
            print_properties_as_attributes=self.args.print_no_properties,
            print_debuginfo=self.args.print_debuginfo,
            dialects=self.ctx.loaded_dialects,
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `presk-opt` console script."""

    def body() -> int:
        collect_less_often()
        report_plugin_failures()
        return PreskOptMain(args=argv).run()

    return run_guarded(body)


if __name__ == "__main__":
    sys.exit(main())
