"""Forward + backward per call (``y = op(x); y.backward(g)``), side by side in one run, for the autograd examples'
sigmoid and RMSNorm (examples/autograd/), float32, on a small and a large input:

- kernelop: the spec's backward, registered from C++ at the Autograd key (no Python per step), called as
  torch.ops.ns.op(x) and as its OpOverload torch.ops.ns.op.default(x), both through kernelop's fast Python entry;
  and, for sigmoid, through PyTorch's generic torch.ops entry (what the op would cost without the fast entry);
- custom_op: the same kernels (kernelop's forward and backward ops, called below autograd) wrapped in a Python
  torch.library.custom_op with torch.library.register_autograd, the reference's style;
- cpp_function: the same kernels in a hand-written C++ extension with a torch::autograd::Function (built here with
  torch.utils.cpp_extension.load_inline);
- aten: torch.sigmoid, torch.nn.functional.rms_norm.

Per step: a loop of forward + backward steps, then one synchronize (host-bound for small inputs). Device time: CUDA
events around the same loop, for the large inputs (sized so that the device, not the host, bounds a step: a
device time measured around a host-bound loop would be the host's). Every way runs once per round, in a fresh random order, over 21
rounds; a time is the median over rounds, a ratio the median of the per-round ratios (drift of the machine falls on
every way alike). Usage: python bench/autograd_bench.py [OUT.txt]
"""

import gc
import os
import pathlib
import random
import statistics
import sys
import time

import torch

import kernelop as ko

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "autograd"
ROUNDS = 21

CPP = r"""
#include <torch/extension.h>
#include <ATen/core/dispatch/Dispatcher.h>

// The same kernels as kernelop's ops, called through the dispatcher below autograd.
static at::Tensor call1(const char* name, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack stack(args.begin(), args.end());
  op.callBoxed(stack);
  return stack[0].toTensor();
}
static std::vector<at::Tensor> call2(const char* name, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  torch::jit::Stack stack(args.begin(), args.end());
  op.callBoxed(stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

struct Sigmoid : torch::autograd::Function<Sigmoid> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor y = call1("kernelop_autograd::sigmoid", {x});
    ctx->save_for_backward({y});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto y = ctx->get_saved_variables()[0];
    return {call1("kernelop_autograd::sigmoid_backward", {y, grads[0]})};
  }
};

struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, double eps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto out = call2("kernelop_autograd::rms_norm", {x, w, eps});
    ctx->save_for_backward({x, w, out[1]});
    return out[0];
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = call2("kernelop_autograd::rms_norm_backward", {s[0], s[1], s[2], grads[0]});
    return {g[0], g[1], at::Tensor()};
  }
};

at::Tensor sigmoid_fn(const at::Tensor& x) { return Sigmoid::apply(x); }
at::Tensor rms_norm_fn(const at::Tensor& x, const at::Tensor& w, double eps) {
  return RmsNorm::apply(x, w, eps);
}
"""


class TorchEntry:
    """kernelop's op through PyTorch's generic torch.ops entry, its fast Python entry bypassed (python/src/
    fast_entry.cpp): the call shape of OpOverloadPacket.__call__ around the entry kernelop hands its other calls to."""

    def __init__(self, packet):
        self.fallback = packet._op.fallback

    def __call__(self, *args):
        return self.fallback(*args)


def custom_ops():
    """The reference's style: Python custom_op + register_autograd around the same kernels."""
    sig, sig_b = torch.ops.kernelop_autograd.sigmoid, torch.ops.kernelop_autograd.sigmoid_backward
    rms, rms_b = torch.ops.kernelop_autograd.rms_norm, torch.ops.kernelop_autograd.rms_norm_backward

    @torch.library.custom_op("kop_bench::sigmoid", mutates_args=())
    def py_sigmoid(x: torch.Tensor) -> torch.Tensor:
        return sig(x)

    @py_sigmoid.register_fake
    def _(x):
        return torch.empty_like(x)

    def sig_setup(ctx, inputs, output):
        ctx.save_for_backward(output)

    def sig_backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return sig_b(y, grad)

    torch.library.register_autograd("kop_bench::sigmoid", sig_backward, setup_context=sig_setup)

    @torch.library.custom_op("kop_bench::rms_norm", mutates_args=())
    def py_rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        y, rstd = rms(x, w, eps)
        return y, rstd

    @py_rms.register_fake
    def _(x, w, eps):
        return torch.empty_like(x), x.new_empty(x.shape[:-1])

    def rms_setup(ctx, inputs, output):
        x, w, _ = inputs
        ctx.save_for_backward(x, w, output[1])

    def rms_backward(ctx, grad_y, grad_rstd):
        x, w, rstd = ctx.saved_tensors
        gx, gw = rms_b(x, w, rstd, grad_y)
        return gx, gw, None

    torch.library.register_autograd("kop_bench::rms_norm", rms_backward, setup_context=rms_setup)
    return torch.ops.kop_bench.sigmoid, lambda x, w, eps: torch.ops.kop_bench.rms_norm(x, w, eps)[0]


