"""kernelop.jax against a hand-written XLA FFI handler of the same kernel, against jax.numpy, and against the same
kernel launched by kernelop from PyTorch, side by side in one run.

The kernel is examples/relu.cu's relu: kernelop's op loads examples/relu.json (kernelop.jax.op), the hand-written
handler (bench/jax/hand_relu_ffi.cu, the handler a JAX user writes: an FFI binding, the stream, a <<<>>> launch) is
built here with nvcc against jaxlib's FFI headers. Reports, under jax.jit:
  - per call: a loop of calls of the jitted function on a small array (4096 floats), then block_until_ready, in µs
    per call (host and dispatch cost; kernelop / hand-written must be <= 1.0);
  - device: one jitted computation of 100 calls (lax.fori_loop) on 16M floats, per call (device time; kernelop and
    the hand-written handler run the same machine code), and the same kernel launched by kernelop's PyTorch op
    (CUDA events), per call.
Usage: python bench/jax_bench.py [OUT.txt]   (on a machine with a GPU, JAX with CUDA, nvcc and PyTorch)
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # PyTorch shares the GPU in this process

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import kernelop.jax as kj  # noqa: E402
from autograd_bench import publish  # noqa: E402  (this folder's: one report)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")


def hand_written_relu():
    """The hand-written handler, built with nvcc and registered as the FFI target "bench_hand_relu"."""
    import ctypes
    out = os.path.join(tempfile.mkdtemp(), "libhand_relu_ffi.so")
    subprocess.run(["nvcc", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-arch=native",
                    f"-I{jax.ffi.include_dir()}", os.path.join(HERE, "jax", "hand_relu_ffi.cu"), "-o", out],
                   check=True)
    lib = ctypes.cdll.LoadLibrary(out)
    jax.ffi.register_ffi_target("bench_hand_relu", jax.ffi.pycapsule(lib.HandRelu), platform="CUDA")
    return lambda x: jax.ffi.ffi_call("bench_hand_relu", jax.ShapeDtypeStruct(x.shape, x.dtype),
                                      vmap_method="broadcast_all")(x)


def per_call_us(f, x, calls=2000, rounds=7):
    f(x).block_until_ready()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            y = f(x)
        y.block_until_ready()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def device_us(body, x, calls=100, rounds=7):
    """Per call, of one jitted computation making `calls` calls in a row (each on the previous result's sign flip, so
    that none is elided)."""
    loop = jax.jit(lambda v: jax.lax.fori_loop(0, calls, lambda i, a: -body(a), v))
    loop(x).block_until_ready()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        loop(x).block_until_ready()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def torch_device_us(n, calls=100, rounds=7):
    import torch
    import kernelop as ko
    op = ko.register_spec_file(os.path.join(EXAMPLES, "relu.json"))
    x = torch.randn(n, device="cuda")
    for _ in range(3):
        op(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(rounds):
        start.record()
        for _ in range(calls):
            x = -op(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    # the negation is a kernel of its own: time it alone and take it off
    neg = []
    for _ in range(rounds):
        start.record()
        for _ in range(calls):
            x = -x
        end.record()
        end.synchronize()
        neg.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times) - statistics.median(neg)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    gpu = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpu:
        print("SKIPPED: JAX sees no GPU")
        return
    relu = kj.op(os.path.join(EXAMPLES, "relu.json"))
    hand = hand_written_relu()
    small = jax.random.normal(jax.random.PRNGKey(0), (4096,))
    big = jax.random.normal(jax.random.PRNGKey(1), (1 << 24,))
    for f in (relu, hand):
        assert bool(jnp.all(jax.jit(f)(small) == jnp.maximum(small, 0)))
    k_call = per_call_us(jax.jit(relu), small)
    h_call = per_call_us(jax.jit(hand), small)
    j_call = per_call_us(jax.jit(lambda v: jnp.maximum(v, 0)), small)
    neg = device_us(lambda a: a, big)  # the loop and its negation alone
    k_dev = device_us(relu, big) - neg
    h_dev = device_us(hand, big) - neg
    j_dev = device_us(lambda a: jnp.maximum(a, 0), big) - neg
    t_dev = torch_device_us(1 << 24)
    lines = [
        f"jax_bench on {gpu[0].device_kind} (jax {jax.__version__}, kernelop target {relu.info['target']})",
        f"per call under jax.jit, relu of 4096 floats (us): kernelop {k_call:.1f}, hand-written FFI handler "
        f"{h_call:.1f}, jnp.maximum {j_call:.1f}; kernelop / hand-written {k_call / h_call:.2f}, "
        f"kernelop / jnp {k_call / j_call:.2f}",
        f"device time per call, relu of 16M floats (us): kernelop {k_dev:.1f}, hand-written {h_dev:.1f}, "
        f"jnp.maximum {j_dev:.1f}, kernelop's PyTorch op {t_dev:.1f}; kernelop / hand-written {k_dev / h_dev:.2f}, "
        f"kernelop (JAX) / kernelop (PyTorch) {k_dev / t_dev:.2f}",
    ]
    publish(lines, out_path)


if __name__ == "__main__":
    main()
