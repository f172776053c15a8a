"""kernelop ops as JAX functions: the same spec and the same .kop package as an XLA FFI custom call (docs/jax.md).

``kernelop.jax.op(source)`` loads a ``.kop`` package (from any front end: CUDA C++, PTX, Triton, CuTe DSL, cuTile;
no DSL, no NVRTC, no torch needed) or compiles a JSON spec file or a ``kernelop.KernelSpec`` (NVRTC), and returns a
function of JAX arrays built on ``jax.ffi.ffi_call``. One generic FFI target serves every op (Note [jax ffi
target], jax/src/ffi_handlers.cpp): the op and the identity of its build travel as attributes of the custom call, so
a traced or exported computation runs only with the build it was traced with, in any process that loaded it.

Result shapes and dtypes come from the spec's expressions, evaluated by kernelop's one shape evaluator over the
arrays' shapes, ints or JAX's symbolic dimensions (jax.export shape polymorphism); the op's requirements are checked
at trace time where the sizes tell, else by the launch. Scalar inputs are static (Python numbers, attributes of the
call). An input the op writes (``Tensor(a!)``) is an extra result aliased to it (``input_output_aliases``): the
function returns the op's results, then the written inputs' new values. Needs no torch.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import jax
import numpy as np
from jax.custom_derivatives import SymbolicZero

from . import _kernelop_jax as _ext

__all__ = ["Op", "export", "op"]

_FLOAT_TYPES = ("float", "float64")
_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_lock = threading.Lock()
_targets_registered = False


def _register_targets() -> None:
    """The FFI targets and their state type, registered with JAX once per process (platform CUDA)."""
    global _targets_registered
    with _lock:
        if _targets_registered:
            return
        try:  # the CUDA backend first: registrations queued before it starts would flush out of order
            jax.devices("gpu")
        except RuntimeError:
            pass  # no GPU backend here (CPU-only jaxlib): tracing, lowering and export still work
        name, registration = _ext.state_type()
        jax.ffi.register_ffi_type(name, registration, platform="CUDA")
        for target, stages in _ext.targets().items():
            jax.ffi.register_ffi_target(target, stages, platform="CUDA", api_version=1)
        _targets_registered = True


def _max_dim(a: Any, b: Any) -> Any:
    from jax._src import core
    return core.max_dim(a, b)


def _min_dim(a: Any, b: Any) -> Any:
    from jax._src import core
    return core.min_dim(a, b)


class Op:
    """A kernelop op as a JAX function: ``op(*arrays_and_scalars, **by_name)``, in the op's declared input order.
    ``info`` is the op's signature (name, inputs, results); ``vmap_method`` how ``jax.vmap`` calls it."""

    def __init__(self, info: Dict[str, Any], vmap_method: Optional[str] = None):
        self.info = info
        self.name: str = info["op"]
        self._vmap_given = vmap_method is not None
        written_any = any(i["tensor"] and i["mutated"] for i in info["inputs"])
        # A written input makes a batch something else than more elements: one call per batch element.
        self.vmap_method: str = vmap_method or ("sequential" if written_any else info["vmap_method"])
        # The backward (its own Op, with its own backward if it has one), called by the VJP.
        self.backward: Optional[Op] = Op(info["backward"]) if "backward" in info else None
        self._inputs = info["inputs"]
        self._tensors = [i for i in self._inputs if i["tensor"]]
        self._scalars = [i for i in self._inputs if not i["tensor"]]
        self._mutated = [k for k, i in enumerate(self._tensors) if i["mutated"]]
        self.__name__ = self.name.replace("::", "_")
        self.__doc__ = f"kernelop op {info['schema']} (XLA FFI target {info['target']})"

    def __repr__(self) -> str:
        return f"<kernelop.jax op {self.info['schema']}>"

    def _bind(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[List[Any], List[Any]]:
        """The call's arrays (declared order) and scalars (declared order), with the op's name in every refusal."""
        names = [i["name"] for i in self._inputs]
        if len(args) > len(names):
            raise TypeError(f"op {self.name}: takes {len(names)} input(s) ({', '.join(names)}), got {len(args)}")
        given: Dict[str, Any] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"op {self.name}: no input named {k!r} (inputs: {', '.join(names)})")
            if k in given:
                raise TypeError(f"op {self.name}: input {k!r} given twice")
            given[k] = v
        arrays, scalars = [], []
        for i in self._inputs:
            if i["name"] not in given:
                if not i["tensor"] and "default" in i:
                    given[i["name"]] = i["default"]
                else:
                    raise TypeError(f"op {self.name}: missing input {i['name']!r}")
            v = given[i["name"]]
            if i["tensor"]:
                if not hasattr(v, "shape") or not hasattr(v, "dtype"):
                    raise TypeError(f"op {self.name}: input {i['name']!r} must be an array, got {type(v).__name__}")
                arrays.append(v)
            else:
                scalars.append(self._scalar(i, v))
        return arrays, scalars

    def _scalar(self, i: Dict[str, Any], v: Any) -> Any:
        """A static scalar: a Python (or NumPy) number of the declared kind, never a traced array."""
        if hasattr(v, "shape") and not isinstance(v, np.generic):  # an array, or a traced value
            raise TypeError(f"op {self.name}: scalar {i['name']!r} is static (an attribute of the call): pass a "
                            f"Python number, not an array or a traced value ({type(v).__name__})")
        kind = i["type"]
        if kind in _FLOAT_TYPES:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise TypeError(f"op {self.name}: scalar {i['name']!r} must be a float, got {type(v).__name__}")
            return float(v)
        if kind == "bool":
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"op {self.name}: scalar {i['name']!r} must be a bool, got {type(v).__name__}")
            return bool(v)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"op {self.name}: scalar {i['name']!r} must be an int, got {type(v).__name__}")
        return int(v)

    def result_shapes(self, *args: Any, **kwargs: Any) -> List[jax.ShapeDtypeStruct]:
        """The op's results for these inputs (arrays or ShapeDtypeStructs), as it returns them, with its checks."""
        arrays, scalars = self._bind(args, kwargs)
        written = self._trace(arrays, scalars)
        return [jax.ShapeDtypeStruct(tuple(w.shape[p] for p in o["permute"]), w.dtype) if o["permute"] else w
                for w, o in zip(written, self.info["outputs"])]

    def _trace(self, arrays: List[Any], scalars: List[Any]) -> List[jax.ShapeDtypeStruct]:
        """The results as the kernel writes them (an output returned as a permutation: before it)."""
        shapes = [list(a.shape) for a in arrays]
        dtypes = [jax.dtypes.canonicalize_dtype(a.dtype).name for a in arrays]  # what JAX will pass
        try:
            results = _ext.trace(self.name, shapes, dtypes, scalars, _max_dim, _min_dim)
        except TypeError as e:
            if ("must be int64" in str(e) or "must be float64" in str(e)) and not jax.config.read("jax_enable_x64"):
                raise TypeError(f"{e} (JAX makes 64-bit arrays 32-bit unless jax_enable_x64 is on)") from None
            raise
        return [jax.ShapeDtypeStruct(tuple(s), jax.numpy.dtype(d)) for s, d in results]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _register_targets()
        arrays, scalars = self._bind(args, kwargs)
        if self.backward is None:
            return self._launch(arrays, scalars)
        return self._differentiable(scalars)(*arrays)

    def _differentiable(self, scalars: List[Any]) -> Any:
        """The op as a jax.custom_vjp of its arrays (the scalars are static): the forward saves what the backward
        reads (Note [backward]: forward inputs — a written input's value as the op left it —, results), the VJP calls
        the backward op with them and the results' cotangents, and gives its gradients to the differentiable inputs
        (zero to the others). A written input's new value has no gradient (as in PyTorch): a nonzero cotangent for it
        is refused, never dropped (symbolic zeros tell them apart)."""
        link = self.info["link"]
        backward = self.backward
        assert backward is not None
        tensor_of = {i["slot"]: k for k, i in enumerate(self._tensors)}
        position_of_input = [(i["tensor"], i["slot"]) for i in self._inputs]
        n_results = len(self.info["outputs"])

        @jax.custom_vjp
        def f(*arrays: Any) -> Any:
            return self._launch(list(arrays), scalars)

        def forward(*primals: Any) -> Tuple[Any, Any]:
            arrays = tuple(p.value for p in primals)
            out = f(*arrays)  # through f: a derivative of the VJP differentiates the saved results with f's rule
            return out, (arrays, out)

        def dense(g: Any) -> Any:
            return jax.numpy.zeros(g.shape, g.dtype) if isinstance(g, SymbolicZero) else g

        def vjp(saved: Any, cotangents: Any) -> Tuple[Any, ...]:
            arrays, out = saved
            outs = out if isinstance(out, tuple) else (out,)
            grads = cotangents if isinstance(cotangents, tuple) else (cotangents,)
            for j, k in enumerate(self._mutated):
                if not isinstance(grads[n_results + j], SymbolicZero):
                    raise TypeError(f"op {self.name}: wrote into its input {self._tensors[k]['name']!r}, whose new "
                                    "value has no gradient (differentiate the op's results)")
            values = []
            for kind, index in link["sources"]:
                if kind == "input":
                    is_tensor, slot = position_of_input[index]
                    if not is_tensor:
                        values.append(scalars[slot])
                    elif tensor_of[slot] in self._mutated:  # the value the op left there
                        values.append(outs[n_results + self._mutated.index(tensor_of[slot])])
                    else:
                        values.append(arrays[tensor_of[slot]])
                elif kind == "output":
                    values.append(outs[index])
                elif kind == "grad":
                    values.append(dense(grads[index]))
                else:
                    raise TypeError(f"op {self.name}: kernelop.jax does not differentiate an op whose "
                                    "backward reads the gradient of a written input's new value")
            result = backward(*values)
            result = result if isinstance(result, tuple) else (result,)
            per_input: List[Any] = [None] * len(arrays)
            for b, g in enumerate(link["grad_of"]):
                is_tensor, slot = position_of_input[link["differentiable"][g]]
                per_input[tensor_of[slot]] = result[b]
            return tuple(per_input)

        f.defvjp(forward, vjp, symbolic_zeros=True)
        return f

    def _launch(self, arrays: List[Any], scalars: List[Any]) -> Any:
        """The custom call itself: the results as the kernel writes them, then the written inputs' new values."""
        outputs = self.info["outputs"]
        written = self._trace(arrays, scalars)
        results = list(written)
        aliases = {}
        for k in self._mutated:
            aliases[k] = len(written)
            written.append(jax.ShapeDtypeStruct(arrays[k].shape, arrays[k].dtype))
        attrs: Dict[str, Any] = {"kernelop_op": self.name, "kernelop_fingerprint": self.info["fingerprint"]}
        for i, v in zip(self._scalars, scalars):
            attrs[i["name"]] = np.float64(v) if i["type"] in _FLOAT_TYPES else np.int64(v)
        call = jax.ffi.ffi_call(self.info["target"], written, vmap_method=self._vmap_for(arrays, results),
                                input_output_aliases=aliases or None)
        outs = list(call(*arrays, **attrs))
        for n, o in enumerate(outputs):
            if o["permute"]:  # Note [returned views]: returned as this permutation of what the kernel wrote
                outs[n] = jax.numpy.transpose(outs[n], o["permute"])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _vmap_for(self, arrays: List[Any], results: List[jax.ShapeDtypeStruct]) -> str:
        """The op's vmap_method, or, for the default broadcast_all of a flat elementwise op, sequential for a call
        whose arrays are not all of the results' shape (a batch would then not be more of the same elements)."""
        if self._vmap_given or self.vmap_method != "broadcast_all":
            return self.vmap_method
        shapes = {tuple(a.shape) for a in arrays} | {tuple(r.shape) for r in results}
        return self.vmap_method if len(shapes) == 1 else "sequential"


