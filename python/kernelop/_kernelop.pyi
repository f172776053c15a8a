"""
kernelop's engine-neutral core: spec -> plan -> compile -> package -> raw launch
"""

from collections.abc import Mapping, Sequence


class Overrides:
    def __init__(self) -> None: ...

    @property
    def has_meta_fn(self) -> bool: ...

    @has_meta_fn.setter
    def has_meta_fn(self, arg: bool, /) -> None: ...

    @property
    def has_eager_fn(self) -> bool: ...

    @has_eager_fn.setter
    def has_eager_fn(self, arg: bool, /) -> None: ...

    @property
    def meta_outputs(self) -> int: ...

    @meta_outputs.setter
    def meta_outputs(self, arg: int, /) -> None: ...

    @property
    def schema(self) -> str: ...

    @schema.setter
    def schema(self, arg: str, /) -> None: ...

    @property
    def caller_key(self) -> str: ...

    @caller_key.setter
    def caller_key(self, arg: str, /) -> None: ...

def check_spec(spec_json: str, base_dir: str, overrides: object) -> str:
    """Validates a spec and returns its derived schema; registers nothing."""

def build_package(spec_json: str, base_dir: str, archs: Sequence[str], path: str) -> None: ...

def build_package_file(path: str, archs: Sequence[str], out: str) -> None: ...

def build_package_binaries(spec_json: str, binaries: object, path: str, backward: object = [], archs: Sequence[str] = []) -> None:
    """
    Writes the .kop package of a spec with its binaries (KernelBinary objects) and, for a spec with a backward, its chain's (one list per link; empty for a CUDA C++ link, compiled for archs).
    """

def check_binaries(spec_json: str, binaries: object, backward: object = [], archs: Sequence[str] = []) -> None:
    """
    Checks binaries (and the backward chain's) against a spec as registering them does; registers nothing.
    """

KERNEL_BINARY_FIELDS: list = ...

def shorten(text: str, max: int = 120) -> str:
    """
    A user string cut for a message (the one rule of kernelop's messages, error.hpp).
    """

def dtype_names() -> list[str]:
    """kernelop's dtype names, in its DType order (the one table, dtype.hpp)."""

def package_images(path: str) -> list:
    """
    The machine code a .kop package holds, verified: per image a dict of its arch ('sm_90', 'compute_80', 'tileir'), program (the tactics' compilation), entry (the kernel's symbol) and data (CUBIN bytes, PTX text or Tile IR bytecode), e.g. to launch it with another API or disassemble it.
    """

def cubin_required_block(cubin: bytes, entry: str) -> list[int] | None:
    """
    The block [x, y, z] the CUBIN's kernel `entry` must be launched with (its .reqntid), or None when it states none or holds no such kernel.
    """

def cache_load(identity: str) -> bytes | None:
    """
    The compile cache's entry for `identity` (the text of everything it depends on), or None; a damaged entry is reported and dropped, never returned.
    """

def cache_store(identity: str, payload: bytes) -> None: ...

def canonical_expr(text: str) -> str:
    """The canonical text of an expression (Note [expression text])."""

def eval_expr(text: str, leaves: Mapping[str, int]) -> int:
    """
    Evaluates an expression with the given value of each leaf (by its text), as a launch does.
    """

def cuda_available() -> bool: ...

built_with_torch: str = '2.11.0'

class Op:
    """A compiled op on no engine: launches on device pointers and a stream."""

    @staticmethod
    def compile(spec_json: str, base_dir: str, archs: Sequence[str]) -> Op: ...

    @staticmethod
    def from_package(path: str) -> Op: ...

    @staticmethod
    def from_binaries(spec_json: str, binaries: object) -> Op: ...

    @property
    def schema(self) -> str: ...

    @property
    def op_name(self) -> str: ...

    @property
    def parameters(self) -> list[str]: ...

    @property
    def tactics(self) -> list[str]: ...

    def pin_tactic(self, tactic: int) -> None: ...

    @property
    def pinned_tactic(self) -> int: ...

    @property
    def last_tactic(self) -> int: ...

    def launch(self, grid: Sequence[int], block: Sequence[int], args: list, shared_mem: int, stream: int, device: int) -> None:
        """
        Raw launch on `device` and `stream` (a CUstream as an int; see KernelOp::launch_raw).
        """
