"""kernelop: hand-written CUDA kernels + a declarative spec -> PyTorch operators.

Keeps the names of torch_tensorrt.kernels, so switching is a change of import.
"""

from ._cutedsl import CuteDslSpec, cutedsl
from ._ops import (Kernel, build_package, build_package_file, cuda_kernel_op, kernel, load_package, ptx_op,
                   register_spec_file)
from ._recording import KernelBinary, RecordedPlugin, custom_plugin, record_plugin
from ._spec import (Backward, Custom, DimSize, Elementwise, Expr, InputDecl, KernelSpec, Numel, OutputDecl, ReduceDims,
                    Reduction, SameAs, ScalarInput, Tunable)
from ._triton import TritonSpec, triton

__all__ = ["Backward", "CuteDslSpec", "cutedsl", "KernelBinary", "RecordedPlugin", "TritonSpec", "custom_plugin",
           "record_plugin", "triton", "Custom", "DimSize", "Elementwise", "Expr", "InputDecl", "Kernel", "KernelSpec",
           "Numel", "OutputDecl", "ReduceDims", "Reduction", "SameAs", "ScalarInput", "Tunable", "build_package",
           "build_package_file", "cuda_kernel_op", "kernel", "load_package", "ptx_op", "register_spec_file"]
