from collections.abc import Sequence


def load_package(path: str) -> dict:
    """
    Loads a .kop package (and its backward chain) into this process's FFI registry; returns the op's signature.
    """

def load_spec(spec_json: str, base_dir: str, archs: Sequence[str]) -> dict:
    """
    Compiles a spec and its backward chain (NVRTC) into this process's FFI registry; returns the op's signature.
    """

def trace(op: str, shapes: Sequence[Sequence[object]], dtypes: Sequence[str], scalars: list, max_dim: object, min_dim: object) -> list:
    """
    [(shape, dtype)] of the op's results for inputs of these shapes (ints or JAX symbolic dimensions) and dtypes, with the op's checks as far as the sizes tell.
    """

def targets() -> dict:
    """The FFI targets: name -> {'instantiate': capsule, 'execute': capsule}."""

def state_type() -> tuple:
    """
    (name, {'type_id': capsule}) of the handlers' state, for jax.ffi.register_ffi_type.
    """

FFI_API_VERSION: str = '0.3'
