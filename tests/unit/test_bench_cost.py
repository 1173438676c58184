"""`bench/bench_cost.py --against`: two profiles priced on one timing of the corpus's kernels."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from presk.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench_cost  # noqa: E402


def test_two_profiles_are_ranked_on_the_same_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile against a copy of itself gives the same Spearman twice, whatever the timing's noise; against a
    refit in another form, a row of its own for each entry, unfused kernels counted."""
    profile = tmp_path / "p.json"
    code = main(["bench", str(ROOT / "corpus" / "mlp.mlir"), "--entry", "mse", "--dim", "B=64", "--realize", "f64",
                 "--no-fuse", "--calibrate", str(profile)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    copy = tmp_path / "same.json"
    shutil.copy(profile, copy)
    shutil.copy(tmp_path / "p.samples.jsonl", tmp_path / "same.samples.jsonl")
    copy.write_text(copy.read_text().replace('"p.samples.jsonl"', '"same.samples.jsonl"'))
    assert main(["refit", str(copy), "--combine", "max"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(bench_cost, "ENTRIES", (("corpus/mlp.mlir", "mse", ("--dim", "B=64")),))

    bench_cost.paired_table(str(profile), str(profile), ["f64"], fuse=False)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| corpus/")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[:5] == ["corpus/mlp.mlir", "mse", "B=64", "f64", "8"]  # every primitive its own kernel
    assert cells[7] == cells[8] and float(cells[7]) <= 1.0  # the same model on the same times: the same ranks

    bench_cost.paired_table(str(profile), str(copy), ["f64"], fuse=False)
    out = capsys.readouterr().out
    assert "| p.json | same.json |" in out.splitlines()[0]
    (row,) = [line for line in out.splitlines() if line.startswith("| corpus/")]
    assert all(-1.0 <= float(c) <= 1.0 for c in row.strip("|").split("|")[5:])
