"""cuda_kernel_op, ptx_op and packages: specs become torch.ops registered from C++.

Declarative path: the spec gives everything, and kernelop's C++ kernels run with no Python per call.
Override path (the reference's meta_fn / eager_fn / schema): the caller's functions replace the
derived fake (Meta) or CUDA kernel; kernelop still compiles the kernel, checks what it can and
registers the rest from C++. See docs/pytorch.md.
"""

from __future__ import annotations

import json
import operator
import numbers
import os
import threading
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from . import _kernelop

# The adapter links one torch: another one would fail to load it, or worse, load it.
if torch.__version__.split("+")[0] != _kernelop.built_with_torch:
    raise ImportError(
        f"kernelop was built against torch {_kernelop.built_with_torch}, but torch {torch.__version__} is installed "
        f"({os.path.dirname(torch.__file__)}): install torch=={_kernelop.built_with_torch}, or build kernelop against "
        "this torch (pip install . in this environment)")

from . import _kernelop_torch  # noqa: E402
from ._spec import InputDecl, KernelSpec, _r, _str_list

# The reference's TensorRT-only keywords: kernelop has no engine to act on them yet, so passing
# one is an error rather than being silently ignored.
_ENGINE_ONLY = ("aot_fn", "supports_dynamic_shapes", "requires_output_allocator", "priority",
                "capability_validator")


def _op_object(op_name: str) -> Any:
    """torch.ops.<ns>.<name> of the op's current registration, with kernelop's fast Python entry installed."""
    ns, name = op_name.split("::", 1)
    namespace = getattr(torch.ops, ns)
    registration = _kernelop_torch.registration_id(op_name)
    cached = namespace.__dict__.get(name)
    if cached is not None and getattr(cached, "_kernelop_registration", registration) != registration:
        _drop_packet(op_name)  # kernelop made it for an earlier registration: made afresh
    elif cached is not None and not _same_schema(op_name, cached):
        _drop_packet(op_name)  # PyTorch's, from an op of this name with another schema
    # A packet PyTorch made meanwhile (another thread looked the op up between its registration and
    # now) is this registration's: it gets the entry too, never left calling without one (Note
    # [registration lifetime]: a call through the entry holds the registration; one through
    # PyTorch's own entry does not, and an unregistration would free what it reads).
    packet = getattr(namespace, name)
    packet._kernelop_registration = registration
    _install_fast_entry(op_name, packet)
    return packet


def _drop_packet(op_name: str) -> None:
    """Drops PyTorch's cached torch.ops packet of `op_name`, as torch.library does for an op it removes: a packet
    keeps dispatcher handles of the registration it was made for, which an unregistration frees."""
    ns, name = op_name.split("::", 1)
    namespace = getattr(torch.ops, ns)
    if name in namespace.__dict__:
        delattr(namespace, name)
    if name in getattr(namespace, "_dir", ()):
        namespace._dir.remove(name)


def _unregister(op_name: str) -> None:
    """Unregisters an op kernelop registered, and drops its torch.ops packet."""
    _kernelop_torch.unregister(op_name)
    _drop_packet(op_name)


def _same_schema(op_name: str, packet: Any) -> bool:
    """Whether a torch.ops packet PyTorch made describes the op's current registration."""
    try:
        return bool(packet.default._schema == torch._C.parse_schema(_kernelop_torch.find_registration(op_name).schema))
    except Exception:  # noqa: BLE001 - anything unexpected: not the same, the packet is made afresh
        return False


def _install_fast_entry(op_name: str, packet: Any) -> None:
    """Note [fast Python entry] (python/src/fast_entry.cpp): the `_op` that the packet and its default overload call
    becomes kernelop's entry, which makes the plain calls itself and hands every other one to PyTorch's. The packet's
    own `_op` resolves among overloads, so it is replaced only while "default" is the one; TorchScript, which knows
    ops by their packet's `_op`, learns the entry under the same name. Where PyTorch's objects are not shaped as
    expected, nothing is replaced: calls then take PyTorch's entry, as correct and slower."""
    targets = [packet.default]
    if list(packet.overloads()) == ["default"]:
        targets.append(packet)
    for target in targets:
        current = getattr(target, "_op", None)
        if current is None or _kernelop_torch.is_fast_entry(current):
            continue
        entry = _kernelop_torch.fast_entry(op_name, current)
        if entry is None:
            continue
        target._op = entry
        builtins = getattr(torch.jit, "_builtins", None)
        qualname = builtins._find_builtin(current) if builtins is not None else None
        if builtins is not None and qualname is not None:
            builtins._register_builtin(entry, qualname)


