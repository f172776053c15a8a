"""Triton kernels as kernelop ops: ko.triton and ko.custom_plugin, the reference's names (torch_tensorrt.annotation).

``launch_fn`` is the body a user would have written for a ``torch.library.custom_op``: it takes the op's inputs,
allocates and returns the outputs and launches one ``@triton.jit`` kernel as ``kernel[grid](..., BLOCK=...)``.
kernelop runs it **once**, on fake tensors with symbolic sizes, and records the launch: which function, which tensor
is which input or output, the int arguments and the grid as expressions of the input sizes, the constexprs,
num_warps and num_stages. ``meta_impl`` (when given) is traced the same way for the output shapes. The result is an
ordinary kernelop spec (``RecordedPlugin.spec_json()``) whose kernel is compiled by ``triton.compile`` for each
config and architecture, through kernelop's compile cache; the op then runs from C++ with no Python and no Triton,
and packages like any other (docs/triton.md).

Triton's calling convention, in full: the non-constexpr parameters in the kernel's order, then two scratch pointers
(global and profile scratch: kernelop allocates the global scratch a kernel needs, stream-ordered, for
each launch, and refuses kernels built with Triton's profiling instrumentation); constexprs are
compiled in; the block is ``num_warps * 32`` threads; the dynamic shared memory is Triton's ``metadata.shared`` for
the architecture. Triton's JIT specialises on 16-byte-aligned pointers and ints divisible by 16; kernelop keeps those
specialisations as tactics guarded by requirements (``divisible=2``: pointers aligned and ints divisible,
``divisible=1``: pointers aligned, ``divisible=0``: neither), so a misaligned input runs the generic kernel, never
one compiled for alignment it lacks.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import threading
import traceback
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _kernelop
from ._symbolic import (BoolProbe, FloatProbe, Recorder, Unexpressible, canonical, check_config_values, shape_exprs,
                        shorten, user_location, uses_dims)

DEFAULT_ARCHS = ("sm_80", "sm_90")  # CUBIN each, plus the PTX of the oldest for newer GPUs
_OPTIONS = ("num_warps", "num_stages")
BinaryTuple = Tuple[int, str, bytes, str, str, int, int, int, int]  # see _kernelop.register_binaries
_TRITON_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
                  torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
                  torch.bool: "i1"}
_DIVISIBLE = "divisible"  # the tunable of Triton's specialisations (module docstring)
_ADDED_TUNABLES = _OPTIONS + (_DIVISIBLE,)  # the tunables every Triton tactic has, besides the tuned constexprs
_ARCH = r"sm_[1-9][0-9]{1,2}"  # Triton compiles for one "sm_NN" per target (sm_90 gives Hopper's sm_90a)
_INT32 = (-2 ** 31, 2 ** 31 - 1)


@dataclass(frozen=True)
class TritonSpec:
    """``ko.triton(launch_fn, configs)``: a Triton launch to record, and its configs (each a tactic)."""

    launch_fn: Callable[..., Any]
    configs: Tuple[Dict[str, Any], ...] = ()


def triton(launch_fn: Callable[..., Any], configs: Optional[Sequence[Mapping[str, Any]]] = None) -> TritonSpec:
    """A Triton kernel spec (the reference's ``tta.triton``): ``configs`` replace the launch's meta-parameters
    (constexprs, ``num_warps``, ``num_stages``); each is a tactic kernelop tunes between."""
    return TritonSpec(launch_fn, check_configs("kernelop.triton", launch_fn, configs))


def check_configs(where: str, launch_fn: Any, configs: Any) -> Tuple[Dict[str, Any], ...]:
    """A spec's launch_fn and configs as given by the user: a callable and a list of dicts of ints or bools."""
    if not callable(launch_fn):
        raise TypeError(f"{where}: launch_fn must be callable, got {type(launch_fn).__name__}")
    if configs is None:
        configs = ()
    if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Sequence):
        raise TypeError(f"{where}: configs must be a list of dicts such as [{{'BLOCK_SIZE': 256}}], got "
                        f"{type(configs).__name__}")
    out = []
    for i, c in enumerate(configs):
        if not isinstance(c, Mapping):
            raise TypeError(f"{where}: configs[{i}] must be a dict, got {type(c).__name__}")
        for k, v in c.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: configs[{i}] has key {shorten(repr(k))}; keys are meta-parameter names")
            if not isinstance(v, int):  # bools are ints
                raise TypeError(f"{where}: configs[{i}][{shorten(repr(k))}] is {shorten(repr(v))}; config values are "
                                "ints or bools")
        out.append(dict(c))
    return tuple(out)


@dataclass
class _Launch:
    fn: Any  # triton JITFunction
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    grid: Any
    where: str


def _caller_location() -> str:
    """Where the user's code made the call being intercepted: the innermost frame outside kernelop, Triton, the CuTe
    DSL and torch (told apart by their package directories, _symbolic.user_location)."""
    return user_location(traceback.extract_stack()[:-1]) or "?"


# Note [interception]: recording replaces a DSL's launch entry points (class attributes) with a dispatcher for as long
# as any thread records. The dispatcher acts for the threads that are recording (their handlers are thread-local) and
# calls the original for every other thread, so a thread's real launches are never touched and recordings on several
# threads run side by side: no lock is held while user code (launch_fn, a grid function, meta_impl) runs, so nothing
# it does can wait on another recording. The patches are counted; the last recording to end restores the originals.
# A thread records one op at a time: a recording started while the same thread records (launch_fn recording or
# registering another op) is refused, naming both (_NestedRecording).
_patch_lock = threading.Lock()
_patched: Dict[Tuple[int, str], List[Any]] = {}  # (id(owner), attribute) -> [owner, original, recordings using it]
_thread = threading.local()  # .recording: the `where` of the op this thread records; .handlers: its interceptions


class _NestedRecording(ValueError):
    """kernelop was asked to record or compile an op while the same thread records another (refused)."""


def _dispatcher(key: Tuple[int, str], original: Any) -> Callable[..., Any]:
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        handler = (getattr(_thread, "handlers", None) or {}).get(key)
        if handler is None:  # a thread that is not recording: the DSL's own
            return original(*args, **kwargs)
        return handler(original, *args, **kwargs)
    return dispatch


