"""The warm start of presk's tools under lit (`presk.testing.warm_server`, `warm_client.py`).

A run through the client must be the tool's own run: the same output on
each stream, the same exit code, under the run's environment and working
folder, whatever the server's; a run the server cannot serve is the tool's
own process. lit's use of it is tested end to end by `test_plugin_lit`
(and by the whole of `make test`'s lit suite).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plugin_fixtures import install_test_plugin
from presk.testing import lit
from presk.testing.warm_client import OWN_PROCESS, SOCKET_VARIABLE, client_command, receive_exactly
from presk.testing.warm_server import WarmServer

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MLP = ROOT / "corpus" / "mlp.mlir"
CLIENT = ROOT / "presk" / "testing" / "warm_client.py"
CHECKS = "// CHECK: one\n// CHECK-NEXT: two\n"
"""filecheck's checks (`{checks}` in an argv): filecheck re-encodes its standard input, which must be the pipe's."""


@pytest.fixture(scope="module")
def server() -> Iterator[WarmServer]:
    started = WarmServer.start(dict(os.environ), str(BIN), ["presk-opt", "presk", "filecheck"])
    assert started is not None
    yield started
    started.stop()


def run(argv: list[str], address: str | None, stdin: str = "", cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`argv` through the client when `address` is given, else as the tool's own process."""
    environment = {**os.environ, **(env or {})}
    environment.pop(SOCKET_VARIABLE, None)
    command = [str(BIN / argv[0]), *argv[1:]]
    if address is not None:
        environment[SOCKET_VARIABLE] = address
        command = [*client_command(command[0]), *command[1:]]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd, env=environment,
                          timeout=120, check=False)  # fmt: skip


def outcome(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "argv, stdin",
    [
        (["presk-opt", str(MLP)], ""),
        (["presk-opt", "-"], MLP.read_text()),
        (["presk-opt", "-", "-p", "no-such-pass"], MLP.read_text()),
        (["presk-opt", "/no/such/file.mlir"], ""),
        (["presk-opt", "-"], "func.func @f(%a: i32) -> i32 {\n  func.return %b : i32\n}\n"),
        (["presk", "run", str(MLP), "--entry", "mse", "--dim", "B=2"], ""),
        (["filecheck", "{checks}"], "one\ntwo\n"),
        (["filecheck", "{checks}"], "one\nthree\n"),
    ],
    ids=["file", "stdin", "unknown-pass", "missing-file", "undefined-value", "presk-run", "filecheck", "filecheck-fails"],
)
def test_a_run_through_the_server_is_the_tool_s_own_run(server: WarmServer, argv: list[str], stdin: str,
                                                        tmp_path: Path) -> None:  # fmt: skip
    (tmp_path / "checks.txt").write_text(CHECKS)
    argv = [arg.replace("{checks}", str(tmp_path / "checks.txt")) for arg in argv]
    own = outcome(run(argv, None, stdin))
    assert outcome(run(argv, server.address, stdin)) == own


def test_a_run_takes_its_environment_and_working_folder_not_the_server_s(server: WarmServer, tmp_path: Path) -> None:
    (tmp_path / "m.mlir").write_text(MLP.read_text())
    argv = ["presk", "dump", "m.mlir", "--stage", "llvm", "--entry", "mse", "--dim", "B=2"]
    bogus = run(argv, server.address, cwd=tmp_path, env={"PRESK_TARGET": "bogus"})
    assert bogus.returncode == 1 and "E4005: unknown target 'bogus'" in bogus.stderr
    good = run(argv, server.address, cwd=tmp_path)
    assert good.returncode == 0 and "define void @" in good.stdout, good.stderr


def test_a_run_with_python_variables_of_its_own_is_the_tool_s_own_process(server: WarmServer, tmp_path: Path) -> None:
    """A `PYTHONPATH` acts when an interpreter starts: the server declines, and the client runs the tool itself,
    so the plugin on that path is found."""
    install_test_plugin(tmp_path / "plugins")
    argv = ["presk-opt", str(MLP), "-p", "test-double-constants"]
    assert run(argv, server.address).returncode != 0  # the server's environment has no such plugin
    own = run(argv, None, env={"PYTHONPATH": str(tmp_path / "plugins")})
    assert own.returncode == 0, own.stderr
    assert outcome(run(argv, server.address, env={"PYTHONPATH": str(tmp_path / "plugins")})) == outcome(own)


def test_without_a_server_the_client_runs_the_tool_itself(tmp_path: Path) -> None:
    own = outcome(run(["presk-opt", str(MLP)], None))
    assert outcome(run(["presk-opt", str(MLP)], str(tmp_path / "no-socket"))) == own
    assert own[0] == 0


