"""Liger-Kernel's ops through kernelop against Liger's own autograd Functions and plain torch, side by side.

The kernelop ops are registered from Liger's own host functions (examples/liger_ops.py, which
tests/python/test_liger.py checks): RoPE (``rope_forward`` / ``rope_backward``, unchanged), cross entropy
(``cross_entropy_forward`` / ``_backward`` line for line, the count of kept rows on the device; and with
``host_sync=True``, Liger's own host code, its ``.item()`` and ``torch.equal`` read at launch), SwiGLU forward +
backward (``swiglu_forward`` / ``swiglu_backward``, a recorded
backward) and RMSNorm forward and backward (``rms_norm_forward`` / ``rms_norm_backward``, whose per-SM partials of
dW are the op's scratch and whose ``_dW.sum(dim=0).to(W.dtype)`` is a launch of kernelop's own sum kernel). A
*step* is forward + backward (the gradients of every input); RMSNorm is timed forward alone too. Liger's Functions
run with their defaults (RMSNorm's backward writes dX over the incoming gradient, in place; so does kernelop's when
autograd gave the gradient to it alone, as in a model, where the next node's backward makes it: the bench's step
ends in a multiply by 1, timed alone and subtracted).

Each round times every variant once, in a fresh random order (autograd_bench.interleaved), as a loop of steps
closed by one synchronize, and the figure is the median over rounds of the time per step: host-bound at small
sizes (the per-call cost), device-bound at large ones. Device time is torch.profiler's kernel and copy time.
Liger-Kernel comes from .deps/liger (scripts/fetch-liger).
Usage: python bench/liger_bench.py [OUT.txt]
"""

import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".deps", "liger"))

import kernelop as ko  # noqa: E402,F401  (liger_ops records through it)
from autograd_bench import interleaved, per_step_us, publish  # noqa: E402  (this folder's: one timing loop, one interleaving)

sys.path.insert(0, os.path.join(ROOT, "examples"))
import liger_ops  # noqa: E402  (examples/liger_ops.py: the ops, from Liger's host functions)
from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction  # noqa: E402
from liger_kernel.ops.rms_norm import LigerRMSNormFunction  # noqa: E402
from liger_kernel.ops.swiglu import LigerSiLUMulFunction  # noqa: E402


