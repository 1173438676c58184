"""The target description: levels, register file, caches from the OS, and the override.

Every expectation here is stated for a named level or a fake sysfs tree, so
the tests hold on any x86-64 host; what depends on the host is compared with
the host's own description.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from presk.diagnostics import PreskError
from presk.target import (
    LEVELS,
    TARGET_ENV,
    CacheLevel,
    host_machine,
    read_caches,
    read_tlb_pages,
    require_native,
    target_machine,
    target_named,
)

pytestmark = pytest.mark.target

ROOT = Path(__file__).resolve().parents[2]


def _cache_dir(root: Path, cpu: int, index: int, level: int, kind: str, size: str, line: int, shared: str) -> None:
    folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
    folder.mkdir(parents=True)
    for name, text in (
        ("level", str(level)), ("type", kind), ("size", size), ("coherency_line_size", str(line)),
        ("shared_cpu_list", shared),
    ):  # fmt: skip
        (folder / name).write_text(text + "\n")


def test_caches_are_read_from_sysfs_for_the_affinity_mask(tmp_path: Path) -> None:
    """A Zen 3 CCX as Linux shows it: private L1d/L2, an L3 shared by 8 CPUs of which the mask holds 2."""
    _cache_dir(tmp_path, 4, 0, 1, "Data", "32K", 64, "4")
    _cache_dir(tmp_path, 4, 1, 1, "Instruction", "32K", 64, "4")
    _cache_dir(tmp_path, 4, 2, 2, "Unified", "512K", 64, "4")
    _cache_dir(tmp_path, 4, 3, 3, "Unified", "32768K", 64, "0-7")
    caches = read_caches([5, 4], root=tmp_path)
    assert caches == (
        CacheLevel(1, 32 << 10, 64, 1, core_private=True),
        CacheLevel(2, 512 << 10, 64, 1, core_private=True),
        CacheLevel(3, 32 << 20, 64, 2, core_private=False),
    )


def test_a_process_pinned_to_one_cpu_keeps_the_l3_shared(tmp_path: Path) -> None:
    """Pinned to CPU 4, no CPU of the mask shares the L3, yet seven other cores fill it: the private cache stays L2
    (a process started on one CPU lowers the kernels of an unpinned one)."""
    _cache_dir(tmp_path, 4, 0, 1, "Data", "32K", 64, "4")
    _cache_dir(tmp_path, 4, 2, 2, "Unified", "512K", 64, "4")
    _cache_dir(tmp_path, 4, 3, 3, "Unified", "32768K", 64, "0-7")
    caches = read_caches([4], root=tmp_path)
    assert [c.shared_by for c in caches] == [1, 1, 1] and [c.private for c in caches] == [True, True, False]
    assert replace(target_named("x86-64-v3"), caches=caches).private_cache == caches[1]


def test_a_cache_shared_by_one_cores_hardware_threads_is_private(tmp_path: Path) -> None:
    """With SMT, CPUs 4 and 12 are one core: their L2 is private to it even when the mask holds both."""
    _cache_dir(tmp_path, 4, 0, 1, "Data", "48K", 64, "4,12")
    _cache_dir(tmp_path, 4, 2, 2, "Unified", "2048K", 64, "4,12")
    _cache_dir(tmp_path, 4, 3, 3, "Unified", "30M", 64, "0-15")
    (tmp_path / "cpu4" / "topology").mkdir()
    (tmp_path / "cpu4" / "topology" / "thread_siblings_list").write_text("4,12\n")
    caches = read_caches([4, 12], root=tmp_path)
    assert [c.shared_by for c in caches] == [2, 2, 2] and [c.private for c in caches] == [True, True, False]


def _geometry(root: Path, cpu: int, index: int, ways: str | None, sets: str | None) -> None:
    folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
    for name, text in (("ways_of_associativity", ways), ("number_of_sets", sets)):
        if text is not None:
            (folder / name).write_text(text + "\n")


def test_associativity_is_read_from_sysfs(tmp_path: Path) -> None:
    """This Xeon's L1d (48 KiB, 12 ways, 64 sets) and L2 (2 MiB, 16 ways, 2048 sets); an L3 that gives no ways."""
    _cache_dir(tmp_path, 0, 0, 1, "Data", "48K", 64, "0")
    _geometry(tmp_path, 0, 0, "12", "64")  # 64 sets · 12 ways · 64 bytes = 49152
    _cache_dir(tmp_path, 0, 2, 2, "Unified", "2048K", 64, "0")
    _geometry(tmp_path, 0, 2, "16", None)  # no number_of_sets: 2 MiB / (16 · 64) is a whole number of sets
    _cache_dir(tmp_path, 0, 3, 3, "Unified", "32768K", 64, "0-1")
    caches = read_caches([0, 1], root=tmp_path)
    assert caches == (
        CacheLevel(1, 48 << 10, 64, 1, 12, True),
        CacheLevel(2, 2 << 20, 64, 1, 16, True),
        CacheLevel(3, 32 << 20, 64, 2, 0, False),
    )


