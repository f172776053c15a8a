"""Running launch_fn once on fake tensors with symbolic sizes, and reading what it did: its inputs (from its type
hints), its outputs (named, shaped, allocated uninitialised or initialised as a whole), the host-side work it may not
do, and its errors."""

from __future__ import annotations

import inspect
import traceback
from dataclasses import dataclass, field
import typing
from typing import Any, Callable, ContextManager, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._spec import Fill, _double_holds
from .._symbolic import (BoolProbe, FloatProbe, Recorder, Unexpressible, empty_permuted, shape_exprs, shorten,
                         user_location)
from .interception import NestedRecording
from .program import ALLOCATE, COPY_ARG, FILL, FILL_ARG, GLUE_WORDS, VIEWS, Event, host_op, permutation_of

Input = Tuple[str, str, Any]
"""A parameter of launch_fn: (name, "tensor" | "float" | "int" | "bool", default or inspect.Parameter.empty)."""

_KINDS = {torch.Tensor: "tensor", float: "float", int: "int", bool: "bool", "torch.Tensor": "tensor",
          "Tensor": "tensor", "float": "float", "int": "int", "bool": "bool"}


def signature_inputs(where: str, fn: Callable[..., Any]) -> List[Input]:
    """(name, "tensor" | "float" | "int" | "bool", default) per parameter of launch_fn, from its type hints."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolved string annotations: read them raw
        hints = {}
    out = []
    for p in inspect.signature(fn).parameters.values():
        name = shorten(p.name)
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"{where}: launch_fn takes {'*' if p.kind != p.KEYWORD_ONLY else 'keyword-only '}"
                            f"{name}; kernelop derives the op's schema from positional, type-hinted parameters")
        hint = hints.get(p.name, p.annotation)
        kind = _KINDS.get(hint)
        if kind is None:
            raise TypeError(f"{where}: launch_fn's parameter '{name}' has type hint {shorten(repr(hint))}; expected "
                            "torch.Tensor, float, int or bool (they give the op's schema)")
        if kind == "tensor" and p.default is not p.empty:
            raise TypeError(f"{where}: tensor parameter '{name}' has a default; only scalars may")
        if kind != "tensor" and p.default is not p.empty and (
                not isinstance(p.default, (int, float)) or (kind != "bool") == isinstance(p.default, bool) or
                (kind == "int" and not isinstance(p.default, int))):
            raise TypeError(f"{where}: {kind} parameter '{name}' has the default {shorten(repr(p.default))}; "
                            f"expected a {kind}")
        out.append((p.name, kind, p.default))
    if not any(k == "tensor" for _, k, _ in out):
        raise TypeError(f"{where}: launch_fn takes no torch.Tensor; an op needs at least one tensor input")
    return out


def examples(where: str, names: List[str], example_inputs: Any) -> Dict[str, torch.Tensor]:
    """The user's example tensors by parameter name: a tuple (launch_fn's tensor arguments in order) or a dict."""
    if example_inputs is None:
        return {}
    if isinstance(example_inputs, Mapping):
        items = dict(example_inputs)
    elif isinstance(example_inputs, (list, tuple)):
        items = dict(zip(names, example_inputs))
    else:
        raise TypeError(f"{where}: example_inputs must be a tuple (launch_fn's tensor arguments in order) or a "
                        f"dict of name: tensor, got {type(example_inputs).__name__}")
    for k, v in items.items():
        if k not in names:
            raise ValueError(f"{where}: example_inputs names {shorten(repr(k))}, which is not a tensor parameter of "
                             f"launch_fn ({shorten(', '.join(names), 300)})")
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"{where}: example_inputs[{shorten(repr(k))}] is a {type(v).__name__}; expected a tensor "
                            "(its rank, sizes, dtype and layout are used: Note [example layouts])")
    return items


def layout_of(example: Optional[torch.Tensor]) -> Optional[List[int]]:
    """Note [example layouts]: the perm of an example that is ``base.permute(perm)`` of a contiguous tensor (HF's
    q, ``proj.view(b, s, h, d).transpose(1, 2)``), else None (a contiguous example, or any other: its sizes alone
    are used)."""
    if example is None or example.is_contiguous() or example.dim() < 2:
        return None
    order = sorted(range(example.dim()), key=lambda a: -example.stride(a))  # the base's dims, outermost first
    if order == list(range(example.dim())) or not example.permute(*order).is_contiguous():
        return None
    return [order.index(i) for i in range(example.dim())]  # example == base.permute(perm)


def like_example(example: torch.Tensor, shape: Sequence[int], dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """A meta tensor of `shape` laid out as `example` is (Note [example layouts])."""
    return empty_permuted(shape, layout_of(example), dtype or example.dtype, "meta")


def make_fakes(rec: Recorder, inputs: List[Input], examples: Dict[str, torch.Tensor]) -> List[Any]:
    """launch_fn's arguments while recording: fake tensors with symbolic sizes, scalar probes."""
    fakes: List[Any] = []
    for name, kind, default in inputs:
        if kind == "tensor":
            ex = examples.get(name)
            fakes.append(rec.add_tensor(name, ex.dtype if ex is not None else torch.float32,
                                        tuple(ex.shape) if ex is not None else None, perm=layout_of(ex)))
        else:
            fakes.append(rec.add_scalar(name, kind, default))
    return fakes


