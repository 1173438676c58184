"""The outermost layer of every presk command: no traceback reaches a user.

SIGTERM ends a command as Ctrl-C does (`Terminated`), with exit 143.
A `PreskError` is the user's problem and is printed as a diagnostic (exit
1), and so is running out of memory (E4006: the sizes asked for more than
the machine has); anything else is presk's problem and is reported as an
internal error (exit 70, EX_SOFTWARE) with the traceback only when
`PRESK_DEBUG=1`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from presk.diagnostics import PlanWarning, PreskError

EXIT_ERROR = 1
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (a `kill`, a batch system's time limit), raised where the command is, as Ctrl-C's interrupt is:
    a long run stops as an interrupted one does, its `finally` blocks run (a Ray cluster is shut down, the
    results file closed: everything measured so far is in it) and it exits 143, as a killed process would."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


def run_guarded(body: Callable[[], int]) -> int:
    """Run a command's body and turn every way it can fail into an exit code.

    presk's own warnings (`PlanWarning`) are printed as `presk: warning: ...`,
    once each, instead of Python's file-and-line form.
    """
    main_thread = threading.current_thread() is threading.main_thread()  # only it may set a signal's handler
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default", PlanWarning)
            warnings.showwarning = _show_warning
            return body()
    except PreskError as error:
        _report(error.format())
        return EXIT_ERROR
    except SystemExit:  # argparse's usage errors and --help: already reported
        raise
    except Terminated:
        _report("presk: terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _report("presk: interrupted")
        return EXIT_INTERRUPTED
    except MemoryError as error:  # the user's sizes, not a bug: say what ran out
        _report(f"presk: error: E4006: out of memory: {error or 'an allocation failed'}\n"
                "presk: note: smaller --dim sizes need less; the arguments alone are checked before anything runs")
        return EXIT_ERROR
    except BrokenPipeError:  # `presk-opt f.mlir | head`: the reader went away
        _silence_stdout()
        return EXIT_ERROR
    except BaseException as error:  # noqa: BLE001 - xDSL raises BaseExceptions too
        if os.environ.get("PRESK_DEBUG") == "1":
            traceback.print_exc()
        _report(
            f"presk: internal error: {type(error).__name__}: {error}\n"
            "presk: note: this is a bug in presk or a plugin; rerun with PRESK_DEBUG=1 for a traceback"
        )
        return EXIT_INTERNAL
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, *rest: object) -> None:
    if issubclass(category, PlanWarning):
        _report(f"presk: warning: {message}")
    else:
        _report(warnings.formatwarning(message, category, filename, lineno).rstrip("\n"))


def _report(text: str) -> None:
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _silence_stdout()
    print(text, file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (e.g. captured in tests)
        pass
