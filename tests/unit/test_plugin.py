"""The example plugin (examples/plugin) is installed and its pass runs in presk-opt."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points, version
from pathlib import Path

PROGRAM = """\
func.func @f(%x: !psk_core.tensor<[batch: 4, embed: 8]>) -> !psk_core.tensor<[batch: 4, embed: 8]> {
  %c = psk_core.constant 1.0 : !psk_core.real
  %y = psk_core.mul %x, %c : !psk_core.tensor<[batch: 4, embed: 8]>
  func.return %y : !psk_core.tensor<[batch: 4, embed: 8]>
}
"""


def test_plugin_is_installed_and_registered() -> None:
    assert version("presk-plugin-example")
    names = {ep.name for ep in entry_points(group="xdsl.universe")}
    assert {"presk", "presk-plugin-example"} <= names


def test_presk_opt_runs_the_plugin_pass() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "presk-opt"), "-", "-p", "psk-mul-one,dce"],
        input=PROGRAM,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "psk_core.mul" not in result.stdout and "psk_core.constant" not in result.stdout
    assert "func.return %x : !psk_core.tensor<[batch: 4, embed: 8]>" in result.stdout
