"""PSK-Realize from the command line: `presk launches`, `presk dump --stage realize`, `presk run --realize/--plan`.

Launch counts are computed by hand in each test from the program's text:
a group or nest launches once per leaf of its type, a call as its callee,
a fold once per layer; fields, constants and split/merge views launch nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from presk import sizes
from presk.cli.main import main as presk
from presk.cost.launches import (
    breakdown,
    count_launches,
    format_table,
    fused_module,
    launch_table,
)
from presk.ir.context import presk_context
from presk.ir.parse import parse_module

ROOT = Path(__file__).resolve().parents[2]
GPT = str(ROOT / "corpus" / "nlp" / "gpt.mlir")
DIAGNOSTIC = re.compile(r"^(?:\S+:\d+:\d+|\S+|presk): error: E\d{4}: ", re.MULTILINE)

# Three elementwise lets over a record of three leaves: one group, so 3 launches fused and 3 × 3 unfused.
CHAIN = """\
!T = !psk_core.tensor<[n: N]>
!P = !psk_core.record<a: !T, b: !T, c: !T>
func.func @chain(%p: !P, %q: !P) -> !P {
  %0 = psk_core.mul %p, %q : !P
  %1 = psk_core.exp %0 : !P
  %2 = psk_core.add %1, %p : !P
  func.return %2 : !P
}
"""

# A block of two elementwise lets (one group) folded over L layers, then a reduction (one nest),
# called twice from @twice. Split and merge are views; fields and constants are no launches.
FOLD = """\
!X = !psk_core.tensor<[embed: 4]>
!X2 = !psk_core.tensor<[a: 2, b: 2]>
!Blocks = !psk_core.record<w: !psk_core.tensor<[layer: L, embed: 4]>, s: !psk_core.tensor<[layer: L]>>
!Block = !psk_core.record<w: !X, s: !psk_core.real>
psk_core.const_dim @L = 3
func.func @Block.apply(%p: !Block, %x: !X) -> !X {
  %w = psk_core.field %p["w"] : !X
  %s = psk_core.field %p["s"] : !psk_core.real
  %0 = psk_core.mul %w, %s : !X
  %1 = psk_core.add %x, %0 : !X
  func.return %1 : !X
}
func.func @stack(%blocks: !Blocks, %x: !X) -> !psk_core.real {
  %0 = psk_core.fold @Block.apply(%blocks, %x) : !X
  %1 = psk_core.split %0 [embed -> a, b] : !X2
  %2 = psk_core.merge %1 [a, b -> embed] : !X
  %3 = psk_core.sum %2 [embed] : !psk_core.real
  func.return %3 : !psk_core.real
}
func.func @twice(%blocks: !Blocks, %x: !X) -> !psk_core.real {
  %0 = func.call @stack(%blocks, %x) : (!Blocks, !X) -> !psk_core.real
  %1 = func.call @stack(%blocks, %x) : (!Blocks, !X) -> !psk_core.real
  %c = psk_core.constant 0.5 : !psk_core.real
  %2 = psk_core.add %0, %1 : !psk_core.real
  %3 = psk_core.mul %2, %c : !psk_core.real
  func.return %3 : !psk_core.real
}
"""

# x·y + x in one group: in bf16 the product stays in f32 inside the group.
AXPX = """\
!V = !psk_core.tensor<[n: N]>
func.func @axpx(%x: !V, %y: !V) -> !V {
  %0 = psk_core.mul %x, %y : !V
  %1 = psk_core.add %0, %x : !V
  func.return %1 : !V
}
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = presk(list(argv))
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def parse(text: str, name: str = "t.mlir"):  # type: ignore[no-untyped-def]
    parsed = parse_module(presk_context(), text, name)
    parsed.verify()
    return parsed.module


# --------------------------------------------------------------------------
# Counting.


def test_chain_over_a_record_is_one_launch_per_leaf() -> None:
    module = parse(CHAIN)
    leaves, lets = 3, 3
    assert count_launches(fused_module(module), "chain", {}) == leaves  # one group, once per leaf
    assert count_launches(fused_module(module, 1), "chain", {}) == leaves * lets
    # An unfused PSK-Core program counts as psk-fuse{max-nodes=1} would wrap it.
    assert count_launches(module, "chain", {}) == leaves * lets
    (row,) = launch_table(module, None, {})
    assert (row.entry, row.unfused, row.fused) == ("chain", 9, 3)
    assert format_table([row]).splitlines()[2] == "| chain | 9 | 3 | 67 % |"


