"""Running a split kernel's range on several threads, dispatched in native code.

A split (`psk-split`) divides the kernel's outermost parallel loop `[0, n)`
into contiguous chunks; the kernel ABI takes `[lo, hi)`, so a chunk is just a
call. The chunks of a launch are handed out as threads become free (the
calling thread takes the first at once, a worker the next when it sees the
launch, and so on): on a shared machine a worker that starts late, or runs on
a core another process holds, then takes fewer chunks instead of making the
whole launch wait for its one large chunk. The chunks are of one size
(`even_chunks`). Which thread runs which iterations never changes what they
compute (the iterations of a split loop are independent).

Why the hand-out is native code. A launch handed to Python threads (a
`concurrent.futures` pool: a queue, a lock, a future, each thread taking the
GIL to pick up its work and to report it) cost about 70 µs of hand-off on the
Xeon host, and the course GPT's gradient makes 274 split launches a call.
Here the workers are threads of this process that entered native code once
(`presk_pool_worker`, through ctypes, which releases the GIL) and stay
there: they poll the pool's state, claim chunks with a compare-and-swap on a
counter, call the kernel through its address and count what they finished.
The caller publishes a launch and runs chunks itself, all in one native call
(`presk_pool_run`). It is the scheme of TVM's and OpenMP's runtimes: workers
spin briefly between launches (`SPIN_CYCLES`), then sleep on a futex, so an
idle pool costs no CPU. The runtime is LLVM IR compiled by the JIT like a
kernel, so it needs no C compiler on the user's machine.

The protocol, for whoever changes it. The state is one block of memory
(`_STATE_*` offsets, each hot word on its own cache line). `gen` counts
launches and is what sleeping workers wait on. A launch `j` writes its
kernel, arguments, `n` and chunk count into slot `j % 2`, resets `done`,
stores `next = j << 32` and then `gen = j`. A chunk is claimed by a
compare-and-swap of `next` from `(j, c)` to `(j, c + 1)` with `c` below the
count: a worker that saw launch `j` late finds another tag and claims
nothing, and it cannot read a slot being rewritten for launch `j + 2` and
still claim, because that rewrite comes after `next` carries `j + 1`. The
caller returns when `done` reaches the count, so every chunk has finished
before it regains control and may free the buffers.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Self

from presk.jit.engine import JitEngine

__all__ = ["SPIN_CYCLES", "WorkerPool", "chunk_count", "even_chunks", "split_range"]

SPIN_CYCLES = 1 << 18
"""Time-stamp-counter cycles a worker polls for the next launch before it sleeps (about 0.1 ms at 2–3 GHz).

Long enough to span the host's own work between two split launches (tens of
microseconds), short enough that an idle pool, or a pool in one of the test
suite's two processes, leaves the core to others almost at once. The caller
waiting for the last chunks polls as long, then yields its core between polls.
"""

_STATE_BYTES = 512
_STATE_GEN, _STATE_STOP, _STATE_SPIN = 0, 4, 8
_STATE_NEXT, _STATE_DONE, _STATE_SLEEPERS, _STATE_SLOTS = 64, 128, 192, 256
_SLOT_BYTES = 64

_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE, _SYS_FUTEX = 128, 129, 202

_RUNTIME_IR = f"""
declare void @llvm.x86.sse2.pause()
declare i64 @llvm.readcyclecounter()
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()