def _refuse_engine_options(where: str, options: Dict[str, Any]) -> None:
    unknown = [k for k in options if k not in _ENGINE_ONLY]
    if unknown:
        raise TypeError(f"{where} got unexpected keyword argument(s): {', '.join(unknown)}")
    given = [k for k, v in options.items() if v is not None]
    if given:
        raise NotImplementedError(
            f"{where}: {', '.join(given)} configure the TensorRT engine path, which kernelop does not have yet; "
            "remove them (the op works in eager, torch.compile, export and AOTInductor without them)")


# Registration is check-then-act (the C++ registration, then the caller's functions): one at a
# time. What is registered lives in the C++ registry alone.
_lock = threading.Lock()


def _schema_for(op_name: str, spec: KernelSpec, meta_fn: Optional[Callable], schema: Optional[str]) -> str:
    """The schema to register ("" lets the C++ side derive it from the spec)."""
    if schema is not None:
        if not isinstance(schema, str):
            raise TypeError(f"op {op_name}: schema must be a str like '(Tensor x) -> Tensor', "
                            f"got {type(schema).__name__}")
        return schema.strip()
    if (spec.inputs is not None and spec.outputs is not None) or meta_fn is None:
        return ""  # derived, or the C++ validation names the missing field
    # Neither given nor derivable: the meta_fn's type hints, as the reference does.
    mutated = [i.name for i in (spec.inputs or []) if isinstance(i, InputDecl) and i.mutated]
    try:
        return torch.library.infer_schema(meta_fn, mutates_args=mutated)
    except Exception as e:  # infer_schema raises ValueError for missing or unsupported hints
        raise ValueError(f"op {op_name}: cannot infer the schema from meta_fn's type hints ({e}); "
                         "annotate meta_fn or pass schema=") from None


def _tensor_returns(op_name: str, schema: str) -> int:
    """How many tensors the schema returns, for outputs the meta_fn shapes."""
    try:
        parsed = torch._C.parse_schema(op_name + schema)
    except RuntimeError as e:
        raise ValueError(f"op {op_name}: schema '{schema}' is not a valid PyTorch schema: {e}") from None
    for r in parsed.returns:
        if str(r.type) != "Tensor":
            raise ValueError(f"op {op_name}: schema '{schema}' returns '{r.type}'; kernelop's derived launch "
                             "writes a fixed number of Tensors (give eager_fn for other returns)")
    return len(parsed.returns)


