"""Per-call cost of a kernelop op against the other ways to call the same kernel from PyTorch.

relu on 4096 float32 elements (so the host side dominates): kernelop's torch.ops op against
  (a) torch.relu, (b) the same kernel in a hand-written C++ extension registered with
  TORCH_LIBRARY, (c) a Python torch.library.custom_op launching it through cuda.core (what
  torch_tensorrt.kernels does), (d) CuPy's RawKernel, and kernelop's override path (a Python
  eager_fn launching through kernelop.kernel; a Python meta_fn shaping kernelop's C++ launch);
and the per-kernel cost inside a replayed CUDA graph. One process, interleaved rounds, medians.
Usage: python bench/torch_bench.py [OUTFILE]   (needs a GPU and the kernelop package)
"""

import os
import statistics
import sys
import time

import numpy as np
import torch

import kernelop as ko
from autograd_bench import publish  # this folder's: one report

N = 4096
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = open(os.path.join(ROOT, "examples", "relu.cu")).read()


def kernelop_relu():
    return ko.cuda_kernel_op("bench_kop::relu", ko.KernelSpec(
        SRC, "relu", inputs=[ko.InputDecl("x", torch.float32)], outputs=[ko.OutputDecl("y", ko.SameAs("x"))],
        extras=[ko.Numel("x")], geometry=ko.Elementwise()))


def kernelop_torch_entry_relu():
    """The same op through PyTorch's generic torch.ops entry, kernelop's fast Python entry bypassed (what every
    custom op pays): a packet-shaped object calling the entry kernelop hands its other calls to."""
    fallback = kernelop_relu()._op.fallback

    class Packet:
        def __call__(self, x):
            return fallback(x)

    return Packet()


def kernelop_eager_fn_relu():
    """The override path: a Python eager_fn launching the compiled kernel (kernelop.kernel)."""
    k = None

    def eager(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        k.launch((n + 255) // 256, 256, (x, n, y))
        return y

    spec = ko.KernelSpec(SRC, "relu", inputs=[ko.InputDecl("x", torch.float32)],
                         outputs=[ko.OutputDecl("y", ko.SameAs("x"))], extras=[ko.Numel("x")])
    op = ko.cuda_kernel_op("bench_kop::relu_eager_fn", spec, eager_fn=eager)
    k = ko.kernel("bench_kop::relu_eager_fn")
    return op


def kernelop_meta_fn_relu():
    """The override path: outputs shaped by a Python meta_fn, launched by kernelop from C++."""
    spec = ko.KernelSpec(SRC, "relu", inputs=[ko.InputDecl("x", torch.float32)], extras=[ko.Numel("x")],
                         geometry=ko.Elementwise())

    def meta(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    return ko.cuda_kernel_op("bench_kop::relu_meta_fn", spec, meta_fn=meta)


def extension_relu():
    from torch.utils.cpp_extension import load_inline
    cuda = SRC + r"""
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/library.h>
at::Tensor relu_ext(const at::Tensor& x) {
  auto y = at::empty_like(x);
  int n = static_cast<int>(x.numel());
  relu<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), n, y.data_ptr<float>());
  return y;
}
TORCH_LIBRARY(bench_ext, m) { m.def("relu(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(bench_ext, CUDA, m) { m.impl("relu", &relu_ext); }
"""
    load_inline(name="bench_ext", cpp_sources="", cuda_sources=cuda, is_python_module=False,
                extra_cuda_cflags=["-gencode=arch=compute_90,code=sm_90"])
    return torch.ops.bench_ext.relu


def cuda_core_relu():
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    dev = Device()
    dev.set_current()
    prog = Program(SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    kernel = prog.compile("cubin").get_kernel("relu")

    class TorchStream:  # the current torch stream, through the __cuda_stream__ protocol
        def __cuda_stream__(self):
            return (0, torch.cuda.current_stream().cuda_stream)

    @torch.library.custom_op("bench_py::relu", mutates_args=())
    def relu(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        launch(dev.create_stream(TorchStream()), LaunchConfig(grid=(n + 255) // 256, block=256), kernel,
               x.data_ptr(), np.int32(n), y.data_ptr())
        return y

    @relu.register_fake
    def _(x):
        return torch.empty_like(x)

    return relu


def cupy_relu():
    import cupy as cp
    kernel = cp.RawKernel(SRC, "relu")

    def relu(x):
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel(((n + 255) // 256,), (256,), (np.uint64(x.data_ptr()), np.int32(n), np.uint64(y.data_ptr())))
        return y

    return relu


def per_call_us(fn, x, calls=2000):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def graph_per_kernel_us(fn, x, kernels=200, replays=50):
    fn(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(kernels):
            fn(x)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / kernels)
    return statistics.median(times)


def main():
    x = torch.randn(N, device="cuda")
    variants = {"kernelop torch.ops": kernelop_relu, "torch.relu (native)": lambda: torch.relu,
                "kernelop via PyTorch's entry": kernelop_torch_entry_relu,
                "C++ extension (TORCH_LIBRARY)": extension_relu, "custom_op + cuda.core": cuda_core_relu,
                "CuPy RawKernel": cupy_relu, "kernelop eager_fn (override)": kernelop_eager_fn_relu,
                "kernelop meta_fn (override)": kernelop_meta_fn_relu}
    fns, unavailable = {}, {}
    for name, make in variants.items():
        try:
            fn = make()
            torch.testing.assert_close(fn(x), torch.relu(x), rtol=0, atol=0)
            fns[name] = fn
        except Exception as e:  # a missing comparator is reported, not fatal
            unavailable[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    rounds = {name: [] for name in fns}
    for fn in fns.values():
        per_call_us(fn, x, 200)  # warm up
    for _ in range(7):
        for name, fn in fns.items():
            rounds[name].append(per_call_us(fn, x))
    lines = [f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}",
             f"per-call cost, relu on {N} float32 (median of 7 interleaved rounds of 2000 calls)"]
    base = statistics.median(rounds["kernelop torch.ops"]) if "kernelop torch.ops" in rounds else None
    for name in fns:
        us = statistics.median(rounds[name])
        ratio = f"   kernelop / this = {base / us:.2f}" if base and name != "kernelop torch.ops" else ""
        lines.append(f"  {name:32s} {us:7.2f} us{ratio}")
    for name, why in unavailable.items():
        lines.append(f"  {name:32s} unavailable: {why}")
    lines.append("per-kernel cost inside a replayed CUDA graph (200 kernels per graph, median of 50 replays)")
    for name, fn in fns.items():
        try:
            lines.append(f"  {name:32s} {graph_per_kernel_us(fn, x):7.2f} us")
        except Exception as e:
            lines.append(f"  {name:32s} not capturable: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
    publish(lines, sys.argv[1] if len(sys.argv) > 1 else None)


if __name__ == "__main__":
    main()
