"""Type stubs for kernelop's C++ extension (kernelop/_kernelop)."""

from typing import Any, List, Optional

class Overrides:
    """Which parts of an op the caller's Python functions supply (the override path)."""

    has_meta_fn: bool
    has_eager_fn: bool
    meta_outputs: int
    schema: str
    def __init__(self) -> None: ...

class Registration:
    """An op kernelop registered; launches its compiled kernel."""

    @property
    def schema(self) -> str: ...
    @property
    def parameters(self) -> List[str]: ...
    def launch(self, grid: List[int], block: List[int], args: List[Any], shared_mem: int, stream: Optional[int],
               device: int) -> None: ...

def register_spec(spec_json: str, base_dir: str, archs: List[str], overrides: Overrides) -> str:
    """Validates, compiles (through the cache) and registers a spec; returns the schema."""

def check_spec(spec_json: str, base_dir: str, overrides: Overrides) -> str:
    """Validates a spec and returns its derived schema; registers nothing."""

def build_package(spec_json: str, base_dir: str, archs: List[str], path: str) -> None:
    """Compiles a spec and writes a .kop package."""

def load_package(path: str) -> str:
    """Registers the op of a .kop package (no NVRTC, no source); returns the schema."""

def register_ptx(spec_json: str, base_dir: str, ptx: str, entry: str, overrides: Overrides) -> str:
    """Registers a spec whose kernel is pre-compiled PTX (no NVRTC); returns the schema."""

def unregister(op_name: str) -> None:
    """Removes an op kernelop registered (the override path's rollback)."""

def find_registration(op_name: str) -> Registration: ...
def is_registered(op_name: str) -> bool: ...

class FastEntry:
    """kernelop's Python entry of an op (Note [fast Python entry]): plain calls made here, the others by ``fallback``."""
    fallback: Any
    taken: int
    passed: int
    stale: bool
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

def fast_entry(op_name: str, fallback: Any) -> Optional[FastEntry]:
    """The fast Python entry of a registered op; None when its schema has types the entry does not convert."""

def is_fast_entry(obj: Any) -> bool: ...
def registration_id(op_name: str) -> int:
    """The identity of the op's current registration through kernelop; 0 when there is none."""