def run_launch_fn(where: str, rec: Recorder, launch_fn: Callable[..., Any], fakes: List[Any],
                  intercept: ContextManager[Any], launches: Optional[List[Any]] = None,
                  host: Optional["HostTests"] = None) -> Tuple[Any, "HostOps"]:
    """Runs launch_fn once on the fakes, under the recorder's fake mode and `intercept` (which patches the DSL's
    launch for this thread, Note [interception]), watching for host-side work (placed among `launches`, the list
    the interception appends to); errors say what kernelop was doing. `host`: the host syncs launch_fn may make
    (Note [host reads]), None: none."""
    writes = HostOps(launches, host)
    try:
        with intercept, rec.mode, writes:
            result = launch_fn(*fakes)
    except (Unexpressible, NestedRecording) as e:
        raise type(e)(f"{where}: {e}" if isinstance(e, Unexpressible) else str(e)) from None
    except Exception as e:  # noqa: BLE001 - named and re-raised with what kernelop was doing
        error = traced_error(where, rec, e, "launch_fn", "while kernelop recorded it on fake tensors with symbolic "
                             "sizes")
        raise LaunchFnRaised(str(error)) from e
    return result, writes


def _as_dtype(value: Any, dtype: torch.dtype) -> float:
    """`value` (a number or a one-element real tensor) as a tensor of `dtype` holds it, exactly: a float, or an int
    for an integer dtype (2**53 + 1 stays itself)."""
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        v = torch.as_tensor(value).reshape(-1)[0].to(dtype).item()
        return int(v) if isinstance(v, (bool, int)) else float(v)


class Constants:
    """Tensors (held, by identity: comparing fake tensors would compare their data) -> their constant value, or
    None for a constant of several elements."""

    def __init__(self) -> None:
        self._values: Dict[int, Tuple[Any, Optional[float]]] = {}

    def __contains__(self, t: Any) -> bool:
        return id(t) in self._values

    def __getitem__(self, t: Any) -> Optional[float]:
        return self._values[id(t)][1]

    def __setitem__(self, t: Any, value: Optional[float]) -> None:
        self._values[id(t)] = (t, value)

    def forget(self, t: Any) -> None:
        self._values.pop(id(t), None)


