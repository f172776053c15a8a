"""The same Triton kernel (examples/triton_kernels.py vector_add) called five ways, side by side in one run.

- kernelop: ko.custom_plugin's op (torch.ops, C++ per call), with the tactic pinned to the launch's own config
  (BLOCK_SIZE=1024, num_warps=4, Triton's specialisations) and, separately, as tuned;
- triton: the launch_fn itself, Triton's own Python launch ``add_kernel[grid](...)``;
- custom_op: a torch.library.custom_op whose body is the launch_fn;
- triton_op: torch.library.triton_op (wrap_triton) with the same body.

Reports per-call host time (a loop of calls, then one synchronize), device time per kernel (CUDA events around a
replayed CUDA graph of the launches), and per-call time inside a replayed graph, at 4096 and 16M float32 elements.
Usage: python bench/triton_bench.py [OUT.txt]
"""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import triton_kernels as tk  # noqa: E402

import kernelop as ko  # noqa: E402
from autograd_bench import publish  # noqa: E402  (this folder's: one report)


def per_call_us(fn, args, iters):
    for _ in range(20):
        fn(*args)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(*args)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
    return best


def graph_us(fn, args, launches=100):
    """Per call inside a replayed CUDA graph of `launches` calls (device time when the kernels are long)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            fn(*args)
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(10):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / launches)
    return best


def main(out_path=None):
    op = tk.register("kop_bench")["vector_add"]
    k = ko.kernel("kop_bench::vector_add")
    same = k.tactics.index("BLOCK_SIZE=1024, num_warps=4, num_stages=3, divisible=2")

    @torch.library.custom_op("kop_bench_ref::vector_add", mutates_args=())
    def custom(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return tk.vector_add(x, y)

    @custom.register_fake
    def _(x, y):
        return torch.empty_like(x)

    from torch.library import triton_op, wrap_triton

    @triton_op("kop_bench_ref::vector_add_triton_op", mutates_args=())
    def as_triton_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        output = torch.empty_like(x)
        n = output.numel()
        wrap_triton(tk.add_kernel)[(lambda meta: ((n + meta["BLOCK_SIZE"] - 1) // meta["BLOCK_SIZE"],))](
            x, y, output, n, BLOCK_SIZE=1024)
        return output

    def kernelop_pinned(x, y):
        return op(x, y)

    lines = [f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}",
             "vector_add (Triton tutorial kernel), float32; per call in microseconds; ratios = kernelop / other"]
    for n, iters in ((4096, 20000), (16 * 1024 * 1024, 300)):
        x = torch.randn(n // 1024, 1024, device="cuda")
        y = torch.randn(n // 1024, 1024, device="cuda")
        torch.testing.assert_close(op(x, y), x + y)
        k.pin_tactic(same)
        ways = {"kernelop": kernelop_pinned, "triton": tk.vector_add, "custom_op": custom,
                "triton_op": as_triton_op}
        host = {name: per_call_us(fn, (x, y), iters) for name, fn in ways.items()}
        graph = {name: graph_us(fn, (x, y)) for name, fn in ways.items()}
        k.pin_tactic(None)
        tuned_host = per_call_us(op, (x, y), iters)
        tuned_graph = graph_us(op, (x, y))
        tuned = k.tactics[k.last_tactic]
        lines.append(f"n={n}:")
        lines.append("  host per call:   " + ", ".join(f"{w} {host[w]:.2f}" for w in ways) +
                     f" | kernelop/custom_op {host['kernelop'] / host['custom_op']:.3f}, kernelop/triton "
                     f"{host['kernelop'] / host['triton']:.3f}, kernelop/triton_op "
                     f"{host['kernelop'] / host['triton_op']:.3f}")
        lines.append("  in a CUDA graph: " + ", ".join(f"{w} {graph[w]:.2f}" for w in ways) +
                     f" | kernelop/triton {graph['kernelop'] / graph['triton']:.3f} (same config: device time)")
        lines.append(f"  tuned kernelop ({tuned}): host {tuned_host:.2f}, in a graph {tuned_graph:.2f} "
                     f"(tuned/triton in a graph {tuned_graph / graph['triton']:.3f})")
    publish(lines, out_path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