; Claim and run chunks of launch %job until none is left (or another launch is published).
define internal void @presk_pool_chunks(ptr %state, i32 %job) {{
entry:
  %parity = and i32 %job, 1
  %slot_index = zext i32 %parity to i64
  %slot_offset = mul i64 %slot_index, {_SLOT_BYTES}
  %slot_at = add i64 %slot_offset, {_STATE_SLOTS}
  %slot = getelementptr i8, ptr %state, i64 %slot_at
  %kernel = load atomic ptr, ptr %slot monotonic, align 8
  %args_at = getelementptr i8, ptr %slot, i64 8
  %args = load atomic ptr, ptr %args_at monotonic, align 8
  %n_at = getelementptr i8, ptr %slot, i64 16
  %n = load atomic i64, ptr %n_at monotonic, align 8
  %count_at = getelementptr i8, ptr %slot, i64 24
  %count = load atomic i64, ptr %count_at monotonic, align 8
  %next_at = getelementptr i8, ptr %state, i64 {_STATE_NEXT}
  %done_at = getelementptr i8, ptr %state, i64 {_STATE_DONE}
  %tag = zext i32 %job to i64
  br label %claim
claim:
  %next = load atomic i64, ptr %next_at acquire, align 8
  %next_tag = lshr i64 %next, 32
  %ours = icmp eq i64 %next_tag, %tag
  br i1 %ours, label %check, label %out
check:
  %chunk = and i64 %next, 4294967295
  %left = icmp ult i64 %chunk, %count
  br i1 %left, label %take, label %out
take:
  %claimed = add i64 %next, 1
  %swap = cmpxchg ptr %next_at, i64 %next, i64 %claimed acq_rel monotonic
  %won = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %won, label %run, label %claim
run:
  %lo_terms = mul i64 %n, %chunk
  %lo = udiv i64 %lo_terms, %count
  %after = add i64 %chunk, 1
  %hi_terms = mul i64 %n, %after
  %hi = udiv i64 %hi_terms, %count
  call void %kernel(ptr %args, i64 %lo, i64 %hi)
  %finished = atomicrmw add ptr %done_at, i64 1 release
  br label %claim
out:
  ret void
}}

