"""cuTile kernels and launches test_cutile records: ones kernelop takes (a kernel writing its input in place) and
ones it refuses. In a module of their own: cuTile reads a kernel's source from its file."""

from typing import Annotated

import cuda.tile as ct
import torch
from cuda.tile import launch as launch_imported_by_name


@ct.kernel
def add_one_kernel(x, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(x, index=(ct.bid(0),), tile=t + 1)


def add_one_(x: torch.Tensor) -> None:
    """x += 1 in place: the op mutates x (Tensor(a!))."""
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.numel(), 256),), add_one_kernel, (x, 256))


@ct.kernel
def copy_count_kernel(src, dst, counter, TILE: ct.Constant[int]):
    t = ct.load(src, index=(ct.bid(0),), shape=(TILE,))
    ct.store(dst, index=(ct.bid(0),), tile=t)
    ct.atomic_add(counter, (0,), 1)


def copy_count(src: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    """dst = src, and counter[0] += the number of blocks: an atomic writes an input."""
    dst = torch.empty_like(src)
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(src.numel(), 128),), copy_count_kernel, (src, dst, counter, 128))
    return dst


@ct.kernel
def fill_kernel(out, value, n, TILE: ct.Constant[int]):
    idx = ct.bid(0) * TILE + ct.arange(TILE, dtype=ct.int32)
    ct.scatter(out, idx, ct.full((TILE,), value, dtype=ct.float32))


def fill(x: torch.Tensor, value: float, n: int) -> torch.Tensor:
    """out = value, shaped like x; n: an int scalar input passed to the kernel."""
    out = torch.empty_like(x)
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.numel(), 128),), fill_kernel, (out, value, n, 128))
    return out


