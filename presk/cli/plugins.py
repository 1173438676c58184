"""Plugins that failed to load: reported once per command, and blamed when their pass is named.

`presk.universe.load_multiverse` skips a broken plugin so that commands
which do not need it keep working; this module tells the user, once, on
standard error, which distribution and entry point was skipped and why, and
gives `presk.cli.pipeline` the text to add to an E3001 for a pass no loaded
universe defines.
"""

from __future__ import annotations

import sys

from presk.universe import PluginFailure, load_multiverse

_reported = False


def report_plugin_failures() -> None:
    """Print one warning per plugin that failed to load; only the first call prints."""
    global _reported
    if _reported:
        return
    _reported = True
    for failure in load_multiverse().failures:
        print(f"presk: warning: {failure.describe()}; it is skipped", file=sys.stderr)


def failures() -> tuple[PluginFailure, ...]:
    return load_multiverse().failures


def failure_hint() -> str:
    """`; plugin 'x' (...) could not be loaded: ...` for each broken plugin, or ''."""
    return "".join(f"; {failure.describe()}" for failure in failures())
