"""plan-check: the seed's `make plan-check`, and the plans of tests/plan checked twice.

The seed (§"Well-formedness"): "make plan-check lowers every entry of
tests/plan/entries.txt with and without --plan @tests/plan/default.json and
compares the dumps byte for byte". default.json is the plan that states the
default of every decision of every nest: the realization a dump takes
without a plan (f64), and no layout, since a nest a plan does not mention
takes the default of every decision, and a plan naming a nest would be
refused (E7002) on every program that lacks it. That a layout stated
explicitly equal to the defaults changes nothing either is checked per
program: `explicit_defaults_plan` writes, for each realization, the plan
that states every concrete default of every nest (the form, tile, k-block,
order, lanes, pack, passes and epilogue; the executor's lanes "widest" and
split "executor" are no values a plan can state), and the kernel dumps
under it and under the bare realization are the same bytes.

Every plan in tests/plan passes the first check (`presk dump --stage
realize --plan`) on its program, and the second (`psk-verify-layout`) at
its sizes, on an AVX2 and on an AVX-512 target with two workers: the
attention plans state `"lanes": "full"`, the register's width of the target
that realizes them (8 f32 lanes on AVX2, 16 on AVX-512). The same plan
stating 16 lanes is refused on AVX2 (condition 4).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from xdsl.dialects.func import FuncOp

from presk import sizes
from presk.cli.main import main as presk
from presk.cli.program import load_program
from presk.target import TARGET_ENV, THREADS_ENV, Machine, target_named
from presk.diagnostics import PreskError
from presk.dialects.psk_realize import SiteOp
from presk.ir.context import presk_context
from presk.ir.parse import parse_module
from presk.pipeline import realize
from presk.passes.verify_layout import check_layouts
from presk.plans import plan_from_options

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "tests" / "plan"
ENTRIES = PLANS / "entries.txt"
DEFAULT = PLANS / "default.json"

TARGETS = ("x86-64-v3", "x86-64-v4")
"""The plans of tests/plan run on both register files (each level with the plans' two workers)."""


def two_worker(level: str) -> Machine:
    return replace(target_named(level), cores=2)


@contextlib.contextmanager
def realizing_for(level: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Machine]:
    """`PRESK_TARGET=level` while a plan is realized, so that "full" lanes are that level's width."""
    with monkeypatch.context() as patch:
        patch.setenv(TARGET_ENV, level)
        patch.delenv(THREADS_ENV, raising=False)
        yield two_worker(level)

PLAN_PROGRAMS: dict[str, tuple[str, list[str]]] = {
    "two_dots.json": ("tests/plan/two_dots.mlir", ["B=4"]),
    "epilogue.json": ("tests/plan/epilogue.mlir", ["B=2", "T=16"]),
    "attention.json": ("corpus/nlp/gpt.mlir", ["B=16", "T=256", "C=256"]),
    "attention_values.json": ("corpus/nlp/gpt.mlir", ["B=16", "T=256", "C=256"]),
}
"""Each example plan with its program and sizes; default.json applies to every entry."""


@pytest.fixture(autouse=True)
def _no_thread_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)


def read_entries() -> list[tuple[str, str, list[str]]]:
    """tests/plan/entries.txt: `FILE ENTRY [NAME=N ...]` a line, '#' comments."""
    entries = []
    for line in ENTRIES.read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            path, entry, *bindings = fields
            entries.append((path, entry, bindings))
    return entries


def split_bindings(path: str, bindings: list[str]) -> tuple[list[str], list[str]]:
    """(dims, consts): a binding names a constant when the program declares it."""
    text = (ROOT / path).read_text(encoding="utf-8")
    constants = sizes.declared_constants(parse_module(presk_context(), text, path).module)
    dims = [b for b in bindings if b.split("=", 1)[0] not in constants]
    consts = [b for b in bindings if b.split("=", 1)[0] in constants]
    return dims, consts