@dataclass
class HostTests:
    """Note [host reads] while recording, when the spec allows host syncs (``ko.triton(..., host_sync=True)``):
    ``t.item()`` of a one-element integer tensor is an unbacked size the recorder writes ``item(t)``, and each
    ``torch.equal(t, c)`` of a one-element tensor t and a constant c is a test: launch_fn takes the branch
    `decisions` gives it (False beyond them), and the recorder runs it once per branch (Note [host paths])."""

    decisions: Tuple[bool, ...] = ()
    # (t, c, line, launches before it, its event index) in the order made
    tests: List[Tuple[Any, float, str, int, int]] = field(default_factory=list)

    def equal(self, where: str, a: Any, b: Any, constants: Any, position: int = 0, event: int = 0) -> bool:
        """torch.equal(a, b), one of them a constant (`constants`: tensor -> its value, in its dtype)."""
        at = user_location(traceback.extract_stack()[:-2]) or "?"
        const = [x for x in (a, b) if x in constants]
        if not const:
            raise ValueError(f"{where}: launch_fn compares two tensors on the host (torch.equal at {at}); kernelop "
                             "tests a one-element tensor against a constant (torch.equal(t, torch.tensor(1.0)))")
        c = const[-1]
        t = a if c is b else b
        if [str(d) for d in t.shape] != [str(d) for d in c.shape]:
            if any(not isinstance(d, int) for d in t.shape):
                raise ValueError(f"{where}: launch_fn tests a tensor of shape {list(t.shape)} against a constant "
                                 f"on the host (torch.equal at {at}); kernelop tests tensors of one element")
            return False  # torch.equal of different shapes: never equal
        if t.numel() != 1 or c.numel() != 1 or constants[c] is None:
            raise ValueError(f"{where}: launch_fn tests a tensor of {t.numel()} elements on the host (torch.equal at "
                             f"{at}); kernelop tests tensors of one element")
        if t.dtype.is_floating_point != c.dtype.is_floating_point or t.dtype.is_complex or c.dtype.is_complex:
            # torch.equal promotes both to one dtype; an integer and a float may round there: refused, not guessed
            raise ValueError(f"{where}: launch_fn tests a {str(t.dtype)[6:]} tensor against a {str(c.dtype)[6:]} "
                             f"constant on the host (torch.equal at {at}); kernelop tests a tensor against a constant "
                             "of its kind (floating or integer)")
        value = constants[c]
        if isinstance(value, float) and value != value:
            raise ValueError(f"{where}: launch_fn tests a tensor against NaN on the host (torch.equal at {at}), which "
                             "is never equal: drop the test")
        if isinstance(value, int) and not _double_holds(value):
            raise ValueError(f"{where}: launch_fn tests a tensor against {value} on the host (torch.equal at {at}); "
                             "kernelop tests against numbers a double holds exactly (integers within +-2**53)")
        self.tests.append((t, value, at, position, event))
        k = len(self.tests) - 1
        return self.decisions[k] if k < len(self.decisions) else False


class LaunchFnRaised(ValueError):
    """launch_fn itself raised while it was recorded (its own checks, such as a size limit)."""


def traced_error(where: str, rec: Recorder, e: Exception, what: str, doing: str) -> ValueError:
    """The error `what` (launch_fn, the grid function, meta_impl) raised while kernelop traced it: a decision on an
    int scalar's value (which the recording does not know) said as such, anything else named and cut."""
    import sympy
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    if isinstance(e, GuardOnDataDependentSymNode):
        at = user_location(traceback.extract_tb(e.__traceback__))
        scalars = {s.symbol: s.name for s in rec.scalars if s.symbol is not None}
        free: Set[Any] = getattr(e.cond, "free_symbols", set())
        verb = "decides on" if isinstance(e.cond, sympy.logic.boolalg.Boolean) else "needs the value of"
        head = f"{where}: {what} {verb} {rec.describe(e.cond)} on the host{f' (at {at})' if at else ''}"
        if rec.sm_count_symbol() in free:
            return ValueError(f"{head}, which depends on the device's number of SMs (multi_processor_count); "
                              "kernelop records it as sm_count(), evaluated per device at launch: compute the grid "
                              "and the kernel's arguments with it (+ - * // cdiv), decide nothing on it on the host")
        if free and all(s in scalars for s in free):
            return ValueError(f"{head}, which depends on the value of int scalar "
                              f"{', '.join(repr(scalars[s]) for s in free)}; kernelop records int scalars as unknown "
                              "values: pass them to the kernel as they are, or give the choices as configs")
        # A value read from a tensor (.item(), int(t), float(t)): no sympy text, it means nothing to the user.
        return ValueError(f"{where}: {what} reads a value of a tensor on the host (.item(), int(t), float(t), a "
                          f"Python condition on a tensor){f' at {at}' if at else ''}; kernelop runs {what} once, on "
                          "fake tensors that have no data: compute it in the kernel, or pass it as a scalar input")
    return ValueError(f"{where}: {what} raised {type(e).__name__} {doing}: {shorten(e, 2000)}")


