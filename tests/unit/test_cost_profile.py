"""Cost profiles on disk: round trip, appending samples crash-safely, old and corrupt files, refitting."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from test_cost_fit import synthetic

from presk.cost.models import Constants, Form
from presk.cost.profile import (
    Profile,
    Sample,
    append_samples,
    fit_samples,
    load_profile,
    parse_rules,
    predict,
    read_samples,
    refit_profile,
    rules_key,
    samples_path,
    save_profile,
)
from presk.cost.terms import KernelTerms, MachineDesc
from presk.diagnostics import PreskError
from presk.target import CacheLevel

DESC = MachineDesc((CacheLevel(1, 49152, 64, 1), CacheLevel(2, 2 << 20, 64, 1), CacheLevel(3, 32 << 20, 64, 8)), 32, 64, 8)
TERMS = KernelTerms(6.0, 40.0, 0.75, 0.25, 1.0, 3.0, 0.5, workers=2, lanes=8, dtype="f32")


def sample(seconds: float, counts: float | None = 1.0, **extra: object) -> Sample:
    doubled = replace(TERMS, work=2 * TERMS.work)
    return Sample({"": TERMS, "lines,overhead": doubled}, seconds, (0.9 * seconds, 1.2 * seconds), counts, dict(extra))


def fitted_profile() -> Profile:
    layout = Constants("layout", {"lambda": 1e-6, "spawn": 2e-5, "beta_l2": 5e10, "beta_l3": 3e10, "beta_mem": 7.5e9,
                                  "pi[f32/l8/p2]": 3e9, "rho[f32/l8/p2]": 4e9, "beta_never": math.inf},  # fmt: skip
                       Form("group", "pnorm", 2.5), frozenset({"beta_mem", "beta_never"}))  # fmt: skip
    roofline = Constants("roofline", {"lambda": 2e-6, "beta": 1e10, "pi[f32/l8]": 2e9})
    return Profile("host|cpu", DESC, Form("group", "pnorm", 2.5), ("lines",), layout, roofline, 0.07, 0.3,
                   {"counts": 0.5, "work": 0.75, "model": None}, None, 2,  # fmt: skip
                   (sample(1e-3, kernel="k0", entry="loss", point={"B": 2, "tile": [6, 16]}), sample(2e-3, counts=None)))


def test_round_trip(tmp_path: Path) -> None:
    profile = fitted_profile()
    path = tmp_path / "p.json"
    save_profile(profile, path)
    loaded = load_profile(path)
    assert loaded == profile
    assert loaded.samples[0].extra == {"kernel": "k0", "entry": "loss", "point": {"B": 2, "tile": [6, 16]}}
    assert samples_path(path) == tmp_path / "p.samples.jsonl"


def test_not_identified_constants_are_written_as_such(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    save_profile(fitted_profile(), path)
    data = json.loads(path.read_text())
    layout = data["constants"]["layout"]
    assert layout["beta_mem"] == {"value": None, "status": "not identified", "fit_value": 7.5e9}
    assert layout["beta_never"] == {"value": None, "status": "not identified", "fit_value": None}
    assert layout["pi[f32/l8/p2]"] == {"value": 3e9}
    assert data["format"] == "presk-cost-profile" and data["version"] == 1
    assert data["model"] == {"load_term": "group", "combine": "pnorm", "q": 2.5, "rules": ["lines"]}
    assert data["spearman"] == {"counts": 0.5, "work": 0.75, "model": None}
    assert data["machine_desc"]["caches"][2] == {"level": 3, "size": 32 << 20, "line": 64, "shared_by": 8}


def test_a_user_edit_of_machine_desc_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    save_profile(fitted_profile(), path)
    data = json.loads(path.read_text())
    data["machine_desc"]["caches"][2]["size"] = 16 << 20
    path.write_text(json.dumps(data))
    assert load_profile(path).machine_desc.cache(3).size == 16 << 20  # type: ignore[union-attr]


def test_samples_are_appended_and_a_torn_last_line_loses_one_point(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    save_profile(Profile("m", DESC), path)
    append_samples(path, [sample(1e-3)])
    append_samples(path, [sample(2e-3), sample(3e-3)])
    assert [s.seconds for s in load_profile(path).samples] == [1e-3, 2e-3, 3e-3]
    # A crash in the middle of the fourth point's write:
    line = json.dumps(sample(4e-3).to_json())
    with open(samples_path(path), "a") as stream:
        stream.write(line[: len(line) // 2])
    assert [s.seconds for s in read_samples(path)] == [1e-3, 2e-3, 3e-3]
    append_samples(path, [sample(5e-3)])
    assert [s.seconds for s in read_samples(path)] == [1e-3, 2e-3, 3e-3, 5e-3]
    assert samples_path(path).read_text().count("\n") == 4


def test_a_whole_last_line_lacking_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    samples_path(path).write_text(json.dumps(sample(1e-3).to_json()))
    append_samples(path, [sample(2e-3)])
    assert [s.seconds for s in read_samples(path)] == [1e-3, 2e-3]


def test_a_bad_line_in_the_middle_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    save_profile(Profile("m", DESC), path)
    good = json.dumps(sample(1e-3).to_json())
    samples_path(path).write_text(f"{good}\n{{not json\n{good}\n")
    with pytest.raises(PreskError, match=r"p\.samples\.jsonl:2: the samples file holds a line that is not JSON") as caught:
        load_profile(path)
    assert caught.value.code == "E8001"
    broken = sample(1e-3).to_json()
    del broken["terms"][""]["q_mem"]
    samples_path(path).write_text(f"{good}\n{json.dumps(broken)}\n")
    with pytest.raises(PreskError, match=r"p\.samples\.jsonl:2: terms under '' lack q_mem"):
        load_profile(path)
    negative = dict(sample(1e-3).to_json(), seconds=-1.0)
    samples_path(path).write_text(json.dumps(negative) + "\n")
    with pytest.raises(PreskError, match=r":1: 'seconds' is a positive time"):
        load_profile(path)


def test_refitting_writes_the_profile_only(tmp_path: Path) -> None:
    """A refit beside a running calibration must not lose the points appended meanwhile."""
    path = tmp_path / "p.json"
    save_profile(Profile("m", DESC), path)
    append_samples(path, [sample(1e-3)])
    profile = load_profile(path)
    append_samples(path, [sample(2e-3)])  # the calibration goes on
    save_profile(replace(profile, u=0.5), path)
    assert [s.seconds for s in read_samples(path)] == [1e-3, 2e-3]
    other = tmp_path / "q.json"
    save_profile(profile, other)
    assert [s.seconds for s in read_samples(other)] == [1e-3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "presk-cost-profile", "version": 1,', "invalid JSON at line 1"),
        ('{"seconds": 1}\n{"seconds": 2}\n', "invalid JSON at line 2 column 1 (Extra data); it holds a JSON value a "
         "line, as a profile's samples file (P.samples.jsonl) or presk autotune's results do: give the profile P.json"),
        ("[1, 2]", "holds a JSON list, not an object"),
        ('{"format": "something-else"}', 'its format is "something-else"'),
        ('{"hello": 1}', "it has none of the keys"),
        ('{"format": "presk-cost-profile", "version": 0, "constants": {"layout": {"lambda": 3}}, "model": {"combine": "max"}}',
         "is an object with a 'value' (the file is format version 0; this presk reads version 1)"),
        ('{"format": "presk-cost-profile", "version": 1, "model": {"combine": "mean"}}', "unknown combine 'mean'"),
        ('{"format": "presk-cost-profile", "version": 1, "machine_desc": {"caches": []}}', "missing key 'vector_registers'"),
        ('{"format": "presk-cost-profile", "version": 1, "model": {"rules": ["lines", "fast"]}}', "unknown rule 'fast'"),
        ('{"format": "presk-cost-profile", "version": 1, "machine_desc": {"caches": [], "vector_registers": 32, '
         '"line": 64, "workers": 2, "vector_bits": "wide"}}', "machine_desc.vector_bits is the widest vector register"),
        ('{"format": "presk-cost-profile", "version": 1, "machine_desc": {"caches": [], "vector_registers": 32, '
         '"line": 64, "workers": 2, "fma_chains": -1}}', "machine_desc.fma_chains is the independent FMA chains"),
        ('{"format": "presk-cost-profile", "version": 1, "machine_desc": {"caches": [], "vector_registers": 32, '
         '"line": 64, "workers": 2, "tlb_pages": 1.5}}', "machine_desc.tlb_pages is the 4 KiB pages the TLB holds"),
    ],
)
def test_a_corrupt_or_foreign_profile_is_an_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PreskError) as caught:
        load_profile(path)
    assert caught.value.code == "E8001"
    assert caught.value.message.startswith(f"{path}: ")
    assert message in caught.value.message


def test_an_earlier_version_with_missing_keys_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    old = {"version": 0, "machine": "old-host", "samples": [sample(1e-3).to_json(), sample(2e-3).to_json()]}
    path.write_text(json.dumps(old))
    profile = load_profile(path)
    assert (profile.machine, profile.machine_desc, profile.form, profile.rules) == ("old-host", None, Form(), ())
    assert profile.layout is None and profile.roofline is None and profile.u is None
    assert [s.seconds for s in profile.samples] == [1e-3, 2e-3]
    # Saved again, its samples (which were inside the file) move to the samples file.
    save_profile(profile, path)
    assert "samples" not in json.loads(path.read_text())
    assert [s.seconds for s in load_profile(path).samples] == [1e-3, 2e-3]


def test_a_missing_profile_is_e0001(tmp_path: Path) -> None:
    with pytest.raises(PreskError, match="cannot open profile '.*nowhere.json': no such file") as caught:
        load_profile(tmp_path / "nowhere.json")
    assert caught.value.code == "E0001"


def test_rules_are_named_sorted_and_checked() -> None:
    assert parse_rules("overhead,lines") == ("lines", "overhead")
    assert parse_rules("") == ()
    assert rules_key(["shared", "lines", "overhead"]) == "lines,overhead,shared"
    assert rules_key([]) == ""
    with pytest.raises(PreskError, match="unknown rule 'line': the rules are lines, shared, overhead"):
        parse_rules("line")


def test_fit_samples_needs_samples_priced_under_the_rules() -> None:
    with pytest.raises(PreskError, match="has no samples"):
        fit_samples(Profile("m", DESC))
    assert [t.work for t, _ in fit_samples(fitted_profile(), ("overhead", "lines"))] == [12.0, 12.0]
    assert [t.work for t, _ in fit_samples(fitted_profile(), ())] == [6.0, 6.0]
    profile = replace(fitted_profile(), samples=(sample(1e-3), Sample({"": TERMS}, 2e-3)))
    with pytest.raises(PreskError, match=r"1 of 2 samples \(the first: 1\) have no terms for the rules 'lines,overhead'"):
        fit_samples(profile, ["lines", "overhead"])
    with pytest.raises(PreskError, match="no terms for the rules 'shared'.*'none', 'lines,overhead'"):
        fit_samples(profile, ["shared"])


def test_refit_profile_fits_the_form_and_the_figures() -> None:
    synthetic_samples, truth = synthetic(300, seed=11, combine="max")
    # counts exactly against the times (ρ = −1); the time itself as W's stand-in is not needed:
    order = sorted(range(len(synthetic_samples)), key=lambda i: synthetic_samples[i][1])
    counts = {i: float(len(order) - rank) for rank, i in enumerate(order)}
    samples = tuple(Sample({"": terms}, t, None, counts[i]) for i, (terms, t) in enumerate(synthetic_samples))
    profile = refit_profile(Profile("m", DESC, samples=samples), load_term="group", combine="max")
    assert profile.form == Form("group", "max", None) and profile.rules == ()
    assert profile.layout is not None and profile.roofline is not None
    assert profile.layout.values["beta_mem"] == pytest.approx(truth["beta_mem"], rel=1e-3)
    assert profile.u is not None and profile.u < 1e-3
    assert profile.fitted_samples == 300
    assert profile.spearman["counts"] == -1.0
    # The fit's 1e-4 may swap two samples timed closer than that: one adjacent swap of 300 costs
    # 12 / (n (n² − 1)) = 4.4e-7 of ρ; a misranking model loses far more.
    assert profile.spearman["model"] == pytest.approx(1.0, abs=1e-6)
    assert profile.comparison is None
    assert predict(profile, synthetic_samples[0][0]) == pytest.approx(synthetic_samples[0][1], rel=1e-3)
    # Without counts on every sample there is no such figure.
    partial = refit_profile(replace(profile, samples=(*samples[:-1], replace(samples[-1], counts=None))))
    assert partial.spearman["counts"] is None
    assert partial.form.combine == "max"  # the profile's form is the default
