"""The table of kernelop's DSL front ends: one row per DSL, the one place that names them.

A row names the module of the DSL's front end in this package (it defines ``DSL``, a kernelop._recording.Dsl) and
the Python packages a recording runs through (their frames are never the user's code: _symbolic.user_location).
Nothing here imports a front end until the recorder first asks for the table, and a front end imports its DSL
(triton, cutlass, cuda.tile) only when a recording or a compilation uses it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Optional, Tuple

if TYPE_CHECKING:
    from ._recording import Dsl

TABLE: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    # (front-end module, the DSL's Python packages)
    ("_triton", ("triton",)),
    ("_cutedsl", ("cutlass", "nvidia_cutlass_dsl")),
    ("_cutile", ("cuda.tile",)),
)

PACKAGES: Tuple[str, ...] = tuple(p for _, packages in TABLE for p in packages)


def all_dsls() -> Tuple["Dsl", ...]:
    """Every DSL front end, in the table's order (each module imported on first use)."""
    return tuple(importlib.import_module(f".{module}", __package__).DSL for module, _ in TABLE)


def dsl_of(spec: Any) -> Optional["Dsl"]:
    """The front end whose spec `spec` is (kernelop.triton(...): Triton's), or None."""
    return next((d for d in all_dsls() if isinstance(spec, d.spec_type)), None)
