"""Symbolic recording: fake tensors with symbolic sizes, and SymInt expressions as kernelop expressions.

The one place that turns PyTorch's symbolic shapes (sympy expressions over ShapeEnv symbols) into kernelop's
expression text (docs/spec-format.md, "Expressions"). Used by ko.custom_plugin (a Triton launch and its meta_impl,
recorded once) and by cuda_kernel_op's meta_fn tracing (shapes from a meta function, declaratively).

Each tensor input gets a fresh symbol per dim. Hints (the sizes PyTorch evaluates conditions with) are the caller's
example sizes, else distinct primes aligned from the right, so that x of [M, N] and a bias of [N] share the hint of
N (an ``assert bias.shape[0] == x.shape[1]`` holds) while M and N differ. Every condition the traced code evaluates
on the sizes becomes a guard; guards become the op's requirements, except those that pin a size to a value (a
specialisation kernelop refuses: the op would only be right for the size it was traced with).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

from . import _dsls, _kernelop
from ._dtypes import DTYPES

# Hints of dims counted from the last: distinct primes, so no two dims are equal or divisible by 16 by accident.
_HINTS = (1031, 1021, 1019, 1013, 1009, 997, 991, 983)
_DEFAULT_RANK = 2
_FLOAT_PROBE = 0.8735619230117291  # the value of a float scalar input while recording (Recorder.add_scalar)


class Unexpressible(ValueError):
    """An expression kernelop's expressions cannot state; the message says what and where."""


def shorten(text: Any, limit: int = 120) -> str:
    """`text` cut to about `limit` characters for a message, keeping its start and end and saying how long it was:
    the one cut of user strings (names, keys, values, reprs) in the messages of kernelop's Python front ends, C++'s
    detail::shorten (include/kernelop/error.hpp) bound as _kernelop.shorten."""
    text = str(text)
    try:
        return _kernelop.shorten(text, limit)
    except (TypeError, UnicodeError):  # text that is not valid UTF-8 (lone surrogates): escaped first
        return _kernelop.shorten(text.encode("utf-8", "backslashreplace").decode("utf-8"), limit)


# The packages whose frames are never the user's: kernelop's own, and the libraries a recording runs through. Frames
# are told apart by the resolved directory of their file, never by a substring of its name (a user's clone of
# kernelop is a folder named "kernelop" too).
_LIBRARIES = ("kernelop", "torch") + _dsls.PACKAGES


def _library_dirs() -> Tuple[str, ...]:
    dirs = [os.path.dirname(os.path.realpath(__file__))]  # this package, wherever it was copied or linked from
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        for d in (getattr(module, "__path__", None) or []) if module is not None else []:
            dirs.append(os.path.realpath(d))
    return tuple(dirs)


@functools.lru_cache(maxsize=4096)
def _is_library_file(filename: str, dirs: Tuple[str, ...]) -> bool:
    path = os.path.realpath(filename)
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def user_location(frames: Sequence[Any]) -> str:
    """"file:line" of the innermost of `frames` (FrameSummary-like, outermost first) in the user's code, or ""."""
    dirs = _library_dirs()
    for f in reversed(list(frames)):
        if not _is_library_file(f.filename, dirs):
            return f"{f.filename}:{f.lineno}"
    return ""


def canonical(text: str) -> str:
    return _kernelop.canonical_expr(text)


@dataclass
class TensorArg:
    name: str
    dtype: torch.dtype
    rank: int
    fake: Any = None
    symbols: List[sympy.Symbol] = field(default_factory=list)


@dataclass
class ScalarArg:
    name: str
    kind: str  # "float" | "int" | "bool"
    default: Any = inspect.Parameter.empty
    fake: Any = None
    symbol: Optional[sympy.Symbol] = None


