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

import hashlib
import inspect
import json
import re
import tempfile
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from . import _llvm_host as H
from ._symbolic import FloatProbe, Recorder, Unexpressible, canonical, check_config_values, shorten, uses_dims
from ._triton import (BinaryTuple, RecordedPlugin, _count, _examples, _from_inputs, _inputs_json, _name_outputs,
                      _output_shapes, _outputs, _signature_inputs, _tensor_name, check_archs, check_configs,
                      intercepting, make_fakes, run_launch_fn, select_over_configs, validate_recorded)

DEFAULT_ARCHS = ("sm_80", "sm_90a")  # CUBIN each (sm_90a: Hopper's wgmma/TMA), plus the PTX of the oldest
_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16, torch.int32,
           torch.int64, torch.uint8)


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
    configs_t = check_configs("kernelop.cutedsl", launch_fn, configs)
    archs = None
    if arch is not None:
        archs = tuple(cutedsl_archs("kernelop.cutedsl", [arch] if isinstance(arch, str) else arch, "arch"))
    return CuteDslSpec(launch_fn, configs_t, archs)


def cutedsl_archs(where: str, archs: Any, name: str = "archs") -> List[str]:
    """The CuTe DSL's architectures: 'sm_NN' or 'sm_NNa' each (sm_90a: Hopper's wgmma and TMA)."""
    return check_archs(where, archs, r"sm_[1-9][0-9]{1,2}a?", "the CuTe DSL", "'sm_NN' or 'sm_NNa' such as 'sm_90a'",
                       name)


@dataclass
class _Call:
    body: Callable[..., Any]  # the @cute.jit function's own Python function
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]


@dataclass
class _Wrapped:
    fake: torch.Tensor
    assumed_align: Optional[int]


def _intercept(calls: List[_Call], wrapped: Dict[int, _Wrapped]) -> Any:
    """While recording (on this thread, Note [interception] in _triton.py): from_dlpack of a fake tensor wraps a
    small real placeholder (its layout is replaced by a dynamic one before compiling), and a call of a @cute.jit
    function is recorded instead of compiled and run."""
    import cutlass.base_dsl.dsl as dsl
    import cutlass.cute.runtime as runtime
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _disable_current_modes

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
        calls.append(_Call(body, args, kwargs))
        return None

    return intercepting({(runtime._Tensor, "__init__"): init, (dsl.BaseDSL, "_func"): func})


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


