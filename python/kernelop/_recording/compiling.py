"""The compile loop of every DSL front end: each tactic's program for each architecture (through kernelop's compile
cache where the DSL gives a cache identity), checked, as KernelBinary values, plus the PTX of the oldest
architecture for newer GPUs."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from .. import _kernelop
from .._symbolic import shorten

if TYPE_CHECKING:
    from .plugin import RecordedPlugin


@dataclass(frozen=True)
class KernelBinary:
    """Machine code another compiler made: one compilation (a tactic's program) for one architecture. C++'s
    kernelop::KernelBinary (include/kernelop/compile.hpp), field for field and in its order: the extension reads
    these attributes (kernelop._kernelop.KERNEL_BINARY_FIELDS)."""

    program: int
    arch: str  # "sm_90" (CUBIN in `data`), "compute_80" (PTX in `data`) or "tileir" (Tile IR bytecode)
    data: bytes  # CUBIN bytes, PTX text or Tile IR bytecode
    # for a CUBIN: the PTX it was assembled from (its parameters are checked), "" when none (cuTile's); for Tile IR:
    # its disassembly (the entry's parameters are checked)
    ptx: str
    entry: str  # the kernel's symbol
    launch_shared: int = 0  # dynamic shared memory every launch needs, in bytes
    # Global scratch memory per block, passed as parameter `scratch_param` (a 64-bit extra of value 0 in the spec).
    scratch_bytes: int = 0
    scratch_align: int = 0
    scratch_param: int = -1
    launch: int = 0  # which of the op's launches it is for: 0 its own kernel, k its then[k - 1]


@dataclass(frozen=True)
class CompiledKernel:
    """One config compiled for one architecture by a DSL's compiler: its machine code and what its launch needs
    (the fields of Triton's metadata kernelop reads). What the compile cache keeps."""

    name: str  # the kernel's symbol
    cubin: bytes
    ptx: str
    shared: int = 0  # dynamic shared memory every launch needs, in bytes
    global_scratch: int = 0  # global scratch memory per block, and its alignment
    global_scratch_align: int = 1
    profile_scratch: int = 0  # scratch of profiling instrumentation (refused)
    num_ctas: int = 1  # CTAs per cluster (kernelop launches no clusters yet)
    num_warps: int = 0  # the warps per block it was built for (0: the compiler does not say)
    cooperative: bool = False  # needs a cooperative launch (refused)
    pdl: bool = False  # needs a programmatic-dependent launch (refused)


@dataclass(frozen=True)
class CompileJob:
    """One config for one architecture, planned by the DSL (its options checked) but not compiled yet."""

    compile: Callable[[], CompiledKernel]
    identity: Optional[str] = None  # everything the compiler reads: the compile cache's key; None: not cached


def arch_number(arch: str) -> int:
    """90 for "sm_90", "sm_90a" and "compute_90"."""
    return int(re.sub(r"\D", "", arch))


def compile_binaries(recorded: "RecordedPlugin", archs: List[str],
                     programs: Optional[Sequence[int]] = None) -> List[KernelBinary]:
    """Every tactic's program (or those `programs` lists) for every architecture (checked ones), plus the PTX of the
    oldest architecture: the driver JITs it on newer GPUs. Every job is planned (the DSL checks its options) before
    anything is compiled."""
    oldest = min(archs, key=arch_number)
    chosen = range(len(recorded.compile_configs)) if programs is None else programs
    jobs = [(program, arch, recorded.dsl.plan_compile(recorded, program, arch))
            for program in chosen for arch in archs]
    out: List[KernelBinary] = []
    for program, arch, job in jobs:
        identity = None if job.identity is None else \
            f"kernelop-{recorded.dsl.name}-entry-{_ENTRY_FORMAT}:{job.identity}"
        compiled = _cached(identity) if identity is not None else None
        fresh = compiled is None
        if compiled is None:
            compiled = job.compile()
        _check(recorded, program, arch, compiled)  # before storing: a refused build is not kept
        if fresh and identity is not None:
            _store(identity, compiled)
        # Labelled by the PTX's own .target (Triton builds sm_90a for sm_90; sm_90a PTX is compute_90a and runs on
        # sm_90 only).
        ptx_target = re.search(r"^\.target\s+(\S+)", compiled.ptx, re.M)
        label = ptx_target.group(1).rstrip(",") if ptx_target else arch
        scratch = (compiled.global_scratch, compiled.global_scratch_align, recorded.scratch_param) \
            if compiled.global_scratch else (0, 0, -1)
        out.append(KernelBinary(program, label, compiled.cubin, compiled.ptx, compiled.name, compiled.shared,
                                *scratch))
        if arch == oldest and compiled.ptx:  # cuTile gives CUBINs only
            out.append(KernelBinary(program, "compute_" + label[3:], compiled.ptx.encode(), "", compiled.name,
                                    compiled.shared, *scratch))
    if recorded.dsl.portable is not None:  # checked in C++ with the others (image_from_binaries)
        for program in chosen:
            portable = recorded.dsl.portable(recorded, program)
            if portable is not None:
                out.append(portable)
    return out


def tactic_text(recorded: "RecordedPlugin", program: int) -> str:
    """A tactic's config as messages say it: "BLOCK_SIZE=256, num_warps=2"."""
    c = recorded.doc["configs"][program]
    return shorten(", ".join(f"{k}={v}" for k, v in c.items() if k != "requires"), 300)


def _check(recorded: "RecordedPlugin", program: int, arch: str, compiled: CompiledKernel) -> None:
    """Refuses a build whose launch kernelop does not make (the DSL adds its own rules)."""
    problem = None
    if compiled.profile_scratch:
        problem = (f"it needs {compiled.profile_scratch} bytes of profile scratch memory (Triton's instrumentation "
                   "is on); kernelop launches kernels built without it")
    elif compiled.num_ctas != 1:
        problem = f"it launches clusters of {compiled.num_ctas} CTAs, which kernelop does not launch yet"
    elif compiled.cooperative or compiled.pdl:
        problem = "it needs a cooperative or programmatic-dependent launch, which kernelop does not make yet"
    else:
        problem = recorded.dsl.check_compiled(recorded, program, compiled)
    if problem:
        raise ValueError(f"op {shorten(recorded.op_name)}: tactic {program} ({tactic_text(recorded, program)}) on "
                         f"{arch}: {problem}")


_ENTRY_FORMAT = 2  # bump when an entry's fields change
_ENTRY_INTS = ("shared", "global_scratch", "global_scratch_align", "profile_scratch", "num_ctas", "num_warps")


def _cached(identity: str) -> Optional[CompiledKernel]:
    payload = _kernelop.cache_load(identity)
    if payload is None:
        return None
    try:  # the entry's checksum is verified; its content is still checked like any input (check_binaries)
        head, _, rest = payload.partition(b"\n")
        meta = json.loads(head)
        n_cubin, n_ptx = meta["cubin_bytes"], meta["ptx_bytes"]
        if not (isinstance(meta["name"], str) and all(type(meta[k]) is int and meta[k] >= 0 for k in _ENTRY_INTS)
                and all(type(meta[k]) is bool for k in ("cooperative", "pdl"))
                and type(n_cubin) is int and type(n_ptx) is int and len(rest) == n_cubin + n_ptx >= n_cubin >= 0):
            return None
        return CompiledKernel(**{k: meta[k] for k in _ENTRY_INTS + ("name", "cooperative", "pdl")},
                              cubin=bytes(rest[:n_cubin]), ptx=rest[n_cubin:].decode())
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
        return None


def _store(identity: str, compiled: CompiledKernel) -> None:
    ptx = compiled.ptx.encode()
    meta = {k: v for k, v in dataclasses.asdict(compiled).items() if k not in ("cubin", "ptx")}
    meta.update(cubin_bytes=len(compiled.cubin), ptx_bytes=len(ptx))
    _kernelop.cache_store(identity, json.dumps(meta, sort_keys=True).encode() + b"\n" + compiled.cubin + ptx)