class FloatProbe(float):
    """A float scalar input while recording: passing it on is fine, computing with it is host-side math."""

    kernelop_name: str = ""

    def __new__(cls, value: float, name: str) -> "FloatProbe":
        self = super().__new__(cls, value)
        self.kernelop_name = name
        return self

    def _refuse(self, *args: Any) -> Any:
        raise Unexpressible(f"launch_fn computes with float scalar '{shorten(self.kernelop_name)}' on the host; "
                            "kernelop passes scalars to the kernel as they are (do the arithmetic in the kernel)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __abs__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __bool__ = __int__ = __round__ = _refuse
    __hash__ = float.__hash__


class BoolProbe:
    """A bool scalar input while recording: branching on it is a host-side decision kernelop cannot record."""

    def __init__(self, name: str) -> None:
        self.kernelop_name = name

    def __bool__(self) -> bool:
        raise Unexpressible(f"launch_fn branches on bool scalar '{shorten(self.kernelop_name)}' on the host; pass it "
                            "to the kernel (or make it a config)")

    def __repr__(self) -> str:
        return f"<bool scalar {shorten(self.kernelop_name)}>"


def empty_permuted(shape: Sequence[Any], perm: Optional[Sequence[int]], dtype: torch.dtype, device: str) -> Any:
    """An uninitialised tensor of `shape`: contiguous, or ``base.permute(perm)`` of a contiguous base (Note [example
    layouts]); the one rule for the base's shape."""
    if perm is None:
        return torch.empty(list(shape), dtype=dtype, device=device)
    base = [shape[list(perm).index(i)] for i in range(len(shape))]
    return torch.empty(base, dtype=dtype, device=device).permute(*perm)


class Recorder:
    """A ShapeEnv, fake inputs with symbolic sizes, and the map back from symbols to kernelop leaves."""

    def __init__(self, where: str) -> None:
        self.where = where
        # PyTorch's own convention: symbolic sizes range over [2, inf), so tensor code (contiguity, broadcasting)
        # records no conditions about sizes 0 and 1. A launch_fn that decides something about size 1 itself is
        # therefore recorded for sizes >= 2 (docs/triton.md, "Limits").
        self.shape_env = ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=False)
        self.tensors: List[TensorArg] = []
        self.scalars: List[ScalarArg] = []
        self._leaf: Dict[sympy.Symbol, str] = {}  # every symbol created -> its leaf (before replacements)
        self.tunables: Dict[sympy.Symbol, str] = {}
        self._sm_count: Optional[torch.SymInt] = None  # sm_count(), made when host code asks for it
        # The architectures the op compiles for, when known as it is recorded ("sm_90a"): host code's decisions on
        # the device's compute capability are made for them (sizes.DeviceProperties).
        self.archs: Tuple[str, ...] = ()
        self.capability_read = False  # whether host code read the device's compute capability
        # Note [rank-free recording]: a recording made to be compared with one at another rank names axes so that
        # the same code gives the same text at every rank: the first axis 0, the last -1, others from the end; the
        # product of all of a tensor's sizes but one axis numel_except; a tensor whose every size another tensor's
        # equals same_shape. The recorder records at two ranks this way and keeps the op rank-free when both agree.
        self.rank_free: Set[str] = set()  # the tensors recorded so (those of rank >= 2)
        # Requirements that are no guard: a size a constexpr takes as it is holds the recorded class's value
        # (Note [size classes]), without the ShapeEnv replacing the size by that value everywhere.
        self.class_requirements: List[str] = []
        # Each size's place, the same at every rank a recording is made at (_higher_ranks adds axes after the first):
        # (tensor, 0) for the first axis, (tensor, axis - rank) for the others of a tensor of rank >= 2.
        self.dim_keys: Dict[sympy.Symbol, Tuple[str, int]] = {}
        # Note [example layouts]: tensors whose example is a permutation of a contiguous tensor (HF's q, a transposed
        # view of its projection) are recorded so, and their perm (the example is base.permute(perm)) is required.
        self.layouts: Dict[str, List[int]] = {}
        # Note [host reads]: .item() of a tensor (launch_fn's host sync, when allowed) -> the tensor; written item(t)
        # with the name `tensor_names` gives the tensor's storage once the op's tensors are named.
        self.host_reads: Dict[sympy.Symbol, Any] = {}
        self.tensor_names: Dict[int, str] = {}

    def keys_of(self, expr: Any) -> Set[Tuple[str, int]]:
        """The places (dim_keys) of the sizes that are `expr` in this recording (sizes launch_fn found equal,
        `assert a.shape == b.shape`, are one symbol)."""
        return {key for sym, key in self.dim_keys.items() if sym == expr or self.shape_env.replace(sym) == expr}

    # -- inputs --------------------------------------------------------------------------------------------------
    def add_tensor(self, name: str, dtype: torch.dtype, shape: Optional[Sequence[int]],
                   rank: int = _DEFAULT_RANK, perm: Optional[Sequence[int]] = None) -> Any:
        """A fake input of `shape` (symbolic sizes): contiguous, or with `perm` ``base.permute(perm)`` of a contiguous
        tensor (Note [example layouts])."""
        rank = len(shape) if shape is not None else rank
        hints = list(shape) if shape is not None else [_HINTS[rank - 1 - i] for i in range(rank)]
        sizes = []
        t = TensorArg(name, dtype, rank)
        for axis, hint in enumerate(hints):
            # Example sizes of 0 or 1 would be specialised; their dims are recorded with a generic hint instead.
            hint = int(hint) if int(hint) >= 2 else _HINTS[(rank - 1 - axis) % len(_HINTS)]
            sym = self.shape_env.create_symbol(hint, ConstantSource(f"{name}.size({axis})"),
                                               dynamic_dim=DimDynamic.DYNAMIC)
            self._leaf[sym] = f"dim({name}, {axis})"
            self.dim_keys[sym] = (name, axis if axis == 0 or rank < 2 else axis - rank)
            t.symbols.append(sym)
            sizes.append(self.shape_env.create_symintnode(sym, hint=hint))
        with self.mode:
            t.fake = empty_permuted(sizes, perm, dtype, "cuda")
            if perm is not None:
                self.layouts[name] = list(perm)
        self.tensors.append(t)
        return t.fake

    def layout_requirements(self) -> List[str]:
        """Note [example layouts]: each such tensor's strides, those of its permutation of a contiguous tensor: the
        innermost dim of the base has stride 1, every other the product of the sizes inside it; a dim of size 1 any
        (it moves no element, as PyTorch's contiguity rule says)."""
        out = []
        for t in self.tensors:
            perm = self.layouts.get(t.name)
            if perm is None:
                continue
            inside: List[str] = []
            for base_axis in reversed(range(len(perm))):  # the base's dims, innermost first, as axes of t
                axis = self.axis_text(t, perm.index(base_axis))
                stride = " * ".join(inside) or "1"
                out.append(canonical(f"select(dim({t.name}, {axis}) == 1, 1, stride({t.name}, {axis}) == {stride})"))
                inside.insert(0, f"dim({t.name}, {axis})")
        return out

    def add_scalar(self, name: str, kind: str, default: Any) -> Any:
        s = ScalarArg(name, kind, default)
        if kind == "int":
            # Unbacked: the value is unknown, so any host-side decision on it is an error, never a silent guess.
            s.fake = self.shape_env.create_unbacked_symint()
            s.symbol = s.fake.node.expr
            self._leaf[s.symbol] = name
        elif kind == "float":
            # A value no literal has by chance, distinct per scalar: float(x) of the probe (a plain float) is still
            # recognised as the scalar (float_scalar_name), never compiled in as a constant.
            s.fake = FloatProbe(_FLOAT_PROBE + len(self.scalars) * 2.0 ** -40, name)
        else:
            s.fake = BoolProbe(name)
        self.scalars.append(s)
        return s.fake

    def name_of(self, t: Any) -> Optional[str]:
        """The op's name of the tensor whose storage `t` views: an input's, else an output's or scratch's once
        named (tensor_names), else None."""
        try:
            storage = t.untyped_storage()._cdata
        except (AttributeError, RuntimeError, NotImplementedError):
            return None
        return next((x.name for x in self.tensors if x.fake.untyped_storage()._cdata == storage),
                    self.tensor_names.get(storage))

    def sm_count(self) -> Any:
        """The device's number of SMs (torch.cuda.get_device_properties(...).multi_processor_count): the leaf
        sm_count(), evaluated per device at launch. Unbacked, as an int scalar: host code may compute with it (a
        persistent kernel's grid, rows per program), never decide on its value."""
        if self._sm_count is None:
            self._sm_count = self.shape_env.create_unbacked_symint()
            # A device has at least one SM: what host code checks of it (a size >= 0) holds, and is no requirement.
            from torch.fx.experimental.symbolic_shapes import _constrain_range_for_size
            _constrain_range_for_size(self._sm_count, min=1)
            self._leaf[self._sm_count.node.expr] = "sm_count()"
        return self._sm_count

    def sm_count_symbol(self) -> Optional[sympy.Symbol]:
        """sm_count()'s symbol, if host code asked for it."""
        return None if self._sm_count is None else self._sm_count.node.expr

    def tunable(self, name: str, hint: int) -> Any:
        sym = self.shape_env.create_symbol(int(hint), ConstantSource(f"config.{name}"), dynamic_dim=DimDynamic.DYNAMIC)
        self.tunables[sym] = name
        return self.shape_env.create_symintnode(sym, hint=int(hint))

    # -- expressions ---------------------------------------------------------------------------------------------
    def canonical_symbol(self, sym: sympy.Symbol) -> sympy.Expr:
        return self.shape_env.replace(sym)

    def axis_text(self, t: TensorArg, axis: int) -> str:
        """How an axis of `t` is written (Note [rank-free recording])."""
        if t.name not in self.rank_free:
            return str(axis)
        return "-1" if axis == t.rank - 1 else "0" if axis == 0 else str(axis - t.rank)

    def _leaf_of(self, sym: sympy.Symbol, what: str) -> str:
        # The first tensor (in input order) whose dim is this symbol after replacements names it.
        for t in self.tensors:
            for axis, s in enumerate(t.symbols):
                if self.canonical_symbol(s) == sym:
                    return f"dim({t.name}, {self.axis_text(t, axis)})"
        if sym in self._leaf:
            return self._leaf[sym]
        if sym in self.tunables:
            return self.tunables[sym]
        if sym in self.host_reads:
            name = self.name_of(self.host_reads[sym])
            if name is not None:
                return f"item({name})"
            raise Unexpressible(f"{what}: it is .item() of a tensor that is no input, output or scratch of the op")
        raise Unexpressible(f"{what}: '{sym}' is not a size of an input, an int scalar or a config value "
                            "(data-dependent: it comes from a tensor's values: kernelop reads one on the host at "
                            "launch when the spec allows host syncs, ko.triton(..., host_sync=True))")

    def expr(self, value: Any, what: str) -> str:
        """The kernelop text of an int, a SymInt or a sympy expression (canonical form)."""
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, torch.SymInt):
            value = value.node.expr
        elif isinstance(value, torch.SymBool):
            value = value.node.expr
        if not isinstance(value, sympy.Basic):
            raise Unexpressible(f"{what}: expected an int or a size expression, got {type(value).__name__} "
                                f"{shorten(repr(value))}")
        return canonical(self._text(self.shape_env.replace(value), what))

    def same(self, a: sympy.Expr, b: sympy.Expr) -> bool:
        """Whether two size expressions are equal for all sizes (after replacements)."""
        a, b = self.shape_env.replace(a), self.shape_env.replace(b)
        return a == b or sympy.simplify(a - b) == 0

    def condition_texts(self, expr: sympy.Basic, what: str) -> List[str]:
        expr = self.shape_env.replace(expr)
        if isinstance(expr, sympy.And):
            return [t for a in expr.args for t in self.condition_texts(a, what)]
        return [canonical(self._text(expr, what))]

    def _numel_factors(self, factors: Dict[sympy.Expr, int]) -> List[str]:
        """Replaces the product of all of a tensor's dims (rank >= 2) by numel(t), and in a rank-free recording the
        product of all but its first or last (rank >= 3) by numel_except(t, axis), in place."""
        out = []
        for t in self.tensors:
            if t.rank >= 2:
                out += self._take(factors, t, None, f"numel({t.name})")
        for t in self.tensors:
            if t.rank >= 3 and t.name in self.rank_free:
                for skip in (t.rank - 1, 0):
                    out += self._take(factors, t, skip, f"numel_except({t.name}, {self.axis_text(t, skip)})")
        return out

    def _take(self, factors: Dict[sympy.Expr, int], t: TensorArg, skip: Optional[int], text: str) -> List[str]:
        """`text` once for each time the product of t's sizes (but axis `skip`) divides `factors`, removed."""
        need: Dict[sympy.Expr, int] = {}
        for axis, s in enumerate(t.symbols):
            if axis != skip:
                c = self.canonical_symbol(s)
                need[c] = need.get(c, 0) + 1
        out = []
        while all(factors.get(k, 0) >= n for k, n in need.items()):
            for k, n in need.items():
                factors[k] -= n
            out.append(text)
        return out

    def _text(self, e: sympy.Basic, what: str) -> str:
        from torch.utils._sympy import functions as F

        def t(x: sympy.Basic) -> str:
            return "(" + self._text(x, what) + ")"

        if isinstance(e, (sympy.Integer, int)):
            return str(int(e))
        if e is sympy.true:
            return "1"
        if e is sympy.false:
            return "0"
        if isinstance(e, sympy.Symbol):
            return self._leaf_of(e, what)
        if isinstance(e, sympy.Add):
            terms = sorted(e.args, key=lambda x: (bool(x.is_number), sympy.default_sort_key(x)))
            pos = [x for x in terms if not _negative(x)]
            neg = [-x for x in terms if _negative(x)]
            text = " + ".join(t(x) for x in pos) if pos else "0"
            for x in neg:
                text += " - " + t(x)
            return text
        if isinstance(e, sympy.Pow):
            base, exp = e.as_base_exp()
            if isinstance(exp, sympy.Integer) and 0 < exp <= 8:
                return " * ".join([t(base)] * int(exp))
            raise Unexpressible(f"{what}: '{shorten(e)}' takes a power kernelop cannot state")
        if isinstance(e, sympy.Mul):
            coeff, rest = e.as_coeff_Mul()
            factors: Dict[sympy.Expr, int] = {}
            for f in sympy.Mul.make_args(rest):
                base, exp = f.as_base_exp()
                if not (isinstance(exp, sympy.Integer) and exp > 0):
                    raise Unexpressible(f"{what}: '{shorten(e)}' divides or takes a power kernelop cannot state "
                                        "(expressions are integer + - * // % cdiv min max)")
                factors[base] = factors.get(base, 0) + int(exp)
            parts = self._numel_factors(factors)
            for base in sorted(factors, key=sympy.default_sort_key):
                parts += [t(base)] * factors[base]
            if coeff != 1:
                if not isinstance(coeff, sympy.Integer):
                    raise Unexpressible(f"{what}: '{shorten(e)}' has a non-integer factor {shorten(coeff)}")
                parts.insert(0, t(coeff) if coeff < 0 else str(int(coeff)))
            return " * ".join(parts) if parts else "1"
        if isinstance(e, F.FloorDiv):
            a, b = e.args
            x = sympy.expand(a - b + 1)
            if sympy.count_ops(x) < sympy.count_ops(a):  # (x + b - 1) // b is triton.cdiv(x, b)
                return f"cdiv({self._text(x, what)}, {self._text(b, what)})"
            return f"{t(a)} // {t(b)}"
        if isinstance(e, (F.CeilToInt, F.FloorToInt)) and isinstance(e.args[0], F.IntTrueDiv):
            a, b = e.args[0].args  # math.ceil(a / b), math.floor(a / b) of sizes
            if isinstance(e, F.CeilToInt):
                return f"cdiv({self._text(a, what)}, {self._text(b, what)})"
            return f"{t(a)} // {t(b)}"
        ceil_div = getattr(F, "CeilDiv", None)
        if ceil_div is not None and isinstance(e, ceil_div):
            return f"cdiv({self._text(e.args[0], what)}, {self._text(e.args[1], what)})"
        if isinstance(e, (F.Mod, F.PythonMod)):
            return f"{t(e.args[0])} % {t(e.args[1])}"
        if isinstance(e, sympy.Mod):
            return f"{t(e.args[0])} % {t(e.args[1])}"
        if isinstance(e, (sympy.Max, sympy.Min)):
            name = "max" if isinstance(e, sympy.Max) else "min"
            args = sorted(e.args, key=sympy.default_sort_key)
            text = self._text(args[0], what)
            for a in args[1:]:
                text = f"{name}({text}, {self._text(a, what)})"
            return text
        relations = {sympy.Eq: "==", sympy.Ne: "!=", sympy.StrictLessThan: "<", sympy.LessThan: "<=",
                     sympy.StrictGreaterThan: ">", sympy.GreaterThan: ">="}
        for kind, op in relations.items():
            if isinstance(e, kind):
                return f"{t(e.lhs)} {op} {t(e.rhs)}"
        raise Unexpressible(f"{what}: '{shorten(e)}' ({type(e).__name__}) has no kernelop expression (expressions are "
                            "integer + - * // % cdiv min max and comparisons over sizes and int scalars)")

    # -- guards ----------------------------------------------------------------------------------------------
    def guard_count(self) -> int:
        return len(self.shape_env.guards)

    def requirements_from_guards(self, start: int = 0) -> List[str]:
        """The conditions the traced code evaluated on the sizes, as requirements; refuses specialisations."""
        out: List[str] = [] if start else list(self.class_requirements) + self.layout_requirements()
        conditions = [(g.expr, _guard_location(g)) for g in self.shape_env.guards[start:]]
        # torch._check(...) on values it cannot decide becomes a deferred runtime assert, not a guard.
        for asserts in getattr(self.shape_env, "deferred_runtime_asserts", {}).values():
            conditions += [(a.expr, "") for a in asserts]
        for expr, where in conditions:
            if isinstance(expr, sympy.Eq) and (expr.lhs.is_number or expr.rhs.is_number) and \
                    isinstance(expr.rhs if expr.lhs.is_number else expr.lhs, sympy.Symbol):
                sym = expr.rhs if expr.lhs.is_number else expr.lhs
                value = expr.lhs if expr.lhs.is_number else expr.rhs
                raise Unexpressible(f"{self.where}: the code makes {self.describe(sym)} equal {value}{where}: it "
                                    "depends on the value of a size, so the op would only be right for that size; "
                                    "kernelop records sizes symbolically (make the value a config instead)")
            for text in self.condition_texts(expr, f"{self.where}: a condition on the sizes{where}"):
                if text not in out and text != "1":
                    out.append(text)
        # Unifications (x.shape == y.shape, n == x.shape[0], y.shape[0] == 2 * x.shape[0]) are replacements:
        # their guards read as always true once replaced, so each replacement is a requirement of its own.
        same = self._same_shapes() if self.rank_free else {}
        for later, earlier in same.items():
            text = canonical(f"same_shape({self.tensors[later].name}, {self.tensors[earlier].name})")
            if text not in out:
                out.append(text)
        covered = {s for pair in same.items() for i in pair for s in self.tensors[i].symbols}
        order = {sym: i for i, sym in enumerate(s for t in self.tensors for s in t.symbols)}
        order.update({s.symbol: len(order) + i for i, s in enumerate(self.scalars) if s.symbol is not None})
        pairs = []
        for sym, repl in self.shape_env.replacements.items():
            if sym not in order or sym in covered:
                continue
            if repl in order:
                later, earlier = (sym, repl) if order[sym] > order[repl] else (repl, sym)
                pairs.append((order[later], f"{self._symbol_text(later)} == {self._symbol_text(earlier)}"))
            else:
                pairs.append((order[sym], f"{self._symbol_text(sym)} == {self._text(repl, self.where)}"))
        for _, text in sorted(pairs):
            if canonical(text) not in out:
                out.append(canonical(text))
        return out

    def _symbol_text(self, sym: sympy.Symbol) -> str:
        """The leaf a symbol was created for (before replacements), its axis written as axis_text does."""
        for t in self.tensors:
            for axis, s in enumerate(t.symbols):
                if s == sym:
                    return f"dim({t.name}, {self.axis_text(t, axis)})"
        return self._leaf[sym]

    def _same_shapes(self) -> Dict[int, int]:
        """Tensors (by index) whose every size equals the same axis of an earlier tensor of the same rank
        (x.shape == y.shape), each with the first such tensor."""
        out: Dict[int, int] = {}
        for i, t in enumerate(self.tensors):
            for j, earlier in enumerate(self.tensors[:i]):
                if earlier.rank == t.rank and t.rank > 0 and j not in out and all(
                        self.canonical_symbol(a) == self.canonical_symbol(b)
                        for a, b in zip(t.symbols, earlier.symbols)):
                    out[i] = j
                    break
        return out

    def describe(self, e: sympy.Basic) -> str:
        """A size expression or condition for a message: its kernelop text, else sympy's, cut."""
        try:
            return "'" + shorten(canonical(self._text(e, self.where))) + "'"
        except ValueError:  # Unexpressible, or a text the parser refuses
            return f"'{shorten(e)}'"


