"""`presk run/dump/launches/bench --pass-pipeline`, `-` for standard input, and one behaviour for
each of presk-opt's command-line inconsistencies (issue 14, faults 7 and 8).

The user's passes come from a plugin installed for the test (`plugin_fixtures`),
so these are the plugin passes the tutorial promises `presk` runs. The tools
run as lit runs them, forked from a warm server started with the plugin on
its path (`presk.testing.warm_server`); `test_cli.py` and
`test_plugin_loading.py` start them as processes of their own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugin_fixtures import install_test_plugin, run_tool, tool_environment
from presk.testing.warm_server import WarmServer

PROGRAM = """\
!T = !psk_core.tensor<[batch: 4, embed: 8]>
func.func @f(%x: !T) -> !T {
  %c = psk_core.constant 1.0 : !psk_core.real
  %y = psk_core.mul %x, %c : !T
  func.return %y : !T
}

func.func @g() -> !psk_core.real {
  %c = psk_core.constant 3.0 : !psk_core.real
  func.return %c : !psk_core.real
}
"""

FOLD = "--pass-pipeline=builtin.module(psk-mul-one,dce)"
"""The example plugin's pass (installed with presk, as `make test` does), then dce."""


_SERVERS: dict[Path, WarmServer] = {}
"""The warm server of each installed plugin's folder."""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("plugin")
    install_test_plugin(root)
    (root / "f.mlir").write_text(PROGRAM)
    server = WarmServer.start(tool_environment(root), str(Path(sys.executable).parent), ["presk", "presk-opt"])
    assert server is not None
    _SERVERS[root] = server
    yield root
    server.stop()


def _presk(plugin: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = run_tool("presk", *args, plugins=plugin, stdin=stdin, cwd=plugin, server=_SERVERS[plugin])
    assert "Traceback" not in result.stderr
    return result.returncode, result.stdout, result.stderr


# -- fault 7: presk runs plugin passes, before fusion and lowering ---------------------------


def test_run_applies_the_pipeline_before_running(plugin: Path) -> None:
    code, out, err = _presk(plugin, "run", "f.mlir", "--entry", "g")
    assert (code, out.splitlines()[-1]) == (0, "    3.0"), err
    code, out, err = _presk(plugin, "run", "f.mlir", "--entry", "g", "--pass-pipeline=builtin.module(test-double-constants)")
    assert (code, out.splitlines()[-1]) == (0, "    6.0"), err


def test_run_realized_and_on_kernels_sees_the_pipeline(plugin: Path) -> None:
    pipeline = "--pass-pipeline=builtin.module(test-double-constants)"
    for extra in (["--realize", "f32"], ["--backend", "kernel"]):
        code, out, err = _presk(plugin, "run", "f.mlir", "--entry", "g", pipeline, *extra)
        assert (code, out.splitlines()[-1]) == (0, "    6.0"), err


def test_dump_shows_the_program_after_the_pipeline(plugin: Path) -> None:
    code, out, err = _presk(plugin, "dump", "f.mlir", FOLD)
    assert code == 0, err
    assert "psk_core.mul" not in out and "func.return %x : !T" in out
    # Before fusion: the realize stage has no launch left for @f.
    code, out, err = _presk(plugin, "dump", "f.mlir", "--stage", "realize", FOLD)
    assert code == 0, err
    assert '"f/' not in out and "psk_core.mul" not in out


def test_launches_counts_the_program_after_the_pipeline(plugin: Path) -> None:
    code, before, err = _presk(plugin, "launches", "f.mlir", "--entry", "f")
    assert code == 0, err
    assert "| f | 1 | 1 | 0 % |" in before
    code, after, err = _presk(plugin, "launches", "f.mlir", "--entry", "f", FOLD)
    assert code == 0, err
    assert "| f | 0 | 0 | 0 % |" in after


def test_bench_applies_the_pipeline(plugin: Path) -> None:
    args = ["bench", "f.mlir", "--entry", "f", "--backend", "kernel", "--rounds", "1", "--warmup", "0"]
    code, out, err = _presk(plugin, *args)
    assert code == 0 and "1 launch," in out, err
    code, out, err = _presk(plugin, *args, FOLD)
    assert code == 0 and "0 launches" in out, err


@pytest.mark.parametrize("command", ["run", "dump", "launches", "bench"])
def test_a_failing_pass_is_reported_by_every_command(plugin: Path, command: str) -> None:
    extra = {"run": ["--entry", "f"], "bench": ["--entry", "f", "--backend", "kernel"]}.get(command, [])
    code, out, err = _presk(plugin, command, "f.mlir", *extra, "--pass-pipeline=builtin.module(test-refuse-module)")
    assert (code, out) == (1, "")
    assert err.strip() == "f.mlir: error: E3003: pass 'test-refuse-module' failed: nothing to fold in this module"


def test_a_pass_error_at_an_op_has_its_source_line(plugin: Path) -> None:
    code, _, err = _presk(plugin, "run", "f.mlir", "--entry", "f", "--pass-pipeline=builtin.module(test-refuse-mul)")
    assert code == 1
    assert err.splitlines() == [
        "f.mlir:4:3: error: E3003: cannot fold this product",
        "  %y = psk_core.mul %x, %c : !T",
        "  ^",
    ]


def test_pipeline_errors_come_before_the_input_is_read(plugin: Path) -> None:
    code, _, err = _presk(plugin, "run", "nope.mlir", "--entry", "f", "--pass-pipeline=builtin.module(no-such)")
    assert code == 1
    assert err.startswith("presk: error: E3001: unknown pass 'no-such'")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "-", "--entry", "g"], "    3.0"),
        (["dump", "-"], "  func.func @g() -> !psk_core.real {"),
        (["launches", "-", "--entry", "f"], "| f | 1 | 1 | 0 % |"),
        (["bench", "-", "--entry", "f", "--backend", "kernel", "--rounds", "1", "--warmup", "0"], "1 launch,"),
    ],
)
def test_dash_reads_standard_input(plugin: Path, args: list[str], expected: str) -> None:
    code, out, err = _presk(plugin, *args, stdin=PROGRAM)
    assert code == 0, err
    assert expected in out


