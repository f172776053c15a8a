"""QuACK's softmax and RMSNorm (examples/quack_ops.py: registered from QuACK's own host functions, recorded and
packaged on a machine without a GPU; softmax and RMSNorm each with its backward) through kernelop, against PyTorch's own ops, side by side in one run.

Runs where neither the CuTe DSL nor QuACK is installed: the ops come from the packages scripts/stage-gpu built
(KERNELOP_CPU_PACKAGES). Reports device time per call (CUDA events around back-to-back calls, median of interleaved
rounds: cutile_bench's timing) and the ratio torch / kernelop (above 1: kernelop is faster), bfloat16, at the
shapes the issue names (4 x 4096: one small batch; 8192 x 4096: bandwidth-bound), and softmax at 4096 x 32768 and
4096 x 65536, rows QuACK splits between the blocks of a thread-block cluster (softmax_wide).
Usage: python bench/quack_bench.py [OUT.txt]
"""

import os
import sys

import torch

import kernelop as ko
from autograd_bench import publish  # noqa: E402  (this folder's: one report)
from cutile_bench import host_us, interleaved  # noqa: E402  (this folder's: one timing loop, one interleaving)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    packages = os.environ["KERNELOP_CPU_PACKAGES"]
    sm = ko.load_package(os.path.join(packages, "kop_quack.softmax.kop"))
    rms = ko.load_package(os.path.join(packages, "kop_quack.rms_norm.kop"))
    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; QuACK 0.6.5 kernels from packages built "
             "without a GPU; bfloat16",
             "device us per call (events around 50 back-to-back calls, median of 5 interleaved rounds); host us per "
             "call; torch/kernelop > 1: kernelop faster"]
    for m, n in ((4, 4096), (8192, 4096)):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        g = torch.randn_like(x)
        y = sm(x)
        torch.testing.assert_close(y.float(), torch.softmax(x.float(), 1), atol=2e-3, rtol=2e-2)
        bwd = torch.ops.kop_quack.softmax_backward
        rows = {
            "softmax fwd": (lambda: sm(x), lambda: torch.softmax(x, 1)),
            "softmax bwd": (lambda: bwd(y, g), lambda: torch._softmax_backward_data(g, y, 1, torch.bfloat16)),
            "rms_norm fwd": (lambda: rms(x, w, 1e-5), lambda: torch.nn.functional.rms_norm(x, (n,), w, 1e-5)),
        }
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        y_kop, y_ref = rms(xg, wg, 1e-5)[0], torch.nn.functional.rms_norm(xg, (n,), wg, 1e-5)
        rows["rms_norm bwd"] = (lambda: torch.autograd.grad(y_kop, (xg, wg), g, retain_graph=True),
                                lambda: torch.autograd.grad(y_ref, (xg, wg), g, retain_graph=True))
        for name, (kop, ref) in rows.items():
            d = interleaved({"kernelop": kop, "torch": ref})
            h = {"kernelop": host_us(kop), "torch": host_us(ref)}
            lines.append(f"{name:13s} [{m}, {n}]  device kernelop {d['kernelop']:8.2f}  torch {d['torch']:8.2f}  "
                         f"torch/kernelop {d['torch'] / d['kernelop']:.2f}   host kernelop {h['kernelop']:6.2f}  "
                         f"torch {h['torch']:6.2f}")
    wide = ko.load_package(os.path.join(packages, "kop_quack.softmax_wide.kop"))
    for m, n in ((4096, 32768), (4096, 65536)):  # cluster launches (2 and 4 blocks a row)
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(wide(x).float(), torch.softmax(x.float(), 1), atol=2e-3, rtol=2e-2)
        d = interleaved({"kernelop": lambda: wide(x), "torch": lambda: torch.softmax(x, 1)})
        lines.append(f"{'softmax fwd':13s} [{m}, {n}]  device kernelop {d['kernelop']:8.2f}  torch {d['torch']:8.2f}  "
                     f"torch/kernelop {d['torch'] / d['kernelop']:.2f}   (cluster launch)")
    publish(lines, out_path)


if __name__ == "__main__":
    main()