# Note [custom ops' bodies]: library host code wraps its kernels in torch.library.custom_op ops (QuACK's
# torch.ops.quack.rmsnorm_bwd_f), whose fake implementation makes the outputs and launches nothing. launch_fn runs on
# fake tensors, so such an op called there would record no kernel: kernelop runs the op's Python body instead, under
# the recording (its launches, allocations and glue are recorded as launch_fn's own). Ops registered any other way
# (aten's, kernelop's own, C++ ones) run as they are.
def _python_custom_op(func: Any) -> Optional[Callable[..., Any]]:
    """The Python body a torch.library.custom_op op runs on CUDA tensors (its CUDA kernel, register_kernel("cuda"), or
    the function it was defined with when that serves every device), or None for any other op."""
    from torch._library import custom_ops
    opdef = custom_ops.OPDEFS.get(func._schema.name)
    if opdef is None:
        return None
    backends = getattr(opdef, "_backend_fns", {}) or {}
    if "cuda" in backends:
        return backends["cuda"]
    return backends.get(None) or (opdef._init_fn if not backends else None)


class HostOps(TorchDispatchMode):
    """Which aten ops made or wrote each storage while launch_fn ran. kernelop allocates outputs and runs nothing but
    the kernel: an output may be allocated uninitialised (torch.empty) or initialised as a whole, with a constant
    (zeros, ones, full, fill_, zero_) or as a copy of an input (clone, copy_), which kernelop then does before the
    launch (Note [initialised outputs]); any other host work on an output, and any on an input, would change the
    result: refused."""


    def __init__(self, launches: Optional[List[Any]] = None, host: Optional[HostTests] = None) -> None:
        super().__init__()
        self.host = host
        # Note [host reads]: one-element constants (torch.tensor(1.0, device=...), torch.ones(())), by tensor.
        self.constants = Constants()
        # storage -> (op name, its arguments, the tensor an in-place op wrote: None for one that made a tensor)
        self.ops: Dict[int, List[Tuple[str, Tuple[Any, ...], Any]]] = {}
        self.launches = launches if launches is not None else []
        self.events: List[Event] = []  # every aten op, in order, placed among the launches (Note [recorded programs])

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func._schema.name.split("::")[-1]
        if self.host is not None and name in ("equal", "_local_scalar_dense"):
            return self._host_read(func, name, args)
        body = _python_custom_op(func)
        if body is not None:  # Note [custom ops' bodies]
            with self:
                return body(*args, **(kwargs or {}))
        out = func(*args, **(kwargs or {}))
        if self.host is not None:
            self._note_constant(name, args, out)
        self.events.append(Event(len(self.launches), name, tuple(args), dict(kwargs or {}), out,
                                 user_location(traceback.extract_stack()[:-1]) or "?"))
        written: List[Tuple[Any, Any]] = [(out, None)] if func._schema.returns and not func._schema.is_mutable else []
        schema_args = func._schema.arguments
        for i, a in enumerate(args):
            if i < len(schema_args) and schema_args[i].is_write and isinstance(a, torch.Tensor):
                written.append((a, a))
        for arg in schema_args:  # out= and other keyword-only tensors written (torch.zeros(n, out=y))
            a = (kwargs or {}).get(arg.name)
            if arg.is_write and isinstance(a, torch.Tensor):
                written.append((a, a))
        for t, target in written:
            for x in (t if isinstance(t, (list, tuple)) else [t]):
                # PyTorch's internal ops are skipped, but for _to_copy: x.float() / x.to(...) makes a tensor with data.
                internal = func._schema.name.startswith("aten::_") and name != "_to_copy"
                if isinstance(x, torch.Tensor) and not internal:
                    try:
                        self.ops.setdefault(x.untyped_storage()._cdata, []).append((name, tuple(args), target))
                    except (RuntimeError, NotImplementedError):
                        pass
        return out

    def _host_read(self, func: Any, name: str, args: Any) -> Any:
        """Note [host reads]: torch.equal decided by the branch taken; .item() of a one-element integer tensor an
        unbacked size (as PyTorch's fake tensors make it), recorded as an event with its tensor."""
        assert self.host is not None
        where = "launch_fn"
        at = user_location(traceback.extract_stack()[:-2]) or "?"
        if name == "equal":
            out: Any = self.host.equal(where, args[0], args[1], self.constants, len(self.launches), len(self.events))
        else:
            t = args[0]
            if t.dtype.is_floating_point or t.dtype.is_complex:
                raise ValueError(f"{where} reads a {str(t.dtype).replace('torch.', '')} value on the host (.item() "
                                 f"at {at}); kernelop reads integer values at launch (item(t), passed to kernels) "
                                 "and tests values (torch.equal(t, constant))")
            if any(not isinstance(d, int) for d in t.shape) or t.numel() != 1:
                raise ValueError(f"{where} reads a value of a tensor of shape {list(t.shape)} on the host (.item() "
                                 f"at {at}); kernelop reads tensors of one element")
            out = func(*args)
        self.events.append(Event(len(self.launches), name, tuple(args), {}, out, at))
        return out

    def _note_constant(self, name: str, args: Any, out: Any) -> None:
        """Note [host reads]: a tensor launch_fn made as a constant (torch.tensor(c), ones, full), or a copy of one:
        its value as its dtype holds it when it has one element, else None. A constant changed in place is one no
        more (but for a fill)."""
        if name.endswith("_") and args and args[0] in self.constants:
            self.constants.forget(args[0])
        if not isinstance(out, torch.Tensor) or any(not isinstance(d, int) for d in out.shape):
            return
        one = out.numel() == 1
        value: Any = None
        if name in ("_to_copy", "clone", "detach", "alias", "lift_fresh_copy") and args and args[0] in self.constants:
            value = self.constants[args[0]]
        elif name == "lift_fresh" and getattr(out, "constant", None) is not None:
            value = out.constant if one else None
        elif name in FILL:
            value = FILL[name]
        elif name in FILL_ARG and len(args) > FILL_ARG[name] and isinstance(args[FILL_ARG[name]], (int, float)):
            value = args[FILL_ARG[name]]
        else:
            return
        self.constants[out] = _as_dtype(value, out.dtype) if one and value is not None else None

    def host_reads(self) -> List[Any]:
        """The tensors launch_fn read on the host (.item(), torch.equal's tested tensor)."""
        tested = [test[0] for test in self.host.tests] if self.host is not None else []
        return [e.args[0] for e in self.events if e.op == "_local_scalar_dense"] + tested

    def check(self, where: str, rec: Recorder, outputs: List[Any], glued: Any = (),
              returned: Optional[int] = None) -> List[Optional[Dict[str, Any]]]:
        """Refuses host work on inputs and outputs; returns each output's init ({"fill": v} / {"clone": input}, or
        None: uninitialised). `glued`: the storages glue launches write (Note [recorded programs]), whose making is
        no host work; the outputs after the first `returned` are scratch."""
        for t in rec.tensors:  # a view of an input (x.view(-1, h), reshape, transpose) is shape algebra
            ops = [op for op, _, _ in self.ops.get(t.fake.untyped_storage()._cdata, []) if op not in VIEWS]
            if ops:
                raise ValueError(f"{where}: launch_fn writes input '{t.name}' on the host (aten.{ops[0]}); kernelop "
                                 "runs the kernel alone")
        n = len(outputs) if returned is None else returned
        return [None if o.untyped_storage()._cdata in glued else
                self._init_of(where, rec, f"output {i}" if i < n else f"scratch tensor {i - n} (a tensor a kernel "
                              "takes that launch_fn does not return)", o)
                for i, o in enumerate(outputs)]

    def _init_of(self, where: str, rec: Recorder, i: str, o: Any) -> Optional[Dict[str, Any]]:
        init: Optional[Dict[str, Any]] = None
        inputs = {id(t.fake): t for t in rec.tensors}
        for op, args, target in self.ops.get(o.untyped_storage()._cdata, []):
            if op in VIEWS or op in ALLOCATE:
                continue
            whole = target is None or target is o
            if whole and op in FILL:
                init = Fill(FILL[op])._json()
                continue
            if whole and op in FILL_ARG and len(args) > FILL_ARG[op]:
                value = args[FILL_ARG[op]]
                # A float scalar input reaches aten as its probe's value (Recorder.add_scalar), an int one as a SymInt.
                probes = {float(s.fake): s.name for s in rec.scalars if isinstance(s.fake, FloatProbe)}
                probe = probes.get(value) if isinstance(value, float) else None
                if isinstance(value, (bool, int, float)) and probe is None:
                    init = Fill(value)._json()  # the spec's own spelling of infinities and NaN
                    continue
                what = f"float scalar input '{probe}'" if probe else shorten(repr(value))
                raise ValueError(f"{where}: {i} is filled (aten.{op}) with {what}, which is not a constant; "
                                 "kernelop fills outputs with constants before the launch: compute a value that "
                                 "depends on the inputs in the kernel")
            if whole and op in COPY_ARG and len(args) > COPY_ARG[op]:
                source = inputs.get(id(args[COPY_ARG[op]]))
                # Compared as text: comparing symbolic sizes would add a guard to the recording.
                if source is not None and source.fake.dtype == o.dtype and \
                        [str(d) for d in source.fake.shape] == [str(d) for d in o.shape]:
                    init = {"clone": source.name}
                    continue
                raise ValueError(f"{where}: {i} is a copy (aten.{op}) of something other than a whole input "
                                 "of its shape and dtype; kernelop initialises an output as a copy of an input only")
            raise ValueError(f"{where}: {i} is made or written on the host by {host_op(op)}"
                             f"{'' if whole else ' on a part of it'}; kernelop allocates outputs uninitialised "
                             "(torch.empty / empty_like), or filled as a whole (zeros, full, fill_) or copied from "
                             f"an input (clone) before the launch, or computes it with its glue ({GLUE_WORDS}); it "
                             "runs nothing else on the host")
        return init


