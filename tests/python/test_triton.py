"""Triton kernels as kernelop ops (kernelop.triton / custom_plugin / record_plugin).

CPU: the recorded spec (params in the kernel's order, grid and int arguments as expressions, scalars with defaults,
shapes from meta_impl, configs x Triton's specialisations as tactics), compilation for sm_80 and sm_90 through the
cache, the Meta kernel, packages loaded in a process where Triton cannot be imported, and every refusal message.
GPU: every tactic against Triton's own launch, misaligned inputs, opcheck, torch.compile, export, CUDA graphs, and
packages built on the CPU machine run with no Triton in the process.
"""

import dataclasses
import json
import math
import os
import pathlib
import sys
import tempfile
import unittest
from dataclasses import replace

import torch
import triton
import triton.language as tl

import kernelop as ko
from compile_counter import counting_inductor
from expect import expect_error
from isolated import run_python_without
from kernelop_testing import replay_with_new_input, run_tests
from tactic_pins import each_tactic

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import triton_kernels as tk  # noqa: E402

CUDA = torch.cuda.is_available()
_registered = {}


def ops():
    if not _registered:
        _registered.update(tk.register("kop_tt"))
    return _registered


@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


@triton.jit
def desc_scale(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Device-side tensor descriptors: on sm_90 Triton builds them in global scratch memory.
    dx = tl.make_tensor_descriptor(X, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dy = tl.make_tensor_descriptor(Y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm, pn = tl.program_id(0), tl.program_id(1)
    dy.store([pm * BM, pn * BN], dx.load([pm * BM, pn * BN]) * 2)


def desc_scale_launch(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    y = torch.empty_like(x)
    desc_scale[lambda meta: (triton.cdiv(m, meta["BM"]), triton.cdiv(n, meta["BN"]))](x, y, m, n, BM=32, BN=32)
    return y


@triton.jit
def negate_scale(X, Y, n, neg, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, tl.where(neg, -x, x) * scale, mask=offs < n)


def negate_scale_launch(x: torch.Tensor, neg: bool, scale: float = 1.5) -> torch.Tensor:
    y = torch.empty_like(x)
    negate_scale[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), neg, scale, BLOCK=256)
    return y


@triton.jit
def strided_offset(X, Y, s, n, C, BLOCK: tl.constexpr, FLAG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(X + offs * s, mask=m) + C
    if FLAG:
        v = -v
    tl.store(Y + offs, v, mask=m)


def strided_offset_launch(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    strided_offset[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, y, x.stride(1), x.numel(), 64, BLOCK=128,
                                                                     FLAG=False)
    return y


# Kernels that write through their inputs (Note [written pointers] in kernelop/_triton.py).
@triton.jit
def zero_ignored_rows(X, T, loss, n, stride, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    # Liger's cross entropy in miniature: the row sum as the loss, and ignored rows of X zeroed in place.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    t = tl.load(T + row)
    x = tl.load(X + row * stride + offs, mask=offs < n, other=0.0)
    if t == IGNORE:
        tl.store(X + row * stride + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)
        tl.store(loss + row, 0.0)
    else:
        tl.store(loss + row, tl.sum(x, 0))


def zero_ignored_rows_launch(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    loss = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    zero_ignored_rows[(x.shape[0],)](x, target, loss, x.shape[1], x.stride(0), IGNORE=-100, BLOCK=1024)
    return loss


@triton.jit
def ignore_rows_scalar(X, T, loss, n, stride, ignore, BLOCK: tl.constexpr):
    # zero_ignored_rows with the ignored value a runtime int (Liger's ignore_index is one), read-only.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    t = tl.load(T + row)
    x = tl.load(X + row * stride + offs, mask=offs < n, other=0.0)
    tl.store(loss + row, tl.where(t == ignore, 0.0, tl.sum(x, 0)))


def ignore_rows_scalar_launch(x: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    loss = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    ignore_rows_scalar[(x.shape[0],)](x, target, loss, x.shape[1], x.stride(0), ignore_index, BLOCK=1024)
    return loss


@triton.jit
def add_one(X, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < n) + 1, mask=offs < n)


def add_one_returning_it(x: torch.Tensor) -> torch.Tensor:
    add_one[(triton.cdiv(x.numel(), 256),)](x, x.numel(), BLOCK=256)
    return x


def add_one_returning_nothing(x: torch.Tensor) -> None:
    add_one[(triton.cdiv(x.numel(), 256),)](x, x.numel(), BLOCK=256)


@triton.jit
def square_then_double(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m)
    tl.store(Y + offs, x * x, mask=m)
    tl.store(X + offs, 2 * x, mask=m)


def square_doubling_launch(x: torch.Tensor) -> torch.Tensor:
    """y = x², and x doubled in place: an op that writes its input and has a backward."""
    y = torch.empty_like(x)
    square_then_double[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


def square_doubling_backward(x: torch.Tensor, grad_Y: torch.Tensor) -> torch.Tensor:
    # x is the value the forward left (2 x_before), so d(x_before²) = 2 x_before grad_Y = x grad_Y
    return scale_mul_launch(x, grad_Y, 1.0)


def square_doubling(op_name):
    return ko.record_plugin(ko.triton(square_doubling_launch), op_name=op_name,
                            backward=ko.Backward(["x"], ko.triton(square_doubling_backward)))


@triton.jit
def scale_two(X, Y, n, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)
    tl.store(Y + offs, tl.load(Y + offs, mask=offs < m) * 3, mask=offs < m)


def scale_two_launch(x: torch.Tensor, y: torch.Tensor):
    """x doubled and y tripled in place, and returned: two written results (Note [written results]), as Liger's RoPE
    rotates q and k."""
    scale_two[(triton.cdiv(max(x.numel(), y.numel()), 256),)](x, y, x.numel(), y.numel(), BLOCK=256)
    return x, y


def scale_two_backward(grad_x_out: torch.Tensor, grad_y_out: torch.Tensor):
    gx, gy = grad_x_out.clone(), grad_y_out.clone()
    scale_two[(triton.cdiv(max(gx.numel(), gy.numel()), 256),)](gx, gy, gx.numel(), gy.numel(), BLOCK=256)
    return gx, gy


def scale_two_op(op_name):
    return ko.record_plugin(ko.triton(scale_two_launch), op_name=op_name,
                            backward=ko.Backward(["x", "y"], ko.triton(scale_two_backward)))


@triton.jit
def square_doubling_bwd(X, GY, GX, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=m) * tl.load(GY + offs, mask=m) + 2 * tl.load(GX + offs, mask=m),
             mask=m)


def square_doubling_returning_x(x: torch.Tensor):
    """y = x², and x doubled in place and returned: an output, then a written result (its node input is 1)."""
    return square_doubling_launch(x), x


def square_doubling_returning_x_backward(x: torch.Tensor, grad_Y: torch.Tensor, grad_x_out: torch.Tensor):
    # x is the value the forward left (2 x_before): d(x_before²) = x grad_Y, d(2 x_before) = 2 grad_x_out
    out = torch.empty_like(x)
    square_doubling_bwd[(triton.cdiv(x.numel(), 256),)](x, grad_Y, grad_x_out, out, x.numel(), BLOCK=256)
    return out


def gradient_read_twice(grad_x_out: torch.Tensor, g: torch.Tensor, grad_y_out: torch.Tensor):
    """scale_two's backward reading grad_x_out twice (g receives it too: Backward.from_): gx = 2 grad_x_out²."""
    gx = mul_backward_over_gradient(g, grad_x_out)
    gy = grad_y_out.clone()
    scale_two[(triton.cdiv(max(gx.numel(), gy.numel()), 256),)](gx, gy, gx.numel(), gy.numel(), BLOCK=256)
    return gx, gy


def written_results_scenarios(op, device):
    """(name, function of two leaves giving the tensors a loss sums, weighted) where `op(a, b)` writes a and b in
    place (a doubled, b tripled): the Note [written results] cases, to compare with PyTorch's own in-place ops
    (``a.mul_(2); b.mul_(3)``) as `op`."""
    def plain(x0, y0):
        a, b = x0 * 1.0, y0 * 1.0
        op(a, b)
        return [a, b]

    def covering_views(x0, y0):  # views over all of their bases (HF's q of its projection)
        bx, by = x0 * 1.0, y0 * 1.0
        a, b = bx.view(-1), by.t()[0:].t()
        op(a, b)
        return [a, b]

    def parts(x0, y0):  # views of parts of their bases, the bases used after
        bx, by = x0 * 1.0, y0 * 1.0
        a, b = bx[1:], by[:2]
        op(a, b)
        return [a, b, bx, by * by]

    def one_base(x0, y0):  # two rows of one base (q and k of a fused projection)
        base = torch.stack([x0, y0]) * 1.0
        a, b = base[0], base[1]
        op(a, b)
        return [a * a, b]

    def base_alone(x0, y0):
        base = torch.stack([x0, y0]) * 1.0
        op(base[0][1:], base[1][:-1])
        return [base]

    def then_in_place(x0, y0):  # a later in-place op on a written view
        base = torch.stack([x0, y0]) * 1.0
        a, b = base[0], base[1]
        op(a, b)
        a.mul_(5)
        return [a, base]

    def one_requires_grad(x0, y0):
        a, b = x0 * 1.0, y0.detach() * 1.0
        op(a, b)
        return [a, b]

    def base_without_grad(x0, y0):  # a view of a base that did not require grad
        bx = x0.detach() * 1.0
        a, b = bx[1:], (y0 * 1.0)[1:]
        op(a, b)
        return [a, b, bx]

    def both_then_in_place(x0, y0):  # the second result a view (node input 1 of the op), its base changed after
        base = torch.stack([x0, y0]) * 1.0
        a, b = base[0], base[1]
        op(a, b)
        base.add_(1)
        return [a, b * b, base]

    def unused(x0, y0):  # a result the loss does not use
        a, b = x0 * 1.0, y0 * 1.0
        op(a, b)
        return [a]
    return [(f.__name__, f) for f in (plain, covering_views, parts, one_base, base_alone, then_in_place,
                                      one_requires_grad, base_without_grad, both_then_in_place, unused)]


@triton.jit
def scatter_rows(Src, Index, Dst, width, BLOCK: tl.constexpr):
    # The written pointer's offsets come from a loaded index: only Dst is written, never Index.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    to = tl.load(Index + row)
    tl.store(Dst + to * width + offs, tl.load(Src + row * width + offs, mask=offs < width), mask=offs < width)


def scatter_rows_launch(src: torch.Tensor, index: torch.Tensor, dst: torch.Tensor) -> None:
    scatter_rows[(src.shape[0],)](src, index, dst, src.shape[1], BLOCK=128)


@triton.jit
def tiled_matmul(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # Loop-carried pointers into A and B (read), a store into C.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = A + rm[:, None] * K + rk[None, :]
    b = B + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK
        b += BK * N
    tl.store(C + rm[:, None] * N + rn[None, :], acc)


def tiled_matmul_launch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=torch.float32)
    tiled_matmul[(triton.cdiv(a.shape[0], 32), triton.cdiv(b.shape[1], 32))](
        a, b, c, a.shape[0], b.shape[1], a.shape[1], BM=32, BN=32, BK=32)
    return c


@triton.jit
def store_to_either(X, Y, Z, n, BLOCK: tl.constexpr, INTO_INPUTS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if INTO_INPUTS:
        tl.store(tl.where(offs < n, X + offs, Y + offs), tl.zeros([BLOCK], tl.float32))
    tl.store(Z + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


def store_to_either_launch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = torch.empty_like(x)
    store_to_either[(1,)](x, y, z, x.numel(), BLOCK=128, INTO_INPUTS=False)
    return z


@triton.jit
def store_through_an_int(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    address = (Y + 0).to(tl.uint64, bitcast=True)
    tl.store(address.to(tl.pointer_type(tl.float32), bitcast=True) + offs, tl.load(X + offs), mask=offs < n)


def store_through_an_int_launch(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    store_through_an_int[(1,)](x, y, x.numel(), BLOCK=128)
    return y


@triton.jit
def row_norm(Y, y_stride, X, x_stride, W, n_cols, eps, BLOCK: tl.constexpr):
    # An RMSNorm row per program, written as Liger writes its host code (below).
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(X + row * x_stride + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1 / tl.sqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(W + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * y_stride + offs, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def row_norm_launch(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    shape = x.shape
    dim = shape[-1]
    x = x.view(-1, dim)  # host-side views, as Liger's rms_norm_forward
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    assert x.shape[1] == w.shape[0]
    row_norm[(n_rows,)](y, y.stride(0), x, x.stride(0), w, n_cols, float(eps), BLOCK=4096)
    return y.view(*shape)


def literal_float_launch(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    negate_scale[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), True, 2.5, BLOCK=128)
    return y


def first_two_dims_launch(x: torch.Tensor) -> torch.Tensor:
    # Reads the sizes of axes 0 and 1 by index: right only at rank 2.
    y = torch.empty_like(x)
    copy_kernel[(x.shape[0],)](x, y, x.shape[0] * x.shape[1], BLOCK=128)
    return y


MAX_FUSED_SIZE = 16384  # this file's limit, as Liger's calculate_settings has its own (65536)


def calculate_settings(n):
    # The block a row needs and the warps for it, from the size: Liger's calculate_settings, with a smaller limit.
    block = triton.next_power_of_2(n)
    if block > MAX_FUSED_SIZE:
        raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds the recommended Triton blocksize")
    num_warps = 4
    if block >= 8192:
        num_warps = 16
    elif block >= 2048:
        num_warps = 8
    return block, num_warps


def row_norm_sized_launch(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    shape = x.shape
    dim = shape[-1]
    x = x.view(-1, dim)
    n_rows, n_cols = x.shape
    block, num_warps = calculate_settings(n_cols)
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    row_norm[(n_rows,)](y, y.stride(0), x, x.stride(0), w, n_cols, eps, BLOCK=block, num_warps=num_warps)
    return y.view(*shape)


@triton.jit
def column_sums(X, Out, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # Each program adds ROWS rows into Out: the output accumulates, so it must start at zero.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(X + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(Out + cols, tl.sum(x, axis=0), mask=cols < n_cols)


def column_sums_launch(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.zeros((n_cols,), dtype=torch.float32, device=x.device)
    column_sums[(triton.cdiv(n_rows, 16),)](x, out, n_rows, n_cols, ROWS=16, BLOCK=128)
    return out


@triton.jit
def even_rows_max(X, Out, n, width, BLOCK: tl.constexpr):
    # Writes only even rows of Out: the odd ones keep what the output was initialised with.
    row = tl.program_id(0) * 2
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * width + cols, mask=cols < width, other=float("-inf"))
    tl.store(Out + row, tl.max(x, axis=0))


def even_rows_max_launch(x: torch.Tensor) -> torch.Tensor:
    n, width = x.shape
    out = torch.full((n,), float("-inf"), dtype=x.dtype, device=x.device)
    even_rows_max[(triton.cdiv(n, 2),)](x, out, n, width, BLOCK=128)
    return out


def add_one_to_a_clone_launch(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    add_one[(triton.cdiv(x.numel(), 128),)](y, x.numel(), BLOCK=128)
    return y


def add_one_to_a_fill_launch(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x).fill_(2.5)
    add_one[(triton.cdiv(x.numel(), 128),)](y, x.numel(), BLOCK=128)
    return y


@triton.jit
def rows_persistent(X, Y, n_rows, n_cols, rows_per_program, BLOCK: tl.constexpr):
    # A persistent kernel: one program per SM, each doubling its strip of rows.
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0) * rows_per_program
    for r in range(first, tl.minimum(first + rows_per_program, n_rows)):
        x = tl.load(X + r * n_cols + cols, mask=cols < n_cols)
        tl.store(Y + r * n_cols + cols, x * 2, mask=cols < n_cols)


def rows_persistent_launch(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    sm_count = torch.cuda.get_device_properties(x.device).multi_processor_count
    y = torch.empty_like(x)
    rows_persistent[(sm_count,)](x, y, n_rows, n_cols, math.ceil(n_rows / sm_count), BLOCK=128)
    return y


@triton.jit
def scale_mul_fwd(X, W, Y, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Y + offs, alpha * tl.load(X + offs, mask=m) * tl.load(W + offs, mask=m), mask=m)


def scale_mul_launch(x: torch.Tensor, w: torch.Tensor, alpha: float = 1.5) -> torch.Tensor:
    assert x.shape == w.shape
    y = torch.empty_like(x)
    n = x.numel()
    scale_mul_fwd[(triton.cdiv(n, 256),)](x, w, y, n, alpha, BLOCK=256)
    return y


@triton.jit
def scale_mul_bwd(X, W, G, DX, DW, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    g = alpha * tl.load(G + offs, mask=m)
    tl.store(DX + offs, g * tl.load(W + offs, mask=m), mask=m)
    tl.store(DW + offs, g * tl.load(X + offs, mask=m), mask=m)


def scale_mul_backward_launch(x: torch.Tensor, w: torch.Tensor, grad_Y: torch.Tensor, alpha: float = 1.5):
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    n = x.numel()
    scale_mul_bwd[(triton.cdiv(n, 256),)](x, w, grad_Y, dx, dw, n, alpha, BLOCK=256)
    return dx, dw


@triton.jit
def scale_mul_bwd_x(W, G, DX, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(DX + offs, alpha * tl.load(G + offs, mask=m) * tl.load(W + offs, mask=m), mask=m)


def scale_mul_backward_only_x(w: torch.Tensor, grad_Y: torch.Tensor, alpha: float = 1.5):
    dx = torch.empty_like(w)
    n = w.numel()
    scale_mul_bwd_x[(triton.cdiv(n, 256),)](w, grad_Y, dx, n, alpha, BLOCK=256)
    return dx


@triton.jit
def mul_bwd_over_inputs(A, B, G, n, BLOCK: tl.constexpr):
    # Liger's SwiGLU backward in miniature: the gradients are written over the saved inputs.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a, b, g = tl.load(A + offs, mask=m), tl.load(B + offs, mask=m), tl.load(G + offs, mask=m)
    tl.store(A + offs, g * b, mask=m)
    tl.store(B + offs, g * a, mask=m)


def mul_launch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return scale_mul_launch(a, b, 1.0)


def mul_backward_over_copies(a: torch.Tensor, b: torch.Tensor, grad_Y: torch.Tensor):
    a, b = a.clone(), b.clone()  # the saved a and b stay intact: the gradients go over copies
    mul_bwd_over_inputs[(triton.cdiv(a.numel(), 256),)](a, b, grad_Y, a.numel(), BLOCK=256)
    return a, b


@triton.jit
def mul_into(G, B, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(G + offs, tl.load(G + offs, mask=m) * tl.load(B + offs, mask=m), mask=m)


def mul_backward_over_gradient(b: torch.Tensor, grad_Y: torch.Tensor):
    g = grad_Y.clone()  # Liger's RMSNorm backward in miniature: the gradient goes over (a copy of) the incoming one
    mul_into[(triton.cdiv(g.numel(), 256),)](g, b, g.numel(), BLOCK=256)
    return g


def recorded_scale_mul(op_name="kop_tt_bwd::scale_mul", differentiable=("x", "w"), bwd=scale_mul_backward_launch,
                       **kw):
    return ko.record_plugin(ko.triton(scale_mul_launch), op_name=op_name,
                            backward=ko.Backward(list(differentiable), ko.triton(bwd)), **kw)


def meta_tensor(*shape):
    return torch.empty(*shape, device="meta")


def record(launch, configs=None, **kw):
    return ko.record_plugin(ko.triton(launch, configs=configs or [{"BLOCK": 128}]), op_name="kop_tt_t::t", **kw)


def sums_then_cast(op_name):
    """column_sums's float32 accumulator as scratch, cast to bfloat16 by kernelop's glue in a second launch (the
    pattern of Liger's RMSNorm dW: partials in float32, .to(W.dtype)): a Triton kernel, then a CUDA C++ one."""
    import dataclasses
    from kernelop import _glue
    r = ko.record_plugin(ko.triton(column_sums_launch), op_name=op_name, example_inputs=(torch.empty(64, 100),))
    doc = dict(r.doc)
    accumulator = dict(doc["outputs"][0], scratch=True)
    doc["outputs"] = [{"name": "sums", "shape": ["dim(x, 1)"], "dtype": "bfloat16"}, accumulator]
    doc["then"] = [ko.Launch(_glue.cast(torch.float32, torch.bfloat16),
                             from_={"x": accumulator["name"], "y": "sums"})._json()]
    return dataclasses.replace(r, doc=doc)


@triton.jit
def scaled_copy(X, Y, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * scale, mask=offs < n)


@triton.jit
def add_into(A, B, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Out + offs, tl.load(A + offs, mask=m) + tl.load(B + offs, mask=m), mask=m)


def two_kernels_launch(x: torch.Tensor) -> torch.Tensor:
    """z = 2x + x as two Triton kernels: the first writes y, which launch_fn does not return (scratch)."""
    n = x.numel()
    y = torch.empty_like(x)
    scaled_copy[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, 2.0, BLOCK=128)
    z = torch.empty_like(x)
    add_into[(triton.cdiv(n, 256),)](y, x, z, n, BLOCK=256)
    return z


@triton.jit
def sm_partials(X, P, n_rows, n_cols, rows_per_program, BLOCK: tl.constexpr):
    # Program p adds rows [p * rows_per_program, (p + 1) * rows_per_program) into row p of P (float32).
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    end = tl.minimum((pid + 1) * rows_per_program, n_rows)
    for r in range(pid * rows_per_program, end):
        acc += tl.load(X + r * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(P + pid * n_cols + cols, acc, mask=cols < n_cols)


def column_sums_per_sm(x: torch.Tensor) -> torch.Tensor:
    """Liger's RMSNorm dW pattern: per-SM float32 partials in a buffer launch_fn allocates, then
    partials.sum(dim=0).to(x.dtype) on the host (kernelop's glue, in the op)."""
    n_rows, n_cols = x.shape
    sm_count = torch.cuda.get_device_properties(x.device).multi_processor_count
    partials = torch.empty((sm_count, n_cols), dtype=torch.float32, device=x.device)
    rows_per_program = math.ceil(n_rows / sm_count)
    sm_partials[(sm_count,)](x, partials, n_rows, n_cols, rows_per_program, BLOCK=128)
    return partials.sum(dim=0).to(x.dtype)


@triton.jit
def scale_by(X, S, Y, n, BLOCK: tl.constexpr):
    # Y = X * S[0], S a one-element tensor on the device.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.load(S)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * s, mask=offs < n)


def scaled_by_mean_over_kept(x: torch.Tensor, t: torch.Tensor, ignore: int = -1) -> torch.Tensor:
    """y = x * (x.sum() / (t != ignore).sum()): glue before the kernel (Liger's cross entropy pattern: a count and
    a mean on the device, read by the kernel through a pointer)."""
    s = x.sum() / (t != ignore).sum()
    y = torch.empty_like(x)
    scale_by[(triton.cdiv(x.numel(), 128),)](x, s, y, x.numel(), BLOCK=128)
    return y


def run_python(code):
    """Runs code in a fresh python3 where `import triton` fails; returns its stdout."""
    return run_python_without("triton", code)


class Recording(unittest.TestCase):
    def test_the_seed_example_records_to_an_ordinary_spec(self):
        r = tk.recorded("kop_tt_rec")["elementwise_scale_mul"]
        d = r.doc
        self.assertEqual(d["kernel_name"], "elementwise_scale_mul_kernel")
        self.assertEqual(d["triton"], {"version": triton.__version__})
        self.assertIn("z_vals = x_vals * y_vals * a + b", d["kernel_source"])
        self.assertEqual(d["inputs"], [{"name": "X", "dtype": "float32"}, {"name": "Y", "dtype": "float32"},
                                       {"name": "b", "scalar": "float", "default": 0.2},
                                       {"name": "a", "scalar": "int", "default": 2}])
        self.assertEqual(d["outputs"], [{"name": "Z", "shape": {"same_as": "X"}, "dtype": "float32"}])
        # The kernel's own order, then Triton's two scratch pointers (null).
        self.assertEqual(d["params"], ["X", "Y", "Z", "a", "b", {"expr": "0", "int64": True},
                                       {"expr": "0", "int64": True}])
        self.assertEqual(d["geometry"], {"custom": {"grid": ["numel(X) // BLOCK_SIZE"], "block": ["num_warps * 32"]}})
        # Recorded at two ranks and the same at both: no rank (Note [rank-free recording]).
        self.assertEqual(d["requires"], ["same_shape(Y, X)"])
        self.assertEqual(d["tunables"], ["BLOCK_SIZE", "num_warps", "num_stages", "divisible"])
        self.assertEqual([(c["BLOCK_SIZE"], c["divisible"]) for c in d["configs"]],
                         [(256, 2), (256, 1), (256, 0), (1024, 2), (1024, 1), (1024, 0)])
        aligned = ["aligned(X, 16)", "aligned(Y, 16)", "aligned(Z, 16)"]
        self.assertEqual(d["configs"][0]["requires"], aligned + ["a % 16 == 0"])
        # The variants exclude each other: a call runs the one Triton's JIT would compile.
        self.assertEqual(d["configs"][1]["requires"], aligned + ["(a % 16 == 0) == 0"])
        self.assertEqual(d["configs"][2]["requires"], ["aligned(X, 16) * aligned(Y, 16) * aligned(Z, 16) == 0"])
        self.assertEqual(json.loads(r.spec_json()), d)

    def test_a_scalar_int_that_is_not_divisible_leaves_the_sizes_specialised(self):
        # Liger's ignore_index=-100 never divides by 16: with one group for every int it cost the row stride and the
        # row length their specialisation (no vectorised loads). Variant 3 keeps them, leaving the scalar plain.
        r = ko.record_plugin(ko.triton(ignore_rows_scalar_launch, [{"BLOCK": 1024}, {"BLOCK": 2048}]),
                             op_name="kop_tt_rec::ignore_rows_scalar",
                             example_inputs=(torch.empty(4, 1000), torch.empty(4, dtype=torch.int64)))
        d = r.doc
        self.assertEqual([(c["BLOCK"], c["divisible"]) for c in d["configs"]],
                         [(b, v) for b in (1024, 2048) for v in (2, 3, 1, 0)])
        self.assertEqual(d["params"][3:6], [{"expr": "dim(x, 1)"}, {"expr": "dim(x, 1)"}, "ignore_index"])
        # Positions: X 0, T 1, loss 2, n 3, stride 4, ignore 5.
        self.assertEqual([c["divisible"] for c in r.compile_configs[:4]],
                         [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4], [0, 1, 2], []])
        # Over a corpus of sizes and scalars, exactly one variant of each config holds (aligned pointers), and every
        # int it was compiled as divisible by 16 is (never a kernel compiled for a divisibility the call lacks).
        ints = {3: "dim(x, 1)", 4: "dim(x, 1)", 5: "ignore_index"}
        for n in (1000, 1024, 4096, 4097, 32000, 32001):
            for ignore in (-100, -96, 0, 7, 16):
                env = {"dim(x, 1)": n, "ignore_index": ignore}
                held = [i for i, c in enumerate(d["configs"][:4])
                        if all(ko._kernelop.eval_expr(q, {**env, **{a: 1 for a in ("aligned(x, 16)",
                                                                                   "aligned(target, 16)",
                                                                                   "aligned(loss, 16)")}}) != 0
                               for q in c.get("requires", []))]
                self.assertEqual(len(held), 1, (n, ignore, held))
                marked = [p for p in r.compile_configs[held[0]]["divisible"] if p in ints]
                self.assertTrue(all(env[ints[p]] % 16 == 0 for p in marked), (n, ignore, marked))
                # ...and it is the most specialised such variant: the sizes are marked whenever they divide.
                self.assertEqual(3 in marked, n % 16 == 0, (n, ignore))
                self.assertEqual(5 in marked, n % 16 == 0 and ignore % 16 == 0, (n, ignore))

    def test_grids_and_int_arguments_are_expressions_of_the_sizes(self):
        rec = tk.recorded("kop_tt_rec")
        add = rec["vector_add"].doc
        self.assertEqual(add["geometry"]["custom"]["grid"], ["cdiv(numel(x), BLOCK_SIZE)"])
        self.assertEqual(add["params"][:4], ["x", "y", "output_ptr", {"expr": "numel(x)"}])
        self.assertEqual(add["requires"], ["same_shape(y, x)"])
        self.assertEqual(add["configs"][0]["requires"][-1], "numel(x) % 16 == 0")
        sm = rec["softmax"].doc
        self.assertEqual(sm["geometry"]["custom"]["grid"], ["dim(x, 0)"])
        self.assertEqual(sm["params"][:4], ["out_ptr", "x", {"expr": "dim(x, 1)"}, {"expr": "dim(x, 1)"}])
        self.assertEqual(sm["requires"], ["rank(x) == 2"])
        self.assertEqual([(c["BLOCK_SIZE"], c["num_warps"]) for c in sm["configs"][::3]], [(256, 2), (1024, 4),
                                                                                          (4096, 8)])

    def test_bool_and_float_scalars_are_passed_as_they_are(self):
        r = ko.record_plugin(ko.triton(negate_scale_launch), op_name="kop_tt_rec::negate_scale")
        self.assertEqual(r.doc["inputs"][1:], [{"name": "neg", "scalar": "bool"},
                                               {"name": "scale", "scalar": "float", "default": 1.5}])
        self.assertEqual(r.doc["params"][:5], ["x", "Y", {"expr": "numel(x)"}, "neg", "scale"])
        r.check(["sm_90"])

        def branches(x: torch.Tensor, neg: bool) -> torch.Tensor:
            return negate_scale_launch(x if neg else x, True)
        expect_error(self, ValueError, "launch_fn branches on bool scalar 'neg' on the host", ko.record_plugin,
                     ko.triton(branches))

    def test_specialisations_mark_the_right_parameters(self):
        # s (a stride of 1) becomes a constexpr before n and C: Triton's marks are positions among ALL parameters.
        r = ko.record_plugin(ko.triton(strided_offset_launch, [{"BLOCK": 128, "FLAG": False},
                                                               {"BLOCK": 256, "FLAG": True, "num_stages": 1}]),
                             op_name="kop_tt_rec::strided_offset")
        self.assertEqual(r.dsl_state.signature["s"], "constexpr")
        # variant 2: X, Y and n (position 3) and the constant 64 (position 4); variant 1: X, Y, 64; 0: 64 only.
        self.assertEqual([c["divisible"] for c in r.compile_configs[:3]], [[0, 1, 3, 4], [0, 1, 4], [4]])
        # Configs with a 1 or a bool in them (num_stages=1, FLAG=True) still give one grid expression.
        self.assertEqual(r.doc["geometry"]["custom"]["grid"], ["cdiv(numel(x), BLOCK)"])

    def test_every_condition_on_the_sizes_is_a_requirement(self):
        def plus(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            assert y.shape[0] == x.shape[0] + 1
            z = torch.empty_like(x)
            copy_kernel[(triton.cdiv(x.shape[0], 128),)](x, z, x.shape[0], BLOCK=128)
            return z
        r = record(plus, example_inputs=(meta_tensor(4), meta_tensor(5)))
        self.assertIn("dim(y, 0) == dim(x, 0) + 1", r.doc["requires"])

        # An input may feed several parameters (x + x; Liger passes a size as a size and a stride).
        def twice(x: torch.Tensor) -> torch.Tensor:
            return tk.vector_add(x, x)
        r = ko.record_plugin(ko.triton(twice, [{"BLOCK_SIZE": 128}]), op_name="kop_tt_rec::twice")
        self.assertEqual(r.doc["params"][:2], ["x", "x"])

        def scalar_twice(x: torch.Tensor, n: int) -> torch.Tensor:
            y = torch.empty_like(x)
            strided_offset[(1,)](x, y, 1, n, n, BLOCK=128, FLAG=False)  # n elements, each plus n
            return y
        r = record(scalar_twice, example_inputs=(meta_tensor(8),))
        self.assertEqual(r.doc["params"][:4], ["x", "Y", "n", "n"])  # s = 1 is a Triton specialisation

        def head(x: torch.Tensor, n: int) -> torch.Tensor:
            torch._check(n <= x.shape[0])
            torch._check(n >= 0)
            y = torch.empty_like(x)
            copy_kernel[(triton.cdiv(x.shape[0], 128),)](x, y, n, BLOCK=128)
            return y
        r = record(head, example_inputs=(meta_tensor(40),))
        self.assertIn("n <= dim(x, 0)", r.doc["requires"])
        self.assertIn("0 <= n", r.doc["requires"])

        def unmasked(x: torch.Tensor) -> torch.Tensor:
            assert x.numel() % 128 == 0
            y = torch.empty_like(x)
            copy_kernel[(x.numel() // 128,)](x, y, x.numel(), BLOCK=128)
            return y
        r = record(unmasked, example_inputs=(meta_tensor(4, 64),))
        self.assertIn("numel(x) % 128 == 0", r.doc["requires"])

        # meta_impl's own checks count too, and are read after it ran.
        def gather(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            z = torch.empty(y.shape[0], device=x.device)
            copy_kernel[(triton.cdiv(y.shape[0], 128),)](y, z, y.shape[0], BLOCK=128)
            return z

        def gather_meta(x, y):
            assert x.shape[0] == y.shape[0]
            return x.new_empty(x.shape[0])
        r = record(gather, meta_impl=gather_meta, example_inputs=(meta_tensor(10), meta_tensor(10)))
        self.assertIn("dim(y, 0) == dim(x, 0)", r.doc["requires"])

    def test_outputs_initialised_as_a_whole_record_their_init(self):
        # Note [initialised outputs]: each way host code initialises a new output, and what the spec says.
        def init(launch, **kw):
            return [o.get("init") for o in record(launch, **kw).doc["outputs"]]

        def made(make):
            def launch(x: torch.Tensor) -> torch.Tensor:
                y = make(x)
                copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
                return y
            return launch
        cases = [(torch.zeros_like, {"fill": 0}), (torch.ones_like, {"fill": 1}),
                 (lambda x: x.new_zeros(x.shape), {"fill": 0}), (lambda x: torch.full_like(x, -3), {"fill": -3}),
                 (lambda x: torch.full(x.shape, float("-inf"), device=x.device), {"fill": "-inf"}),
                 (lambda x: torch.empty_like(x).fill_(0.25), {"fill": 0.25}),
                 (lambda x: torch.zeros_like(x).fill_(7), {"fill": 7}),  # the last whole write wins
                 (lambda x: torch.empty_like(x).zero_(), {"fill": 0}),
                 (lambda x: torch.empty_like(x), None), (lambda x: x.clone(), {"clone": "x"}),
                 (lambda x: torch.empty_like(x).copy_(x), {"clone": "x"}),
                 (lambda x: torch.zeros(x.shape, device=x.device, out=torch.empty_like(x)), {"fill": 0})]
        for i, (make, want) in enumerate(cases):
            self.assertEqual(init(made(make)), [want], i)
        r = record(add_one_to_a_clone_launch)
        self.assertEqual(r.doc["outputs"], [{"name": "X", "shape": {"same_as": "x"}, "init": {"clone": "x"}}])
        self.assertEqual(record(column_sums_launch, configs=[{}]).doc["outputs"][0]["init"], {"fill": 0})
        # The C++ spec reads it back as written, the infinity included.
        r = record(even_rows_max_launch, configs=[{}])
        self.assertEqual(json.loads(r.spec_json())["outputs"][0]["init"], {"fill": "-inf"})

    def test_the_sm_count_is_a_launch_expression(self):
        r = record(rows_persistent_launch, configs=[{}], example_inputs=(meta_tensor(64, 100),))
        self.assertEqual(r.doc["geometry"]["custom"]["grid"][0], "sm_count()")
        self.assertIn({"expr": "cdiv(dim(x, 0), sm_count())"}, r.doc["params"])

        def decides(x: torch.Tensor) -> torch.Tensor:
            sm = torch.cuda.get_device_properties(x.device).multi_processor_count
            y = torch.empty_like(x)
            rows_persistent[(sm if sm > 100 else 100,)](x, y, x.shape[0], x.shape[1], 1, BLOCK=128)
            return y
        expect_error(self, ValueError, "which depends on the device's number of SMs (multi_processor_count); "
                     "kernelop records it as sm_count(), evaluated per device at launch", record, decides,
                     configs=[{}], example_inputs=(meta_tensor(64, 100),))

        def reads_major(x: torch.Tensor) -> torch.Tensor:
            block = 256 if torch.cuda.get_device_properties(x.device).major >= 9 else 128
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=block)
            return y
        # (Triton's architectures are chosen when the op compiles, after it is recorded: a CuTe DSL or cuTile op's
        # are known, and its host code may decide on them where they agree, test_quack.DeviceCapability)
        expect_error(self, ValueError, "launch_fn reads torch.cuda.get_device_properties(...).major; the op runs on "
                     "any device, and its architectures are not known as it is recorded", record,
                     reads_major, configs=[{}])

        def shapes_with_it(x: torch.Tensor) -> torch.Tensor:
            sm = torch.cuda.get_device_properties(x.device).multi_processor_count
            y = torch.empty((sm, x.shape[1]), device=x.device)
            rows_persistent[(sm,)](x, y, x.shape[0], x.shape[1], 1, BLOCK=128)
            return y
        expect_error(self, ValueError, "'sm_count()': sm_count() cannot shape an output", record, shapes_with_it,
                     configs=[{}], example_inputs=(meta_tensor(64, 100),))

    def test_outputs_are_not_computed_on_the_host(self):
        def fill_a_part(x, s):
            y = torch.zeros_like(x)
            y[:2].fill_(1)
            return y

        def launch_making(make):
            def launch(x: torch.Tensor, s: float) -> torch.Tensor:
                y = make(x, s)
                copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
                return y
            return launch
        for make, message in [
                (lambda x, s: torch.zeros_like(x).add_(1), "output 0 is made or written on the host by aten.add_"),
                (lambda x, s: x * 2, "output 0 is made or written on the host by aten.mul"),
                (lambda x, s: torch.mul(x, 2, out=torch.empty_like(x)), "output 0 is made or written on the host by "
                 "aten.mul"),
                (fill_a_part, "output 0 is made or written on the host by aten.fill_ on a part of it"),
                (lambda x, s: torch.full_like(x, s), "output 0 is filled (aten.full_like) with float scalar input "
                 "'s', which is not a constant"),
                (lambda x, s: torch.full_like(x, x.shape[0]), "which is not a constant; kernelop fills outputs "
                 "with constants before the launch"),
                (lambda x, s: torch.empty_like(x).copy_(x.flip(0)), "output 0 is a copy (aten.copy_) of something "
                 "other than a whole input"),
                (lambda x, s: torch.empty((x.shape[0] * 2,), device=x.device).copy_(x.repeat(2)),
                 "is a copy (aten.copy_) of something other than a whole input")]:
            expect_error(self, ValueError, message, record, launch_making(make), example_inputs=(torch.empty(8),))
        # A comparison's mask counted and used again is host work, named where the glue takes it.
        def mask_twice(x: torch.Tensor, t: torch.Tensor, ignore: int = -1) -> torch.Tensor:
            m = t != ignore
            a, b = m.sum(), m.sum()
            y = torch.empty_like(x)
            scale_by[(triton.cdiv(x.numel(), 128),)](x, x.sum() / a, y, x.numel(), BLOCK=128)
            return y, b
        expect_error(self, ValueError, "kernelop's glue (at ", record, mask_twice,
                     example_inputs=(torch.empty(64), torch.empty(8, dtype=torch.int64)))
        expect_error(self, ValueError, ") is given a tensor computed on the host (aten.ne, at ", record, mask_twice,
                     example_inputs=(torch.empty(64), torch.empty(8, dtype=torch.int64)))
        # A cast before the kernel is kernelop's glue, a launch before the op's own kernel (which then writes over
        # what it cast, as launch_fn's kernel does).
        d = record(launch_making(lambda x, s: x.double().float()), example_inputs=(torch.empty(8),)).doc
        self.assertEqual([(t["kernel_name"], t["type_params"][1]["dtypes"], t.get("before")) for t in d["then"]],
                         [("kop_cast<T, U>", ["float64"], True), ("kop_cast<T, U>", ["float32"], True)])

        def writes_input(x: torch.Tensor) -> torch.Tensor:
            x.add_(1)
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
            return y
        expect_error(self, ValueError, "launch_fn writes input 'x' on the host (aten.add_)", record, writes_input)

    def test_several_specs_are_one_list_of_tactics(self):
        r = ko.record_plugin([ko.triton(tk.vector_add, [{"BLOCK_SIZE": 256}]),
                              ko.triton(tk.vector_add, [{"BLOCK_SIZE": 1024}])], op_name="kop_tt_rec::two_specs")
        self.assertEqual([c["BLOCK_SIZE"] for c in r.doc["configs"]], [256] * 3 + [1024] * 3)
        self.assertEqual(r.doc["geometry"]["custom"]["grid"], ["cdiv(numel(x), BLOCK_SIZE)"])
        expect_error(self, ValueError, "the specs have different launch_fns", ko.record_plugin,
                     [ko.triton(tk.vector_add), ko.triton(tk.softmax)])

    def test_example_inputs_give_ranks_and_dtypes(self):
        r = ko.record_plugin(ko.triton(tk.vector_add, configs=[{"BLOCK_SIZE": 512}]), op_name="kop_tt_rec::add3",
                             example_inputs=(torch.empty(2, 3, 4, dtype=torch.float16, device="meta"),
                                             torch.empty(2, 3, 4, dtype=torch.float16, device="meta")))
        self.assertEqual(r.doc["inputs"][0], {"name": "x", "dtype": "float16"})
        self.assertEqual(r.doc["params"][3], {"expr": "numel(x)"})
        self.assertEqual(r.doc["requires"], ["same_shape(y, x)"])  # rank-free: the examples give dtypes

    def test_grids_over_the_configs(self):
        def squared(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[lambda m: (x.numel() // (m["BLOCK"] * m["BLOCK"]) + 1,)](x, y, x.numel(), BLOCK=128)
            return y
        r = record(squared, [{"BLOCK": 128}, {"BLOCK": 256}])
        self.assertEqual(r.doc["geometry"]["custom"]["grid"], ["numel(x) // (BLOCK * BLOCK) + 1"])

        def branches(x: torch.Tensor) -> torch.Tensor:  # a Python branch on the config: one grid per config
            y = torch.empty_like(x)
            copy_kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"] if m["BLOCK"] > 128 else 64),)](
                x, y, x.numel(), BLOCK=128)
            return y
        r = record(branches, [{"BLOCK": 128}, {"BLOCK": 256}])
        self.assertEqual(r.doc["geometry"]["custom"]["grid"],
                         ["select((BLOCK == 128) * (num_warps == 4) * (num_stages == 3), cdiv(numel(x), 64), "
                          "cdiv(numel(x), 256))"])

    def test_the_default_op_name_is_stable(self):
        a = ko.record_plugin(ko.triton(tk.vector_add, configs=tk.VECTOR_ADD_CONFIGS))
        b = ko.record_plugin(ko.triton(tk.vector_add, configs=tk.VECTOR_ADD_CONFIGS))
        c = ko.record_plugin(ko.triton(tk.vector_add, configs=tk.VECTOR_ADD_CONFIGS[:1]))
        half = ko.record_plugin(ko.triton(tk.vector_add, configs=tk.VECTOR_ADD_CONFIGS),
                                example_inputs=(meta_tensor(2, 2).half(), meta_tensor(2, 2).half()))
        self.assertRegex(a.op_name, r"^kernelop_triton::add_kernel_[0-9a-f]{12}$")
        self.assertEqual(a.op_name, b.op_name)
        self.assertEqual(a.doc["op"], a.op_name)
        self.assertNotEqual(a.op_name, c.op_name)
        self.assertNotEqual(a.op_name, half.op_name)  # the same kernel and configs for another dtype


class RecordedBackward(unittest.TestCase):
    """custom_plugin(..., backward=Backward(differentiable, ko.triton(bwd_launch_fn))): Note [backward] for recorded
    ops. CPU: the spec, registration with its Autograd kernel (meta tensors), a package where Triton cannot be
    imported, refusals."""

    def test_the_spec_carries_the_recorded_backward(self):
        r = recorded_scale_mul()
        b = r.doc["backward"]
        self.assertEqual(b["differentiable"], ["x", "w"])
        self.assertEqual([o["name"] for o in b["outputs"]], ["grad_x", "grad_w"])
        self.assertEqual([i["name"] for i in b["inputs"]], ["x", "w", "grad_Y", "alpha"])
        self.assertEqual(b["kernel_name"], "scale_mul_bwd")
        self.assertNotIn("op", b)
        self.assertIsNotNone(r.backward)
        r.check(["sm_90"])  # both kernels compiled and checked against their specs, on a machine without a GPU

    def test_an_unnamed_op_is_named_after_its_backward_too(self):
        a = recorded_scale_mul(op_name=None)
        b = recorded_scale_mul(op_name=None, differentiable=("x",), bwd=scale_mul_backward_only_x)
        c = ko.record_plugin(ko.triton(scale_mul_launch))
        self.assertEqual(len({a.op_name, b.op_name, c.op_name}), 3)
        self.assertEqual(a.op_name, recorded_scale_mul(op_name=None).op_name)

    def test_registered_it_differentiates_on_meta_tensors(self):
        op = ko.custom_plugin(ko.triton(scale_mul_launch), op_name="kop_tt_bwd::reg",
                              backward=ko.Backward(["x", "w"], ko.triton(scale_mul_backward_launch)))
        x = torch.empty(3, 5, 7, device="meta", requires_grad=True)
        w = torch.empty(3, 5, 7, device="meta", requires_grad=True)
        y = op(x, w, 2.0)
        self.assertEqual(tuple(y.shape), (3, 5, 7))
        gx, gw = torch.autograd.grad(y, (x, w), torch.empty(3, 5, 7, device="meta"))
        self.assertEqual((tuple(gx.shape), tuple(gw.shape)), ((3, 5, 7), (3, 5, 7)))
        self.assertIn("kop_tt_bwd::reg_backward(Tensor x, Tensor w, Tensor grad_Y, float alpha=1.5) -> "
                      "(Tensor, Tensor)", str(torch.ops.kop_tt_bwd.reg_backward.default._schema))

    def test_only_the_differentiable_inputs_get_gradients(self):
        op = ko.custom_plugin(ko.triton(scale_mul_launch), op_name="kop_tt_bwd::only_x",
                              backward=ko.Backward(["x"], ko.triton(scale_mul_backward_only_x)))
        x = torch.empty(8, device="meta", requires_grad=True)
        w = torch.empty(8, device="meta", requires_grad=True)
        y = op(x, w)
        (gx,) = torch.autograd.grad(y, (x,), torch.empty(8, device="meta"))
        self.assertEqual(tuple(gx.shape), (8,))
        with self.assertRaisesRegex(RuntimeError, "not have been used in the graph"):
            torch.autograd.grad(op(x, w), (w,), torch.empty(8, device="meta"))

    def test_a_package_carries_the_backward_where_triton_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as d:
            path = recorded_scale_mul(op_name="kop_tt_bwd_pkg::scale_mul").build_package(os.path.join(d, "s.kop"))
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                x = torch.empty(4, 9, device="meta", requires_grad=True)
                w = torch.empty(4, 9, device="meta", requires_grad=True)
                gx, gw = torch.autograd.grad(op(x, w, 3.0), (x, w), torch.empty(4, 9, device="meta"))
                print(tuple(gx.shape), tuple(gw.shape))
                print(torch.ops.kop_tt_bwd_pkg.scale_mul_backward.default._schema)
            """)
        self.assertEqual(out.split("\n")[:2], [
            "(4, 9) (4, 9)",
            "kop_tt_bwd_pkg::scale_mul_backward(Tensor x, Tensor w, Tensor grad_Y, float alpha=1.5) -> "
            "(Tensor, Tensor)"])

    def test_refusals_name_the_op_and_what_the_backward_can_receive(self):
        def takes_q(x: torch.Tensor, q: torch.Tensor):
            return torch.empty_like(x)

        expect_error(self, ValueError, "kernelop.custom_plugin('kop_tt_bwd::refused'): the backward's launch_fn "
                     "takes tensor 'q', which is none of what a backward receives: the forward's tensors 'x', 'w', "
                     "its outputs 'Y' and their gradients 'grad_Y'", ko.custom_plugin, ko.triton(scale_mul_launch),
                     op_name="kop_tt_bwd::refused", backward=ko.Backward(["x"], ko.triton(takes_q)))
        expect_error(self, ValueError, "a backward's launch_fn returns one new tensor per differentiable input, in "
                     "order (grad_x, grad_w); it returns 1", ko.custom_plugin, ko.triton(scale_mul_launch),
                     op_name="kop_tt_bwd::refused",
                     backward=ko.Backward(["x", "w"], ko.triton(scale_mul_backward_only_x)))
        expect_error(self, TypeError, "kernelop.custom_plugin('kop_tt_bwd::refused'): the backward of a recorded op "
                     "is recorded too: Backward.spec must be kernelop.triton(...)", ko.custom_plugin,
                     ko.triton(scale_mul_launch), op_name="kop_tt_bwd::refused",
                     backward=ko.Backward(["x"], ko.KernelSpec(kernel_source="", kernel_name="k")))
        expect_error(self, TypeError, "backward must be kernelop.Backward(differentiable, ", ko.custom_plugin,
                     ko.triton(scale_mul_launch), op_name="kop_tt_bwd::refused",
                     backward=ko.triton(scale_mul_backward_launch))
        expect_error(self, ValueError, "kernelop refuses the recorded spec before compiling: op kop_tt_bwd::refused: "
                     "backward.differentiable[1]: 'q' is not a tensor input", ko.custom_plugin,
                     ko.triton(scale_mul_launch),
                     op_name="kop_tt_bwd::refused", backward=ko.Backward(["x", "q"], ko.triton(scale_mul_backward_launch)))
        self.assertFalse(hasattr(torch.ops.kop_tt_bwd, "refused"))

    def test_from_renames_what_a_backward_parameter_receives(self):
        def backward_taking_g(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, alpha: float = 1.5):
            return scale_mul_backward_launch(x, w, g, alpha)

        r = ko.record_plugin(ko.triton(scale_mul_launch), op_name="kop_tt_bwd::renamed",
                             backward=ko.Backward(["x", "w"], ko.triton(backward_taking_g), from_={"g": "grad_Y"}))
        self.assertEqual(r.doc["backward"]["from"], {"g": "grad_Y"})
        self.assertEqual([i["name"] for i in r.doc["backward"]["inputs"]], ["x", "w", "g", "alpha"])
        expect_error(self, ValueError, "the backward's launch_fn takes tensor 'g' (from 'grad_Z'), which is none of "
                     "what a backward receives", ko.record_plugin, ko.triton(scale_mul_launch),
                     op_name="kop_tt_bwd::renamed",
                     backward=ko.Backward(["x", "w"], ko.triton(backward_taking_g), from_={"g": "grad_Z"}))
        # A refused backward leaves the next recording's output names its own.
        self.assertEqual([o["name"] for o in ko.record_plugin(ko.triton(scale_mul_launch)).doc["outputs"]], ["Y"])

    def test_the_backwards_binaries_are_never_dropped_nor_extra(self):
        r = recorded_scale_mul()
        doc, binaries, chain = json.dumps(r.doc), r.compile(["sm_90"]), r.backward_binaries(["sm_90"])
        expect_error(self, ValueError, "op kop_tt_bwd::scale_mul: binaries were given for 0 link(s) of its backward "
                     "chain, and its specs declare more: none for op kop_tt_bwd::scale_mul_backward",
                     ko._kernelop.check_binaries, doc, binaries)
        expect_error(self, ValueError, "op kop_tt_bwd::scale_mul: its specs declare a backward chain of 1 link(s), "
                     "and binaries were given for 2", ko._kernelop.check_binaries, doc, binaries, chain + chain)
        expect_error(self, RuntimeError, "op kop_tt_bwd::scale_mul_backward: binary 0 (program 0, sm_90a, entry "
                     "'scale_mul_fwd'): takes 7 parameter(s) but the calling convention passes 9",
                     ko._kernelop.check_binaries, doc, binaries, [binaries])
        ko._kernelop.check_binaries(doc, binaries, chain)
        # Something else than a KernelBinary is named with its place: the op's own, or a backward link's.
        expect_error(self, TypeError, "binary 0 (a int) has no field 'program'; expected a KernelBinary",
                     ko._kernelop.check_binaries, doc, [1], chain)
        expect_error(self, TypeError, "binary 1 of backward link 1: field 'arch' is a int; expected str",
                     ko._kernelop.check_binaries, doc, binaries,
                     [[chain[0][0], dataclasses.replace(chain[0][0], arch=90)]])


class WrittenInputs(unittest.TestCase):
    """A kernel that writes an input is never recorded as only reading it (Note [written pointers])."""

    def schema(self, recorded):
        recorded.register()
        return str(getattr(torch.ops, recorded.op_name.split("::")[0]).__getattr__(
            recorded.op_name.split("::")[1]).default._schema)

    def mutated(self, recorded):
        return [i["name"] for i in recorded.doc["inputs"] if i.get("mutated")]

    def test_an_input_written_by_the_kernel_is_mutated(self):
        r = ko.record_plugin(ko.triton(zero_ignored_rows_launch), op_name="kop_tt_w::xent",
                             example_inputs=(torch.empty(4, 1000), torch.empty(4, dtype=torch.int32)))
        self.assertEqual(self.mutated(r), ["x"])
        self.assertEqual(self.schema(r), "kop_tt_w::xent(Tensor(a!) x, Tensor target) -> Tensor")
        out = torch.ops.kop_tt_w.xent(torch.empty(8, 1000, device="meta"), torch.empty(8, dtype=torch.int32,
                                                                                       device="meta"))
        self.assertEqual(tuple(out.shape), (8,))

    def test_in_place_ops_return_nothing(self):
        for launch, name in ((add_one_returning_it, "inc"), (add_one_returning_nothing, "inc_none")):
            r = ko.record_plugin(ko.triton(launch), op_name=f"kop_tt_w::{name}")
            self.assertEqual((self.mutated(r), r.doc["outputs"]), (["x"], []))
            self.assertEqual(self.schema(r), f"kop_tt_w::{name}(Tensor(a!) x) -> ()")
            self.assertIsNone(getattr(torch.ops.kop_tt_w, name)(torch.empty(3, 5, device="meta")))

    def test_a_written_input_is_a_new_version_and_its_value_has_no_gradient(self):
        # Note [written inputs with a backward], for an op without a backward: the version is bumped, so a graph that
        # saved the input refuses to use the value it lost, and what the op left has no gradient (not the history of
        # the value it replaced: a silently wrong gradient).
        ko.record_plugin(ko.triton(add_one_returning_nothing), op_name="kop_tt_w::inc_v").register()
        inc = torch.ops.kop_tt_w.inc_v
        x = torch.randn(3, 5, device="meta", requires_grad=True)
        a = x * 2
        y = a.sin()  # saves a
        inc(a)
        self.assertEqual(a._version, 1)
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            y.sum().backward()
        with self.assertRaisesRegex(RuntimeError, r"op kop_tt_w::inc_v wrote into its input 'x' in place: the value "
                                                  r"it left there has no gradient"):
            (a * 3).sum().backward()
        with self.assertRaisesRegex(RuntimeError, r"op kop_tt_w::inc_v writes its input 'x' in place: a leaf "
                                                  r"Variable that requires grad is being used in an in-place"):
            inc(x)
        self.assertEqual(x._version, 0)  # refused before the call
        with torch.no_grad():
            inc(x)  # as PyTorch's in-place ops: a leaf may be written where nothing is recorded
        self.assertEqual(x._version, 1)
        plain = torch.empty(4, device="meta")
        inc(plain)
        self.assertEqual((plain._version, plain.requires_grad), (1, False))

    def test_an_op_that_writes_its_input_has_a_backward(self):
        r = square_doubling("kop_tt_w::sqd")
        self.assertEqual([i.get("mutated") for i in r.doc["inputs"]], [True])
        self.assertEqual([i["name"] for i in r.doc["backward"]["inputs"]], ["x", "grad_Y"])
        op = r.register()
        self.assertEqual(str(op.default._schema), "kop_tt_w::sqd(Tensor(a!) x) -> Tensor")
        x0 = torch.randn(6, 7, device="meta", requires_grad=True)
        a = x0 * 1.0
        y = op(a)
        self.assertEqual((a._version, type(a.grad_fn).__name__, y.grad_fn.name()),
                         (1, "Error", "kop_tt_w::sqdBackward"))
        (g,) = torch.autograd.grad(y, (x0,), torch.empty_like(y))
        self.assertEqual((g.shape, g.device.type), (x0.shape, "meta"))
        with self.assertRaisesRegex(RuntimeError, "op kop_tt_w::sqd writes its input 'x' in place: a leaf"):
            op(x0)
        base = x0 * 1.0  # a view of a tensor with history: PyTorch's CopySlices takes the base's history
        y = op(base[2:])
        self.assertEqual(type(base.grad_fn).__name__, "CopySlices")
        (g,) = torch.autograd.grad(y, (x0,), torch.empty_like(y))
        self.assertEqual(g.shape, x0.shape)
        with self.assertRaisesRegex(RuntimeError, "a view of a leaf Variable that requires grad"):
            op(x0[1:])
        y = op(x0.detach() * 1.0)  # nothing requires grad: no graph, the version still moves
        self.assertFalse(y.requires_grad)

    def test_written_inputs_returned_are_results_with_gradients(self):
        # Note [written results]: launch_fn returns the inputs its kernel writes: they are the op's results, and the
        # backward reads their gradients as grad_<input>_out (grad_<input> is the gradient it gives the input).
        r = scale_two_op("kop_tt_wr::scale_two")
        self.assertEqual([(i["name"], i.get("mutated"), i.get("result")) for i in r.doc["inputs"]],
                         [("x", True, True), ("y", True, True)])
        self.assertEqual([i["name"] for i in r.doc["backward"]["inputs"]], ["grad_x_out", "grad_y_out"])
        self.assertEqual([o["name"] for o in r.doc["backward"]["outputs"]], ["grad_x", "grad_y"])
        op = r.register()
        self.assertEqual(str(op.default._schema), "kop_tt_wr::scale_two(Tensor(a!) x, Tensor(b!) y) -> ()")
        for name, scenario in written_results_scenarios(op, "meta"):
            with self.subTest(name):
                x0 = torch.randn(4, 6, device="meta", requires_grad=True)
                y0 = torch.randn(4, 6, device="meta", requires_grad=True)
                outs = scenario(x0, y0)
                grads = torch.autograd.grad(sum((o * 1.0).sum() for o in outs), (x0, y0), allow_unused=True)
                self.assertEqual([g.shape for g in grads if g is not None][0], x0.shape)
        x0 = torch.randn(4, 6, device="meta", requires_grad=True)
        a, b = x0 * 1.0, x0 * 2.0
        op(a, b)
        self.assertEqual((a.grad_fn.name(), b.grad_fn.name(), a._version), ("kop_tt_wr::scale_twoBackward",) * 2 + (1,))
        base = x0 * 1.0
        q, k = base[0], base[1]
        op(q, k)  # two views of one base: theirs and the base's history is the op's node
        self.assertEqual({q.grad_fn.name(), k.grad_fn.name(), base.grad_fn.name()}, {"kop_tt_wr::scale_twoBackward"})
        with self.assertRaisesRegex(RuntimeError, "op kop_tt_wr::scale_two writes its input 'x' in place: a view of "
                                                  "a leaf Variable"):
            op(x0[0], b)
        ax, by = x0 * 1.0, x0 * 1.0  # retained gradients move to the results' nodes (none is lost, none asserts)
        a, b = ax.view(-1), by[1:]
        for t in (ax, a, by, b):
            t.retain_grad()
        op(a, b)
        ((a * 2).sum() + (by * by).sum() + ax.sum() + b.sum()).backward()
        self.assertEqual([t.grad is not None for t in (ax, a, by, b)], [True] * 4)
        # retained where the result was a later output of the node that made it (VarMeanBackward's second)
        _, m = torch.var_mean(x0 * 1.0, dim=0)
        m.retain_grad()
        op(m, torch.empty(6, device="meta"))
        m.sum().backward()
        self.assertEqual((m.grad_fn.name(), tuple(m.grad.shape)), ("kop_tt_wr::scale_twoBackward", (6,)))

    def test_a_result_the_backward_does_not_read_has_no_gradient(self):
        def only_x(grad_x_out: torch.Tensor, y: torch.Tensor):
            return mul_backward_over_gradient(y, grad_x_out)
        op = ko.record_plugin(ko.triton(scale_two_launch), op_name="kop_tt_wr::only_x",
                              backward=ko.Backward(["x"], ko.triton(only_x))).register()
        x0 = torch.randn(4, 6, device="meta", requires_grad=True)
        a, b = x0 * 1.0, x0 * 2.0
        op(a, b)
        self.assertEqual((a.grad_fn.name(), type(b.grad_fn).__name__), ("kop_tt_wr::only_xBackward", "Error"))
        with self.assertRaisesRegex(RuntimeError, "op kop_tt_wr::only_x wrote into its input 'y' in place: the value "
                                                  "it left there has no gradient"):
            b.sum().backward()

    def test_example_layouts_are_recorded_and_required(self):
        # Note [example layouts]: an example that is a transposed view of a contiguous tensor (HF's q) is recorded
        # so; the op takes the input with its strides and requires that layout.
        r = ko.record_plugin(ko.triton(add_one_returning_it), op_name="kop_tt_wr::inc_t",
                             example_inputs=(torch.empty(3, 4, 5).transpose(0, 1),))
        self.assertEqual(r.doc["inputs"], [{"name": "x", "dtype": "float32", "mutated": True, "strided": True,
                                            "result": True}])
        self.assertEqual(r.doc["requires"], [
            "rank(x) == 3", "select(dim(x, 2) == 1, 1, stride(x, 2) == 1)",
            "select(dim(x, 0) == 1, 1, stride(x, 0) == dim(x, 2))",
            "select(dim(x, 1) == 1, 1, stride(x, 1) == dim(x, 0) * dim(x, 2))"])
        op = r.register()
        op(torch.empty(6, 7, 8, device="meta").transpose(0, 1))
        op(torch.empty(1, 6, 8, device="meta")[:, :1].transpose(0, 1))  # sizes of 1: any stride
        with self.assertRaisesRegex(RuntimeError, r"op kop_tt_wr::inc_t: the inputs break the requirement "
                                                  r"'select\(dim\(x, 2\) == 1, 1, stride\(x, 2\) == 1\)'"):
            op(torch.empty(7, 6, 8, device="meta").transpose(1, 2))
        with self.assertRaisesRegex(RuntimeError, r"op kop_tt_wr::inc_t: the inputs break the requirement "
                                                  r"'select\(dim\(x, 0\) == 1, 1, stride\(x, 0\) == dim\(x, 2\)\)'"):
            op(torch.empty(7, 6, 8, device="meta"))
        # an example built as HF builds q (a view of a rank-3 projection, transposed) has the layout too
        r = ko.record_plugin(ko.triton(add_one_returning_it), op_name="kop_tt_wr::inc_hf",
                             example_inputs=(torch.empty(2, 5, 12).view(2, 5, 3, 4).transpose(1, 2),))
        self.assertEqual(r.doc["inputs"][0].get("strided"), True)
        # an input the kernel only reads takes any layout, whatever its example's
        r = ko.record_plugin(ko.triton(scale_mul_launch), op_name="kop_tt_wr::read_t",
                             example_inputs=(torch.empty(4, 6).t(), torch.empty(6, 4)))
        self.assertEqual([i.get("strided", False) for i in r.doc["inputs"][:2]], [False, False])
        self.assertFalse(any("stride" in q for q in r.doc.get("requires", [])))

    def test_a_layout_launch_fn_refuses_is_recorded_contiguous_with_its_backward(self):
        # launch_fn asserts a contiguous input: recorded with a contiguous example (and a warning saying so); the
        # backward's examples are made from the examples the forward was recorded from.
        def contiguous_copy(x: torch.Tensor) -> torch.Tensor:
            if not x.is_contiguous():
                raise ValueError("x must be contiguous")
            y = torch.empty_like(x)
            copy_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
            return y

        def contiguous_copy_backward(grad_Y: torch.Tensor) -> torch.Tensor:
            return contiguous_copy(grad_Y)
        with self.assertWarnsRegex(UserWarning, "recorded with contiguous examples of x"):
            r = ko.record_plugin(ko.triton(contiguous_copy), op_name="kop_tt_lay::copy",
                                 example_inputs=(torch.empty(4, 6).t(),),
                                 backward=ko.Backward(["x"], ko.triton(contiguous_copy_backward)))
        self.assertEqual(r.doc["backward"]["outputs"][0]["shape"], {"same_as": "grad_Y"})

    def test_a_discarded_recording_warns_nothing(self):
        # A read-only input's example layout is recorded again contiguous: only the kept recording's warnings show.
        def warns(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            import warnings
            warnings.warn("launch_fn's own warning")
            return scale_mul_launch(x, w)

        def count(*examples: torch.Tensor) -> int:
            import warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ko.record_plugin(ko.triton(warns), op_name="kop_tt_lay::warns", example_inputs=examples)
            return sum("launch_fn's own warning" in str(w.message) for w in caught)
        contiguous = count(torch.empty(4, 6), torch.empty(4, 6))
        self.assertGreater(contiguous, 0)
        self.assertEqual(count(torch.empty(6, 4).t(), torch.empty(4, 6)), contiguous)

        # the kept ones meet the user's filters as warnings of their module (not of their file's path)
        def ignored(*examples: torch.Tensor) -> int:
            import warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                warnings.filterwarnings("ignore", "launch_fn's own", UserWarning, "(test_triton|__main__)$")
                ko.record_plugin(ko.triton(warns), op_name="kop_tt_lay::warns", example_inputs=examples)
            return sum("launch_fn's own warning" in str(w.message) for w in caught)
        self.assertEqual(ignored(torch.empty(6, 4).t(), torch.empty(4, 6)), 0)

    def test_written_inputs_that_share_memory_are_refused(self):
        op = scale_two_op("kop_tt_wr::share").register()
        x0 = torch.randn(4, 6, device="meta", requires_grad=True)
        base = x0 * 1.0
        for a, b in ((base, base[1:]), (base[1:], base), (base[:3], base[2:]), (base, base)):
            with self.assertRaisesRegex(RuntimeError, "op kop_tt_wr::share writes its inputs 'x' and 'y' in place, "
                                                      "and they share memory"):
                op(a, b)
        self.assertEqual(base._version, 0)  # refused before the call

    def test_an_op_with_an_output_and_a_written_result(self):
        r = ko.record_plugin(ko.triton(square_doubling_returning_x), op_name="kop_tt_wr::sqdx",
                             backward=ko.Backward(["x"], ko.triton(square_doubling_returning_x_backward)))
        self.assertEqual([i["name"] for i in r.doc["backward"]["inputs"]], ["x", "grad_Y", "grad_x_out"])
        op = r.register()
        self.assertEqual(str(op.default._schema), "kop_tt_wr::sqdx(Tensor(a!) x) -> Tensor")
        x0 = torch.randn(4, 6, device="meta", requires_grad=True)
        base = x0 * 1.0
        a = base[1:]
        y = op(a)
        self.assertEqual((y.grad_fn.name(), a.grad_fn.name()), ("kop_tt_wr::sqdxBackward",) * 2)
        (g,) = torch.autograd.grad(y.sum() + a.sum() + base.sum(), (x0,), retain_graph=True)
        self.assertEqual(g.shape, x0.shape)
        base.add_(1)  # a's history is regenerated from its base's: PyTorch requires its node input to be 0
        self.assertEqual(type(a.grad_fn).__name__, "AsStridedBackward0")
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):  # the backward reads a
            torch.autograd.grad(y.sum(), (x0,))

    def test_pointers_read_or_offset_by_loaded_values_are_not_written(self):
        r = ko.record_plugin(ko.triton(scatter_rows_launch), op_name="kop_tt_w::scatter",
                             example_inputs=(torch.empty(4, 64), torch.empty(4, dtype=torch.int64),
                                             torch.empty(16, 64)))
        self.assertEqual(self.mutated(r), ["dst"])
        self.assertEqual(self.schema(r), "kop_tt_w::scatter(Tensor src, Tensor index, Tensor(a!) dst) -> ()")
        r = ko.record_plugin(ko.triton(tiled_matmul_launch), op_name="kop_tt_w::mm",
                             example_inputs=(torch.empty(64, 64, dtype=torch.float16),
                                             torch.empty(64, 64, dtype=torch.float16)))
        self.assertEqual(self.mutated(r), [])

    def test_every_config_counts(self):
        # INTO_INPUTS=False writes only z; a config that turns it on writes x or y (a select between them).
        r = ko.record_plugin(ko.triton(store_to_either_launch), op_name="kop_tt_w::either")
        self.assertEqual(self.mutated(r), [])
        r = ko.record_plugin(ko.triton(store_to_either_launch, [{"INTO_INPUTS": False}, {"INTO_INPUTS": True}]),
                             op_name="kop_tt_w::either2")
        self.assertEqual(self.mutated(r), ["x", "y"])

    def test_a_pointer_that_cannot_be_followed_makes_every_input_written(self):
        with self.assertWarnsRegex(UserWarning, "writes through a pointer kernelop cannot follow to a parameter .*"
                                   "every tensor it is given is taken as written"):
            r = ko.record_plugin(ko.triton(store_through_an_int_launch), op_name="kop_tt_w::int_ptr")
        self.assertEqual(self.mutated(r), ["x"])

    def test_each_kernel_is_analysed_once_per_process(self):
        # A recording runs launch_fn at two ranks (and size classes): the kernel's TTIR is analysed once.
        import kernelop._triton as kt
        calls = []
        original = kt._ttir_writes
        kt._ttir_writes = lambda *args: calls.append(1) or original(*args)
        try:
            ko.record_plugin(ko.triton(add_one_returning_it, [{"BLOCK": 64}]), op_name="kop_tt_w::once")
            first = len(calls)
            r = ko.record_plugin(ko.triton(add_one_returning_it, [{"BLOCK": 64}]), op_name="kop_tt_w::again")
        finally:
            kt._ttir_writes = original
        self.assertEqual((first, len(calls)), (1, 1))
        self.assertEqual(self.mutated(r), ["x"])

    def test_no_recorded_example_is_marked_written(self):
        # The corpus of kernels that only read their inputs: the examples and this file's.
        corpus = [(r, []) for r in tk.recorded("kop_tt_w_ex").values()]
        corpus += [(ko.record_plugin(ko.triton(launch), op_name=f"kop_tt_w::c{i}"), [])
                   for i, launch in enumerate((desc_scale_launch, negate_scale_launch, strided_offset_launch))]
        self.assertEqual(len(corpus), 6)
        for r, want in corpus:
            self.assertEqual(self.mutated(r), want, r.op_name)

    def test_the_package_keeps_the_mutation(self):
        r = ko.record_plugin(ko.triton(add_one_returning_it), op_name="kop_tt_w_pkg::inc")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "inc.kop")
            r.build_package(path)
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                print(op.default._schema)
            """)
        self.assertEqual(out.split("\n")[0], "kop_tt_w_pkg::inc(Tensor(a!) x) -> ()")


class InitialisedOutputsPackaged(unittest.TestCase):
    def test_packages_keep_the_init_and_the_sm_count(self):
        # Note [initialised outputs]: the package's spec has the init; kernelop inspect says it; a process where
        # Triton cannot be imported loads it.
        import subprocess
        ops = [(column_sums_launch, "sums", "  output    Out: [dim(x, 1)]  dtype float32  init fill 0\n"),
               (even_rows_max_launch, "maxes", "  init fill -inf\n"),
               (add_one_to_a_clone_launch, "clone", "  X: like(x)  dtype float32 (from x)  init clone of x\n"),
               (rows_persistent_launch, "persistent", "            grid  = [sm_count(), 1, 1]\n")]
        with tempfile.TemporaryDirectory() as d:
            for launch, name, want in ops:
                r = ko.record_plugin(ko.triton(launch), op_name=f"kop_tt_init_pkg::{name}",
                                     example_inputs=(torch.empty(64, 100),))
                path = os.path.join(d, f"{name}.kop")
                r.build_package(path)
                out = subprocess.run([sys.executable, "-m", "kernelop", "inspect", path], capture_output=True,
                                     text=True, timeout=120)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn(want, out.stdout)
                loaded = run_python(f"""
                    import torch, kernelop as ko
                    op = ko.load_package({path!r})
                    print(op.default._schema)
                """)
                self.assertEqual(loaded.split("\n")[0], f"kop_tt_init_pkg::{name}(Tensor x) -> Tensor")


class RankFree(unittest.TestCase):
    """An op recorded from a launch_fn that works at every rank works at every rank (Note [rank-free recording])."""

    def test_the_seed_example_runs_at_ranks_1_to_4(self):
        op = ko.custom_plugin(ko.triton(tk.elementwise_scale_mul, configs=tk.ELEMENTWISE_SCALE_MUL_CONFIGS),
                              op_name="kop_tt_rf::scale_mul")
        for shape in ((7,), (3, 5), (2, 3, 4), (2, 1, 3, 2)):
            x = torch.empty(shape, device="meta")
            self.assertEqual(tuple(op(x, torch.empty(shape, device="meta")).shape), shape)
        for a, b in (((3, 5), (5, 3)), ((3, 5), (15,)), ((2, 3, 4), (2, 3, 5))):
            with self.assertRaisesRegex(RuntimeError, r"op kop_tt_rf::scale_mul: the inputs break the requirement "
                                        r"'same_shape\(Y, X\)': Y has shape \[.*\], X \["):
                op(torch.empty(a, device="meta"), torch.empty(b, device="meta"))

    def test_host_views_record_as_shape_algebra(self):
        r = ko.record_plugin(ko.triton(row_norm_launch), op_name="kop_tt_rf::row_norm",
                             example_inputs=(torch.empty(4, 4096), torch.empty(4096)))
        d = r.doc
        self.assertNotIn("rank(x)", " ".join(d.get("requires", [])))
        # w was recorded at its example's rank only (a weight): that rank is required.
        self.assertEqual(d["requires"], ["rank(w) == 1", "dim(w, 0) == dim(x, -1)"])
        self.assertEqual(d["geometry"]["custom"]["grid"], ["numel_except(x, -1)"])
        self.assertEqual(d["params"][:6], ["Y", {"expr": "dim(x, -1)"}, "x", {"expr": "dim(x, -1)"}, "w",
                                           {"expr": "dim(x, -1)"}])
        self.assertEqual(d["params"][6], "eps")  # float(eps) is still the scalar input
        self.assertEqual(d["outputs"], [{"name": "Y", "shape": {"same_as": "x"}, "dtype": "float32"}])
        op = r.register()
        for shape in ((4096,), (3, 4096), (2, 3, 4096), (2, 2, 3, 4096)):
            self.assertEqual(tuple(op(torch.empty(shape, device="meta"), torch.empty(4096, device="meta"),
                                      1e-6).shape), shape)

    def test_a_launch_that_needs_a_rank_says_so(self):
        r = ko.record_plugin(ko.triton(first_two_dims_launch), op_name="kop_tt_rf::two_dims")
        self.assertIn("rank(x) == 2", r.doc["requires"])
        op = r.register()
        self.assertEqual(tuple(op(torch.empty(3, 5, device="meta")).shape), (3, 5))
        with self.assertRaisesRegex(RuntimeError, "rank"):
            op(torch.empty(2, 3, 5, device="meta"))

    def test_a_literal_float_is_a_constant_of_the_op(self):
        r = ko.record_plugin(ko.triton(literal_float_launch), op_name="kop_tt_rf::literal")
        self.assertEqual(r.doc["params"][3], {"float": 2.5})  # passed as Triton passes it: fp32
        self.assertEqual(r.dsl_state.signature["scale"], "fp32")


@triton.jit
def tile_double(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # One program doubles all of an M x N X (M <= BM, N <= BN): both blocks from the sizes.
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    mask = (rm < M) & (rn < N)
    tl.store(Y + rm * N + rn, tl.load(X + rm * N + rn, mask=mask) * 2, mask=mask)


def whole_tile_launch(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty_like(x)
    tile_double[(1,)](x, y, M, N, BM=triton.next_power_of_2(M), BN=triton.next_power_of_2(N))
    return y


def eligible(recorded, sizes):
    """The configs whose requires hold for `sizes` (leaf text -> value; aligned() true), by kernelop's evaluator."""
    import re
    out = []
    for i, c in enumerate(recorded.doc["configs"]):
        ok = True
        for r in c.get("requires", []):
            leaves = {leaf: 1 if leaf.startswith("aligned(") else sizes[leaf]
                      for leaf in set(re.findall(r"(?:aligned|dim|numel_except|numel)\([^()]*\)", r))}
            ok = ok and ko._kernelop.eval_expr(r, leaves) != 0
        if ok:
            out.append(i)
    return out


class SizeClasses(unittest.TestCase):
    """Constexprs computed from sizes (Note [size classes])."""

    CLASSES = [256, 1024, 4096, 8192, 32768]

    def recorded(self, configs=None, **kw):
        return ko.record_plugin(ko.triton(row_norm_sized_launch, configs, specialize=kw.pop("specialize", self.CLASSES)),
                                op_name=kw.pop("op_name", "kop_tt_sc::norm"),
                                example_inputs=(torch.empty(4, 4096), torch.empty(4096)), **kw)

    def test_each_class_is_recorded_with_its_bounds(self):
        r = self.recorded()
        d = r.doc
        # 32768 is refused by launch_fn itself (above MAX_FUSED_SIZE): dropped.
        self.assertEqual(sorted({c["size_class"] for c in d["configs"]}), [256, 1024, 4096, 8192])
        self.assertEqual(d["tunables"], ["BLOCK", "num_warps", "num_stages", "divisible", "size_class"])
        for c, cc in zip(d["configs"], r.compile_configs):
            v = c["size_class"]
            self.assertEqual(c["requires"][:2], [f"dim(x, -1) <= {v}", f"dim(x, -1) > {v // 2}"])
            self.assertEqual(cc["constexprs"]["BLOCK"], v)
            self.assertEqual(cc["options"]["num_warps"], 16 if v >= 8192 else 8 if v >= 2048 else 4)
        self.assertIn("(dim(x, -1) <= 256) * (dim(x, -1) > 128) + ", d["requires"][-1])

    def test_the_meta_kernel_refuses_a_size_no_class_covers(self):
        op = self.recorded(op_name="kop_tt_sc::meta").register()
        for n, shape in ((200, (3, 200)), (1000, (2, 3, 1000)), (3000, (3000,)), (8000, (1, 2, 3, 8000))):
            self.assertEqual(tuple(op(torch.empty(shape, device="meta"), torch.empty(n, device="meta"), 1e-6).shape),
                             shape)
        for n in (100, 2000, 10000):
            with self.assertRaisesRegex(RuntimeError, r"op kop_tt_sc::meta: the inputs break the requirement "
                                        r"'\(dim\(x, -1\) <= 256\)"):
                op(torch.empty(2, n, device="meta"), torch.empty(n, device="meta"), 1e-6)

    def test_the_configs_a_size_can_run_are_those_of_its_class(self):
        # Differential: for every size of a corpus, the eligible configs are exactly those whose BLOCK is the
        # next power of two of the size (never a smaller, faster, wrong one), or none where no class covers it.
        r = self.recorded()
        blocks = [cc["constexprs"]["BLOCK"] for cc in r.compile_configs]
        corpus = sorted({*range(120, 140), *range(250, 260), *range(500, 530), *range(1020, 1030), *range(2040, 2060),
                         4095, 4096, 4097, 6000, 8191, 8192, 8193, 16384, 65536})
        for n in corpus:
            sizes = {"dim(x, -1)": n}
            picks = eligible(r, sizes)
            want = 1 << (n - 1).bit_length()
            covered = want in (256, 1024, 4096, 8192)
            self.assertEqual(sorted({blocks[i] for i in picks}), [want] if covered else [], n)
            self.assertEqual(ko._kernelop.eval_expr(r.doc["requires"][-1], sizes) != 0, covered, n)
            self.assertTrue(all(blocks[i] >= n for i in picks))

    def test_a_config_that_overrides_a_derived_constexpr_belongs_to_its_class(self):
        r = self.recorded([{"BLOCK": 1024, "num_warps": 2}, {"BLOCK": 4096}, {"num_warps": 8}],
                          op_name="kop_tt_sc::override")
        by_class = {}
        for c, cc in zip(r.doc["configs"], r.compile_configs):
            by_class.setdefault(c["size_class"], set()).add((cc["constexprs"]["BLOCK"], cc["options"]["num_warps"]))
        # BLOCK=1024 only in class 1024, BLOCK=4096 only in class 4096; the config without BLOCK everywhere.
        # In class 4096, {"BLOCK": 4096} and {"num_warps": 8} are the same config (the launch's 8 warps): one.
        self.assertEqual(by_class, {256: {(256, 8)}, 1024: {(1024, 2), (1024, 8)}, 4096: {(4096, 8)},
                                    8192: {(8192, 8)}})

    def test_configs_state_their_own_requirements(self):
        r = ko.record_plugin(ko.triton(tk.vector_add, [{"BLOCK_SIZE": 256, "requires": ["numel(x) < 4096"]},
                                                       {"BLOCK_SIZE": 1024}]), op_name="kop_tt_sc::req")
        self.assertEqual(r.doc["configs"][0]["requires"][0], "numel(x) < 4096")
        self.assertNotIn("numel(x) < 4096", r.doc["configs"][3].get("requires", []))
        expect_error(self, TypeError, "configs[0]['requires'] must be a list of conditions", ko.triton, tk.vector_add,
                     [{"BLOCK_SIZE": 256, "requires": "numel(x) < 4096"}])
        expect_error(self, ValueError, "numel(x) <", ko.record_plugin,
                     ko.triton(tk.vector_add, [{"BLOCK_SIZE": 256, "requires": ["numel(x) <"]}]))

    def test_two_sizes_make_the_product_of_their_classes(self):
        specialize = {"dim(x, 0)": [4, 8], "dim(x, -1)": [16, 32, 64]}
        r = ko.record_plugin(ko.triton(whole_tile_launch, specialize=specialize), op_name="kop_tt_sc::tile",
                             example_inputs=(torch.empty(4, 16),))
        d = r.doc
        self.assertEqual(sorted({c["size_class"] for c in d["configs"]}), list(range(6)))
        blocks = [(cc["constexprs"]["BM"], cc["constexprs"]["BN"]) for cc in r.compile_configs]
        self.assertEqual(sorted(set(blocks)), [(4, 16), (4, 32), (4, 64), (8, 16), (8, 32), (8, 64)])
        # Differential: for every (M, N) of a corpus, the configs that can run are those of its class only.
        for m in range(2, 11):
            for n in (9, 16, 17, 31, 32, 33, 64, 65, 100):
                sizes = {"dim(x, 0)": m, "dim(x, 1)": n, "dim(x, -1)": n}
                want = (1 << (m - 1).bit_length(), 1 << (n - 1).bit_length())
                covered = want[0] in (4, 8) and want[1] in (16, 32, 64)
                picks = {blocks[i] for i in eligible(r, sizes)}
                self.assertEqual(picks, {want} if covered else set(), (m, n))
                self.assertEqual(ko._kernelop.eval_expr(d["requires"][-1], sizes) != 0, covered, (m, n))
        op = r.register(["sm_90"])
        self.assertEqual(tuple(op(torch.empty(7, 40, device="meta")).shape), (7, 40))
        with self.assertRaisesRegex(RuntimeError, "break the requirement"):
            op(torch.empty(9, 40, device="meta"))
        # Several sizes: specialize names each (a list would not say whose values), and an unlisted product is
        # too many classes to record.
        expect_error(self, ValueError, "launch_fn derives compile-time values from 2 sizes (dim(x, 0), dim(x, -1)); "
                     "specialize must name each", ko.record_plugin, ko.triton(whole_tile_launch, specialize=[4, 8]),
                     example_inputs=(torch.empty(4, 16),))
        expect_error(self, ValueError, "specialize names 'dim(x, 1)', which launch_fn derives no compile-time value "
                     "from; it derives them from dim(x, 0), dim(x, -1)", ko.record_plugin,
                     ko.triton(whole_tile_launch, specialize={"dim(x, 0)": [4], "dim(x, 1)": [16]}),
                     example_inputs=(torch.empty(4, 16),))
        expect_error(self, ValueError, "kernelop records the product of their classes, 225 here", ko.record_plugin,
                     ko.triton(whole_tile_launch), example_inputs=(torch.empty(4, 16),))
        # Sizes of one value in the examples move together: a square example is one group.
        sq = ko.record_plugin(ko.triton(whole_tile_launch, specialize=[8, 16]), op_name="kop_tt_sc::square",
                              example_inputs=(torch.empty(16, 16),))
        self.assertEqual(sorted({(cc["constexprs"]["BM"], cc["constexprs"]["BN"]) for cc in sq.compile_configs}),
                         [(8, 8), (16, 16)])

    def test_values_derived_otherwise_are_refused(self):
        def two_sizes(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
            triton.next_power_of_2(x.shape[0])
            return row_norm_sized_launch(x, w, eps)
        expect_error(self, ValueError, "launch_fn derives compile-time values from 2 sizes (dim(x, 0), dim(x, -1))",
                     ko.record_plugin, ko.triton(two_sizes), op_name="kop_tt_sc::two",
                     example_inputs=(torch.empty(4, 4096), torch.empty(4096)))

        def of_a_product(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.shape[0] * x.shape[1]))
            return y
        expect_error(self, ValueError, "kernelop specialises on one size of an input", ko.record_plugin,
                     ko.triton(of_a_product), op_name="kop_tt_sc::product")

        def of_a_scalar(x: torch.Tensor, n: int) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(n))
            return y
        expect_error(self, ValueError, "next_power_of_2(n): kernelop specialises on sizes of inputs", ko.record_plugin,
                     ko.triton(of_a_scalar), op_name="kop_tt_sc::scalar")

    def test_specialize_is_checked(self):
        expect_error(self, ValueError, "specialize must list powers of two >= 4", self.recorded,
                     specialize=[256, 1000])
        expect_error(self, ValueError, "specialize names 'dim(x, 1)', not 'dim(x, -1)'", self.recorded,
                     specialize={"dim(x, 1)": [256]})
        expect_error(self, TypeError, "specialize must be a list of ints (or a dict of size -> list), got int",
                     ko.triton, row_norm_sized_launch, specialize=256)

    def test_a_size_taken_as_it_is_is_named_in_specialize(self):
        def exact(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=x.shape[1])
            return y
        expect_error(self, ValueError, "specialize names 'dim(x, 1)', not 'dim(x, -1)', the size a constexpr takes as "
                     "it is", ko.record_plugin, ko.triton(exact, [{}], specialize={"dim(x, 1)": [64]}))
        r = ko.record_plugin(ko.triton(exact, [{}], specialize={"dim(x, -1)": [64]}), op_name="kop_tt_sc::exact")
        self.assertEqual({c["BLOCK"] for c in r.doc["configs"]}, {64})

    def test_classes_of_one_value_beside_power_of_two_classes_require_what_they_compile(self):
        """A size passed to a constexpr as it is (rows, classes 1 and 2) beside next_power_of_2 of another (BLOCK),
        over a corpus of examples whose sizes collide with the classes' (the rows' example 6 is the example the
        class 8 of BLOCK is recorded at): every config's compiled values are what its requirements allow, checked
        with kernelop's own evaluator on every size of a grid."""
        @triton.jit
        def rows_kernel(X, Y, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            offs = tl.arange(0, BLOCK)
            tl.store(Y + r * n_cols + offs, tl.load(X + r * n_cols + offs, mask=offs < n_cols) * ROWS,
                     mask=offs < n_cols)

        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            rows_kernel[(x.shape[0],)](x, y, x.shape[1], ROWS=x.shape[0], BLOCK=triton.next_power_of_2(x.shape[1]))
            return y
        for example in ((6, 100), (2, 3), (8, 6), (3, 6)):
            r = ko.record_plugin(ko.triton(launch, specialize={"dim(x, 0)": [1, 2, 3], "dim(x, -1)": [4, 8, 128]}),
                                 op_name=f"kop_tt_exact::rows_{example[0]}_{example[1]}",
                                 example_inputs=(torch.empty(example),))
            self.assertEqual(sorted({(c["ROWS"], c["BLOCK"]) for c in r.doc["configs"]}),
                             [(a, b) for a in (1, 2, 3) for b in (4, 8, 128)], example)
            for rows in (1, 2, 3, 4):
                for cols in (1, 3, 4, 5, 8, 9, 100, 128, 129):
                    leaves = {"dim(x, 0)": rows, "dim(x, 1)": cols, "dim(x, -1)": cols, "numel(x)": rows * cols,
                              "numel_except(x, 0)": cols, "numel_except(x, -1)": rows, "numel_except(x, 1)": rows}
                    for i in eligible(r, leaves):
                        c = r.doc["configs"][i]
                        self.assertEqual((c["ROWS"], c["BLOCK"]), (rows, triton.next_power_of_2(cols)),
                                         f"example {example}: {rows}x{cols} runs {c}")

    def test_a_class_of_one_is_dropped_where_launch_fn_decides_otherwise_at_1(self):
        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            if x.shape[0] < 3:  # compared at the class's value (Note [sizes as ints]): true at 1
                raise ValueError("too few rows")
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=x.shape[0])
            return y
        with self.assertWarnsRegex(UserWarning, r"launch_fn refuses size classes 1 of dim\(x, 0\).*for dim\(x, 0\) "
                                   r"== 1: .*launch_fn raised ValueError .*: too few rows"):
            r = ko.record_plugin(ko.triton(launch, specialize=[1, 4, 8]), op_name="kop_tt_exact::one",
                                 example_inputs=(torch.empty(4, 100),))
        self.assertEqual(sorted({c["BLOCK"] for c in r.doc["configs"]}), [4, 8])


class SizeClassesDiffering(unittest.TestCase):
    def test_an_output_sized_by_two_sizes_classes_is_a_select_on_both(self):
        def launch(x: torch.Tensor) -> torch.Tensor:
            rows, cols = triton.next_power_of_2(x.shape[0]), triton.next_power_of_2(x.shape[-1])
            y = torch.empty(rows * cols, device=x.device)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=cols)
            return y
        r = ko.record_plugin(ko.triton(launch, specialize={"dim(x, 0)": [4, 8], "dim(x, -1)": [16, 32]}),
                             op_name="kop_tt_classes::two", example_inputs=(torch.empty(5, 20),))
        self.assertEqual(r.doc["outputs"][0]["shape"], [
            "select((dim(x, 0) <= 4) * (dim(x, -1) <= 16), 64, select((dim(x, 0) <= 4) * (dim(x, -1) <= 32), 128, "
            "select((dim(x, 0) <= 8) * (dim(x, -1) <= 16), 128, 256)))"])
        op = r.register(["sm_90"])
        for rows, cols in ((3, 20), (7, 12), (8, 32), (4, 9)):
            self.assertEqual(op(torch.empty(rows, cols, device="meta")).shape,
                             (triton.next_power_of_2(rows) * triton.next_power_of_2(cols),))

    def test_a_later_launch_only_some_classes_make_is_refused(self):
        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            block = triton.next_power_of_2(x.shape[-1])
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=block)
            if block > 16:  # a second launch (in place) for the larger class only
                copy_kernel[(1,)](y, y, x.numel(), BLOCK=block)
            return y
        expect_error(self, ValueError, "differs from the one for dim(x, -1) <= 16 in 'then'", ko.record_plugin,
                     ko.triton(launch, specialize=[16, 32]), op_name="kop_tt_classes::then_in_one",
                     example_inputs=(torch.empty(4, 12),))


@triton.jit
def divide_by(X, Y, n, count, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(Y + i, tl.load(X + i, mask=m) / count, mask=m)


def mean_of_kept_launch(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """x / (number of nonzero keep), the count read on the host as library host code reads it."""
    y = torch.empty_like(x)
    count = (keep != 0).sum().item()
    divide_by[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), count, BLOCK=256)
    return y


@triton.jit
def scale_in_place_by(X, G, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(X + i, tl.load(X + i, mask=m) * tl.load(G), mask=m)


def maybe_scale_launch(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """x * g, skipping the kernel when g is 1 (Liger's cross entropy backward's torch.equal)."""
    y = x.clone()
    if torch.equal(g, torch.tensor(1.0, device=g.device)):
        pass
    else:
        scale_in_place_by[(triton.cdiv(y.numel(), 256),)](y, g, y.numel(), BLOCK=256)
    return y


def copy_then_maybe_scale_launch(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A kernel that always runs, then one a test decides (`not torch.equal`: the test's other outcome)."""
    y = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    if not torch.equal(torch.tensor(0.5, device=g.device), g):
        scale_in_place_by[(triton.cdiv(y.numel(), 256),)](y, g, y.numel(), BLOCK=256)
    return y


def scale_unless_either_launch(g: torch.Tensor, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """x * g unless g is 1 or h is 2: an elif chain, whose second test the first branch never reaches."""
    y = x.clone()
    if torch.equal(g, torch.tensor(1.0, device=g.device)):
        pass
    elif torch.equal(h, torch.tensor(2, device=g.device)):
        pass
    else:
        scale_in_place_by[(triton.cdiv(y.numel(), 256),)](y, g, y.numel(), BLOCK=256)
    return y


def host_read_cases():
    """launch_fns whose host reads kernelop refuses, and the message (HostReads)."""
    def float_item(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        divide_by[(1,)](x, y, x.numel(), x.sum().item(), BLOCK=256)
        return y

    def other_kernels(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        if torch.equal(g, torch.tensor(1.0, device=g.device)):
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=256)
        else:
            divide_by[(1,)](x, y, x.numel(), 2, BLOCK=256)
        return y

    def other_host_code(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone() if torch.equal(g, torch.tensor(1.0, device=g.device)) else torch.zeros_like(x)
        scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def two_tensors(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if not torch.equal(g, x):
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def many_elements(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if not torch.equal(x, torch.ones(4, device=x.device)):
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def other_arguments(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        divide_by[(1,)](x, y, x.numel(), 1 if torch.equal(g, torch.tensor(1.0, device=g.device)) else 2, BLOCK=256)
        return y

    def other_fill(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = torch.full_like(x, 0.0 if torch.equal(g, torch.tensor(1.0, device=g.device)) else 1.0)
        scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def written_before_the_launch_it_decides(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        h = g.clone()
        one = torch.equal(h, torch.tensor(1.0, device=g.device))
        scale_in_place_by[(1,)](h, h, 1, BLOCK=256)  # h = h * h, after the test
        if not one:
            scale_in_place_by[(1,)](y, h, y.numel(), BLOCK=256)
        return y

    def int_against_float(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if not torch.equal(g.to(torch.int32), torch.tensor(1.0, device=g.device)):
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def beyond_a_double(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if not torch.equal(g, torch.tensor(2**53 + 1, device=g.device)):
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def both_or_neither(g: torch.Tensor, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if torch.equal(g, torch.tensor(1.0, device=g.device)) == torch.equal(h, torch.tensor(2.0, device=g.device)):
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    def host_code_moved(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if torch.equal(g, torch.tensor(1.0, device=g.device)):
            z = torch.zeros_like(x)
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        else:
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
            z = torch.zeros_like(x)
        return y, z

    def full_of(x: torch.Tensor, v: float) -> torch.Tensor:  # one line makes the test's constant and the kernel's
        return torch.full((), v, device=x.device)

    def fills_differ(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if torch.equal(g, full_of(x, 1.0)):
            scale_in_place_by[(1,)](y, full_of(x, 2.0), y.numel(), BLOCK=256)
        else:
            scale_in_place_by[(1,)](y, full_of(x, 3.0), y.numel(), BLOCK=256)
        return y

    def against_nan(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        if not torch.equal(g, torch.tensor(float("nan"), device=g.device)):
            scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
        return y

    scalar_g = (torch.empty(()), torch.empty(64))
    return [
        (against_nan, scalar_g, "launch_fn tests a tensor against NaN on the host (torch.equal at "),
        (fills_differ, scalar_g, "run different host code (or the same with other arguments)"),
        (host_code_moved, scalar_g, "run their host code between other kernels"),
        (both_or_neither, (torch.empty(()), torch.empty(()), torch.empty(64)),
         "launch kernel 1 on outcomes of the tests that no conjunction of them tells"),
        (beyond_a_double, (torch.empty((), dtype=torch.int64), torch.empty(64)),
         "launch_fn tests a tensor against 9007199254740993 on the host (torch.equal at "),
        (other_arguments, scalar_g, "launch different kernels, or the same kernel with other arguments"),
        (other_fill, scalar_g, "run different host code (or the same with other arguments)"),
        (written_before_the_launch_it_decides, scalar_g, "and launch_fn's kernel 1 (in launch order) writes it before "
                                                         "the kernel that read decides"),
        (int_against_float, scalar_g, "tests a int32 tensor against a float32 constant"),
        (float_item, (torch.empty(64),), "reads a float32 value on the host (.item() at "),
        (other_kernels, scalar_g, "launch different kernels, or the same kernel with other arguments; kernelop "
                                  "records branches that differ only in which kernels they launch"),
        (other_host_code, scalar_g, "run different host code (or the same with other arguments) or return different "
                                    "tensors"),
        (two_tensors, scalar_g, "launch_fn compares two tensors on the host (torch.equal at "),
        (many_elements, (torch.empty(()), torch.empty(4)), "kernelop tests tensors of one element"),
    ]


@torch.library.custom_op("kop_tt_lib::copy_into", mutates_args={"y"})
def _library_copy_into(x: torch.Tensor, y: torch.Tensor) -> None:
    """A library's wrapper of its kernel as a torch.library op whose fake launches nothing (as QuACK's cute_op)."""
    copy_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)


@_library_copy_into.register_fake
def _(x, y):
    return None


@torch.library.custom_op("kop_tt_lib::copy_into_cuda", mutates_args={"y"}, device_types="cpu")
def _library_copy_into_cuda(x: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(x)  # its CPU implementation


@_library_copy_into_cuda.register_kernel("cuda")
def _(x, y):
    copy_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)


@_library_copy_into_cuda.register_fake
def _(x, y):
    return None


class CustomOpBodies(unittest.TestCase):
    """Note [custom ops' bodies]: a torch.library.custom_op launch_fn calls runs its Python body while recording."""

    @staticmethod
    def recorded_through(library_op, op_name):
        """An op whose launch_fn calls `library_op` (a torch.library op writing its second argument)."""
        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            library_op(x, y)
            return y
        return ko.record_plugin(ko.triton(launch), op_name=op_name, example_inputs=(torch.empty(8, 16),))

    def test_a_custom_op_with_a_no_op_fake_records_its_kernel(self):
        r = self.recorded_through(torch.ops.kop_tt_lib.copy_into, "kop_tt_lib::copy")
        self.assertEqual(r.doc["kernel_name"], "copy_kernel")
        # (the output named after the kernel's parameter it is passed to, as for a launch of launch_fn's own)
        self.assertEqual(r.doc["params"][:3], ["x", "Y", {"expr": "numel(x)"}])
        self.assertEqual(r.doc["outputs"], [{"name": "Y", "shape": {"same_as": "x"}, "dtype": "float32"}])

    def test_the_ops_cuda_kernel_is_what_runs(self):
        r = self.recorded_through(torch.ops.kop_tt_lib.copy_into_cuda, "kop_tt_lib::copy_cuda")
        self.assertEqual(r.doc["kernel_name"], "copy_kernel")  # not the CPU body, which launches nothing

    def test_an_op_registered_otherwise_runs_as_it_is(self):
        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.ops.aten.relu(x)  # aten's: host work on the output, refused by name as ever
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
            return y
        expect_error(self, ValueError, "relu", ko.record_plugin, ko.triton(launch), op_name="kop_tt_lib::relu",
                     example_inputs=(torch.empty(8, 16),))


class SeveralLaunches(unittest.TestCase):
    """launch_fn launching several kernels with scratch and host glue between them (Note [recorded programs])."""

    def test_two_kernels_and_a_scratch_tensor_are_one_op(self):
        r = ko.record_plugin(ko.triton(two_kernels_launch), op_name="kop_tt_two::z",
                             example_inputs=(torch.empty(8, 16),))
        d = r.doc
        self.assertEqual(d["kernel_name"], "scaled_copy")
        self.assertEqual(d["outputs"], [{"name": "Out", "shape": {"same_as": "x"}, "dtype": "float32"},
                                        {"name": "Y", "shape": {"same_as": "x"}, "dtype": "float32",
                                         "scratch": True}])
        self.assertEqual(d["params"][:3], ["x", "Y", {"expr": "numel(x)"}])
        (then,) = d["then"]
        self.assertEqual(then["kernel_name"], "add_into")
        # The second kernel reads the scratch the first wrote (its input) and writes the op's output.
        self.assertEqual(then["inputs"], [{"name": "x", "dtype": "float32"}, {"name": "Y", "dtype": "float32"}])
        self.assertEqual([o["name"] for o in then["outputs"]], ["Out"])
        self.assertEqual(then["params"][:4], ["Y", "x", "Out", {"expr": "numel(x)"}])
        self.assertEqual(then["geometry"]["custom"]["grid"], ["cdiv(numel(x), 256)"])
        self.assertEqual(r.then[0].op_name, "kop_tt_two::z_launch1")
        binaries = r.compile(["sm_90"])
        self.assertEqual({b.launch for b in binaries}, {0, 1})
        self.assertEqual({b.entry for b in binaries if b.launch == 1}, {"add_into"})
        op = r.register(["sm_90"])
        self.assertEqual(str(op.default._schema), "kop_tt_two::z(Tensor x) -> Tensor")
        self.assertEqual(op(torch.empty(3, 5, device="meta")).shape, (3, 5))  # rank-free, scratch not returned
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "two.kop")
            ko.record_plugin(ko.triton(two_kernels_launch), op_name="kop_tt_two_pkg::z",
                             example_inputs=(torch.empty(8, 16),)).build_package(path, ["sm_90"])
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                print(op.default._schema, tuple(op(torch.empty(4, 9, device="meta")).shape))
            """)
        self.assertEqual(out.strip(), "kop_tt_two_pkg::z(Tensor x) -> Tensor (4, 9)")

    def test_each_binary_says_which_launch_it_is_for(self):
        r = ko.record_plugin(ko.triton(two_kernels_launch), op_name="kop_tt_two_bin::z",
                             example_inputs=(torch.empty(8, 16),))
        doc, binaries = json.dumps(r.doc), r.compile(["sm_90"])
        ko._kernelop.check_binaries(doc, binaries)
        self.assertEqual(ko._kernelop.Op.from_binaries(doc, binaries).op_name, "kop_tt_two_bin::z")
        first = binaries.index(next(b for b in binaries if b.launch == 1))
        expect_error(self, ValueError, f"op kop_tt_two_bin::z: binary {first} (entry 'add_into') is for launch 7, "
                     "and the op has 2 launch(es): 0 (its own kernel) to 1 (its then)", ko._kernelop.check_binaries,
                     doc, [replace(b, launch=7) if b.launch == 1 else b for b in binaries])
        expect_error(self, ValueError, "op kop_tt_two_bin::z_launch1: its kernel 'add_into' is a Triton kernel, and "
                     "no binaries were given for it", ko._kernelop.check_binaries, doc,
                     [b for b in binaries if b.launch == 0])
        # The kernels' binaries swapped: each checked against its launch's parameters, refused.
        expect_error(self, RuntimeError, "op kop_tt_two_bin::z: binary 0 (program 0, sm_90a, entry 'add_into'): "
                     "parameter 2 is 64-bit but the calling convention passes 'numel(x)' as int (32-bit)",
                     ko._kernelop.check_binaries, doc, [replace(b, launch=1 - b.launch) for b in binaries])
        glued = ko.record_plugin(ko.triton(column_sums_per_sm), op_name="kop_tt_psm_bin::c",
                                 example_inputs=(torch.empty(64, 100),))
        own = glued.compile(["sm_90"])
        expect_error(self, ValueError, "its kernel 'kop_sum_dim<T, U>' is CUDA C++, which NVRTC compiles; 1 "
                     "binaries were given for it", ko._kernelop.check_binaries, json.dumps(glued.doc),
                     own + [replace(own[0], launch=1)])

    def test_per_sm_partials_summed_by_kernelops_glue(self):
        r = ko.record_plugin(ko.triton(column_sums_per_sm), op_name="kop_tt_psm::colsum",
                             example_inputs=(torch.empty(64, 100, dtype=torch.bfloat16),))
        d = r.doc
        self.assertEqual(d["outputs"], [
            {"name": "out", "shape": ["dim(x, 1)"], "dtype": "bfloat16"},
            {"name": "P", "shape": ["sm_count()", "dim(x, 1)"], "dtype": "float32", "scratch": True}])
        self.assertEqual(d["geometry"]["custom"]["grid"], ["sm_count()"])
        self.assertIn({"expr": "cdiv(dim(x, 0), sm_count())"}, d["params"])
        (glue,) = d["then"]  # the sum and its .to(bfloat16): one launch of kernelop's sum_dim
        self.assertEqual(glue["from"], {"x": "P", "y": "out"})
        self.assertEqual(glue["kernel_name"], "kop_sum_dim<T, U>")
        self.assertEqual(glue["type_params"], [{"name": "T", "dtypes": ["float32"]},
                                               {"name": "U", "dtypes": ["bfloat16"]}])
        self.assertEqual(r.then, [None])  # CUDA C++: NVRTC compiles it in C++
        # rows per program, from sm_count(), is never required divisible: the other ints' variants stay reachable
        self.assertEqual(d["configs"][1]["requires"][-1], "(dim(x, 0) % 16 == 0) * (dim(x, 1) % 16 == 0) == 0")
        self.assertFalse(any("sm_count" in q for c in d["configs"] for q in c.get("requires", [])))
        op = r.register(["sm_90"])
        y = op(torch.empty(1000, 100, dtype=torch.bfloat16, device="meta"))
        self.assertEqual((tuple(y.shape), y.dtype), ((100,), torch.bfloat16))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "colsum.kop")
            r.build_package(path, ["sm_90"])
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                y = op(torch.empty(7, 100, dtype=torch.bfloat16, device="meta"))
                print(op.default._schema, tuple(y.shape), y.dtype)
            """)
        self.assertEqual(out.strip(), "kop_tt_psm::colsum(Tensor x) -> Tensor (100,) torch.bfloat16")

    def test_host_work_other_than_the_glue_is_refused_by_name(self):
        def partials_then(after):
            def launch(x: torch.Tensor) -> torch.Tensor:
                n_rows, n_cols = x.shape
                p = torch.empty((4, n_cols), dtype=torch.float32, device=x.device)
                sm_partials[(4,)](x, p, n_rows, n_cols, triton.cdiv(n_rows, 4), BLOCK=128)
                return after(p, x)
            return launch
        for after, message in [
                (lambda p, x: p.sum(dim=(0, 1)), "sums over dims [0, 1] on the host (aten.sum at"),
                (lambda p, x: torch.sum(p, dim=[], keepdim=True), "sums over every dim with keepdim=True on the "
                 "host"),
                (lambda p, x: (p != 1.5).sum(), "counts the elements that differ from float 1.5 (aten.ne at "),
                (lambda p, x: p != 0, "output 0 is made or written on the host by aten.ne"),
                (lambda p, x: p.sum(0) / p, "divides by a tensor of shape [4, dim(x, 1)] on the host (aten.div "),
                (lambda p, x: p.sum(0) / 2.0, "divides by a float on the host (aten.div at "),
                (lambda p, x: p.sum(0).clamp(min=x.shape[0]), "clamps to SymInt"),
                (lambda p, x: (p != 0).sum().clamp(min=0.5), "clamps torch.int64 into torch.float32 on the host"),
                (lambda p, x: p.sum() / (p != 0).sum().reshape(1), "divides a tensor of rank 0 by one of rank 1 into "
                 "rank 1 on the host"),
                (lambda p, x: p.sum(0) // (p != 0).sum(), "aten.floor_divide"),
                (lambda p, x: p.sum(0) / 3, "divides by an int on the host (aten.div at "),
                (lambda p, x: p.mean(0), "output 0 is made or written on the host by aten.mean"),
                (lambda p, x: p * 2, "output 0 is made or written on the host by aten.mul"),
                (lambda p, x: p.to("cpu"), "copies a tensor to another device or layout on the host"),
                (lambda p, x: torch.mm(p, p.t()), "aten.mm: matmuls are no glue")]:
            with self.subTest(message=message):
                expect_error(self, ValueError, message, record, partials_then(after),
                             example_inputs=(torch.empty(64, 100),))

        def partials(x):
            n_rows, n_cols = x.shape
            p = torch.empty((4, n_cols), dtype=torch.float32, device=x.device)
            sm_partials[(4,)](x, p, n_rows, n_cols, triton.cdiv(n_rows, 4), BLOCK=128)
            return p

        def glue_of_a_part(x: torch.Tensor) -> torch.Tensor:  # would sum all four rows
            return partials(x)[1:].sum(dim=0)

        def glue_of_a_transpose(x: torch.Tensor) -> torch.Tensor:  # recorded: a permuted copy, then the sum
            return partials(x).t().contiguous().sum(0)

        def copy_of_a_part(x: torch.Tensor) -> torch.Tensor:
            return partials(x)[:, :3].contiguous().sum(0)

        def cast_of_a_transpose(x: torch.Tensor) -> torch.Tensor:
            return partials(x).t().to(torch.bfloat16, memory_format=torch.contiguous_format)

        def part_of_a_workspace(x: torch.Tensor) -> torch.Tensor:
            buf = torch.empty((2, x.numel()), device=x.device)
            copy_kernel[(1,)](x, buf, 2 * x.numel(), BLOCK=128)
            return buf[0]

        def glue_result_changed(x: torch.Tensor) -> torch.Tensor:
            p = partials(x)
            s = p.sum(0)
            torch.mul(p[0], 2.0, out=s)
            return s.to(torch.bfloat16)

        def glue_result_viewed(x: torch.Tensor) -> torch.Tensor:
            return partials(x).sum(0).to(torch.bfloat16).view(1, -1)

        def sum_with_dtype(x: torch.Tensor) -> torch.Tensor:
            return partials(x).sum(0, dtype=torch.float64)

        def cast_to_bool(x: torch.Tensor) -> torch.Tensor:
            return partials(x).to(torch.bool)
        for launch, message in [
                (glue_of_a_part, "the glue at "), (glue_of_a_part, "reads a view of a tensor (a part, a transpose or "
                                                   "a reshape of it)"),
                (copy_of_a_part, "scratch tensor 1 (a tensor a kernel takes that launch_fn does not return) "
                 "is a copy (aten.clone) of something other than a whole input"),
                (cast_of_a_transpose, "reads a view of a tensor"),
                (part_of_a_workspace, "launch_fn returns a part of a tensor it made (at "),
                (glue_result_changed, "launch_fn changes what its glue computed (at "),
                (glue_result_viewed, "launch_fn returns a view of what its glue computes"),
                (sum_with_dtype, "sums with dtype= on the host"),
                (cast_to_bool, "converts to or from bool on the host (aten._to_copy at ")]:
            with self.subTest(launch=launch.__name__, message=message):
                expect_error(self, ValueError, message, ko.record_plugin, ko.triton(launch),
                             op_name="kop_tt_glue_refused::f", example_inputs=(torch.empty(64, 100),))

        doc = ko.record_plugin(ko.triton(glue_of_a_transpose), op_name="kop_tt_glue::t",
                               example_inputs=(torch.empty(64, 100),)).doc
        self.assertEqual([(t["kernel_name"], t.get("before", False)) for t in doc["then"]],
                         [("kop_permute_copy<T, 2>", False), ("kop_sum_dim<T, U>", False)])

        def cloned_and_transposed(x: torch.Tensor) -> torch.Tensor:  # x is also cloned: taken contiguous
            y = x.clone()
            z = x.t().contiguous()
            out = torch.empty_like(y)
            add_into[(triton.cdiv(x.numel(), 256),)](y, z, out, x.numel(), BLOCK=256)
            return out
        doc = ko.record_plugin(ko.triton(cloned_and_transposed), op_name="kop_tt_glue::ct",
                               example_inputs=(torch.empty(64, 100),)).doc
        self.assertEqual(doc["inputs"], [{"name": "x", "dtype": "float32"}])
        self.assertEqual([t["kernel_name"] for t in doc["then"]], ["kop_permute_copy<T, 2>"])

        def transposed_mask(x: torch.Tensor) -> torch.Tensor:
            z = x.t().contiguous()
            out = torch.empty_like(z)
            copy_kernel[(1,)](z, out, x.numel(), BLOCK=128)
            return out
        expect_error(self, ValueError, "launch_fn copies a permutation of a bool tensor of rank 2 on the host "
                     "(aten.clone at ", ko.record_plugin, ko.triton(transposed_mask),
                     op_name="kop_tt_glue::mask", example_inputs=(torch.empty(8, 4, dtype=torch.bool),))

        def later_kernel_writes_input(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            scaled_copy[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), 2.0, BLOCK=128)
            add_one[(triton.cdiv(x.numel(), 256),)](x, x.numel(), BLOCK=256)  # MARK
            return y
        msg = expect_error(self, ValueError, "writes input 'x', and it is not the op's first kernel", ko.record_plugin,
                           ko.triton(later_kernel_writes_input), example_inputs=(torch.empty(64),))
        self.assertIn("test_triton.py:", msg)

        def copy_after_write(x: torch.Tensor) -> torch.Tensor:  # the copy must see the first kernel's +1
            add_one[(triton.cdiv(x.numel(), 256),)](x, x.numel(), BLOCK=256)
            w = x.clone()
            y = torch.empty_like(x)
            scaled_copy[(triton.cdiv(x.numel(), 128),)](w, y, x.numel(), 2.0, BLOCK=128)
            return y
        for needle in ("launch_fn copies input 'x' (at ", "after launch 0 wrote it; kernelop initialises with copies "
                       "of inputs before the op's first launch"):
            expect_error(self, ValueError, needle, ko.record_plugin, ko.triton(copy_after_write),
                         example_inputs=(torch.empty(64),))

        # configs that change a constexpr launch_fn also sizes its scratch or later launches with
        expect_error(self, ValueError, "configs[1] sets BLOCK = 256, which launch_fn passes as 128; an op of several "
                     "launches, scratch or glue is recorded with launch_fn's own values", record, two_kernels_launch,
                     [{"BLOCK": 128}, {"BLOCK": 256}], example_inputs=(torch.empty(64),))
        r = record(two_kernels_launch, [{"BLOCK": 128, "num_warps": 2}, {"BLOCK": 128, "num_warps": 8}],
                   example_inputs=(torch.empty(64),))
        self.assertEqual([c["num_warps"] for c in r.doc["configs"][::3]], [2, 8])

    def test_output_names_and_before_flags_given_carelessly_are_refused(self):
        ex = (torch.empty(64), torch.empty(8, dtype=torch.int64))
        for names, error, message in [
                ("Y", TypeError, "outputs must be a list of names such as ['loss', 'grad'], got str"),
                ([3], ValueError, "outputs[0] is 3; an output's name is an identifier"),
                (["y z"], ValueError, "outputs[0] is 'y z'; an output's name is an identifier"),
                (["y", "y"], ValueError, "outputs names 'y' twice")]:
            expect_error(self, error, message, ko.triton, scaled_by_mean_over_kept, outputs=names)
        expect_error(self, ValueError, "outputs= names 2 tensor(s) (y, z) and launch_fn returns 1", ko.record_plugin,
                     ko.triton(scaled_by_mean_over_kept, outputs=["y", "z"]), example_inputs=ex)
        expect_error(self, ValueError, "output name 't' is also an input's", ko.record_plugin,
                     ko.triton(scaled_by_mean_over_kept, outputs=["t"]), example_inputs=ex)
        d = ko.record_plugin(ko.triton(scaled_by_mean_over_kept, outputs=["scaled"]), op_name="kop_tt_named::f",
                             example_inputs=ex).doc
        self.assertEqual(d["outputs"][0]["name"], "scaled")
        from kernelop import _glue
        expect_error(self, TypeError, "Launch.before: expected a bool, got int",
                     lambda: ko.Launch(_glue.cast(torch.float32, torch.float16), before=1)._json())

    def test_glue_before_the_first_kernel_is_a_launch_before_it(self):
        r = ko.record_plugin(ko.triton(scaled_by_mean_over_kept), op_name="kop_tt_before::f",
                             example_inputs=(torch.empty(64), torch.empty(8, dtype=torch.int64)))
        d = r.doc
        self.assertEqual(d["kernel_name"], "scale_by")
        self.assertEqual([(t["kernel_name"], t["from"], t.get("before")) for t in d["then"]], [
            ("kop_sum_all<T, U>", {"x": "x", "y": "scratch1"}, True),
            ("kop_count_ne<T, U>", {"x": "t", "v": "ignore", "y": "scratch2"}, True),
            ("kop_div<T, B>", {"a": "scratch1", "b": "scratch2", "y": "S"}, True)])
        self.assertEqual([(o["name"], o["shape"], o.get("dtype")) for o in d["outputs"]], [
            ("Y", {"same_as": "x"}, "float32"), ("S", [], "float32"), ("scratch1", [], "float32"),
            ("scratch2", [], "int64")])
        self.assertEqual(r.then, [None, None, None])
        op = r.register(["sm_90"])
        self.assertEqual(str(op.default._schema), "kop_tt_before::f(Tensor x, Tensor t, int ignore=-1) -> Tensor")
        self.assertEqual(op(torch.empty(15, device="meta"), torch.empty(2, dtype=torch.int64, device="meta"), 4)
                         .shape, (15,))

        def counted_with_a_constant(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            s = x.sum() / (t != -100).sum()
            y = torch.empty_like(x)
            scale_by[(triton.cdiv(x.numel(), 128),)](x, s, y, x.numel(), BLOCK=128)
            return y
        d = ko.record_plugin(ko.triton(counted_with_a_constant), op_name="kop_tt_before_const::f",
                             example_inputs=(torch.empty(64), torch.empty(8, dtype=torch.int64))).doc
        self.assertIn({"expr": "-100"}, d["then"][1]["params"])

        def counted_with_a_size(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            s = x.sum() / (t != x.shape[0]).sum()
            y = torch.empty_like(x)
            scale_by[(triton.cdiv(x.numel(), 128),)](x, s, y, x.numel(), BLOCK=128)
            return y
        expect_error(self, ValueError, "counts the elements that differ from SymInt", ko.record_plugin,
                     ko.triton(counted_with_a_size),
                     example_inputs=(torch.empty(64), torch.empty(8, dtype=torch.int64)))

    def test_a_copy_only_later_kernels_read_is_scratch_set_by_its_init(self):
        def copy_first(x: torch.Tensor) -> torch.Tensor:
            w = x.clone()  # before any kernel: kernelop's init; read by the second kernel only
            y = torch.empty_like(x)
            scaled_copy[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), 2.0, BLOCK=128)
            z = torch.empty_like(x)
            add_into[(triton.cdiv(x.numel(), 128),)](y, w, z, x.numel(), BLOCK=128)
            return z
        d = ko.record_plugin(ko.triton(copy_first), op_name="kop_tt_copy_first::f",
                             example_inputs=(torch.empty(64),)).doc
        self.assertEqual(d["outputs"][1:], [
            {"name": "Y", "shape": {"same_as": "x"}, "dtype": "float32", "scratch": True},
            {"name": "B", "shape": {"same_as": "x"}, "init": {"clone": "x"}, "scratch": True}])
        self.assertEqual([i["name"] for i in d["then"][0]["inputs"]], ["x", "Y", "B"])

    def test_dead_host_work_is_not_recorded(self):
        def dead(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
            _unused = y.sum(0), x.bool()  # noqa: F841 - nothing reads them
            return y
        r = record(dead, example_inputs=(torch.empty(8, 16),))
        self.assertNotIn("then", r.doc)
        self.assertEqual([o["name"] for o in r.doc["outputs"]], ["Y"])

        def computed_between(x: torch.Tensor) -> torch.Tensor:
            n = x.numel()
            y = torch.empty_like(x)
            scaled_copy[(triton.cdiv(n, 128),)](x, y, n, 2.0, BLOCK=128)
            z = torch.empty_like(x)
            add_into[(triton.cdiv(n, 128),)](y * 2, x, z, n, BLOCK=128)
            return z
        msg = expect_error(self, ValueError, "a kernel is given a tensor computed on the host (aten.mul, at ",
                           record, computed_between, example_inputs=(torch.empty(64),))
        self.assertIn("test_triton.py:", msg)

        def zeroed_after_use(x: torch.Tensor) -> torch.Tensor:
            n = x.numel()
            y = torch.empty_like(x)
            scaled_copy[(triton.cdiv(n, 128),)](x, y, n, 2.0, BLOCK=128)
            y.zero_()
            z = torch.empty_like(x)
            add_into[(triton.cdiv(n, 128),)](y, x, z, n, BLOCK=128)
            return z
        expect_error(self, ValueError, "(aten.zero_ at ", record, zeroed_after_use, example_inputs=(torch.empty(64),))
        expect_error(self, ValueError, "after launch 0 used it; kernelop initialises outputs and scratch once",
                     record, zeroed_after_use, example_inputs=(torch.empty(64),))


class HostReads(unittest.TestCase):
    """Note [host reads]: host syncs a library's host code makes (.item() into a kernel argument, torch.equal
    deciding a launch), recorded when ko.triton(..., host_sync=True) allows them, refused otherwise."""

    def test_item_is_read_at_launch_into_the_kernels_argument(self):
        r = ko.record_plugin(ko.triton(mean_of_kept_launch, host_sync=True), op_name="kop_tt_hr::mean_of_kept",
                             example_inputs=(torch.empty(64), torch.empty(64, dtype=torch.int64)))
        d = r.doc
        (count,) = [o["name"] for o in d["outputs"] if o.get("scratch")]
        self.assertEqual(d["params"][:4], ["x", "Y", {"expr": "dim(x, 0)"}, {"expr": f"item({count})"}])
        (glue,) = d["then"]  # (keep != 0).sum() before the kernel, into the scratch item() reads
        self.assertEqual((glue["kernel_name"], glue["from"], glue.get("before")),
                         ("kop_count_ne<T, U>", {"x": "keep", "y": count}, True))
        self.assertNotIn("item", json.dumps(d.get("configs", [])))  # no variant requires it divisible
        op = r.register(["sm_90"])
        self.assertIn(torch.Tag.cudagraph_unsafe, op.default.tags)
        self.assertEqual(op(torch.empty(5, device="meta"), torch.empty(5, dtype=torch.int64, device="meta")).shape,
                         (5,))
        with tempfile.TemporaryDirectory() as tmp:  # the package keeps it (Triton cannot be imported there)
            path = os.path.join(tmp, "mean.kop")
            r.build_package(path, ["sm_90"])
            out = run_python_without("triton", f"""
                import kernelop as ko, torch
                op = ko.load_package({path!r})
                params = ko._kernelop.Op.from_package({path!r}).parameters
                print(torch.Tag.cudagraph_unsafe in op.default.tags, any("item(" in p for p in params))
            """)
        self.assertEqual(out.strip(), "True True")

    def test_without_host_sync_item_is_refused_saying_how(self):
        expect_error(self, ValueError, "kernelop reads one on the host at launch when the spec allows host syncs, "
                     "ko.triton(..., host_sync=True)", ko.record_plugin, ko.triton(mean_of_kept_launch),
                     op_name="kop_tt_hr::refused", example_inputs=(torch.empty(64), torch.empty(64, dtype=torch.int64)))

    def test_torch_equal_decides_whether_a_kernel_runs(self):
        r = ko.record_plugin(ko.triton(maybe_scale_launch, host_sync=True), op_name="kop_tt_hr::maybe_scale",
                             example_inputs=(torch.empty(()), torch.empty(64)))
        d = r.doc
        self.assertEqual(d["kernel_name"], "scale_in_place_by")
        self.assertEqual(d["when"], [{"tensor": "g", "!=": 1.0}])
        self.assertEqual(d["outputs"][0]["init"], {"clone": "x"})
        # The constant as its dtype holds it (torch.equal compares that): float32's 0.1, not the double 0.1.
        def tenth(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            if not torch.equal(g, torch.full((), 0.1, device=g.device)):
                scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
            return y
        r = ko.record_plugin(ko.triton(tenth, host_sync=True), op_name="kop_tt_hr::tenth",
                             example_inputs=(torch.empty(()), torch.empty(64)))
        self.assertEqual(r.doc["when"], [{"tensor": "g", "!=": float(torch.tensor(0.1))}])
        two = ko.record_plugin(ko.triton(copy_then_maybe_scale_launch, host_sync=True),
                               op_name="kop_tt_hr::copy_scale", example_inputs=(torch.empty(()), torch.empty(64)))
        self.assertNotIn("when", two.doc)  # the copy always runs
        (then,) = two.doc["then"]
        self.assertEqual((then["kernel_name"], then["when"]), ("scale_in_place_by", [{"tensor": "g", "!=": 0.5}]))
        op = two.register(["sm_90"])
        self.assertIn(torch.Tag.cudagraph_unsafe, op.default.tags)
        # An int64 constant stays an integer, exactly (2**53 is one a double holds; 2**53 + 1 is refused below).
        def wide(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            if not torch.equal(g, torch.tensor(-(2**53), device=g.device)):
                scale_in_place_by[(1,)](y, g, y.numel(), BLOCK=256)
            return y
        r = ko.record_plugin(ko.triton(wide, host_sync=True), op_name="kop_tt_hr::wide",
                             example_inputs=(torch.empty((), dtype=torch.int64), torch.empty(64)))
        self.assertEqual(r.doc["when"], [{"tensor": "g", "!=": -(2**53)}])
        self.assertIs(type(r.doc["when"][0]["!="]), int)

    def test_host_tests_given_by_hand_are_checked(self):
        def spec(when):
            return ko.KernelSpec(kernel_name="k", kernel_source="extern \"C\" __global__ void k(const float* x, "
                                 "const long long* g, float* y) {}",
                                 inputs=[ko.InputDecl("x", "float32"), ko.InputDecl("g", "int64")],
                                 outputs=[ko.OutputDecl("y", ko.SameAs("x"))], params=["x", "g", "y"],
                                 geometry=ko.Custom(grid=[1], block=[32]), when=when)
        for when, error, message in [
                ([ko.HostTest(1, 1.0)], TypeError, "HostTest.tensor: expected a str, got int"),
                ([ko.HostTest("g", "1")], TypeError, "HostTest.value: expected a number, got str"),
                ([ko.HostTest("g", True)], TypeError, "HostTest.value: expected a number, got bool"),
                ([ko.HostTest("g", 1, equal=1)], TypeError, "HostTest.equal"),
                ([ko.HostTest("h", 1)], ValueError, "when[0]: 'h' is not a tensor of the launch"),
                ([ko.HostTest("g", 2**53 + 1)], ValueError, "HostTest.value: expected a number a double holds exactly "
                 "(an integer within +-2^53), got 9007199254740993"),
                ([ko.HostTest("g", -2**63 - 1)], ValueError, "got -9223372036854775809"),
                (["g"], TypeError, "when")]:
            with self.subTest(message):
                expect_error(self, error, message, ko.cuda_kernel_op, "kop_tt_hr::by_hand", spec(when),
                             archs=["sm_90"])
        expect_error(self, ValueError, "when: the op's eager_fn launches the kernel (launch_raw), as it decides; a "
                     "'when' decides kernelop's own launch: test the value in eager_fn, or drop eager_fn",
                     ko.cuda_kernel_op, "kop_tt_hr::by_hand", spec([ko.HostTest("g", 1)]), archs=["sm_90"],
                     eager_fn=lambda x, g: x.clone())
        self.assertFalse(hasattr(torch.ops.kop_tt_hr, "by_hand"))

    def test_a_constant_a_skipped_kernel_takes_is_host_code_of_every_branch(self):
        # A counter every branch makes, passed only to the kernel a test skips; a constant one branch tests and the
        # other passes to the kernel: host code both branches run.
        def counter(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            lock = torch.zeros(1, dtype=torch.float32, device=x.device)
            if not torch.equal(g, torch.tensor(1.0, device=g.device)):
                scale_in_place_by[(1,)](y, lock, y.numel(), BLOCK=256)
            return y

        def tested_or_passed(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            one = torch.ones((), device=x.device)
            if not torch.equal(g, one):
                scale_in_place_by[(1,)](y, one, y.numel(), BLOCK=256)
            return y
        for fn in (counter, tested_or_passed):
            with self.subTest(fn.__name__):
                r = ko.record_plugin(ko.triton(fn, host_sync=True), op_name=f"kop_tt_hr::{fn.__name__}",
                                     example_inputs=(torch.empty(()), torch.empty(64)))
                self.assertEqual(r.doc["when"], [{"tensor": "g", "!=": 1.0}])

    def test_an_elif_chain_tests_in_order(self):
        r = ko.record_plugin(ko.triton(scale_unless_either_launch, host_sync=True), op_name="kop_tt_hr::either",
                             example_inputs=(torch.empty(()), torch.empty((), dtype=torch.int32), torch.empty(64)))
        self.assertEqual(r.doc["when"], [{"tensor": "g", "!=": 1.0}, {"tensor": "h", "!=": 2}])
        self.assertEqual(r.doc["kernel_name"], "scale_in_place_by")

    def test_what_kernelop_does_not_record_is_refused_by_line(self):
        for fn, examples, message in host_read_cases():
            with self.subTest(fn.__name__):
                expect_error(self, ValueError, message, ko.record_plugin, ko.triton(fn, host_sync=True),
                             op_name=f"kop_tt_hr::{fn.__name__}", example_inputs=examples)
        expect_error(self, TypeError, "kernelop.triton: host_sync must be True or False, got 1", ko.triton,
                     maybe_scale_launch, host_sync=1)


class EmptyExamples(unittest.TestCase):
    def test_examples_with_no_elements_record_what_full_ones_do(self):
        def copy_rows(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
            return y
        for full, empty in (((64,), (0,)), ((4, 8), (0, 8)), ((4, 8), (4, 0)), ((2, 3, 4), (2, 0, 4))):
            with self.subTest(empty):
                want, got = (record(copy_rows, example_inputs=(torch.empty(s),)).doc for s in (full, empty))
                self.assertEqual(got, want)


class Refusals(unittest.TestCase):
    def test_what_cannot_be_recorded_is_refused_naming_it(self):
        def two_launches(x: torch.Tensor) -> torch.Tensor:  # the second kernel takes an unknown keyword
            y = torch.empty_like(x)
            z = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
            copy_kernel[(1,)](y, z, x.numel(), BLOCK=128, bogus=1)
            return z
        msg = expect_error(self, ValueError, "passes bogus, which kernelop does not record", record, two_launches)
        self.assertIn("test_triton.py:", msg)

        def every_other(x: torch.Tensor) -> torch.Tensor:  # the output as a view of a part of what the kernel writes
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
            return y.view(-1)[::2]
        expect_error(self, ValueError, "output 0 is not a contiguous tensor of its own, nor a permutation of one "
                     "(x.transpose(1, 2) of a tensor launch_fn allocates, all of it", record, every_other,
                     example_inputs=(torch.empty(4, 8),))

        def transposed(x: torch.Tensor) -> torch.Tensor:  # recorded: an output returned as a permutation
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
            return y.t()
        doc = ko.record_plugin(ko.triton(transposed), op_name="kop_tt_views::t",
                               example_inputs=(torch.empty(4, 8),)).doc
        self.assertEqual(doc["outputs"], [{"name": "Y", "shape": ["dim(x, 0)", "dim(x, 1)"], "dtype": "float32",
                                           "permute": [1, 0]}])

        def no_launch(x: torch.Tensor) -> torch.Tensor:
            return torch.empty_like(x)
        expect_error(self, ValueError, "launch_fn launched no Triton kernel", record, no_launch)

        def data_grid(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(int(x.sum().item()),)](x, y, x.numel(), BLOCK=128)
            return y
        msg = expect_error(self, ValueError, "launch_fn reads a value of a tensor on the host (.item(), int(t), "
                           "float(t), a Python condition on a tensor) at ", record, data_grid)
        self.assertIn("test_triton.py:", msg)  # the line

        def host_math(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x * 2, y, x.numel(), BLOCK=128)
            return y
        expect_error(self, ValueError, "a kernel is given a tensor computed on the host (aten.mul, at ", record,
                     host_math)

        def size_specialised(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            n = 4096 if x.shape[1] == 1031 else x.numel()
            copy_kernel[(1,)](x, y, n, BLOCK=128)
            return y
        expect_error(self, ValueError, "the code makes 'dim(x, 1)' equal 1031", record, size_specialised)

        def branches_on_size(x: torch.Tensor) -> torch.Tensor:  # a branch taken: its condition is required
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel() if x.shape[0] > 16 else 0, BLOCK=128)
            return y
        self.assertIn("dim(x, 0) > 16", record(branches_on_size).doc["requires"])

        def constexpr_from_sizes(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=x.shape[1] * 2)
            return y
        expect_error(self, ValueError, "constexpr 'BLOCK' gets a value computed from the inputs", record,
                     constexpr_from_sizes, [{}])

        def constexpr_from_a_scalar(x: torch.Tensor, n: int = 128) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=n)
            return y
        expect_error(self, ValueError, "constexpr 'BLOCK' gets a value computed from the inputs", record,
                     constexpr_from_a_scalar, [{}])

        def constexpr_is_a_size(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=x.shape[1])
            return y
        expect_error(self, ValueError, "a constexpr takes dim(x, -1), a size, as it is (or the host code compiles "
                     "it in as an int): the DSL compiles one kernel per value, so kernelop compiles the values you "
                     "list: kernelop.triton(..., specialize=[...])",
                     record, constexpr_is_a_size, [{}])
        r = ko.record_plugin(ko.triton(constexpr_is_a_size, [{}], specialize=[64, 128]), op_name="kop_tt_t::exact")
        self.assertEqual([c["BLOCK"] for c in r.doc["configs"]], [64] * 3 + [128] * 3)
        self.assertIn("(dim(x, 1) == 64) + (dim(x, 1) == 128) != 0", r.doc["requires"])
        expect_error(self, ValueError, "specialize must list the values of dim(x, -1) (ints >= 1), got [64, 0]",
                     ko.record_plugin, ko.triton(constexpr_is_a_size, [{}], specialize=[64, 0]))

        def float_math(x: torch.Tensor, alpha: float) -> torch.Tensor:
            return tk.elementwise_scale_mul(x, x, alpha * 2, 2)
        expect_error(self, ValueError, "computes with float scalar 'alpha' on the host", ko.record_plugin,
                     ko.triton(float_math, [{"BLOCK_SIZE": 256}]))

        def returns_input(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
            return y, x
        expect_error(self, ValueError, "launch_fn returns input 'x', which the kernel does not write", record,
                     returns_input)

        def returns_a_view(x: torch.Tensor) -> torch.Tensor:
            copy_kernel[(1,)](x, torch.empty_like(x), x.numel(), BLOCK=128)
            return x.view(-1)
        expect_error(self, ValueError, "returns a view of input 'x' as output 0", record, returns_a_view)

        def unannotated(x):
            return x
        expect_error(self, TypeError, "parameter 'x' has type hint", record, unannotated)

        def keyword_only(x: torch.Tensor, *, alpha: float = 1.0) -> torch.Tensor:
            return x
        expect_error(self, TypeError, "launch_fn takes keyword-only alpha", record, keyword_only)

        def bad_default(x: torch.Tensor, alpha: float = None) -> torch.Tensor:
            return x
        expect_error(self, TypeError, "float parameter 'alpha' has the default None; expected a float", record,
                     bad_default)

        autotuned = triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])(copy_kernel)

        def uses_autotune(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            autotuned[(1,)](x, y, x.numel())
            return y
        expect_error(self, ValueError, "@triton.autotune", record, uses_autotune)

    def test_configs_must_name_meta_parameters(self):
        expect_error(self, ValueError, "configs[1] sets BLOK", ko.record_plugin,
                     ko.triton(tk.vector_add, configs=[{"BLOCK_SIZE": 256}, {"BLOK": 1}]))
        expect_error(self, TypeError, "config values are ints or bools", ko.triton, tk.vector_add,
                     [{"BLOCK_SIZE": "256"}])
        expect_error(self, TypeError, "configs must be a list", ko.triton, tk.vector_add, {"BLOCK_SIZE": 256})

    def test_meta_impl_must_agree_with_the_launch(self):
        def wrong(x: torch.Tensor, y: torch.Tensor, b: float = 0.2, a: int = 2) -> torch.Tensor:
            return x.new_empty(x.shape[0])
        expect_error(self, ValueError, "meta_impl says output 0 is torch.float32 [dim(X, 0)] but launch_fn allocates",
                     ko.record_plugin, ko.triton(tk.elementwise_scale_mul, tk.ELEMENTWISE_SCALE_MUL_CONFIGS),
                     wrong, op_name="kop_tt_t::wrong")

    def test_a_spec_that_is_not_triton_is_not_compiled_by_nvrtc(self):
        doc = dict(tk.recorded("kop_tt_rec")["vector_add"].doc, op="kop_tt_t::nvrtc")
        expect_error(self, ValueError, "is a Triton kernel: NVRTC cannot compile it", ko._kernelop_torch.register_spec,
                     json.dumps(doc), ".", ["sm_90"], ko._kernelop.Overrides())

    def test_binaries_are_checked_against_the_calling_convention(self):
        r = tk.recorded("kop_tt_rec")["vector_add"]
        good = r.compile(["sm_90"])
        r.check(["sm_90"])
        dropped = [b for b in good if b.program != 1]
        expect_error(self, ValueError, "no binary for program 1, which tactic 1 (BLOCK_SIZE=256, num_warps=2, "
                     "num_stages=3, divisible=1) runs", ko._kernelop.check_binaries, json.dumps(r.doc), dropped)
        doc = dict(r.doc, params=r.doc["params"][:-1])
        expect_error(self, RuntimeError, "takes 6 parameter(s) but the calling convention passes 5",
                     ko._kernelop.check_binaries, json.dumps(doc), good)
        garbled = [replace(b, data=b"\x7fELF garbage") if b.arch.startswith("sm_") else b for b in good]
        expect_error(self, RuntimeError, "is not a 64-bit ELF holding the kernel 'add_kernel'",
                     ko._kernelop.check_binaries, json.dumps(r.doc), garbled)
        huge = [replace(b, launch_shared=300 * 1024) for b in good]
        expect_error(self, RuntimeError, "bytes of shared memory per block; a block may use",
                     ko._kernelop.check_binaries, json.dumps(r.doc), huge)
        # Scratch goes only to a parameter declared as a 64-bit 0 (Triton's scratch pointers).
        misplaced = [replace(b, scratch_bytes=256, scratch_align=128, scratch_param=0) for b in good]
        expect_error(self, ValueError, "scratch of 256 bytes per block (alignment 128) in parameter 0",
                     ko._kernelop.check_binaries, json.dumps(r.doc), misplaced)
        odd = [replace(b, scratch_bytes=256, scratch_align=96, scratch_param=4) for b in good]
        expect_error(self, ValueError, "alignment 96", ko._kernelop.check_binaries, json.dumps(r.doc), odd)
        right = [replace(b, scratch_bytes=256, scratch_align=128, scratch_param=4) for b in good]
        ko._kernelop.check_binaries(json.dumps(r.doc), right)


class Compilation(unittest.TestCase):
    def test_every_tactic_compiles_for_sm80_and_sm90_plus_ptx(self):
        r = tk.recorded("kop_tt_rec")["softmax"]
        bins = r.compile()
        archs = {}
        for b in bins:
            self.assertEqual((b.scratch_bytes, b.scratch_align, b.scratch_param), (0, 0, -1))
            archs.setdefault(b.program, []).append(b.arch)
            self.assertEqual(b.entry, "softmax_kernel")
            self.assertGreater(len(b.data), 1000)
        self.assertEqual(len(archs), len(r.doc["configs"]))
        self.assertTrue(all(a == ["sm_80", "compute_80", "sm_90a"] for a in archs.values()), archs)
        # The specialised tactic's PTX loads vectors; the generic one's cannot assume alignment.
        ptx = {b.program: b.ptx for b in bins if b.arch == "sm_90a"}
        self.assertGreater(ptx[3].count("ld.global.v4"), 0)
        self.assertEqual(ptx[5].count("ld.global.v4"), 0)

    def test_a_second_compile_comes_from_the_cache(self):
        r = tk.recorded("kop_tt_rec")["elementwise_scale_mul"]
        first = r.compile(["sm_80"])
        original = triton.compile
        triton.compile = lambda *a, **k: (_ for _ in ()).throw(AssertionError("compiled again"))
        try:
            again = tk.recorded("kop_tt_rec")["elementwise_scale_mul"].compile(["sm_80"])
        finally:
            triton.compile = original
        self.assertEqual(first, again)

    def test_global_scratch_is_allocated_per_launch(self):
        r = ko.record_plugin(ko.triton(desc_scale_launch, [{"BM": 32, "BN": 32}, {"BM": 64, "BN": 32}]),
                             op_name="kop_tt_rec::desc_scale")
        scratch = {(b.program, b.arch): (b.scratch_bytes, b.scratch_align, b.scratch_param) for b in r.compile()}
        # sm_90 builds the descriptors in 256 bytes of scratch per block, passed as the first of Triton's two
        # trailing pointers (parameter 4); sm_80 has no TMA and needs none.
        self.assertEqual(scratch[(0, "sm_90a")], (256, 128, 4))
        self.assertEqual(scratch[(0, "sm_80")], (0, 0, -1))
        r.check()
        with tempfile.TemporaryDirectory() as d:
            r.build_package(os.path.join(d, "desc.kop"))
            with open(os.path.join(d, "desc.kop"), "rb") as f:
                self.assertEqual(f.read(12)[8], 2)  # format 2: a version-1 reader would launch without scratch

    def test_architectures_are_checked(self):
        r = tk.recorded("kop_tt_rec")["vector_add"]
        expect_error(self, ValueError, "architecture 'compute_90' is invalid for Triton", r.compile, ["compute_90"])
        expect_error(self, ValueError, "listed twice", r.compile, ["sm_90", "sm_90"])


class Registration(unittest.TestCase):
    def test_a_triton_kernel_then_a_glue_kernel(self):
        r = sums_then_cast("kop_tt_then::sums")
        op = r.register(["sm_80"])
        self.assertEqual(str(op.default._schema), "kop_tt_then::sums(Tensor x) -> Tensor")
        y = op(torch.empty(7, 100, device="meta"))
        self.assertEqual((y.shape, y.dtype), (torch.Size([100]), torch.bfloat16))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sums.kop")
            sums_then_cast("kop_tt_then_pkg::sums").build_package(path, ["sm_80", "sm_90"])
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                print(op.default._schema, op(torch.empty(3, 100, device="meta")).dtype)
            """)
        self.assertEqual(out.strip(), "kop_tt_then_pkg::sums(Tensor x) -> Tensor torch.bfloat16")

    def test_the_op_has_a_schema_with_defaults_and_a_cpp_meta_kernel(self):
        op = ops()["elementwise_scale_mul"]
        self.assertRegex(str(op.default._schema), r"^kop_tt::elementwise_scale_mul\(Tensor X, Tensor Y, "
                         r"float b=0\.2\d*, int a=2\) -> Tensor$")
        x = torch.empty(64, 64, device="meta")
        self.assertEqual(op(x, x).shape, (64, 64))
        self.assertEqual(op(x, x, 0.5, 3).shape, (64, 64))
        expect_error(self, RuntimeError, "the inputs break the requirement 'same_shape(Y, X)': Y has shape [64, 9], "
                     "X [64, 64]",
                     op, x, torch.empty(64, 9, device="meta"))
        sm = ops()["softmax"]
        expect_error(self, RuntimeError, "rank(x) == 2", sm, torch.empty(2, 3, 4, device="meta"))
        self.assertEqual(ko.kernel("kop_tt::softmax").tactics[0],
                         "BLOCK_SIZE=256, num_warps=2, num_stages=3, divisible=2")
        self.assertEqual(ko.kernel("kop_tt::softmax").parameters,
                         ["float* out_ptr", "const float* x", "int dim(x, 1)", "int dim(x, 1)", "long long 0",
                          "long long 0"])

    def test_symbolic_shapes_under_fake_tensors(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        op = ops()["vector_add"]
        with FakeTensorMode(shape_env=ShapeEnv()) as mode:
            x = mode.from_tensor(torch.empty(8, 16), static_shapes=False)
            self.assertEqual(str(op(x, x).shape), str(x.shape))

    @staticmethod
    def scale_mul_package(directory, op_name):
        """The seed's elementwise_scale_mul, recorded as `op_name` and packaged into `directory`."""
        path = os.path.join(directory, "scale_mul.kop")
        r = ko.record_plugin(ko.triton(tk.elementwise_scale_mul, tk.ELEMENTWISE_SCALE_MUL_CONFIGS),
                             tk.elementwise_scale_mul_meta, op_name=op_name)
        r.build_package(path)
        return path

    def test_a_package_loads_where_triton_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.scale_mul_package(d, "kop_tt_pkg::scale_mul")
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                print(op.default._schema)
                print(tuple(op(torch.empty(4, 1024, device="meta"), torch.empty(4, 1024, device="meta")).shape))
                print(len(ko.kernel("kop_tt_pkg::scale_mul").tactics))
                print("triton" in sys.modules and sys.modules["triton"] is not None)
            """)
        lines = out.split("\n")
        self.assertRegex(lines[0], r"^kop_tt_pkg::scale_mul\(Tensor X, Tensor Y, float b=0\.2\d*, int a=2\) -> Tensor$")
        self.assertEqual(lines[1:4], ["(4, 1024)", "6", "False"])

    def test_inspect_names_triton_as_the_compiler_and_each_symbol_once(self):
        import subprocess
        import triton

        with tempfile.TemporaryDirectory() as d:
            path = self.scale_mul_package(d, "kop_tt_inspect::scale_mul")
            out = subprocess.run([sys.executable, "-m", "kernelop", "inspect", path], capture_output=True, text=True,
                                 timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(f"  built by  kernelop {ko.__version__} with Triton {triton.__version__}\n", out.stdout)
        self.assertNotIn("NVRTC", out.stdout)
        self.assertIn("  symbols   elementwise_scale_mul_kernel (x6)\n", out.stdout)


@unittest.skipUnless(CUDA, "needs a CUDA device")
class Cuda(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_host_reads_at_launch_match_the_host_code(self):
        # Note [host reads]: item() read after the count glue ran, call after call; `when` on the op's own kernel and
        # on a later one; under a CUDA graph capture, refused before anything is read.
        mean = ko.custom_plugin(ko.triton(mean_of_kept_launch, host_sync=True), op_name="kop_tt_hr_gpu::mean",
                                example_inputs=(torch.empty(64), torch.empty(64, dtype=torch.int64)))
        # Two configs: the first call of a size times them (in a CUDA graph of each one's launches), reading the
        # count once for the call.
        tuned = ko.custom_plugin(ko.triton(mean_of_kept_launch, [{"num_warps": 2}, {"num_warps": 8}], host_sync=True),
                                 op_name="kop_tt_hr_gpu::mean_tuned",
                                 example_inputs=(torch.empty(64), torch.empty(64, dtype=torch.int64)))
        for n, kept in ((1000, 7), (5, 5), (77, 1), (1 << 20, 3)):
            x = torch.randn(n, device="cuda")
            keep = torch.zeros(n, dtype=torch.int64, device="cuda")
            keep[torch.randperm(n, device="cuda")[:kept]] = 3
            torch.testing.assert_close(mean(x, keep), x / kept, rtol=0, atol=0)
            torch.testing.assert_close(tuned(x, keep), x / kept, rtol=0, atol=0)
        maybe = ko.custom_plugin(ko.triton(maybe_scale_launch, host_sync=True), op_name="kop_tt_hr_gpu::maybe",
                                 example_inputs=(torch.empty(()), torch.empty(64)))
        copy_scale = ko.custom_plugin(ko.triton(copy_then_maybe_scale_launch, host_sync=True),
                                      op_name="kop_tt_hr_gpu::copy_scale",
                                      example_inputs=(torch.empty(()), torch.empty(64)))
        x = torch.randn(3000, device="cuda")
        for g in (1.0, 0.5, 2.0, float("nan")):
            gt = torch.tensor(g, device="cuda")
            for op, skip in ((maybe, 1.0), (copy_scale, 0.5)):
                want = x if g == skip else x * gt
                torch.testing.assert_close(op(gt, x), want, rtol=0, atol=0, equal_nan=True, msg=f"{op} {g}")
        either = ko.custom_plugin(ko.triton(scale_unless_either_launch, host_sync=True), op_name="kop_tt_hr_gpu::either",
                                  example_inputs=(torch.empty(()), torch.empty((), dtype=torch.int32), torch.empty(64)))
        for g in (1.0, 3.0):
            for h in (2, 5):
                gt, ht = torch.tensor(g, device="cuda"), torch.tensor(h, dtype=torch.int32, device="cuda")
                torch.testing.assert_close(either(gt, ht, x), scale_unless_either_launch(gt, ht, x), rtol=0, atol=0)
        two = torch.tensor(2.0, device="cuda")
        with self.assertRaisesRegex(RuntimeError, "kop_tt_hr_gpu::maybe: reads the value of 'g' on the host at "
                                                  "launch"):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                maybe(two, x)

    def test_several_kernels_scratch_and_glue_match_torch(self):
        two = ko.custom_plugin(ko.triton(two_kernels_launch), op_name="kop_tt_two_gpu::z",
                               example_inputs=(torch.empty(8, 16),))
        for shape in ((1,), (1000,), (3, 333), (2, 5, 1031)):
            x = torch.randn(shape, device="cuda")
            torch.testing.assert_close(two(x), 3 * x, rtol=1e-6, atol=1e-6)
        for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 2e-2)):
            colsum = ko.custom_plugin(ko.triton(column_sums_per_sm), op_name=f"kop_tt_psm_gpu::c_{str(dtype)[6:]}",
                                      example_inputs=(torch.empty(64, 100, dtype=dtype),))
            # fewer rows than SMs (programs with none write zeros), many more, ragged columns
            for rows, cols in ((1, 7), (5, 100), (1000, 128), (4097, 33)):
                x = torch.randn(rows, cols, device="cuda", dtype=dtype)
                y = colsum(x)
                self.assertEqual((y.shape, y.dtype), (torch.Size([cols]), dtype))
                torch.testing.assert_close(y.float(), x.float().sum(0), rtol=tol, atol=tol * rows ** 0.5)
        x = torch.randn(300, 100, device="cuda")
        colsum(x.bfloat16())
        graph = torch.cuda.CUDAGraph()
        xb = x.bfloat16()
        with torch.cuda.graph(graph):  # the scratch's stream-ordered allocation and free are recorded too
            y = colsum(xb)
        xb.copy_(torch.randn_like(x).bfloat16())
        graph.replay()
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y.float(), xb.float().sum(0), rtol=2e-2, atol=2e-1)
        torch.library.opcheck(colsum, (xb,))

    def test_glue_before_the_first_kernel_matches_torch(self):
        op = ko.custom_plugin(ko.triton(scaled_by_mean_over_kept), op_name="kop_tt_before_gpu::f",
                              example_inputs=(torch.empty(64), torch.empty(8, dtype=torch.int64)))
        for n, rows, ignore in ((1, 1, -1), (1000, 37, -1), (5000, 4097, 3), (64, 2000, -100)):
            x = torch.randn(n, device="cuda")
            t = torch.randint(-1, 5, (rows,), device="cuda")
            t[0] = 2  # at least one kept
            want = x * (x.sum() / (t != ignore).sum())
            torch.testing.assert_close(op(x, t, ignore), want, rtol=1e-5, atol=1e-5)
        x, t = torch.randn(300, device="cuda"), torch.randint(0, 3, (50,), device="cuda")
        op(x, t, 1)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # the glue before the kernel is in the graph too
            y = op(x, t, 1)
        x.copy_(torch.randn_like(x))
        t.copy_(torch.randint(0, 3, (50,), device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, x * (x.sum() / (t != 1).sum()), rtol=1e-5, atol=1e-5)
        torch.library.opcheck(op, (x, t, 1))

    def each_tactic(self, name):
        return each_tactic(f"kop_tt::{name}")

    def test_an_op_with_a_copy_before_its_kernel_tunes_among_configs_that_agree(self):
        """A launch before the op's own kernel (a permuted copy, glue) with configs to tune: the tuner's choice, and
        every tactic pinned, give the same values over a corpus, for a contiguous input and a transposed view (read
        with its strides)."""
        def transposed_scaled(x: torch.Tensor) -> torch.Tensor:
            y = x.t().contiguous()  # kernelop's permuted copy, before the kernel, into scratch
            out = torch.empty_like(y)
            n = y.numel()
            scaled_copy[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](y, out, n, 2.0, BLOCK=128)
            return out
        op = ko.custom_plugin(ko.triton(transposed_scaled, [{"num_warps": 1}, {"num_warps": 4}, {"num_warps": 8}]),
                              op_name="kop_tt_before_tuned::f")
        k = ko.kernel("kop_tt_before_tuned::f")
        self.assertEqual(len(k.tactics), 9)  # 3 configs, 3 specialisation variants each
        for shape in ((33, 70), (1, 5), (1024, 513), (64, 64)):
            for view in (False, True):
                x = torch.randn(shape[::-1], device="cuda").t() if view else torch.randn(shape, device="cuda")
                want = x.t().contiguous() * 2
                torch.testing.assert_close(op(x), want, rtol=0, atol=0, msg=f"tuned {shape} view {view}")
                ran = 0
                for t, text in each_tactic("kop_tt_before_tuned::f"):
                    try:
                        got = op(x)
                    except RuntimeError as e:  # another variant of the config is the one for these inputs
                        self.assertRegex(str(e), r"aligned\(|% 16", f"{shape} tactic {t}: {e}")
                        continue
                    torch.testing.assert_close(got, want, rtol=0, atol=0, msg=f"{shape} view {view} tactic {text}")
                    ran += 1
                self.assertEqual(ran, 3, f"{shape} view {view}")

    def test_a_recorded_backward_matches_torch_autograd(self):
        ops = {dtype: ko.custom_plugin(
            ko.triton(scale_mul_launch), op_name=f"kop_tt_bwd_gpu::scale_mul_{str(dtype)[6:]}",
            example_inputs={"x": torch.empty(2, 8, dtype=dtype), "w": torch.empty(2, 8, dtype=dtype)},
            backward=ko.Backward(["x", "w"], ko.triton(scale_mul_backward_launch)))
            for dtype in (torch.float32, torch.bfloat16)}  # a recording is for its examples' dtypes (backward too)
        for dtype, shape, tol in [(torch.float32, (7, 333), 1e-6), (torch.bfloat16, (4, 3, 1000), 2e-2),
                                  (torch.float32, (1,), 1e-6)]:
            op = ops[dtype]
            x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
            w = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
            g = torch.randn(shape, device="cuda", dtype=dtype)
            gx, gw = torch.autograd.grad(op(x, w, 0.75), (x, w), g)
            rx, rw = torch.autograd.grad(0.75 * x * w, (x, w), g)
            torch.testing.assert_close(gx, rx, atol=tol, rtol=tol)
            torch.testing.assert_close(gw, rw, atol=tol, rtol=tol)
        op = ops[torch.float32]
        x = torch.randn(64, 64, device="cuda", requires_grad=True)
        w = torch.randn(64, 64, device="cuda", requires_grad=True)
        torch.library.opcheck(op.default, (x, w, 0.5))
        compiled = torch.compile(lambda a, b: op(a, b, 0.5).sum(), fullgraph=True, dynamic=True)
        for n in (33, 70):
            a = torch.randn(n, 16, device="cuda", requires_grad=True)
            b = torch.randn(n, 16, device="cuda", requires_grad=True)
            ga, gb = torch.autograd.grad(compiled(a, b), (a, b))
            torch.testing.assert_close(ga, 0.5 * b.detach())
            torch.testing.assert_close(gb, 0.5 * a.detach())

    def test_a_backward_takes_the_saved_tensors_nothing_else_holds(self):
        # Note [donated inputs]: the backward writes its gradients over copies of the saved a and b. When the graph is
        # not retained and nothing else holds a or b, the copies are a's and b's own buffers (no copy); otherwise they
        # are copies, and a and b keep their values.
        op = ko.custom_plugin(ko.triton(mul_launch), op_name="kop_tt_donate::mul",
                              backward=ko.Backward(["a", "b"], ko.triton(mul_backward_over_copies)))
        x = torch.randn(1000, 33, device="cuda", requires_grad=True)
        w = torch.randn(1000, 33, device="cuda", requires_grad=True)
        c = torch.randn(1000, 33, device="cuda", requires_grad=True)
        g = torch.randn(1000, 33, device="cuda")

        def step(hold=False, retain=False, also_saved=False):
            seen = {}
            a, b = x * 1.0, w * 1.0  # activations: only the op's graph keeps them after the forward
            ptrs = (a.data_ptr(), b.data_ptr())
            a.register_hook(lambda grad: seen.update(a=grad.data_ptr()))
            b.register_hook(lambda grad: seen.update(b=grad.data_ptr()))
            y = op(a, b)
            if also_saved:  # another node saves a too; whichever backward runs first, a stays for it
                c.grad = None
                y = y + a * c
            kept = (a.detach().clone(), b.detach().clone())
            held = (a, b) if hold else ()
            del a, b
            x.grad = w.grad = None
            y.backward(g, retain_graph=retain)
            torch.testing.assert_close(x.grad, g * (w.detach() + (c.detach() if also_saved else 0)))
            torch.testing.assert_close(w.grad, g * x.detach())
            if also_saved:
                torch.testing.assert_close(c.grad, g * x.detach())  # read a as the forward made it
            return ptrs, (seen["a"], seen["b"]), held, kept, y

        ptrs, grads, _, _, _ = step()
        self.assertEqual(grads, ptrs)  # the gradients took the activations' buffers
        ptrs, grads, held, kept, _ = step(hold=True)
        self.assertNotEqual(grads[0], ptrs[0])
        self.assertNotEqual(grads[1], ptrs[1])
        torch.testing.assert_close(held[0], kept[0], rtol=0, atol=0)  # what the caller holds is intact
        torch.testing.assert_close(held[1], kept[1], rtol=0, atol=0)
        step(also_saved=True)
        ptrs, grads, _, _, y = step(retain=True)
        self.assertNotEqual(grads[0], ptrs[0])
        self.assertNotEqual(grads[1], ptrs[1])
        x.grad = w.grad = None
        y.backward(g)  # the retained graph's saved tensors were left intact: the same gradients again
        torch.testing.assert_close(x.grad, g * w.detach())
        torch.testing.assert_close(w.grad, g * x.detach())
        # A Python call of the backward op holds its arguments: never given away.
        a, b = torch.randn(7, 5, device="cuda"), torch.randn(7, 5, device="cuda")
        before = (a.clone(), b.clone())
        bwd = getattr(torch.ops.kop_tt_donate, "mul_backward")
        bwd(a, b, torch.ones_like(a))
        torch.testing.assert_close(a, before[0], rtol=0, atol=0)
        torch.testing.assert_close(b, before[1], rtol=0, atol=0)

    def test_a_backward_takes_the_incoming_gradient_autograd_gave_it_alone(self):
        # Note [donated inputs]: a gradient the engine gave this backward alone (made by the next node's backward) is
        # the buffer of the gradient written over its copy; one the caller holds, or one autograd gave two nodes
        # (until the other has run), or one a double-backward graph needs, is copied and keeps its value.
        op = ko.custom_plugin(ko.triton(mul_launch), op_name="kop_tt_donate_grad::mul",
                              backward=ko.Backward(["a"], ko.triton(mul_backward_over_gradient)))
        x = torch.randn(1000, 33, device="cuda", requires_grad=True)
        w = torch.randn(1000, 33, device="cuda")
        g = torch.randn(1000, 33, device="cuda")

        def step(make, create_graph=False):
            seen = {}
            a = x * 1.0
            y = op(a, w)
            y.register_hook(lambda grad: seen.update(y=grad.data_ptr()))
            a.register_hook(lambda grad: seen.update(a=grad.data_ptr()))
            out, grad = make(y)
            (gx,) = torch.autograd.grad(out, (x,), grad, create_graph=create_graph)
            return seen, gx

        seen, gx = step(lambda y: (y * 2.0, g))  # y's gradient is MulBackward's new tensor: autograd's alone
        self.assertEqual(seen["a"], seen["y"])
        torch.testing.assert_close(gx, 2.0 * g * w)
        before = g.clone()
        seen, gx = step(lambda y: (y, g))  # the caller's own gradient: copied, intact
        self.assertNotEqual(seen["a"], seen["y"])
        torch.testing.assert_close(g, before, rtol=0, atol=0)
        torch.testing.assert_close(gx, g * w)
        # One gradient to two backwards (AddBackward passes it on as it is): the first copies it, so the second's
        # taking it changes nothing the first reads.
        a1, a2 = x * 1.0, x * 3.0
        (gx,) = torch.autograd.grad((op(a1, w) + op(a2, w)) * 2.0, (x,), g)
        torch.testing.assert_close(gx, 2.0 * g * w * 4.0)
        seen, gx = step(lambda y: (y * 2.0, g), create_graph=True)  # a graph that may be differentiated again
        self.assertNotEqual(seen["a"], seen["y"])
        torch.testing.assert_close(gx.detach(), 2.0 * g * w)

    def test_an_op_that_writes_its_input_differentiates_the_value_before(self):
        # Note [written inputs with a backward]: y = x², x doubled in place. The gradient is that of the x before the
        # call; the backward reads the x the op left (2 x); a view's base takes the write (CopySlices).
        op = square_doubling("kop_tt_w_gpu::sqd").register()
        x0 = torch.randn(300, 7, device="cuda", requires_grad=True)
        g = torch.randn(300, 7, device="cuda")
        a = x0 * 1.0
        y = op(a)
        torch.testing.assert_close(a.detach(), 2 * x0.detach())
        torch.testing.assert_close(y, x0.detach() ** 2)
        (gx,) = torch.autograd.grad(y, (x0,), g)
        torch.testing.assert_close(gx, 2 * x0.detach() * g)
        base = x0 * 1.0
        y = op(base[100:])
        torch.testing.assert_close(base[:100].detach(), x0[:100].detach(), rtol=0, atol=0)
        torch.testing.assert_close(base[100:].detach(), 2 * x0[100:].detach())
        (gx,) = torch.autograd.grad(y, (x0,), g[100:])
        torch.testing.assert_close(gx[:100], torch.zeros_like(gx[:100]), rtol=0, atol=0)
        torch.testing.assert_close(gx[100:], 2 * x0[100:].detach() * g[100:])
        with self.assertRaisesRegex(RuntimeError, "wrote into its input 'x' in place"):
            torch.autograd.grad(base.sum(), (x0,))
        compiled = torch.compile(lambda t: (op(t * 1.0) * g).sum(), fullgraph=True)
        (gx,) = torch.autograd.grad(compiled(x0), (x0,))
        torch.testing.assert_close(gx, 2 * x0.detach() * g)

    def test_written_results_differentiate_as_pytorchs_in_place_ops(self):
        # Note [written results], differential: every scenario's gradients equal those of PyTorch's own in-place ops
        # doing the same writes (a.mul_(2); b.mul_(3)), as do the values left.
        op = scale_two_op("kop_tt_wr_gpu::scale_two").register()

        def aten(a, b):
            a.mul_(2)
            b.mul_(3)
        for name, _ in written_results_scenarios(op, "cuda"):
            with self.subTest(name):
                x0 = torch.randn(300, 7, device="cuda", requires_grad=True)
                y0 = torch.randn(300, 7, device="cuda", requires_grad=True)
                got, want = [dict(written_results_scenarios(f, "cuda"))[name](x0, y0) for f in (op, aten)]
                ws = [torch.randn_like(w) for w in want]
                for g, w in zip(got, want):
                    torch.testing.assert_close(g, w, rtol=0, atol=0)
                loss = lambda outs: sum((o * w).sum() for o, w in zip(outs, ws))  # noqa: E731
                gg = torch.autograd.grad(loss(got), (x0, y0), allow_unused=True)
                gw = torch.autograd.grad(loss(want), (x0, y0), allow_unused=True)
                for g, w, leaf in zip(gg, gw, (x0, y0)):
                    # an input of the op's one node gets zeros where PyTorch's separate ops give none
                    torch.testing.assert_close(g if g is not None else torch.zeros_like(leaf),
                                               w if w is not None else torch.zeros_like(leaf))
        compiled = torch.compile(lambda x, y: dict(written_results_scenarios(op, "cuda"))["one_base"](x, y),
                                 fullgraph=True)
        x0 = torch.randn(300, 7, device="cuda", requires_grad=True)
        y0 = torch.randn(300, 7, device="cuda", requires_grad=True)
        outs = compiled(x0, y0)
        gx, gy = torch.autograd.grad(sum(o.sum() for o in outs), (x0, y0))
        torch.testing.assert_close(gx, 8 * x0.detach())  # (2 x)² summed
        torch.testing.assert_close(gy, torch.full_like(gy, 3.0))
        # an output and a written result; a view's base changed after the call
        sqdx = ko.record_plugin(ko.triton(square_doubling_returning_x), op_name="kop_tt_wr_gpu::sqdx",
                                backward=ko.Backward(["x"], ko.triton(square_doubling_returning_x_backward))).register()
        for f in (sqdx, lambda t: (t.clone().square(), t.mul_(2))[0]):
            base = x0 * 1.0
            a = base[100:]
            y = f(a)
            (g,) = torch.autograd.grad((y * 3).sum() + (a * a).sum() + base.sum(), (x0,))
            if f is sqdx:
                got = g
            else:
                torch.testing.assert_close(got, g)
        # gradients retained before the call, of a result and of a result's base, are those of the values after
        retained = []
        for f in (op, aten):
            ax, by = x0 * 1.0, y0 * 1.0
            a, b = ax.view(-1), by[1:]
            a.retain_grad()
            by.retain_grad()
            f(a, b)
            ((a * 2).sum() + (by * by).sum()).backward()
            retained.append((a.grad, by.grad))
        for g, w in zip(*retained):
            torch.testing.assert_close(g, w)
        # a gradient two backward inputs read (Backward.from_) is given to both, never moved from one
        twice = ko.record_plugin(ko.triton(scale_two_launch), op_name="kop_tt_wr_gpu::twice",
                                 backward=ko.Backward(["x", "y"], ko.triton(gradient_read_twice),
                                                      from_={"g": "grad_x_out"})).register()
        a, b = x0 * 1.0, y0 * 1.0
        twice(a, b)
        ga = torch.randn_like(a)
        gx, gy = torch.autograd.grad((a, b), (x0, y0), (ga, torch.ones_like(b)))
        torch.testing.assert_close(gx, 2 * ga * ga)
        torch.testing.assert_close(gy, torch.full_like(gy, 3.0))

    def test_a_packaged_recorded_backward_trains_without_triton(self):
        with tempfile.TemporaryDirectory() as d:
            path = recorded_scale_mul(op_name="kop_tt_bwd_gpu_pkg::scale_mul").build_package(
                os.path.join(d, "s.kop"))
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                x = torch.randn(5, 300, device="cuda", requires_grad=True)
                w = torch.randn(5, 300, device="cuda", requires_grad=True)
                g = torch.randn(5, 300, device="cuda")
                gx, gw = torch.autograd.grad(op(x, w, 2.0), (x, w), g)
                print(bool(torch.allclose(gx, 2.0 * w * g)) and bool(torch.allclose(gw, 2.0 * x * g)))
            """)
        self.assertEqual(out.split("\n")[0], "True")

    def test_every_tactic_matches_tritons_own_launch(self):
        cases = {
            "elementwise_scale_mul": [(lambda s: (torch.randn(s, device="cuda"), torch.randn(s, device="cuda"), 0.5, 3),
                                       [(64, 64), (32, 1024), (4, 4096)])],
            "vector_add": [(lambda s: (torch.randn(s, device="cuda"), torch.randn(s, device="cuda")),
                            [(64, 64), (7, 1000), (3, 5), (512, 4096)])],
            "softmax": [(lambda s: (torch.randn(s, device="cuda") * 4,), [(64, 64), (7, 1000), (3, 5), (16, 12289)])],
        }
        launch = {"elementwise_scale_mul": tk.elementwise_scale_mul, "vector_add": tk.vector_add,
                  "softmax": tk.softmax}
        for name, [(make, shapes)] in cases.items():
            op = ops()[name]
            for shape in shapes:
                args = make(shape)
                want = launch[name](*args)
                ran = 0
                for t, text in self.each_tactic(name):
                    try:
                        got = op(*args)
                    except RuntimeError as e:  # another variant of the config is the one for these inputs
                        self.assertRegex(str(e), r"aligned\(|% 16", f"{name} {shape} tactic {t}: {e}")
                        continue
                    torch.cuda.synchronize()
                    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6,
                                               msg=lambda m: f"{name} {shape} tactic {t} ({text}): {m}")
                    ran += 1
                # Exactly one specialisation variant of each config runs any given inputs.
                self.assertEqual(ran, len(ko.kernel(f"kop_tt::{name}").tactics) // 3, f"{name} {shape}")

    def test_misaligned_inputs_run_the_generic_kernel(self):
        op = ops()["vector_add"]
        k = ko.kernel("kop_tt::vector_add")
        base = torch.randn(4097, device="cuda")
        x = base[1:].view(64, 64)  # 4 bytes past a 16-byte boundary
        y = torch.randn(64, 64, device="cuda")
        self.assertNotEqual(x.data_ptr() % 16, 0)
        got = op(x, y)
        torch.testing.assert_close(got, x + y)
        self.assertIn("divisible=0", k.tactics[k.last_tactic])
        specialised = next(i for i, t in enumerate(k.tactics) if "divisible=1" in t)
        k.pin_tactic(specialised)
        try:
            expect_error(self, RuntimeError, "aligned(x, 16)", op, x, y)
        finally:
            k.pin_tactic(None)
        # Aligned inputs whose size is not a multiple of 16: pointers specialised, sizes not.
        a, b = torch.randn(7, 1000, device="cuda"), torch.randn(7, 1000, device="cuda")
        torch.testing.assert_close(op(a, b), a + b)
        self.assertNotIn("divisible=0", k.tactics[k.last_tactic])
        self.assertNotIn("divisible=2", k.tactics[k.last_tactic])

    def test_a_literal_float_reaches_the_kernel(self):
        op = ko.custom_plugin(ko.triton(literal_float_launch), op_name="kop_tt_rfg::literal")
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(op(x), x * -2.5)

    def test_the_seed_example_at_ranks_1_to_4(self):
        op = ops()["elementwise_scale_mul"]
        for shape in ((4096,), (8, 1024), (2, 4, 1024), (2, 2, 2, 1024)):
            x, y = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
            torch.testing.assert_close(op(x, y, 0.5, 3), x * y * 3 + 0.5)

    def test_size_classes_run_the_block_of_their_class(self):
        r = ko.record_plugin(ko.triton(row_norm_sized_launch, specialize=[256, 1024, 4096, 8192]),
                             op_name="kop_tt_scg::norm", example_inputs=(torch.empty(4, 4096), torch.empty(4096)))
        op = r.register()
        blocks = [cc["constexprs"]["BLOCK"] for cc in r.compile_configs]
        k = ko.kernel("kop_tt_scg::norm")
        for n, lead in ((129, (3,)), (256, (2, 5)), (777, ()), (1024, (4, 1, 3)), (2049, (7,)), (4096, (2,)),
                        (5000, (3,)), (8192, (1,))):
            x, w = torch.randn(*lead, n, device="cuda"), torch.randn(n, device="cuda")
            y = op(x, w, 1e-6)
            want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
            torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)
            self.assertEqual(blocks[k.last_tactic], 1 << (n - 1).bit_length(), n)
        with self.assertRaisesRegex(RuntimeError, "break the requirement"):
            op(torch.randn(3, 100, device="cuda"), torch.randn(100, device="cuda"), 1e-6)

    def test_kernels_that_write_inputs(self):
        # Eager values against Triton's own launch, opcheck (the Tensor(a!) schema is honoured), torch.compile
        # (functionalization keeps the write) and a CUDA graph.
        xent = ko.custom_plugin(ko.triton(zero_ignored_rows_launch), op_name="kop_tt_wg::xent",
                                example_inputs=(torch.empty(4, 1000), torch.empty(4, dtype=torch.int32)))
        inc = ko.custom_plugin(ko.triton(add_one_returning_it), op_name="kop_tt_wg::inc")
        x = torch.randn(6, 1000, device="cuda")
        t = torch.tensor([1, -100, 3, -100, 0, 2], device="cuda", dtype=torch.int32)
        want_x = x.clone()
        want_loss = zero_ignored_rows_launch(want_x, t)  # Triton's own launch
        loss = xent(x, t)
        torch.testing.assert_close(loss, want_loss)
        torch.testing.assert_close(x, want_x)
        self.assertTrue(bool((x[1] == 0).all()) and bool((x[0] != 0).any()))
        torch.library.opcheck(xent, (torch.randn(6, 1000, device="cuda"), t))
        torch.library.opcheck(inc, (torch.randn(33, 17, device="cuda"),))

        def step(a, b):
            inc(a)
            return a * 2 + b
        a, b = torch.randn(5, 7, device="cuda"), torch.randn(5, 7, device="cuda")
        want = (a + 1) * 2 + b
        got = torch.compile(step, fullgraph=True, dynamic=True)(a, b)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(a, want.sub(b).div(2))
        y = torch.zeros(4096, device="cuda")
        inc(y)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            inc(y)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(bool((y == 4).all()), y[:4])  # once eagerly, three replays (capture runs nothing)

    def test_a_triton_kernel_then_a_glue_kernel_on_the_gpu(self):
        op = sums_then_cast("kop_tt_then_gpu::sums").register()
        for rows in (0, 1, 1000, 4099):
            x = torch.randn(rows, 100, device="cuda")
            torch.testing.assert_close(op(x), x.sum(0).to(torch.bfloat16), rtol=1e-2, atol=1e-2)
        graph = torch.cuda.CUDAGraph()
        x = torch.randn(500, 100, device="cuda")
        with torch.cuda.graph(graph):
            y = op(x)
        for _ in range(3):
            x.copy_(torch.randn(500, 100, device="cuda"))
            graph.replay()
            torch.cuda.synchronize()
            torch.testing.assert_close(y, x.sum(0).to(torch.bfloat16), rtol=1e-2, atol=1e-2)

    def test_initialised_outputs(self):
        # Note [initialised outputs]: host code's zeros / full / clone / fill_ happen before each launch, in CUDA
        # graphs too, and an empty grid leaves the output initialised.
        sums = ko.custom_plugin(ko.triton(column_sums_launch), op_name="kop_tt_init::sums",
                                example_inputs=(torch.empty(64, 100),))
        x = torch.randn(1000, 100, device="cuda")
        torch.testing.assert_close(sums(x), x.sum(0), rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(sums(x[:0]), torch.zeros(100, device="cuda"), rtol=0, atol=0)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = sums(x)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, x.sum(0), rtol=1e-4, atol=1e-3)  # not three sums piled up
        maxes = ko.custom_plugin(ko.triton(even_rows_max_launch), op_name="kop_tt_init::maxes",
                                 example_inputs=(torch.empty(8, 64),))
        x = torch.randn(9, 100, device="cuda")
        want = torch.full((9,), float("-inf"), device="cuda")
        want[0::2] = x[0::2].max(1).values
        torch.testing.assert_close(maxes(x), want, rtol=0, atol=0)
        x = torch.randn(3, 1000, device="cuda")
        for launch, add in ((add_one_to_a_clone_launch, x), (add_one_to_a_fill_launch, 2.5)):
            op = ko.custom_plugin(ko.triton(launch), op_name=f"kop_tt_init::{launch.__name__[:-7]}")
            torch.testing.assert_close(op(x), launch(x), rtol=0, atol=0)  # Triton's own launch
            torch.testing.assert_close(op(x), torch.as_tensor(add, device="cuda").expand_as(x) + 1, rtol=0, atol=0)
        torch.library.opcheck(sums, (torch.randn(40, 100, device="cuda"),))

    def test_a_persistent_kernel_gets_the_devices_sm_count(self):
        op = ko.custom_plugin(ko.triton(rows_persistent_launch), op_name="kop_tt_sm::persistent",
                              example_inputs=(torch.empty(64, 100),))
        for rows in (1, 131, 132, 133, 5000):
            x = torch.randn(rows, 100, device="cuda")
            torch.testing.assert_close(op(x), rows_persistent_launch(x), rtol=0, atol=0)  # Triton's own launch
            torch.testing.assert_close(op(x), x * 2, rtol=0, atol=0)

    def test_opcheck(self):
        for name, args in (("elementwise_scale_mul", (torch.randn(8, 1024, device="cuda"),
                                                      torch.randn(8, 1024, device="cuda"), 0.25, 5)),
                           ("vector_add", (torch.randn(33, 17, device="cuda"), torch.randn(33, 17, device="cuda"))),
                           ("softmax", (torch.randn(33, 300, device="cuda"),))):
            torch.library.opcheck(ops()[name], args)

    def test_torch_compile_dynamic_compiles_once_across_sizes(self):
        add, sm = ops()["vector_add"], ops()["softmax"]

        def f(x, y):
            return sm(add(x, y) * 2)

        backend, counts = counting_inductor()
        g = torch.compile(f, fullgraph=True, dynamic=True, backend=backend)
        for rows, cols in ((5, 300), (17, 301), (64, 4096)):
            x, y = torch.randn(rows, cols, device="cuda"), torch.randn(rows, cols, device="cuda")
            torch.testing.assert_close(g(x, y), torch.softmax((x + y) * 2, -1))
        self.assertEqual(counts["n"], 1)

    def test_export_round_trip(self):
        scale_mul = ops()["elementwise_scale_mul"]

        class M(torch.nn.Module):
            def forward(self, x, y):
                return scale_mul(x, torch.add(x, y), b=0.5)

        x, y = torch.randn(16, 1024, device="cuda"), torch.randn(16, 1024, device="cuda")
        ep = torch.export.export(M(), (x, y), dynamic_shapes={"x": {0: torch.export.Dim("b")},
                                                              "y": {0: torch.export.Dim("b")}})
        self.assertIn("kop_tt.elementwise_scale_mul", str(ep.graph))
        x2, y2 = torch.randn(9, 1024, device="cuda"), torch.randn(9, 1024, device="cuda")
        torch.testing.assert_close(ep.module()(x2, y2), x2 * (x2 + y2) * 2 + 0.5)

    def test_cuda_graph_replay(self):
        add = ops()["vector_add"]
        x, y = torch.randn(128, 256, device="cuda"), torch.randn(128, 256, device="cuda")
        add(x, y)  # load (and tune) outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = add(x, y)
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y)

    def test_bool_scalars(self):
        op = ko.custom_plugin(ko.triton(negate_scale_launch), op_name="kop_tt::negate_scale")
        x = torch.randn(37, 1001, device="cuda")
        for neg in (False, True):
            torch.testing.assert_close(op(x, neg), negate_scale_launch(x, neg))
            torch.testing.assert_close(op(x, neg, 0.25), (-x if neg else x) * 0.25)

    def test_global_scratch_kernels_match_tritons_launch(self):
        op = ko.custom_plugin(ko.triton(desc_scale_launch, [{"BM": 32, "BN": 32}, {"BM": 64, "BN": 64}]),
                              op_name="kop_tt::desc_scale")
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        k = ko.kernel("kop_tt::desc_scale")
        for shape in ((64, 64), (200, 96), (1024, 512)):
            x = torch.randn(shape, device="cuda")
            want = desc_scale_launch(x)
            for t, text in self.each_tactic("desc_scale"):
                try:
                    got = op(x)
                except RuntimeError as e:
                    self.assertRegex(str(e), r"aligned\(|% 16", f"{shape} tactic {t}: {e}")
                    continue
                torch.testing.assert_close(got, want, msg=lambda m: f"{shape} tactic {t} ({text}): {m}")
            torch.testing.assert_close(op(x), x * 2)
        # In a CUDA graph the scratch allocation is captured with the launch.
        x = torch.randn(256, 256, device="cuda")
        op(x)
        torch.testing.assert_close(replay_with_new_input(op, x), x * 2)
        self.assertIsNotNone(k.last_tactic)

    def test_packages_built_without_a_gpu_run_without_triton(self):
        packages = os.environ.get("KERNELOP_CPU_PACKAGES")
        names = ["elementwise_scale_mul", "vector_add", "softmax"]
        with tempfile.TemporaryDirectory() as d:
            if not packages or not os.path.exists(os.path.join(packages, "kop_triton.softmax.kop")):
                packages = d  # built here instead (the GPU suite stages CPU-built ones)
                for name, r in tk.recorded("kop_triton").items():
                    r.build_package(os.path.join(d, f"kop_triton.{name}.kop"))
            out = run_python(f"""
                import os, torch, kernelop as ko
                ops = {{n: ko.load_package(os.path.join({packages!r}, f"kop_triton.{{n}}.kop")) for n in {names!r}}}
                x, y = torch.randn(32, 1024, device="cuda"), torch.randn(32, 1024, device="cuda")
                errs = [
                    (ops["elementwise_scale_mul"](x, y, 0.5, 3) - (x * y * 3 + 0.5)).abs().max().item(),
                    (ops["vector_add"](x[:, :1000].contiguous(), y[:, :1000].contiguous())
                     - (x[:, :1000] + y[:, :1000])).abs().max().item(),
                    (ops["softmax"](x) - torch.softmax(x, -1)).abs().max().item(),
                ]
                print(max(errs), sys.modules.get("triton"))
            """)
        err, triton_module = out.split()
        self.assertLess(float(err), 1e-5)
        self.assertEqual(triton_module, "None")


@triton.jit
def double_rows(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


def double_rows_launch(x: torch.Tensor) -> torch.Tensor:
    """A row of x a block: the row length compiled in (a size a constexpr takes as it is)."""
    y = torch.empty_like(x)
    double_rows[(x.shape[0],)](x, y, x.numel(), BLOCK=x.shape[1])
    return y


def double_rows_backward(grad_Y: torch.Tensor) -> torch.Tensor:
    g = torch.empty_like(grad_Y)
    double_rows[(grad_Y.shape[0],)](grad_Y, g, grad_Y.numel(), BLOCK=grad_Y.shape[1])
    return g


@triton.jit
def double_tile(X, Y, n, ROW: tl.constexpr, ROWS: tl.constexpr):
    offs = tl.arange(0, ROW * ROWS)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)


def tile_of_launch(x: torch.Tensor) -> torch.Tensor:
    """Two sizes compiled in: the row length as it is, and the power of two above the row count."""
    y = torch.empty_like(x)
    double_tile[(1,)](x, y, x.numel(), ROW=x.shape[1], ROWS=triton.next_power_of_2(x.shape[0]))
    return y


def configs_of(doc):
    """An op's tactics as a set (the order classes were added in aside)."""
    return {json.dumps(c, sort_keys=True) for c in doc["configs"]}


class FirstUse(unittest.TestCase):
    """Note [first-use growth]: first_use=True compiles a size outside specialize when the op is first called with
    it, and keeps it. CPU: through the Meta kernel (eager meta calls, make_fx, autograd), the grown op against one
    recorded ahead with the same sizes (spec and machine code), refusals, threads, packages."""

    def registration(self, name):
        return ko._kernelop_torch.find_registration(name)

    def test_a_size_outside_specialize_is_compiled_on_first_use_and_kept(self):
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                             op_name="kop_tt_fu::grows")
        op = r.register(["sm_90"])
        reg = self.registration("kop_tt_fu::grows")
        self.assertEqual((reg.generations, len(reg.tactics)), (1, 3))
        self.assertEqual(tuple(op(meta_tensor(3, 128)).shape), (3, 128))
        self.assertEqual((reg.generations, len(reg.tactics), r.growth.grown), (2, 6, 1))
        for rows in (1, 5, 1000):  # the class is kept: no recording, no new op
            self.assertEqual(tuple(op(meta_tensor(rows, 128)).shape), (rows, 128))
        self.assertEqual(tuple(op(meta_tensor(2, 64)).shape), (2, 64))
        self.assertEqual((reg.generations, r.growth.grown), (2, 1))
        self.assertIn("(dim(x, 1) == 64) + (dim(x, 1) == 128) != 0", r.doc["requires"])
        self.assertEqual(sorted({c["BLOCK"] for c in r.doc["configs"]}), [64, 128])
        self.assertEqual(r.op_name, "kop_tt_fu::grows")

    def test_the_grown_op_is_the_op_recorded_ahead_with_those_sizes(self):
        # Differential: classes added on first use, in any order, against one recording of them all.
        sizes = [64, 256, 16, 128]
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=sizes[:1], first_use=True),
                             op_name="kop_tt_fu::diff")
        op = r.register(["sm_90"])
        for n in sizes[1:]:
            op(meta_tensor(4, n))
        ahead = ko.record_plugin(ko.triton(double_rows_launch, specialize=sizes), op_name="kop_tt_fu::diff")
        self.assertEqual(configs_of(r.doc), configs_of(ahead.doc))
        self.assertEqual({k: v for k, v in r.doc.items() if k not in ("configs", "requires")},
                         {k: v for k, v in ahead.doc.items() if k not in ("configs", "requires")})
        self.assertEqual(set(r.doc["requires"][:-1]), set(ahead.doc["requires"][:-1]))

        def terms(req):  # the class union, its terms in any order
            return sorted(req.replace(" != 0", "").split(" + "))
        self.assertEqual(terms(r.doc["requires"][-1]), terms(ahead.doc["requires"][-1]))

        def code(rec):  # each tactic's machine code, by its config
            return {(json.dumps(rec.doc["configs"][b.program], sort_keys=True), b.arch): b.data
                    for b in rec.compile(["sm_90"])}
        self.assertEqual(code(r), code(ahead))

    def test_with_no_list_the_example_size_is_compiled_ahead(self):
        r = ko.record_plugin(ko.triton(double_rows_launch, first_use=True), op_name="kop_tt_fu::nolist",
                             example_inputs=(torch.empty(8, 32),))
        self.assertEqual({c["BLOCK"] for c in r.doc["configs"]}, {32})
        op = r.register(["sm_90"])
        self.assertEqual(tuple(op(meta_tensor(8, 512)).shape), (8, 512))
        self.assertEqual({c["BLOCK"] for c in r.doc["configs"]}, {32, 512})

    def test_a_size_the_kernel_cannot_take_is_refused_with_why_and_remembered(self):
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                             op_name="kop_tt_fu::refused")
        op = r.register(["sm_90"])
        msg = expect_error(self, RuntimeError, "the inputs break the requirement 'dim(x, 1) == 64': 100 == 64 is "
                           "false; kernelop compiled no op for dim(x, -1) == 100 on first use: ", op, meta_tensor(2, 100))
        self.assertIn("arange's range must be a power of 2", msg)
        self.assertEqual(expect_error(self, RuntimeError, "dim(x, -1) == 100 on first use", op, meta_tensor(7, 100)),
                         msg)  # not recorded again
        self.assertEqual((self.registration("kop_tt_fu::refused").generations, r.growth.grown), (1, 0))
        self.assertEqual(list(r.growth.refused), [(100,)])
        # a requirement that is no size class's: the plain refusal
        expect_error(self, RuntimeError, "requirement 'rank(x) == 2'", op, meta_tensor(2, 3, 64))
        # the class that failed to compile is not the op's: the next one grows by itself alone
        self.assertEqual(tuple(op(meta_tensor(2, 128)).shape), (2, 128))
        self.assertEqual(sorted({c["BLOCK"] for c in r.doc["configs"]}), [64, 128])
        self.assertEqual([c for c, _ in r.growth.classes], [(64,), (128,)])

    def test_without_first_use_nothing_grows(self):
        op = ko.custom_plugin(ko.triton(double_rows_launch, specialize=[64]), op_name="kop_tt_fu::fixed",
                              archs=["sm_90"])
        msg = expect_error(self, RuntimeError, "the inputs break the requirement 'dim(x, 1) == 64'", op,
                           meta_tensor(2, 128))
        self.assertNotIn("first use", msg)
        self.assertFalse(self.registration("kop_tt_fu::fixed").has_miss_handler)
        expect_error(self, TypeError, "kernelop.triton: first_use must be True or False, got 'yes'", ko.triton,
                     double_rows_launch, first_use="yes")

    def test_it_grows_while_make_fx_traces_symbolically(self):
        from torch.fx.experimental.proxy_tensor import make_fx
        op = ko.custom_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                              op_name="kop_tt_fu::traced", archs=["sm_90"])
        gm = make_fx(lambda x: op(x) + 1, tracing_mode="symbolic")(torch.empty(6, 256))
        self.assertIn("kop_tt_fu.traced", gm.code)
        self.assertEqual(self.registration("kop_tt_fu::traced").generations, 2)

    def test_export_keeps_a_dynamic_batch_while_the_row_length_grows(self):
        # The Meta kernel guards only the sizes the broken requirement reads (the row length), never the batch.
        op = ko.custom_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                              op_name="kop_tt_fu::exported", archs=["sm_90"])

        class M(torch.nn.Module):
            def forward(self, x):
                return op(x) * 3
        batch = torch.export.Dim("batch")
        ep = torch.export.export(M(), (meta_tensor(6, 512),), dynamic_shapes={"x": {0: batch}})
        self.assertIn("kop_tt_fu.exported", str(ep.graph))
        self.assertEqual(self.registration("kop_tt_fu::exported").generations, 2)
        self.assertEqual(tuple(ep.module()(meta_tensor(13, 512)).shape), (13, 512))

    def test_concurrent_first_calls_record_a_class_once(self):
        import threading
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                             op_name="kop_tt_fu::threads")
        op = r.register(["sm_90"])
        shapes, errors = [], []

        def call(n):
            try:
                shapes.append(tuple(op(meta_tensor(3, n)).shape))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=call, args=(n,)) for n in (128, 128, 256, 128, 256, 512)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(shapes), sorted([(3, 128)] * 3 + [(3, 256)] * 2 + [(3, 512)]))
        self.assertEqual((self.registration("kop_tt_fu::threads").generations, r.growth.grown), (4, 3))
        self.assertEqual(sorted({c["BLOCK"] for c in r.doc["configs"]}), [64, 128, 256, 512])

    def test_two_sizes_grow_by_their_class_and_keep_the_size_class_values(self):
        r = ko.record_plugin(ko.triton(tile_of_launch, specialize={"dim(x, -1)": [8], "dim(x, 0)": [4]},
                                       first_use=True), op_name="kop_tt_fu::two")
        op = r.register(["sm_90"])
        def tactics():  # each tactic but its requirements (the classes' move from the op's to the configs')
            return [{k: v for k, v in c.items() if k != "requires"} for c in r.doc["configs"]]
        before = tactics()
        self.assertEqual(tuple(op(meta_tensor(7, 16)).shape), (7, 16))  # rows 7: the class of 8
        self.assertEqual(tactics()[:len(before)], before)  # the tactics before keep their numbers and values
        self.assertEqual(r.doc["requires"][-1], "(dim(x, 1) == 8) * (dim(x, 0) <= 4) * (dim(x, 0) > 2) + "
                         "(dim(x, 1) == 16) * (dim(x, 0) <= 8) * (dim(x, 0) > 4) != 0")
        self.assertEqual(tuple(op(meta_tensor(3, 16)).shape), (3, 16))  # (16, 4): a class of its own
        self.assertEqual([(c["ROW"], c["ROWS"]) for c in r.doc["configs"][::3]], [(8, 4), (16, 8), (16, 4)])
        self.assertEqual([c["size_class"] for c in r.doc["configs"][::3]], [0, 1, 2])

    def test_the_backward_grows_on_its_own_calls(self):
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True), op_name="kop_tt_fu::bwd",
                             backward=ko.Backward(["x"], ko.triton(double_rows_backward)))
        op = r.register(["sm_90"])
        x = torch.empty(3, 32, device="meta", requires_grad=True)
        y = op(x)
        (g,) = torch.autograd.grad(y, (x,), torch.empty(3, 32, device="meta"))
        self.assertEqual(tuple(g.shape), (3, 32))
        self.assertEqual(self.registration("kop_tt_fu::bwd").generations, 2)
        self.assertEqual(self.registration("kop_tt_fu::bwd_backward").generations, 2)
        r.register(["sm_90"])  # registered again: the grown registration, as it is
        self.assertEqual(self.registration("kop_tt_fu::bwd").generations, 2)
        # The backward grew after the forward: the forward's spec embeds it as it is now.
        self.assertIn("(dim(grad_Y, 1) == 64) + (dim(grad_Y, 1) == 32) != 0", r.full_doc()["backward"]["requires"])
        r.check(["sm_90"])
        with tempfile.TemporaryDirectory() as d:
            path = r.build_package(os.path.join(d, "op.kop"), ["sm_90"])
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                x = torch.empty(5, 32, device="meta", requires_grad=True)
                (g,) = torch.autograd.grad(op(x), (x,), torch.empty(5, 32, device="meta"))
                print(tuple(g.shape))
                """)
        self.assertIn("(5, 32)", out)
        forward = self.registration("kop_tt_fu::bwd")
        self.assertTrue(forward.has_miss_handler)
        ko._kernelop_torch.unregister("kop_tt_fu::bwd")  # its handler (which holds it) goes with it
        self.assertFalse(forward.has_miss_handler)

    def test_a_pinned_tactic_stays_pinned(self):
        op = ko.custom_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                              op_name="kop_tt_fu::pinned", archs=["sm_90"])
        reg = self.registration("kop_tt_fu::pinned")
        reg.pin_tactic(1)
        op(meta_tensor(2, 128))
        self.assertEqual((reg.generations, reg.pinned_tactic), (2, 1))

    def test_a_registration_grows_only_by_the_same_op(self):
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                             op_name="kop_tt_fu::same")
        r.register(["sm_90"])
        reg = self.registration("kop_tt_fu::same")
        other = ko.record_plugin(ko.triton(scale_mul_launch), op_name="kop_tt_fu::same")
        expect_error(self, ValueError, "op kop_tt_fu::same: a registration grows only by the same op with more "
                     "tactics, and the op given differs: its schema is", reg.grow, json.dumps(other.doc),
                     other.compile(["sm_90"]))
        expect_error(self, ValueError, "op kop_tt_fu::same already has a miss handler", reg.on_miss,
                     lambda *a: None)
        self.assertEqual(reg.generations, 1)
        op = ko._ops._op_object("kop_tt_fu::same")
        op(meta_tensor(2, 128))  # 6 tactics now; the op it was registered with has 3
        first = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64]), op_name="kop_tt_fu::same")
        expect_error(self, ValueError, "the op given differs: it has 3 tactics, fewer than the 6 it has now",
                     reg.grow, json.dumps(first.doc), first.compile(["sm_90"]))
        self.assertEqual(reg.generations, 2)

    def test_a_package_built_after_growth_has_the_class(self):
        r = ko.record_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                             op_name="kop_tt_fu::pkg")
        op = r.register(["sm_90"])
        op(meta_tensor(2, 256))
        with tempfile.TemporaryDirectory() as d:
            path = r.build_package(os.path.join(d, "op.kop"), ["sm_90"])
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                print(tuple(op(torch.empty(3, 256, device="meta")).shape))
                try:
                    op(torch.empty(3, 128, device="meta"))
                except RuntimeError as e:
                    print("refused:", e)
                """)
        self.assertIn("(3, 256)", out)
        self.assertIn("refused: op kop_tt_fu::pkg: the inputs break the requirement '(dim(x, 1) == 64) + "
                      "(dim(x, 1) == 256) != 0'", out)
        self.assertNotIn("first use", out)



class FirstUseCuda(unittest.TestCase):
    """Note [first-use growth] on the GPU: values and gradients at sizes compiled on first use, torch.compile with
    dynamic shapes, a CUDA graph."""

    def test_values_at_sizes_compiled_on_first_use(self):
        op = ko.custom_plugin(ko.triton(double_rows_launch, specialize=[64], first_use=True),
                              op_name="kop_tt_fu::values", backward=ko.Backward(["x"], ko.triton(double_rows_backward)))
        for n in (64, 128, 32, 128, 1024):
            x = torch.randn(37, n, device="cuda", requires_grad=True)
            y = op(x)
            torch.testing.assert_close(y, x * 2)
            (g,) = torch.autograd.grad(y, (x,), torch.ones_like(y))
            torch.testing.assert_close(g, torch.full_like(x, 2))
        self.assertEqual(ko._kernelop_torch.find_registration("kop_tt_fu::values").generations, 4)
        compiled = torch.compile(lambda x: op(x) + 1, dynamic=True)
        x = torch.randn(5, 512, device="cuda")
        torch.testing.assert_close(compiled(x), x * 2 + 1)
        x = torch.randn(9, 512, device="cuda")
        out = replay_with_new_input(op, x)  # a class compiled before the capture
        torch.testing.assert_close(out, x * 2)
        x = torch.randn(9, 2048, device="cuda")  # a class first met while capturing: refused, saying why
        expect_error(self, RuntimeError, "the stream is capturing a CUDA graph", replay_with_new_input, op, x)
        torch.testing.assert_close(op(x), x * 2)  # and compiled on its first call outside one

if __name__ == "__main__":
    run_tests(cpu=[CustomOpBodies, Recording, RecordedBackward, WrittenInputs, InitialisedOutputsPackaged, RankFree,
                   SizeClasses, SizeClassesDiffering, FirstUse,
                   SeveralLaunches, Refusals, Compilation, Registration], gpu=[Cuda, FirstUseCuda], cuda=CUDA)
