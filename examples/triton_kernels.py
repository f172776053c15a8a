"""Triton kernels as kernelop ops (docs/triton.md): each launch_fn is what a torch.library.custom_op would have held.

- elementwise_scale_mul: the reference's own example (seed 003), exactly in its form: Z = X * Y * a + b, scalars with
  defaults, grid from meta["BLOCK_SIZE"], two configs.
- vector_add: Triton's tutorial kernel (masked), four configs of BLOCK_SIZE and num_warps.
- softmax: a row softmax for any row length (an online max/sum pass over BLOCK_SIZE columns, then a write pass),
  whose row stride is an int argument; three configs.

``register(ns)`` registers all three from C++ (no Python per call) and returns their torch.ops packets.
"""

import torch
import triton
import triton.language as tl

import kernelop as ko


@triton.jit
def elementwise_scale_mul_kernel(X, Y, Z, a, b, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    # Compute the range of elements that this thread block will work on
    block_start = pid * BLOCK_SIZE
    # Range of indices this thread will handle
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # Load elements from the X and Y tensors
    x_vals = tl.load(X + offsets)
    y_vals = tl.load(Y + offsets)
    # Perform the element-wise multiplication
    z_vals = x_vals * y_vals * a + b
    # Store the result in Z
    tl.store(Z + offsets, z_vals)


def elementwise_scale_mul(X: torch.Tensor, Y: torch.Tensor, b: float = 0.2, a: int = 2) -> torch.Tensor:
    assert X.is_cuda and Y.is_cuda, "Tensors must be on CUDA device."
    assert X.shape == Y.shape, "Tensors must have the same shape."
    Z = torch.empty_like(X)
    BLOCK_SIZE = 1024
    grid = lambda meta: (X.numel() // meta["BLOCK_SIZE"],)  # noqa: E731 (the seed's form)
    elementwise_scale_mul_kernel[grid](X, Y, Z, a, b, BLOCK_SIZE=BLOCK_SIZE)
    return Z


def elementwise_scale_mul_meta(x: torch.Tensor, y: torch.Tensor, b: float = 0.2, a: int = 2) -> torch.Tensor:
    # Elementwise: the output has the shape and dtype of the first input.
    return x


ELEMENTWISE_SCALE_MUL_CONFIGS = [{"BLOCK_SIZE": 256}, {"BLOCK_SIZE": 1024}]


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    assert x.shape == y.shape
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


VECTOR_ADD_CONFIGS = [{"BLOCK_SIZE": 256, "num_warps": 2}, {"BLOCK_SIZE": 1024, "num_warps": 4},
                      {"BLOCK_SIZE": 2048, "num_warps": 8}, {"BLOCK_SIZE": 4096, "num_warps": 8}]


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_in = in_ptr + row.to(tl.int64) * row_stride
    row_out = out_ptr + row.to(tl.int64) * row_stride
    m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_in + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        s = s * tl.exp(m - new_m) + tl.exp(x - new_m)
        s = tl.where(new_m == float("-inf"), 0.0, s)
        m = new_m
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_in + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(row_out + cols, tl.exp(x - row_max) / total, mask=cols < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    # One program per row, whatever BLOCK_SIZE: the grid ignores meta (a lambda says so, for every config).
    softmax_kernel[lambda meta: (n_rows,)](y, x, x.stride(0), n_cols, BLOCK_SIZE=1024, num_warps=4)
    return y


SOFTMAX_CONFIGS = [{"BLOCK_SIZE": 256, "num_warps": 2}, {"BLOCK_SIZE": 1024, "num_warps": 4},
                   {"BLOCK_SIZE": 4096, "num_warps": 8}]


def recorded(ns):
    """The three ops recorded (not yet registered): name -> kernelop.RecordedPlugin."""
    return {
        "elementwise_scale_mul": ko.record_plugin(
            ko.triton(elementwise_scale_mul, configs=ELEMENTWISE_SCALE_MUL_CONFIGS),
            op_name=f"{ns}::elementwise_scale_mul", meta_impl=elementwise_scale_mul_meta),
        "vector_add": ko.record_plugin(ko.triton(vector_add, configs=VECTOR_ADD_CONFIGS), op_name=f"{ns}::vector_add"),
        "softmax": ko.record_plugin(ko.triton(softmax, configs=SOFTMAX_CONFIGS), op_name=f"{ns}::softmax"),
    }


def register(ns="kop_triton", archs=None):
    """Registers the three ops; returns name -> torch.ops packet."""
    return {name: r.register(archs) for name, r in recorded(ns).items()}


if __name__ == "__main__":
    from kernelop._recording import package_main

    package_main("the Triton examples", recorded, "kop_triton")
