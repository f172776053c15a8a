"""QuACK's CuTe DSL kernels as kernelop ops, registered from QuACK's own host functions (docs/cutedsl.md, "Bring a
CuTe DSL library"). QuACK (quack-kernels 0.6.5) comes from PyPI into .deps/quack (scripts/fetch-quack); nothing of
it is committed. tests/python/test_quack.py checks these against torch; bench/quack_bench.py times them.

QuACK's host functions compile ahead and call the result: ``Softmax.compile(dtype, out_dtype, N)`` builds fake CuTe
tensors of shape ``(batch, N)`` (N static, 16-byte divisibility and alignment), ``cute.compile``s a ``Softmax``
object with them and a TVM FFI stream, and calls the compiled function with the torch tensors. kernelop records
that call (Note [compiled host functions] in kernelop/_cutedsl.py): each N listed in ``specialize`` is one kernel
(a tactic requiring ``dim(x, 1) == N``), every other N is refused, and the op runs from C++ with neither QuACK nor
the CuTe DSL.

- softmax: ``softmax_fwd`` with ``softmax_bwd`` as its backward, unchanged (QuACK's ``SoftmaxFunction`` saves y).
- softmax_wide: the same at row lengths QuACK launches in thread-block clusters on sm_90 (its ``cluster_n``: 2 blocks
  a row at 32K, 4 at 64K, the row split between the blocks' shared memory; 16K in one block, a cluster of 1),
  compiled for sm_90a alone (sm_80 has no clusters, and QuACK's choice of cluster reads the architecture).
- rms_norm: ``rmsnorm_fwd(x, weight, eps=eps, store_rstd=True)`` with ``rmsnorm_bwd`` as its backward, unchanged:
  QuACK's backward calls its own torch.library op (whose Python body kernelop records: Note [custom ops' bodies]),
  whose kernel writes per-SM partials of dW (the op's scratch, sized from the device's SM count) that
  ``dw_partial.sum(dim=0).to(weight.dtype)`` reduces (a launch of kernelop's own sum kernel).
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".deps", "quack"))

import kernelop as ko  # noqa: E402

try:  # imported before recording, so that kernelop turns QuACK's on-disk kernel cache off while it records
    import quack.rmsnorm  # noqa: E402,F401
    import quack.softmax  # noqa: E402,F401
except ImportError:  # (the GPU machine runs the packages, without QuACK)
    pass

N_VALUES = [1024, 4096, 8192]  # the row lengths (N) compiled in: one kernel each
WIDE_N_VALUES = [16384, 32768, 65536]  # row lengths QuACK launches in clusters (from 32K; 16K in one block)
DTYPE = torch.bfloat16


def _module(name):
    """quack.<name> (the package's __init__ rebinds quack.softmax and quack.rmsnorm to functions)."""
    import importlib
    return importlib.import_module(f"quack.{name}")


def softmax_fwd(x: torch.Tensor) -> torch.Tensor:
    return _module("softmax").softmax_fwd(x)


def softmax_bwd(y: torch.Tensor, grad_y: torch.Tensor) -> torch.Tensor:
    """SoftmaxFunction.backward: dx from dy and the saved y."""
    return _module("softmax").softmax_bwd(grad_y, y)


def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """rmsnorm_fwd as QuACK's RMSNormFunction.forward calls it: the output and the rstd it saves (its residual_out
    is x itself here)."""
    out, _, rstd = _module("rmsnorm").rmsnorm_fwd(x, weight, eps=eps, store_rstd=True)
    return out, rstd


def rms_norm_bwd(x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor, grad_y: torch.Tensor):
    """rmsnorm_bwd as RMSNormFunction.backward calls it (no bias, no residual): dx, and dw summed from per-SM
    partials (QuACK's torch.ops.quack.rmsnorm_bwd_f, then dw_partial.sum(dim=0).to(weight.dtype))."""
    dx, dw, _, _ = _module("rmsnorm").rmsnorm_bwd(x, weight, grad_y, rstd)
    return dx, dw


def recorded(ns, n_values=None, dtype=DTYPE):
    """The ops recorded (not yet registered): name -> kernelop.RecordedPlugin."""
    n_values = list(n_values or N_VALUES)
    x = torch.empty(8, n_values[-1], dtype=dtype, device="meta")
    w = torch.empty(n_values[-1], dtype=dtype, device="meta")
    wide = torch.empty(8, WIDE_N_VALUES[-1], dtype=dtype, device="meta")
    return {
        "softmax": ko.record_plugin(
            ko.cutedsl(softmax_fwd, specialize=n_values, outputs=["y"]), op_name=f"{ns}::softmax",
            example_inputs={"x": x}, backward=ko.Backward(["x"], ko.cutedsl(softmax_bwd))),
        "softmax_wide": ko.record_plugin(
            ko.cutedsl(softmax_fwd, specialize=WIDE_N_VALUES, outputs=["y"], arch="sm_90a"),
            op_name=f"{ns}::softmax_wide", example_inputs={"x": wide},
            backward=ko.Backward(["x"], ko.cutedsl(softmax_bwd))),
        "rms_norm": ko.record_plugin(
            ko.cutedsl(rms_norm_fwd, specialize=n_values, outputs=["y", "rstd"]), op_name=f"{ns}::rms_norm",
            example_inputs={"x": x, "weight": w},
            backward=ko.Backward(["x", "weight"], ko.cutedsl(rms_norm_bwd))),
    }


def register(ns="kop_quack", archs=None):
    """Registers the ops; returns name -> torch.ops packet."""
    return {name: r.register(archs) for name, r in recorded(ns).items()}


if __name__ == "__main__":
    from kernelop._recording import package_main

    package_main("QuACK's softmax and RMSNorm", recorded, "kop_quack")