def _negative(x: sympy.Expr) -> bool:
    coeff, _ = x.as_coeff_Mul()
    return bool(coeff.is_negative)


def _guard_location(guard: Any) -> str:
    try:
        stack: Any = getattr(guard, "stack", None)
        if hasattr(stack, "summary"):  # older torch: the whole stack
            frames = stack.summary()
        else:  # a source location: the frame torch attributes the guard to (FrameSummary, or text)
            frame = getattr(getattr(guard, "sloc", None), "framework_loc", None)
            frames = [frame] if hasattr(frame, "filename") else []
        where = user_location(frames)
        if where:
            return f" (at {where})"
    except Exception:  # noqa: BLE001 - a location is a nicety; the message stands without it
        pass
    return ""


def shape_exprs(rec: Recorder, shape: Sequence[Any], what: str) -> Tuple[Optional[str], List[str]]:
    """(the tensor input whose shape this is, or None; the shape's expressions)."""
    texts = [rec.expr(d, f"{what} dim {i}") for i, d in enumerate(shape)]
    for t in rec.tensors:
        if t.rank == len(shape) and all(rec.expr(d, what) == rec.expr(s, what)
                                         for d, s in zip(shape, t.fake.shape)):
            return t.name, texts
    return None, texts


def uses_dims(texts: Sequence[str], tensor: str) -> bool:
    """Whether expressions read a tensor's individual dims or strides (so its rank matters)."""
    return any(f"dim({tensor}," in s or f"stride({tensor}," in s or f"numel_except({tensor}," in s for s in texts)



