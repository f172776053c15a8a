"""kernelop: hand-written CUDA kernels + a declarative spec -> PyTorch operators.

Keeps the names of torch_tensorrt.kernels, so switching is a change of import.
"""

from ._ops import (Kernel, build_package, build_package_file, cuda_kernel_op, kernel, load_package, ptx_op,
                   register_spec_file)
from ._spec import (Backward, Custom, DimSize, Elementwise, Expr, InputDecl, KernelSpec, Numel, OutputDecl, ReduceDims,
                    Reduction, SameAs, ScalarInput, Tunable)
from ._cutedsl import CuteDslSpec, cutedsl
from ._triton import RecordedPlugin, TritonSpec, custom_plugin, record_plugin, triton

__all__ = ["Backward", "CuteDslSpec", "cutedsl", "RecordedPlugin", "TritonSpec", "custom_plugin", "record_plugin", "triton", "Custom", "DimSize", "Elementwise", "Expr", "InputDecl", "Kernel", "KernelSpec", "Numel", "OutputDecl",
           "ReduceDims", "Reduction", "SameAs", "ScalarInput", "Tunable", "build_package", "build_package_file", "cuda_kernel_op",
           "kernel", "load_package", "ptx_op", "register_spec_file"]