def test_errors_in_standard_input_are_placed_in_stdin(plugin: Path) -> None:
    code, _, err = _presk(plugin, "run", "-", "--entry", "f", stdin=PROGRAM.replace("%x, %c", "%x, %zz"))
    assert code == 1
    assert err.startswith("<stdin>:4:")


# -- fault 8: one behaviour each, mlir-opt's where it has one ---------------------------------


def test_a_missing_file_reads_the_same_in_every_command(plugin: Path) -> None:
    expected = "presk: error: E0001: cannot open input file 'nope.mlir': no such file"
    opt = run_tool("presk-opt", "nope.mlir", plugins=plugin, cwd=plugin, server=_SERVERS[plugin])
    assert (opt.returncode, opt.stderr.strip()) == (1, expected)
    for command in (["run", "nope.mlir", "--entry", "f"], ["dump", "nope.mlir"], ["launches", "nope.mlir"]):
        assert _presk(plugin, *command)[::2] == (1, expected + "\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "cse", "-p", "dce"], "E3002: -p is given 2 times: give one pipeline"),
        (
            ["--pass-pipeline=builtin.module(cse)", "--pass-pipeline=builtin.module(dce)"],
            "E3002: --pass-pipeline is given 2 times: give one pipeline",
        ),
        (["-p", "cse", "--pass-pipeline=builtin.module(dce)"], "E3002: give the passes with either -p or --pass-pipeline, not both"),
        (
            ["--pass-pipeline=psk-mul-one"],
            "E3002: bad pass pipeline 'psk-mul-one': --pass-pipeline is anchored on the module: "
            "write 'builtin.module(psk-mul-one)'",
        ),
    ],
)
def test_pipelines_are_given_once_and_anchored(plugin: Path, args: list[str], message: str) -> None:
    result = run_tool("presk-opt", "f.mlir", *args, plugins=plugin, cwd=plugin, server=_SERVERS[plugin])
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.strip() == f"presk: error: {message}"


def test_presk_refuses_a_repeated_or_bare_pipeline_too(plugin: Path) -> None:
    twice = ["--pass-pipeline=builtin.module(cse)", "--pass-pipeline=builtin.module(dce)"]
    assert _presk(plugin, "dump", "f.mlir", *twice)[2].startswith("presk: error: E3002: --pass-pipeline is given 2 times")
    assert "anchored on the module" in _presk(plugin, "dump", "f.mlir", "--pass-pipeline=cse")[2]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("psk-fuse{max_nodes=x}", "option 'max-nodes' takes int, not 'x'; its options are max-nodes: int"),
        ("psk-fuse{max-nodes=x}", "option 'max-nodes' takes int, not 'x'; its options are max-nodes: int"),
        ("psk-fuse{max_node=1}", "it has no option 'max-node'; its options are max-nodes: int"),
        ("psk-bind{dim=1 const=2}", "it has no options 'dim', 'const'; its options are dims: str, consts: str"),
    ],
)
def test_option_names_are_dashed_in_every_message(plugin: Path, spec: str, message: str) -> None:
    result = run_tool("presk-opt", "f.mlir", "-p", spec, plugins=plugin, cwd=plugin, server=_SERVERS[plugin])
    assert result.returncode == 1
    name = spec.split("{")[0]
    assert result.stderr.strip() == f"presk: error: E3002: bad options for pass '{name}': {message}"
    assert "_" not in result.stderr.split("bad options")[1]