; Whether %since is less than the spin window ago; if so, one `pause` (a polling loop's step).
define internal i1 @presk_pool_spinning(ptr %state, i64 %since) {{
entry:
  %spin_at = getelementptr i8, ptr %state, i64 {_STATE_SPIN}
  %spin = load atomic i64, ptr %spin_at monotonic, align 8
  %now = call i64 @llvm.readcyclecounter()
  %waited = sub i64 %now, %since
  %early = icmp ult i64 %waited, %spin
  br i1 %early, label %pause, label %done
pause:
  call void @llvm.x86.sse2.pause()
  br label %done
done:
  ret i1 %early
}}

; A worker thread's whole life: wait for a launch, help with it, until the pool stops.
define void @presk_pool_worker(ptr %state) {{
entry:
  %stop_at = getelementptr i8, ptr %state, i64 {_STATE_STOP}
  %sleepers_at = getelementptr i8, ptr %state, i64 {_STATE_SLEEPERS}
  br label %idle
idle:
  ; launch 0 is the state's start: a launch published before this thread first polls is still new to it
  %seen = phi i32 [ 0, %entry ], [ %gen, %helped ]
  %since = call i64 @llvm.readcyclecounter()
  br label %poll
poll:
  %gen = load atomic i32, ptr %state acquire, align 4
  %published = icmp ne i32 %gen, %seen
  br i1 %published, label %launch, label %quiet
quiet:
  %stop = load atomic i32, ptr %stop_at monotonic, align 4
  %stopping = icmp ne i32 %stop, 0
  br i1 %stopping, label %exit, label %clock
clock:
  %early = call i1 @presk_pool_spinning(ptr %state, i64 %since)
  br i1 %early, label %poll, label %sleep
sleep:
  %sleepers = atomicrmw add ptr %sleepers_at, i32 1 seq_cst
  %gen_now = load atomic i32, ptr %state seq_cst, align 4
  %unchanged = icmp eq i32 %gen_now, %seen
  br i1 %unchanged, label %futex, label %woken
futex:
  %slept = call i64 (i64, ...) @syscall(i64 {_SYS_FUTEX}, ptr %state, i32 {_FUTEX_WAIT_PRIVATE}, i32 %seen, ptr null)
  br label %woken
woken:
  %awake = atomicrmw sub ptr %sleepers_at, i32 1 seq_cst
  br label %poll
launch:
  %stop_now = load atomic i32, ptr %stop_at acquire, align 4
  %stopped = icmp ne i32 %stop_now, 0
  br i1 %stopped, label %exit, label %help
help:
  call void @presk_pool_chunks(ptr %state, i32 %gen)
  br label %helped
helped:
  br label %idle
exit:
  ret void
}}

; Wake every sleeping worker if there is one (after `gen` changed).
define internal void @presk_pool_wake(ptr %state) {{
entry:
  %sleepers_at = getelementptr i8, ptr %state, i64 {_STATE_SLEEPERS}
  %sleepers = load atomic i32, ptr %sleepers_at seq_cst, align 4
  %any = icmp ne i32 %sleepers, 0
  br i1 %any, label %wake, label %done
wake:
  %woken = call i64 (i64, ...) @syscall(i64 {_SYS_FUTEX}, ptr %state, i32 {_FUTEX_WAKE_PRIVATE}, i32 2147483647)
  br label %done
done:
  ret void
}}

; The caller's side of a launch: publish it, run chunks, return when every chunk has finished.
define void @presk_pool_run(ptr %state, ptr %kernel, ptr %args, i64 %n, i64 %count) {{
entry:
  %alone = icmp ule i64 %count, 1
  br i1 %alone, label %direct, label %publish
direct:
  call void %kernel(ptr %args, i64 0, i64 %n)
  ret void
publish:
  %gen = load atomic i32, ptr %state monotonic, align 4
  %job = add i32 %gen, 1
  %parity = and i32 %job, 1
  %slot_index = zext i32 %parity to i64
  %slot_offset = mul i64 %slot_index, {_SLOT_BYTES}
  %slot_at = add i64 %slot_offset, {_STATE_SLOTS}
  %slot = getelementptr i8, ptr %state, i64 %slot_at
  store atomic ptr %kernel, ptr %slot monotonic, align 8
  %args_at = getelementptr i8, ptr %slot, i64 8
  store atomic ptr %args, ptr %args_at monotonic, align 8
  %n_at = getelementptr i8, ptr %slot, i64 16
  store atomic i64 %n, ptr %n_at monotonic, align 8
  %count_at = getelementptr i8, ptr %slot, i64 24
  store atomic i64 %count, ptr %count_at monotonic, align 8
  %done_at = getelementptr i8, ptr %state, i64 {_STATE_DONE}
  store atomic i64 0, ptr %done_at monotonic, align 8
  %next_at = getelementptr i8, ptr %state, i64 {_STATE_NEXT}
  %tag = zext i32 %job to i64
  %first = shl i64 %tag, 32
  store atomic i64 %first, ptr %next_at release, align 8
  store atomic i32 %job, ptr %state seq_cst, align 4
  call void @presk_pool_wake(ptr %state)
  call void @presk_pool_chunks(ptr %state, i32 %job)
  %since = call i64 @llvm.readcyclecounter()
  br label %wait
wait:
  %done = load atomic i64, ptr %done_at acquire, align 8
  %all = icmp eq i64 %done, %count
  br i1 %all, label %exit, label %clock
clock:
  %early = call i1 @presk_pool_spinning(ptr %state, i64 %since)
  br i1 %early, label %wait, label %yield
yield:
  %yielded = call i32 @sched_yield()
  br label %wait
exit:
  ret void
}}

; Tell the workers to return (each one leaves `presk_pool_worker` at its next poll or wake-up).
define void @presk_pool_stop(ptr %state) {{
entry:
  %stop_at = getelementptr i8, ptr %state, i64 {_STATE_STOP}
  store atomic i32 1, ptr %stop_at seq_cst, align 4
  %gen = load atomic i32, ptr %state monotonic, align 4
  %next_gen = add i32 %gen, 1
  store atomic i32 %next_gen, ptr %state seq_cst, align 4
  call void @presk_pool_wake(ptr %state)
  ret void
}}
"""

_WorkerFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_RunFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class _Runtime:
    """The dispatcher's compiled functions (ctypes releases the GIL for each call)."""

    def __init__(self, engine: JitEngine) -> None:
        self.module = engine.compile(_RUNTIME_IR, "presk-worker-pool")
        self.worker = _WorkerFunction(self.module.address("presk_pool_worker", "void (ptr)"))
        self.run = _RunFunction(self.module.address("presk_pool_run", "void (ptr, ptr, ptr, i64, i64)"))
        self.stop = _WorkerFunction(self.module.address("presk_pool_stop", "void (ptr)"))


def split_range(n: int, workers: int) -> list[tuple[int, int]]:
    """`[0, n)` as at most `workers` contiguous, non-empty chunks differing in size by at most one.

    Balanced rather than ceil-sized, so that no worker is left with a much
    smaller last chunk (with n=9, workers=4: 2,2,2,3 and not 3,3,3,0). The
    native dispatcher cuts chunk `c` of `count` as `[n·c // count, n·(c+1) // count)`,
    the same bounds.
    """
    parts = max(1, min(workers, n))
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]


