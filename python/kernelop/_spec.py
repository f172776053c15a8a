"""The kernel spec DSL, with torch_tensorrt.kernels' names and semantics (see SEED_API.md).

Each class maps 1:1 onto a field of the JSON spec format (docs/spec-format.md), which is what
crosses into C++: one validator and one set of error messages serve C++, JSON and Python.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _kernelop


def _r(value: Any) -> str:
    """A user value's repr as messages quote it: cut to a readable length (C++'s detail::shorten)."""
    return _kernelop.shorten(repr(value), 80)


_SCALAR_TYPES = {float: "float", int: "int", bool: "bool"}


def _dtype_name(dtype: Any) -> str:
    """torch.float16 / "float16" / "T" (a type parameter) -> the spec's name."""
    text = str(dtype)
    return text[len("torch."):] if text.startswith("torch.") else text


def _str_list(value: Any, where: str) -> List[str]:
    """A list of strings from a list/tuple; a lone str is a TypeError, not a list of characters."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{where}: expected a list of str, got {type(value).__name__} {_r(value)}"
                        + (f"; write [{_r(value)}]" if isinstance(value, str) else ""))
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"{where}[{i}]: expected a str, got {type(item).__name__} {_r(item)}")
    return list(value)


def _int_list(value: Any, where: str) -> List[int]:
    """A list of ints from a list/tuple; a lone int or a str is a TypeError."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{where}: expected a tuple of int, got {type(value).__name__} {_r(value)}"
                        + (f"; write ({_r(value)},)" if isinstance(value, int) else ""))
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int):
            raise TypeError(f"{where}[{i}]: expected an int, got {type(item).__name__} {_r(item)}")
    return list(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{where}: expected a bool, got {type(value).__name__} {_r(value)}")
    return value


def _double_holds(value: int) -> bool:
    """Whether a double holds the integer exactly (2**53 + 1 it does not; 10**400 overflows)."""
    try:
        return float(value) == value
    except OverflowError:
        return False


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: expected an int, got {type(value).__name__} {_r(value)}")
    return value


def _expr(value: Union[int, str]) -> Union[int, str]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"expected an expression (str) or an int, got {type(value).__name__}")
    return value


@dataclass
class InputDecl:
    """A tensor input; the kernel receives ``const T*`` (``T*`` when ``mutated``)."""

    name: str
    dtype: Any = None
    mutated: bool = False
    # kernelop: the kernel takes the tensor with its strides (a view, no copy); read them with
    # stride(name, axis) in extras and state what the kernel needs in requires.
    strided: bool = False
    # kernelop: with mutated, the value the op leaves in the tensor is one of its results (an in-place op's self): the
    # backward reads its gradient as grad_<name>_out (docs/autograd.md, written results).
    result: bool = False

    def _json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name}
        if self.dtype is not None:
            out["dtype"] = _dtype_name(self.dtype)
        if _bool(self.mutated, f"InputDecl({_r(self.name)}).mutated"):
            out["mutated"] = True
        if _bool(self.strided, f"InputDecl({_r(self.name)}).strided"):
            out["strided"] = True
        if _bool(self.result, f"InputDecl({_r(self.name)}).result"):
            out["result"] = True
        return out


@dataclass
class ScalarInput:
    """A scalar input passed by value: ``py_type`` is float, int or bool (or "float64"/"int64").

    ``symint=True`` (or ``py_type=torch.SymInt``, taken as int64) marks an integer that carries a
    size: ``SymInt`` in the schema and symbolic under tracing with dynamic shapes.
    """

    name: str
    py_type: Any = float
    symint: bool = False

    def _json(self) -> Dict[str, Any]:
        symint = _bool(self.symint, f"ScalarInput({_r(self.name)}).symint")
        if getattr(self.py_type, "__name__", None) == "SymInt":
            kind, symint = "int64", True
        elif self.py_type in _SCALAR_TYPES:
            kind = _SCALAR_TYPES[self.py_type]
        elif self.py_type in ("float64", "int64"):
            kind = self.py_type
        else:
            raise ValueError(
                f"ScalarInput {_r(self.name)}: py_type must be float, int, bool or torch.SymInt, "
                f"got {_r(self.py_type)}")
        return {"name": self.name, "scalar": kind, **({"symint": True} if symint else {})}