def test_fold_multiplies_by_layers_and_calls_by_callers() -> None:
    module = parse(FOLD)
    env = sizes.resolve(module)
    # @Block.apply: mul + add, one group fused. @stack: its layers, then sum (split/merge are views).
    block_unfused, block_fused = 2, 1
    layers = 3
    stack_unfused = layers * block_unfused + 1
    stack_fused = layers * block_fused + 1
    # @twice: two calls, then add and mul of reals: one group fused, two launches unfused.
    rows = {r.entry: (r.unfused, r.fused) for r in launch_table(module, None, env)}
    assert rows == {
        "Block.apply": (block_unfused, block_fused),
        "stack": (stack_unfused, stack_fused),
        "twice": (2 * stack_unfused + 2, 2 * stack_fused + 1),
    }
    # The layer count is bound through the environment: --const L=5.
    env5 = sizes.resolve(module, {"L": 5})
    assert count_launches(fused_module(module), "stack", env5) == 5 * block_fused + 1
    parts = {(r.entry, r.function): (r.runs, r.unfused, r.fused) for r in breakdown(module, ["twice"], env)}
    assert parts == {
        ("twice", "twice"): (1, 2, 1),
        ("twice", "stack"): (2, 1, 1),
        ("twice", "Block.apply"): (2 * layers, block_unfused, block_fused),
    }


def test_fold_over_an_unbound_layer_count_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "dim.mlir", FOLD.replace("psk_core.const_dim @L = 3\n", ""))
    code, _, err = run("launches", path, "--entry", "stack")
    assert code == 1 and "error: E4002: fold of @Block.apply: its layer count 'L' is not bound" in err
    code, out, _ = run("launches", path, "--entry", "stack", "--dim", "L=4")
    assert code == 0 and "| stack | 9 | 5 | 44 % |" in out


def test_launches_command_prints_the_table_for_every_function_in_source_order(tmp_path: Path) -> None:
    path = write(tmp_path, "fold.mlir", FOLD)
    code, out, err = run("launches", path)
    assert code == 0, err
    assert out.splitlines() == [
        "| Entry | Launches without fusion | With | Removed |",
        "|---|---|---|---|",
        "| Block.apply | 2 | 1 | 50 % |",
        "| stack | 7 | 4 | 43 % |",
        "| twice | 16 | 9 | 44 % |",
    ]
    code, out, _ = run("launches", path, "--entry", "twice", "--by-function")
    assert code == 0
    assert "| Block.apply | 6 | 2 | 1 | 12 | 6 |" in out and "| total | | | | 16 | 9 |" in out
    code, _, err = run("launches", path, "--entry", "nope")
    assert code == 1 and "error: E4004: no function @nope" in err


def test_gpt_launch_table_as_documented() -> None:
    """The numbers docs/realize.md reports (17 leaves, 16 tree steps in 3 groups, 4 scalar launches)."""
    code, out, err = run("launches", GPT, "--entry", "loss", "--entry", "adamw.step", "--dim", "B=2", "--dim", "T=32")
    assert code == 0, err
    assert "| loss | 95 | 78 | 18 % |" in out
    assert f"| adamw.step | {4 + 16 * 17} | {4 + 3 * 17} | 80 % |" in out


# --------------------------------------------------------------------------
# presk dump --stage realize.


def test_dump_realize_shows_the_groups_with_core_names(tmp_path: Path) -> None:
    # --entry loss: the file's loss_grad stays a request, so its fold's constants stay unbound.
    code, out, err = run("dump", GPT, "--stage", "realize", "--realize", "bf16", "--entry", "loss")
    assert code == 0, err
    assert out.startswith("!H = !psk_core.tensor<[batch: B, seq: T, embed: D]>")
    assert 'builtin.module attributes {psk_realize.default = "bf16"}' in out
    # LayerNorm's last group: div, mul, add, named as --stage core numbers them.
    group = re.search(r'%11 = psk_realize\.group "LayerNorm\.apply/%11" realize <bf16, f32> .*?\n    }', out, re.DOTALL)
    assert group is not None
    assert [line.split()[2] for line in group.group(0).splitlines()[1:-2]] == ["psk_core.div", "psk_core.mul", "psk_core.add"]
    assert '%14 = psk_realize.group "SelfAttention.apply/%14"' in out  # 1/sqrt(HD), a scalar group
    assert "psk_core.split %4 [embed -> heads, hd]" in out  # views stay outside any nest
    code, sched, _ = run("dump", GPT, "--stage", "sched", "--realize", "bf16", "--entry", "loss")
    assert code == 0 and sched == out


