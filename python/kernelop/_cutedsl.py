"""CuTe DSL kernels as kernelop ops: ko.cutedsl, the reference's name (torch_tensorrt.annotation.cutedsl).

``launch_fn`` is what a user writes to call a CuTe DSL kernel from PyTorch: it takes the op's inputs, allocates and
returns the outputs, wraps tensors with ``from_dlpack`` and calls one ``@cute.jit`` host function, which launches one
``@cute.kernel``. kernelop runs it once on fake tensors with symbolic sizes and intercepts the call. It then compiles
the host function with ``cute.compile`` (every tensor with a dynamic layout, so one kernel serves every size) for
each config and architecture, and reads the lowered host function (kernelop._llvm_host): the kernel's arguments (a
tensor is a by-value struct of its pointer and its dynamic shape and stride values, whatever layout algebra the host
did to them), the grid, the block and the dynamic shared memory, all as expressions of the op's input sizes. The
result is an ordinary kernelop spec with struct parameters (docs/spec-format.md) whose machine code is the DSL's
CUBIN and PTX; the op runs from C++ with no Python and no CuTe DSL, and packages like any other (docs/cutedsl.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import inspect
import json
import re
import sys
import tempfile
import threading
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import torch

from . import _kernelop, _llvm_host as H
from ._dtypes import DTYPES
from ._recording import (CompiledKernel, CompileJob, Dsl, Handlers, RecordedPlugin, Recording, check_archs,
                         check_config_keys, check_configs, check_output_names, count, float_scalar_name, from_inputs,
                         int_scalar_name, select_over_configs, spec_archs, user_requires)
from ._recording import sizes
from ._symbolic import canonical, shorten, uses_dims

_CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: the one launch attribute kernelop makes
DEFAULT_ARCHS = ("sm_80", "sm_90a")  # CUBIN each (sm_90a: Hopper's wgmma/TMA), plus the PTX of the oldest
_DTYPES = tuple(d.torch for d in DTYPES if d.cutedsl)  # what kernelop passes to CuTe DSL kernels


@dataclass(frozen=True)
class CuteDslSpec:
    """``ko.cutedsl(launch_fn, configs, arch)``: a CuTe DSL launch to record, its configs (each a tactic: values of
    the @cute.jit function's ``cutlass.Constexpr`` parameters) and the architectures to compile for."""

    launch_fn: Callable[..., Any]
    configs: Tuple[Dict[str, Any], ...] = ()
    archs: Optional[Tuple[str, ...]] = None
    specialize: Any = None  # the values of sizes the host code compiles in (Note [sizes as ints])
    outputs: Optional[Tuple[str, ...]] = None  # the names of what launch_fn returns, in order
    first_use: bool = False  # a size outside `specialize` is compiled when first called (Note [first-use growth])


def cutedsl(launch_fn: Callable[..., Any], configs: Optional[Sequence[Dict[str, Any]]] = None,
            arch: Union[None, str, Sequence[str]] = None, specialize: Any = None,
            outputs: Optional[Sequence[str]] = None, first_use: bool = False) -> CuteDslSpec:
    """A CuTe DSL kernel spec (the reference's ``tta.cutedsl``). ``configs`` set ``cutlass.Constexpr`` parameters of
    the ``@cute.jit`` function launch_fn calls, each a tactic; ``arch`` (``"sm_90a"`` or a list) replaces the default
    architectures (sm_80 and sm_90a CUBINs, plus the oldest one's PTX). ``specialize``: the values of each size the
    host code compiles in (QuACK's N: ``[4096, 8192]``, or ``{"dim(x, 1)": [...]}``), one kernel each; other sizes
    are refused, unless ``first_use=True``: then a size outside them (or every size but the example's, with no list)
    is compiled when the op is first called with it, and kept. ``outputs``: the names of the tensors launch_fn
    returns, in order (by default each is named after the host function's parameter it is passed to); a backward
    reads them and their gradients by these names."""
    return CuteDslSpec(launch_fn, check_configs("kernelop.cutedsl", launch_fn, configs),
                       spec_archs("kernelop.cutedsl", arch, cutedsl_archs),
                       sizes.check_specialize("kernelop.cutedsl", specialize),
                       check_output_names("kernelop.cutedsl", outputs),
                       sizes.check_first_use("kernelop.cutedsl", first_use))


def cutedsl_archs(where: str, archs: Any, name: str = "archs") -> List[str]:
    """The CuTe DSL's architectures: 'sm_NN' or 'sm_NNa' each (sm_90a: Hopper's wgmma and TMA)."""
    return check_archs(where, archs, r"sm_[1-9][0-9]{1,2}a?", "the CuTe DSL", "'sm_NN' or 'sm_NNa' such as 'sm_90a'",
                       name)


@dataclass
class _Wrapped:
    fake: torch.Tensor
    assumed_align: Optional[int]
    layout: Any = None  # the fake CuTe tensor cute.compile was given for it (its layout as the author wrote it)
    # from_dlpack's marks (Note [from_dlpack marks]): use_32bit_stride, and each mode's divisibility
    # (mark_compact_shape_dynamic), and the unit-stride mode (mark_layout_dynamic's leading_dim)
    stride_32bit: bool = False
    divisibility: Dict[int, int] = field(default_factory=dict)
    leading_dim: Optional[int] = None


@dataclass
class _Call:
    body: Callable[..., Any]  # the @cute.jit function's own Python function
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    wrapped: Dict[int, _Wrapped]  # id(CuTe tensor) -> the fake tensor from_dlpack wrapped
    target: Any = None  # a compiled call's: what cute.compile was given (Note [compiled host functions])
    options: str = ""  # and the options it was given


@dataclass
class _Compiled:
    """What cute.compile returned while recording (Note [compiled host functions]): the host function and the
    arguments it was compiled with, called later like the compiled function (recorded while recording, compiled for
    real and run when called on any other thread or after the recording)."""

    fn: Any  # the @cute.jit function, bound method or object (its @cute.jit __call__) given to cute.compile
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    compile: Callable[..., Any]  # the DSL's own cute.compile
    real: Any = None  # the real compilation, made on first use outside a recording

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(hasattr(a, "_kop_placeholder") for a in (*self.args, *self.kwargs.values())):
            raise RuntimeError("this CuTe DSL function was compiled while kernelop recorded an op, with from_dlpack "
                               "tensors kernelop made for the recording (a library's cache kept it): compile it "
                               "again (clear that cache) to run it")
        if self.real is None:
            self.real = self.compile(self.fn, *self.args, **self.kwargs)
        return self.real(*args, **kwargs)


@dataclass
class _CompiledCall:
    compiled: _Compiled
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    wrapped: Dict[int, _Wrapped]
    normalized: Optional["_Call"] = None  # as a @cute.jit call (_normalized)


# Note [from_dlpack marks]: a tensor from_dlpack wraps is compiled with a fully dynamic layout (one kernel for every
# size), unit stride innermost, in global memory, and with what its author marked on it: use_32bit_stride (32-bit
# stride fields), mark_compact_shape_dynamic(mode, divisibility=d) (the size of `mode`, and the strides outside it, a
# multiple of d) and mark_layout_dynamic(leading_dim) (that mode's stride 1). The layout is then the op's, as a fake
# tensor's (Note [compiled host functions]): each assumption a requirement on the contiguous tensors kernelop passes
# (dim(x, 1) % 8 == 0). A mark's stride_order must be the contiguous one.

# Note [compiled host functions]: libraries compile ahead and call the result, as QuACK does:
#     compiled = cute.compile(Softmax(dtype, N), fake_x, fake_out, make_fake_stream(use_tvm_ffi_env_stream=True),
#                             options="--enable-tvm-ffi")
#     compiled(x, out)          # torch tensors; the stream is the caller's current one
# While recording, cute.compile returns a _Compiled and its call is the launch: each argument cute.compile got is
# paired with the one the call passes (in order; a stream the TVM FFI takes from the caller's context is not passed),
# so a fake CuTe tensor (cute.runtime.make_fake_tensor) is the tensor the call passes in its place, compiled with the
# layout the author wrote: static sizes and strides, divisibility and alignment, each an assumption kernelop states
# as a requirement of the op (an output's alignment as its "align"). kernelop then compiles the host function itself
# for each architecture with the same arguments (its stream a plain one; without the TVM FFI, whose host function
# kernelop does not read) and reads the launch as for a @cute.jit call. Sizes the host code compiles in (N in
# Softmax(dtype, N)) are specialised (Note [sizes as ints] in kernelop/_recording/sizes.py).
_LIBRARY_CACHES = (("quack.cache", "CACHE_ENABLED"),)
"""(module, flag): on-disk caches of compiled kernels in libraries kernelop records, off while recording: a kernel
loaded from disk never goes through cute.compile, and nothing a recording compiles is a kernel to keep."""
_DEVICE_CACHES = (("quack.cute_dsl_utils", "_get_device_capacity_cached"),)
"""(module, function): libraries' caches of what the device is (functools caches), cleared when recordings start and
when the last ends: a recording answers device queries for the architectures it compiles for, not the device."""

Argument = Tuple[str, Tuple[Any, ...]]
"""A host argument: (parameter, ("tensor", name, _Wrapped) | ("int", expression) | ("float", name) |
("float_const", value) | ("stream",))."""


@dataclass(eq=False)
class CuteProgram:
    """What compiling one tactic needs beyond its constexprs (its compile_configs entry's "program"): the host
    function's run-time arguments and, for a compiled function's call, what cute.compile was given. Size classes
    (Note [size classes]) each have their own: QuACK's Softmax(dtype, N) object and fake tensors hold their N."""

    dynamic: List[Argument]  # the host function's run-time arguments
    compiled_call: Optional[Tuple[Any, Dict[str, Any], str]] = None  # a compiled call's (fn, arguments, options)

    def _key(self) -> str:
        """What the program compiles, as text: two recordings with equal keys compile the same (RecordedPlugin
        recordings are compared, rank-free recording)."""
        args = [(p, d[0], (d[1], str(d[2].layout), d[2].assumed_align) if d[0] == "tensor" else d[1:])
                for p, d in self.dynamic]
        call = None if self.compiled_call is None else (repr(type(_jit_target(self.compiled_call[0]))),
                                                         sorted(vars(self.compiled_call[0]).items(), key=str)
                                                         if hasattr(self.compiled_call[0], "__dict__") else None,
                                                         self.compiled_call[2])
        return repr((args, call))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CuteProgram) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