def _input_ref(value: Union[int, str]) -> Union[int, str]:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(
            f"input_idx must be an int (position among tensor inputs) or a str (input name), "
            f"got {type(value).__name__}")
    return value


@dataclass
class SameAs:
    """The shape of a tensor input, any rank; kernelop: ``dims`` replaces axes by expressions,
    e.g. ``SameAs("x", dims={-1: "dim(x, -1) // 2"})``."""

    input_idx: Union[int, str] = 0
    dims: Optional[Dict[int, Union[int, str]]] = None

    def _json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"same_as": _input_ref(self.input_idx)}
        if self.dims:
            if not isinstance(self.dims, dict):
                raise TypeError(f"SameAs.dims: expected a dict of axis: expression, got "
                                f"{type(self.dims).__name__}")
            out["dims"] = {str(_int(a, "SameAs.dims axis")): _expr(e) for a, e in self.dims.items()}
        return out


@dataclass
class ReduceDims:
    input_idx: Union[int, str]
    dims: Tuple[int, ...]
    keepdim: bool = False

    def _json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"input": _input_ref(self.input_idx),
                               "dims": _int_list(self.dims, "ReduceDims.dims")}
        if _bool(self.keepdim, "ReduceDims.keepdim"):
            out["keepdim"] = True
        return {"reduce_dims": out}


ShapeRel = Union[SameAs, ReduceDims, Sequence[Union[int, str]]]


