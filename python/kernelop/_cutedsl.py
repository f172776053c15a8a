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

import importlib.metadata
import inspect
import json
import re
import tempfile
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from . import _llvm_host as H
from ._dtypes import DTYPES
from ._recording import (CompiledKernel, CompileJob, Dsl, Handlers, RecordedPlugin, Recording, check_archs,
                         check_config_keys, check_configs, count, from_inputs, int_scalar_name, select_over_configs,
                         spec_archs, user_requires)
from ._symbolic import FloatProbe, canonical, shorten, uses_dims

DEFAULT_ARCHS = ("sm_80", "sm_90a")  # CUBIN each (sm_90a: Hopper's wgmma/TMA), plus the PTX of the oldest
_DTYPES = tuple(d.torch for d in DTYPES if d.cutedsl)  # what kernelop passes to CuTe DSL kernels


@dataclass(frozen=True)
class CuteDslSpec:
    """``ko.cutedsl(launch_fn, configs, arch)``: a CuTe DSL launch to record, its configs (each a tactic: values of
    the @cute.jit function's ``cutlass.Constexpr`` parameters) and the architectures to compile for."""

    launch_fn: Callable[..., Any]
    configs: Tuple[Dict[str, Any], ...] = ()
    archs: Optional[Tuple[str, ...]] = None


def cutedsl(launch_fn: Callable[..., Any], configs: Optional[Sequence[Dict[str, Any]]] = None,
            arch: Union[None, str, Sequence[str]] = None) -> CuteDslSpec:
    """A CuTe DSL kernel spec (the reference's ``tta.cutedsl``). ``configs`` set ``cutlass.Constexpr`` parameters of
    the ``@cute.jit`` function launch_fn calls, each a tactic; ``arch`` (``"sm_90a"`` or a list) replaces the default
    architectures (sm_80 and sm_90a CUBINs, plus the oldest one's PTX)."""
    return CuteDslSpec(launch_fn, check_configs("kernelop.cutedsl", launch_fn, configs),
                       spec_archs("kernelop.cutedsl", arch, cutedsl_archs))


def cutedsl_archs(where: str, archs: Any, name: str = "archs") -> List[str]:
    """The CuTe DSL's architectures: 'sm_NN' or 'sm_NNa' each (sm_90a: Hopper's wgmma and TMA)."""
    return check_archs(where, archs, r"sm_[1-9][0-9]{1,2}a?", "the CuTe DSL", "'sm_NN' or 'sm_NNa' such as 'sm_90a'",
                       name)


@dataclass
class _Wrapped:
    fake: torch.Tensor
    assumed_align: Optional[int]


@dataclass
class _Call:
    body: Callable[..., Any]  # the @cute.jit function's own Python function
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    wrapped: Dict[int, _Wrapped]  # id(CuTe tensor) -> the fake tensor from_dlpack wrapped


Argument = Tuple[str, Tuple[Any, ...]]
"""A host argument: (parameter, ("tensor", name, _Wrapped) | ("int", expression) | ("float", name))."""


@dataclass
class CuteState:
    """What compiling a recording needs beyond each tactic's constexprs (RecordedPlugin's compile_configs)."""

    dynamic: List[Argument]  # the host function's run-time arguments
    where: str  # the recording's, in messages
    compiled: Dict[Tuple[int, str], Any] = field(default_factory=dict)  # (config, arch) -> (cute.compile's, args)


# -- the launch -----------------------------------------------------------------------------------------------------

