"""A plan whose register tiles spill on this target is applied with a warning (`PlanWarning`), not refused.

Such a tile is a valid point with the default's bits (so no E7002), but its
running sums live on the stack: the course GPT's AVX-512 plan lowered for
AVX2 ran its training step at 1.80× torch eager without a word. The tiles
here overflow both register files (16 and 32 vectors), or fit both, so the
tests hold on either kind of host.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from test_cli_run import run

from presk.cost.profile import Sample
from presk.cost.terms import MachineDesc
from presk.diagnostics import PlanWarning
from presk.dialects.psk_kernel import KernelOp
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.passes.realize import spilling_tile
from presk.pipeline import realize
from presk import sizes
from presk.plans import parse_plan, read_plan
from presk.target import target_machine, target_named
from presk.tuning.autotune import lower_point
from presk.tuning.calibration import _point, point_kernels, reprice
from presk.tuning.plan import capture

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "plan" / "two_dots.mlir"
# f64, whose 4 lanes (ymm) every x86-64 host with AVX2 has
SPILLS_EVERYWHERE = {"tile": [8, 32], "lanes": 4}  # 64 sums, 8 loaded vectors, a broadcast: 73
FITS_EVERYWHERE = {"tile": [6, 8], "lanes": 4}  # BLIS's f64 tile: 12 sums, 2 loaded vectors, a broadcast: 15


@pytest.mark.parametrize(
    ("decisions", "level", "expected"),
    [
        ({"tile": [8, 32], "lanes": 8}, "x86-64-v3", "tile [8, 32] at 8 lanes: 37 vectors live per k"),
        ({"tile": [6, 16], "lanes": 8}, "x86-64-v3", None),  # BLIS's Zen tile: 15 of 16
        ({"tile": [8, 16], "lanes": 8}, "x86-64-v3", "tile [8, 16] at 8 lanes: 19 vectors live per k"),
        ({"tile": [8, 32], "lanes": 1}, "x86-64-v3", None),  # scalar tiles are not vector registers' business
        ({"tile": [8, 32]}, "x86-64-v3", None),
        ({"passes": 2}, "x86-64-v3", None),
    ],
)
def test_spilling_tile_counts_the_vectors_a_tile_keeps(decisions: dict, level: str, expected: str | None) -> None:
    machine = target_named(level)
    assert machine.vector_registers == 16
    assert spilling_tile(decisions, machine) == expected


def _plan(tmp_path: Path, decisions: dict) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"realization": "f64", "layout": {"twice/%0": decisions}}))
    return path


def _realize(plan: Path) -> None:
    parsed = parse_module(presk_context(), PROGRAM.read_text(), str(PROGRAM))
    env = sizes.resolve(parsed.module, {}, {"B": 8})
    realize(parsed.module, env, read_plan("@" + str(plan)), entry="twice")


def test_a_spilling_plan_warns_once_naming_the_nest(tmp_path: Path) -> None:
    plan = _plan(tmp_path, SPILLS_EVERYWHERE)
    with pytest.warns(PlanWarning) as caught:
        _realize(plan)
    [warning] = [w for w in caught if issubclass(w.category, PlanWarning)]
    text = str(warning.message)
    assert f"{plan}: 1 nest with register tiles that need more than the " in text
    assert '"twice/%0" (tile [8, 32] at 4 lanes: 73 vectors live per k)' in text


def test_a_fitting_plan_is_silent(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlanWarning)
        _realize(_plan(tmp_path, FITS_EVERYWHERE))


def test_the_command_prints_the_warning_and_succeeds(tmp_path: Path) -> None:
    args = ("dump", str(PROGRAM), "--stage", "realize", "--dim", "B=8", "--plan")
    status, out, err = run(*args, "@" + str(_plan(tmp_path, SPILLS_EVERYWHERE)))
    assert status == 0 and 'psk_realize.nest "twice/%0"' in out
    assert err.startswith("presk: warning: ") and err.count("presk: warning: ") == 1
    assert "73 vectors live per k" in err and "Traceback" not in err
    status, _, err = run(*args, "@" + str(_plan(tmp_path, FITS_EVERYWHERE)))
    assert status == 0 and err == ""


def test_the_tuning_layers_own_plans_are_silent(tmp_path: Path) -> None:
    """The calibration measures spilling tiles on purpose (its narrower widths at the widest's tile), and
    `presk plan --space full` and autotune price and time them: plans the user did not write, so lowering
    them says nothing (a first-use calibration printed two warnings). The same layout in a user's plan warns."""
    layout = {**SPILLS_EVERYWHERE, "kblock": "none", "order": "IJ"}
    parsed = parse_module(presk_context(), PROGRAM.read_text(), str(PROGRAM))
    env = sizes.resolve(parsed.module, {}, {"B": 8})
    iso = capture(parsed.module, "twice", env, parse_plan({"realization": "f64"}, "test"))[0].shapes[0][0]
    point = _point("gemm", {"I": 16, "K": 16, "J": 32}, "f64", layout)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlanWarning)
        kernels = point_kernels(point)
        lower_point(iso, layout)
        # A profile's samples priced again after presk changed (`--plan auto`, `presk refit --relower`).
        names = [op.sym_name.data for op in kernels.walk() if isinstance(op, KernelOp)]
        samples = [Sample({}, 1e-6, extra={"key": point.key, "kernel": name}) for name in names]
        assert len(reprice(samples, MachineDesc.of(target_machine()))[0]) == len(names)
    with pytest.warns(PlanWarning):
        _realize(_plan(tmp_path, layout))