@contextlib.contextmanager
def intercepting(handlers: Mapping[Tuple[Any, str], Callable[..., Any]]) -> Iterator[None]:
    """While active, ``owner.attribute(*args, **kwargs)`` called on this thread calls ``handler(original, *args,
    **kwargs)``; every other thread gets the original (Note [interception])."""
    mine = {(id(owner), attr): handler for (owner, attr), handler in handlers.items()}
    with _patch_lock:
        for owner, attr in handlers:
            entry = _patched.get((id(owner), attr))
            if entry is None:
                original = getattr(owner, attr)
                entry = _patched[(id(owner), attr)] = [owner, original, 0]
                setattr(owner, attr, _dispatcher((id(owner), attr), original))
            entry[2] += 1
    previous = getattr(_thread, "handlers", None)
    _thread.handlers = mine
    try:
        yield
    finally:
        _thread.handlers = previous
        with _patch_lock:
            for key in mine:
                entry = _patched[key]
                entry[2] -= 1
                if entry[2] == 0:
                    setattr(entry[0], key[1], entry[1])
                    del _patched[key]


@contextlib.contextmanager
def recording(where: str) -> Iterator[None]:
    """Marks this thread as recording the op `where` for the duration; refuses a recording nested in another."""
    outer = getattr(_thread, "recording", None)
    if outer is not None:
        raise _NestedRecording(_nested_message(where, outer))
    _thread.recording = where
    try:
        yield
    finally:
        _thread.recording = None


def _nested_message(inner: str, outer: str) -> str:
    return (f"{inner} was called while kernelop records {outer} (from its launch_fn, grid function or meta_impl); "
            "an op's launch_fn must not record, compile or register another op (it runs once, on fake tensors): "
            f"record and register the other op outside launch_fn, before {outer}")


