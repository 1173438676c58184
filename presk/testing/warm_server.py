"""A warm start for presk's tools under lit: their libraries imported once, one fork per run.

lit starts `presk-opt`, `presk` and `filecheck` some three hundred times in
presk's own suite, and a `presk-opt` started afresh costs about 0.4 s of CPU,
most of it importing xDSL, numpy and llvmlite before it reads a line; forked
from this server, 0.15 s (lit's whole suite: 237 CPU-seconds against 100,
docs/performance.md). `presk.testing.lit.configure` starts this server once
per lit run, and the word lit substitutes for each tool is `warm_client.py`,
which hands the server one run. A forked child then runs the tool's console entry point with
the client's arguments, working directory, environment and standard streams
(passed as file descriptors, so pipes, redirections and `2>&1` behave as
they do for a process of its own), and the client exits with its status.

What the child shares with the server, and why that is safe:
- Only third-party modules are imported before the fork (`PRELOADED`), and
  of presk only the empty packages that hold this server and its client,
  never a plugin. presk reads its environment (`PRESK_TARGET`,
  `PRESK_DEBUG`, the installed plugins) when it is imported and run, so each
  child imports presk afresh under the environment of its RUN line, as a
  new process would.
- The server is started with the environment lit gives its tools, from the
  folder of the tools' scripts, so the child's Python flags (buffering of
  its output) and its `sys.path` are those of the tool's own process.
- numpy's global random state is seeded again in each child, as a new process
  seeds it; Python's `random` does so itself after a fork.

The server ends with the process that started it (it polls its parent) and
removes its socket.
"""

from __future__ import annotations

import array
import importlib
import io
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from presk.testing.warm_client import OWN_PROCESS, receive_exactly

READY = "ready"
"""The line the server prints once it listens."""

PRELOADED: tuple[str, ...] = (
    "argparse",
    "decimal",
    "difflib",
    "fractions",
    "json",
    "subprocess",
    "tempfile",
    "immutabledict",
    "numpy",
    "ml_dtypes",
    "llvmlite.ir",
    "llvmlite.binding",
    "xdsl.builder",
    "xdsl.context",
    "xdsl.dialects.arith",
    "xdsl.dialects.builtin",
    "xdsl.dialects.func",
    "xdsl.dialects.math",
    "xdsl.dialects.memref",
    "xdsl.dialects.scf",
    "xdsl.dialects.vector",
    "xdsl.folder",
    "xdsl.interpreter",
    "xdsl.irdl.declarative_assembly_format_parser",
    "xdsl.parser",
    "xdsl.passes",
    "xdsl.pattern_rewriter",
    "xdsl.printer",
    "xdsl.rewriter",
    "xdsl.tools.command_line_tool",
    "xdsl.transforms.common_subexpression_elimination",
    "xdsl.transforms.dead_code_elimination",
    "xdsl.xdsl_opt_main",
    "filecheck.main",
)
"""What presk's tools import that is not presk's: imported once, by the server.

A module missing here costs its import in each run, nothing else; one that
is not installed is skipped."""