def chunk_count(n: int, workers: int, chunks_per_worker: int) -> int:
    """How many chunks `even_chunks` cuts `[0, n)` into (the native dispatcher cuts them itself)."""
    for count in range(workers * chunks_per_worker, workers, -workers):
        if n % count == 0:
            return min(count, n)
    return max(1, min(workers, n))


def even_chunks(n: int, workers: int, chunks_per_worker: int) -> list[tuple[int, int]]:
    """`[0, n)` as the most chunks of one size, at most `chunks_per_worker` per worker and a multiple of
    `workers`, else as `split_range(n, workers)`.

    Chunks handed out as threads become free balance a launch only if they
    are alike: the course GPT's attention weight gradients split 12 column
    blocks, which 8 chunks cut into 1s and 2s, and the thread left with a
    last chunk of 2 kept the other waiting. With chunks of one size its
    `loss_grad` ran 2 to 4 % faster (`docs/performance.md`, "Chunks of one
    size").
    """
    return split_range(n, chunk_count(n, workers, chunks_per_worker))


class _State(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint8 * (_STATE_BYTES + 64))]


def _stop(runtime: _Runtime, memory: _State, state_address: int, threads: list[threading.Thread]) -> None:
    """Stop and join the workers; `memory` (holding the state) is an argument so that it outlives them."""
    runtime.stop(state_address)
    for thread in threads:
        thread.join()


class WorkerPool:
    """`workers` threads (the caller's included) for running split kernels, `chunks_per_worker` chunks each.

    `engine` compiles the dispatcher (a `JitEngine` of the host by default).
    The `workers - 1` threads start here and stay in native code until
    `close()`, or until the pool is garbage-collected.
    """

    def __init__(self, workers: int, chunks_per_worker: int = 1, engine: JitEngine | None = None) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {workers}")
        if chunks_per_worker < 1:
            raise ValueError(f"a worker takes at least one chunk, got {chunks_per_worker}")
        self.workers = workers
        self.chunks_per_worker = chunks_per_worker
        self._runtime = _Runtime(engine if engine is not None else JitEngine())
        self._memory = _State()
        base = ctypes.addressof(self._memory)
        self._state = base + (-base) % 64  # the hot words' cache lines start on a line
        ctypes.c_int64.from_address(self._state + _STATE_SPIN).value = SPIN_CYCLES
        self._lock = threading.Lock()
        self._closed = False
        threads = [
            threading.Thread(target=self._runtime.worker, args=(self._state,), name=f"presk-worker-{i}", daemon=True)
            for i in range(1, workers)
        ]
        for thread in threads:
            thread.start()
        self._finalizer = weakref.finalize(self, _stop, self._runtime, self._memory, self._state, threads)
        self._finalizer.atexit = True

    def run(self, kernel_address: int, args_ptr: int, n: int) -> None:
        """Run the kernel at `kernel_address` over `[0, n)`, in chunks; return when all are done.

        Every chunk finishes before this returns: the caller may free the
        buffers as soon as it regains control. Launches from several Python
        threads take turns (the state holds one launch at a time).
        """
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        if n <= 0:
            return
        count = chunk_count(n, self.workers, self.chunks_per_worker) if self.workers > 1 else 1
        with self._lock:
            self._runtime.run(self._state, kernel_address, args_ptr, n, count)

    def close(self) -> None:
        """Stop the threads (waiting for running chunks); later `run`s fail."""
        with self._lock:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