def _intercept(calls: List[Any]) -> Handlers:
    """While recording (on this thread, Note [interception] in kernelop/_recording/interception.py): from_dlpack of a
    fake tensor wraps a small real placeholder (its layout is replaced by a dynamic one before compiling), and a call
    of a @cute.jit function is recorded instead of compiled and run."""
    import cutlass.base_dsl.dsl as dsl
    import cutlass.cute.runtime as runtime
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _disable_current_modes

    wrapped: Dict[int, _Wrapped] = {}

    def init(original: Any, self: Any, tensor: Any, assumed_align: Optional[int] = None, *args: Any,
             **kwargs: Any) -> None:
        if not isinstance(tensor, FakeTensor):
            return original(self, tensor, assumed_align, *args, **kwargs)
        with _disable_current_modes():
            placeholder = _placeholder(tensor)
        original(self, placeholder, assumed_align, *args, **kwargs)
        self._kop_placeholder = placeholder  # kept alive with the wrapper
        wrapped[id(self)] = _Wrapped(tensor, assumed_align)

    def func(original: Any, self: Any, body: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(_Call(body, args, kwargs, wrapped))
        return None

    return {(runtime._Tensor, "__init__"): init, (dsl.BaseDSL, "_func"): func}


def _one_launch(where: str, calls: List[Any]) -> Tuple[Any, str]:
    if not calls:
        raise ValueError(f"{where}: launch_fn called no @cute.jit function (expected one call, with the tensors "
                         "wrapped by cutlass.cute.runtime.from_dlpack)")
    if len(calls) > 1:
        raise ValueError(f"{where}: launch_fn called {len(calls)} @cute.jit functions; kernelop records one launch "
                         "per op")
    return calls[0], calls[0].body.__name__


def _placeholder(fake: torch.Tensor) -> torch.Tensor:
    # Sizes of at least 2 (a size-1 dim would make the unit-stride dim ambiguous); contiguous like kernelop's inputs.
    return torch.zeros([2 + i for i in range(fake.dim())], dtype=fake.dtype)


def _dynamic(placeholder: torch.Tensor, assumed_align: Optional[int]) -> Any:
    from cutlass.cute.runtime import from_dlpack
    t = from_dlpack(placeholder, assumed_align=assumed_align)
    return t.mark_layout_dynamic(leading_dim=placeholder.dim() - 1)


def _layout_leaves(t: Any, name: str) -> List[H.E]:
    """The expressions of a dynamic tensor's fields after its pointer: its dynamic shape, then its dynamic strides."""
    m = re.search(r" o \(([^()]*)\):\(([^()]*)\)>$", str(t))
    if not m:
        raise ValueError(f"tensor '{name}' has the layout {t}, which kernelop does not read")
    out: List[H.E] = []
    for part, fn in ((m.group(1), "dim"), (m.group(2), "stride")):
        for axis, token in enumerate(x.strip() for x in part.split(",") if x.strip()):
            if token.startswith("?"):
                out.append(("leaf", f"{fn}({name}, {axis})", True))
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
    if annotation is cute.Tensor:
        return "tensor"
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
    jname = shorten(call.body.__name__)  # in messages
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
    dynamic, constexprs, requires, tensor_names, out_align = _arguments(ctx, call, bound, params)

    user_configs = list(spec.configs) or [{}]
    check_config_keys(where, user_configs, jname, "cutlass.Constexpr parameter", constexpr_params)
    tuned = [p for p in params if p != "requires" and any(p in c for c in user_configs)]
    ctx.check_config_values(user_configs, tuned, constexprs)
    values: List[Dict[str, Any]] = [{k: c.get(k, constexprs.get(k)) for k in tuned} for c in user_configs]

    shapes = [dict(s, align=out_align[s["name"]]) if s["name"] in out_align else s
              for s in ctx.output_shapes(ctx.meta_impl)]
    requires += ctx.requirements()
    ctx.tactics = f"{count(len(user_configs), 'config')} make {count(len(user_configs), 'tactic')}"

    try:
        source = inspect.getsource(inspect.getmodule(call.body) or call.body)
    except (OSError, TypeError):
        source = inspect.getsource(call.body)
    doc: Dict[str, Any] = {
        "op": ctx.op_name,
        "kernel_name": call.body.__name__,  # the host function: each config's kernel has its own mangled entry
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
        "params": [d[1] if d[0] == "tensor" else {"expr": canonical(d[1][1])} if d[0] == "int" else d[1]
                   for _, d in dynamic],
        "geometry": {"custom": {"grid": ["1", "1", "1"], "block": ["1", "1", "1"], "shared_mem": "0"}},
        **({"requires": list(dict.fromkeys(requires))} if requires else {}),
    })
    recorded = RecordedPlugin(ctx.op_name, doc, ctx.dsl, call.body, constexprs,
                              [{"constexprs": {**constexprs, **v}} for v in values],
                              default_archs=spec.archs or DEFAULT_ARCHS, dsl_state=CuteState(dynamic, where))
    params_doc, geometry = _launch(recorded, values, tuned)
    doc["params"] = params_doc
    doc["geometry"] = {"custom": geometry}
    exprs = geometry["grid"] + geometry["block"] + [geometry["shared_mem"]] + _param_exprs(params_doc)
    requires += [r for r in (f"rank({t.name}) == {t.rank}" for t in ctx.rec.tensors
                             if t.name not in tensor_names and uses_dims(exprs, t.name)) if r not in requires]
    if requires:
        doc["requires"] = list(dict.fromkeys(requires))
    if tuned:  # after the launch and its requirements, as they have always been written
        doc["tunables"] = doc.pop("tunables")
        doc["configs"] = doc.pop("configs")
    return recorded


