"""cuTile kernels as kernelop ops (docs/cutile.md): each launch_fn is written as cuTile's documentation writes a launch,
``ct.launch(torch.cuda.current_stream(), grid, kernel, args)``, and kernelop records it on fake tensors (no GPU needed),
compiles CUBINs with cuTile's ahead-of-time export, and runs them from C++ with neither Python nor cuTile.

Written for kernelop (not taken from another project): a vector add with a scale, a row softmax and a tiled matmul.
"""

from __future__ import annotations

import cuda.tile as ct
import torch


# -- vector add: out = a * alpha + b, one tile of TILE elements per block --------------------------------------------

@ct.kernel
def scaled_add_kernel(a, b, out, alpha: float, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=x * alpha + y)


def scaled_add(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(a)
    tile = 1024
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(a.numel(), tile),), scaled_add_kernel, (a, b, out, alpha, tile))
    return out


# -- row softmax: one row per block, the row in one tile (TILE >= the row's length: each config requires it) --------

@ct.kernel
def softmax_kernel(x, y, TILE: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TILE), padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
    t = t - ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t)
    ct.store(y, index=(row, 0), tile=(e / ct.sum(e, axis=1, keepdims=True)).astype(y.dtype))


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.shape[1] <= MAX_ROW, f"rows of at most {MAX_ROW} elements"
    y = torch.empty_like(x)
    ct.launch(torch.cuda.current_stream(), (x.shape[0],), softmax_kernel, (x, y, MAX_ROW))
    return y


MAX_ROW = 4096
# A tile covers the whole row: a config with a smaller tile runs only rows it covers.
SOFTMAX_CONFIGS = [{"TILE": t, "requires": [f"dim(x, 1) <= {t}"]} for t in (256, 1024, 4096)]


# -- tiled matmul: c = a @ b, a tile of BM x BN per block, K walked in BK steps --------------------------------------

@ct.kernel
def matmul_kernel(a, b, c, BM: ct.Constant[int], BN: ct.Constant[int], BK: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, bn), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=acc.astype(c.dtype))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    bm, bn, bk = 64, 64, 32
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(a.shape[0], bm), ct.cdiv(b.shape[1], bn)), matmul_kernel,
              (a, b, c, bm, bn, bk))
    return c


# -- the ops ---------------------------------------------------------------------------------------------------------

def examples():
    """launch_fn -> the example inputs it is recorded with (each op's ranks and dtypes)."""
    return {
        scaled_add: {"a": torch.empty(5000, device="meta"), "b": torch.empty(5000, device="meta")},
        softmax: {"x": torch.empty(64, 1000, device="meta")},
        matmul: {"a": torch.empty(128, 96, dtype=torch.float16, device="meta"),
                 "b": torch.empty(96, 64, dtype=torch.float16, device="meta")},
    }


def recorded(ns, archs=None):
    """The ops recorded (not yet registered): name -> kernelop.RecordedPlugin."""
    import kernelop as ko

    ex = examples()
    return {
        "scaled_add": ko.record_plugin(ko.cutile(scaled_add, arch=archs), op_name=f"{ns}::scaled_add",
                                       example_inputs=ex[scaled_add]),
        "softmax": ko.record_plugin(ko.cutile(softmax, configs=SOFTMAX_CONFIGS, arch=archs), op_name=f"{ns}::softmax",
                                    example_inputs=ex[softmax]),
        "matmul": ko.record_plugin(ko.cutile(matmul, arch=archs), op_name=f"{ns}::matmul", example_inputs=ex[matmul]),
    }


def register(ns="kop_cutile", archs=None):
    """Registers the ops; returns name -> torch.ops packet."""
    return {name: r.register() for name, r in recorded(ns, archs).items()}


if __name__ == "__main__":
    from kernelop._recording import package_main

    package_main("the cuTile examples", recorded, "kop_cutile")
