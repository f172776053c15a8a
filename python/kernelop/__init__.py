"""kernelop: hand-written CUDA kernels + a declarative spec -> PyTorch operators.

Keeps the names of torch_tensorrt.kernels, so switching is a change of import.

``import kernelop`` needs no PyTorch (DESIGN.md, "engines": JAX never imports torch): the spec classes
(KernelSpec, InputDecl, ...), ``__version__`` and the engine-neutral core extension (kernelop._kernelop) load
with the package; the names that need PyTorch (cuda_kernel_op, load_package, the DSL front ends triton,
cutedsl and cutile, record_plugin, ...) load with their module on first use (PEP 562), and say so when torch is missing.
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any, Dict, List

from . import _dtypes, _kernelop  # noqa: F401 - torch-free, loaded with the package
from ._spec import (Backward, Clone, Custom, DimSize, Elementwise, Expr, Fill, FloatConst, HostTest, InputDecl,
                    KernelSpec, Launch, Numel, OutputDecl, ReduceDims, Reduction, SameAs, ScalarInput, Tunable)

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports these on first use
    from ._cutedsl import CuteDslSpec, cutedsl
    from ._cutile import CutileSpec, cutile
    from ._ops import (Kernel, build_package, build_package_file, cuda_kernel_op, kernel, load_package, ptx_op,
                       register_spec_file)
    from ._recording import KernelBinary, RecordedPlugin, custom_plugin, record_plugin
    from ._triton import TritonSpec, triton

# nanobind's stubgen leaves dunders out of _kernelop.pyi, so the type checker does not know this one.
__version__: str = getattr(_kernelop, "__version__")

# The names that need PyTorch, by the module that defines them (each imports torch).
_LAZY: Dict[str, str] = {
    **dict.fromkeys(("CuteDslSpec", "cutedsl"), "_cutedsl"),
    **dict.fromkeys(("CutileSpec", "cutile"), "_cutile"),
    **dict.fromkeys(("Kernel", "build_package", "build_package_file", "cuda_kernel_op", "kernel", "load_package",
                     "ptx_op", "register_spec_file"), "_ops"),
    **dict.fromkeys(("KernelBinary", "RecordedPlugin", "custom_plugin", "record_plugin"), "_recording"),
    **dict.fromkeys(("TritonSpec", "triton"), "_triton"),
}

__all__ = ["Backward", "CuteDslSpec", "cutedsl", "CutileSpec", "cutile", "KernelBinary", "RecordedPlugin",
           "TritonSpec", "custom_plugin", "record_plugin", "triton", "Clone", "Custom", "DimSize", "Elementwise",
           "Expr", "Fill", "FloatConst", "HostTest", "InputDecl", "Kernel", "KernelSpec", "Launch", "Numel",
           "OutputDecl", "ReduceDims", "Reduction", "SameAs", "ScalarInput", "Tunable", "build_package",
           "build_package_file", "cuda_kernel_op", "kernel", "load_package", "ptx_op", "register_spec_file"]


def _import(module: str, what: str) -> Any:
    """kernelop.<module>, imported; a missing PyTorch is an ImportError that names what needed it."""
    try:
        return importlib.import_module(f".{module}", __name__)
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] != "torch":
            raise
        raise ImportError(
            f"kernelop.{what} needs PyTorch, which cannot be imported here ({e}); install torch to use it. Without "
            "torch, kernelop offers its engine-neutral core: the spec classes (kernelop.KernelSpec, ...) and "
            "kernelop._kernelop (check_spec, build_package, Op)", name=e.name) from e


def __getattr__(name: str) -> Any:
    """PEP 562: a torch-bound name (or a private submodule, kernelop._ops ...) is imported on first use."""
    if name in _LAZY:
        value = getattr(_import(_LAZY[name], name), name)
    elif name == "jax" or (name.startswith("_") and not name.startswith("__")
                           and importlib.util.find_spec(f"{__name__}.{name}")):
        value = _import(name, name)  # the import also sets the package's attribute
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    """The public names, loaded or not, and the private ones loaded so far (not typing's or importlib's)."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("_")})
