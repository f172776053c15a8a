"""An op of several launches, as launch_fn wrote it (Note [recorded programs]): the tensors launch_fn allocates and
passes to kernels without returning them (scratch), and the host glue between the launches, recorded as launches of
kernelop's own kernels (kernelop._glue)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch

from .._symbolic import Recorder

# Note [recorded programs]: launch_fn may launch several kernels, in order, and do light glue on the host between
# them, as library host code does (Liger-Kernel's RMSNorm backward: a kernel writes per-SM partials into a buffer it
# allocates, then `partials.sum(dim=0).to(W.dtype)` is the weight's gradient). kernelop records it as one op of
# several launches (Note [several launches], spec.hpp): the first kernel is the op's own, each later kernel a launch
# of the op's `then`, in the order launch_fn made them, on the caller's stream. A tensor launch_fn allocates, passes
# to a kernel and does not return is the op's scratch (kernelop allocates it for each call, stream-ordered, and frees
# it after the last launch; it may be initialised like an output: zeros, full, a copy of an input). The glue it
# records, each a launch of one of kernelop's own kernels, so the op runs without Python (packages, the C ABI):
#   aten.sum over one dim (keepdim or not)   -> kernelop._glue.sum_dim, with a following .to(dtype) folded in
#   aten._to_copy (x.to(dtype), x.float())    -> kernelop._glue.cast
# of a tensor a kernel or glue wrote (or an input), into a returned output or more scratch. Any other aten op that
# computes on the host is refused by name; so is glue before the first kernel (an op starts with its own kernel:
# such a tensor is host work, refused where an output or a kernel gets it), an
# init of a tensor after a kernel used it (kernelop initialises before the op's first launch), and matmuls (out of
# scope: a matmul is a kernel of its own).

_ALLOCATE = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"}
_INITS = {"zeros", "zeros_like", "new_zeros", "zero_", "ones", "ones_like", "new_ones", "full", "full_like",
          "new_full", "fill_", "clone", "copy_"}
_GLUE = {"sum", "_to_copy"}
_VIEWS = {"view", "reshape", "_reshape_alias", "as_strided", "unsqueeze", "squeeze", "flatten", "alias", "expand",
          "permute", "transpose", "t", "slice", "select", "detach", "contiguous", "lift_fresh", "_unsafe_view"}


_MATMULS = {"mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "mv", "addmv", "dot", "linear", "_scaled_mm"}


def host_op(op: str) -> str:
    """An aten op in a refusal: its name, and for a matmul that matmuls are out of the glue's scope."""
    if op in _MATMULS:
        return (f"aten.{op}: matmuls are no glue kernelop records (a matmul is a kernel of its own: run it outside "
                "the op, or register it as an op of its own)")
    return f"aten.{op}"


@dataclass
class Event:
    """An aten op launch_fn ran, after `position` kernel launches."""

    position: int
    op: str
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    result: Any
    where: str


@dataclass
class GlueStep:
    """A launch of one of kernelop's glue kernels: ``y = x.sum(dim, keepdim).to(y.dtype)`` (dim set) or
    ``y = x.to(y.dtype)``, after `position` kernel launches."""

    position: int
    x: Any  # the tensors (fakes)
    y: Any
    dim: Optional[int] = None
    keepdim: bool = False
    where: str = ""


@dataclass
class Program:
    """What launch_fn made besides the outputs it returns: its scratch (in the order kernels first take it) and its
    glue steps."""

    scratch: List[Any] = field(default_factory=list)
    glue: List[GlueStep] = field(default_factory=list)


def _storage(t: Any) -> Optional[int]:
    try:
        return t.untyped_storage()._cdata if isinstance(t, torch.Tensor) else None
    except (RuntimeError, NotImplementedError):
        return None