def outputs_of(where: str, result: Any, rec: Recorder) -> Tuple[List[Any], List[str], List[Optional[List[int]]]]:
    """What launch_fn returned, checked: the new contiguous tensors it allocated (the outputs), and the inputs it
    returns as they are (the kernel must write them: they become Tensor(a!) and the op does not return them).
    Nothing at all is returned by an op whose only effect is writing inputs. An output returned as a permutation
    of a new contiguous tensor (Liger's RoPE returns ``q.transpose(1, 2)`` of the tensor its kernel writes) is that
    tensor, with the permutation (Note [returned views]; None for one returned as it is)."""
    outs = [] if result is None else list(result) if isinstance(result, (tuple, list)) else [result]
    inputs = {t.fake.untyped_storage()._cdata: t for t in rec.tensors}
    new: List[Any] = []
    returned: List[str] = []
    permutes: List[Optional[List[int]]] = []
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise ValueError(f"{where}: launch_fn returned a {type(o).__name__} as output {i}; outputs are tensors")
        source = inputs.get(o.untyped_storage()._cdata)
        if source is not None:
            if o is not source.fake and not _same_view(o, source.fake):
                raise ValueError(f"{where}: launch_fn returns a view of input '{source.name}' as output {i}; return "
                                 "the input itself (an input the kernel writes in place) or a new tensor")
            returned.append(source.name)
            continue
        perm = None
        if not o.is_contiguous() or o.storage_offset() != 0:
            o, perm = _permuted(where, i, o)
        new.append(o)
        permutes.append(perm)
    return new, returned, permutes