def test_dump_realize_with_a_plan_shows_stated_and_default_decisions(tmp_path: Path) -> None:
    plan = write(tmp_path, "p.json", json.dumps({
        "realization": "f32", "profile": "out/profile.json",
        "layout": {"Linear.apply/%2": {"tile": [2, 8], "epilogue": True}, "SelfAttention.apply/%17": {"passes": 2}},
    }))  # fmt: skip
    code, out, err = run("dump", GPT, "--stage", "realize", "--plan", "@" + plan, "--dim", "B=2", "--dim", "T=32")
    assert code == 0, err
    assert 'psk_realize.profile = "out/profile.json"' in out
    assert (
        '"Linear.apply/%2" realize <f32, f32> layout <tile = [2, 8], epilogue = true, default(form = "tiled", '
        'kblock = "none", order = "IJ", lanes = "widest", split = "executor", pack = false)> : !Hid'
    ) in out
    assert 'layout <passes = 2, default(split = "executor")> : !S' in out
    assert "!H = !psk_core.tensor<[batch: 2, seq: 32, embed: 64]>" in out  # bound, aliases kept


def test_dump_realize_output_parses_back(tmp_path: Path) -> None:
    code, out, _ = run("dump", write(tmp_path, "chain.mlir", CHAIN), "--stage", "realize")
    assert code == 0
    again = write(tmp_path, "again.mlir", out)
    code, core, err = run("dump", again)  # parses and verifies; printed with fresh numbers
    assert code == 0, err
    assert 'psk_realize.group "chain/%2" realize <f64, f64>' in core


# --------------------------------------------------------------------------
# Errors: never a traceback, always a code.


@pytest.fixture
def plans(tmp_path: Path) -> dict[str, str]:
    files = {
        "kind": {"realization": "f32", "layout": {"Linear.apply/%2": {"passes": 2}}},
        "domain": {"realization": "f32", "layout": {"LayerNorm.apply/%11": {"split": {"depth": 3, "workers": 2}}}},
        "nowhere": {"realization": "f32", "layout": {"Linear.apply/%9": {"lanes": 4}}},
        "type": {"realization": "f16"},
        "key": {"realization": "f32", "tiles": {}},
        "site": {"realization": {"default": "f32", "nope/%1": "bf16"}},
    }
    out = {name: write(tmp_path, f"{name}.json", json.dumps(plan)) for name, plan in files.items()}
    out["broken"] = write(tmp_path, "broken.json", '{"realization": "f32",\n')
    return out


@pytest.mark.parametrize(
    "options,code,pattern",
    [
        (["--plan", "@{kind}"], "E7002", r'kind\.json: nest "Linear\.apply/%2", decision "passes": "passes" is not a decision of this nest, which is a contraction'),
        (["--plan", "@{domain}"], "E7002", r"decision \"split\": a split's depth is 0, 1 or 2"),
        (["--plan", "@{nowhere}"], "E7002", r'nest "Linear\.apply/%9": @Linear\.apply has no nest there'),
        (["--plan", "@{type}"], "E7001", r'a realization is f64, f32, bf16 or @FILE, not "f16"'),
        (["--plan", "@{key}"], "E7002", r'unknown plan key "tiles"'),
        (["--plan", "@{broken}"], "E7002", r"the plan is not JSON"),
        (["--plan", "@{site}"], "E7001", r'site "nope/%1" is not a launch of this program'),
        (["--plan", "@missing.json"], "E0001", r"cannot read the plan missing\.json"),
        (["--realize", "f16"], "E7001", r'--realize: a realization is f64, f32, bf16 or @FILE, not "f16"'),
        (["--realize", "f32", "--plan", "@{kind}"], "E4001", r"pass --plan or --realize, not both"),
    ],
)
@pytest.mark.parametrize("command", ["dump", "run"])
def test_bad_realizations_and_plans_are_diagnostics(
    plans: dict[str, str], command: str, options: list[str], code: str, pattern: str
) -> None:
    argv = [GPT, "--dim", "B=1", "--dim", "T=4"]
    argv = ["dump", *argv, "--stage", "realize"] if command == "dump" else ["run", *argv, "--entry", "loss"]
    exit_code, out, err = run(*argv, *(o.format(**plans) for o in options))
    assert exit_code == 1 and out == ""
    assert re.search(rf"error: {code}: .*{pattern}", err), err
    assert DIAGNOSTIC.match(err) and "Traceback" not in err


