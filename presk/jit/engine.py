"""Compiling LLVM IR to native kernels, with in-memory and on-disk caches.

Kernel ABI (fixed; `presk.lowering.kernel_to_llvm` emits it, the executor calls it):

    void @name(ptr %args, i64 %lo, i64 %hi)

`%args` points to an array of buffer base pointers, one `ptr` per buffer in
the kernel's buffer order (see `presk.jit.buffers.PointerArray`); `[lo, hi)`
is the range of iterations of the kernel's outermost parallel loop that this
call runs: the whole range when the kernel is not split, one chunk of it per
worker when it is (`presk.jit.pool.WorkerPool`). One signature for every
kernel means one ctypes prototype, no per-kernel marshalling, and a split
that needs nothing from the kernel but its range.

How a module is compiled, and why:
- O3 with the new pass manager (`presk.jit.codegen.PIPELINE`) for the host
  CPU's name and features (so zmm registers exist); function attributes
  such as `prefer-vector-width` are the IR generator's business. No
  fast-math flag is added here: the numerics policy (DESIGN.md §2) is
  decided by the IR.
- Code generation happens here (`TargetMachine.emit_object`), not inside
  MCJIT, so that the object's undefined symbols can be checked before MCJIT
  links it: MCJIT links an unresolved symbol to address 0 without any error
  (llvmlite 0.50 / LLVM 22; older versions abort at finalize), and the
  process dies with SIGSEGV when the kernel runs. The object is handed to
  MCJIT through its object cache (`getbuffer`), so MCJIT loads it instead of
  compiling the module again. The same bytes go to disk.
- Each MCJIT engine gets its own `TargetMachine`: MCJIT takes ownership of
  it, and two engines sharing one crash the process when the second dies.
- LLVM's context is process-global in llvmlite, so compilation is serialised
  by one lock; calling compiled kernels needs no lock. `compile_many` has a
  batch of modules compiled by worker processes (`presk.jit.codegen`) and
  loads their objects.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from presk.diagnostics import PreskError
from presk.jit import codegen
from presk.target import Machine, require_native, target_machine

KernelFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
"""The ctypes prototype of every kernel; ctypes releases the GIL during the call."""

KERNEL_TYPE = "void (ptr, i64, i64)"
"""The kernel ABI's LLVM function type, as llvmlite prints it."""

CACHE_ENV = "PRESK_CACHE_DIR"
OBJECT_SUFFIX = ".pskobj"
_CACHE_FORMAT = b"presk-kernel-object-v1"
"""Part of every disk key and file header: bump it to orphan old cache files."""
_HEADER = struct.Struct("<16s32sQ")
"""Disk file header: magic, sha256 of the object bytes, their length."""
_MAGIC = b"PRESKOBJ\x00\x00\x00\x00\x00\x00\x00\x01"

_LLVM_LOCK = threading.RLock()

_init_lock = threading.Lock()
_initialized = False


def initialize_llvm() -> None:
    """Initialise llvmlite for native code generation, once per process.

    llvmlite 0.45+ initialises LLVM's core itself and `llvm.initialize()`
    raises; only the native target and its assembly printer remain to set up.
    A throwaway MCJIT engine is also created once: creating an engine is what
    makes LLVM load the process's own symbols (`LoadLibraryPermanently(nullptr)`),
    and until then `llvm.address_of_symbol("expf")` returns None, which would
    make the JIT's unresolved-symbol check refuse every libm call.
    """
    global _initialized
    with _init_lock:
        if _initialized:
            return
        codegen.initialize_target()
        throwaway = llvm.Target.from_default_triple().create_target_machine(jit=True)
        llvm.create_mcjit_compiler(llvm.parse_assembly(""), throwaway).close()
        _initialized = True

