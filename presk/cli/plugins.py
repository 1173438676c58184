"""Plugins that failed to load, reported once per command.

`presk.universe.load_multiverse` skips a broken plugin so that commands
which do not need it keep working; this module tells the user, once, on
standard error, which distribution and entry point was skipped and why
(`presk.cli.pipeline` repeats the reason in an E3001 for a pass no loaded
universe defines).
"""

from __future__ import annotations

import sys

from presk.universe import load_multiverse

_reported = False


def report_plugin_failures() -> None:
    """Print one warning per plugin that failed to load; only the first call prints."""
    global _reported
    if _reported:
        return
    _reported = True
    for failure in load_multiverse().failures:
        print(f"presk: warning: {failure.describe()}; it is skipped", file=sys.stderr)