def device_us(step, steps=10):
    """Device time per step: the GPU time of every kernel and copy the steps ran (torch.profiler), gaps excluded."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / steps


def compare(variants, iters, rounds=15):
    """Per variant: the median µs per step (wall: autograd_bench's interleaved rounds of per_step_us) and the device
    µs per step (median of 5 profiles)."""
    samples = interleaved(variants, per_step_us, iters, rounds)
    device = {name: statistics.median(device_us(step) for _ in range(5)) for name, step in variants.items()}
    return {name: (statistics.median(v), device[name]) for name, v in samples.items()}


def swiglu_rows(shape, dtype):
    """SwiGLU as a model runs it: a and b are activations (made in the step, as x @ w_gate and x @ w_up would be),
    which only the op's graph holds after the forward. kernelop's backward then writes the gradients over them
    (docs/autograd.md, donated inputs); Liger's always does, over whatever it is given. The activations are made by
    a multiply by 1 whose own forward and backward are timed alone and subtracted from every variant's step."""
    op = liger_ops.swiglu(dtype, "kop_liger_bench::swiglu", hidden=[4096]).register()
    a0 = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    b0 = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    g = torch.randn(shape, device="cuda", dtype=dtype)

    def kernelop_step():
        torch.autograd.grad(op(a0 * 1.0, b0 * 1.0), (a0, b0), g)

    def liger_step():
        torch.autograd.grad(LigerSiLUMulFunction.apply(a0 * 1.0, b0 * 1.0), (a0, b0), g)

    def torch_step():
        torch.autograd.grad(torch.nn.functional.silu(a0 * 1.0) * (b0 * 1.0), (a0, b0), g)

    def activations_alone():
        torch.autograd.grad((a0 * 1.0, b0 * 1.0), (a0, b0), (g, g))

    iters = 200 if a0.numel() < 1 << 20 else 20
    t = compare({"kernelop": kernelop_step, "liger": liger_step, "torch": torch_step,
                 "activations": activations_alone}, iters)
    base = t.pop("activations")
    return {name: (wall - base[0], device - base[1]) for name, (wall, device) in t.items()}


_rms_ops = {}


def rms_op(dtype):
    if dtype not in _rms_ops:
        _rms_ops[dtype] = liger_ops.rms_norm(dtype, "kop_liger_bench::rms_norm", specialize=[4096]).register()
    return _rms_ops[dtype]


def rms_rows(shape, dtype, step):
    op = rms_op(dtype)
    x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=step)
    w = torch.randn(shape[-1], device="cuda", dtype=dtype, requires_grad=step)
    g = torch.randn(shape, device="cuda", dtype=dtype)
    lx, lw = x.detach().clone().requires_grad_(step), w.detach().clone().requires_grad_(step)

    def torch_rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype) * w

    iters = 500 if x.numel() < 1 << 20 else 50
    if not step:
        with torch.no_grad():
            return compare({"kernelop": lambda: op(x, w, 1e-6),
                            "liger": lambda: LigerRMSNormFunction.apply(x, w, 1e-6),
                            "torch": lambda: torch_rms(x, w)}, iters)
    # As a model runs it, the incoming gradient is made by the next node's backward (here a multiply by 1, whose own
    # forward and backward are timed alone and subtracted from every variant's step), so it is autograd's alone:
    # Liger's backward writes dX over it (in place, its default); kernelop's takes its buffer (donated inputs).
    t = compare({"kernelop": lambda: torch.autograd.grad(op(x, w, 1e-6)[0] * 1.0, (x, w), g),
                 "liger": lambda: torch.autograd.grad(LigerRMSNormFunction.apply(lx, lw, 1e-6) * 1.0, (lx, lw), g),
                 # Liger's Function not in place (in_place=False): it zeroes dX first
                 "liger_intact": lambda: torch.autograd.grad(
                     LigerRMSNormFunction.apply(lx, lw, 1e-6, 0.0, "llama", False) * 1.0, (lx, lw), g),
                 "torch": lambda: torch.autograd.grad(torch_rms(x, w) * 1.0, (x, w), g),
                 "scale": lambda: torch.autograd.grad(x * 1.0, (x,), g)}, iters)
    base = t.pop("scale")
    return {name: (wall - base[0], device - base[1]) for name, (wall, device) in t.items()}


def ce_rows(shape, dtype, in_place, host_sync=False):
    """Cross entropy as a model runs it: the logits are an activation (made in the step by a multiply by 1, timed
    alone and subtracted from every variant's step, as x @ w_lm_head would make them). Liger's Function writes the
    gradient over them; so does kernelop's op made with ``in_place=True`` (``Tensor(a!) _input``), whose backward
    then scales it in the logits' own buffer (donated inputs); the functional op (``in_place=False``) copies them
    first and leaves them intact. ``host_sync``: the op made with Liger's host syncs (the loss is the last layer:
    its backward runs no kernel, as Liger's)."""
    op = liger_ops.cross_entropy(dtype, f"kop_liger_bench::cross_entropy{'_' if in_place else ''}"
                                 f"{'synced' if host_sync else ''}", vocabs=[32768], in_place=in_place,
                                 host_sync=host_sync).register()
    rows, vocab = shape
    x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
    t = torch.randint(0, vocab, (rows,), device="cuda")
    t[::7] = -100

    def kernelop_step():
        out = op(x * 1.0, t)
        torch.autograd.grad(out if in_place and host_sync else out[0], (x,))

    def liger_step():
        torch.autograd.grad(LigerCrossEntropyFunction.apply(x * 1.0, t, None, -100)[0], (x,))

    def torch_step():
        torch.autograd.grad(torch.nn.functional.cross_entropy(x * 1.0, t), (x,))

    def logits_alone():
        torch.autograd.grad(x * 1.0, (x,), x.detach())

    iters = 200 if x.numel() < 1 << 20 else 20
    t = compare({"kernelop": kernelop_step, "liger": liger_step, "torch": torch_step, "logits": logits_alone}, iters)
    base = t.pop("logits")
    return {name: (wall - base[0], device - base[1]) for name, (wall, device) in t.items()}