def trace_meta(where: str, inputs: Sequence[Tuple[str, str, Optional[torch.dtype]]], meta_fn: Callable,
               ranks: Sequence[int] = (2, 3)) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """A meta function's outputs as declarative output specs (names out0, out1, ...), or (None, why not).

    ``inputs``: (name, "tensor" | "float" | "int" | "bool", dtype to trace a tensor with). The function is traced
    with every tensor at each of ``ranks``; its outputs become expressions only when they are the same at every
    rank (so the declaration is what the function computes, not what it computes at one rank) and it decided
    nothing on the sizes."""
    traced = []
    # Tensors whose dtype is not declared get a different dtype each, and other ones in each trace, so an output's
    # dtype follows the input it really follows (dtype_from) or none (a dtype of its own).
    rotation = [d.torch for d in DTYPES if d.traced]
    for trace, rank in enumerate(ranks):
        rec = Recorder(where)
        fakes = []
        undeclared = 0
        for name, kind, dtype in inputs:
            if kind == "tensor":
                if dtype is None:
                    dtype = rotation[(undeclared + 3 * trace) % len(rotation)]
                    undeclared += 1
                fakes.append(rec.add_tensor(name, dtype, None, rank))
            else:
                fakes.append(rec.add_scalar(name, kind, inspect.Parameter.empty))
        try:
            with rec.mode:
                result = meta_fn(*fakes)
        except Exception as e:  # noqa: BLE001 - data-dependent or rank-specific: the Python path stays
            return None, f"tracing it on symbolic sizes raised {type(e).__name__}: {shorten(e, 500)}"
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            return None, "it does not return tensors"
        if rec.guard_count():
            return None, "it decides on the sizes (" + ", ".join(str(g.expr) for g in rec.shape_env.guards) + ")"
        shapes = []
        try:
            for i, o in enumerate(outs):
                if not o.is_contiguous():  # the kernel writes its outputs contiguous (Note [returned views])
                    return None, (f"output {i} has strides ({', '.join(str(s) for s in o.stride())}), not "
                                  "contiguous; kernelop allocates outputs contiguous (a spec returns one as a "
                                  "permutation with OutputDecl(permute=...))")
                like, dims = shape_exprs(rec, o.shape, f"{where}: meta_fn output {i}")
                shapes.append(({"same_as": like} if like else dims, o.dtype,
                               {t.name for t in rec.tensors if t.dtype == o.dtype}))
        except Unexpressible as e:
            return None, str(e)
        traced.append(shapes)
    if any(len(t) != len(traced[0]) or [s for s, _, _ in t] != [s for s, _, _ in traced[0]] for t in traced):
        return None, "its output shapes depend on the inputs' rank (" + " vs ".join(
            json.dumps([s for s, _, _ in t]) for t in traced) + ")"
    declared = []
    for i, (shape, dtype, _) in enumerate(traced[0]):
        follows = set.intersection(*(t[i][2] for t in traced))
        entry: Dict[str, Any] = {"name": f"out{i}", "shape": shape}
        if follows:
            entry["dtype_from"] = next(t.name for t in rec.tensors if t.name in follows)
        elif all(t[i][1] == dtype for t in traced):
            entry["dtype"] = str(dtype).replace("torch.", "")
        else:
            return None, f"output {i}'s dtype follows the inputs in a way a spec cannot state"
        declared.append(entry)
    return declared, ""