def record(spec: CuteDslSpec, meta_impl: Optional[Callable], op_name: Optional[str],
           example_inputs: Any) -> RecordedPlugin:
    import importlib.metadata

    fn_name = getattr(spec.launch_fn, "__name__", "launch_fn")
    where = f"kernelop.custom_plugin({shorten(repr(op_name if op_name is not None else fn_name))})"
    inputs = _signature_inputs(where, spec.launch_fn)
    examples = _examples(where, [n for n, k, _ in inputs if k == "tensor"], example_inputs)
    rec = Recorder(where)
    fakes = make_fakes(rec, inputs, examples)
    calls: List[_Call] = []
    wrapped: Dict[int, _Wrapped] = {}
    result, writes = run_launch_fn(where, rec, spec.launch_fn, fakes, _intercept(calls, wrapped))
    if not calls:
        raise ValueError(f"{where}: launch_fn called no @cute.jit function (expected one call, with the tensors "
                         "wrapped by cutlass.cute.runtime.from_dlpack)")
    if len(calls) > 1:
        raise ValueError(f"{where}: launch_fn called {len(calls)} @cute.jit functions; kernelop records one launch "
                         "per op")
    call = calls[0]
    outputs = _outputs(where, result, rec)
    writes.check(where, rec, outputs)
    jit_name = call.body.__name__
    jname = shorten(jit_name)  # in messages
    named = op_name is not None
    if op_name is None:
        op_name = f"kernelop_cutedsl::{jit_name}"
    where = f"kernelop.custom_plugin({shorten(repr(op_name))})"
    rec.where = where

    try:
        bound = inspect.signature(call.body).bind(*call.args, **call.kwargs)
    except TypeError as e:
        raise ValueError(f"{where}: the call of {jname} does not match its parameters: {shorten(e, 300)}") from None
    bound.apply_defaults()
    params = inspect.signature(call.body).parameters
    constexpr_params = [p for p in params if _annotation_kind(params[p].annotation) == "constexpr"]

    # Outputs are named after the parameter they are passed to (never a Constexpr's name: those are the tunables).
    out_names = _name_outputs(outputs, {p: wrapped[id(v)].fake for p, v in bound.arguments.items()
                                        if id(v) in wrapped}, rec, reserved=constexpr_params)

    # Each parameter of the @cute.jit function: a tensor, a run-time scalar or a compile-time constant.
    dynamic: List[Tuple[str, Any]] = []  # (param, ("tensor", name, wrapped) | ("int", expr) | ("float", name))
    constexprs: Dict[str, Any] = {}
    requires: List[str] = []
    tensor_names: List[str] = []
    for p, value in bound.arguments.items():
        kind = _annotation_kind(params[p].annotation)
        what = f"{jname}'s argument '{shorten(p)}'"
        if id(value) in wrapped:
            if kind not in ("tensor", ""):
                raise ValueError(f"{where}: {what} is a tensor but annotated {shorten(repr(params[p].annotation))}")
            w = wrapped[id(value)]
            name = _tensor_name(where, w.fake, rec, outputs, out_names, what)
            if w.fake.dtype not in _DTYPES:
                raise ValueError(f"{where}: {what} is {w.fake.dtype}, which kernelop passes to CuTe DSL kernels as "
                                 f"none of {', '.join(str(d) for d in _DTYPES)}")
            if w.fake.dim() == 0:
                raise ValueError(f"{where}: {what} is a 0-dim tensor; kernelop passes tensors of rank 1 or more")
            if name in tensor_names:
                raise ValueError(f"{where}: tensor '{shorten(name)}' is passed to {jname} twice; kernelop passes "
                                 "each tensor once")
            tensor_names.append(name)
            if name not in out_names:  # an output's rank follows from its shape, which the inputs give
                requires.append(f"rank({name}) == {w.fake.dim()}")
            if w.assumed_align is not None and w.assumed_align > w.fake.element_size():
                requires.append(f"aligned({name}, {int(w.assumed_align)})")
            dynamic.append((p, ("tensor", name, w)))
        elif _is_cute_tensor(value):
            raise ValueError(f"{where}: {what} is a CuTe tensor launch_fn made from something other than one of its "
                             "tensors (a scratch buffer or a host-side copy); kernelop records inputs and returned "
                             "outputs only")
        elif kind == "constexpr":
            if _from_inputs(value):
                raise ValueError(f"{where}: Constexpr '{shorten(p)}' gets a value computed from the inputs (a size or "
                                 "a scalar input); it must be a Python constant or come from configs (the DSL "
                                 "compiles one kernel per value)")
            constexprs[p] = value
        elif kind == "int" and isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            scalar = next((s.name for s in rec.scalars if isinstance(value, torch.SymInt) and s.symbol is not None
                           and value.node.expr == s.symbol), None)
            try:
                text = scalar or rec.expr(value, f"{where}: {what}")
            except Unexpressible as e:
                raise ValueError(str(e)) from None
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

    user_configs = list(spec.configs) or [{}]
    for i, c in enumerate(user_configs):
        bad = [k for k in c if k not in constexpr_params]
        if bad:
            raise ValueError(f"{where}: configs[{i}] sets {shorten(', '.join(bad))}, which {jname} has no "
                             "cutlass.Constexpr parameter of (its Constexpr parameters: "
                             f"{shorten(', '.join(constexpr_params) or 'none', 300)})")
    tuned = [p for p in params if any(p in c for c in user_configs)]
    check_config_values(where, user_configs, tuned, constexprs)
    values = [{k: c.get(k, constexprs.get(k)) for k in tuned} for c in user_configs]

    shapes = _output_shapes(where, rec, outputs, out_names, meta_impl, fakes)
    try:
        requires += rec.requirements_from_guards()
    except Unexpressible as e:
        raise ValueError(str(e)) from None
    tactics = f"{_count(len(user_configs), 'config')} make {_count(len(user_configs), 'tactic')}"

    try:
        source = inspect.getsource(inspect.getmodule(call.body) or call.body)
    except (OSError, TypeError):
        source = inspect.getsource(call.body)
    doc: Dict[str, Any] = {
        "op": op_name,
        "kernel_name": jit_name,  # the host function: each config's kernel has its own mangled entry
        "kernel_source": source,
        "cutedsl": {"version": importlib.metadata.version("nvidia-cutlass-dsl")},
        "inputs": _inputs_json(rec, inputs),
        "outputs": shapes,
    }
    if tuned:
        doc["tunables"] = tuned
        doc["configs"] = [{k: int(v[k]) for k in tuned} for v in values]
    # Validated before anything is compiled (kernelop's own rules, in C++): the parameters and the geometry are read
    # from the compiled host function, so they stand in here as what launch_fn passes (checked again once read).
    validate_recorded(where, {
        **doc,
        "params": [d[1] if d[0] == "tensor" else {"expr": canonical(d[1][1])} if d[0] == "int" else d[1]
                   for _, d in dynamic],
        "geometry": {"custom": {"grid": ["1", "1", "1"], "block": ["1", "1", "1"], "shared_mem": "0"}},
        **({"requires": list(dict.fromkeys(requires))} if requires else {}),
    }, tactics)
    recorded = RecordedPlugin(op_name, doc, call.body, {}, constexprs,
                              [{"constexprs": {**constexprs, **v}} for v in values],
                              compile_fn=_compile_all, default_archs=spec.archs or DEFAULT_ARCHS,
                              arch_rule=cutedsl_archs)
    recorded.cute_dynamic = dynamic  # type: ignore[attr-defined]
    recorded.cute_where = where  # type: ignore[attr-defined]
    # The launch (its arguments, grid, block, shared memory) is read from the host function compiled for the first
    # architecture, per config; every other compilation must agree (checked as they are made).
    launches = [_launch_of(recorded, i, recorded.default_archs[0])[0] for i in range(len(values))]
    first = launches[0]
    for i, l in enumerate(launches[1:], 1):
        if _param_kinds(l["params"]) != _param_kinds(first["params"]):
            raise ValueError(f"{where}: configs[{i}] changes the kernel's parameters (their number, types or "
                             "tensors); kernelop passes one parameter list to every config of an op")
    # A field whose value differs between configs (host-side tiling by a Constexpr tile size) is one expression
    # over the tunables.
    exprs_per_config = [_param_exprs(l["params"]) for l in launches]
    merged_exprs = exprs_per_config[0] if all(e == exprs_per_config[0] for e in exprs_per_config) or \
        not exprs_per_config[0] else select_over_configs(exprs_per_config, values, tuned)
    params_doc = _with_exprs(first["params"], iter(merged_exprs))
    geometry: Dict[str, Any] = {}
    for key in ("grid", "block", "shared_mem"):
        texts = [[*l[key]] if key != "shared_mem" else [l[key]] for l in launches]
        merged = texts[0] if all(t == texts[0] for t in texts) else select_over_configs(texts, values, tuned)
        geometry[key] = merged if key != "shared_mem" else merged[0]
    doc["params"] = params_doc
    doc["geometry"] = {"custom": geometry}
    exprs = geometry["grid"] + geometry["block"] + [geometry["shared_mem"]] + \
        merged_exprs
    requires += [r for r in (f"rank({t.name}) == {t.rank}" for t in rec.tensors
                             if t.name not in tensor_names and uses_dims(exprs, t.name)) if r not in requires]
    if requires:
        doc["requires"] = list(dict.fromkeys(requires))
    if tuned:  # after the launch and its requirements, as they have always been written
        doc["tunables"] = doc.pop("tunables")
        doc["configs"] = doc.pop("configs")
    if not named:  # the same in every process, and different for a different launch, dtype or config set
        identity = json.dumps({k: v for k, v in doc.items() if k != "op"}, sort_keys=True)
        op_name = doc["op"] = f"kernelop_cutedsl::{jit_name}_{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
        recorded.op_name = op_name
    validate_recorded(where, doc, tactics)  # before the other architectures are compiled
    return recorded


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