@dataclass
class CuteState:
    """What compiling a recording needs beyond each tactic's compile_configs entry."""

    where: str  # the recording's, in messages
    compiled: Dict[Tuple[int, str], Any] = field(default_factory=dict)  # (config, arch) -> (cute.compile's, args)


# -- the launch -----------------------------------------------------------------------------------------------------

def _intercept(calls: List[Any]) -> Handlers:
    """While recording (on this thread, Note [interception] in kernelop/_recording/interception.py): from_dlpack of a
    fake tensor wraps a small real placeholder (its layout is replaced by a dynamic one before compiling), and a call
    of a @cute.jit function is recorded instead of compiled and run."""
    import cutlass.base_dsl.dsl as dsl
    import cutlass.cute.runtime as runtime
    from cutlass.base_dsl.compiler import CompileCallable
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _disable_current_modes

    wrapped: Dict[int, _Wrapped] = {}

    def init(original: Any, self: Any, tensor: Any, assumed_align: Optional[int] = None,
             use_32bit_stride: bool = False, *args: Any, **kwargs: Any) -> None:
        if not isinstance(tensor, FakeTensor):
            return original(self, tensor, assumed_align, use_32bit_stride, *args, **kwargs)
        with _disable_current_modes():
            placeholder = _placeholder(tensor)
        original(self, placeholder, assumed_align, use_32bit_stride, *args, **kwargs)
        self._kop_placeholder = placeholder  # kept alive with the wrapper
        wrapped[id(self)] = _Wrapped(tensor, assumed_align, stride_32bit=bool(use_32bit_stride))
        if use_32bit_stride:
            wrapped[id(self)].layout = _dynamic(wrapped[id(self)])

    def mark_layout(original: Any, self: Any, leading_dim: Optional[int] = None) -> Any:
        w = wrapped.get(id(self))
        if w is not None and leading_dim is not None:
            m = _mode(w, leading_dim, "mark_layout_dynamic's leading_dim")
            if m != w.fake.dim() - 1:
                raise ValueError(f"mark_layout_dynamic's leading_dim {leading_dim} is not the last mode: kernelop "
                                 "passes contiguous tensors, whose unit stride is the last mode's")
            w.leading_dim = m
            w.layout = _dynamic(w)
        return original(self, leading_dim) if w is None else self

    def mark_shape(original: Any, self: Any, mode: int, stride_order: Any = None, divisibility: int = 1) -> Any:
        w = wrapped.get(id(self))
        if w is None:
            return original(self, mode, stride_order, divisibility)
        m = _mode(w, mode, "mark_compact_shape_dynamic's mode")
        if isinstance(divisibility, bool) or not isinstance(divisibility, int) or divisibility < 1:
            raise ValueError(f"mark_compact_shape_dynamic's divisibility must be an int >= 1, got "
                             f"{shorten(repr(divisibility))}")
        if stride_order is not None and tuple(stride_order) != tuple(range(w.fake.dim())):
            raise ValueError(f"mark_compact_shape_dynamic's stride_order {shorten(repr(stride_order))}: kernelop "
                             f"passes contiguous tensors, whose stride_order is {tuple(range(w.fake.dim()))}")
        w.divisibility[m] = divisibility
        w.layout = _dynamic(w)
        return self

    def func(original: Any, self: Any, body: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(_Call(body, args, kwargs, wrapped))
        return None

    def compile_(original: Any, self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        _sizes_in(fn)
        args, kwargs = _size_value(args), _size_value(kwargs)
        if _symbolic_in((args, kwargs)):
            raise ValueError("cute.compile is given a size of the inputs where kernelop cannot make it the int it is "
                             "compiled in (a dataclass or partial): pass it as an int")
        return _Compiled(fn, args, kwargs, functools.partial(original, self))

    def fake_tensor(original: Any, self: Any, dtype: Any, shape: Any, *args: Any, stride: Any = None,
                    **kwargs: Any) -> None:
        shape = tuple(_size_value(x) for x in shape) if isinstance(shape, (tuple, list)) else shape
        stride = tuple(_size_value(x) for x in stride) if isinstance(stride, (tuple, list)) else stride
        original(self, dtype, shape, *args, stride=stride, **kwargs)

    def call_compiled(original: Any, self: _Compiled, *args: Any, **kwargs: Any) -> Any:
        calls.append(_CompiledCall(self, args, kwargs, wrapped))
        return None

    def compiled_before(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("launch_fn called a CuTe DSL function compiled before this recording (a library's cache of "
                         "compiled kernels keeps them, as QuACK's jit_cache does): kernelop records what cute.compile "
                         "is given, which it did not see; clear that cache (QuACK: Softmax.compile.cache_clear()), "
                         "or record the op before running the kernel")

    precompiled = {(cls, "__call__"): compiled_before for cls in _compiled_function_classes()}
    return {**precompiled, (runtime._Tensor, "__init__"): init, (dsl.BaseDSL, "_func"): func,
            (CompileCallable, "__call__"): compile_, (_Compiled, "__call__"): call_compiled,
            (runtime._FakeTensor, "__init__"): fake_tensor, (runtime._Tensor, "mark_layout_dynamic"): mark_layout,
            (runtime._Tensor, "mark_compact_shape_dynamic"): mark_shape}


def _mode(w: _Wrapped, mode: Any, what: str) -> int:
    """A mode of the tensor `w` wraps, counted from 0 (a negative one from the end)."""
    rank = w.fake.dim()
    if isinstance(mode, bool) or not isinstance(mode, int) or not -rank <= mode < rank:
        raise ValueError(f"{what} {shorten(repr(mode))} is no mode of a tensor of rank {rank}")
    return mode % rank


def _compiled_function_classes() -> List[type]:
    """The classes of what cute.compile returns (the TVM FFI's only where its package is installed)."""
    from cutlass.base_dsl.jit_executor import JitCompiledFunction
    from cutlass.cutlass_dsl.cuda_jit_executor import CudaDialectJitCompiledFunction
    classes: List[type] = [JitCompiledFunction, CudaDialectJitCompiledFunction]
    if "tvm_ffi" in sys.modules:
        from cutlass.cutlass_dsl.tvm_ffi_provider import TVMFFIJitCompiledFunctionBase
        classes.append(TVMFFIJitCompiledFunctionBase)
    return classes


def _size_value(x: Any, depth: int = 0) -> Any:
    """A size host code hands the DSL as a torch SymInt (QuACK's N = x.size(1) in a fake tensor's shape, in
    Softmax(dtype, N)) as the int it is compiled in (Note [sizes as ints]), inside tuples, lists and dicts too;
    anything else as it is."""
    if isinstance(x, torch.SymInt):
        return int(x)
    if depth < 8 and isinstance(x, (tuple, list)) and not hasattr(x, "_fields"):
        return type(x)(_size_value(v, depth + 1) for v in x)
    if depth < 8 and isinstance(x, dict):
        return {k: _size_value(v, depth + 1) for k, v in x.items()}
    return x


def _symbolic_in(x: Any, depth: int = 0) -> bool:
    """Whether a torch SymInt (or another symbolic value) is left in x, at any depth kernelop looks at."""
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if depth >= 8:
        return False
    if isinstance(x, (tuple, list, set, frozenset)):
        return any(_symbolic_in(v, depth + 1) for v in x)
    if isinstance(x, dict):
        return any(_symbolic_in(v, depth + 1) for v in x.values())
    if isinstance(x, functools.partial):
        return _symbolic_in((x.args, x.keywords), depth + 1)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return any(_symbolic_in(getattr(x, f.name), depth + 1) for f in dataclasses.fields(x))
    return False


def _sizes_in(fn: Any) -> None:
    """The sizes an object given to cute.compile holds (Softmax(dtype, N).N, in containers too) made ints
    (_size_value), in place: the object is compiled again after the recording, when the SymInts mean nothing. A size
    left anywhere else (a dataclass, a partial) is refused: it would be compiled in at the example's value."""
    owner = fn.__self__ if inspect.ismethod(fn) else fn
    if inspect.isfunction(owner) or not hasattr(owner, "__dict__"):
        return
    for k, v in list(vars(owner).items()):
        converted = _size_value(v)
        if converted is not v:
            setattr(owner, k, converted)
        if _symbolic_in(converted):
            raise ValueError(f"the {type(owner).__name__} given to cute.compile holds a size of the inputs in its "
                             f"attribute '{shorten(k)}' where kernelop cannot make it the int it is compiled in (a "
                             "tuple, list or dict of sizes is; a dataclass or partial is not): hold it as an int")


_caches_lock = threading.Lock()
_caches_off: List[Any] = [0, []]  # [recordings under way, (module, flag, value before the first)]


@contextlib.contextmanager
def _library_caches_off() -> Iterator[None]:
    """_LIBRARY_CACHES off for the duration (the libraries already imported); recordings on several threads share
    it: the first turns them off, the last restores them."""
    with _caches_lock:
        if _caches_off[0] == 0:
            _clear_device_caches()
            _caches_off[1] = []
            for module, flag in _LIBRARY_CACHES:
                m = sys.modules.get(module)
                if m is not None and hasattr(m, flag):
                    _caches_off[1].append((m, flag, getattr(m, flag)))
                    setattr(m, flag, False)
        _caches_off[0] += 1
    try:
        yield
    finally:
        with _caches_lock:
            _caches_off[0] -= 1
            if _caches_off[0] == 0:
                for m, flag, value in _caches_off[1]:
                    setattr(m, flag, value)
                _clear_device_caches()


def _clear_device_caches() -> None:
    for module, name in _DEVICE_CACHES:
        clear = getattr(getattr(sys.modules.get(module), name, None), "cache_clear", None)
        if clear is not None:
            clear()


def _one_launch(where: str, calls: List[Any]) -> Tuple[Any, str]:
    if not calls:
        raise ValueError(f"{where}: launch_fn called no @cute.jit function and no function cute.compile returned "
                         "(expected one call, with the tensors wrapped by cutlass.cute.runtime.from_dlpack or, for a "
                         "compiled function, passed as they are; a function compiled before the recording, such as "
                         "one a library kept in its cache, cannot be recorded)")
    call = _normalized(where, calls[0])  # the op's own kernel; later ones are its then (Note [recorded programs])
    return call, _host_name(call.target if call.target is not None else call.body)


def _normalized(where: str, call: Any) -> "_Call":
    """A launch as a @cute.jit call (a compiled function's call paired with its compilation: _as_call)."""
    if isinstance(call, _Call):
        return call
    if call.normalized is None:
        call.normalized = _as_call(where, call)
    return call.normalized


def _launch_tensors(call: Any) -> Tuple[Dict[str, Any], Set[str]]:
    """The tensors a launch passes, by the host function's parameter, and the names its constexprs take."""
    try:
        c = _normalized("launch_fn", call)
        sig = inspect.signature(c.body)
        bound = sig.bind(*c.args, **c.kwargs)
    except (TypeError, ValueError):  # the translation names the mismatch
        return {}, set()
    tensors = {p: c.wrapped[id(v)].fake for p, v in bound.arguments.items() if id(v) in c.wrapped}
    return tensors, {p for p in sig.parameters if _annotation_kind(sig.parameters[p].annotation) == "constexpr"}


def _host_name(fn: Any) -> str:
    """The host function's name: a method __call__'s class's (QuACK's Softmax), else its own."""
    if inspect.ismethod(fn) and fn.__name__ == "__call__":
        return type(fn.__self__).__name__
    if not inspect.isfunction(fn) and not inspect.ismethod(fn) and hasattr(fn, "__call__"):
        return type(fn).__name__
    return getattr(fn, "__name__", type(fn).__name__)


def _jit_target(fn: Any) -> Any:
    """What to take the host function's parameters from: a function or bound method itself, an object's __call__."""
    return fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)


def _as_call(where: str, c: _CompiledCall) -> _Call:
    """A compiled function's call as a @cute.jit call (Note [compiled host functions]): each parameter's value as
    cute.compile got it, a tensor's paired with the tensor the call passes and a run-time scalar's with the call's
    value."""
    import cutlass.cute as cute
    from torch._subclasses.fake_tensor import FakeTensor
    fn, target = c.compiled.fn, _jit_target(c.compiled.fn)
    name = shorten(_host_name(fn))
    kwargs = {k: v for k, v in c.compiled.kwargs.items() if k != "options"}
    try:
        bound = inspect.signature(target).bind(*c.compiled.args, **kwargs)
    except TypeError as e:
        raise ValueError(f"{where}: cute.compile's arguments do not match {name}'s parameters: "
                         f"{shorten(e, 300)}") from None
    bound.apply_defaults()
    params = inspect.signature(target).parameters
    values: Dict[str, Any] = dict(bound.arguments)
    # The compiled function takes every argument but the compile-time ones, in order (a stream the TVM FFI takes
    # from the caller's context is not passed).
    tvm_ffi = "--enable-tvm-ffi" in str(c.compiled.kwargs.get("options", ""))
    run_time = [p for p, v in values.items() if _annotation_kind(params[p].annotation) != "constexpr"
                and not (tvm_ffi and getattr(v, "use_tvm_ffi_env_stream", False))]
    if c.kwargs:
        raise ValueError(f"{where}: the function cute.compile returned for {name} is called with keyword arguments "
                         f"({shorten(', '.join(c.kwargs), 200)}); kernelop pairs its arguments with cute.compile's "
                         "in order")
    if len(c.args) != len(run_time):
        raise ValueError(f"{where}: the function cute.compile returned for {name} is called with {len(c.args)} "
                         f"arguments; it takes {len(run_time)} ({shorten(', '.join(run_time), 300)})")
    wrapped = dict(c.wrapped)
    paired: Dict[int, str] = {}
    for p, given in zip(run_time, c.args):
        compiled_with = values[p]
        what = f"{name}'s argument '{shorten(p)}'"
        if isinstance(compiled_with, cute.runtime._FakeTensor) or id(compiled_with) in c.wrapped:
            if id(compiled_with) in paired:
                raise ValueError(f"{where}: cute.compile of {name} is given one fake tensor for its parameters "
                                 f"'{paired[id(compiled_with)]}' and '{shorten(p)}'; kernelop pairs each with the "
                                 "tensor the call passes: give each parameter a fake tensor of its own")
            paired[id(compiled_with)] = shorten(p)
            tensor = c.wrapped[id(given)].fake if id(given) in c.wrapped else given
            if not isinstance(tensor, FakeTensor):
                raise ValueError(f"{where}: {what} was compiled as a tensor but is called with "
                                 f"{shorten(repr(given))}")
            if isinstance(compiled_with, cute.runtime._FakeTensor):
                _check_element_type(where, what, compiled_with, tensor)
                wrapped[id(compiled_with)] = _Wrapped(tensor, compiled_with._assumed_align, compiled_with)
            else:  # a from_dlpack tensor: its marks (Note [from_dlpack marks]), the call's tensor
                prototype = c.wrapped[id(compiled_with)]
                _check_element_type(where, what, compiled_with, tensor)
                if prototype.fake.dim() != tensor.dim():
                    raise ValueError(f"{where}: {what} was compiled for a tensor of rank {prototype.fake.dim()} but "
                                     f"is called with one of rank {tensor.dim()}")
                wrapped[id(compiled_with)] = dataclasses.replace(prototype, fake=tensor)
        elif compiled_with is None:
            if given is not None:
                raise ValueError(f"{where}: {what} was compiled as None (absent) but is called with "
                                 f"{shorten(repr(given))}")
        elif _is_stream(compiled_with):
            pass  # the stream: the launch's own
        else:
            values[p] = given  # a run-time scalar: the call's value
    options = c.compiled.kwargs.get("options", "")
    if not isinstance(options, str):
        raise ValueError(f"{where}: cute.compile of {name} got options={shorten(repr(options))}; kernelop reads "
                         "options given as one string")
    return _Call(target, (), values, wrapped, target=fn, options=options)


_OWN_OPTIONS = ("--enable-tvm-ffi", "--gpu-arch", "--keep-ptx", "--keep-cubin", "--dump-dir")
"""cute.compile options kernelop sets itself when it compiles a recorded host function (the TVM FFI off: kernelop
reads the plain host function and launches the kernel itself)."""


def _kept_options(where: str, options: str) -> str:
    """The author's cute.compile options without those kernelop sets (_OWN_OPTIONS)."""
    words = options.split()
    kept: List[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        name = w.split("=", 1)[0]
        if name in _OWN_OPTIONS:
            takes_value = name in ("--gpu-arch", "--dump-dir") and "=" not in w
            i += 2 if takes_value else 1
            continue
        kept.append(w)
        i += 1
    return " ".join(kept)


def _check_element_type(where: str, what: str, layout: Any, tensor: torch.Tensor) -> None:
    from cutlass.cute.runtime import from_dlpack
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        try:
            expected = from_dlpack(torch.zeros(1, dtype=tensor.dtype)).element_type
        except Exception as e:  # noqa: BLE001 - the DSL's own refusal of the dtype, named
            raise ValueError(f"{where}: {what} is a {tensor.dtype} tensor, which the CuTe DSL does not take: "
                             f"{shorten(e, 200)}") from None
    if layout.element_type != expected:
        raise ValueError(f"{where}: {what} was compiled for {layout.element_type} elements but is called with a "
                         f"{tensor.dtype} tensor")


def _is_stream_type(annotation: Any) -> bool:
    import cuda.bindings.driver as driver
    return annotation is driver.CUstream


def _is_stream(value: Any) -> bool:
    import cuda.bindings.driver as driver
    from cutlass.runtime import _FakeStream
    return isinstance(value, (_FakeStream, driver.CUstream))


def _placeholder(fake: torch.Tensor) -> torch.Tensor:
    # Sizes of at least 2 (a size-1 dim would make the unit-stride dim ambiguous); contiguous like kernelop's inputs.
    return torch.zeros([2 + i for i in range(fake.dim())], dtype=fake.dtype)


def _dynamic(w: _Wrapped) -> Any:
    """What a from_dlpack tensor is compiled as: a fake tensor in global memory (where the op's tensors are: copies
    the DSL checks to read global memory compile) with a fully dynamic layout, unit stride innermost, and the
    alignment from_dlpack was given (the element's by default), so one kernel serves every size."""
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        element = from_dlpack(torch.zeros(1, dtype=w.fake.dtype)).element_type
    rank = w.fake.dim()
    unit = rank - 1 if w.leading_dim is None else w.leading_dim
    # A mode's divisibility carries to the strides of the modes outside it (a contiguous stride is a product of the
    # sizes inside it): mark_compact_shape_dynamic's propagation.
    stride_div = [max([w.divisibility.get(m, 1) for m in range(a + 1, rank)] + [1]) for a in range(rank)]
    wide = cute.sym_int if w.stride_32bit else cute.sym_int64
    return cute.runtime.make_fake_tensor(
        element, tuple(cute.sym_int(divisibility=w.divisibility.get(a, 1)) for a in range(rank)),
        stride=tuple(1 if a == unit else wide(divisibility=stride_div[a]) for a in range(rank)),
        assumed_align=w.assumed_align)


Mode = Tuple[Optional[int], int]
"""One size or stride of a CuTe layout: (its static value or None when dynamic, the divisibility it assumes)."""


def _layout(t: Any, name: str) -> Tuple[List[Mode], List[Mode]]:
    """A tensor's sizes and strides as CuTe prints its layout (a from_dlpack tensor's ``o (?,?):(?{i64},1)``, a fake
    tensor's ``(?{div=1}, 4096), (?{i64 div=8}, 1)``); flat layouts only."""
    text = str(t)
    m = re.search(r" o \(([^()]*)\):\(([^()]*)\)>$", text) or \
        re.fullmatch(r"FakeTensor<[^,<>]+, \(([^()]*)\), \(([^()]*)\)>", text)
    if not m:
        raise ValueError(f"tensor '{name}' has the layout {shorten(text, 200)}, which kernelop does not read (a flat "
                         "shape and stride)")
    out: List[List[Mode]] = []
    for part in (m.group(1), m.group(2)):
        modes: List[Mode] = []
        for token in (x.strip() for x in part.split(",") if x.strip()):
            div = re.search(r"div=(\d+)", token)
            if token.startswith("?"):
                modes.append((None, int(div.group(1)) if div else 1))
            elif re.fullmatch(r"\d+", token):
                modes.append((int(token), 1))
            else:
                raise ValueError(f"tensor '{name}' has the layout {shorten(text, 200)}, whose '{shorten(token)}' "
                                 "kernelop does not read")
        out.append(modes)
    return out[0], out[1]


def _layout_leaves(t: Any, name: str) -> List[H.E]:
    """The expressions of a dynamic tensor's fields after its pointer: its dynamic shape, then its dynamic strides."""
    shape, stride = _layout(t, name)
    return [("leaf", f"{fn}({name}, {axis})", True) for modes, fn in ((shape, "dim"), (stride, "stride"))
            for axis, (static, _) in enumerate(modes) if static is None]


def _layout_requirements(where: str, t: Any, name: str, rank: int, dims: List[str]) -> List[str]:
    """What the layout a fake tensor was compiled with assumes (Note [compiled host functions]), as requirements on
    the tensor kernelop passes, whose sizes are `dims` and whose strides are contiguous (kernelop passes inputs
    contiguous and allocates outputs so): each static size and stride its value, each divisibility a multiple."""
    shape, stride = _layout(t, name)
    if len(shape) != rank or len(stride) != rank:
        raise ValueError(f"{where}: tensor '{name}' has rank {rank} but was compiled with the layout "
                         f"{shorten(str(t), 200)}")
    out: List[str] = []
    # the sizes in the strides: those compiled in as their values (which the requirements on the sizes state)
    sized = [str(static) if static is not None else d for d, (static, _) in zip(dims, shape)]
    for axis in range(rank):
        strides = " * ".join(f"({d})" for d in sized[axis + 1:]) or "1"
        for value, (static, div) in ((dims[axis], shape[axis]), (strides, stride[axis])):
            text = f"({value}) == {static}" if static is not None else f"({value}) % {div} == 0" if div > 1 else ""
            if not text:
                continue
            text = canonical(text)
            try:
                known: Optional[int] = _kernelop.eval_expr(text, {})
            except ValueError:
                known = None  # it depends on the sizes
            if known == 0:
                raise ValueError(f"{where}: tensor '{name}' was compiled with the layout {shorten(str(t), 200)}, "
                                 f"which assumes {text}: never true of the tensors the op passes (contiguous, "
                                 "the last stride 1)")
            if known is None:
                out.append(text)
    return out


def _build(t: H.LType, values: Iterator[H.Value]) -> H.Value:
    if t[0] == "struct":
        return H.Struct(tuple(_build(f, values) for f in t[1]))
    if t[0] == "array":
        return H.Struct(tuple(_build(t[2], values) for _ in range(t[1])))
    return next(values)


def _annotation_kind(annotation: Any) -> str:
    """"tensor", "constexpr", "int", "float" or "" for a @cute.jit parameter's annotation."""
    import cutlass
    import cutlass.cute as cute
    if annotation is inspect.Parameter.empty:
        return ""
    origin = typing.get_origin(annotation) or annotation
    if origin is cutlass.Constexpr:
        return "constexpr"
    if annotation is cute.Tensor or (origin is typing.Union and cute.Tensor in typing.get_args(annotation)):
        return "tensor"
    if _is_stream_type(annotation):
        return "stream"
    if annotation in (cutlass.Int32, cutlass.Int64):
        return "int"
    if annotation is cutlass.Float32:
        return "float"
    return ""


# -- the call as a spec ---------------------------------------------------------------------------------------------

def _translate(ctx: Recording, spec: CuteDslSpec, call: _Call) -> RecordedPlugin:
    """The call as a kernelop spec: the host function compiled per config for the first architecture and read
    (kernelop._llvm_host) for the kernel's arguments and geometry, as expressions of the sizes."""
    where = ctx.where
    call = _normalized(where, call)
    host_name = _host_name(call.target if call.target is not None else call.body)
    jname = shorten(host_name)  # in messages
    try:
        bound = inspect.signature(call.body).bind(*call.args, **call.kwargs)
    except TypeError as e:
        raise ValueError(f"{where}: the call of {jname} does not match its parameters: {shorten(e, 300)}") from None
    bound.apply_defaults()
    params = inspect.signature(call.body).parameters
    constexpr_params = [p for p in params if _annotation_kind(params[p].annotation) == "constexpr"]

    # Outputs are named after the parameter they are passed to (never a Constexpr's name: those are the tunables).
    ctx.name_outputs({p: call.wrapped[id(v)].fake for p, v in bound.arguments.items() if id(v) in call.wrapped},
                     reserved=constexpr_params)
    dynamic, constexprs, requires, tensor_names, out_align, layouts = _arguments(ctx, call, bound, params)

    user_configs = list(spec.configs) or [{}]
    check_config_keys(where, user_configs, jname, "cutlass.Constexpr parameter", constexpr_params)
    tuned = [p for p in params if p != "requires" and any(p in c for c in user_configs)]
    ctx.check_config_values(user_configs, tuned, constexprs)
    values: List[Dict[str, Any]] = [{k: c.get(k, constexprs.get(k)) for k in tuned} for c in user_configs]

    shapes = [dict(s, align=out_align[s["name"]]) if s["name"] in out_align else s
              for s in ctx.output_shapes(ctx.meta_impl)]
    shape_of = {s["name"]: s["shape"] for s in shapes}
    for name, (layout, rank) in layouts.items():
        shape = shape_of.get(name, {"same_as": name})
        dims = [f"dim({shape['same_as']}, {a})" for a in range(rank)] if isinstance(shape, dict) else list(shape)
        requires += [r for r in _layout_requirements(where, layout, name, rank, dims) if r not in requires]
    requires += ctx.requirements()
    ctx.tactics = f"{count(len(user_configs), 'config')} make {count(len(user_configs), 'tactic')}"

    try:
        source = inspect.getsource(inspect.getmodule(call.body) or call.body)
    except (OSError, TypeError):
        source = inspect.getsource(call.body)
    doc: Dict[str, Any] = {
        "op": ctx.op_name,
        "kernel_name": host_name,  # the host function: each config's kernel has its own mangled entry
        "kernel_source": source,
        "cutedsl": {"version": importlib.metadata.version("nvidia-cutlass-dsl")},
        "inputs": ctx.inputs_json(),
        "outputs": shapes,
    }
    if tuned:
        doc["tunables"] = tuned
        doc["configs"] = [{**{k: int(v[k]) for k in tuned},
                           **({"requires": user_requires(c)} if c.get("requires") else {})}
                          for c, v in zip(user_configs, values)]
    # Validated before anything is compiled (kernelop's own rules, in C++): the parameters and the geometry are read
    # from the compiled host function, so they stand in here as what launch_fn passes (checked again once read).
    ctx.validate({
        **doc,
        "params": [d[1] if d[0] == "tensor" else {"expr": canonical(d[1][1])} if d[0] == "int" else
                   {"float": d[1]} if d[0] == "float_const" else d[1] for _, d in dynamic if d[0] != "stream"],
        "geometry": {"custom": {"grid": ["1", "1", "1"], "block": ["1", "1", "1"], "shared_mem": "0"}},
        **({"requires": list(dict.fromkeys(requires))} if requires else {}),
        **({"then": ctx.then} if ctx.then else {}),
    })
    compiled_call = None
    if call.target is not None:  # a compiled function's call: compiled again as the author compiled it
        compiled_call = (call.target, dict(bound.arguments), _kept_options(where, call.options))
    program = CuteProgram(dynamic, compiled_call)
    recorded = RecordedPlugin(ctx.op_name, doc, ctx.dsl, call.body, constexprs,
                              [{"constexprs": {**constexprs, **v}, "program": program} for v in values],
                              default_archs=spec.archs or DEFAULT_ARCHS, dsl_state=CuteState(where))
    guards = ctx.rec.guard_count()
    params_doc, geometry = _launch(recorded, values, tuned)
    if ctx.rec.guard_count() != guards:  # kernelop's own compile read a size: it was compiled in, unseen
        raise ValueError(f"{where}: {jname} reads a size of the inputs while kernelop compiles it (a size held in a "
                         "closure, a nested object or a partial reaches the DSL as it is and would be compiled in at "
                         "the example's value): hold sizes as ints in the object cute.compile is given, or in its "
                         "arguments")
    doc["params"] = params_doc
    doc["geometry"] = {"custom": geometry}
    exprs = geometry["grid"] + geometry["block"] + [geometry["shared_mem"]] + geometry.get("cluster", []) + \
        _param_exprs(params_doc)
    requires += [r for r in (f"rank({t.name}) == {t.rank}" for t in ctx.rec.tensors
                             if t.name not in tensor_names and uses_dims(exprs, t.name)) if r not in requires]
    if requires:
        doc["requires"] = list(dict.fromkeys(requires))
    if tuned:  # after the launch and its requirements, as they have always been written
        doc["tunables"] = doc.pop("tunables")
        doc["configs"] = doc.pop("configs")
    return recorded


def _arguments(ctx: Recording, call: _Call, bound: inspect.BoundArguments, params: Any
               ) -> Tuple[List[Argument], Dict[str, Any], List[str], List[str], Dict[str, int],
                          Dict[str, Tuple[Any, int]]]:
    """Each parameter of the @cute.jit function: a tensor, a run-time scalar or a compile-time constant. Returns the
    run-time ones (the host function's arguments), the constants, the requirements the tensors bring (an input's
    rank and assumed alignment), the tensors' names, the outputs' assumed alignments (OutputDecl::align) and the
    layouts tensors were compiled with (name -> (fake CuTe tensor, rank): Note [compiled host functions])."""
    where, jname = ctx.where, shorten(_host_name(call.target if call.target is not None else call.body))
    dynamic: List[Argument] = []
    constexprs: Dict[str, Any] = {}
    requires: List[str] = []
    tensor_names: List[str] = []
    out_align: Dict[str, int] = {}
    layouts: Dict[str, Tuple[Any, int]] = {}
    for p, value in bound.arguments.items():
        kind = _annotation_kind(params[p].annotation)
        what = f"{jname}'s argument '{shorten(p)}'"
        if value is None and call.target is not None:  # an absent optional tensor: compiled in
            constexprs[p] = None
            continue
        if kind == "stream" or _is_stream(value):
            dynamic.append((p, ("stream",)))
            continue
        if id(value) in call.wrapped:
            if kind not in ("tensor", ""):
                raise ValueError(f"{where}: {what} is a tensor but annotated {shorten(repr(params[p].annotation))}")
            w = call.wrapped[id(value)]
            name = ctx.tensor_name(w.fake, what)
            _check_not_a_view(ctx, w.fake, name, what)
            if w.fake.dtype not in _DTYPES:
                raise ValueError(f"{where}: {what} is {w.fake.dtype}, which kernelop passes to CuTe DSL kernels as "
                                 f"none of {', '.join(str(d) for d in _DTYPES)}")
            if w.fake.dim() == 0:
                raise ValueError(f"{where}: {what} is a 0-dim tensor; kernelop passes tensors of rank 1 or more")
            if name in tensor_names:
                raise ValueError(f"{where}: tensor '{shorten(name)}' is passed to {jname} twice; kernelop passes "
                                 "each tensor once")
            tensor_names.append(name)
            if name not in ctx.out_names:  # an output's rank follows from its shape, which the inputs give
                requires.append(f"rank({name}) == {w.fake.dim()}")
            if w.assumed_align is not None and w.assumed_align > w.fake.element_size():
                if name in ctx.out_names:  # kernelop allocates it so; a caller's buffer is checked at launch
                    if w.assumed_align > 256:
                        raise ValueError(f"{where}: {what} is an output from_dlpack assumes {w.assumed_align}-byte "
                                         "aligned; kernelop's allocations guarantee 256 bytes: assume at most that")
                    out_align[name] = int(w.assumed_align)
                else:
                    requires.append(f"aligned({name}, {int(w.assumed_align)})")
            if w.layout is not None:
                layouts[name] = (w.layout, w.fake.dim())
            dynamic.append((p, ("tensor", name, w)))
        elif _is_cute_tensor(value):
            raise ValueError(f"{where}: {what} is a CuTe tensor launch_fn made from something other than one of its "
                             "tensors (a scratch buffer or a host-side copy); kernelop records inputs and returned "
                             "outputs only")
        elif kind == "constexpr":
            if from_inputs(value):
                raise ValueError(f"{where}: Constexpr '{shorten(p)}' gets a value computed from the inputs (a size or "
                                 "a scalar input); it must be a Python constant or come from configs (the DSL "
                                 "compiles one kernel per value)")
            constexprs[p] = value
        elif kind == "int" and isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            scalar = int_scalar_name(value, ctx.rec)
            text = scalar or ctx.expr(value, f"{where}: {what}")
            # sizes are never negative (the recorder's symbols are positive), an int input may be
            never_negative = bool(value >= 0) if isinstance(value, int) else \
                scalar is None and bool(value.node.expr.is_nonnegative)
            dynamic.append((p, ("int", ("leaf", f"({text})", never_negative))))
        elif kind == "float" and isinstance(value, float) and float_scalar_name(value, ctx.rec) is not None:
            dynamic.append((p, ("float", float_scalar_name(value, ctx.rec))))
        elif kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool) and \
                not from_inputs(value):  # a literal the host code passes (QuACK's eps=1e-6)
            floats = [sc.name for sc in ctx.rec.scalars if sc.kind == "float"]
            if floats:  # (float(alpha) * 2 is a plain float too: a constant would freeze the example's alpha)
                raise ValueError(f"{where}: {what} is the float {value!r}, which is none of the op's float inputs "
                                 f"({', '.join(floats)}) passed as it is; kernelop passes a float literal as a "
                                 "constant only in an op without float inputs (one computed from an input on the "
                                 "host would be frozen): pass the input itself, or compute in the kernel")
            dynamic.append((p, ("float_const", float(value))))
        else:
            annotation = params[p].annotation
            hint = "unannotated" if annotation is inspect.Parameter.empty else \
                f"annotated {shorten(repr(annotation))}"
            raise ValueError(f"{where}: {what} is {shorten(repr(value))} ({hint}); kernelop passes "
                             "cute.Tensor arguments (from_dlpack of an input or output), float scalar inputs to "
                             "cutlass.Float32 parameters, sizes and int scalars to cutlass.Int32 parameters, and "
                             "compile-time values to cutlass.Constexpr parameters")
    return dynamic, constexprs, requires, tensor_names, out_align, layouts


def _check_not_a_view(ctx: Recording, t: torch.Tensor, name: str, what: str) -> None:
    """A CuTe tensor's sizes and strides are its op tensor's (dim(x, 0), stride(x, 0)): a view of it with other ones
    (x.t(), x[:, :n]) would be passed as x itself, so it is refused."""
    own = next((r.fake for r in ctx.rec.tensors if r.name == name), None)
    if own is None:
        own = next((o for n, o in zip(ctx.out_names, ctx.outputs) if n == name), None)
    if own is None:
        return

    def layout(x: torch.Tensor) -> List[str]:
        return [str(v.node.expr) if isinstance(v, torch.SymInt) else str(v) for v in (*x.shape, "|", *x.stride())]
    if layout(t) != layout(own):
        raise ValueError(f"{ctx.where}: {what} is a view of '{name}' with other sizes or strides; kernelop passes a "
                         f"CuTe tensor's sizes and strides from the op's own tensors: pass '{name}' itself (or a "
                         "copy of the view, .contiguous(), which is then the op's scratch)")


def _launch(recorded: RecordedPlugin, values: List[Dict[str, Any]], tuned: List[str]) -> Tuple[List[Any],
                                                                                               Dict[str, Any]]:
    """The launch (its arguments, grid, block, shared memory), read from the host function compiled for the first
    architecture, per config; every other compilation must agree (checked as they are made). A field whose value
    differs between configs (host-side tiling by a Constexpr tile size) is one expression over the tunables."""
    where = recorded.dsl_state.where
    launches = [_launch_of(recorded, i, recorded.default_archs[0])[0] for i in range(len(values))]
    first = launches[0]
    for i, launch in enumerate(launches[1:], 1):
        if _param_kinds(launch["params"]) != _param_kinds(first["params"]):
            raise ValueError(f"{where}: configs[{i}] changes the kernel's parameters (their number, types or "
                             "tensors); kernelop passes one parameter list to every config of an op")
    exprs_per_config = [_param_exprs(launch["params"]) for launch in launches]
    merged_exprs = exprs_per_config[0] if all(e == exprs_per_config[0] for e in exprs_per_config) or \
        not exprs_per_config[0] else select_over_configs(exprs_per_config, values, tuned)
    geometry: Dict[str, Any] = {}
    for key in ("grid", "block", "shared_mem", "cluster"):
        texts = [[*launch[key]] if key != "shared_mem" else [launch[key]] for launch in launches]
        merged = texts[0] if all(t == texts[0] for t in texts) else select_over_configs(texts, values, tuned)
        geometry[key] = merged if key != "shared_mem" else merged[0]
    if geometry["cluster"] == ["1", "1", "1"]:
        del geometry["cluster"]  # (a plain launch)
    return _with_exprs(first["params"], iter(merged_exprs)), geometry


def _fields(params: List[Any]) -> List[Any]:
    return [f for p in params for f in (p["struct"] if isinstance(p, dict) and "struct" in p else [p])]


def _param_kinds(params: List[Any]) -> Any:
    """The parameters with every expression blanked: what must be the same for every config."""
    def blank(f: Any) -> Any:
        return {**f, "expr": ""} if isinstance(f, dict) and "expr" in f else f
    return json.dumps([{"struct": [blank(f) for f in p["struct"]]} if isinstance(p, dict) and "struct" in p
                       else blank(p) for p in params])


def _param_exprs(params: List[Any]) -> List[str]:
    return [f["expr"] for f in _fields(params) if isinstance(f, dict) and "expr" in f]


def _with_exprs(params: List[Any], exprs: Iterator[str]) -> List[Any]:
    def one(f: Any) -> Any:
        return {**f, "expr": next(exprs)} if isinstance(f, dict) and "expr" in f else f
    return [{"struct": [one(f) for f in p["struct"]]} if isinstance(p, dict) and "struct" in p else one(p)
            for p in params]


def _is_cute_tensor(value: Any) -> bool:
    import cutlass.cute.runtime as runtime
    return isinstance(value, runtime._Tensor)


# -- compilation ----------------------------------------------------------------------------------------------------

def _compile(recorded: RecordedPlugin, config: int, arch: str) -> Any:
    """cute.compile of the host function for one config and architecture (memoised on the recording)."""
    import cutlass.cute as cute

    state: CuteState = recorded.dsl_state
    key = (config, arch)
    if key in state.compiled:
        return state.compiled[key]
    program: CuteProgram = recorded.compile_configs[config]["program"]
    kwargs: Dict[str, Any] = dict(recorded.compile_configs[config]["constexprs"])
    for p, d in program.dynamic:
        if d[0] == "tensor":
            w = d[2]
            kwargs[p] = w.layout if w.layout is not None else _dynamic(w)
        elif d[0] == "int":
            kwargs[p] = 7
        elif d[0] == "stream":
            kwargs[p] = cute.runtime.make_fake_stream()
        else:
            kwargs[p] = 1.0
    sig = inspect.signature(recorded.fn)
    args = [kwargs[p] for p in sig.parameters]
    fn, extra = recorded.fn, ""
    if program.compiled_call is not None:  # compiled as the author compiled it (Note [compiled host functions])
        fn, _, extra = program.compiled_call
    try:
        # The DSL hands back PTX and CUBIN only when asked to keep them, which also writes them to a folder.
        with tempfile.TemporaryDirectory(prefix="kernelop-cutedsl-") as dump:
            compiled = cute.compile(fn, *args, options=f"{extra} --gpu-arch {arch} --keep-ptx --keep-cubin "
                                                       f"--dump-dir {dump}".strip())
    except Exception as e:  # noqa: BLE001 - the DSL's compile error, named with the tactic
        raise RuntimeError(f"op {shorten(recorded.op_name)}: cute.compile of tactic {config} for {arch} failed: "
                           f"{type(e).__name__}: {e}") from e
    state.compiled[key] = (compiled, args)
    return state.compiled[key]


def _launch_of(recorded: RecordedPlugin, config: int, arch: str) -> Tuple[Dict[str, Any], Any]:
    """The kernel's parameters (kernelop params), grid, block, shared memory and entry for one compilation."""
    state: CuteState = recorded.dsl_state
    where, dynamic = state.where, recorded.compile_configs[config]["program"].dynamic
    compiled, args = _compile(recorded, config, arch)
    module, function = compiled.ir_module, compiled.function_name
    try:
        types = H.host_arg_types(module, function)
        if len(types) != len(dynamic):
            raise H.Unreadable(f"the host function takes {len(types)} arguments but {len(dynamic)} of the call's are "
                               "tensors or run-time scalars")
        arguments: List[H.Value] = []
        by_param = dict(zip(inspect.signature(recorded.fn).parameters, args))
        for (p, d), t in zip(dynamic, types):
            if d[0] == "tensor":
                fields = _layout_leaves(by_param[p], d[1])
                scalars = [x for x in H.leaves(t)][1:]
                if t[0] != "struct" or H.leaves(t)[0][1] != ("ptr",) or len(scalars) != len(fields):
                    raise H.Unreadable(f"tensor '{d[1]}' is passed as {t}, which does not match its layout "
                                       f"{by_param[p]}")
                arguments.append(_build(t, iter([H.TensorPtr(d[1]), *fields])))
            elif d[0] == "int":
                arguments.append(d[1])
            elif d[0] == "stream":
                arguments.append(H.Opaque("the stream"))
            elif d[0] == "float_const":
                arguments.append(H.FloatConst(d[1]))
            else:
                arguments.append(H.Named(d[1]))
        launch = H.read_launch(module, function, arguments)
        grid = [canonical(H.text(g, f"grid axis {i}")) for i, g in enumerate(launch.grid)]
        block = [canonical(H.text(b, f"block axis {i}")) for i, b in enumerate(launch.block)]
        shared = canonical(H.text(launch.shared_mem, "the dynamic shared memory"))
        cluster = ["1", "1", "1"]
        for attribute, value in launch.attributes:
            if attribute == H.const(_CLUSTER_DIMENSION):
                if len(value) != 3:
                    raise H.Unreadable("the launch's cluster attribute is written in a way kernelop does not read "
                                       f"({len(value)} values)")
                cluster = [canonical(H.text(c, f"cluster axis {i}")) for i, c in enumerate(value)]
            elif not value or any(v != H.const(0) for v in value):
                raise H.Unreadable(f"the launch sets launch attribute {H.text(attribute, 'an attribute id')} "
                                   "(cooperative or programmatic launch), which kernelop does not make")
        params: List[Any] = []
        for i, (v, t) in enumerate(zip(launch.args, launch.arg_types)):
            params.append(H.kernel_param(v, t, f"kernel argument {i}"))
    except (H.Unreadable, ValueError) as e:
        raise ValueError(f"{where}: reading the host function {function} compiled for {arch}: {e}") from None
    ptx = compiled.artifacts.PTX
    entries = re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx or "")
    if len(entries) != 1:
        raise ValueError(f"{where}: the compiled module holds {len(entries)} kernels; kernelop records one")
    if re.search(r"\.(reqnctapercluster|explicitcluster)\b", ptx) and cluster == ["1", "1", "1"]:
        raise ValueError(f"{where}: the kernel is built for thread-block clusters, but the host function launches it "
                         "without one")
    required = re.search(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", ptx)
    if required:  # a cluster the kernel was compiled for: the launch's must be it
        want = [g or "1" for g in required.groups()]
        if all(c.isdigit() for c in cluster) and cluster != want:
            raise ValueError(f"{where}: the kernel requires clusters of [{', '.join(want)}] (.reqnctapercluster) but "
                             f"the host function launches clusters of [{', '.join(cluster)}]")
    return {"params": params, "grid": grid, "block": block, "shared_mem": shared, "cluster": cluster,
            "entry": entries[0]}, compiled


def _plan_compile(recorded: RecordedPlugin, program: int, arch: str) -> CompileJob:
    """cute.compile of one tactic for one architecture (not cached: the DSL keeps its own), whose launch must be the
    one recorded (read from the first architecture's)."""
    first = recorded.default_archs[0]

    def compile() -> CompiledKernel:
        launch, compiled = _launch_of(recorded, program, arch)
        recorded_launch = _launch_of(recorded, program, first)[0] if first != arch else launch
        if launch["params"] != recorded_launch["params"] or launch["entry"] != recorded_launch["entry"] or \
                any(launch[k] != recorded_launch[k] for k in ("grid", "block", "shared_mem", "cluster")):
            raise ValueError(f"op {shorten(recorded.op_name)}: tactic {program} compiled for {arch} launches with "
                             "other kernel parameters, geometry or entry than the recorded launch (compiled for "
                             f"{first})")
        ptx, cubin = compiled.artifacts.PTX, compiled.artifacts.CUBIN
        if not ptx or not cubin:
            raise ValueError(f"op {shorten(recorded.op_name)}: cute.compile gave no PTX or CUBIN for {arch}")
        return CompiledKernel(name=launch["entry"], cubin=bytes(cubin), ptx=ptx)

    return CompileJob(compile)


DSL = Dsl(name="cutedsl", title="CuTe DSL", spec_type=CuteDslSpec, check_archs=cutedsl_archs, intercept=_intercept,
          one_launch=_one_launch, translate=_translate, plan_compile=_plan_compile,
          while_recording=_library_caches_off, default_archs=DEFAULT_ARCHS, launch_tensors=_launch_tensors)