def per_step_us(step, iters):
    """Host-bound time per step: `iters` steps, then one synchronize."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def device_us(step, iters):
    """Device time per step: CUDA events around `iters` steps."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def interleaved(steps, measure, iters, rounds=ROUNDS):
    """Per way, the time of each round; every round runs every way once, in a fresh random order, so that drift
    of the machine (clocks, other tenants) falls on all ways alike."""
    for step in steps.values():  # warm up: allocator, caches, lazy initialisation
        for _ in range(10):
            step()
    times = {n: [] for n in steps}
    order = list(steps)
    rng = random.Random(0)
    gc.disable()
    try:
        for _ in range(rounds):
            rng.shuffle(order)
            for n in order:
                times[n].append(measure(steps[n], iters))
    finally:
        gc.enable()
    return times


def main(out_path=None):
    ops = {n: ko.register_spec_file(str(EXAMPLES / f"{n}.json")) for n in ("sigmoid", "rms_norm")}
    py_sig, py_rms = custom_ops()
    os.environ.setdefault("CXX", "/usr/bin/g++")
    from torch.utils.cpp_extension import load_inline
    ext = load_inline("kop_autograd_bench", cpp_sources=CPP, functions=["sigmoid_fn", "rms_norm_fn"],
                      verbose=False, extra_cflags=["-O2"])
    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; forward + backward per step, float32"]
    for case, shape in (("small", (4096,)), ("large", (64 * 1024 * 1024,))):
        x = torch.randn(shape, device="cuda", requires_grad=True)
        g = torch.randn(shape, device="cuda")
        sig_default = ops["sigmoid"].default
        torch_entry = TorchEntry(ops["sigmoid"])
        ways = {
            "kernelop": lambda: ops["sigmoid"](x).backward(g),
            "kernelop.default": lambda: sig_default(x).backward(g),
            "kernelop, torch's entry": lambda: torch_entry(x).backward(g),
            "custom_op": lambda: py_sig(x).backward(g),
            "cpp_function": lambda: ext.sigmoid_fn(x).backward(g),
            "aten": lambda: torch.sigmoid(x).backward(g),
        }
        for name, step in ways.items():  # same results first
            x.grad = None
            step()
            grad = x.grad.clone()
            x.grad = None
            ops["sigmoid"](x).backward(g)
            torch.testing.assert_close(grad, x.grad, msg=f"sigmoid {name}")
        lines += report(f"sigmoid {case} {list(shape)}", ways, case, x)
    for case, shape in (("small", (8, 512)), ("large", (16384, 4096))):
        x = torch.randn(shape, device="cuda", requires_grad=True)
        w = torch.randn(shape[-1], device="cuda", requires_grad=True)
        g = torch.randn(shape, device="cuda")
        rms_default = ops["rms_norm"].default
        ways = {
            "kernelop": lambda: ops["rms_norm"](x, w, 1e-6)[0].backward(g),
            "kernelop.default": lambda: rms_default(x, w, 1e-6)[0].backward(g),
            "custom_op": lambda: py_rms(x, w, 1e-6).backward(g),
            "cpp_function": lambda: ext.rms_norm_fn(x, w, 1e-6).backward(g),
            "aten": lambda: torch.nn.functional.rms_norm(x, (shape[-1],), w, 1e-6).backward(g),
        }
        for name, step in ways.items():  # the same results first (aten's sums run in another order)
            x.grad = w.grad = None
            step()
            grads = (x.grad.clone(), w.grad.clone())
            x.grad = w.grad = None
            ops["rms_norm"](x, w, 1e-6)[0].backward(g)
            for a, b in zip(grads, (x.grad, w.grad)):
                torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3, msg=lambda m: f"rms_norm {name}: {m}")
        lines += report(f"rms_norm {case} {list(shape)}", ways, case, x, w)
    publish(lines, out_path)


def publish(lines, out_path=None):
    """A benchmark's report: printed, and written to out_path when given (scripts/gpu-check collects the files)."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out_path:
        pathlib.Path(out_path).write_text(text)


def report(title, ways, case, *params):
    """Per way: the median over rounds of its time per step, and the median over rounds of kernelop's time divided by
    its time in the same round."""
    def step_of(fn):
        def step():
            for p in params:
                p.grad = None
            fn()
        return step

    steps = {n: step_of(fn) for n, fn in ways.items()}
    lines = [title]
    tables = [("per step", interleaved(steps, per_step_us, 200 if case == "small" else 20))]
    if case == "large":
        tables.append(("device", interleaved(steps, device_us, 20)))
    for what, times in tables:
        base = times["kernelop"]
        for n, us in times.items():
            ratio = statistics.median(b / u for b, u in zip(base, us))
            lines.append(f"  {what:9s} {n:24s} {statistics.median(us):9.1f} us   kernelop/{n} = {ratio:.3f}")
    return lines


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