def _receive_request(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The client's run (tool, argv, cwd, env) and its three standard streams' descriptors."""
    fds = array.array("i")
    header, ancillary, _flags, _address = connection.recvmsg(8, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    (size,) = struct.unpack("<Q", header)
    body = receive_exactly(connection, size)
    if body is None:
        raise ConnectionError("the client closed the connection")
    return json.loads(body), list(fds)


def _own_process_needed(request: dict[str, Any]) -> bool:
    """Whether the run needs a Python started afresh: its `PYTHON*` variables (a `PYTHONPATH` of its own, say)
    are not the server's, and they act when the interpreter starts, before any fork could apply them."""
    python = {k: v for k, v in request["env"].items() if k.startswith("PYTHON")}
    return python != {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}


_SERVER_STREAMS: list[io.TextIOWrapper] = []
"""The server's own `sys.std*` in a child: kept referenced, or collecting them would close the client's streams."""


def _fresh_standard_streams() -> None:
    """`sys.stdin`, `sys.stdout` and `sys.stderr` built over descriptors 0, 1 and 2 as a new interpreter builds
    them (CPython's `create_stdio`): the server's were made for its own descriptors (/dev/null is seekable, a
    pipe is not, and a tool that reconfigures its input, as filecheck does, would seek a pipe)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        _SERVER_STREAMS.append(old)
        unbuffered = fd != 0 and old.write_through  # -u or PYTHONUNBUFFERED, as the server was started
        binary = io.open(fd, "rb" if fd == 0 else "wb", buffering=0 if unbuffered else -1, closefd=False)
        stream = io.TextIOWrapper(
            binary, encoding=old.encoding, errors=old.errors, newline="\n",
            line_buffering=not unbuffered and fd != 0 and (fd == 2 or os.isatty(fd)), write_through=unbuffered,
        )  # fmt: skip
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_tool(request: dict[str, Any], fds: list[int], tools: dict[str, EntryPoint]) -> int:
    """In the forked child: become the client's process, then run its tool's entry point; its exit code."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    _fresh_standard_streams()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    tool = request["tool"]
    entry = tools.get(tool)
    if entry is None:
        (entry,) = entry_points(group="console_scripts", name=tool)
    try:
        code = entry.load()()
    except SystemExit as exit_:
        code = exit_.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # `sys.exit("message")`, as the interpreter would print it
    return 1


def _serve_one(connection: socket.socket, tools: dict[str, EntryPoint]) -> None:
    """In a child of the server: fork the tool's process, wait for it, send the client its status.

    The status is `os.waitstatus_to_exitcode`'s: the exit code, or minus the
    signal that killed the tool (a crash of native code), which the client
    raises on itself.
    """
    request, fds = _receive_request(connection)
    if _own_process_needed(request):
        connection.sendall(struct.pack("<i", OWN_PROCESS))
        return
    tool = os.fork()
    if tool == 0:
        connection.close()
        code = 1
        try:
            code = _run_tool(request, fds, tools)
        except BaseException:  # what the interpreter prints when a tool's process dies of an exception
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code & 0xFF)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(tool, 0)
    connection.sendall(struct.pack("<i", os.waitstatus_to_exitcode(status)))


def _end(_signal: int, _frame: object) -> None:
    sys.exit(0)


def serve(address: str, tool_names: list[str]) -> None:
    """Import `PRELOADED`, listen on the Unix socket `address`, fork a child per connection."""
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    tools = {ep.name: ep for ep in entry_points(group="console_scripts") if ep.name in tool_names}
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the serving children are reaped by the kernel
    signal.signal(signal.SIGTERM, _end)  # a `kill` too removes the socket (the `finally` below)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    try:
        print(READY, flush=True)  # inside the `try`: a SIGTERM right after it still removes the socket
        while os.getppid() == parent:
            if not select.select([listener], [], [], 1.0)[0]:
                continue
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this child waits for its tool
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # and it and its tool die of a kill, as a process does
                try:
                    _serve_one(connection, tools)
                finally:
                    os._exit(0)
            connection.close()
    finally:
        listener.close()
        os.unlink(address)
        try:
            os.rmdir(os.path.dirname(address))  # `WarmServer.start`'s own folder; another is left as it is
        except OSError:
            pass


@dataclass
class WarmServer:
    """A running server: where it listens, and its process."""

    address: str
    process: subprocess.Popen[str]

    @classmethod
    def start(cls, environment: dict[str, str], tool_dir: str, tools: list[str]) -> WarmServer | None:
        """Start a server for `tools` (console script names) and wait until it listens; None if it dies first.

        It runs with `environment`, the one its runs' RUN lines get, and from
        `tool_dir`, the tools' scripts' folder, so a forked run has the Python
        flags and the `sys.path` of the tool's own process.
        """
        address = os.path.join(tempfile.mkdtemp(prefix="presk-warm-"), "socket")
        process = subprocess.Popen(
            [sys.executable, "-m", "presk.testing.warm_server", address, *tools],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=tool_dir, env=environment, text=True,
        )  # fmt: skip
        server = cls(address, process)
        assert process.stdout is not None
        if process.stdout.readline().strip() != READY:  # an empty line: it died
            server.stop()
            return None
        return server

    def stop(self) -> None:
        """End the server and remove its socket's folder."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        folder = os.path.dirname(self.address)
        for path, remove in ((self.address, os.unlink), (folder, os.rmdir)):
            try:
                remove(path)
            except OSError:
                pass


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
