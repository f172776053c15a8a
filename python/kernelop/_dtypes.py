"""The one table of tensor element types on the Python side: kernelop's names (PyTorch's without "torch.", the C++
DType table's, in its order: include/kernelop/dtype.hpp) and each DSL front end's column."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    name: str  # "float32": the spec's name, torch.<name>
    triton: Optional[str]  # Triton's signature type ("fp32"); None: kernelop passes it to no Triton kernel
    cutedsl: bool  # whether kernelop passes it to CuTe DSL kernels
    traced: bool  # given to tensors of undeclared dtype when a meta function is traced (_symbolic.trace_meta)

    @property
    def torch(self) -> "torch.dtype":
        import torch
        return getattr(torch, self.name)


DTYPES: Tuple[DType, ...] = (
    DType("float32", "fp32", True, True),
    DType("float16", "fp16", True, True),
    DType("bfloat16", "bf16", True, True),
    DType("float64", "fp64", True, True),
    DType("float8_e4m3fn", None, False, False),
    DType("float8_e5m2", None, False, False),
    DType("int8", "i8", True, True),
    DType("uint8", "u8", True, True),
    DType("int16", "i16", True, True),
    DType("int32", "i32", True, True),
    DType("int64", "i64", True, True),
    DType("bool", "i1", False, False),
)


@functools.lru_cache(maxsize=None)
def by_torch() -> Dict["torch.dtype", DType]:
    """torch.float32 -> its row."""
    return {d.torch: d for d in DTYPES}