def _register(where: str, op_name: str, spec: KernelSpec, meta_fn: Optional[Callable],
              eager_fn: Optional[Callable], schema: Optional[str], key_extra: Tuple[Any, ...],
              register_cpp: Callable[[Any, Any], Any]) -> Any:
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"{where}: spec must be a KernelSpec, got {type(spec).__name__}")
    for name, fn in (("meta_fn", meta_fn), ("eager_fn", eager_fn)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{where}: {name} must be callable, got {type(fn).__name__}")
    if not isinstance(op_name, str) or "::" not in op_name:
        raise ValueError(f"{where}: op name {_r(op_name)} is invalid: expected 'namespace::name'")
    doc = spec.to_json(op_name)
    schema_text = _schema_for(op_name, spec, meta_fn, schema)
    overrides = _kernelop.Overrides()
    overrides.has_meta_fn = meta_fn is not None
    overrides.has_eager_fn = eager_fn is not None
    overrides.schema = schema_text
    if spec.outputs is None and spec.inputs is not None and meta_fn is not None and eager_fn is None:
        overrides.meta_outputs = _tensor_returns(op_name, schema_text)
    # The caller's functions are kept alive by the registration (keep_alive below), so their ids
    # identify them for as long as the op exists.
    overrides.caller_key = repr((id(meta_fn) if meta_fn is not None else None,
                                 id(eager_fn) if eager_fn is not None else None) + key_extra)
    with _lock:
        registration = register_cpp(doc, overrides)  # raises when a different one exists
        if registration.created and (meta_fn is not None or eager_fn is not None):
            try:
                _register_callers(registration, op_name, meta_fn, eager_fn)
            except BaseException as e:
                # Nothing half-registered. The registration owns the caller's Library: dropping
                # it runs the Library's finalizer, which deregisters meta_fn and eager_fn. The
                # failed attempt's frames (kept by the traceback, closures included) hold the
                # Library too, so they are replaced by their text before the rollback.
                where = "".join(traceback.format_tb(e.__traceback__))
                e.__traceback__ = None
                if hasattr(e, "add_note"):  # Python 3.11+
                    e.add_note(f"kernelop rolled back the registration of {op_name}; the error was raised at:\n"
                               f"{where.rstrip()}")
                _unregister(op_name)
                raise
    return _op_object(op_name)


def _register_callers(registration: Any, op_name: str, meta_fn: Optional[Callable],
                      eager_fn: Optional[Callable]) -> None:
    """Registers the caller's functions in a Library that the C++ registration keeps alive."""
    ns, name = op_name.split("::", 1)
    library = torch.library.Library(ns, "FRAGMENT")
    registration.keep_alive((library, meta_fn, eager_fn))
    if meta_fn is not None:
        torch.library.register_fake(op_name, meta_fn, lib=library)
    if eager_fn is not None:
        library.impl(name, eager_fn, "CUDA")


def cuda_kernel_op(op_name: str, spec: KernelSpec, *, meta_fn: Optional[Callable] = None,
                   eager_fn: Optional[Callable] = None, schema: Optional[str] = None,
                   archs: Optional[Sequence[str]] = None, base_dir: str = ".", **engine_options: Any) -> Any:
    """Registers ``op_name`` ("namespace::name") from a KernelSpec; returns the ``torch.ops`` packet.

    The spec is validated, compiled by NVRTC (through kernelop's cache) for ``archs`` (default: the
    spec's arch_override, else sm_80..sm_90 + PTX) and registered from C++.

    Declarative path: a complete spec gives the schema, a CUDA kernel and a SymInt Meta kernel.
    Override path, as in torch_tensorrt.kernels: ``meta_fn`` replaces the Meta (fake) kernel and
    makes ``spec.outputs`` optional (kernelop's launch then allocates what meta_fn returns);
    ``eager_fn`` replaces the CUDA kernel and makes ``spec.geometry`` optional (it can launch the
    compiled kernel with ``kernelop.kernel(op_name).launch(...)``); with both, ``spec.inputs`` is
    optional too. ``schema`` is used as given, else derived from the spec's inputs and outputs,
    else inferred from ``meta_fn``'s type hints.
    """
    _refuse_engine_options(f"cuda_kernel_op({_r(op_name)})", engine_options)
    spec, meta_fn = _declarative_meta(f"cuda_kernel_op({_r(op_name)})", spec, meta_fn, eager_fn, schema)
    base = os.path.abspath(base_dir)
    arch_list = _str_list(archs, "archs")
    return _register(f"cuda_kernel_op({_r(op_name)})", op_name, spec, meta_fn, eager_fn, schema,
                     ("nvrtc", base, tuple(arch_list)),
                     lambda doc, o: _kernelop_torch.register_spec(json.dumps(doc), base, arch_list, o))


def _declarative_meta(where: str, spec: Any, meta_fn: Optional[Callable], eager_fn: Optional[Callable],
                      schema: Optional[str]) -> Tuple[Any, Optional[Callable]]:
    """A meta_fn that traces to expressions becomes the spec's outputs (the generate_plugin idea): the op gets
    kernelop's C++ SymInt Meta kernel, runs with no Python per call and can be packaged. One that does not (data-
    dependent, rank-dependent, deciding on sizes) stays the op's Python fake kernel, with a warning saying why."""
    if (meta_fn is None or eager_fn is not None or schema is not None or not isinstance(spec, KernelSpec)
            or spec.outputs is not None or not spec.inputs or spec.type_params or not callable(meta_fn)):
        return spec, meta_fn
    from dataclasses import replace
    from ._spec import OutputDecl, SameAs, ScalarInput
    from ._symbolic import trace_meta
    inputs = []
    for i in spec.inputs:
        if isinstance(i, InputDecl):
            dtype = i.dtype if isinstance(i.dtype, torch.dtype) else None
            if i.dtype is not None and dtype is None:
                return spec, meta_fn  # a dtype given by name or a type parameter: the Python path stays
            inputs.append((i.name, "tensor", dtype))
        elif isinstance(i, ScalarInput) and i.py_type in (float, int, bool):
            inputs.append((i.name, {float: "float", int: "int", bool: "bool"}[i.py_type], None))
        else:
            return spec, meta_fn
    declared, why = trace_meta(where, inputs, meta_fn)
    if declared is None:
        import warnings
        warnings.warn(f"{where}: meta_fn stays a Python fake kernel (the op is not declarative and cannot be "
                      f"packaged): {why}", stacklevel=3)
        return spec, meta_fn
    outputs = [OutputDecl(o["name"], SameAs(o["shape"]["same_as"]) if isinstance(o["shape"], dict) else o["shape"],
                          dtype_from=o.get("dtype_from"), dtype=getattr(torch, o["dtype"]) if "dtype" in o else None)
               for o in declared]
    return replace(spec, outputs=outputs), None


def ptx_op(op_name: str, ptx: Any, kernel_name: str, meta_fn: Optional[Callable] = None,
           eager_fn: Optional[Callable] = None, aot_fn: Optional[Callable] = None, *,
           spec: Optional[KernelSpec] = None, schema: Optional[str] = None, **engine_options: Any) -> Any:
    """Registers ``op_name`` from pre-compiled PTX (str or bytes, e.g. from Triton), skipping NVRTC.

    ``kernel_name`` is the PTX ``.entry`` symbol. As in the reference, ``meta_fn`` and ``eager_fn``
    may supply everything (``eager_fn`` launches with ``kernelop.kernel(op_name).launch``; without a
    spec, 64-bit ``.param``s are taken as pointers). kernelop also takes a declarative ``spec``
    (its ``kernel_source`` is ignored) that gives the schema, shapes and geometry: every tensor
    dtype must then be declared, and the entry's parameters are checked against the calling
    convention. ``aot_fn`` is TensorRT's and is refused.
    """
    where = f"ptx_op({_r(op_name)})"
    if isinstance(meta_fn, KernelSpec):
        raise TypeError(f"{where}: pass the KernelSpec as spec=...; the 4th positional argument is meta_fn")
    _refuse_engine_options(where, dict(engine_options, aot_fn=aot_fn))
    if spec is None:
        if meta_fn is None or eager_fn is None:
            raise ValueError(f"{where}: give a declarative spec=KernelSpec(...), or both meta_fn and eager_fn")
        spec = KernelSpec(kernel_source="", kernel_name=kernel_name)
    if not isinstance(ptx, (str, bytes, bytearray)):
        raise TypeError(f"{where}: ptx must be str or bytes, got {type(ptx).__name__}")
    text = ptx.decode() if isinstance(ptx, (bytes, bytearray)) else ptx

    def register(doc: Dict[str, Any], overrides: Any) -> Any:
        doc["kernel_source"] = text  # packages carry the PTX as the op's source
        return _kernelop_torch.register_ptx(json.dumps(doc), os.path.abspath("."), text, kernel_name, overrides)

    return _register(where, op_name, spec, meta_fn, eager_fn, schema, ("ptx", text, kernel_name), register)


Dims = Union[int, Sequence[int]]


class Kernel:
    """The compiled kernel of an op kernelop registered: what an ``eager_fn`` launches."""

    def __init__(self, op_name: str) -> None:
        self.op_name = op_name
        self._registration = _kernelop_torch.find_registration(op_name)

    @property
    def parameters(self) -> List[str]:
        """The kernel's parameters, e.g. ``['const float* x', 'int numel(x)', 'float* y']``."""
        return list(self._registration.parameters)

    @property
    def declarative(self) -> bool:
        """Everything is declared (shapes, launch): C++ per call, and the op can go in a package."""
        return bool(self._registration.declarative)

    @property
    def tactics(self) -> List[str]:
        """The op's tactics (one per config, id = index), e.g. ``['BLOCK=256', 'BLOCK=1024']``."""
        return list(self._registration.tactics)

    def pin_tactic(self, tactic: Optional[int]) -> None:
        """Every launch uses ``tactic`` (None: choose again); one it cannot run is an error."""
        if tactic is None:
            self._registration.pin_tactic(-1)
            return
        # An id is an int (or an integer type such as numpy's), never a bool, float or str that happens to
        # convert (Note [numbers from users]); its range is checked by KernelOp::pin_tactic.
        if isinstance(tactic, bool) or not hasattr(type(tactic), "__index__"):
            n = len(self._registration.tactics)
            raise TypeError(f"op {self.op_name}: pin_tactic takes a tactic id, an int from 0 to {n - 1} (or None to "
                            f"choose again), got {_kernelop.shorten(repr(tactic), 60)} ({type(tactic).__name__})")
        self._registration.pin_tactic(operator.index(tactic))

    @property
    def pinned_tactic(self) -> Optional[int]:
        t = self._registration.pinned_tactic
        return None if t < 0 else t

    @property
    def last_tactic(self) -> Optional[int]:
        """The tactic of the latest launch (None before any)."""
        t = self._registration.last_tactic
        return None if t < 0 else t

    def tuning_report(self) -> Dict[str, Any]:
        """What tuning did: counters, and per device model the tactic and every config's time
        (milliseconds; None when not timed) for each key seen."""
        tables = json.loads(self._registration.tuning_tables_json())
        for t in tables:
            for e in t["entries"]:
                e["times_ms"] = [None if v < 0 else v for v in e["times_ms"]]
        return {"stats": dict(self._registration.tuning_stats()), "tables": tables}

    def add_tuning_tables(self, text: str) -> None:
        """Adds tuning tables (the JSON of ``kernelop tune --output``) to the op."""
        self._registration.add_tuning_tables_json(text)

    def launch(self, grid: Dims, block: Dims, args: Sequence[Any], *, shared_mem: int = 0,
               stream: Any = None) -> None:
        """Launches on the tensors' device, on ``stream`` (default: PyTorch's current stream there).

        ``args`` follow the kernel's parameters: CUDA tensors (contiguous; passed as data pointers)
        where it takes pointers, Python numbers where it takes values. Dtypes, devices, int
        ranges, grid and block limits are checked; errors name the argument.
        """
        converted: List[Any] = []
        device = -1
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if not a.is_cuda:
                    raise RuntimeError(f"op {self.op_name}: kernel argument {i} is on {a.device}; "
                                       "kernels take CUDA tensors")
                converted.append((a.data_ptr(), str(a.dtype).replace("torch.", ""), tuple(a.shape), a.stride(),
                                  a.device.index))
                device = a.device.index if device < 0 else device
            elif isinstance(a, bool) or type(a).__name__ == "bool_":
                converted.append(bool(a))
            elif isinstance(a, numbers.Integral):
                converted.append(int(a))
            elif isinstance(a, numbers.Real):
                converted.append(float(a))
            else:
                raise TypeError(f"op {self.op_name}: kernel argument {i} is a {type(a).__name__}; expected a CUDA "
                                "tensor, int, float or bool")
        if device < 0:
            device = torch.cuda.current_device()
        if isinstance(stream, torch.cuda.Stream):
            stream = stream.cuda_stream
        as_list = (lambda d: [d] if isinstance(d, int) else list(d))
        self._registration.launch(as_list(grid), as_list(block), converted, int(shared_mem), stream, device)


def kernel(op_name: str) -> Kernel:
    """The compiled kernel of ``op_name`` (registered by cuda_kernel_op, ptx_op or load_package)."""
    return Kernel(op_name)


def build_package(op_name: str, spec: KernelSpec, path: str, *, archs: Optional[Sequence[str]] = None,
                  base_dir: str = ".") -> str:
    """Compiles ``spec`` and writes a self-contained .kop package to ``path``."""
    _kernelop.build_package(json.dumps(spec.to_json(op_name)), os.path.abspath(base_dir),
                            _str_list(archs, "archs"), os.fspath(path))
    return str(path)


def register_spec_file(path: str, *, archs: Optional[Sequence[str]] = None) -> Any:
    """Registers the op of a JSON spec file (docs/spec-format.md, e.g. examples/relu.json), whose
    relative paths resolve against the file's folder; returns its torch.ops packet."""
    schema = _kernelop_torch.register_spec_file(os.fspath(path), _str_list(archs, "archs"))
    return _op_object(schema.split("(", 1)[0])


def build_package_file(path: str, out: str, *, archs: Optional[Sequence[str]] = None) -> str:
    """Compiles the op of a JSON spec file and writes its .kop package to ``out``."""
    _kernelop.build_package_file(os.fspath(path), _str_list(archs, "archs"), os.fspath(out))
    return str(out)


def load_package(path: str) -> Any:
    """Registers the op of a .kop package (no NVRTC, no source) and returns its torch.ops packet."""
    schema = _kernelop_torch.load_package(str(path))
    return _op_object(schema.split("(", 1)[0])