def on_the_default_stream(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    ct.launch(0, (1,), add_one_kernel, (out, 256))
    return out


def launches_twice(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    ct.launch(torch.cuda.current_stream(), (1,), add_one_kernel, (out, 256))
    ct.launch(torch.cuda.current_stream(), (1,), add_one_kernel, (out, 256))
    return out


def launches_nothing(a: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(a)


def not_a_kernel(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    ct.launch(torch.cuda.current_stream(), (1,), launches_nothing, (out, 256))
    return out


def constant_from_a_size(a: torch.Tensor) -> torch.Tensor:
    ct.launch(torch.cuda.current_stream(), (1,), add_one_kernel, (a, a.shape[0]))
    return a


def wrong_arity(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    ct.launch(torch.cuda.current_stream(), (1,), add_one_kernel, (out,))
    return out


def grid_of_a_float(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    ct.launch(torch.cuda.current_stream(), (1.5,), add_one_kernel, (out, 256))
    return out


@ct.kernel
def flag_kernel(x, flag, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(x, index=(ct.bid(0),), tile=t)


def bool_argument(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    ct.launch(torch.cuda.current_stream(), (1,), flag_kernel, (out, True, 256))
    return out


@ct.kernel
def static_kernel(x: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(0,))], TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(x, index=(ct.bid(0),), tile=t)


def static_shape(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    ct.launch(torch.cuda.current_stream(), (1,), static_kernel, (out, 256))
    return out


@ct.kernel(num_ctas=2)
def cluster_kernel(x, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(x, index=(ct.bid(0),), tile=t)


def clustered(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    ct.launch(torch.cuda.current_stream(), (1,), cluster_kernel, (out, 256))
    return out


def huge_int(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    ct.launch(torch.cuda.current_stream(), (1,), fill_kernel, (out, 1.0, 2 ** 40, 128))
    return out


# -- writes kernelop must find in the Tile IR ------------------------------------------------------------------------

@ct.kernel
def store_to_chosen_kernel(x, y, out, n, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    if n > 0:
        dst = out
    else:
        dst = y
    ct.store(dst, index=(ct.bid(0),), tile=t)


def store_to_chosen(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
    """out or y, by n: both may be written (if/else yields)."""
    out = torch.empty_like(x)
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.numel(), 128),), store_to_chosen_kernel, (x, y, out, n, 128))
    return out


@ct.kernel
def ping_pong_kernel(x, y, n, TILE: ct.Constant[int]):
    a = x
    b = y
    for i in range(n):
        t = ct.load(a, index=(0,), shape=(TILE,))
        ct.store(b, index=(0,), tile=t)
        a, b = b, a


def ping_pong(x: torch.Tensor, y: torch.Tensor, n: int) -> None:
    """Copies x to y and back, n times: both written (loop-carried pointers)."""
    ct.launch(torch.cuda.current_stream(), (1,), ping_pong_kernel, (x, y, n, 128))


@ct.kernel
def chosen_in_a_loop_kernel(x, y, n, TILE: ct.Constant[int]):
    a = x
    for i in range(n):
        if ct.bid(0) == i:
            a = y
            break
    ct.store(a, index=(0,), tile=ct.zeros((TILE,), dtype=ct.float32))


def chosen_in_a_loop(x: torch.Tensor, y: torch.Tensor, n: int) -> None:
    """Zeroes x, or y when the loop breaks at this block: both written (a break inside an if)."""
    ct.launch(torch.cuda.current_stream(), (1,), chosen_in_a_loop_kernel, (x, y, n, 128))


@ct.kernel
def sum_then_swap_kernel(x, y, n, TILE: ct.Constant[int]):
    a = x
    for i in range(n):
        t = ct.load(x, index=(0,), shape=(TILE,))
        ct.store(a, index=(0,), tile=t + ct.sum(t))
        a = y


def sum_then_swap(x: torch.Tensor, y: torch.Tensor, n: int) -> None:
    """Writes x, then y: both written (a reduction's region inside the loop)."""
    ct.launch(torch.cuda.current_stream(), (1,), sum_then_swap_kernel, (x, y, n, 128))


@ct.kernel
def while_swap_kernel(x, y, n, TILE: ct.Constant[int]):
    a = x
    i = 0
    while i < n:
        ct.store(a, index=(0,), tile=ct.zeros((TILE,), dtype=ct.float32))
        a = y
        i += 1


def while_swap(x: torch.Tensor, y: torch.Tensor, n: int) -> None:
    """Zeroes x, then y: both written (a while loop's carried values), and nothing else taken as written."""
    ct.launch(torch.cuda.current_stream(), (1,), while_swap_kernel, (x, y, n, 128))


@ct.kernel
def reduce_into_kernel(x, acc, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    acc.tiled_view(TILE).atomic_store_add(0, t)


def reduce_into(x: torch.Tensor, acc: torch.Tensor) -> None:
    """acc[:128] += each block's tile of x: an atomic reduction through a view writes acc."""
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.numel(), 128),), reduce_into_kernel, (x, acc, 128))


@ct.kernel
def scatter_kernel(x, idx, out, TILE: ct.Constant[int]):
    i = ct.load(idx, index=(ct.bid(0),), shape=(TILE,))
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.scatter(out, i, t)


def scatter(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """out[idx] = x: out written through indices loaded from idx, which is only read."""
    out = torch.zeros_like(x)
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.numel(), 128),), scatter_kernel, (x, idx, out, 128))
    return out


def rank0(a: torch.Tensor) -> None:
    ct.launch(torch.cuda.current_stream(), (1,), add_one_kernel, (a, 256))


def reads_the_stream(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    handle = torch.cuda.current_stream().cuda_stream
    ct.launch(handle, (1,), add_one_kernel, (out, 256))
    return out


# -- the ops the GPU tests run (scripts/stage-gpu packages them: the GPU machine has no cuTile) -----------------------

def recorded(ns):
    """name -> kernelop.RecordedPlugin of the kernels test_cutile's GPU tests run."""
    import kernelop as ko
    import cutile_view_kernels as vk

    def meta(*shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device="meta")

    x, idx = meta(1000), meta(1000, dtype=torch.int32)
    ops = {
        "add_one_": (add_one_, {"x": x}),
        "copy_count": (copy_count, {"src": x, "counter": meta(1, dtype=torch.int32)}),
        "store_to_chosen": (store_to_chosen, {"x": x, "y": x}),
        "ping_pong": (ping_pong, {"x": x, "y": x}),
        "reduce_into": (reduce_into, {"x": x, "acc": x}),
        "scatter": (scatter, {"x": x, "idx": idx}),
        "flat_view": (vk.flat_view, {"x": meta(64, 100)}),
        "transposed": (vk.transposed, {"x": meta(64, 100)}),
    }
    return {name: ko.record_plugin(ko.cutile(fn), op_name=f"{ns}::{name}", example_inputs=ex)
            for name, (fn, ex) in ops.items()}


def launched_by_name(a: torch.Tensor) -> torch.Tensor:
    """ct.launch imported by name when this module was imported: not the attribute kernelop intercepts."""
    out = torch.empty_like(a)
    launch_imported_by_name(torch.cuda.current_stream(), (1,), add_one_kernel, (out, 256))
    return out


if __name__ == "__main__":
    from kernelop._recording import package_main

    package_main("test_cutile's GPU ops", recorded, "kop_cutile_test")
