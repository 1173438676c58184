"""Plugins installed for one test: a folder on PYTHONPATH holding a package and its `.dist-info`.

`importlib.metadata` finds a distribution by its `.dist-info` folder on
`sys.path`, entry points included, so a subprocess started with this folder
on PYTHONPATH sees the plugin exactly as if `pip install` had put it there,
without touching the shared environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from presk.testing.warm_client import SOCKET_VARIABLE, client_command
from presk.testing.warm_server import WarmServer

BIN = Path(sys.executable).parent


def install_plugin(root: Path, distribution: str, package: str, modules: dict[str, str], entry_points: dict[str, str]) -> None:
    """Write `package` (its modules' sources) and a `.dist-info` declaring `entry_points` under `root`."""
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    for module, source in modules.items():
        (root / package / f"{module}.py").write_text(source)
    info = root / f"{distribution.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[xdsl.universe]\n{lines}")


def tool_environment(plugins: Path | None = None) -> dict[str, str]:
    """This process's environment, with `plugins` first on PYTHONPATH."""
    env = dict(os.environ)
    if plugins is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(plugins), env.get("PYTHONPATH", "")])
    return env


def run_tool(tool: str, *args: str, plugins: Path | None = None, stdin: str | None = None, cwd: Path | None = None,
             server: WarmServer | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run `presk` or `presk-opt` of this environment, with `plugins` on PYTHONPATH.

    With `server` (started with `tool_environment(plugins)`), the run is a
    process forked from it, as lit runs the tools (`presk.testing.warm_server`):
    the same entry point, arguments, streams and environment, without
    importing xDSL again.
    """
    env = tool_environment(plugins)
    command = [str(BIN / tool), *args]
    if server is not None:
        env[SOCKET_VARIABLE] = server.address
        command = [*client_command(str(BIN / tool)), *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=300, check=False, env=env,
                          cwd=cwd)  # fmt: skip


PASSES_SOURCE = '''\
"""Passes of the test plugin: one with an effect a run shows, two that refuse."""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from presk.dialects.psk_core import ConstantOp, MulOp
from presk.ir.locations import error_at


@dataclass(frozen=True)
class DoubleConstants(ModulePass):
    name = "test-double-constants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for constant in [o for o in op.walk() if isinstance(o, ConstantOp)]:
            Rewriter.replace_op(constant, ConstantOp(2 * constant.number))


@dataclass(frozen=True)
class RefuseModule(ModulePass):
    name = "test-refuse-module"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise error_at(op, "E3003", "nothing to fold in this module")


@dataclass(frozen=True)
class RefuseMul(ModulePass):
    name = "test-refuse-mul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        mul = next(o for o in op.walk() if isinstance(o, MulOp))
        raise error_at(mul, "E3003", "cannot fold this product")
'''

UNIVERSE_SOURCE = '''\
from xdsl.universe import Universe


def _get(name):
    def load():
        from test_plugin import passes

        return getattr(passes, name)

    return load


UNIVERSE = Universe(
    all_passes={
        "test-double-constants": _get("DoubleConstants"),
        "test-refuse-module": _get("RefuseModule"),
        "test-refuse-mul": _get("RefuseMul"),
    }
)
'''


def install_test_plugin(root: Path) -> Path:
    """A working plugin, `test-plugin`, with the passes of `PASSES_SOURCE`; returns `root`."""
    install_plugin(root, "test-plugin", "test_plugin", {"passes": PASSES_SOURCE, "universe": UNIVERSE_SOURCE},
                   {"test-plugin": "test_plugin.universe:UNIVERSE"})  # fmt: skip
    return root