def _intercept(launches: List[_Launch]) -> Any:
    from triton.runtime import autotuner, jit

    def run(original: Any, self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        launches.append(_Launch(self, args, kwargs, grid, _caller_location()))
        return None

    def autotuned(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        raise Unexpressible(f"launch_fn launches '{shorten(getattr(self.fn, '__name__', self.fn))}' through "
                            "@triton.autotune, which times kernels on real tensors; give its configs to "
                            "kernelop.triton(launch_fn, configs=[...]) instead (kernelop tunes them as tactics)")

    return intercepting({(jit.JITFunction, "run"): run, (autotuner.Autotuner, "run"): autotuned})


def _signature_inputs(where: str, fn: Callable[..., Any]) -> List[Tuple[str, str, Any]]:
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
        kind = {torch.Tensor: "tensor", float: "float", int: "int", bool: "bool",
                "torch.Tensor": "tensor", "Tensor": "tensor", "float": "float", "int": "int",
                "bool": "bool"}.get(hint)
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


def run_launch_fn(where: str, rec: Recorder, launch_fn: Callable[..., Any], fakes: List[Any],
                  intercept: Any) -> Tuple[Any, "_HostOps"]:
    """Runs launch_fn once on the fakes, under the recorder's fake mode and `intercept` (which patches the DSL's
    launch for this thread, Note [interception]), watching for host-side writes; errors say what kernelop was
    doing."""
    writes = _HostOps()
    try:
        with intercept, rec.mode, writes:
            result = launch_fn(*fakes)
    except (Unexpressible, _NestedRecording) as e:
        raise type(e)(f"{where}: {e}" if isinstance(e, Unexpressible) else str(e)) from None
    except Exception as e:  # noqa: BLE001 - named and re-raised with what kernelop was doing
        raise traced_error(where, rec, e, "launch_fn", "while kernelop recorded it on fake tensors with symbolic "
                           "sizes") from e
    return result, writes


def traced_error(where: str, rec: Recorder, e: Exception, what: str, doing: str) -> ValueError:
    """The error `what` (launch_fn, the grid function, meta_impl) raised while kernelop traced it: a decision on an
    int scalar's value (which the recording does not know) said as such, anything else named and cut."""
    import sympy
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    if isinstance(e, GuardOnDataDependentSymNode):
        at = user_location(traceback.extract_tb(e.__traceback__))
        scalars = {s.symbol: s.name for s in rec.scalars if s.symbol is not None}
        free = getattr(e.cond, "free_symbols", set())
        verb = "decides on" if isinstance(e.cond, sympy.logic.boolalg.Boolean) else "needs the value of"
        head = f"{where}: {what} {verb} {rec.describe(e.cond)} on the host{f' (at {at})' if at else ''}"
        if free and all(s in scalars for s in free):
            return ValueError(f"{head}, which depends on the value of int scalar "
                              f"{', '.join(repr(scalars[s]) for s in free)}; kernelop records int scalars as unknown "
                              "values: pass them to the kernel as they are, or give the choices as configs")
        return ValueError(f"{head}, which depends on a tensor's data; kernelop runs {what} once, on fake tensors "
                          "that have none: compute it in the kernel")
    return ValueError(f"{where}: {what} raised {type(e).__name__} {doing}: {shorten(e, 2000)}")


def make_fakes(rec: Recorder, inputs: List[Tuple[str, str, Any]], examples: Dict[str, torch.Tensor]) -> List[Any]:
    """launch_fn's arguments while recording: fake tensors with symbolic sizes, scalar probes."""
    fakes: List[Any] = []
    for name, kind, default in inputs:
        if kind == "tensor":
            ex = examples.get(name)
            fakes.append(rec.add_tensor(name, ex.dtype if ex is not None else torch.float32,
                                        tuple(ex.shape) if ex is not None else None))
        else:
            fakes.append(rec.add_scalar(name, kind, default))
    return fakes


def _examples(where: str, names: List[str], example_inputs: Any) -> Dict[str, torch.Tensor]:
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
                            "(only its rank, sizes and dtype are used)")
    return items


@dataclass
class RecordedPlugin:
    """A recorded launch (Triton's, or a CuTe DSL host function's): the op's kernelop spec plus what its compiler
    needs for each tactic."""

    op_name: str
    doc: Dict[str, Any]
    fn: Any
    signature: Dict[str, str]
    constexprs: Dict[str, Any]
    compile_configs: List[Dict[str, Any]] = field(default_factory=list)  # per tactic: what the compiler needs
    # (recorded, archs) -> binaries, and the architectures it compiles for by default
    compile_fn: Optional[Callable[["RecordedPlugin", List[str]], List[BinaryTuple]]] = None
    default_archs: Tuple[str, ...] = DEFAULT_ARCHS
    # (where, archs as the user gave them) -> the architectures, checked: the DSL's rule (triton_archs)
    arch_rule: Optional[Callable[[str, Any], List[str]]] = None
    # what compile() made, by the architectures it was given
    _binaries: Dict[Tuple[str, ...], List[BinaryTuple]] = field(default_factory=dict, repr=False, compare=False)

    def spec_json(self) -> str:
        """The op's kernelop spec as JSON: inspectable and diffable (docs/spec-format.md)."""
        return json.dumps(self.doc, indent=2) + "\n"

    def compile(self, archs: Optional[Sequence[str]] = None) -> List[BinaryTuple]:
        """Compiles each tactic for each architecture (triton.compile through kernelop's compile cache, or
    cute.compile); ``archs`` are checked before anything is compiled."""
        where = f"op {shorten(self.op_name)}"
        outer = getattr(_thread, "recording", None)
        if outer is not None:
            raise _NestedRecording(_nested_message(f"{where} (compiled, registered, checked or packaged)", outer))
        arch_list = (self.arch_rule or triton_archs)(where, archs if archs is not None else self.default_archs)
        key = tuple(arch_list)
        if key not in self._binaries:
            compile_fn = self.compile_fn or _compile_all
            self._binaries[key] = compile_fn(self, arch_list)
        return self._binaries[key]

    def check(self, archs: Optional[Sequence[str]] = None) -> None:
        """Compiles and checks the binaries against the spec as registration does; registers nothing."""
        _kernelop.check_binaries(json.dumps(self.doc), self.compile(archs))

    def register(self, archs: Optional[Sequence[str]] = None) -> Any:
        from ._ops import _op_object
        binaries = self.compile(archs)
        overrides = _kernelop.Overrides()
        overrides.caller_key = next(k for k in ("triton", "cutedsl") if k in self.doc) + ":" + hashlib.sha256(
            json.dumps(self.doc, sort_keys=True).encode() + b"".join(b[2] for b in binaries)).hexdigest()
        _kernelop.register_binaries(json.dumps(self.doc), binaries, overrides)
        return _op_object(self.op_name)

    def build_package(self, path: Union[str, os.PathLike], archs: Optional[Sequence[str]] = None) -> str:
        _kernelop.build_package_binaries(json.dumps(self.doc), self.compile(archs), os.fspath(path))
        return os.fspath(path)


def check_archs(where: str, archs: Any, pattern: str, dsl: str, rule: str, name: str = "archs") -> List[str]:
    """The architectures a user gave: a non-empty list of distinct strings, each matching `pattern` (the DSL's rule,
    said as `rule`); checked before anything is compiled."""
    example = "['sm_80', 'sm_90']"
    if isinstance(archs, (str, bytes)) or not isinstance(archs, (list, tuple)):
        hint = f"; write [{shorten(repr(archs))}]" if isinstance(archs, str) else ""
        raise TypeError(f"{where}: argument '{name}' must be a list of architectures such as {example}, got "
                        f"{type(archs).__name__} {shorten(repr(archs))}{hint}")
    if not archs:
        raise ValueError(f"{where}: argument '{name}' is empty; expected a non-empty list of architectures such as "
                         f"{example}, got {archs!r}")
    seen = set()
    for i, a in enumerate(archs):
        if not isinstance(a, str):
            raise TypeError(f"{where}: {name}[{i}] is {type(a).__name__} {shorten(repr(a))}; expected an "
                            f"architecture string, {rule}")
        if not re.fullmatch(pattern, a):
            raise ValueError(f"{where}: architecture {shorten(repr(a))} is invalid for {dsl} ({name}[{i}]); expected "
                             f"{rule} (kernelop adds the PTX of the oldest for newer GPUs)")
        if a in seen:
            raise ValueError(f"{where}: an architecture is listed twice in {name}: {a!r}")
        seen.add(a)
    return list(archs)


def triton_archs(where: str, archs: Any) -> List[str]:
    """Triton's architectures: 'sm_NN' each (Triton picks Hopper's sm_90a for sm_90 itself)."""
    return check_archs(where, archs, _ARCH, "Triton", "'sm_NN' such as 'sm_90'")


def _custom_plugin_where(op_name: Any, spec_or_list: Any) -> str:
    if op_name is not None and not isinstance(op_name, str):
        raise TypeError(f"kernelop.custom_plugin: op_name must be a str such as 'my_ns::my_op', got "
                        f"{type(op_name).__name__} {shorten(repr(op_name))}")
    if op_name is None:
        first = spec_or_list[0] if isinstance(spec_or_list, (list, tuple)) and spec_or_list else spec_or_list
        op_name = getattr(getattr(first, "launch_fn", None), "__name__", "launch_fn")
    return f"kernelop.custom_plugin({shorten(repr(op_name))})"


def custom_plugin(spec_or_list: Union[TritonSpec, Sequence[TritonSpec]], meta_impl: Optional[Callable] = None, *,
                  op_name: Optional[str] = None, package: Optional[Union[str, os.PathLike]] = None,
                  archs: Optional[Sequence[str]] = None, example_inputs: Any = None) -> Any:
    """Registers a Triton kernel as a kernelop op (the reference's ``tta.custom_plugin``); returns its
    ``torch.ops`` packet. ``package``: also write its .kop there. See :func:`record_plugin`."""
    if archs is not None:  # checked before recording (and so before anything is compiled)
        from ._cutedsl import CuteDslSpec, cutedsl_archs
        first = spec_or_list[0] if isinstance(spec_or_list, (list, tuple)) and spec_or_list else spec_or_list
        rule = cutedsl_archs if isinstance(first, CuteDslSpec) else triton_archs
        archs = rule(_custom_plugin_where(op_name, spec_or_list), archs)
    recorded = record_plugin(spec_or_list, meta_impl, op_name=op_name, example_inputs=example_inputs)
    op = recorded.register(archs)
    if package is not None:
        recorded.build_package(package, archs)
    return op


def record_plugin(spec_or_list: Union[TritonSpec, Sequence[TritonSpec]], meta_impl: Optional[Callable] = None, *,
                  op_name: Optional[str] = None, example_inputs: Any = None) -> RecordedPlugin:
    """Records ``launch_fn`` once on symbolic fake tensors (and traces ``meta_impl`` for the output shapes) into a
    kernelop spec. ``example_inputs`` (a tuple or dict of tensors) gives the tensors' ranks, sizes and dtypes to
    record with (default: rank 2, float32). ``op_name`` defaults to a name derived from the kernel and its configs,
    the same in every process."""
    where = _custom_plugin_where(op_name, spec_or_list)
    try:
        with recording(where):  # before anything else: a nested recording is refused, never waited for
            return _record_specs(where, spec_or_list, meta_impl, op_name, example_inputs)
    except _NestedRecording as e:
        if getattr(_thread, "recording", None) is None:  # the outermost recording: a plain ValueError for the user
            raise ValueError(str(e)) from None
        raise


def _record_specs(where: str, spec_or_list: Any, meta_impl: Optional[Callable], op_name: Optional[str],
                  example_inputs: Any) -> RecordedPlugin:
    from ._cutedsl import CuteDslSpec
    kinds = (TritonSpec, CuteDslSpec)
    specs = [spec_or_list] if isinstance(spec_or_list, kinds) else list(spec_or_list) \
        if isinstance(spec_or_list, (list, tuple)) else None
    if not specs or not all(isinstance(s, kinds) for s in specs) or \
            not all(type(s) is type(specs[0]) for s in specs):
        raise TypeError(f"{where}: expected kernelop.triton(...) or kernelop.cutedsl(...), or a list of one kind "
                        f"of them, got {type(spec_or_list).__name__}")
    if meta_impl is not None and not callable(meta_impl):
        raise TypeError(f"{where}: meta_impl must be callable, got {type(meta_impl).__name__}")
    # Several specs of one launch_fn: their configs are one list of tactics, recorded together (so the grid is
    # one expression over all of them). Different launch_fns would be different kernels: one op has one.
    if any(s.launch_fn is not specs[0].launch_fn for s in specs[1:]):
        raise ValueError(f"{where}: the specs have different launch_fns; kernelop compiles one Triton launch per "
                         "op (its configs are the tactics): give one spec with all the configs, or register one "
                         "op per launch_fn")
    configs = tuple(c for s in specs for c in (s.configs or ({},)))
    if isinstance(specs[0], CuteDslSpec):
        from ._cutedsl import record
        if len({s.archs for s in specs}) > 1:
            raise ValueError(f"{where}: the specs name different archs")
        return record(CuteDslSpec(specs[0].launch_fn, configs, specs[0].archs), meta_impl, op_name,
                      example_inputs)
    return _record(TritonSpec(specs[0].launch_fn, configs), meta_impl, op_name, example_inputs)


def _record(spec: TritonSpec, meta_impl: Optional[Callable], op_name: Optional[str],
            example_inputs: Any) -> RecordedPlugin:
    import triton as triton_module

    fn_name = getattr(spec.launch_fn, "__name__", "launch_fn")
    where = f"kernelop.custom_plugin({shorten(repr(op_name if op_name is not None else fn_name))})"
    inputs = _signature_inputs(where, spec.launch_fn)
    taken = [n for n, _, _ in inputs if n in _ADDED_TUNABLES]
    if taken:
        raise ValueError(f"{where}: launch_fn's parameter '{taken[0]}' has the name of a tunable kernelop gives every "
                         f"Triton tactic ({', '.join(_ADDED_TUNABLES)}: Triton's compile options and its "
                         "specialisation variant), so the op could not take an input of that name; rename it")
    tensor_names = [n for n, k, _ in inputs if k == "tensor"]
    examples = _examples(where, tensor_names, example_inputs)
    rec = Recorder(where)
    fakes = make_fakes(rec, inputs, examples)

    launches: List[_Launch] = []
    result, writes = run_launch_fn(where, rec, spec.launch_fn, fakes, _intercept(launches))
    if not launches:
        raise ValueError(f"{where}: launch_fn launched no Triton kernel (expected kernel[grid](...))")
    if len(launches) > 1:
        raise ValueError(f"{where}: launch_fn launched {len(launches)} Triton kernels (at "
                         f"{shorten(', '.join(x.where for x in launches), 1000)}); kernelop records one launch per op")
    launch = launches[0]
    outputs = _outputs(where, result, rec)
    writes.check(where, rec, outputs)
    kernel = launch.fn
    fname = kernel.__name__
    kname = shorten(fname)  # in messages
    named = op_name is not None
    if op_name is None:  # named at the end after what was recorded; the kernel's name meanwhile
        op_name = f"kernelop_triton::{fname}"
    where = f"kernelop.custom_plugin({shorten(repr(op_name))})"
    rec.where = where

    # The launch's arguments, bound to the kernel's parameters. Its compile options are Python constants or come
    # from the configs: each value is its own compilation.
    options: Dict[str, int] = {}
    for k in _OPTIONS:
        if k in launch.kwargs:
            options[k] = _launch_option(where, launch, k, launch.kwargs.pop(k))
    if type(launch.kwargs.get("num_ctas")) is int and launch.kwargs["num_ctas"] == 1:
        launch.kwargs.pop("num_ctas")
    # Triton's attrs are keyed by the parameter's position among ALL the kernel's parameters (constexprs too).
    position = {name: i for i, name in enumerate(kernel.arg_names)}
    unknown = [k for k in launch.kwargs if k not in position]
    if unknown:
        raise ValueError(f"{where}: the launch at {launch.where} passes {shorten(', '.join(unknown), 300)}, which "
                         f"kernelop does not record (known options: {', '.join(_OPTIONS)}; num_ctas must be 1)")
    try:
        bound = inspect.signature(kernel.fn).bind(*launch.args, **launch.kwargs)
    except TypeError as e:
        raise ValueError(f"{where}: the launch at {launch.where} does not match {kname}'s parameters: "
                         f"{shorten(e, 300)}") from None
    bound.apply_defaults()
    constexpr = {p.name for p in kernel.params if p.is_constexpr}
    out_names = _name_outputs(outputs, {n: v for n, v in bound.arguments.items() if isinstance(v, torch.Tensor)},
                              rec, reserved=set(constexpr) | set(_ADDED_TUNABLES))

    params: List[Any] = []
    signature: Dict[str, str] = {}
    constexprs: Dict[str, Any] = {}
    pointers: List[str] = []  # tensor names passed as pointers, for the alignment requirements
    int_args: List[Tuple[int, str]] = []  # (position, expression) of ints whose value is not known here
    static_divisible: List[int] = []  # positions of constant ints divisible by 16
    for p in kernel.params:
        value = bound.arguments[p.name]
        what = f"{kname}'s argument '{shorten(p.name)}'"
        if p.is_constexpr:
            if _from_inputs(value):
                raise ValueError(f"{where}: constexpr '{shorten(p.name)}' gets a value computed from the inputs (a "
                                 "size or a scalar input); it must be a Python constant or come from configs (Triton "
                                 "compiles one kernel per value)")
            signature[p.name] = "constexpr"
            constexprs[p.name] = value
            continue
        if value is None:
            signature[p.name] = "constexpr"
            constexprs[p.name] = None
            continue
        if isinstance(value, torch.Tensor):
            name = _tensor_name(where, value, rec, outputs, out_names, what)
            if value.dtype not in _TRITON_DTYPES:
                raise ValueError(f"{where}: {what} is {value.dtype}, which kernelop passes to Triton kernels as "
                                 f"none of {', '.join(str(d) for d in _TRITON_DTYPES)}")
            signature[p.name] = "*" + _TRITON_DTYPES[value.dtype]
            params.append(name)
            pointers.append(name)
        elif isinstance(value, FloatProbe):
            signature[p.name] = "fp32"
            params.append(value.kernelop_name)
        elif isinstance(value, BoolProbe):
            signature[p.name] = "i1"
            params.append(value.kernelop_name)
        elif isinstance(value, bool):
            signature[p.name] = "constexpr"  # Triton compiles non-constexpr bools as values; a constant is the same
            constexprs[p.name] = value
            continue
        elif isinstance(value, (int, torch.SymInt)):
            if isinstance(value, int) and value == 1:  # Triton's JIT specialises 1 as a constexpr
                signature[p.name] = "constexpr"
                constexprs[p.name] = 1
                continue
            scalar = _int_scalar_name(value, rec)
            try:
                text = scalar if scalar is not None else rec.expr(value, f"{where}: {what}")
            except Unexpressible as e:
                raise ValueError(str(e)) from None
            wide = isinstance(value, int) and not (_INT32[0] <= value <= _INT32[1])
            signature[p.name] = "i64" if wide else "i32"
            if scalar is not None:
                params.append(scalar)
                int_args.append((position[p.name], scalar))
            else:
                params.append({"expr": text, **({"int64": True} if wide else {})})
                if isinstance(value, int):
                    if value % 16 == 0:
                        static_divisible.append(position[p.name])
                else:
                    int_args.append((position[p.name], text))
        elif isinstance(value, float):
            raise ValueError(f"{where}: {what} is the float {value!r}, which is neither a float scalar of "
                             "launch_fn nor a constexpr; pass the scalar input itself or make it tl.constexpr")
        else:
            raise ValueError(f"{where}: {what} is a {type(value).__name__}; kernelop passes tensors, scalars, "
                             "sizes and constants")
    # Triton's trailing parameters: the global and profile scratch pointers (null: no scratch).
    params += [{"expr": "0", "int64": True}, {"expr": "0", "int64": True}]

    # Configs: each replaces meta-parameters of the launch; every key must be one, and none may be named like a
    # tunable kernelop adds.
    user_configs = list(spec.configs) or [{}]
    for i, c in enumerate(user_configs):
        bad = [k for k in c if k not in constexpr and k not in _OPTIONS]
        if bad:
            raise ValueError(f"{where}: configs[{i}] sets {shorten(', '.join(bad))}, which {kname} has no constexpr "
                             f"of (its constexprs: {shorten(', '.join(sorted(constexpr)) or 'none', 300)}; options: "
                             f"{', '.join(_OPTIONS)})")
    tuned = sorted({k for c in user_configs for k in c if k in constexpr}, key=position.get)
    clash = [k for k in tuned if k in _ADDED_TUNABLES]
    if clash:
        raise ValueError(f"{where}: the configs set {kname}'s constexpr '{clash[0]}', but '{clash[0]}' is the name of "
                         "a tunable kernelop gives every Triton tactic ('divisible': Triton's specialisation variant, "
                         "2 = pointers aligned and ints divisible by 16, 1 = pointers aligned, 0 = neither; "
                         "'num_warps', 'num_stages': Triton's compile options); rename the constexpr")
    check_config_values(where, user_configs, tuned, constexprs)
    base_options = {"num_warps": options.get("num_warps", 4), "num_stages": options.get("num_stages", 3)}
    values = []
    for c in user_configs:
        v = {k: c.get(k, constexprs.get(k)) for k in tuned}
        v.update({k: c.get(k, base_options[k]) for k in _OPTIONS})
        values.append(v)

    # Triton's specialisations, as guarded variants of each config. Their requires exclude each other, so a call
    # can run exactly one variant of a config, the one Triton's JIT would pick, and tuning compares configs only.
    aligned = [f"aligned({t}, 16)" for t in dict.fromkeys(pointers)]
    divisible = list(dict.fromkeys(canonical(f"({e}) % 16 == 0") for _, e in int_args))

    def none_of(conds: List[str]) -> List[str]:
        return [canonical(f"{_conjunction(conds)} == 0")] if conds else []

    variants = [d for d, present in ((2, bool(divisible)), (1, bool(aligned)), (0, True)) if present]
    requires_of = {2: aligned + divisible, 1: aligned + none_of(divisible), 0: none_of(aligned)}
    if not aligned:
        requires_of[0] = none_of(divisible)

    tunables = tuned + list(_OPTIONS) + [_DIVISIBLE]
    configs, compile_configs = [], []
    for v in values:
        for d in variants:
            cfg = {k: int(v[k]) for k in tuned}  # a bool as 0 or 1: the spec's tunables are ints
            cfg.update({k: v[k] for k in _OPTIONS})
            cfg[_DIVISIBLE] = d
            if requires_of[d]:
                cfg["requires"] = list(requires_of[d])
            configs.append(cfg)
            attrs = [i for i, _ in int_args] if d == 2 else []
            if d >= 1:
                attrs += [position[p] for p in _pointer_params(signature)]
            compile_configs.append({
                "constexprs": {**constexprs, **{k: v[k] for k in tuned}},
                "options": {k: v[k] for k in _OPTIONS},
                "divisible": sorted(set(attrs + static_divisible)),
            })
    tactics = (f"{_count(len(user_configs), 'config')} x {_count(len(variants), 'Triton specialisation')} "
               f"(divisible={', '.join(str(d) for d in variants)}) make {_count(len(configs), 'tactic')} (tactic t "
               f"is configs[t // {len(variants)}])")

    def spec_doc(grid: List[str], shapes: List[Dict[str, Any]], requires: List[str]) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "op": op_name,
            "kernel_name": fname,
            "kernel_source": kernel.src if isinstance(getattr(kernel, "src", None), str) else
            inspect.getsource(kernel.fn),
            "triton": {"version": triton_module.__version__},
            "inputs": _inputs_json(rec, inputs),
            "outputs": shapes,
            "params": params,
            "geometry": {"custom": {"grid": grid, "block": ["num_warps * 32"]}},
        }
        if requires:
            doc["requires"] = requires
        doc["tunables"] = tunables
        doc["configs"] = configs
        return doc

    # Validated (kernelop's own rules, in C++) before the grid is traced for each config, and again once complete:
    # a spec kernelop refuses is never compiled.
    validate_recorded(where, spec_doc(["1"], _output_shapes(where, rec, outputs, out_names, None, fakes), []),
                      tactics)

    if not callable(launch.grid) and len({tuple(v[k] for k in tuned) for v in values}) > 1:
        # Right for a kernel whose programs loop (a row each), wrong for one whose program covers BLOCK elements.
        import warnings
        warnings.warn(f"{where}: the launch at {launch.where} has a fixed grid, the same for every config, while the "
                      f"configs change {shorten(', '.join(tuned))}; if a program covers a block of that size, give "
                      "the grid as a function of them (lambda meta: (triton.cdiv(n, meta['BLOCK']),))", stacklevel=3)
    grids = [_grid(where, rec, launch, bound, v) for v in values]
    grid = _unify(where, rec, launch, bound, values, tuned, grids)

    # Requirements: every condition launch_fn and meta_impl evaluated or asserted on the sizes (so meta_impl is
    # traced first), and ranks.
    shapes = _output_shapes(where, rec, outputs, out_names, meta_impl, fakes)
    try:
        requires = rec.requirements_from_guards()
    except Unexpressible as e:
        raise ValueError(str(e)) from None
    exprs = grid + [p["expr"] for p in params if isinstance(p, dict)] + requires + \
        [d for s in shapes for d in (s["shape"] if isinstance(s["shape"], list) else [])]
    requires = [f"rank({t.name}) == {t.rank}" for t in rec.tensors if uses_dims(exprs, t.name)] + requires

    doc = spec_doc(grid, shapes, requires)
    if not named:  # the same in every process, and different for a different launch, dtype or config set
        identity = json.dumps([kernel.cache_key, {k: v for k, v in doc.items() if k != "op"}], sort_keys=True)
        op_name = doc["op"] = f"kernelop_triton::{fname}_{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
    validate_recorded(where, doc, tactics)
    return RecordedPlugin(op_name, doc, kernel, signature, constexprs, compile_configs, arch_rule=triton_archs)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def validate_recorded(where: str, doc: Dict[str, Any], tactics: str) -> None:
    """kernelop's validation of a recorded spec (the C++ validate(), through check_spec), run before anything is
    compiled, so a spec kernelop refuses is refused at once. `tactics` says how the user's configs became the
    spec's (e.g. "86 configs x 3 Triton specialisations (divisible=2, 1, 0) make 258 tactics")."""
    try:
        _kernelop.check_spec(json.dumps(doc), "", _kernelop.Overrides())
    except (ValueError, TypeError) as e:
        raise type(e)(f"{where}: {tactics}; kernelop refuses the recorded spec before compiling: "
                      f"{shorten(e, 2000)}") from None


