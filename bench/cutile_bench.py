"""The cuTile examples (examples/cutile_kernels.py) as kernelop ops, against the same CUBIN launched by CuPy's
RawModule, and against PyTorch's own op, side by side in one run.

Runs where cuTile is not installed: the ops come from the packages scripts/stage-gpu built on the CPU machine
(KERNELOP_CPU_PACKAGES), and CuPy loads the very CUBIN the package holds for this GPU (kernelop._kernelop
.package_images), launched with the arguments cuTile's calling convention gives it (pointer, sizes, strides as int32;
scalars). Reports device time per kernel (CUDA events around back-to-back launches, median of interleaved rounds:
kernelop / CuPy must be 1.00, the same machine code) and host time per call (a loop of calls, then a synchronize).
Usage: python bench/cutile_bench.py [OUT.txt]
"""

import os
import statistics
import sys
import tempfile
import time

import torch

import kernelop as ko
from kernelop import _kernelop
from autograd_bench import publish  # noqa: E402  (this folder's: one report)


def device_us(fn, launches=50, rounds=7):
    """Median over rounds of the device time per launch of `launches` back-to-back calls of fn()."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(rounds):
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def host_us(fn, iters=2000, rounds=5):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
    return best


def interleaved(fns, **kw):
    """Device time of each of `fns` (name -> fn), measured in interleaved rounds: median per name."""
    out = {n: [] for n in fns}
    for _ in range(5):
        for n, fn in fns.items():
            out[n].append(device_us(fn, **kw))
    return {n: statistics.median(v) for n, v in out.items()}


def cupy_function(package, arch, folder):
    """CuPy's handle to the package's CUBIN for `arch` (the first tactic's), and the block it requires."""
    import cupy as cp
    image = next(i for i in _kernelop.package_images(package) if i["arch"] == arch and i["program"] == 0)
    path = os.path.join(folder, f"{image['entry']}.cubin")
    with open(path, "wb") as f:
        f.write(image["data"])
    return cp.RawModule(path=path).get_function(image["entry"]), _kernelop.cubin_required_block(image["data"],
                                                                                               image["entry"])


def main():
    import cupy as cp
    import numpy as np

    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    packages = os.environ["KERNELOP_CPU_PACKAGES"]
    major, minor = torch.cuda.get_device_capability()
    arch = {8: "sm_80", 9: "sm_90", 10: "sm_100"}.get(major)
    lines = [f"# {torch.cuda.get_device_name()} (sm_{major}{minor}), torch {torch.__version__}; cuTile CUBINs "
             f"for {arch} from packages built without a GPU",
             "device time per kernel in us (events around 50 back-to-back launches, median of 5 interleaved rounds); "
             "host time per call in us"]
    folder = tempfile.mkdtemp(prefix="kop_cutile_bench_")
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    add = ko.load_package(os.path.join(packages, "kop_cutile.scaled_add.kop"))
    f, block = cupy_function(os.path.join(packages, "kop_cutile.scaled_add.kop"), arch, folder)
    for n in (4096, 1 << 24):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.empty_like(a)
        args = (a.data_ptr(), np.int32(n), np.int32(1), b.data_ptr(), np.int32(n), np.int32(1), out.data_ptr(),
                np.int32(n), np.int32(1), np.float32(0.5))
        grid = ((n + 1023) // 1024, 1, 1)

        def cupy_call():
            f(grid, tuple(block), args, stream=stream)

        def kop_call():
            add(a, b, 0.5)

        cupy_call()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 0.5 * a + b)
        d = interleaved({"kernelop": kop_call, "CuPy RawModule": cupy_call, "torch": lambda: torch.add(b, a, alpha=0.5)})
        h = {"kernelop": host_us(kop_call), "CuPy RawModule": host_us(cupy_call),
             "torch": host_us(lambda: torch.add(b, a, alpha=0.5))}
        lines.append(f"scaled_add [{n}] float32")
        for name in d:
            lines.append(f"  {name:16s} device {d[name]:9.2f}  host {h[name]:7.2f}   kernelop/{name}: device "
                         f"{d['kernelop'] / d[name]:.3f}, host {h['kernelop'] / h[name]:.3f}")

    softmax = ko.load_package(os.path.join(packages, "kop_cutile.softmax.kop"))
    for shape in ((4, 4096), (8192, 4096)):
        x = torch.randn(shape, device="cuda")
        torch.testing.assert_close(softmax(x), torch.softmax(x, 1))
        d = interleaved({"kernelop": lambda: softmax(x), "torch": lambda: torch.softmax(x, 1)})
        lines.append(f"softmax {list(shape)} float32: device kernelop {d['kernelop']:.2f}, torch {d['torch']:.2f}, "
                     f"kernelop/torch {d['kernelop'] / d['torch']:.3f}")

    matmul = ko.load_package(os.path.join(packages, "kop_cutile.matmul.kop"))
    for m in (1024, 4096):
        a = torch.randn(m, m, device="cuda", dtype=torch.float16)
        b = torch.randn(m, m, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(matmul(a, b), a @ b, atol=0.5, rtol=2e-2)
        d = interleaved({"kernelop": lambda: matmul(a, b), "torch": lambda: a @ b}, launches=10)
        tflops = 2 * m ** 3 / (d["kernelop"] * 1e-6) / 1e12
        lines.append(f"matmul [{m}, {m}] x [{m}, {m}] float16: device kernelop {d['kernelop']:.1f} "
                     f"({tflops:.0f} TFLOP/s), torch (cuBLAS) {d['torch']:.1f}, kernelop/torch "
                     f"{d['kernelop'] / d['torch']:.3f}")
    publish(lines, out_path)


if __name__ == "__main__":
    main()
