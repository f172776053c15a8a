"""cuTile kernels and launches test_cutile records: ones kernelop takes (a kernel writing its input in place) and
ones it refuses. In a module of their own: cuTile reads a kernel's source from its file."""

from typing import Annotated

import cuda.tile as ct
import torch


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
