"""An op of several launches, as launch_fn wrote it (Note [recorded programs]): the tensors launch_fn allocates and
passes to kernels without returning them (scratch), and the host glue between the launches, recorded as launches of
kernelop's own kernels (kernelop._glue)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch

from .._symbolic import Recorder, shorten

# Note [recorded programs]: launch_fn may launch several kernels, in order, and do light glue on the host between
# them, as library host code does (Liger-Kernel's RMSNorm backward: a kernel writes per-SM partials into a buffer it
# allocates, then `partials.sum(dim=0).to(W.dtype)` is the weight's gradient). kernelop records it as one op of
# several launches (Note [several launches], spec.hpp): the first kernel is the op's own, each later kernel a launch
# of the op's `then`, in the order launch_fn made them, on the caller's stream. A tensor launch_fn allocates, passes
# to a kernel and does not return is the op's scratch (kernelop allocates it for each call, stream-ordered, and frees
# it after the last launch; it may be initialised like an output: zeros, full, a copy of an input). The glue it
# records, each a launch of one of kernelop's own kernels, so the op runs without Python (packages, the C ABI):
#   aten.sum over one dim (keepdim or not)   -> kernelop._glue.sum_dim, with a following .to(dtype) folded in
#   aten.sum over every dim (x.sum())         -> kernelop._glue.sum_all, likewise
#   (x != v).sum(), v an int or int scalar    -> kernelop._glue.count_ne, likewise (the comparison alone is no glue)
#   a / b, b of one element, a floating       -> kernelop._glue.div
#   x.clamp(min=c, max=d), constants          -> kernelop._glue.clamp (n.clamp(min=1): a count that divides)
#   aten._to_copy (x.to(dtype), x.float())    -> kernelop._glue.cast
#   x.permute(P).contiguous() (a clone)       -> kernelop._glue.permute_copy (Liger's RoPE: q.transpose(1, 2)
#                                                .contiguous(), which its kernel then writes in place)
# of a tensor a kernel or glue wrote (or an input), into a returned output or more scratch. Glue before the first
# kernel is a launch marked "before" (LaunchStep::before): it runs after the inits, before the op's own kernel
# (Liger's cross entropy backward scales the incoming gradient by a count before its kernel). Any other aten op that
# computes on the host is refused by name; so is an init of a tensor after a kernel used it (kernelop initialises
# before the op's first launch), and matmuls (out of scope: a matmul is a kernel of its own).

ALLOCATE = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"}
# Note [initialised outputs]: ops that set every element of the tensor they make or write, and what to: a constant,
# or the argument at this position (a fill value, a copy's source).
FILL = {"zeros": 0, "zeros_like": 0, "new_zeros": 0, "zero_": 0, "ones": 1, "ones_like": 1, "new_ones": 1}
FILL_ARG = {"full": 1, "full_like": 1, "new_full": 2, "fill_": 1}
COPY_ARG = {"clone": 0, "copy_": 1}
_INITS = set(FILL) | set(FILL_ARG) | set(COPY_ARG)
_GLUE = {"sum", "_to_copy", "ne", "div", "clamp", "clamp_min", "clamp_max"}
VIEWS = {"view", "reshape", "_reshape_alias", "as_strided", "unsqueeze", "squeeze", "flatten", "alias", "expand",
          "permute", "transpose", "t", "slice", "select", "detach", "contiguous", "lift_fresh", "_unsafe_view"}


# What the glue computes, in refusals (one text for every message that lists it).
GLUE_WORDS = ("a sum over one dim or every dim, a count (x != v).sum(), a division by one element, a clamp to "
              "constants, .to(dtype)")

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
    """A launch of one of kernelop's glue kernels after `position` kernel launches (0: before the op's own kernel),
    by `kind`: ``y = x.sum(dim, keepdim).to(y.dtype)`` ("sum_dim"), ``y = x.sum().to(y.dtype)`` ("sum_all"),
    ``y = (x != value).sum().to(y.dtype)`` ("count_ne"; value an int or ("scalar", name)), ``y = x / other``
    ("div"), ``y = x.clamp(*value)`` ("clamp"; value (lo, hi), None for no bound) or ``y = x.to(y.dtype)``
    ("cast") or ``y = x.permute(value).contiguous()`` ("permute_copy"); `event`: its index in launch_fn's aten
    ops."""

    position: int
    x: Any  # the tensors (fakes)
    y: Any
    kind: str = "cast"
    dim: Optional[int] = None
    keepdim: bool = False
    where: str = ""
    event: int = 0
    cast: Optional[Event] = None  # its .to(dtype) (a cast's own, or the one folded into a reduction)
    other: Any = None  # div's divisor
    value: Any = None  # count_ne's value, clamp's bounds, permute_copy's permutation


@dataclass
class Program:
    """What launch_fn made besides the outputs it returns: its scratch (in the order kernels first take it), its
    glue steps, and the copies of inputs it initialises tensors with (position, input storage, line) for the check
    against what the kernels write (copies_checked)."""

    scratch: List[Any] = field(default_factory=list)
    glue: List[GlueStep] = field(default_factory=list)
    copies: List[Tuple[int, Optional[int], str]] = field(default_factory=list)

    def strided_inputs(self, rec: Recorder, per_launch: Sequence[Tuple[Dict[str, Any], Any]]) -> Set[str]:
        """The inputs that only permuted copies read (Liger's RoPE: ``q.transpose(1, 2).contiguous()``): the op takes
        them with their strides, so an input of another layout (a transposed view) is copied once, by the glue,
        not made contiguous first. `per_launch`: each kernel's tensors."""
        other = {storage_of(t) for tensors, _ in per_launch for t in tensors.values()}
        other |= {storage_of(t) for g in self.glue if g.kind != "permute_copy" for t in (g.x, g.other, g.y)}
        other |= {source for _, source, _ in self.copies}  # an input an init copies is cloned contiguous
        copied = {storage_of(g.x) for g in self.glue if g.kind == "permute_copy"}
        return {t.name for t in rec.tensors if storage_of(t.fake) in copied - other}


def storage_of(t: Any) -> Optional[int]:
    """The storage a tensor views (its identity for the program), or None for anything else."""
    try:
        return t.untyped_storage()._cdata if isinstance(t, torch.Tensor) else None
    except (RuntimeError, NotImplementedError):
        return None


def _tensors(value: Any) -> List[Any]:
    """The tensors in an aten op's argument (lists of them too)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _touched(e: Event) -> Set[Optional[int]]:
    """The storages an aten op reads or writes."""
    return {storage_of(t) for t in _tensors(list(e.args)) + _tensors(list(e.kwargs.values()))}


def _written(e: Event) -> Set[Optional[int]]:
    """The storages an aten op writes: what it returns (an out= variant returns its out) and, in place, its self."""
    out = {storage_of(t) for t in _tensors(e.result)}
    if e.op.endswith("_") and e.args:
        out.add(storage_of(e.args[0]))
    return out


def _same_numel(a: Any, b: Any) -> bool:
    """Whether two tensors have the same number of elements, for every size (symbolic sizes compared as
    expressions, adding no condition to the recording)."""
    import sympy
    na, nb = a.numel(), b.numel()
    ea = na.node.expr if isinstance(na, torch.SymInt) else sympy.Integer(int(na))
    eb = nb.node.expr if isinstance(nb, torch.SymInt) else sympy.Integer(int(nb))
    return bool(sympy.expand(ea - eb) == 0)


def _same_shape(a: Any, b: Any) -> bool:
    return [str(d) for d in a.shape] == [str(d) for d in b.shape]


def permutation_of(view: Any) -> Optional[Tuple[Any, List[int]]]:
    """(base, perm) when `view` is ``base.permute(perm)`` of a whole contiguous tensor, perm not the identity, else
    None. Sizes and strides are compared as text (comparing symbolic sizes would add conditions to the recording);
    two dims of one size and stride (possible for sizes of 1 only) make it None."""
    base = view._base if view._base is not None else view
    if view.storage_offset() != 0 or not base.is_contiguous() or base.storage_offset() != 0 or \
            base.dim() != view.dim():
        return None
    text = lambda v: [str(x) for x in v]  # noqa: E731
    dims = list(zip(text(base.shape), text(base.stride())))
    perm: List[int] = []
    for size_stride in zip(text(view.shape), text(view.stride())):
        matches = [j for j, d in enumerate(dims) if d == size_stride and j not in perm]
        if len(matches) != 1:
            return None
        perm.append(matches[0])
    return (base, perm) if perm != list(range(view.dim())) else None


def plan_program(where: str, rec: Recorder, events: List[Event], outputs: List[Any],
                 launch_tensors: Sequence[Dict[str, Any]]) -> Program:
    """The scratch and glue of launch_fn's launches (Note [recorded programs]); refuses host work kernelop does not
    record, naming the aten op and the line."""
    from .._glue import GLUE_DTYPES
    made_by: Dict[Optional[int], Event] = {}  # storage -> the event that made it (a new tensor)
    for e in events:
        st = storage_of(e.result)
        if st is not None and st not in made_by and e.op not in VIEWS:
            made_by[st] = e
    returned = {storage_of(o) for o in outputs}
    inputs = {storage_of(t.fake): t for t in rec.tensors}
    launched = {storage_of(t) for tensors in launch_tensors for t in tensors.values()}
    for o in outputs:  # a view of a larger tensor would declare fewer elements than the kernel writes
        made = made_by.get(storage_of(o))
        if made is not None and isinstance(made.result, torch.Tensor) and not _same_numel(made.result, o):
            raise ValueError(f"{where}: launch_fn returns a part of a tensor it made (at {made.where}); kernelop "
                             "allocates each output whole: return the tensor the kernel writes, or a view of all of "
                             "it")
    steps: List[GlueStep] = []
    folded: Set[int] = set()  # events folded into a step (a sum into its count, a .to(dtype) into a reduction)

    def only_user(k: int) -> Optional[int]:
        """The one event after event k that reads its result, when nothing else (an output, a kernel) does."""
        st = storage_of(events[k].result)
        users = [j for j in range(k + 1, len(events)) if st in _touched(events[j])]
        if len(users) == 1 and events[users[0]].args and events[users[0]].args[0] is events[k].result and \
                st not in returned and st not in launched:
            return users[0]
        return None

    for i, e in enumerate(events):
        if e.op == "clone" and e.args and isinstance(e.args[0], torch.Tensor) and e.result.is_contiguous():
            found = permutation_of(e.args[0])  # x.transpose(1, 2).contiguous(): a copy the glue makes
            if found is not None and (storage_of(found[0]) in inputs or storage_of(found[0]) in made_by):
                dtype = str(e.result.dtype).replace("torch.", "")
                if dtype not in GLUE_DTYPES or not 2 <= e.result.dim() <= 8:
                    raise ValueError(f"{where}: launch_fn copies a permutation of a {dtype} tensor of rank "
                                     f"{e.result.dim()} on the host (aten.clone at {e.where}); kernelop's permuted "
                                     f"copy takes tensors of rank 2 to 8 of {', '.join(GLUE_DTYPES)}")
                steps.append(GlueStep(e.position, found[0], e.result, "permute_copy", where=e.where, event=i,
                                      value=found[1]))
            continue
        if e.op not in _GLUE or i in folded or not e.args or storage_of(e.args[0]) is None:
            continue
        x = e.args[0]
        step = GlueStep(e.position, x, e.result, where=e.where, event=i)
        last = i  # the event whose result the step writes
        if e.op == "ne":
            j = only_user(i)
            if j is None or events[j].op != "sum" or _sum_dims(events[j]):
                continue  # a comparison alone is host work: refused where its result is used
            _check_sum(where, events[j])
            step.kind, step.value, step.y, last = "count_ne", _compared(where, e, rec), events[j].result, j
            folded.add(j)
        elif e.op == "sum":
            _check_sum(where, e)
            dims = _sum_dims(e)
            keepdim = _keepdim(e)
            if not dims:
                step.kind = "sum_all"
            else:
                step.kind, step.dim, step.keepdim = "sum_dim", int(dims[0]) % max(x.dim(), 1), keepdim
        elif e.op == "div":
            step.kind, step.other = "div", _divisor(where, e, rec)
        elif e.op.startswith("clamp"):
            step.kind, step.value = "clamp", _bounds(where, e)
        else:
            step.cast = e
        if step.kind in ("sum_dim", "sum_all", "count_ne"):  # a .to(dtype) of the reduction, which nothing else reads
            j = only_user(last)
            if j is not None and events[j].op == "_to_copy":
                folded.add(j)
                step.y, step.cast = events[j].result, events[j]
        steps.append(step)
    program = Program(glue=_live(steps, returned, launched))
    for g in program.glue:
        if g.cast is not None:
            _check_cast(where, g.cast, GLUE_DTYPES)
    glue_results = {storage_of(g.y) for g in program.glue}
    for g in program.glue:  # the glue takes and makes whole tensors: a view of one would name all of it
        for t, role in ((g.x, "reads"), (g.other, "reads"), (g.y, "writes")):
            if t is None:
                continue
            base = made_by.get(storage_of(t))
            base_t = base.result if base is not None and isinstance(base.result, torch.Tensor) else \
                inputs[storage_of(t)].fake if storage_of(t) in inputs else t
            if t is not base_t and not (t.is_contiguous() and t.storage_offset() == 0 and _same_shape(t, base_t)):
                raise ValueError(f"{where}: the glue at {g.where} {role} a view of a tensor (a part, a transpose or "
                                 "a reshape of it); kernelop's glue sums and casts whole tensors: reshape in a kernel, "
                                 "or sum the tensor as launch_fn made it")
    for o in outputs:  # a glue result returned as it is, not as a view of another shape
        if storage_of(o) in glue_results and not any(g.y is o or _same_shape(g.y, o) for g in program.glue
                                                    if storage_of(g.y) == storage_of(o)):
            raise ValueError(f"{where}: launch_fn returns a view of what its glue computes; return it as the glue "
                             "makes it")
    for j, e in enumerate(events):  # host work on what the glue computes, after it
        hit = [g for g in program.glue if g.event < j and storage_of(g.y) in _written(e) and j not in folded]
        if hit and e.op not in VIEWS:
            raise ValueError(f"{where}: launch_fn changes what its glue computed (at {hit[0].where}) on the host "
                             f"({host_op(e.op)} at {e.where}); kernelop records the glue and the kernels only")
    # Scratch: what kernels and glue take that is none of the inputs and outputs, allocated by launch_fn.
    taken: List[Tuple[Any, str]] = [(t, "a kernel") for tensors in launch_tensors for t in tensors.values()]
    taken += [(t, f"kernelop's glue (at {g.where})") for g in program.glue for t in (g.x, g.other, g.y)
              if t is not None]
    for t, user in taken:
        st = storage_of(t)
        if st in returned or st in inputs or any(storage_of(x) == st for x in program.scratch):
            continue
        made = made_by.get(st)
        if made is None or not (made.op in ALLOCATE or made.op in _INITS or st in glue_results):
            what = f"{host_op(made.op)}, at {made.where}" if made is not None else "host code kernelop did not see"
            raise ValueError(f"{where}: {user} is given a tensor computed on the host ({what}); kernelop records "
                             "what kernels compute, scratch launch_fn allocates (torch.empty, zeros, full) and its "
                             f"glue ({GLUE_WORDS}); compute it in a kernel")
        base = made.result if isinstance(made.result, torch.Tensor) else t
        if t.storage_offset() != 0 or not _same_numel(t, base):
            raise ValueError(f"{where}: {user} is given a part of a tensor launch_fn allocates (at {made.where}); "
                             "kernelop allocates scratch whole and passes its own data pointer: pass all of it")
        program.scratch.append(base)
    _check_inits(where, events, launch_tensors, program, inputs)
    return program


def _check_cast(where: str, e: Event, dtypes: Sequence[str]) -> None:
    """A .to() the glue makes: a dtype it converts, on the same device, contiguous."""
    x = e.args[0]
    if e.kwargs.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format) or \
            e.kwargs.get("device") not in (None, x.device):
        raise ValueError(f"{where}: launch_fn copies a tensor to another device or layout on the host "
                         f"(aten._to_copy at {e.where}); kernelop's glue converts dtypes only (x.to(dtype))")
    for t in (x, e.result):
        name = str(t.dtype).replace("torch.", "")
        if name not in dtypes:
            raise ValueError(f"{where}: launch_fn converts to or from {name} on the host (aten._to_copy at "
                             f"{e.where}); kernelop's glue converts {', '.join(dtypes)}")


def _live(steps: List[GlueStep], returned: Set[Optional[int]], launched: Set[Optional[int]]) -> List[GlueStep]:
    """The glue steps whose results reach an output or a kernel (through later glue too): the rest is dead host
    work, not recorded."""
    live: List[GlueStep] = []
    needed = set(returned) | set(launched)
    for g in reversed(steps):
        if storage_of(g.y) in needed:
            live.append(g)
            needed.update(storage_of(t) for t in (g.x, g.other) if t is not None)
    return list(reversed(live))


def _check_inits(where: str, events: List[Event], launch_tensors: Sequence[Dict[str, Any]], program: Program,
                 inputs: Dict[Optional[int], Any]) -> None:
    """An init kernelop does before the op's first launch must come before every launch and glue that uses the
    tensor; a copy of an input is kept for the check against what the kernels write (copies_checked)."""
    used_by_launch: Dict[Optional[int], int] = {}  # storage -> the first launch that takes it
    for k, tensors in enumerate(launch_tensors):
        for t in tensors.values():
            used_by_launch.setdefault(storage_of(t), k)
    used_by_glue: Dict[Optional[int], GlueStep] = {}  # storage -> the first glue step that takes it
    for g in program.glue:
        for t in (g.x, g.other, g.y):
            if t is not None:
                used_by_glue.setdefault(storage_of(t), g)
    glue_events = {g.event for g in program.glue}
    for j, e in enumerate(events):
        if e.op not in _INITS or j in glue_events:
            continue
        target = e.args[0] if e.op in ("zero_", "fill_", "copy_") and e.args else e.result
        st = storage_of(target)
        launch = used_by_launch.get(st)
        glue = used_by_glue.get(st)
        used = f"launch {launch}" if launch is not None and launch < e.position else \
            f"the glue at {glue.where}" if glue is not None and glue.event < j else None
        if used is not None:
            raise ValueError(f"{where}: launch_fn sets a tensor on the host (aten.{e.op} at {e.where}) after {used} "
                             "used it; kernelop initialises outputs and scratch once, before the op's first launch: "
                             "write it in a kernel instead")
        if e.op in ("clone", "copy_"):
            source = e.args[1] if e.op == "copy_" and len(e.args) > 1 else e.args[0] if e.args else None
            if storage_of(source) in inputs:
                program.copies.append((e.position, storage_of(source), e.where))


def copies_checked(where: str, program: Program, names: Dict[Optional[int], str], writes: List[Set[str]]) -> None:
    """A copy of an input kernelop makes before the op's first launch must not come after a kernel that writes
    that input (`writes`: per launch, the tensors it writes)."""
    for position, source, line in program.copies:
        name = names.get(source)
        for k in range(min(position, len(writes))):
            if name in writes[k]:
                raise ValueError(f"{where}: launch_fn copies input '{name}' (at {line}) after launch {k} wrote it; "
                                 "kernelop initialises with copies of inputs before the op's first launch, so the "
                                 "copy would miss that write: copy it before the launch, or in a kernel")


def glue_launch(step: GlueStep, names: Dict[Optional[int], str]) -> Dict[str, Any]:
    """A glue step as a `then` entry: kernelop._glue's spec, its tensors renamed to the op's; marked "before" when
    it comes before the op's own kernel."""
    from .. import _glue
    from .._spec import Launch
    x, y = names[storage_of(step.x)], names[storage_of(step.y)]
    rename = {"x": x, "y": y}
    if step.kind == "sum_dim":
        assert step.dim is not None
        spec = _glue.sum_dim(step.dim, step.x.dim(), step.x.dtype, step.y.dtype, step.keepdim)
    elif step.kind == "sum_all":
        spec = _glue.sum_all(step.x.dtype, step.y.dtype)
    elif step.kind == "count_ne":
        scalar = isinstance(step.value, tuple)
        spec = _glue.count_ne(step.x.dtype, "v" if scalar else step.value, step.y.dtype)
        if scalar:
            rename["v"] = step.value[1]
    elif step.kind == "div":
        spec = _glue.div(step.x.dtype, step.other.dtype)
        rename = {"a": x, "b": names[storage_of(step.other)], "y": y}
    elif step.kind == "clamp":
        spec = _glue.clamp(step.x.dtype, *step.value)
    elif step.kind == "permute_copy":
        spec = _glue.permute_copy(step.value, step.x.dtype)
    else:
        spec = _glue.cast(step.x.dtype, step.y.dtype)
    return Launch(spec, from_=rename, before=step.position == 0)._json()


def _sum_dims(e: Event) -> List[int]:
    dims = e.args[1] if len(e.args) > 1 else e.kwargs.get("dim")
    return [dims] if isinstance(dims, int) else list(dims or [])


def _keepdim(e: Event) -> bool:
    return bool(e.args[2] if len(e.args) > 2 else e.kwargs.get("keepdim", False))


def _check_sum(where: str, e: Event) -> None:
    """A sum the glue makes: over one dim or every dim (into a tensor of rank 0), in the input's accumulation
    type."""
    dims = _sum_dims(e)
    if not dims and _keepdim(e) and e.args[0].dim() > 0:
        raise ValueError(f"{where}: launch_fn sums over every dim with keepdim=True on the host (aten.sum at "
                         f"{e.where}); kernelop's glue sums a whole tensor into one of rank 0")
    if len(dims) > 1:
        raise ValueError(f"{where}: launch_fn sums over dims {dims} on the host (aten.sum at {e.where}); kernelop's "
                         "glue sums over one dim (x.sum(dim=d), keepdim or not) or every dim (x.sum()), with a "
                         ".to(dtype) after it")
    if e.kwargs.get("dtype") is not None:
        raise ValueError(f"{where}: launch_fn sums with dtype= on the host (aten.sum at {e.where}); kernelop's "
                         "glue sums in the input's accumulation type: write x.sum(dim=d).to(dtype)")


def _compared(where: str, e: Event, rec: Recorder) -> Any:
    """What (x != value).sum() compares with: an int, or ("scalar", name) of an int scalar input."""
    from .tracing import int_scalar_name
    value = e.args[1] if len(e.args) > 1 else None
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    name = int_scalar_name(value, rec) if isinstance(value, torch.SymInt) else None
    if name is not None:
        return ("scalar", name)
    raise ValueError(f"{where}: launch_fn counts the elements that differ from {type(value).__name__} "
                     f"{shorten(str(value))} (aten.ne at {e.where}); kernelop's glue compares with an int or an int "
                     "scalar input")


def _bounds(where: str, e: Event) -> Tuple[Any, Any]:
    """The constant bounds of a clamp the glue makes (lo, hi; None for no bound), keeping x's dtype."""
    lo = e.args[1] if len(e.args) > 1 and e.op != "clamp_max" else e.kwargs.get("min")
    hi = e.args[2] if len(e.args) > 2 else e.args[1] if e.op == "clamp_max" and len(e.args) > 1 else \
        e.kwargs.get("max")
    for v in (lo, hi):
        if v is not None and (isinstance(v, bool) or type(v) not in (int, float)):
            raise ValueError(f"{where}: launch_fn clamps to {type(v).__name__} {shorten(str(v))} on the host "
                             f"(aten.{e.op} at {e.where}); kernelop's glue clamps to constants")
    if e.result.dtype != e.args[0].dtype:
        raise ValueError(f"{where}: launch_fn clamps {e.args[0].dtype} into {e.result.dtype} on the host (aten.{e.op} "
                         f"at {e.where}); kernelop's glue clamps keeping the dtype")
    return lo, hi


def _divisor(where: str, e: Event, rec: Recorder) -> Any:
    """The one-element tensor a glue division divides a floating tensor by, keeping its dtype."""
    a, b = e.args[0], e.args[1] if len(e.args) > 1 else None
    problem = None
    if not isinstance(b, torch.Tensor) or storage_of(b) is None:
        kind = type(b).__name__
        problem = f"by {'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
    elif e.kwargs.get("rounding_mode") is not None:
        problem = f"with rounding_mode={e.kwargs['rounding_mode']!r}"
    elif not (b.dim() == 0 or (b.dim() == 1 and str(b.shape[0]) == "1")):
        problem = f"by a tensor of shape [{', '.join(rec.expr(d, 'a divisor size') for d in b.shape)}]"
    elif not a.is_floating_point() or e.result.dtype != a.dtype:
        problem = f"{a.dtype} by {b.dtype} into {e.result.dtype}"
    elif not _same_shape(e.result, a):  # a of rank 0 by b of shape [1] broadcasts to [1]
        problem = f"a tensor of rank {a.dim()} by one of rank {b.dim()} into rank {e.result.dim()}"
    if problem is not None:
        raise ValueError(f"{where}: launch_fn divides {problem} on the host (aten.div at {e.where}); kernelop's glue "
                         "divides a floating tensor by a tensor of one element (a count, a scale), keeping its dtype")
    return b


__all__ = ["Event", "GlueStep", "Program", "copies_checked", "glue_launch", "host_op", "permutation_of", "plan_program",
           "storage_of"]
