"""Every example kernel (examples/*.json) as a PyTorch operator: registration from the spec files,
sample inputs, a reference written with aten ops, and a model that mixes all of them with aten
ops. Shared by the Python tests, the AOTInductor example and anyone who wants to try the ops.
"""

import glob
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

import kernelop as ko

EXAMPLES = os.path.dirname(os.path.abspath(__file__))
NAMES = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(EXAMPLES, "*.json")))
WIDTH = 64  # the feature width of the sample inputs and of AllOps


def spec_file(name: str) -> str:
    return os.path.join(EXAMPLES, f"{name}.json")


def register(archs: Optional[Sequence[str]] = None) -> Dict[str, object]:
    """Registers every example as torch.ops.kernelop_examples.<name>; returns the packets."""
    return {name: ko.register_spec_file(spec_file(name), archs=archs) for name in NAMES}


def _scatter_reference(cache, index, values):
    out = cache.clone()
    for row, dst in enumerate(index.tolist()):
        if 0 <= dst < cache.shape[0]:
            out[dst] = values[row]
    return out


def cases(batch: int, device="cuda") -> Dict[str, Tuple[Tuple, Callable]]:
    """Per example: its arguments for a batch of `batch` rows, and a reference computing what it
    returns (for cache_scatter, the cache it writes)."""
    g = torch.Generator(device="cpu").manual_seed(batch)
    x = torch.randn(batch, WIDTH, generator=g).to(device)
    other = torch.randn(batch, WIDTH, generator=g).to(device)
    bias = torch.randn(WIDTH, generator=g).to(device)
    cache = torch.randn(16, WIDTH, generator=g).to(device)
    # Rows -1 and 99 are out of the cache's range: the kernel skips them, as the reference does.
    index = torch.tensor([3, 0, 15, 7, -1, 99][:min(6, batch)], dtype=torch.int64, device=device)
    values = torch.randn(index.numel(), WIDTH, generator=g).to(device)
    weight = torch.randn(WIDTH, 24, generator=g).to(device)
    return {
        "add": ((x, other), lambda a, b: a + b),
        "bias_add_2d": ((x.view(batch, 4, WIDTH // 4).transpose(0, 1).contiguous(), bias[:WIDTH // 4]),
                        lambda a, b: a + b),
        "cache_scatter": ((cache, index, values), _scatter_reference),
        "colsum": ((x,), lambda a: a.sum(0)),
        "relu": ((x,), torch.relu),
        "relu_generic": ((x.half(),), torch.relu),
        "repeat2": ((x,), lambda a: torch.cat([a, a], 1)),
        "rowsum": ((x,), lambda a: a.sum(-1)),
        "rowsum_keepdim": ((x,), lambda a: a.sum(-1, keepdim=True)),
        "cluster_rowsum": ((x,), lambda a: a.sum(-1)),  # a thread-block cluster launch (sm_90 or later)
        "scale": ((x, 1.5), lambda a, s: a * s),
        "sigmoid": ((x,), torch.sigmoid),
        "sin_cos": ((x,), lambda a: (torch.sin(a), torch.cos(a))),
        "softmax": ((x,), lambda a: torch.softmax(a, -1)),
        "softmax_tuned": ((x,), lambda a: torch.softmax(a, -1)),
        "gemm_tiled": ((x, weight), lambda a, b: a @ b),
    }


class AllOps(torch.nn.Module):
    """Every example op, mixed with aten ops: [B, WIDTH] -> [1, 2 * WIDTH] (B >= 4)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("bias", torch.randn(WIDTH, generator=g))
        self.register_buffer("cache", torch.randn(16, WIDTH, generator=g))
        self.register_buffer("index", torch.tensor([3, 0, 15, 7], dtype=torch.int64))
        self.register_buffer("weight", torch.randn(WIDTH, WIDTH, generator=g) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ex = torch.ops.kernelop_examples
        h = ex.relu(x * 2.0 - 1.0)
        h = ex.add(ex.sigmoid(h), ex.scale(x, 0.5))
        h = ex.bias_add_2d(h, self.bias)
        s, c = ex.sin_cos(h)
        h = ex.softmax(s - c) + ex.relu_generic(x.half()).float()
        h = ex.softmax_tuned(ex.gemm_tiled(h, self.weight))
        r = ex.repeat2(h)
        k = ex.rowsum_keepdim(r) + ex.rowsum(r).unsqueeze(-1) + ex.cluster_rowsum(r).unsqueeze(-1)
        cache = self.cache.clone()
        ex.cache_scatter(cache, self.index, h[:4])
        summary = ex.colsum(cache).unsqueeze(0)
        return (r * torch.sigmoid(k)).mean(0, keepdim=True) + torch.cat([summary, summary], -1)


def reference_all_ops(module: AllOps, x: torch.Tensor) -> torch.Tensor:
    """AllOps written with aten ops only."""
    h = torch.relu(x * 2.0 - 1.0)
    h = torch.sigmoid(h) + x * 0.5
    h = h + module.bias
    h = torch.softmax(torch.sin(h) - torch.cos(h), -1) + torch.relu(x.half()).float()
    h = torch.softmax(h @ module.weight, -1)
    r = torch.cat([h, h], 1)
    k = r.sum(-1, keepdim=True) * 3
    cache = _scatter_reference(module.cache, module.index, h[:4])
    summary = cache.sum(0, keepdim=True)
    return (r * torch.sigmoid(k)).mean(0, keepdim=True) + torch.cat([summary, summary], -1)


def outputs_of(result) -> List[torch.Tensor]:
    """An op's result as a list of tensors (an op with no outputs returns None)."""
    if result is None:
        return []
    return list(result) if isinstance(result, (tuple, list)) else [result]