def _same_view(a: Any, b: Any) -> bool:
    """Whether two views of one storage have the same sizes, strides and offset (Liger's RoPE returns
    ``q.transpose(1, 2)`` of its ``q.transpose(1, 2)``: the input itself), compared as text: comparing symbolic
    sizes would add conditions to the recording."""
    text = lambda v: [str(x) for x in v]  # noqa: E731
    return text(a.shape) == text(b.shape) and text(a.stride()) == text(b.stride()) and \
        str(a.storage_offset()) == str(b.storage_offset())


def _permuted(where: str, i: int, o: Any) -> Tuple[Any, List[int]]:
    """The new contiguous tensor output i is a permutation of, and the permutation; refused when it is anything
    else."""
    found = permutation_of(o)
    if found is None:
        raise ValueError(f"{where}: output {i} is not a contiguous tensor of its own, nor a permutation of one "
                         "(x.transpose(1, 2) of a tensor launch_fn allocates, all of it, its dims told apart by their "
                         "sizes); kernelop allocates outputs contiguous and returns one as a permutation of what its "
                         "kernels write (OutputDecl(permute=...))")
    return found


def check_returned_inputs(where: str, doc: Dict[str, Any], returned: List[str]) -> None:
    """Inputs launch_fn returns must be inputs the kernel writes, and are then results (Note [written results]: an
    in-place op's self, differentiable through the op's backward); an op must return or write something."""
    mutated = {i["name"] for i in doc["inputs"] if i.get("mutated")}
    for name in returned:
        if name not in mutated:
            raise ValueError(f"{where}: launch_fn returns input '{name}', which the kernel does not write; outputs "
                             "must be new tensors (torch.empty_like(...)), and an input is returned only when the "
                             "kernel writes it in place")
    for i in doc["inputs"]:
        if i["name"] in returned:
            i["result"] = True
    if not doc["outputs"] and not mutated:
        raise ValueError(f"{where}: launch_fn returned no tensor and the kernel writes no input; it must return the "
                         "output tensor(s) it allocates")