def op(source: Union[str, os.PathLike, Any], *, op_name: Optional[str] = None, vmap_method: Optional[str] = None,
       archs: Optional[Sequence[str]] = None) -> Op:
    """A kernelop op as a JAX function.

    ``source``: a ``.kop`` package, a JSON spec file (docs/spec-format.md; compiled with NVRTC for ``archs``), or a
    ``kernelop.KernelSpec`` (with ``op_name``). A spec that declares a backward gives a differentiable function
    (``jax.grad``, ``jax.vjp``; a backward's own backward too). ``vmap_method``: how ``jax.vmap`` calls the op
    (jax.ffi.ffi_call's); by default ``broadcast_all`` for an op the spec declares elementwise over flat memory (an
    Elementwise geometry of flat layout whose results are shaped as an input: a batch is more elements) and
    ``sequential`` (one call per batch element, right for every op) for any other; ``op.vmap_method`` says which.
    ``expand_dims`` / ``broadcast_all`` may be given for an op that treats leading dimensions as more rows.
    """
    if vmap_method is not None and vmap_method not in _VMAP_METHODS:
        raise ValueError(f"kernelop.jax.op: vmap_method must be one of {', '.join(_VMAP_METHODS)}, got "
                         f"{vmap_method!r}")
    _register_targets()  # before anything can run: an exported computation in this process too
    arch_list = list(archs or [])
    if hasattr(source, "to_json"):  # a kernelop.KernelSpec
        if not op_name:
            raise TypeError("kernelop.jax.op: a KernelSpec needs op_name='ns::name'")
        info = _ext.load_spec(json.dumps(source.to_json(op_name)), os.getcwd(), arch_list)
        return Op(info, vmap_method)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"kernelop.jax.op: source must be a .kop package, a JSON spec file or a KernelSpec, got "
                        f"{type(source).__name__}")
    path = os.path.abspath(os.fspath(source))
    if op_name is not None:
        raise TypeError("kernelop.jax.op: op_name is for a KernelSpec (a package or spec file names its op)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"kernelop.jax.op: {path} does not exist (or is not a file)")
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        info = _ext.load_spec(text, os.path.dirname(path), arch_list)
    else:
        info = _ext.load_package(path)
    return Op(info, vmap_method)


def export(fun: Any, **kwargs: Any) -> Any:
    """``jax.export.export(fun, **kwargs)`` allowing kernelop's FFI targets: a serialized computation that calls
    kernelop ops runs in a process that loaded the same builds of them (kernelop.jax.op of the same packages), which
    checks that each op is there and is the build the computation was traced with (Note [jax ffi target])."""
    from jax import export as jax_export

    checks = list(kwargs.pop("disabled_checks", ()))
    checks += [jax_export.DisabledSafetyCheck.custom_call(t) for t in _ext.targets()]
    return jax_export.export(fun, disabled_checks=checks, **kwargs)