def _arguments(ctx: Recording, call: _Call, bound: inspect.BoundArguments,
               params: Any) -> Tuple[List[Argument], Dict[str, Any], List[str], List[str], Dict[str, int]]:
    """Each parameter of the @cute.jit function: a tensor, a run-time scalar or a compile-time constant. Returns the
    run-time ones (the host function's arguments), the constants, the requirements the tensors bring (an input's
    rank and assumed alignment), the tensors' names and the outputs' assumed alignments (OutputDecl::align)."""
    where, jname = ctx.where, shorten(call.body.__name__)
    dynamic: List[Argument] = []
    constexprs: Dict[str, Any] = {}
    requires: List[str] = []
    tensor_names: List[str] = []
    out_align: Dict[str, int] = {}
    for p, value in bound.arguments.items():
        kind = _annotation_kind(params[p].annotation)
        what = f"{jname}'s argument '{shorten(p)}'"
        if id(value) in call.wrapped:
            if kind not in ("tensor", ""):
                raise ValueError(f"{where}: {what} is a tensor but annotated {shorten(repr(params[p].annotation))}")
            w = call.wrapped[id(value)]
            name = ctx.tensor_name(w.fake, what)
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
        elif kind == "float" and isinstance(value, FloatProbe):
            dynamic.append((p, ("float", value.kernelop_name)))
        else:
            annotation = params[p].annotation
            hint = "unannotated" if annotation is inspect.Parameter.empty else \
                f"annotated {shorten(repr(annotation))}"
            raise ValueError(f"{where}: {what} is {shorten(repr(value))} ({hint}); kernelop passes "
                             "cute.Tensor arguments (from_dlpack of an input or output), float scalar inputs to "
                             "cutlass.Float32 parameters, sizes and int scalars to cutlass.Int32 parameters, and "
                             "compile-time values to cutlass.Constexpr parameters")
    return dynamic, constexprs, requires, tensor_names, out_align


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
    for key in ("grid", "block", "shared_mem"):
        texts = [[*launch[key]] if key != "shared_mem" else [launch[key]] for launch in launches]
        merged = texts[0] if all(t == texts[0] for t in texts) else select_over_configs(texts, values, tuned)
        geometry[key] = merged if key != "shared_mem" else merged[0]
    return _with_exprs(first["params"], iter(merged_exprs)), geometry


def _fields(params: List[Any]) -> List[Any]:
    return [f for p in params for f in (p["struct"] if isinstance(p, dict) and "struct" in p else [p])]


def _param_kinds(params: List[Any]) -> Any:
    """The parameters with every expression blanked: what must be the same for every config."""
    return json.dumps([p if not isinstance(p, dict) else
                       {"struct": [f if isinstance(f, str) else {**f, "expr": ""} for f in p["struct"]]}
                       if "struct" in p else {**p, "expr": ""} for p in params])


def _param_exprs(params: List[Any]) -> List[str]:
    return [f["expr"] for f in _fields(params) if isinstance(f, dict)]