def _answer_once(listener: socket.socket, status: int | None) -> None:
    """Take one run and answer `status`, or close without answering when it is None."""
    connection, _ = listener.accept()
    with connection:
        header, ancillary, _flags, _address = connection.recvmsg(8, socket.CMSG_SPACE(12))
        for _level, _kind, data in ancillary:  # the client's streams: held open, its caller would wait for them
            for fd in struct.unpack(f"<{len(data) // 4}i", data[: len(data) // 4 * 4]):
                os.close(fd)
        (size,) = struct.unpack("<Q", header)
        body = receive_exactly(connection, size)
        assert body is not None and json.loads(body)["tool"] == "presk-opt"
        if status is not None:
            connection.sendall(struct.pack("<i", status))


def _run_against_a_fake_server(tmp_path: Path, status: int | None) -> subprocess.CompletedProcess[str]:
    """`presk-opt` on the MLP through the client, against a server that answers `status` (`_answer_once`)."""
    address = str(tmp_path / "socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(address)
        listener.listen(1)
        answering = threading.Thread(target=_answer_once, args=(listener, status))
        answering.start()
        done = run(["presk-opt", str(MLP)], address)
        answering.join(timeout=60)
    return done


@pytest.mark.parametrize("status", [-signal.SIGSEGV, OWN_PROCESS, 3])
def test_the_client_takes_the_status_the_server_sends(tmp_path: Path, status: int) -> None:
    """A tool killed by a signal kills the client with it (lit's `not --crash`); the server's refusal
    makes the client run the tool itself; an exit code is the client's."""
    done = _run_against_a_fake_server(tmp_path, status)
    if status == OWN_PROCESS:
        assert outcome(done) == outcome(run(["presk-opt", str(MLP)], None))
    else:
        assert done.returncode == status and done.stdout == ""


def test_a_server_ending_during_a_run_is_one_error_line(tmp_path: Path) -> None:
    done = _run_against_a_fake_server(tmp_path, None)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "presk: error: the warm server ended during the run of presk-opt\n"


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_server_ends_and_removes_its_socket(how: str) -> None:
    """By `stop`, or by a plain `kill` (SIGTERM) from outside, which leaves its folder to the server alone."""
    started = WarmServer.start(dict(os.environ), str(BIN), ["presk-opt"])
    assert started is not None and os.path.exists(started.address)
    if how == "stop":
        started.stop()
    else:
        started.process.send_signal(signal.SIGTERM)
        started.process.wait(timeout=30)
        assert started.process.returncode == 0  # it ended through its `finally`, not killed by the signal
        assert started.process.stdout is not None
        started.process.stdout.close()
    assert started.process.poll() is not None
    assert not os.path.exists(os.path.dirname(started.address))


def test_the_server_ends_with_the_process_that_started_it() -> None:
    """lit killed outright runs no `atexit`: the server sees its parent gone and ends, removing its socket."""
    starter = (
        "import os, sys\n"
        "from presk.testing.warm_server import WarmServer\n"
        f"server = WarmServer.start(dict(os.environ), {str(BIN)!r}, ['presk-opt'])\n"
        "print(server.process.pid, server.address, flush=True)\n"
        "os._exit(0)\n"
    )
    # The server writes its errors to the starter's stderr: not captured, or run() would wait for the server too.
    done = subprocess.run([sys.executable, "-c", starter], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, timeout=120, check=True)  # fmt: skip
    pid, address = done.stdout.split()
    deadline = time.monotonic() + 30
    while (_alive(int(pid)) or os.path.exists(os.path.dirname(address))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid)) and not os.path.exists(os.path.dirname(address))


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting for init to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class _Config:
    """What `configure` reads and writes of lit's `TestingConfig`."""

    def __init__(self) -> None:
        self.environment: dict[str, str] = {"PATH": os.environ["PATH"]}
        self.substitutions: list[tuple[str, str]] = []
        self.excludes: list[str] = []


@pytest.mark.parametrize("warm", ["1", "0"])
def test_lit_s_tools_are_the_client_unless_turned_off(monkeypatch: pytest.MonkeyPatch, warm: str) -> None:
    stops: list[Any] = []
    monkeypatch.setattr(atexit, "register", stops.append)
    monkeypatch.setenv(lit.WARM_VARIABLE, warm)
    config = _Config()
    lit.configure(config, name="warm")
    try:
        tools = dict(config.substitutions)
        opt = tools[lit.tool_pattern("presk-opt")]
        if warm == "1":
            assert opt == f"{sys.executable} -S {CLIENT} {BIN / 'presk-opt'}"
            assert os.path.exists(config.environment[SOCKET_VARIABLE]) and len(stops) == 1
        else:
            assert opt == str(BIN / "presk-opt") and SOCKET_VARIABLE not in config.environment and not stops
    finally:
        for stop in stops:
            stop()