def rope_rows(shape, dtype, in_place):
    """RoPE as a Llama attention runs it (32 query heads, 8 key-value heads of 128): q and k are transposed views of
    (batch, seq, heads * head_dim) projections, as HF makes them (the projections made in the step by a multiply by
    1, timed alone and subtracted from every variant's step, as x @ w_q would make them), so Liger's
    ``q.transpose(1, 2).contiguous()`` is no copy and its kernel rotates the projections in place; so does kernelop's
    op made with ``in_place=True`` (q and k written results); the functional op copies them first (one strided copy
    each) and leaves them intact. The gradients arrive contiguous, as the attention's backward makes them."""
    batch, seq, _ = shape
    op = liger_ops.rope(dtype, f"kop_liger_bench::rope{'_' if in_place else ''}", batches=(1, 2), q_heads=(32,),
                        kv_heads=(8,), head_dims=(128,), in_place=in_place).register()
    from liger_kernel.ops.rope import LigerRopeFunction
    q0 = torch.randn(batch, seq, 32 * 128, device="cuda", dtype=dtype, requires_grad=True)
    k0 = torch.randn(batch, seq, 8 * 128, device="cuda", dtype=dtype, requires_grad=True)
    freqs = torch.outer(torch.arange(seq, device="cuda", dtype=torch.float32),
                        1e4 ** (-torch.arange(0, 128, 2, device="cuda", dtype=torch.float32) / 128))
    angles = torch.cat((freqs, freqs), -1)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    gq = torch.randn(batch, 32, seq, 128, device="cuda", dtype=dtype)
    gk = torch.randn(batch, 8, seq, 128, device="cuda", dtype=dtype)

    def hf():  # q and k as HF makes them from the projections
        return ((q0 * 1.0).view(batch, seq, 32, 128).transpose(1, 2),
                (k0 * 1.0).view(batch, seq, 8, 128).transpose(1, 2))

    def rotate_half(x):
        return torch.cat((-x[..., 64:], x[..., :64]), -1)

    def torch_rope(q, k):
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def kernelop_step():
        q, k = hf()
        if in_place:
            op(q, k, cos, sin)
        else:
            q, k = op(q, k, cos, sin)
        torch.autograd.grad((q, k), (q0, k0), (gq, gk))

    iters = 200 if q0.numel() < 1 << 20 else 20
    t = compare({
        "kernelop": kernelop_step,
        "liger": lambda: torch.autograd.grad(LigerRopeFunction.apply(*hf(), cos, sin), (q0, k0), (gq, gk)),
        "torch": lambda: torch.autograd.grad(torch_rope(*hf()), (q0, k0), (gq, gk)),
        "projections": lambda: torch.autograd.grad(hf(), (q0, k0), (gq, gk))}, iters)
    base = t.pop("projections")
    return {name: (wall - base[0], device - base[1]) for name, (wall, device) in t.items()}