@pytest.mark.parametrize(("ways", "sets"), [
    ("0", "64"),  # 0: fully associative or not known
    ("", None),  # empty
    ("twelve", None),  # not a number
    ("12", "32"),  # 32 sets · 12 ways · 64 bytes is not the 48 KiB the size says
    ("7", None),  # 48 KiB is no whole number of 7-way sets of 64-byte lines
])  # fmt: skip
def test_an_associativity_that_does_not_add_up_is_not_known(tmp_path: Path, ways: str, sets: str | None) -> None:
    _cache_dir(tmp_path, 0, 0, 1, "Data", "48K", 64, "0")
    _geometry(tmp_path, 0, 0, ways, sets)
    assert read_caches([0], root=tmp_path) == (CacheLevel(1, 48 << 10, 64, 1, 0, True),)


def test_host_associativity_agrees_with_the_sizes() -> None:
    for cache in host_machine().caches:
        assert cache.ways >= 0
        if cache.ways:
            assert cache.size % (cache.ways * cache.line) == 0


def test_no_cache_is_invented_when_the_os_says_nothing(tmp_path: Path) -> None:
    assert read_caches([0], root=tmp_path) == ()
    machine = replace(target_machine(), caches=())
    assert machine.last_level_cache is None and machine.cache(2) is None


@pytest.mark.parametrize(("text", "pages"), [
    ("processor\t: 0\nTLB size\t: 2560 4K pages\nclflush size\t: 64\n", 2560),  # an AMD CPU
    ("processor\t: 0\nflags\t\t: fpu avx2\nclflush size\t: 64\n", 0),  # an Intel CPU: no such line
    ("TLB size\t: many pages\n", 0),  # a line presk cannot read: not known, nothing guessed
    ("TLB size\t: 3072 2M pages\n", 0),  # not 4 KiB pages
])  # fmt: skip
def test_the_tlb_is_read_from_cpuinfo_or_not_known(tmp_path: Path, text: str, pages: int) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert read_tlb_pages(cpuinfo) == pages
    assert read_tlb_pages(tmp_path / "missing") == 0


def test_the_host_tlb_is_what_its_cpuinfo_says() -> None:
    assert host_machine().tlb_pages == read_tlb_pages()
    assert all(target_named(level).tlb_pages == host_machine().tlb_pages for level in LEVELS)


def test_host_caches_come_from_the_first_cpu_of_the_mask() -> None:
    import os

    first = min(os.sched_getaffinity(0))
    assert host_machine().caches == read_caches([first, *os.sched_getaffinity(0)])


@pytest.mark.parametrize(("name", "bits", "registers", "f32"), [
    ("x86-64-v2", 128, 16, (4,)),
    ("x86-64-v3", 256, 16, (8,)),
    ("x86-64-v4", 512, 32, (8, 16)),
])  # fmt: skip
def test_levels_give_their_register_file(name: str, bits: int, registers: int, f32: tuple[int, ...]) -> None:
    machine = target_named(name)
    assert machine.vector_bits == bits
    assert machine.vector_registers == registers
    assert machine.lane_widths("f32") == f32
    assert machine.cpu_name == name
    assert machine.features <= LEVELS[name]
    assert not machine.features & machine.disabled_features
    assert machine.caches == host_machine().caches and machine.cores == host_machine().cores


def test_a_narrower_level_disables_the_wider_features() -> None:
    v3 = target_named("x86-64-v3")
    assert "avx2" in v3.features and "fma" in v3.features
    assert not any(f.startswith("avx512") for f in v3.features)
    if "avx512f" in host_machine().features:
        assert "-avx512f" in v3.feature_string()


def test_the_environment_chooses_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TARGET_ENV, "x86-64-v3")
    assert target_machine() is target_named("x86-64-v3")
    monkeypatch.setenv(TARGET_ENV, "host")
    assert target_machine() is host_machine()
    monkeypatch.setenv(TARGET_ENV, "avx3")
    with pytest.raises(PreskError) as error:
        target_machine()
    assert error.value.code == "E4005" and "x86-64-v3" in str(error.value)