@dataclass
class Fill:
    """Note [initialised outputs]: the output holds ``value`` everywhere before the kernel runs (``Fill(0)``: zeros,
    for a kernel that writes part of it or accumulates into it); ``float("inf")`` and NaN are allowed."""

    value: float = 0.0

    def _json(self) -> Dict[str, Any]:
        v = self.value
        if isinstance(v, bool):
            return {"fill": v}
        if not isinstance(v, (int, float)):
            raise TypeError(f"Fill.value: expected a number, got {type(v).__name__}")
        if isinstance(v, float) and not math.isfinite(v):
            return {"fill": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        return {"fill": v}


@dataclass
class Clone:
    """Note [initialised outputs]: the output starts as a copy of tensor input ``input`` (its shape and dtype: the
    output's shape is ``SameAs(input)``)."""

    input: str

    def _json(self) -> Dict[str, Any]:
        return {"clone": self.input}


@dataclass
class OutputDecl:
    """An output: ``shape`` is SameAs, ReduceDims, or a list of expressions ("dim(x, 1) * 2")."""

    name: str
    shape: ShapeRel
    dtype_from: Optional[str] = None
    dtype: Any = None
    init: Optional[Union[Fill, Clone]] = None
    # A workspace of the op's launches (docs/spec-format.md 4.1): allocated by kernelop per call, never returned.
    scratch: bool = False
    # Note [returned views]: the op returns the output as output.permute(permute) (dim k is dim permute[k] of the
    # contiguous tensor of `shape` its launches write); None: as written.
    permute: Optional[Sequence[int]] = None
    # The data pointer's alignment in bytes the kernel was compiled assuming (checked at launch for a caller's buffer);
    # None: none.
    align: Optional[int] = None

    def _json(self) -> Dict[str, Any]:
        if isinstance(self.shape, (SameAs, ReduceDims)):
            shape: Any = self.shape._json()
        elif isinstance(self.shape, (list, tuple)):
            shape = [_expr(d) for d in self.shape]
        else:
            raise TypeError(
                f"OutputDecl {_r(self.name)}: shape must be SameAs, ReduceDims or a list of expressions, "
                f"got {type(self.shape).__name__}")
        out: Dict[str, Any] = {"name": self.name, "shape": shape}
        if self.dtype_from is not None:
            out["dtype_from"] = self.dtype_from
        if self.dtype is not None:
            out["dtype"] = _dtype_name(self.dtype)
        if self.init is not None:
            if not isinstance(self.init, (Fill, Clone)):
                raise TypeError(f"OutputDecl {_r(self.name)}: init must be Fill or Clone, got "
                                f"{type(self.init).__name__}")
            out["init"] = self.init._json()
        if _bool(self.scratch, f"OutputDecl {_r(self.name)}.scratch"):
            out["scratch"] = True
        if self.permute is not None:
            if not isinstance(self.permute, (list, tuple)) or not all(type(d) is int for d in self.permute):
                raise TypeError(f"OutputDecl {_r(self.name)}: permute must be a list of ints, got "
                                f"{repr(self.permute)[:60]}")
            out["permute"] = list(self.permute)
        if self.align is not None:
            if type(self.align) is not int:
                raise TypeError(f"OutputDecl {_r(self.name)}: align must be an int (bytes), got "
                                f"{repr(self.align)[:60]}")
            out["align"] = self.align
        return out


@dataclass
class Numel:
    input_name: str
    int64: bool = False

    def _json(self) -> Dict[str, Any]:
        return {"numel": self.input_name, **({"int64": True} if _bool(self.int64, "Numel.int64") else {})}


@dataclass
class DimSize:
    input_name: str
    dim: int
    int64: bool = False

    def _json(self) -> Dict[str, Any]:
        return {"dim_size": self.input_name, "axis": _int(self.dim, "DimSize.dim"),
                **({"int64": True} if _bool(self.int64, "DimSize.int64") else {})}


@dataclass
class Expr:
    """An extra argument computed by an expression, e.g. Expr("cdiv(numel(x), 4)")."""

    text: Union[int, str]
    int64: bool = False

    def _json(self) -> Dict[str, Any]:
        return {"expr": _expr(self.text), **({"int64": True} if _bool(self.int64, "Expr.int64") else {})}


@dataclass
class FloatConst:
    """An extra argument that is a float constant, passed as a 32-bit float (JSON {"float": 0.5})."""

    value: float

    def _json(self) -> Dict[str, Any]:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise TypeError(f"FloatConst.value: expected a number, got {type(self.value).__name__}")
        return {"float": float(self.value)}


@dataclass
class Elementwise:
    block: Tuple[int, ...] = (256,)
    layout: str = "flat"
    over: Optional[str] = None

    def _json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"block": _int_list(self.block, "Elementwise.block"), "layout": self.layout}
        if self.over is not None:
            out["over"] = self.over
        return {"elementwise": out}


@dataclass
class Reduction:
    reduce_dims: Tuple[int, ...]
    block_size: int = 256
    shared_mem: Optional[Union[int, str]] = None

    def _json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"reduce_dims": _int_list(self.reduce_dims, "Reduction.reduce_dims"),
                               "block_size": _int(self.block_size, "Reduction.block_size")}
        if self.shared_mem is not None:
            out["shared_mem"] = _expr(self.shared_mem)
        return {"reduction": out}


@dataclass
class Custom:
    """Declarative launch geometry: grid, block and dynamic shared memory as expressions.

    Unlike the reference's Custom(fn), this works in eager mode, torch.compile and packages.
    """

    grid: Sequence[Union[int, str]]
    block: Sequence[Union[int, str]]
    shared_mem: Union[int, str] = 0
    cluster: Optional[Sequence[Union[int, str]]] = None  # thread-block cluster (sm_90+); None: none

    def _json(self) -> Dict[str, Any]:
        if callable(self.grid):
            raise TypeError("Custom: kernelop takes grid/block expressions, not a callable")
        dims_of = (("grid", self.grid), ("block", self.block)) + \
            ((("cluster", self.cluster),) if self.cluster is not None else ())
        for where, dims in dims_of:
            if isinstance(dims, (str, bytes, int)) or not isinstance(dims, (list, tuple)):
                raise TypeError(f"Custom.{where}: expected a list of expressions, got "
                                f"{type(dims).__name__} {_r(dims)}")
        out = {"grid": [_expr(g) for g in self.grid], "block": [_expr(b) for b in self.block],
               "shared_mem": _expr(self.shared_mem)}
        if self.cluster is not None:
            out["cluster"] = [_expr(c) for c in self.cluster]
        return {"custom": out}