def _from_inputs(value: Any) -> bool:
    """Whether a launch value is computed from the op's inputs (a size, a scalar input, a tensor), at any depth of a
    tuple or list."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, FloatProbe, BoolProbe, torch.Tensor)):
        return True
    return isinstance(value, (tuple, list)) and any(_from_inputs(v) for v in value)


def _launch_option(where: str, launch: _Launch, name: str, value: Any) -> int:
    """A compile option given at the launch (num_warps, num_stages): a Python int, never a value from the inputs."""
    if _from_inputs(value):
        raise ValueError(f"{where}: the launch at {launch.where} sets the launch parameter '{name}' to a value "
                         f"computed from the inputs (a size or a scalar input); {name} must be a Python constant or "
                         f"come from configs (kernelop.triton(launch_fn, configs=[{{'{name}': 4}}, ...]): Triton "
                         "compiles one kernel per value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: the launch at {launch.where} sets the launch parameter '{name}' to "
                         f"{type(value).__name__} {shorten(repr(value))}; expected an int (a Python constant, or from "
                         "configs)")
    return value


def _pointer_params(signature: Dict[str, str]) -> List[str]:
    return [n for n, t in signature.items() if t.startswith("*")]


class _HostOps(TorchDispatchMode):
    """Which aten ops made or wrote each storage while launch_fn ran. kernelop allocates outputs uninitialised
    (torch.empty) and runs nothing but the kernel, so an output made any other way (zeros, clone, full) or written
    on the host, and an input written on the host, would change the result: refused."""

    _ALLOCATE = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"}

    def __init__(self) -> None:
        super().__init__()
        self.ops: Dict[int, List[str]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[-1]
        written = [out] if func._schema.returns and not func._schema.is_mutable else []
        schema_args = func._schema.arguments
        for i, a in enumerate(args):
            if i < len(schema_args) and schema_args[i].is_write and isinstance(a, torch.Tensor):
                written.append(a)
        for t in written:
            for x in (t if isinstance(t, (list, tuple)) else [t]):
                if isinstance(x, torch.Tensor) and not func._schema.name.startswith("aten::_"):
                    try:
                        self.ops.setdefault(x.untyped_storage()._cdata, []).append(name)
                    except (RuntimeError, NotImplementedError):
                        pass
        return out

    def check(self, where: str, rec: Recorder, outputs: List[Any]) -> None:
        for t in rec.tensors:
            ops = self.ops.get(t.fake.untyped_storage()._cdata, [])
            if ops:
                raise ValueError(f"{where}: launch_fn writes input '{t.name}' on the host (aten.{ops[0]}); kernelop "
                                 "runs the kernel alone")
        for i, o in enumerate(outputs):
            ops = [op for op in self.ops.get(o.untyped_storage()._cdata, []) if op not in _VIEWS]
            made = [op for op in ops if op not in self._ALLOCATE]
            if made:
                raise ValueError(f"{where}: output {i} is made or written on the host by aten.{made[0]}; kernelop "
                                 "allocates outputs uninitialised and runs the kernel alone, so allocate it with "
                                 "torch.empty / empty_like and let the kernel write all of it")


_VIEWS = {"view", "reshape", "_reshape_alias", "as_strided", "unsqueeze", "squeeze", "flatten", "alias", "expand",
          "permute", "transpose", "t", "slice", "select", "detach", "contiguous", "lift_fresh"}


def _outputs(where: str, result: Any, rec: Recorder) -> List[Any]:
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if result is None or not outs:
        raise ValueError(f"{where}: launch_fn returned {result!r}; it must return the output tensor(s) it allocates")
    inputs = [t.fake for t in rec.tensors]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise ValueError(f"{where}: launch_fn returned a {type(o).__name__} as output {i}; outputs are tensors")
        if any(o.untyped_storage()._cdata == x.untyped_storage()._cdata for x in inputs):
            raise ValueError(f"{where}: launch_fn returns (a view of) an input as output {i}; outputs must be new "
                             "tensors (torch.empty_like(...))")
        if not o.is_contiguous() or o.storage_offset() != 0:
            raise ValueError(f"{where}: output {i} is not a contiguous tensor of its own; kernelop allocates outputs "
                             "contiguous")
    return outs


def _name_outputs(outputs: List[Any], tensors: Dict[str, Any], rec: Recorder, reserved: Any = ()) -> List[str]:
    """Each output is named after the kernel parameter it is passed to ("Z"; `tensors`: parameter -> the tensor it
    gets), else out0, out1, ...; never an input's name nor one of `reserved` (the names tunables may take)."""
    taken = {t.name for t in rec.tensors} | {s.name for s in rec.scalars} | set(reserved)
    names = []
    for i, o in enumerate(outputs):
        name = next((n for n, v in tensors.items() if v is o), None)
        if name is None or name in taken:
            name = f"out{i}" if len(outputs) > 1 else "out"
            while name in taken:
                name += "_"
        taken.add(name)
        names.append(name)
    return names