def size_arguments(path: str, bindings: list[str]) -> list[str]:
    """`--dim NAME=N`, or `--const NAME=N` for a constant the program declares."""
    dims, consts = split_bindings(path, bindings)
    return [*(a for d in dims for a in ("--dim", d)), *(a for c in consts for a in ("--const", c))]


def realized(
    path: str, bindings: list[str], realization: str | None, plan: str | None, entry: str | None = None
) -> tuple[Any, dict[str, int]]:
    """The program fused and realized at its sizes, as `presk dump --stage kernel --entry E` realizes it."""
    program = load_program(str(ROOT / path), *split_bindings(path, bindings), entries=[entry] if entry else None)
    return realize(program.parsed.module, program.env, plan_from_options(realization, plan), entry=entry), program.env


def run_presk(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = presk(list(argv))
    return status, out.getvalue(), err.getvalue()


def kernel_dump(path: str, entry: str, bindings: list[str], *plan: str) -> str:
    status, out, err = run_presk("dump", str(ROOT / path), "--stage", "kernel", "--entry", entry,
                                 *size_arguments(path, bindings), *plan)  # fmt: skip
    assert status == 0, err
    assert "psk_kernel.kernel" in out
    return out


def entry_id(item: tuple[str, str, list[str]]) -> str:
    path, entry, bindings = item
    return f"{Path(path).stem}:{entry}:{','.join(bindings)}"


ALL_ENTRIES = read_entries()


def test_entries_cover_every_function_of_the_examples_and_the_corpus_gpt() -> None:
    listed = {(path, entry) for path, entry, _ in ALL_ENTRIES}
    for path in ("tests/plan/two_dots.mlir", "tests/plan/epilogue.mlir", "corpus/nlp/gpt.mlir", "corpus/mlp.mlir"):
        module = parse_module(presk_context(), (ROOT / path).read_text(encoding="utf-8"), path).module
        functions = {op.sym_name.data for op in module.walk() if isinstance(op, FuncOp)}
        assert functions <= {entry for p, entry in listed if p == path}, path
    assert all((ROOT / path).is_file() for path, _, _ in ALL_ENTRIES)


@pytest.mark.parametrize("item", ALL_ENTRIES, ids=entry_id)
def test_default_plan_gives_the_same_kernels_byte_for_byte(item: tuple[str, str, list[str]]) -> None:
    path, entry, bindings = item
    without = kernel_dump(path, entry, bindings)
    with_plan = kernel_dump(path, entry, bindings, "--plan", f"@{DEFAULT}")
    assert with_plan == without


def test_default_plan_states_the_no_plan_realization_and_no_layout() -> None:
    plan = json.loads(DEFAULT.read_text(encoding="utf-8"))
    assert plan == {"realization": "f64", "layout": {}}


def explicit_defaults_plan(path: str, bindings: list[str], realization: str, entry: str) -> dict[str, Any]:
    """The plan stating every concrete default of every nest `entry` reaches, in `realization`."""
    module, _ = realized(path, bindings, realization, None, entry)
    layout: dict[str, Any] = {}
    for site in (op for op in module.walk() if isinstance(op, SiteOp)):
        assert site.layout is not None
        stated = {k: v for k, v in site.layout.defaults.items() if v not in ("widest", "executor", "at launch")}
        if stated:
            layout[site.site_name] = stated
    return {"realization": realization, "layout": layout}


EXPLICIT = [
    item for item in ALL_ENTRIES
    if item[0].startswith("tests/plan/")
    or (item[0] == "corpus/nlp/gpt.mlir" and (item[1] == "loss" or "T=256" in item[2]))
]  # fmt: skip
"""The example programs, the GPT's loss (every kind of nest of the corpus) and its attention at the plan's sizes."""


@pytest.mark.parametrize("realization", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("item", EXPLICIT, ids=entry_id)
def test_defaults_stated_explicitly_give_the_same_kernels(
    item: tuple[str, str, list[str]], realization: str, tmp_path: Path
) -> None:
    path, entry, bindings = item
    plan = explicit_defaults_plan(path, bindings, realization, entry)
    assert plan["layout"], "every program here has a contraction or a softmax"
    plan_file = tmp_path / "explicit.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    without = kernel_dump(path, entry, bindings, "--realize", realization)
    assert kernel_dump(path, entry, bindings, "--plan", f"@{plan_file}") == without


def test_every_plan_in_tests_plan_has_a_program() -> None:
    plans = {p.name for p in PLANS.glob("*.json")}
    assert plans == {*PLAN_PROGRAMS, "default.json"}


@pytest.mark.parametrize("name", sorted(PLAN_PROGRAMS))
@pytest.mark.target
def test_every_plan_passes_the_first_check(name: str) -> None:
    path, bindings = PLAN_PROGRAMS[name]
    status, out, err = run_presk("dump", str(ROOT / path), "--stage", "realize",
                                 *size_arguments(path, bindings), "--plan", f"@{PLANS / name}")  # fmt: skip
    assert status == 0, err
    layout = json.loads((PLANS / name).read_text(encoding="utf-8"))["layout"]
    for nest in layout:
        assert f'psk_realize.nest "{nest}"' in out or f'psk_realize.group "{nest}"' in out


def realized_plan(name: str) -> tuple[Any, dict[str, int]]:
    path, bindings = PLAN_PROGRAMS[name]
    return realized(path, bindings, None, str(PLANS / name))


@pytest.mark.parametrize("level", TARGETS)
@pytest.mark.parametrize("name", sorted(PLAN_PROGRAMS))
def test_every_plan_passes_the_second_check_on_both_register_files(
    name: str, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with realizing_for(level, monkeypatch) as machine:
        module, env = realized_plan(name)
        check_layouts(module, env, machine)


@pytest.mark.parametrize(("level", "width"), [("x86-64-v3", 8), ("x86-64-v4", 16)])
def test_full_lanes_are_the_register_width_of_the_target(level: str, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with realizing_for(level, monkeypatch):
        module, _ = realized_plan("attention.json")
    sites = {op.site_name: op for op in module.walk() if isinstance(op, SiteOp)}
    assert sites["SelfAttention.apply/%13"].layout.stated["lanes"] == width


def test_a_plan_stating_a_width_the_target_lacks_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = json.loads((PLANS / "attention.json").read_text(encoding="utf-8"))
    plan["layout"]["SelfAttention.apply/%13"]["lanes"] = 16
    sixteen = tmp_path / "attention16.json"
    sixteen.write_text(json.dumps(plan), encoding="utf-8")
    path, bindings = PLAN_PROGRAMS["attention.json"]
    with realizing_for("x86-64-v4", monkeypatch) as machine:
        check_layouts(*realized(path, bindings, None, str(sixteen)), machine)
    with realizing_for("x86-64-v3", monkeypatch) as machine, pytest.raises(PreskError) as raised:
        check_layouts(*realized(path, bindings, None, str(sixteen)), machine)
    assert raised.value.headline.startswith(
        'E7002: nest "SelfAttention.apply/%13", decision "lanes": condition 4: lanes = 16 is not a register width of this '
        "machine for f32"
    )


def test_the_attention_plan_states_the_seeds_layout() -> None:
    layout = json.loads((PLANS / "attention.json").read_text(encoding="utf-8"))["layout"]
    assert layout == {
        "SelfAttention.apply/%13": {"tile": [4, 16], "kblock": 32, "order": "JIK", "lanes": "full",
                                    "split": {"depth": 1, "workers": 2}, "pack": True},
        "SelfAttention.apply/%17": {"passes": 2},
    }  # fmt: skip
    module, _ = realized_plan("attention.json")
    sites = {op.site_name: op for op in module.walk() if isinstance(op, SiteOp)}
    scores, softmax = sites["SelfAttention.apply/%13"], sites["SelfAttention.apply/%17"]
    assert scores.kind == "contraction" and softmax.kind == "softmax"
    assert "psk_core.ein" in str(scores.primitive) and "psk_core.softmax" in str(softmax.primitive)