def name_outputs(outputs: List[Any], tensors: Dict[str, Any], rec: Recorder, reserved: Any = (),
                 fallback: str = "out") -> List[str]:
    """Each output is named after the kernel parameter it is passed to ("Z"; `tensors`: parameter -> the tensor it
    gets), else out0, out1, ... (`fallback`); never an input's name nor one of `reserved` (the names tunables may
    take)."""
    taken = {t.name for t in rec.tensors} | {s.name for s in rec.scalars} | set(reserved)
    names = []
    for i, o in enumerate(outputs):
        name = next((n for n, v in tensors.items() if v is o), None)
        if name is None:  # passed to the kernel as another view of its storage (y, returned as y.view(*shape))
            name = next((n for n, v in tensors.items() if isinstance(v, torch.Tensor) and v.storage_offset() == 0
                         and v.untyped_storage()._cdata == o.untyped_storage()._cdata), None)
        if name is None or name in taken:
            name = f"{fallback}{i}" if len(outputs) > 1 else fallback
            while name in taken:
                name += "_"
        taken.add(name)
        names.append(name)
    return names


def tensor_name(where: str, value: torch.Tensor, rec: Recorder, outputs: List[Any], out_names: List[str],
                what: str, programs: bool = False) -> str:
    """The input or output a tensor launch_fn passes to the kernel is (never a view at an offset, nor a tensor of
    its own making)."""
    storage = value.untyped_storage()._cdata
    candidates = [(t.name, t.fake) for t in rec.tensors] + list(zip(out_names, outputs))
    for name, t in candidates:
        if t.untyped_storage()._cdata == storage:
            if value.storage_offset() != 0:
                raise ValueError(f"{where}: {what} is a view of '{name}' at an offset; kernelop passes each tensor's "
                                 "own data pointer")
            return name
    if programs:  # the DSL records scratch and glue (Note [recorded programs])
        raise ValueError(f"{where}: {what} is a tensor launch_fn computes on the host; kernelop records inputs, "
                         "outputs, scratch launch_fn allocates and its glue (Note [recorded programs])")
    raise ValueError(f"{where}: {what} is a tensor launch_fn computes or allocates without returning it (host-side "
                     "tensor math, or a scratch buffer); kernelop records inputs and returned outputs only")


def int_scalar_name(value: Any, rec: Recorder) -> Optional[str]:
    """The int scalar input a launch value is, passed on as it is, or None."""
    if isinstance(value, torch.SymInt):
        for s in rec.scalars:
            if s.symbol is not None and value.node.expr == s.symbol:
                return s.name
    return None


def float_scalar_name(value: float, rec: Recorder) -> Optional[str]:
    """The float scalar input a float launch value is (the probe itself, or float() of it), or None."""
    if isinstance(value, FloatProbe):
        return value.kernelop_name
    for s in rec.scalars:
        if s.kind == "float" and float(s.fake) == value:
            return s.name
    return None