@dataclass
class Tunable:
    """A tunable the configs bind: template argument / launch-expression name, optionally a -D define."""
    name: str
    define: bool = False
    type: str = "int"  # or "bool"

    def _json(self) -> Any:
        if not isinstance(self.name, str):
            raise TypeError(f"Tunable.name: expected a str, got {type(self.name).__name__}")
        if not self.define and self.type == "int":
            return self.name
        return {"name": self.name, "define": _bool(self.define, "Tunable.define"), "type": self.type}


@dataclass
class Backward:
    """A spec's backward kernel (docs/autograd.md; JSON "backward"): ``spec`` is any KernelSpec whose inputs are
    named after the forward's inputs and outputs and ``grad_<output>``, and whose outputs are ``grad_<input>`` for
    each of ``differentiable``; ``from_`` renames ({"g": "grad_y"}: input g receives grad_y)."""

    differentiable: Sequence[str]
    spec: Any  # a KernelSpec; for an op recorded by custom_plugin, kernelop.triton(bwd_launch_fn, ...) and the like
    from_: Optional[Dict[str, str]] = None

    def _head(self) -> Dict[str, Any]:
        """"differentiable" and "from" of the JSON, checked."""
        doc: Dict[str, Any] = {"differentiable": _str_list(self.differentiable, "Backward.differentiable")}
        doc.update(_renames(self.from_, "Backward.from_"))
        return doc

    def _json(self) -> Dict[str, Any]:
        if not isinstance(self.spec, KernelSpec):
            raise TypeError(f"Backward.spec: expected a KernelSpec, got {type(self.spec).__name__} (a recorded "
                            "backward, kernelop.triton(...), is for custom_plugin's backward=)")
        doc = self._head()
        doc.update(self.spec._spec_json())
        return doc


def _renames(from_: Any, where: str) -> Dict[str, Any]:
    """{"from": {...}} of a backward's or a launch's JSON ({} when there is none), checked."""
    if not from_:
        return {}
    if not isinstance(from_, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in from_.items()):
        raise TypeError(f"{where}: expected a dict of name -> what it receives")
    return {"from": dict(from_)}


