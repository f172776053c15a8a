"""CuTe DSL kernels as kernelop ops (docs/cutedsl.md): each launch_fn is what a user writes to call the kernel from
PyTorch, wrapping tensors with from_dlpack and calling one @cute.jit host function.

- vector_add: c = a + b over a 2-D tensor, one thread per element; the kernel takes the tensors as they are and the
  grid is cute.ceil_div(m * n, 256).
- axpy: out = alpha * x + y, tiled on the host (cute.zipped_divide by (4, TILE_N), an identity tensor for the bounds
  check): what the kernel receives is the host's layout algebra, which kernelop reads as expressions of the sizes;
  alpha is a cutlass.Float32 and TILE_N a cutlass.Constexpr with two configs (tactics).
- add_int: out = x + k, an int scalar input and the size x.numel() passed as cutlass.Int32 arguments (the grid is
  (n + 127) // 128 of the DSL's own floor division).

``register(ns)`` registers both from C++ (no Python per call) and returns their torch.ops packets; run as a script it
writes their .kop packages (``--package DIR``), which run with neither Python nor the CuTe DSL.
"""

import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

import kernelop as ko


@cute.kernel
def vector_add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    m, n = gA.shape
    row = i // n
    col = i % n
    if row < m:
        gC[row, col] = gA[row, col] + gB[row, col]


@cute.jit
def vector_add_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    threads = 256
    m, n = mA.shape
    vector_add_kernel(mA, mB, mC).launch(grid=(cute.ceil_div(m * n, threads), 1, 1), block=(threads, 1, 1))


def vector_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty_like(a)
    vector_add_host(from_dlpack(a), from_dlpack(b), from_dlpack(c))
    return c


@cute.kernel
def axpy_kernel(gX: cute.Tensor, gY: cute.Tensor, gOut: cute.Tensor, cX: cute.Tensor, shape: cute.Shape,
                alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile = (None, bidx)  # this block's tile; one element per thread
    x, y, out, coord = gX[tile], gY[tile], gOut[tile], cX[tile]
    if cute.elem_less(coord[tidx], shape):
        out[tidx] = alpha * x[tidx] + y[tidx]


@cute.jit
def axpy_host(mX: cute.Tensor, mY: cute.Tensor, mOut: cute.Tensor, alpha: cutlass.Float32,
              TILE_N: cutlass.Constexpr = 64):
    tiler = (4, TILE_N)
    gX = cute.zipped_divide(mX, tiler)  # ((4, TILE_N), (tiles along m, tiles along n))
    gY = cute.zipped_divide(mY, tiler)
    gOut = cute.zipped_divide(mOut, tiler)
    cX = cute.zipped_divide(cute.make_identity_tensor(mX.shape), tiler)
    axpy_kernel(gX, gY, gOut, cX, mX.shape, alpha).launch(grid=[cute.size(gX, mode=[1]), 1, 1],
                                                          block=[cute.size(tiler), 1, 1])


def axpy(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    axpy_host(from_dlpack(x), from_dlpack(y), from_dlpack(out), alpha)
    return out


AXPY_CONFIGS = [{"TILE_N": 32}, {"TILE_N": 64}]


@cute.kernel
def add_int_kernel(gX: cute.Tensor, gOut: cute.Tensor, k: cutlass.Int32, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 128 + tidx
    if i < n:
        gOut[i] = gX[i] + cutlass.Float32(k)


@cute.jit
def add_int_host(mX: cute.Tensor, mOut: cute.Tensor, k: cutlass.Int32, n: cutlass.Int32):
    add_int_kernel(mX, mOut, k, n).launch(grid=((n + 127) // 128, 1, 1), block=(128, 1, 1))


def add_int(x: torch.Tensor, k: int) -> torch.Tensor:
    """out = x + k: an int scalar input and a size (numel) as cutlass.Int32 arguments."""
    out = torch.empty_like(x)
    add_int_host(from_dlpack(x), from_dlpack(out), k, x.numel())
    return out


def add_twice(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + 2b as two launches of vector_add_host: the first writes a tensor launch_fn keeps to itself (the op's
    scratch), which the second reads (docs/triton.md, several launches)."""
    c = torch.empty_like(a)
    vector_add_host(from_dlpack(a), from_dlpack(b), from_dlpack(c))
    out = torch.empty_like(a)
    vector_add_host(from_dlpack(c), from_dlpack(b), from_dlpack(out))
    return out


def recorded(ns):
    """The ops recorded (not yet registered): name -> kernelop.RecordedPlugin."""
    return {
        "vector_add": ko.record_plugin(ko.cutedsl(vector_add), op_name=f"{ns}::vector_add"),
        "axpy": ko.record_plugin(ko.cutedsl(axpy, configs=AXPY_CONFIGS), op_name=f"{ns}::axpy"),
        "add_int": ko.record_plugin(ko.cutedsl(add_int), op_name=f"{ns}::add_int"),
        "add_twice": ko.record_plugin(ko.cutedsl(add_twice), op_name=f"{ns}::add_twice"),
    }


def register(ns="kop_cutedsl", archs=None):
    """Registers the ops; returns name -> torch.ops packet."""
    return {name: r.register(archs) for name, r in recorded(ns).items()}


if __name__ == "__main__":
    from kernelop._recording import package_main

    package_main("the CuTe DSL examples", recorded, "kop_cutedsl")