def from_inputs(value: Any) -> bool:
    """Whether a launch value is computed from the op's inputs (a size, a scalar input, a tensor), at any depth of a
    tuple or list."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, FloatProbe, BoolProbe, torch.Tensor)):
        return True
    return isinstance(value, (tuple, list)) and any(from_inputs(v) for v in value)


def output_shapes(where: str, rec: Recorder, outputs: List[Any], out_names: List[str],
                  meta_impl: Optional[Callable[..., Any]], fakes: List[Any],
                  inits: Optional[List[Optional[Dict[str, Any]]]] = None,
                  permutes: Optional[List[Optional[List[int]]]] = None) -> List[Dict[str, Any]]:
    """The outputs' spec entries (name, shape, dtype, init: HostOps.check, permute: outputs_of); with meta_impl,
    traced from it and checked against the outputs launch_fn returns. A clone of an input has that input's shape and
    dtype."""
    shaped = outputs
    permutes = permutes or [None] * len(outputs)
    if meta_impl is not None:
        try:
            with rec.mode:
                meta = meta_impl(*fakes)
        except NestedRecording:
            raise
        except Unexpressible as e:
            raise ValueError(f"{where}: meta_impl: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise traced_error(where, rec, e, "meta_impl", "on fake tensors with symbolic sizes") from e
        meta = list(meta) if isinstance(meta, (tuple, list)) else [meta]
        if len(meta) != len(outputs) or not all(isinstance(m, torch.Tensor) for m in meta):
            raise ValueError(f"{where}: meta_impl returns {len(meta)} value(s) but launch_fn returns {len(outputs)} "
                             "tensor(s)")
        for i, (m, o) in enumerate(zip(meta, outputs)):
            ms = [rec.expr(d, f"{where}: meta_impl output {i}") for d in m.shape]
            returned = o.permute(permutes[i]) if permutes[i] is not None else o
            os_ = [rec.expr(d, f"{where}: launch_fn output {i}") for d in returned.shape]
            if ms != os_ or m.dtype != o.dtype:
                raise ValueError(f"{where}: meta_impl says output {i} is {m.dtype} [{', '.join(ms)}] but launch_fn "
                                 f"allocates {o.dtype} [{', '.join(os_)}]")
        shaped = [o if p is not None else m for m, o, p in zip(meta, outputs, permutes)]
    out = []
    for i, (o, name) in enumerate(zip(shaped, out_names)):
        try:
            like, dims = shape_exprs(rec, o.shape, f"{where}: output {i}")
        except Unexpressible as e:
            raise ValueError(str(e)) from None
        entry: Dict[str, Any] = {"name": name, "shape": {"same_as": like} if like else dims,
                                 "dtype": str(o.dtype).replace("torch.", "")}
        init = inits[i] if inits else None
        if i < len(permutes) and permutes[i] is not None:
            entry["permute"] = list(permutes[i] or ())
            if like:  # the declared shape is explicit with a permutation (check_output_permute)
                entry["shape"] = [rec.expr(d, f"{where}: output {i}") for d in o.shape]
        if init is not None:
            entry["init"] = init
            if "clone" in init:
                entry["shape"] = {"same_as": init["clone"]}
                del entry["dtype"]
        out.append(entry)
    return out


def inputs_json(rec: Recorder, inputs: List[Input], strided: Any = ()) -> List[Dict[str, Any]]:
    """The spec's inputs: launch_fn's parameters, tensors with the dtype they were recorded with; `strided`: those
    taken with their strides (read by a permuted copy alone: Note [recorded programs])."""
    out = []
    tensors = {t.name: t for t in rec.tensors}
    for name, kind, default in inputs:
        if kind == "tensor":
            entry: Dict[str, Any] = {"name": name, "dtype": str(tensors[name].dtype).replace("torch.", "")}
            if name in strided or name in rec.layouts:  # Note [example layouts]: its strides, as required
                entry["strided"] = True
            out.append(entry)
            continue
        entry = {"name": name, "scalar": kind}
        if default is not inspect.Parameter.empty:
            entry["default"] = float(default) if kind == "float" else default
        out.append(entry)
    return out