def _with_exprs(params: List[Any], exprs: Iterator[str]) -> List[Any]:
    def one(f: Any) -> Any:
        return f if isinstance(f, str) else {**f, "expr": next(exprs)}
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
    kwargs: Dict[str, Any] = dict(recorded.compile_configs[config]["constexprs"])
    for p, d in state.dynamic:
        if d[0] == "tensor":
            kwargs[p] = _dynamic(_real_placeholder(d[2]), d[2].assumed_align)
        elif d[0] == "int":
            kwargs[p] = 7
        else:
            kwargs[p] = 1.0
    sig = inspect.signature(recorded.fn)
    args = [kwargs[p] for p in sig.parameters]
    try:
        # The DSL hands back PTX and CUBIN only when asked to keep them, which also writes them to a folder.
        with tempfile.TemporaryDirectory(prefix="kernelop-cutedsl-") as dump:
            compiled = cute.compile(recorded.fn, *args,
                                    options=f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump}")
    except Exception as e:  # noqa: BLE001 - the DSL's compile error, named with the tactic
        raise RuntimeError(f"op {shorten(recorded.op_name)}: cute.compile of tactic {config} for {arch} failed: "
                           f"{type(e).__name__}: {e}") from e
    state.compiled[key] = (compiled, args)
    return state.compiled[key]


def _real_placeholder(w: _Wrapped) -> torch.Tensor:
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        return _placeholder(w.fake)


def _launch_of(recorded: RecordedPlugin, config: int, arch: str) -> Tuple[Dict[str, Any], Any]:
    """The kernel's parameters (kernelop params), grid, block, shared memory and entry for one compilation."""
    state: CuteState = recorded.dsl_state
    where, dynamic = state.where, state.dynamic
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
            else:
                arguments.append(H.Named(d[1]))
        launch = H.read_launch(module, function, arguments)
        grid = [canonical(H.text(g, f"grid axis {i}")) for i, g in enumerate(launch.grid)]
        block = [canonical(H.text(b, f"block axis {i}")) for i, b in enumerate(launch.block)]
        shared = canonical(H.text(launch.shared_mem, "the dynamic shared memory"))
        for v in launch.attribute_values:
            if v != H.const(0):
                raise H.Unreadable("the launch sets a launch attribute (cooperative, cluster or programmatic "
                                   "launch), which kernelop does not make")
        params: List[Any] = []
        for i, (v, t) in enumerate(zip(launch.args, launch.arg_types)):
            params.append(H.kernel_param(v, t, f"kernel argument {i}"))
    except (H.Unreadable, ValueError) as e:
        raise ValueError(f"{where}: reading the host function {function} compiled for {arch}: {e}") from None
    ptx = compiled.artifacts.PTX
    entries = re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx or "")
    if len(entries) != 1:
        raise ValueError(f"{where}: the compiled module holds {len(entries)} kernels; kernelop records one")
    if re.search(r"\.(reqnctapercluster|explicitcluster|maxclusterrank)\b", ptx):
        raise ValueError(f"{where}: the kernel is built for thread-block clusters, which kernelop does not launch yet")
    return {"params": params, "grid": grid, "block": block, "shared_mem": shared, "entry": entries[0]}, compiled


def _plan_compile(recorded: RecordedPlugin, program: int, arch: str) -> CompileJob:
    """cute.compile of one tactic for one architecture (not cached: the DSL keeps its own), whose launch must be the
    one recorded (read from the first architecture's)."""
    first = recorded.default_archs[0]

    def compile() -> CompiledKernel:
        launch, compiled = _launch_of(recorded, program, arch)
        recorded_launch = _launch_of(recorded, program, first)[0] if first != arch else launch
        if launch["params"] != recorded_launch["params"] or launch["entry"] != recorded_launch["entry"] or \
                any(launch[k] != recorded_launch[k] for k in ("grid", "block", "shared_mem")):
            raise ValueError(f"op {shorten(recorded.op_name)}: tactic {program} compiled for {arch} launches with "
                             "other kernel parameters, geometry or entry than the recorded launch (compiled for "
                             f"{first})")
        ptx, cubin = compiled.artifacts.PTX, compiled.artifacts.CUBIN
        if not ptx or not cubin:
            raise ValueError(f"op {shorten(recorded.op_name)}: cute.compile gave no PTX or CUBIN for {arch}")
        return CompiledKernel(name=launch["entry"], cubin=bytes(cubin), ptx=ptx)

    return CompileJob(compile)


DSL = Dsl(name="cutedsl", title="CuTe DSL", spec_type=CuteDslSpec, check_archs=cutedsl_archs, intercept=_intercept,
          one_launch=_one_launch, translate=_translate, plan_compile=_plan_compile)