def plan_program(where: str, rec: Recorder, events: List[Event], outputs: List[Any],
                 launch_tensors: Sequence[Dict[str, Any]]) -> Program:
    """The scratch and glue of launch_fn's launches (Note [recorded programs]); refuses host work kernelop does not
    record, naming the aten op and the line."""
    known: Dict[int, Any] = {}  # storage -> tensor (inputs, returned outputs, scratch, glue results)
    for t in rec.tensors:
        known[_storage(t.fake)] = t.fake  # type: ignore[index]
    for o in outputs:
        known[_storage(o)] = o  # type: ignore[index]
    made_by: Dict[int, Event] = {}  # storage -> the event that made it (a new tensor)
    for e in events:
        s = _storage(e.result)
        if s is not None and s not in made_by and e.op not in _VIEWS:
            made_by[s] = e
    program = Program()
    glue_results: Set[int] = set()
    folded: Set[int] = set()  # events folded into a sum (its .to(dtype))
    for i, e in enumerate(events):
        if e.op not in _GLUE or id(e) in folded:
            continue
        if not e.args or _storage(e.args[0]) is None:
            continue
        x = e.args[0]
        if e.position == 0:  # before the op's first kernel: host work, refused where its result is used
            continue
        step = GlueStep(e.position, x, e.result, where=e.where)
        if e.op == "sum":
            dims = e.args[1] if len(e.args) > 1 else e.kwargs.get("dim")
            dims = [dims] if isinstance(dims, int) else list(dims or [])
            if len(dims) != 1 or e.kwargs.get("dtype") is not None or (len(e.args) > 3 and e.args[3] is not None):
                raise ValueError(f"{where}: launch_fn sums over {'every dim' if not dims else f'dims {dims}'} on the "
                                 f"host (aten.sum at {e.where}); kernelop's glue sums over one dim "
                                 "(x.sum(dim=d), keepdim or not), with a .to(dtype) after it")
            step.dim = int(dims[0]) % max(x.dim(), 1)
            step.keepdim = bool(e.args[2] if len(e.args) > 2 else e.kwargs.get("keepdim", False))
            # A .to(dtype) of the sum and nothing else: one launch.
            later = [f for f in events[i + 1:] if any(_storage(a) == _storage(e.result) for a in f.args)]
            if len(later) == 1 and later[0].op == "_to_copy" and later[0].args[0] is e.result:
                folded.add(id(later[0]))
                step.y = later[0].result
        elif e.kwargs.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format) or \
                e.kwargs.get("device") not in (None, x.device):
            raise ValueError(f"{where}: launch_fn copies a tensor to another device or layout on the host "
                             f"(aten._to_copy at {e.where}); kernelop's glue converts dtypes only (x.to(dtype))")
        program.glue.append(step)
        glue_results.add(_storage(step.y))  # type: ignore[arg-type]
        known.setdefault(_storage(step.y), step.y)  # type: ignore[arg-type]
    # Scratch: what kernels and glue take that is none of the inputs and outputs, allocated by launch_fn.
    taken: List[Any] = [t for tensors in launch_tensors for t in tensors.values()]
    taken += [s.x for s in program.glue] + [s.y for s in program.glue]
    outs = {_storage(o) for o in outputs} | {_storage(t.fake) for t in rec.tensors}
    for t in taken:
        s = _storage(t)
        if s in outs or any(_storage(x) == s for x in program.scratch):
            continue
        made = made_by.get(s)  # type: ignore[arg-type]
        if made is None or not (made.op in _ALLOCATE or made.op in _INITS or s in glue_results):
            what = f"{host_op(made.op)}, at {made.where}" if made is not None else "host code kernelop did not see"
            raise ValueError(f"{where}: a kernel is given a tensor computed on the host ({what}); kernelop records "
                             "what kernels compute, scratch launch_fn allocates (torch.empty, zeros, full) and its "
                             "glue (a sum over one dim, .to(dtype)); compute it in a kernel")
        if not t.is_contiguous() or t.storage_offset() != 0:
            raise ValueError(f"{where}: scratch passed to a kernel is a view at an offset or not contiguous; "
                             "kernelop allocates scratch contiguous and passes its own data pointer")
        base = made.result if isinstance(made.result, torch.Tensor) else t
        program.scratch.append(base if tuple(base.shape) == tuple(t.shape) else t)
    _check_inits(where, events, launch_tensors, program, outputs)
    return program


def _check_inits(where: str, events: List[Event], launch_tensors: Sequence[Dict[str, Any]], program: Program,
                 outputs: List[Any]) -> None:
    """An init kernelop does before the op's first launch must come before every launch that uses the tensor."""
    first_use: Dict[int, int] = {}
    for k, tensors in enumerate(launch_tensors):
        for t in tensors.values():
            first_use.setdefault(_storage(t), k)  # type: ignore[arg-type]
    for step in program.glue:
        for t in (step.x, step.y):
            s = _storage(t)
            if s is not None and first_use.get(s, step.position) >= step.position:
                first_use[s] = step.position - 1  # glue after launch position-1 uses it
    for e in events:
        if e.op not in _INITS:
            continue
        target = e.args[0] if e.op in ("zero_", "fill_", "copy_") and e.args else e.result
        s = _storage(target)
        if s is not None and s in first_use and first_use[s] < e.position:
            raise ValueError(f"{where}: launch_fn sets a tensor on the host (aten.{e.op} at {e.where}) after launch "
                             f"{first_use[s]} used it; kernelop initialises outputs and scratch once, before the "
                             "op's first launch: write it in a kernel instead")


def glue_launch(step: GlueStep, names: Dict[Optional[int], str]) -> Dict[str, Any]:
    """A glue step as a `then` entry: kernelop._glue's spec, its x and y renamed to the op's tensors."""
    from .. import _glue
    from .._spec import Launch
    x, y = names[_storage(step.x)], names[_storage(step.y)]
    if step.dim is not None:
        spec = _glue.sum_dim(step.dim, step.x.dim(), step.x.dtype, step.y.dtype, step.keepdim)
    else:
        spec = _glue.cast(step.x.dtype, step.y.dtype)
    return Launch(spec, from_={"x": x, "y": y})._json()


def storage_of(t: Any) -> Optional[int]:
    return _storage(t)


__all__ = ["Event", "GlueStep", "Program", "glue_launch", "host_op", "plan_program", "storage_of"]
