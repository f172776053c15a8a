"""The one table of tensor element types on the Python side: kernelop's names, read from the extension (the C++ DType
table's, in its order: include/kernelop/dtype.hpp), and each DSL front end's column."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

from . import _kernelop

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    name: str  # "float32": the spec's name, torch.<name>
    triton: Optional[str]  # Triton's signature type ("fp32"); None: kernelop passes it to no Triton kernel
    cutedsl: bool  # whether kernelop passes it to CuTe DSL kernels
    cutile: Optional[str]  # cuTile's dtype (cuda.tile.<name>); None: kernelop passes it to no cuTile kernel
    traced: bool  # given to tensors of undeclared dtype when a meta function is traced (_symbolic.trace_meta)

    @property
    def torch(self) -> "torch.dtype":
        import torch
        return getattr(torch, self.name)


# Each DSL's column, by kernelop's dtype name: (Triton type, CuTe DSL, cuTile, traced).
_COLUMNS: Dict[str, Tuple[Optional[str], bool, Optional[str], bool]] = {
    "float32": ("fp32", True, "float32", True),
    "float16": ("fp16", True, "float16", True),
    "bfloat16": ("bf16", True, "bfloat16", True),
    "float64": ("fp64", True, "float64", True),
    "float8_e4m3fn": (None, False, "float8_e4m3fn", False),
    "float8_e5m2": (None, False, "float8_e5m2", False),
    "int8": ("i8", True, "int8", True),
    "uint8": ("u8", True, "uint8", True),
    "int16": ("i16", True, "int16", True),
    "int32": ("i32", True, "int32", True),
    "int64": ("i64", True, "int64", True),
    "bool": ("i1", False, "bool_", False),
}


def _table() -> Tuple[DType, ...]:
    """The names are the extension's (the C++ DType table, in its order); a name either side lacks is a build error."""
    names = list(_kernelop.dtype_names())
    if set(names) != set(_COLUMNS):
        raise ImportError(f"kernelop: the dtype columns of kernelop._dtypes ({sorted(_COLUMNS)}) are not the C++ "
                          f"DType table's ({names}); this kernelop build is inconsistent")
    return tuple(DType(n, *_COLUMNS[n]) for n in names)


DTYPES: Tuple[DType, ...] = _table()


@functools.lru_cache(maxsize=None)
def by_torch() -> Dict["torch.dtype", DType]:
    """torch.float32 -> its row."""
    return {d.torch: d for d in DTYPES}
