"""A causally masked softmax's rows in segments (`presk.lowering.softmax.causal_segments`).

Row r of a causal mask allows columns 0..r alone, so the rows of a segment
stop their maximum and sum at the segment's last row: what they skip is left
out of the maximum and adds +0 to the sum, and the quotients beyond are the
0 they always were. These tests hold the segmented kernels, in three passes
and in two, to the bits of the same softmax with its rows whole, on both
backends.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main
from presk.lowering import softmax
from presk.lowering.softmax import CausalMask, causal_segments

PROGRAM = """
!S = !psk_core.tensor<[batch: B, heads: H, seq: T, seq2: T]>
!Mask = !psk_core.index<[seq: T, seq2: T], 2>
func.func @masked(%x: !S) -> !S {
  %m = psk_core.causal_mask : !Mask
  %0 = psk_core.softmax %x [seq2] mask %m : !S
  func.return %0 : !S
}
"""


def test_the_segments_of_a_causal_mask() -> None:
    counts = {"batch": 1, "heads": 2, "seq": 192, "seq2": 192}
    # 192 rows in blocks of 8: three segments of 64 rows (8 blocks), each to its last row's columns.
    assert causal_segments(CausalMask("seq", "seq2"), ["batch", "heads", "seq"], "seq2", counts) == [
        (0, 8, 64), (8, 16, 128), (16, 24, 192)
    ]
    # Fewer rows than two segments, a mask over other axes, or no causal mask: rows whole.
    assert causal_segments(CausalMask("seq", "seq2"), ["batch", "heads", "seq"], "seq2", {**counts, "seq": 64}) is None
    assert causal_segments(CausalMask("heads", "seq2"), ["batch", "heads", "seq"], "seq2", counts) is None
    assert causal_segments(None, ["batch", "heads", "seq"], "seq2", counts) is None


@pytest.mark.parametrize(("realize", "passes"), [("f32", 3), ("f64", 3), ("bf16", 3), ("f32", 2), ("f64", 2)])
def test_segmented_rows_give_the_whole_rows_bits_on_both_backends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], realize: str, passes: int
) -> None:
    source = tmp_path / "causal.mlir"
    source.write_text(PROGRAM)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"realization": realize, "layout": {"masked/%0": {"passes": passes}}}))

    def run(backend: str, name: str) -> np.ndarray:
        out = tmp_path / name
        code = main(["run", str(source), "--entry", "masked", "--dim", "B=1", "--dim", "H=2", "--dim", "T=128",
                     "--plan", f"@{plan}", "--backend", backend, "--seed", "3", "--output", str(out)])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        return np.load(out)["result0"]

    native, interpreted = run("native", "native.npz"), run("kernel", "kernel.npz")
    monkeypatch.setattr(softmax, "SEGMENT_ROWS", 1 << 20)  # no segments: every row over every column
    whole = run("native", "whole.npz")
    assert native.tobytes() == interpreted.tobytes() == whole.tobytes()
    # Above the diagonal, 0 (+0.0: no sign bit); on and below it, each row sums to 1.
    upper = np.triu(np.ones((128, 128), dtype=bool), k=1)
    assert np.all(native[..., upper] == 0) and not np.signbit(native[..., upper]).any()
    assert np.allclose(native.astype(np.float64).sum(axis=-1), 1.0, rtol=0.02 if realize == "bf16" else 1e-5)


@pytest.mark.parametrize("passes", [3, 2])
def test_a_split_of_the_segmented_rows_is_refused_where_the_rows_are_whole_it_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], passes: int
) -> None:
    source = tmp_path / "causal.mlir"
    source.write_text(PROGRAM)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"realization": "f32",
                                "layout": {"masked/%0": {"passes": passes, "split": {"depth": 2, "workers": 2}}}}))

    def run(t: int) -> tuple[int, str]:
        code = main(["run", str(source), "--entry", "masked", "--dim", "B=1", "--dim", "H=2", "--dim", f"T={t}",
                     "--plan", f"@{plan}", "--backend", "kernel"])  # fmt: skip
        return code, capsys.readouterr().err

    code, err = run(128)
    assert code != 0
    assert ('E7002: nest "masked/%0", decision "split": condition 8: the split\'s loop at depth 2 is the loop over '
            "seq in segments of 64 rows under the causal mask, each segment a loop of its own, so it is not parallel"
            ) in err  # fmt: skip
    assert run(64)[0] == 0  # one segment's worth of rows: the block loop is one loop, and splits
