"""A plugin that fails to load is reported once, by name, and skipped (issue 14, fault 6).

Each case installs a plugin for one subprocess (`plugin_fixtures`): one
whose universe module raises on import, one whose entry point names a
missing attribute, one that names something other than a Universe, and one
whose pass factory raises. Commands that do not need the plugin keep
working, `--help` included; a pipeline naming its pass is an E3001 that
gives the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plugin_fixtures import install_plugin, run_tool

PROGRAM = """\
func.func @f(%x: !psk_core.real) -> !psk_core.real {
  func.return %x : !psk_core.real
}
"""

RAISES = 'raise RuntimeError("the plugin is broken")\n'
WARNING = (
    "presk: warning: plugin 'broken-plugin' (entry point 'broken = broken_plugin.universe:UNIVERSE') "
    "could not be loaded: {reason}; it is skipped"
)


@pytest.fixture
def raising(tmp_path: Path) -> Path:
    install_plugin(tmp_path, "broken-plugin", "broken_plugin", {"universe": RAISES},
                   {"broken": "broken_plugin.universe:UNIVERSE"})  # fmt: skip
    return tmp_path


def _program(tmp_path: Path) -> Path:
    path = tmp_path / "f.mlir"
    path.write_text(PROGRAM)
    return path


def test_a_plain_parse_works_and_the_plugin_is_reported_once(raising: Path) -> None:
    result = run_tool("presk-opt", str(_program(raising)), plugins=raising)
    assert result.returncode == 0, result.stderr
    assert "func.return %x" in result.stdout
    assert result.stderr.splitlines() == [WARNING.format(reason="RuntimeError: the plugin is broken")]


def test_help_works(raising: Path) -> None:
    for tool in ("presk-opt", "presk"):
        result = run_tool(tool, "--help", plugins=raising)
        assert result.returncode == 0, result.stderr
        assert "usage:" in result.stdout
        assert result.stderr.count("presk: warning: plugin 'broken-plugin'") == 1


def test_other_passes_and_presk_run_work(raising: Path) -> None:
    source = _program(raising)
    opt = run_tool("presk-opt", str(source), "-p", "psk-mul-one,cse", plugins=raising)
    assert opt.returncode == 0, opt.stderr
    run = run_tool("presk", "run", str(source), "--entry", "f", plugins=raising)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("@f (numpy f64):")
    assert run.stderr.count("warning") == 1


def test_a_pipeline_naming_its_pass_is_e3001_with_the_reason(raising: Path) -> None:
    for tool, args in (("presk-opt", ["-p", "psk-broken"]), ("presk", ["run", "--entry", "f",
                                                                       "--pass-pipeline=builtin.module(psk-broken)"])):  # fmt: skip
        argv = [*args, str(_program(raising))] if tool == "presk-opt" else [args[0], str(_program(raising)), *args[1:]]
        result = run_tool(tool, *argv, plugins=raising)
        assert result.returncode == 1
        error = result.stderr.splitlines()[-1]
        assert error.startswith("presk: error: E3001: unknown pass 'psk-broken'")
        assert (
            "it may be a pass of plugin 'broken-plugin' (entry point 'broken = broken_plugin.universe:UNIVERSE'), "
            "which could not be loaded: RuntimeError: the plugin is broken"
        ) in error
        assert "Traceback" not in result.stderr


def test_a_missing_attribute_is_named(tmp_path: Path) -> None:
    install_plugin(tmp_path, "broken-plugin", "broken_plugin", {"universe": "OTHER = 1\n"},
                   {"broken": "broken_plugin.universe:UNIVERSE"})  # fmt: skip
    result = run_tool("presk-opt", str(_program(tmp_path)), plugins=tmp_path)
    assert result.returncode == 0, result.stderr
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(WARNING.format(reason="AttributeError: ").removesuffix("; it is skipped"))
    assert "UNIVERSE" in warning


def test_an_entry_point_that_is_not_a_universe_is_named(tmp_path: Path) -> None:
    install_plugin(tmp_path, "broken-plugin", "broken_plugin", {"universe": "UNIVERSE = {'passes': 1}\n"},
                   {"broken": "broken_plugin.universe:UNIVERSE"})  # fmt: skip
    result = run_tool("presk-opt", str(_program(tmp_path)), plugins=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [WARNING.format(reason="it names a dict, not an xdsl.universe.Universe")]


def test_a_name_clash_skips_the_later_plugin(tmp_path: Path) -> None:
    universe = (
        "from xdsl.universe import Universe\n"
        "from xdsl.transforms import get_all_passes\n"
        "UNIVERSE = Universe(all_passes={'cse': get_all_passes()['cse']})\n"
    )
    install_plugin(tmp_path, "broken-plugin", "broken_plugin", {"universe": universe},
                   {"broken": "broken_plugin.universe:UNIVERSE"})  # fmt: skip
    result = run_tool("presk-opt", str(_program(tmp_path)), "-p", "cse", plugins=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [WARNING.format(reason="it defines the pass 'cse', which 'xdsl' defines too")]


def test_a_pass_factory_that_raises_is_e3001_naming_the_plugin(tmp_path: Path) -> None:
    universe = (
        "from xdsl.universe import Universe\n"
        "def load():\n"
        "    raise ValueError('no such thing')\n"
        "UNIVERSE = Universe(all_passes={'psk-half': load})\n"
    )
    install_plugin(tmp_path, "half-plugin", "half_plugin", {"universe": universe},
                   {"half": "half_plugin.universe:UNIVERSE"})  # fmt: skip
    ok = run_tool("presk-opt", str(_program(tmp_path)), plugins=tmp_path)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    result = run_tool("presk-opt", str(_program(tmp_path)), "-p", "psk-half", plugins=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "presk: error: E3001: pass 'psk-half' (plugin 'half-plugin') is registered but could not be loaded: "
        "ValueError: no such thing"
    )