def _compile(recorded: RecordedPlugin, config: int, arch: str) -> Any:
    """cute.compile of the host function for one config and architecture (memoised on the recording)."""
    import cutlass.cute as cute

    cache = recorded.__dict__.setdefault("_cute_compiled", {})
    key = (config, arch)
    if key in cache:
        return cache[key]
    dynamic = recorded.cute_dynamic  # type: ignore[attr-defined]
    kwargs: Dict[str, Any] = dict(recorded.compile_configs[config]["constexprs"])
    for p, d in dynamic:
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
    cache[key] = (compiled, args)
    return cache[key]


def _real_placeholder(w: _Wrapped) -> torch.Tensor:
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        return _placeholder(w.fake)


def _launch_of(recorded: RecordedPlugin, config: int, arch: str) -> Tuple[Dict[str, Any], Any]:
    """The kernel's parameters (kernelop params), grid, block, shared memory and entry for one compilation."""
    where = recorded.cute_where  # type: ignore[attr-defined]
    compiled, args = _compile(recorded, config, arch)
    dynamic = recorded.cute_dynamic  # type: ignore[attr-defined]
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
            params.append(_param(v, t, f"kernel argument {i}"))
    except (H.Unreadable, ValueError) as e:
        raise ValueError(f"{where}: reading the host function {function} compiled for {arch}: {e}") from None
    ptx = compiled.artifacts.PTX
    entries = re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx or "")
    if len(entries) != 1:
        raise ValueError(f"{where}: the compiled module holds {len(entries)} kernels; kernelop records one")
    if re.search(r"\.(reqnctapercluster|explicitcluster|maxclusterrank)\b", ptx):
        raise ValueError(f"{where}: the kernel is built for thread-block clusters, which kernelop does not launch yet")
    return {"params": params, "grid": grid, "block": block, "shared_mem": shared, "entry": entries[0]}, compiled