def _tensor_name(where: str, value: torch.Tensor, rec: Recorder, outputs: List[Any], out_names: List[str],
                 what: str) -> str:
    storage = value.untyped_storage()._cdata
    candidates = [(t.name, t.fake) for t in rec.tensors] + list(zip(out_names, outputs))
    for name, t in candidates:
        if t.untyped_storage()._cdata == storage:
            if value.storage_offset() != 0:
                raise ValueError(f"{where}: {what} is a view of '{name}' at an offset; kernelop passes each tensor's "
                                 "own data pointer")
            return name
    raise ValueError(f"{where}: {what} is a tensor launch_fn computes or allocates without returning it (host-side "
                     "tensor math, or a scratch buffer); kernelop records inputs and returned outputs only")


def _int_scalar_name(value: Any, rec: Recorder) -> Optional[str]:
    if isinstance(value, torch.SymInt):
        for s in rec.scalars:
            if s.symbol is not None and value.node.expr == s.symbol:
                return s.name
    return None


def _grid(where: str, rec: Recorder, launch: _Launch, bound: inspect.BoundArguments,
          values: Dict[str, Any]) -> List[Any]:
    grid = launch.grid
    if callable(grid):
        meta = dict(bound.arguments)
        meta.update(values)
        try:
            with rec.mode:
                grid = grid(meta)
        except _NestedRecording:
            raise
        except Unexpressible as e:
            raise ValueError(f"{where}: the grid: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise traced_error(where, rec, e, "the grid function", f"(at {launch.where})") from e
    if isinstance(grid, (int, torch.SymInt)):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise ValueError(f"{where}: the grid of the launch at {launch.where} is {shorten(repr(grid))}; expected 1 to 3 "
                         "sizes")
    return list(grid)


def _unify(where: str, rec: Recorder, launch: _Launch, bound: inspect.BoundArguments, values: List[Dict[str, Any]],
           tuned: List[str], grids: List[List[Any]]) -> List[str]:
    """One expression per grid axis over the tunables: the same text for every config, or the grid traced with the
    tunables symbolic (checked against every config), or a select() over the configs."""
    try:
        texts = [[rec.expr(g, f"{where}: grid axis {a}") for a, g in enumerate(grid)] for grid in grids]
    except Unexpressible as e:
        raise ValueError(str(e)) from None
    if any(len(t) != len(texts[0]) for t in texts):
        raise ValueError(f"{where}: the grid has a different number of axes in different configs")
    if all(t == texts[0] for t in texts):
        return texts[0]
    names = tuned + list(_OPTIONS)
    start = rec.guard_count()
    try:
        # Hints of at least 2: ShapeEnv makes symbols hinted 0 or 1 constants (bools, num_stages=1).
        symbolic = {k: rec.tunable(k, max(int(values[0][k]), 2)) for k in names}
        general = _grid(where, rec, launch, bound, symbolic)
        symbols = {k: v.node.expr for k, v in symbolic.items()}
        ok = rec.guard_count() == start and len(general) == len(grids[0]) and all(
            rec.same(_sympy(general[a]).subs({symbols[k]: values[c][k] for k in names}), _sympy(grids[c][a]))
            for c in range(len(values)) for a in range(len(general)))
        result = [rec.expr(g, "grid") for g in general] if ok else []
    except Exception:  # noqa: BLE001 - any failure of the symbolic attempt: one grid per config instead
        ok = False
    del rec.shape_env.guards[start:]
    if ok:
        return result
    return select_over_configs(texts, values, names)


def select_over_configs(texts: List[List[str]], values: List[Dict[str, Any]], names: List[str]) -> List[str]:
    """Per axis, one expression that is config c's texts[c][axis] when the tunables have config c's values."""
    out = []
    for a in range(len(texts[0])):
        text = texts[-1][a]
        for c in range(len(values) - 2, -1, -1):
            if text != texts[c][a]:
                cond = _conjunction([f"{k} == {int(values[c][k])}" for k in names])
                text = f"select({cond}, {texts[c][a]}, {text})"
        out.append(canonical(text))
    return out


def _sympy(v: Any) -> Any:
    import sympy
    return v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(int(v))


def _conjunction(conds: List[str]) -> str:
    # kernelop expressions have no 'and': a product of comparisons is 1 exactly when all hold.
    return " * ".join(f"({c})" for c in conds)


def _output_shapes(where: str, rec: Recorder, outputs: List[Any], out_names: List[str],
                   meta_impl: Optional[Callable], fakes: List[Any]) -> List[Dict[str, Any]]:
    shaped = outputs
    if meta_impl is not None:
        try:
            with rec.mode:
                meta = meta_impl(*fakes)
        except _NestedRecording:
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
            os_ = [rec.expr(d, f"{where}: launch_fn output {i}") for d in o.shape]
            if ms != os_ or m.dtype != o.dtype:
                raise ValueError(f"{where}: meta_impl says output {i} is {m.dtype} [{', '.join(ms)}] but launch_fn "
                                 f"allocates {o.dtype} [{', '.join(os_)}]")
        shaped = meta
    out = []
    for i, (o, name) in enumerate(zip(shaped, out_names)):
        try:
            like, dims = shape_exprs(rec, o.shape, f"{where}: output {i}")
        except Unexpressible as e:
            raise ValueError(str(e)) from None
        out.append({"name": name, "shape": {"same_as": like} if like else dims,
                    "dtype": str(o.dtype).replace("torch.", "")})
    return out


def _inputs_json(rec: Recorder, inputs: List[Tuple[str, str, Any]]) -> List[Dict[str, Any]]:
    out = []
    tensors = {t.name: t for t in rec.tensors}
    for name, kind, default in inputs:
        if kind == "tensor":
            out.append({"name": name, "dtype": str(tensors[name].dtype).replace("torch.", "")})
            continue
        entry: Dict[str, Any] = {"name": name, "scalar": kind}
        if default is not inspect.Parameter.empty:
            entry["default"] = float(default) if kind == "float" else default
        out.append(entry)
    return out


# -- compilation ------------------------------------------------------------------------------------------------

def _compile_all(rec: RecordedPlugin, archs: List[str]) -> List[BinaryTuple]:
    import triton as triton_module
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import get_cache_key

    numbers = [int(a[3:]) for a in triton_archs(f"op {shorten(rec.op_name)}", archs)]
    oldest = min(numbers)
    scratch_param = len(rec.doc["params"]) - 2  # Triton's global scratch pointer, then the profile one
    # Every tactic's options are parsed by Triton (which refuses, say, num_warps=3) before anything is compiled.
    jobs = []
    for program, cc in enumerate(rec.compile_configs):
        attrs = {(i,): [["tt.divisibility", 16]] for i in cc["divisible"]}
        for number in numbers:
            src = ASTSource(rec.fn, dict(rec.signature), constexprs=dict(cc["constexprs"]), attrs=attrs)
            target = GPUTarget("cuda", number, 32)
            # Triton's own cache key (its version, the kernel and every function it calls or gets as a constexpr,
            # the signature, constexprs and attrs, the backend with ptxas, the parsed options, the environment
            # variables that change code), plus the layout of kernelop's entry.
            try:
                backend = make_backend(target)
                options = backend.parse_options(dict(cc["options"], **src.parse_options()))
            except Exception as e:  # noqa: BLE001 - Triton's refusal, named with the tactic
                raise ValueError(f"op {shorten(rec.op_name)}: tactic {program} ({_tactic_text(rec, program)}) for "
                                 f"sm_{number}: Triton refuses its options: {type(e).__name__}: {shorten(e, 500)}") \
                    from e
            identity = f"kernelop-triton-entry-{_ENTRY_FORMAT}:" + get_cache_key(
                src, backend, options, get_cache_invalidating_env_vars())
            jobs.append((program, cc, number, src, target, identity))
    out: List[BinaryTuple] = []
    for program, cc, number, src, target, identity in jobs:
        entry = _cached(identity)
        if entry is None:
            try:
                k = triton_module.compile(src, target=target, options=dict(cc["options"]))
            except Exception as e:  # noqa: BLE001 - Triton's compile error, named with the tactic
                raise RuntimeError(f"op {shorten(rec.op_name)}: triton.compile of tactic {program} "
                                   f"({_tactic_text(rec, program)}) for sm_{number} failed: {e}") from e
            md = k.metadata
            entry = {"name": md.name, "shared": int(md.shared), "cubin": k.asm["cubin"], "ptx": k.asm["ptx"],
                     "global_scratch": int(getattr(md, "global_scratch_size", 0) or 0),
                     "global_scratch_align": int(getattr(md, "global_scratch_align", 1) or 1),
                     "profile_scratch": int(getattr(md, "profile_scratch_size", 0) or 0),
                     "num_ctas": int(getattr(md, "num_ctas", 1)), "num_warps": int(md.num_warps),
                     "cooperative": bool(getattr(md, "launch_cooperative_grid", False)),
                     "pdl": bool(getattr(md, "launch_pdl", False))}
            _check_metadata(rec, program, number, entry)  # before storing: a refused build is not kept
            _store(identity, entry)
        _check_metadata(rec, program, number, entry)
        ptx_target = re.search(r"^\.target\s+(\S+)", entry["ptx"], re.M)
        label = ptx_target.group(1).rstrip(",") if ptx_target else f"sm_{number}"
        scratch = (entry["global_scratch"], entry["global_scratch_align"], scratch_param) \
            if entry["global_scratch"] else (0, 0, -1)
        out.append((program, label, entry["cubin"], entry["ptx"], entry["name"], entry["shared"], *scratch))
        if number == oldest:  # PTX of the oldest architecture: the driver JITs it on newer GPUs
            # (labelled by its own .target: sm_90a PTX is compute_90a and runs on sm_90 only)
            out.append((program, "compute_" + label[3:], entry["ptx"].encode(), "", entry["name"], entry["shared"],
                        *scratch))
    return out


def _tactic_text(rec: RecordedPlugin, program: int) -> str:
    c = rec.doc["configs"][program]
    return shorten(", ".join(f"{k}={v}" for k, v in c.items() if k != "requires"), 300)


def _check_metadata(rec: RecordedPlugin, program: int, number: int, entry: Dict[str, Any]) -> None:
    problem = None
    if entry["profile_scratch"]:
        problem = (f"it needs {entry['profile_scratch']} bytes of profile scratch memory (Triton's instrumentation "
                   "is on); kernelop launches kernels built without it")
    elif entry["num_ctas"] != 1:
        problem = f"it launches clusters of {entry['num_ctas']} CTAs, which kernelop does not launch yet"
    elif entry["cooperative"] or entry["pdl"]:
        problem = "it needs a cooperative or programmatic-dependent launch, which kernelop does not make yet"
    elif entry["num_warps"] != rec.compile_configs[program]["options"]["num_warps"]:
        problem = f"Triton compiled it for {entry['num_warps']} warps, not the config's"
    if problem:
        raise ValueError(f"op {shorten(rec.op_name)}: tactic {program} ({_tactic_text(rec, program)}) on "
                         f"sm_{number}: {problem}")


_ENTRY_FORMAT = 2  # bump when an entry's fields change
_ENTRY_INTS = ("shared", "global_scratch", "global_scratch_align", "profile_scratch", "num_ctas", "num_warps")


def _cached(identity: str) -> Optional[Dict[str, Any]]:
    payload = _kernelop.cache_load(identity)
    if payload is None:
        return None
    try:  # the entry's checksum is verified; its content is still checked like any input (check_binaries)
        head, _, rest = payload.partition(b"\n")
        meta = json.loads(head)
        n_cubin, n_ptx = meta["cubin_bytes"], meta["ptx_bytes"]
        if not (isinstance(meta["name"], str) and all(type(meta[k]) is int and meta[k] >= 0 for k in _ENTRY_INTS)
                and all(type(meta[k]) is bool for k in ("cooperative", "pdl"))
                and type(n_cubin) is int and type(n_ptx) is int and len(rest) == n_cubin + n_ptx >= n_cubin >= 0):
            return None
        return {**{k: meta[k] for k in _ENTRY_INTS + ("name", "cooperative", "pdl")},
                "cubin": bytes(rest[:n_cubin]), "ptx": rest[n_cubin:].decode()}
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
        return None


def _store(identity: str, entry: Dict[str, Any]) -> None:
    ptx = entry["ptx"].encode()
    meta = {k: v for k, v in entry.items() if k not in ("cubin", "ptx")}
    meta.update(cubin_bytes=len(entry["cubin"]), ptx_bytes=len(ptx))
    _kernelop.cache_store(identity, json.dumps(meta, sort_keys=True).encode() + b"\n" + entry["cubin"] + ptx)