def test_kernel_cache_keys_differ_between_targets() -> None:
    assert target_named("x86-64-v3").key() != target_named("x86-64-v4").key()


def test_native_code_needs_the_hosts_features() -> None:
    if "avx2" in host_machine().features:
        require_native(target_named("x86-64-v3"))
    wider = replace(host_machine(), features=host_machine().features | {"presk-imaginary-feature"}, name="wider")
    with pytest.raises(PreskError) as error:
        require_native(wider)
    assert error.value.code == "E5002" and "presk-imaginary-feature" in str(error.value)


def _presk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "presk.cli.main", *args], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_march_lowers_for_a_level(tmp_path: Path) -> None:
    """`"lanes": "full"` under `--march x86-64-v4` prints 16-lane f32 kernels on any host (nothing runs natively)."""
    plan = tmp_path / "full.json"
    plan.write_text('{"realization": "f32", "layout": {"gemm/%0": {"tile": [4, 16], "lanes": "full"}}}')
    program = ROOT / "tests/filecheck/psk_kernel/vectorize_dump.mlir"
    for level, width in (("x86-64-v4", 16), ("x86-64-v3", 8)):
        done = _presk(
            "dump", str(program), "--stage", "kernel", "--entry", "gemm", "--dim", "N=32", "--plan", f"@{plan}",
            "--march", level,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"vector<{width}xf32>" in done.stdout and f"psk_kernel.lanes = {width}" in done.stdout


def test_march_refuses_an_unknown_level() -> None:
    done = _presk("dump", "corpus/mlp.mlir", "--stage", "core", "--march", "avx3")
    assert done.returncode == 1
    assert "error: E4005: unknown target 'avx3'" in done.stderr and "Traceback" not in done.stderr


def test_stores_go_around_the_caches_beyond_what_the_cores_hold_privately() -> None:
    """Zen 3's caches on two cores: 2 × 512 KiB private; the 32 MiB L3 is shared, so it does not count."""
    from presk.lowering.llvm import streaming_stores

    zen3 = replace(
        target_named("x86-64-v4"),
        cores=2,
        caches=(CacheLevel(1, 32 << 10, 64, 1), CacheLevel(2, 512 << 10, 64, 1), CacheLevel(3, 32 << 20, 64, 2)),
    )
    assert zen3.private_cache == CacheLevel(2, 512 << 10, 64, 1)
    assert streaming_stores.streaming_threshold(zen3) == 1 << 20
    assert not streaming_stores.streams_around_caches(1 << 20, zen3)
    assert streaming_stores.streams_around_caches((1 << 20) + 1, zen3)
    assert not streaming_stores.streams_around_caches(1 << 30, replace(zen3, caches=()))
    narrow = replace(zen3, features=target_named("x86-64-v3").features, vector_bits=256)
    assert not streaming_stores.streams_around_caches(1 << 30, narrow)  # a 32-byte vector is half a line


def test_native_code_for_a_wider_target_is_a_diagnostic(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`presk run --march x86-64-v4 --backend native` on a host without AVX-512: E5002, exit 1, no traceback.

    The host is made an AVX2 one in-process, so the test holds on either kind of CPU.
    """
    from presk.cli.main import main
    from presk.target import targets

    avx2_host = replace(target_named("x86-64-v3"), name="host")
    monkeypatch.setattr(targets, "host_machine", lambda: avx2_host)
    monkeypatch.setenv(TARGET_ENV, "host")  # the host, whatever target the suite runs under
    try:
        status = main(["run", str(ROOT / "corpus/mlp.mlir"), "--entry", "mse", "--dim", "B=4", "--realize", "f32",
                       "--backend", "native", "--march", "x86-64-v4"])  # fmt: skip
    finally:
        target_named.cache_clear()  # no target built from the stand-in host outlives the test
    err = capsys.readouterr().err
    assert status == 1, err
    assert "error: E5002: code for target 'x86-64-v4' needs avx512" in err and "Traceback" not in err
    assert "--backend kernel" in err


def test_kernel_cache_keys_do_not_read_the_associativity() -> None:
    """No lowering reads the ways: a kernel compiled before they were known keeps its key."""
    machine = target_named("x86-64-v3")
    unknown = replace(machine, caches=tuple(replace(cache, ways=0) for cache in machine.caches))
    known = replace(machine, caches=tuple(replace(cache, ways=8) for cache in machine.caches))
    assert unknown.key() == known.key()