def _param(v: H.Value, t: H.LType, what: str) -> Any:
    def field(x: H.Value, ft: H.LType, fwhat: str) -> Any:
        if ft == ("ptr",):
            if isinstance(x, H.TensorPtr):
                return x.tensor
            raise H.Unreadable(f"{fwhat} is a pointer that is not a tensor's own data pointer"
                               + (f" ({x.why})" if isinstance(x, H.Opaque) else ""))
        if ft[0] == "float":
            if isinstance(x, H.Named) and ft[1] == 32:
                return x.name
            raise H.Unreadable(f"{fwhat} is a {ft[1]}-bit float that is not a float scalar input passed as it is")
        if ft[0] == "int" and ft[1] in (32, 64):
            entry: Dict[str, Any] = {"expr": canonical(H.text(x, fwhat))}
            if ft[1] == 64:
                entry["int64"] = True
            return entry
        raise H.Unreadable(f"{fwhat} has the LLVM type {ft}, which kernelop does not pass")

    if t[0] in ("struct", "array"):
        out = []
        offset = 0
        for path, ft, llvm_offset in H.leaves(t):
            size, align = H.size_align(ft)
            offset = (offset + align - 1) // align * align
            if offset != llvm_offset:
                raise H.Unreadable(f"{what}: the field at {path} is at byte {llvm_offset} of the struct, not at "
                                   f"{offset} where a flat struct of its fields puts it")
            offset += size
            x: H.Value = v
            for i in path:
                x = x.fields[i] if isinstance(x, H.Struct) and i < len(x.fields) else H.Opaque("an unknown field")
            out.append(field(x, ft, f"{what}, field {path}"))
        return {"struct": out}
    return field(v, t, what)


def _compile_all(recorded: RecordedPlugin, archs: List[str]) -> List[BinaryTuple]:
    archs = cutedsl_archs(f"op {shorten(recorded.op_name)}", archs)
    oldest = min(archs, key=lambda a: int(re.sub(r"\D", "", a)))
    out: List[BinaryTuple] = []
    doc = recorded.doc
    for program in range(len(recorded.compile_configs)):
        for arch in archs:
            launch, compiled = _launch_of(recorded, program, arch)
            recorded_launch = _launch_of(recorded, program, recorded.default_archs[0])[0] \
                if recorded.default_archs[0] != arch else launch
            if launch["params"] != recorded_launch["params"] or launch["entry"] != recorded_launch["entry"] or \
                    any(launch[k] != recorded_launch[k] for k in ("grid", "block", "shared_mem")):
                raise ValueError(f"op {shorten(recorded.op_name)}: tactic {program} compiled for {arch} launches with "
                                 "other kernel parameters, geometry or entry than the recorded launch (compiled for "
                                 f"{recorded.default_archs[0]})")
            ptx, cubin = compiled.artifacts.PTX, compiled.artifacts.CUBIN
            if not ptx or not cubin:
                raise ValueError(f"op {shorten(recorded.op_name)}: cute.compile gave no PTX or CUBIN for {arch}")
            out.append((program, arch, bytes(cubin), ptx, launch["entry"], 0, 0, 0, -1))
            if arch == oldest:  # the driver JITs this PTX on newer GPUs; labelled by its .target
                target = re.search(r"^\.target\s+(\S+)", ptx, re.M)
                label = target.group(1).rstrip(",") if target else arch
                out.append((program, "compute_" + label[3:], ptx.encode(), "", launch["entry"], 0, 0, 0, -1))
    return out