@dataclass
class HostTest:
    """A test a launch runs under (docs/spec-format.md 4.1, JSON "when"; Note [host reads]): the one element of
    tensor ``tensor``, read on the host when the launch is reached, == ``value`` (``equal``) or != it."""

    tensor: str
    value: float
    equal: bool = True

    def _json(self) -> Dict[str, Any]:
        if not isinstance(self.tensor, str):
            raise TypeError(f"HostTest.tensor: expected a str, got {type(self.tensor).__name__}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise TypeError(f"HostTest.value: expected a number, got {type(self.value).__name__}")
        if isinstance(self.value, int) and not _double_holds(self.value):  # JSON would round it, maybe to 2^63
            raise ValueError(f"HostTest.value: expected a number a double holds exactly (an integer within +-2^53), "
                             f"got {self.value}")
        return {"tensor": self.tensor, "==" if _bool(self.equal, "HostTest.equal") else "!=": self.value}


@dataclass
class Launch:
    """A kernel launched after the op's own (docs/spec-format.md 4.1; JSON "then"): ``spec`` is a KernelSpec whose
    tensors and scalars are the op's, named after them; ``from_`` renames ({"p": "part"}: its tensor p is the op's
    part). ``before``: it runs before the op's own kernel, after the inits (such launches come first)."""

    spec: Any
    from_: Optional[Dict[str, str]] = None
    before: bool = False

    def _json(self) -> Dict[str, Any]:
        if not isinstance(self.spec, KernelSpec):
            raise TypeError(f"Launch.spec: expected a KernelSpec, got {type(self.spec).__name__}")
        if not isinstance(self.before, bool):
            raise TypeError(f"Launch.before: expected a bool, got {type(self.before).__name__}")
        doc = _renames(self.from_, "Launch.from_")
        if self.before:
            doc["before"] = True
        doc.update(self.spec._spec_json())
        return doc


@dataclass
class KernelSpec:
    kernel_source: str
    kernel_name: str
    inputs: Optional[Sequence[Union[InputDecl, ScalarInput]]] = None
    outputs: Optional[Sequence[OutputDecl]] = None
    extras: Sequence[Union[Numel, DimSize, Expr]] = field(default_factory=list)
    geometry: Optional[Union[Elementwise, Reduction, Custom]] = None
    include_paths: Optional[List[str]] = None
    compile_std: str = "c++17"
    arch_override: Optional[Union[str, Sequence[str]]] = None
    # kernelop's additions
    defines: Sequence[str] = ()
    fast_math: bool = False
    line_info: bool = False
    type_params: Optional[Dict[str, Sequence[Any]]] = None
    # Conditions the inputs must satisfy, e.g. "dim(bias, 0) == dim(x, -1)" or "aligned(x, 16)":
    # checked before every launch and a guard under tracing.
    requires: Sequence[str] = ()
    # The kernel's parameters in its own order: input/output names (str) and extras in place of
    # ``extras`` (Numel, DimSize, Expr, FloatConst). None: inputs, extras, outputs.
    params: Optional[Sequence[Union[str, Numel, DimSize, Expr, FloatConst]]] = None
    # Tactics (docs/tactics.md): configs bind tunables, e.g. [{"BLOCK": 256}, {"BLOCK": 1024,
    # "requires": ["numel(x) % 4 == 0"]}]; tunables default to the first config's keys (a bool
    # value makes a bool tunable). Tunable("VEC", define=True) also passes -DVEC=<value>.
    configs: Sequence[Dict[str, Any]] = ()
    tunables: Optional[Sequence[Union[str, "Tunable"]]] = None
    tuning_key: Optional[Sequence[str]] = None
    # The op's backward (docs/autograd.md): Backward(differentiable=["x"], spec=KernelSpec(...)).
    backward: Optional["Backward"] = None
    # Kernels launched after this one, in order, on its tensors (docs/spec-format.md 4.1): [Launch(KernelSpec(...))].
    then: Sequence["Launch"] = ()
    # The kernel runs only when every test holds (Note [host reads]): [HostTest("g", 1.0, equal=False)].
    when: Sequence["HostTest"] = ()

    def to_json(self, op_name: str) -> Dict[str, Any]:
        """The JSON spec document (docs/spec-format.md) for ``op_name``."""
        return {"op": op_name, **self._spec_json()}

    def _spec_json(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {"kernel_name": self.kernel_name, "kernel_source": self.kernel_source}
        if self.inputs is not None:
            doc["inputs"] = [self._typed(i, (InputDecl, ScalarInput), "inputs")._json() for i in self.inputs]
        if self.outputs is not None:
            doc["outputs"] = [self._typed(o, (OutputDecl,), "outputs")._json() for o in self.outputs]
        if self.extras:
            doc["extras"] = [self._typed(e, (Numel, DimSize, Expr), "extras")._json() for e in self.extras]
        if self.geometry is not None:
            doc["geometry"] = self._typed(self.geometry, (Elementwise, Reduction, Custom), "geometry")._json()
        include_paths = _str_list(self.include_paths, "KernelSpec.include_paths")
        if include_paths:
            doc["include_paths"] = include_paths
        if self.compile_std != "c++17":
            doc["compile_std"] = self.compile_std
        if self.arch_override:
            # One string is the reference's form of arch_override; kernelop also takes a list.
            doc["arch_override"] = ([self.arch_override] if isinstance(self.arch_override, str)
                                    else _str_list(self.arch_override, "KernelSpec.arch_override"))
        if _str_list(self.defines, "KernelSpec.defines"):
            doc["defines"] = list(self.defines)
        if _bool(self.fast_math, "KernelSpec.fast_math"):
            doc["fast_math"] = True
        if _bool(self.line_info, "KernelSpec.line_info"):
            doc["line_info"] = True
        if self.type_params:
            doc["type_params"] = [{"name": k, "dtypes": [_dtype_name(d) for d in v]}
                                  for k, v in self.type_params.items()]
        if _str_list(self.requires, "KernelSpec.requires"):
            doc["requires"] = list(self.requires)
        if self.configs or self.tunables:
            doc.update(self._tactics_json())
        if self.tuning_key is not None:
            doc["tuning_key"] = _str_list(self.tuning_key, "KernelSpec.tuning_key")
        if self.params is not None:
            if isinstance(self.params, (str, bytes)) or not isinstance(self.params, (list, tuple)):
                raise TypeError(f"KernelSpec.params: expected a list, got {type(self.params).__name__}")
            doc["params"] = [p if isinstance(p, str) else
                             self._typed(p, (Numel, DimSize, Expr, FloatConst), "params")._json()
                             for p in self.params]
        if self.backward is not None:
            doc["backward"] = self._typed(self.backward, (Backward,), "backward")._json()
        if self.then:
            if isinstance(self.then, (str, bytes, dict)) or not isinstance(self.then, (list, tuple)):
                raise TypeError(f"KernelSpec.then: expected a list of Launch, got {type(self.then).__name__}")
            doc["then"] = [self._typed(launch, (Launch,), "then")._json() for launch in self.then]
        if self.when:
            if not isinstance(self.when, (list, tuple)):
                raise TypeError(f"KernelSpec.when: expected a list of HostTest, got {type(self.when).__name__}")
            doc["when"] = [self._typed(t, (HostTest,), "when")._json() for t in self.when]
        return doc

    def _tactics_json(self) -> Dict[str, Any]:
        if isinstance(self.configs, (str, bytes, dict)) or not isinstance(self.configs, (list, tuple)):
            raise TypeError(f"KernelSpec.configs: expected a list of dicts, got {type(self.configs).__name__}")
        for i, c in enumerate(self.configs):
            if not isinstance(c, dict):
                raise TypeError(f"KernelSpec.configs[{i}]: expected a dict such as {{'BLOCK': 256}}, got "
                                f"{type(c).__name__}")
        if self.tunables is None:
            first = self.configs[0] if self.configs else {}
            tunables = [Tunable(k, type="bool" if isinstance(v, bool) else "int")
                        for k, v in first.items() if k != "requires"]
        else:
            if isinstance(self.tunables, (str, bytes)) or not isinstance(self.tunables, (list, tuple)):
                raise TypeError(f"KernelSpec.tunables: expected a list, got {type(self.tunables).__name__}")
            tunables = [Tunable(t) if isinstance(t, str) else self._typed(t, (Tunable,), "tunables")
                        for t in self.tunables]
        configs = []
        for i, c in enumerate(self.configs):
            doc = dict(c)
            if "requires" in doc:
                doc["requires"] = _str_list(doc["requires"], f"KernelSpec.configs[{i}].requires")
            configs.append(doc)
        return {"tunables": [t._json() for t in tunables], "configs": configs}

    @staticmethod
    def _typed(value: Any, types: tuple, where: str) -> Any:
        if not isinstance(value, types):
            names = ", ".join(t.__name__ for t in types)
            raise TypeError(f"KernelSpec.{where}: expected {names}, got {type(value).__name__}")
        return value
