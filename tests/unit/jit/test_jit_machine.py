"""The machine description: read from the CPU, consistent with its features."""

from __future__ import annotations

import os

import llvmlite.binding as llvm
import pytest

from presk.jit.engine import initialize_llvm
from presk.target import Machine, host_machine, target_machine
from presk.diagnostics import PreskError

pytestmark = pytest.mark.target


@pytest.fixture(autouse=True)
def _no_thread_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRESK_THREADS", raising=False)


def machine(*features: str, vector_bits: int, cores: int = 4) -> Machine:
    return Machine("x86_64-unknown-linux-gnu", "test-cpu", frozenset(features), cores, vector_bits)


def test_host_machine_is_read_from_the_cpu() -> None:
    host = host_machine()
    assert host is host_machine()
    assert host.triple == llvm.get_process_triple()
    assert host.cpu_name == llvm.get_host_cpu_name()
    reported = llvm.get_host_cpu_features()
    assert host.features == {name for name, enabled in reported.items() if enabled}
    assert not any(name.startswith(("+", "-")) for name in host.features)
    assert host.cores == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("read", [host_machine, target_machine], ids=["host", "target"])
def test_vector_width_follows_the_features(read: object) -> None:
    host = read()  # type: ignore[operator]
    if "avx512f" in host.features:
        assert host.vector_bits == 512
        assert host.lane_widths("f32") == (8, 16)
        assert host.lane_widths("f64") == (4, 8)
    elif {"avx", "avx2"} & host.features:
        assert host.vector_bits == 256
        assert host.lane_widths("f32") == (8,)
    else:
        assert host.vector_bits == 128
    for dtype, bits in (("f32", 32), ("f64", 64)):
        widths = host.lane_widths(dtype)
        assert widths == tuple(sorted(widths))
        assert host.register_width(dtype) * bits == host.vector_bits


@pytest.mark.parametrize(
    ("vector_bits", "f32", "f64"),
    [(512, (8, 16), (4, 8)), (256, (8,), (4,)), (128, (4,), (2,))],
)
def test_lane_widths_per_register_file(vector_bits: int, f32: tuple[int, ...], f64: tuple[int, ...]) -> None:
    m = machine(vector_bits=vector_bits)
    assert m.lane_widths("f32") == f32
    assert m.lane_widths("f64") == f64
    assert m.register_width("f32") == f32[-1]
    assert m.lane_widths("bf16") == ()
    assert m.register_width("bf16") == 1


def test_unknown_dtype_is_refused() -> None:
    with pytest.raises(ValueError, match="f16"):
        machine(vector_bits=512).lane_widths("f16")


def test_workers_default_to_cores() -> None:
    assert machine(vector_bits=128, cores=6).workers() == 6
    assert target_machine().workers() == target_machine().cores


@pytest.mark.parametrize(("value", "expected"), [("3", 3), (" 1 ", 1), ("", 4), ("4096", 4096), ("0064", 64)])
def test_presk_threads_sets_workers(monkeypatch: pytest.MonkeyPatch, value: str, expected: int) -> None:
    monkeypatch.setenv("PRESK_THREADS", value)
    assert machine(vector_bits=128, cores=4).workers() == expected


@pytest.mark.parametrize("value", ["0", "-2", "two", "2.5", "+3", "1e3", "4097", "9" * 5000])
def test_bad_presk_threads_is_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A typo is refused, thousands of digits included (Python would not even read them), and so is a count
    beyond `MAX_WORKERS`, which would start that many threads."""
    monkeypatch.setenv("PRESK_THREADS", value)
    with pytest.raises(PreskError) as error:
        machine(vector_bits=128).workers()
    assert error.value.code == "E4001"
    assert "PRESK_THREADS" in error.value.message and value[:20] in error.value.message
    assert "from 1 to 4096" in error.value.message


@pytest.mark.parametrize(("threads", "allowed"), [("4", (4, 2)), ("3", (3, 1)), ("2", (2, 1)), ("1", (1,))])
def test_allowed_workers_are_all_or_half(monkeypatch: pytest.MonkeyPatch, threads: str, allowed: tuple[int, ...]) -> None:
    monkeypatch.setenv("PRESK_THREADS", threads)
    assert machine(vector_bits=128).allowed_workers() == allowed


def test_key_is_stable_and_names_the_target() -> None:
    a = machine("avx2", "fma", vector_bits=256)
    b = machine("fma", "avx2", vector_bits=256)
    assert a.key() == b.key()
    assert "x86_64-unknown-linux-gnu" in a.key() and "test-cpu" in a.key()
    assert machine("avx2", vector_bits=256).key() != a.key()
    assert target_machine().key() == target_machine().key()


def test_initialize_llvm_is_idempotent_and_exposes_process_symbols() -> None:
    initialize_llvm()
    initialize_llvm()
    assert llvm.address_of_symbol("expf")  # libm, visible only once LLVM loaded the process