INTRINSIC_FAMILIES: tuple[str, ...] = (
    "llvm.fma.", "llvm.fmuladd.", "llvm.sqrt.", "llvm.fabs.", "llvm.copysign.",
    "llvm.minnum.", "llvm.maxnum.", "llvm.minimum.", "llvm.maximum.",
    "llvm.floor.", "llvm.ceil.", "llvm.trunc.", "llvm.rint.", "llvm.nearbyint.",
    "llvm.round.", "llvm.roundeven.", "llvm.lround.", "llvm.lrint.",
    "llvm.exp.", "llvm.exp2.", "llvm.log.", "llvm.log2.", "llvm.log10.",
    "llvm.pow.", "llvm.powi.", "llvm.tanh.", "llvm.is.fpclass.",
    "llvm.fptosi.sat.", "llvm.fptoui.sat.",
    "llvm.smax.", "llvm.smin.", "llvm.umax.", "llvm.umin.", "llvm.abs.",
    "llvm.vector.reduce.", "llvm.masked.", "llvm.x86.",
    "llvm.memcpy.", "llvm.memmove.", "llvm.memset.",
    "llvm.lifetime.", "llvm.assume", "llvm.expect.", "llvm.prefetch.",
    "llvm.readcyclecounter",
)
"""Intrinsic families a kernel may declare. LLVM accepts any `llvm.*` name and
emits a call to an unknown one as a plain (unresolvable) symbol, so names are
checked; the libm calls an intrinsic lowers to are checked on the object."""

_LINKER_SYMBOLS = frozenset({"_GLOBAL_OFFSET_TABLE_"})
"""Undefined in objects by convention; the runtime linker provides them."""


def _fail(message: str) -> PreskError:
    return PreskError("E5001", f"native compilation failed: {message}")


@dataclass
class EngineStats:
    """What the caches did: tests assert on it, `--profile` can print it."""

    compiled: int = 0
    """Modules optimised and code-generated in this engine."""
    worker_compiled: int = 0
    """Modules `compile_many` had compiled by worker processes (`presk.jit.codegen`)."""
    memory_hits: int = 0
    disk_hits: int = 0
    disk_rejected: int = 0
    """Cache files found but refused (truncated, corrupt, foreign) and recompiled."""
    disk_write_errors: int = 0


class CompiledKernel:
    """One kernel of a compiled module: its address and a ready ctypes callable.

    Holds its `CompiledModule`, so the machine code stays mapped while any
    kernel of the module is reachable.
    """

    __slots__ = ("_function", "_module", "address", "name")

    def __init__(self, name: str, address: int, module: CompiledModule) -> None:
        self.name = name
        self.address = address
        self._module = module
        self._function: Callable[[int, int, int], None] = KernelFunction(address)

    @property
    def function(self) -> Callable[[int, int, int], None]:
        """The ctypes callable `(args_ptr, lo, hi)`, built once."""
        return self._function

    def __call__(self, args_ptr: int, lo: int, hi: int) -> None:
        self._function(args_ptr, lo, hi)

    def __repr__(self) -> str:
        return f"CompiledKernel({self.name!r}, address={self.address:#x})"


class CompiledModule:
    """A module loaded into its own MCJIT engine; `kernel(name)` gives its kernels."""

    def __init__(self, key: str, engine: llvm.ExecutionEngine, functions: dict[str, str]) -> None:
        self.key = key
        self._engine = engine
        self._functions = functions
        """Defined function name → its LLVM type, for the ABI check."""
        self._kernels: dict[str, CompiledKernel] = {}

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(self._functions)

    def kernel(self, name: str) -> CompiledKernel:
        """The kernel `name`, refusing a missing function or one not of the kernel ABI."""
        kernel = self._kernels.get(name)
        if kernel is None:
            kernel = self._kernels[name] = CompiledKernel(name, self.address(name, KERNEL_TYPE), self)
        return kernel

    def address(self, name: str, fn_type: str) -> int:
        """The address of function `name`, refusing a missing function or one not of type `fn_type`.

        Calling a function through the wrong prototype would corrupt the stack
        silently, so the type (as llvmlite prints it) is checked here. The
        address stays valid for as long as this module is reachable.
        """
        found = self._functions.get(name)
        if found is None:
            known = ", ".join(f"@{n}" for n in self._functions) or "none"
            raise _fail(f"no function @{name} in the module (defined: {known})")
        if found != fn_type:
            raise _fail(f"@{name} has type '{found}', not '{fn_type}'" + (" (the kernel ABI)" if fn_type == KERNEL_TYPE else ""))
        with _LLVM_LOCK:
            address = self._engine.get_function_address(name)
        if not address:
            raise _fail(f"@{name} has no address after linking")
        return address


