"""One run of a presk tool, in a process forked from the warm server (`presk.testing.warm_server`).

lit runs it as `python -S warm_client.py TOOL_PATH ARGS...` wherever a RUN
line names a tool. It imports nothing but the standard library (and no
`site`), so it starts in a few milliseconds. It hands the server its
standard streams, its arguments, its working directory and its environment,
and exits with the status of the tool's run; a tool killed by a signal kills
the client with the same signal, so lit's `not --crash` sees a crash. When
the server cannot be reached, or declines a run whose `PYTHON*` variables
are not its own, the client runs TOOL_PATH itself.
"""

import array
import json
import os
import signal
import socket
import struct
import sys

SOCKET_VARIABLE = "PRESK_WARM_SOCKET"
"""Where the server listens; unset, every run is the tool's own process."""
OWN_PROCESS = -(1 << 30)
"""The status by which the server declines a run that needs a process of its own (`warm_server`)."""


def _run_the_tool_itself(argv: list[str]) -> None:
    os.execv(argv[0], argv)


def client_command(tool_path: str) -> list[str]:
    """The command that runs `tool_path` through this client (lit's substitution, the tests' runs)."""
    return [sys.executable, "-S", os.path.abspath(__file__), tool_path]


def receive_exactly(connection: socket.socket, size: int) -> bytes | None:
    """`size` bytes from `connection`, or None when it closes first."""
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> None:
    argv = sys.argv[1:]
    address = os.environ.get(SOCKET_VARIABLE)
    if not address:
        _run_the_tool_itself(argv)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(address)
    except OSError:
        _run_the_tool_itself(argv)
    request = {"tool": os.path.basename(argv[0]), "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    body = json.dumps(request).encode()
    streams = array.array("i", [0, 1, 2])
    connection.sendmsg([struct.pack("<Q", len(body)) + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, streams)])
    answer = receive_exactly(connection, 4)
    if answer is None:
        sys.exit(f"presk: error: the warm server ended during the run of {os.path.basename(argv[0])}")
    (status,) = struct.unpack("<i", answer)
    if status == OWN_PROCESS:
        _run_the_tool_itself(argv)
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
