"""cuTile launches of views: a flat view of an output, a transposed input, a slice (refused)."""

import cuda.tile as ct
import torch

from cutile_test_kernels import add_one_kernel


@ct.kernel
def copy2d_kernel(src, dst, TILE: ct.Constant[int]):
    t = ct.load(src, index=(ct.bid(0), 0), shape=(1, TILE))
    ct.store(dst, index=(ct.bid(0), 0), tile=t)


def flat_view(x: torch.Tensor) -> torch.Tensor:
    """x + 1, the kernel adding one in place over a flat view of a copy of x."""
    out = x.clone()
    o = out.view(-1)
    ct.launch(torch.cuda.current_stream(), (ct.cdiv(x.numel(), 256),), add_one_kernel, (o, 256))
    return out


def transposed(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[1], x.shape[0], device=x.device)
    ct.launch(torch.cuda.current_stream(), (x.shape[1],), copy2d_kernel, (x.t(), out, 256))
    return out


def sliced(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0] - 1, x.shape[1], device=x.device)
    ct.launch(torch.cuda.current_stream(), (x.shape[0] - 1,), copy2d_kernel, (x[1:], out, 256))
    return out