def default_cache_dir() -> Path:
    """`$PRESK_CACHE_DIR`, else `$XDG_CACHE_HOME/presk/kernels`, else `~/.cache/presk/kernels`."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    return cache_subdir("kernels")


def cache_subdir(name: str) -> Path:
    """`$PRESK_CACHE_DIR/<name>`, else `$XDG_CACHE_HOME/presk/<name>`, else `~/.cache/presk/<name>`: where
    presk keeps what it learns of a machine (terms, profiles, tuned layouts) beside its kernels."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit) / name
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "presk" / name


def clear_disk_cache(cache_dir: str | os.PathLike[str] | None = None) -> int:
    """Remove presk's cached objects (and stray temporary files); returns how many.

    Only presk's own files are removed: the directory may be one the user
    pointed `PRESK_CACHE_DIR` at.
    """
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if not directory.is_dir():
        return 0
    removed = 0
    for path in directory.iterdir():
        if path.name.endswith(OBJECT_SUFFIX) or (OBJECT_SUFFIX + ".") in path.name:
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:
                pass  # another process cleared it first
    return removed


class _DiskCache:
    """Object files by key, one file each, written atomically and verified on read."""

    def __init__(self, directory: Path, stats: EngineStats) -> None:
        self.directory = directory
        self._stats = stats

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}{OBJECT_SUFFIX}"

    def has(self, key: str) -> bool:
        return self._path(key).is_file()

    def load(self, key: str) -> bytes | None:
        try:
            data = self._path(key).read_bytes()
        except OSError:
            return None
        if len(data) >= _HEADER.size:
            magic, digest, length = _HEADER.unpack_from(data)
            payload = data[_HEADER.size :]
            if magic == _MAGIC and length == len(payload) and hashlib.sha256(payload).digest() == digest:
                return payload
        self._stats.disk_rejected += 1
        return None

    def store(self, key: str, payload: bytes) -> None:
        """Write via a temporary file and `os.replace`, so readers in other
        processes see either no file or a whole one. A failure to write only
        costs a recompilation later, so it is counted, not raised."""
        header = _HEADER.pack(_MAGIC, hashlib.sha256(payload).digest(), len(payload))
        target = self._path(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=target.name + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(header)
                    file.write(payload)
                os.replace(temp, target)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError:
            self._stats.disk_write_errors += 1


class JitEngine:
    """Compiles LLVM IR modules for the host and caches the results.

    `compile(ir, layout_key)` returns the same `CompiledModule` for the same
    IR, machine and layout key: from memory in this engine, else from the disk
    cache (shared by processes), else by compiling.
    """

    def __init__(
        self,
        machine: Machine | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        disk_cache: bool = True,
    ) -> None:
        initialize_llvm()
        self.machine = machine if machine is not None else target_machine()
        self.stats = EngineStats()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._disk = _DiskCache(self.cache_dir, self.stats) if disk_cache else None
        self._modules: dict[str, CompiledModule] = {}
        self._machine_key = self.machine.key()
        self._codegen_target: llvm.TargetMachine | None = None
        self._from_workers: dict[str, bytes] = {}
        """Objects `compile_many` had compiled elsewhere, each taken by the `_compile` of its key."""
        self.on_batch: Callable[[int, int, int], None] | None = None
        """Told (modules, bytes of IR, processes) before `compile_many` compiles a batch of at least
        `codegen.PARALLEL_IR_BYTES`: the commands say so on a terminal, where a first run waits seconds."""

    def _new_target_machine(self) -> llvm.TargetMachine:
        return codegen.target_machine(self.machine.triple, self.machine.cpu_name, self.machine.feature_string())

    def _codegen(self) -> llvm.TargetMachine:
        """The engine's target machine for optimising and emitting objects.

        Never given to MCJIT (which would take ownership), so it can be reused.
        """
        if self._codegen_target is None:
            self._codegen_target = self._new_target_machine()
        return self._codegen_target

    def cache_key(self, ir: str, layout_key: str = "") -> str:
        """The hex sha256 naming a compiled module in memory and on disk.

        Besides the IR, the machine and the caller's layout key, it covers the
        LLVM version and the cache format: an object from another LLVM, or from
        another pass pipeline, is a different object.
        """
        digest = hashlib.sha256()
        for part in (_CACHE_FORMAT, llvm.llvm_version_info, codegen.PIPELINE, ir, self._machine_key, layout_key):
            text = str(part).encode()
            digest.update(len(text).to_bytes(8, "little"))
            digest.update(text)
        return digest.hexdigest()

    def compile(self, ir: str, layout_key: str = "") -> CompiledModule:
        """Compile (or fetch) the module of `ir`; an `E5001` PreskError if it cannot be.

        `E5002` when the engine's target needs features this host lacks: its
        code would die on an illegal instruction.
        """
        require_native(self.machine)
        ir = str(ir)
        return self._compiled(ir, self.cache_key(ir, layout_key))

    def _compiled(self, ir: str, key: str) -> CompiledModule:
        """The module of `ir` under `key`: from memory, else compiled (or loaded) once under the lock."""
        compiled = self._modules.get(key)
        if compiled is not None:
            self.stats.memory_hits += 1
            return compiled
        with _LLVM_LOCK:
            compiled = self._modules.get(key)
            if compiled is not None:
                self.stats.memory_hits += 1
                return compiled
            compiled = self._compile(ir, key)
            self._modules[key] = compiled
            return compiled

    def kernel(self, ir: str, name: str, layout_key: str = "") -> CompiledKernel:
        """Shorthand for `compile(ir, layout_key).kernel(name)`."""
        return self.compile(ir, layout_key).kernel(name)

    def compile_many(self, irs: Sequence[str]) -> list[CompiledModule]:
        """`compile` of each IR, the modules neither cache holds compiled side by side first.

        Where they hold enough IR (`codegen.jobs_for`), worker processes
        optimise and code-generate them, one per core this process may use,
        and each is then loaded as a disk cache hit is (its declarations and
        symbols checked here). A module no worker compiled, invalid IR
        included, compiles here, with the errors `compile` gives.
        """
        require_native(self.machine)
        keyed = [(ir, self.cache_key(ir)) for ir in map(str, irs)]
        missing = {
            key: ir for ir, key in keyed if key not in self._modules and (self._disk is None or not self._disk.has(key))
        }
        ir_bytes = sum(len(ir) for ir in missing.values())
        try:
            jobs = codegen.jobs_for(len(missing), ir_bytes)
        except ValueError as error:
            raise PreskError("E4001", str(error)) from None
        if self.on_batch is not None and ir_bytes >= codegen.PARALLEL_IR_BYTES:
            self.on_batch(len(missing), ir_bytes, jobs)
        if jobs > 1:
            with codegen.CompileWorkers(jobs, self.machine.triple, self.machine.cpu_name,
                                        self.machine.feature_string()) as workers:  # fmt: skip
                self._from_workers.update(workers.compile(missing))
        try:
            return [self._compiled(ir, key) for ir, key in keyed]
        finally:
            self._from_workers.clear()

    def assembly(self, ir: str) -> str:
        """The optimised module's assembly, for inspection (which registers, which calls)."""
        with _LLVM_LOCK:
            module = self._parse(str(ir))
            codegen.optimize(module, self._codegen())
            return self._codegen().emit_assembly(module)

    def _parse(self, ir: str) -> llvm.ModuleRef:
        try:
            return codegen.parse(ir, self._codegen(), self.machine.triple)
        except RuntimeError as error:
            text = str(error).strip().removeprefix("LLVM IR parsing error").strip()
            raise _fail(f"invalid LLVM IR: {text.replace('<string>:', 'line ')}") from None

    def _compile(self, ir: str, key: str) -> CompiledModule:
        module = self._parse(ir)
        _check_declarations(module)
        functions = {
            fn.name: str(fn.global_value_type) for fn in module.functions if not fn.is_declaration
        }
        obj = self._from_workers.pop(key, None)
        if obj is not None:
            self.stats.worker_compiled += 1
            if self._disk is not None:
                self._disk.store(key, obj)
        elif self._disk is not None and (obj := self._disk.load(key)) is not None:
            self.stats.disk_hits += 1
        else:
            codegen.optimize(module, self._codegen())
            try:
                obj = self._codegen().emit_object(module)
            except RuntimeError as error:
                raise _fail(f"code generation: {error}") from None
            self.stats.compiled += 1
            if self._disk is not None:
                self._disk.store(key, obj)
        _check_object_symbols(obj)
        return CompiledModule(key, self._load(module, obj), functions)

    def _load(self, module: llvm.ModuleRef, obj: bytes) -> llvm.ExecutionEngine:
        """An MCJIT engine of its own holding `module`, whose code is `obj`.

        `getbuffer` hands MCJIT the checked object, so it never generates code
        itself (and never meets a symbol that was not checked).
        """
        try:
            engine = llvm.create_mcjit_compiler(module, self._new_target_machine())
        except RuntimeError as error:
            raise _fail(f"creating the execution engine: {error}") from None
        engine.set_object_cache(getbuffer_func=lambda _module: obj)
        engine.finalize_object()
        return engine


def _check_declarations(module: llvm.ModuleRef) -> None:
    """Refuse a module declaring a symbol this process cannot provide.

    An unresolved symbol is not a Python exception but a crash (a call to
    address 0, or an abort in older LLVMs), so this runs before the module
    reaches an engine. It names the culprit as the IR spells it; calls that
    appear only in code generation are left to `_check_object_symbols`.
    """
    for fn in module.functions:
        if not fn.is_declaration:
            continue
        if fn.name.startswith("llvm."):
            if not fn.name.startswith(INTRINSIC_FAMILIES):
                raise _fail(f"unsupported LLVM intrinsic @{fn.name} (unresolved symbol)")
        elif not llvm.address_of_symbol(fn.name):
            raise _fail(f"unresolved symbol @{fn.name}: no function of that name in this process")
    for var in module.global_variables:
        if var.is_declaration and not llvm.address_of_symbol(var.name):
            raise _fail(f"unresolved symbol @{var.name}: no global of that name in this process")


def _check_object_symbols(obj: bytes) -> None:
    """Refuse an object needing a symbol this process lacks (e.g. a compiler-rt
    helper such as `__divti3` that a 128-bit division lowers to)."""
    for name in undefined_symbols(obj):
        if name not in _LINKER_SYMBOLS and not llvm.address_of_symbol(name):
            raise _fail(f"unresolved symbol '{name}' in the generated code (a runtime library call this process lacks)")


_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_ELF_SECTION = struct.Struct("<IIQQQQIIQQ")
_ELF_SYMBOL = struct.Struct("<IBBHQQ")
_SHT_SYMTAB = 2


def undefined_symbols(obj: bytes) -> list[str]:
    """Names an ELF64 little-endian object needs from elsewhere; [] for other formats.

    llvmlite exposes an object's sections but not its symbols, and this is all
    the linking check needs, so the symbol table is read directly.
    """
    if len(obj) < _ELF_HEADER.size or obj[:6] != b"\x7fELF\x02\x01":
        return []
    header = _ELF_HEADER.unpack_from(obj)
    section_offset, section_count = header[6], header[12]
    sections = [_ELF_SECTION.unpack_from(obj, section_offset + i * _ELF_SECTION.size) for i in range(section_count)]
    names: list[str] = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entry_size in sections:
        if kind != _SHT_SYMTAB or entry_size != _ELF_SYMBOL.size:
            continue
        strings_offset = sections[link][4]
        for at in range(offset + entry_size, offset + size, entry_size):  # entry 0 is null
            name_offset, _info, _other, section_index, _value, _size = _ELF_SYMBOL.unpack_from(obj, at)
            if section_index == 0 and name_offset:
                start = strings_offset + name_offset
                names.append(obj[start : obj.index(b"\x00", start)].decode())
    return names
