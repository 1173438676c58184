"""lit for a project outside presk: one call in its `lit.cfg.py` sets up presk's test tools.

A plugin's tests folder needs a `lit.cfg.py` to be a lit test suite. With
this helper, the whole file is

    from presk.testing.lit import configure

    configure(config, name="my-plugin")

and `lit -sv tests` (or `lit tests/my_test.mlir`), run from the plugin's
folder in the environment where presk and the plugin are installed, finds
every `.mlir` test under `tests/` and runs its RUN lines. `presk-opt`,
`presk` and `filecheck` in those lines are the ones of the Python
environment that runs lit (never another installation that happens to be
earlier on PATH), and that environment's `bin` folder is first on the
tests' PATH, so `python` and `not` resolve there too.

The configuration is the one presk's own suite uses: `ShTest` with lit's
internal shell, `.mlir` tests, `Inputs` folders excluded (they hold files
the tests read, not tests), and the variables presk reads (`PRESK_TARGET`,
`PRESK_CACHE_DIR`, `PRESK_DEBUG`, ...) passed through.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterable
from typing import Any

from presk.testing.warm_client import SOCKET_VARIABLE, client_command

TOOLS: tuple[str, ...] = ("presk-opt", "presk", "filecheck")
"""The tools a RUN line names, substituted by their path in lit's environment."""

PASSED_ENVIRONMENT: tuple[str, ...] = (
    "PRESK_DEBUG",
    "PRESK_TARGET",
    "PRESK_THREADS",
    "PRESK_CACHE_DIR",
    "PRESK_COMPILE_JOBS",
    "HOME",
    "TMPDIR",
)
"""Variables the tests see as the caller set them (lit clears the rest)."""

WARM_VARIABLE = "PRESK_LIT_WARM"
"""`0` runs every tool as a process of its own instead of forking it from the warm server."""


def tool_pattern(tool: str) -> str:
    """The regular expression that finds `tool` as a word of a RUN line, not inside a path or a name."""
    return rf"(?<![\w/.-]){tool}(?![\w.-])"


def configure(
    config: Any,
    *,
    name: str,
    suffixes: Iterable[str] = (".mlir",),
    excludes: Iterable[str] = ("Inputs",),
    tools: Iterable[str] = TOOLS,
    exec_root: str | None = None,
) -> None:
    """Make `config` (lit's `TestingConfig`, the `config` a `lit.cfg.py` is given) a presk test suite.

    The suite's source root is left to lit, which takes the folder of the
    `lit.cfg.py`; `exec_root` is where lit writes its temporary files
    (`%t`), by default an `Output` folder beside each test.
    """
    import lit.formats

    config.name = name
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = list(suffixes)
    config.excludes = [*getattr(config, "excludes", []), *excludes]
    if exec_root is not None:
        config.test_exec_root = exec_root
    tool_dir = os.path.dirname(sys.executable)
    config.environment["PATH"] = os.pathsep.join([tool_dir, os.environ.get("PATH", "")])
    for variable in PASSED_ENVIRONMENT:
        if variable in os.environ:
            config.environment[variable] = os.environ[variable]
    tools = list(tools)
    warm = os.environ.get(WARM_VARIABLE, "1") != "0" and _start_warm_server(config, tool_dir, tools)
    for tool in tools:
        path = os.path.join(tool_dir, tool)
        config.substitutions.append((tool_pattern(tool), " ".join(client_command(path)) if warm else path))


def _start_warm_server(config: Any, tool_dir: str, tools: list[str]) -> bool:
    """Start the warm server for this lit run, stopped when lit exits; False if it does not come up."""
    from presk.testing.warm_server import WarmServer

    server = WarmServer.start(dict(config.environment), tool_dir, tools)
    if server is None:
        return False
    atexit.register(server.stop)
    config.environment[SOCKET_VARIABLE] = server.address
    return True
