"""An out-of-tree plugin's lit tests, found and run from its own folder (issue 14, fault 1).

`examples/plugin/tests/lit.cfg.py` is the two lines `docs/tutorial.md`
gives; `presk.testing.lit.configure` does the rest. lit is started in the
plugin's folder, as a plugin author starts it, not through presk's own
`lit.cfg.py`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugin"
LIT = Path(sys.executable).parent / "lit"


def _lit(folder: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [str(LIT), "-v", *args], cwd=folder, capture_output=True, text=True, timeout=600, check=False, env=env
    )


def test_lit_discovers_and_passes_the_plugin_tests_from_its_folder() -> None:
    tests = sorted(p.name for p in (PLUGIN / "tests").glob("*.mlir"))
    assert {"mul_one.mlir", "in_presk.mlir"} <= set(tests)
    result = _lit(PLUGIN, "tests")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in tests:
        assert f"PASS: presk-plugin-example :: {name}" in result.stdout
    assert f"Passed: {len(tests)}" in result.stdout


def _copy_suite(tmp_path: Path) -> Path:
    """The plugin's tests folder, copied where nothing else configures lit."""
    folder = tmp_path / "plugin"
    shutil.copytree(PLUGIN / "tests", folder / "tests", ignore=shutil.ignore_patterns("Output", ".lit_test_times.txt"))
    return folder


def test_a_failing_check_fails(tmp_path: Path) -> None:
    folder = _copy_suite(tmp_path)
    wrong = (PLUGIN / "tests" / "mul_one.mlir").read_text().replace("func.return %x : !T", "func.return %y : !T", 1)
    (folder / "tests" / "wrong.mlir").write_text(wrong)
    result = _lit(folder, "tests")
    assert result.returncode == 1
    assert "FAIL: presk-plugin-example :: wrong.mlir" in result.stdout


def test_inputs_folders_hold_no_tests(tmp_path: Path) -> None:
    folder = _copy_suite(tmp_path)
    (folder / "tests" / "Inputs").mkdir()
    (folder / "tests" / "Inputs" / "data.mlir").write_text("// RUN: false\n")
    result = _lit(folder, "tests")
    assert result.returncode == 0, result.stdout
    assert "data.mlir" not in result.stdout


def test_the_tools_are_the_environment_s_own(tmp_path: Path) -> None:
    """An impostor `presk-opt` first on PATH is not the one the RUN lines call."""
    folder = _copy_suite(tmp_path)
    impostor = tmp_path / "bin"
    impostor.mkdir()
    for tool in ("presk-opt", "presk", "filecheck"):
        script = impostor / tool
        script.write_text("#!/bin/sh\necho impostor >&2\nexit 3\n")
        script.chmod(0o755)
    result = _lit(folder, "tests", path=os.pathsep.join([str(impostor), os.environ.get("PATH", "")]))
    assert result.returncode == 0, result.stdout
    assert "impostor" not in result.stdout