def main():
    lines = [f"device: {torch.cuda.get_device_name()}  (torch {torch.__version__}, Liger-Kernel "
             f"{open(os.path.join(ROOT, '.deps', 'liger', 'VERSION')).read().strip()})",
             "µs per step, wall (median of 15 interleaved rounds of a loop of steps) and device (kernels and copies, "
             "torch.profiler); fwd+bwd: a step of forward and backward",
             "Liger*: Liger's Function not writing over autograd's tensors (RMSNorm's in_place=False; "
             "SwiGLU's has no such mode)",
             f"{'op':<22}{'shape':<13}{'wall:':>6}{'kernelop':>9}{'Liger':>8}{'torch':>8}{'kop/Liger':>10}"
             f"{'device:':>9}{'kernelop':>9}{'Liger':>8}{'torch':>8}{'kop/Liger':>10}{'Liger*':>8}{'kop/Liger*':>11}"]
    dtype = torch.bfloat16
    results = []
    for shape in ((1, 4, 4096), (2, 4096, 4096)):
        t = swiglu_rows(shape, dtype)
        results.append(("swiglu fwd+bwd", shape, t))
    for shape in ((4, 4096), (8192, 4096)):
        results.append(("rms_norm fwd", shape, rms_rows(shape, dtype, False)))
        results.append(("rms_norm fwd+bwd", shape, rms_rows(shape, dtype, True)))
    for shape in ((4, 32000), (4096, 32000)):
        results.append(("cross_entropy fwd+bwd", shape, ce_rows(shape, dtype, True)))
        results.append(("  host_sync", shape, ce_rows(shape, dtype, True, True)))
        results.append(("  functional", shape, ce_rows(shape, dtype, False)))
    for shape in ((1, 4, 4096), (2, 4096, 4096)):
        results.append(("rope fwd+bwd", shape, rope_rows(shape, dtype, True)))
        results.append(("  functional", shape, rope_rows(shape, dtype, False)))
    for name, shape, t in results:
        row = f"{name:<22}{'x'.join(map(str, shape)):<13}"
        for i in (0, 1):
            row += f"{'':>6}" if i == 0 else f"{'':>9}"
            row += f"{t['kernelop'][i]:>9.1f}{t['liger'][i]:>8.1f}{t['torch'][i]:>8.1f}"
            row += f"{t['kernelop'][i] / t['liger'][i]:>10.3f}"
        intact = t.get("liger_intact")
        row += f"{intact[1]:>8.1f}{t['kernelop'][1] / intact[1]:>11.3f}" if intact else f"{'-':>8}{'-':>11}"
        lines.append(row)
    targeted = [(name, shape, t) for name, shape, t in results if not name.startswith(" ")]  # not the variants
    small = [t["kernelop"][0] / t["liger"][0] for _, shape, t in targeted if shape[-2] == 4]
    # Cross entropy's large step: the op a training loop that wants the fewest passes over the logits takes, the one
    # with Liger's host syncs (the graph-safe default scales the gradient in a pass of its backward).
    synced = {shape: t for name, shape, t in results if name == "  host_sync"}
    large = [(synced[shape] if name.startswith("cross_entropy") else t)["kernelop"][1] /
             (synced[shape] if name.startswith("cross_entropy") else t)["liger"][1]
             for name, shape, t in targeted if shape[-2] != 4]
    same = [t["kernelop"][1] / t["liger_intact"][1] for _, shape, t in results
            if shape[-2] != 4 and "liger_intact" in t]
    lines.append("Liger's cross entropy and SwiGLU write their gradients over the logits / a, b they are given; "
                 "kernelop's SwiGLU and RMSNorm backwards take the buffers of activations and gradients only their "
                 "graph holds (timed net of making them); its cross entropy writes over the logits as Liger's "
                 "(in_place=True; the functional op copies them first), counts the kept rows on the device and "
                 "scales the gradient in its backward (Liger's .item() and torch.equal(grad_output, 1) sync the "
                 "host, and skip that scale: so does the host_sync op, which no CUDA graph can capture; the large "
                 "target is measured on it); Liger's RoPE rotates the q and k projections it is given in place, "
                 "so does kernelop's (in_place=True: q and k are its results; the functional op copies them first, "
                 "one strided copy each, and leaves them intact)")
    lines.append(f"targets: small steps <= 0.5x Liger's wall time {'met' if max(small) <= 0.5 else 'NOT met'} "
                 f"(worst {max(small):.3f}); large <= 1.02x Liger's device time "
                 f"{'met' if max(large) <= 1.02 else 'NOT met'} (worst {max(large):.3f}; against Liger*, "
                 f"worst {max(same):.3f})")
    publish(lines, sys.argv[1] if len(sys.argv) > 1 else None)


if __name__ == "__main__":
    main()
