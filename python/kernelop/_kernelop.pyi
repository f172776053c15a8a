"""Type stubs for kernelop's C++ extension (kernelop/_kernelop)."""

from typing import List

def register_spec(spec_json: str, base_dir: str, archs: List[str]) -> str:
    """Validates, compiles (through the cache) and registers a spec; returns the schema."""

def check_spec(spec_json: str, base_dir: str) -> str:
    """Validates a spec and returns its schema; registers nothing."""

def build_package(spec_json: str, base_dir: str, archs: List[str], path: str) -> None:
    """Compiles a spec and writes a .kop package."""

def load_package(path: str) -> str:
    """Registers the op of a .kop package (no NVRTC, no source); returns the schema."""

def register_ptx(spec_json: str, base_dir: str, ptx: str, entry: str) -> str:
    """Registers a spec whose kernel is pre-compiled PTX (no NVRTC); returns the schema."""

def is_registered(op_name: str) -> bool: ...
