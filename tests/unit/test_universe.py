"""presk's universe: registered under `xdsl.universe`, with lazy factories."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

from xdsl.universe import Universe

from presk.universe import PRESK_UNIVERSE


def test_entry_point_resolves_to_the_universe() -> None:
    (entry,) = [ep for ep in entry_points(group="xdsl.universe") if ep.name == "presk"]
    assert entry.load() is PRESK_UNIVERSE


def test_presk_names_are_in_the_multiverse() -> None:
    multiverse = Universe.get_multiverse()
    assert "psk_core" in multiverse.all_dialects
    assert {"psk-inline", "psk-bind"} <= set(multiverse.all_passes)


def test_factories_import_nothing_until_called() -> None:
    # Importing the universe must not import the passes (start-up cost, and
    # one broken pass module must not break every tool).
    assert "presk.passes.bind" not in sys.modules or "presk.universe" in sys.modules
    factory = PRESK_UNIVERSE.all_passes["psk-bind"]
    assert factory.__name__ == "load_BindSizes"
