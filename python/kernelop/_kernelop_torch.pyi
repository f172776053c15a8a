"""kernelop's PyTorch adapter: specs, binaries and packages -> torch.ops"""

from collections.abc import Sequence


def register_spec(spec_json: str, base_dir: str, archs: Sequence[str], overrides: object) -> Registration:
    """
    Validates, compiles (through the cache) and registers a spec; returns the Registration.
    """

def unregister(op_name: str) -> None:
    """
    Removes an op kernelop registered (the override path's rollback); waits for its calls in flight.
    """

def register_spec_file(path: str, archs: Sequence[str]) -> str:
    """
    Registers the op of a JSON spec file (read as kernelop reads every file: regular files only, size-capped); returns the schema.
    """

def load_package(path: str) -> str:
    """
    Registers the op of a .kop package (no NVRTC, no source); returns the schema.
    """

def register_ptx(spec_json: str, base_dir: str, ptx: str, entry: str, overrides: object) -> Registration:
    """
    Registers a spec whose kernel is pre-compiled PTX (no NVRTC); returns the Registration.
    """

def register_binaries(spec_json: str, binaries: object, overrides: object, backward: object = [], archs: Sequence[str] = []) -> Registration:
    """
    Registers a spec whose kernel another compiler built (Triton, CuTe DSL): binaries are KernelBinary objects (kernelop._kernelop.KERNEL_BINARY_FIELDS); `backward` the chain's, one list per link (Note [backward chain]; empty for a CUDA C++ link, compiled for archs); returns the Registration.
    """

def is_registered(op_name: str) -> bool: ...

def fast_entry(op_name: str, fallback: object) -> object:
    """
    The fast Python entry of a registered op (Note [fast Python entry]), passing what it does not take to `fallback`; None when the op's schema has types it does not convert.
    """

def is_fast_entry(obj: object) -> bool: ...

def registration_id(op_name: str) -> int:
    """
    The identity of the op's current registration through kernelop; 0 when there is none.
    """

class Registration:
    @property
    def schema(self) -> str: ...

    @property
    def created(self) -> bool: ...

    def keep_alive(self, owner: object) -> None:
        """
        Ties a Python object (the caller's torch.library.Library) to the registration.
        """

    def on_miss(self, handler: object) -> None:
        """
        Note [first-use growth]: handler(shapes, scalars, refusal) -> True when it grew the registration for a call that broke a requirement, else a str saying why not, or None.
        """

    def grow(self, spec_json: str, binaries: object, backward: object = [], archs: Sequence[str] = []) -> None:
        """
        Note [first-use growth]: the registration's op from now on, made from a spec and its binaries as register_binaries makes it: the same op with more tactics.
        """

    @property
    def generations(self) -> int: ...

    @property
    def has_miss_handler(self) -> bool: ...

    @property
    def current(self) -> bool:
        """
        False once the op was unregistered (it may since have been registered again).
        """

    @property
    def parameters(self) -> list[str]: ...

    def launch(self, grid: Sequence[int], block: Sequence[int], args: list, shared_mem: int, stream: int | None, device: int) -> None:
        """
        Raw launch on `device` (see KernelOp::launch_raw); stream None: PyTorch's current one.
        """

    @property
    def declarative(self) -> bool: ...

    @property
    def tactics(self) -> list[str]: ...

    def pin_tactic(self, tactic: int) -> None: ...

    @property
    def pinned_tactic(self) -> int: ...

    @property
    def last_tactic(self) -> int: ...

    def tuning_stats(self) -> dict: ...

    def tuning_tables_json(self) -> str: ...

    def add_tuning_tables_json(self, text: str) -> None: ...

def find_registration(op_name: str) -> Registration: ...