def test_a_refused_layout_points_at_the_nest_with_its_source_line(plans: dict[str, str]) -> None:
    code, _, err = run("dump", GPT, "--stage", "realize", "--plan", "@" + plans["kind"])
    assert code == 1
    line = next(i for i, text in enumerate(Path(GPT).read_text().splitlines(), 1) if "%2 = psk_core.dot %x, %0 : !Hid" in text)
    headline = (
        f'{GPT}:{line}:3: error: E7002: {plans["kind"]}: nest "Linear.apply/%2", decision "passes": '
        '"passes" is not a decision of this nest, which is a contraction'
    )
    assert err.splitlines() == [
        headline,
        "  %2 = psk_core.dot %x, %0 : !Hid",
        "  ^",
    ]


@pytest.mark.parametrize(
    "argv,pattern",
    [
        (["run", GPT, "--entry", "loss", "--realize", "f32", "--bits", "64"], r"E4001: --bits computes in mpmath, but --realize"),
        (["dump", GPT, "--realize", "f32"], r"E4001: --realize realizes the program: it applies to --stage realize"),
        (["dump", GPT, "--stage", "kernel"], r"E4001: --stage kernel prints one entry.s kernels: pass --entry F"),
        (["dump", GPT, "--stage", "jit"], r"E4001: --stage jit: this presk knows the stages core, core-opt, realize, kernel, llvm, sched"),
    ],
)
def test_option_conflicts_are_e4001(argv: list[str], pattern: str) -> None:
    code, _, err = run(*argv)
    assert code == 1 and re.search(pattern, err), err
    assert "Traceback" not in err


# --------------------------------------------------------------------------
# presk run under a realization.


def _axpx(tmp_path: Path, realize: str) -> tuple[str, np.ndarray]:
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(64), rng.standard_normal(64)
    np.savez(tmp_path / "in.npz", x=x, y=y)
    out = tmp_path / f"out_{realize or 'plain'}.npz"
    options = ["--realize", realize] if realize else []
    code, text, err = run("run", write(tmp_path, "axpx.mlir", AXPX), "--entry", "axpx", "--dim", "N=64",
                          "--inputs", str(tmp_path / "in.npz"), "--output", str(out), *options)  # fmt: skip
    assert code == 0, err
    return text, np.load(out)["result0"]


def test_realized_runs_compute_in_the_sites_types(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(64), rng.standard_normal(64)
    _, plain = _axpx(tmp_path, "")
    text64, f64 = _axpx(tmp_path, "f64")
    text32, f32 = _axpx(tmp_path, "f32")
    text16, bf16 = _axpx(tmp_path, "bf16")
    assert "(realization f64)" in text64 and "(realization f32)" in text32
    assert "(realization bf16: stored in bf16, computed in f32)" in text16
    # The .npz keeps the storage type: bf16 values as the float32 numbers holding them.
    assert (plain.dtype, f64.dtype, f32.dtype, bf16.dtype) == (np.float64, np.float64, np.float32, np.float32)
    np.testing.assert_array_equal(f64, x * y + x)
    np.testing.assert_array_equal(plain, f64)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    np.testing.assert_array_equal(f32, x32 * y32 + x32)
    # bf16: arguments rounded to bf16; the group computes x·y + x in f32 and rounds only its root.
    def to_bf16(a: np.ndarray) -> np.ndarray:
        return a.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)

    xb, yb = to_bf16(x), to_bf16(y)
    np.testing.assert_array_equal(bf16, to_bf16(xb * yb + xb))
    assert np.all(to_bf16(bf16) == bf16) and not np.array_equal(bf16, f32)
    # Unfused, the product would reach memory and be rounded to bf16 first: a different result.
    assert not np.array_equal(bf16, to_bf16(to_bf16(xb * yb) + xb))


def test_run_with_a_plan_names_it(tmp_path: Path) -> None:
    plan = write(tmp_path, "p.json", json.dumps({"realization": "f32", "layout": {"axpx/%1": {"split": "none"}}}))
    code, out, err = run("run", write(tmp_path, "axpx.mlir", AXPX), "--entry", "axpx", "--dim", "N=8", "--plan", "@" + plan)
    assert code == 0, err
    assert out.startswith(f"@axpx (plan {plan}, realization f32):")
