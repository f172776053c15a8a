"""Values host code computes from sizes and feeds to the kernel as compile-time constants, such as
``BLOCK_SIZE = triton.next_power_of_2(n_cols)`` (Note [size classes]).

Note [size classes]: a constexpr computed from a size cannot be one symbolic value: the kernel is compiled for each
value it takes. The recorder therefore records launch_fn once per *size class*: for ``next_power_of_2(n)`` with n a
size of an input, the class of the power of two v is ``v // 2 < n <= v``. Each class is recorded with example sizes
inside it, so host code branches as it would for such sizes (Liger's ``calculate_settings`` picks num_warps from
BLOCK_SIZE), and the class's bounds are guards, hence requirements of its configs. The classes' recordings are then
merged into one op: their configs side by side, each requiring its class; the op requires that some class holds, so
the Meta kernel and tracing refuse a size no config can run. The classes recorded are the powers of two from 4 to
65536 that launch_fn accepts (its own checks, such as Liger's "BLOCK_SIZE > MAX_FUSED_SIZE" error, drop the rest), or
the values ``specialize`` gives. (next_power_of_2's classes 1 and 2 are not recorded: PyTorch records sizes over
[2, inf), where the class of 2 would pin a size.)

Constexprs derived from several sizes (a tile's BLOCK_M and BLOCK_N) are recorded at the product of their
sizes' classes (SizeClasses), each class's recording requiring all its bounds; sizes of one value in the examples
are one group and move together (a hidden size and the weight's length). ``specialize`` then names each size, and a
product of more than MAX_CLASSES classes must be named so.

A size passed to a constexpr as it is (Liger's SwiGLU: ``n_cols=n_cols``) is a class of one value: the class of v
is ``n == v``, recorded with the example size v, and since the values are unbounded they are those ``specialize``
lists (the hidden sizes of the models the op serves); a size outside them is refused, naming them. The class's
requirement is no ShapeEnv guard (which would replace the size by v in every expression, and the classes' ops
would no longer merge): the recorder holds it as a requirement of its own, and next_power_of_2 of such a size
(Liger's RoPE pads its head counts) holds its bounds as requirements too, not guards (the guards of the class of 2,
n <= 2 and n > 1, would make PyTorch replace the size by 2). Sizes are found by their place (Recorder.dim_keys,
exact_values), never by value: a class's sizes may equal other sizes. A class may be 1 (a batch of one): PyTorch's
sizes range over [2, inf), so that class is recorded at the examples' size there and only the constexpr and the
requirements say 1; a condition launch_fn evaluates on the size is checked at 1 and the class dropped when it does
not hold there (a decision on "n == 1" itself is not seen: docs/triton.md, Limits).
"""

from __future__ import annotations

import itertools
import operator
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from .._symbolic import Recorder, Unexpressible, canonical, shorten

DEFAULT_CLASSES = tuple(2 ** k for k in range(2, 17))  # 4 .. 65536
_state = threading.local()  # .rec: the recorder of this thread's recording; .calls: what it derived


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


class NoConfigForClass(ValueError):
    """Every config sets a size-derived constexpr to another class's value: the class has no config."""


class DerivedInt(int):
    """A value launch_fn derived from a size (next_power_of_2(n) in the recorded class): an int that says so, so a
    DSL can tell a constexpr it feeds from a constant (a config that overrides it must equal it)."""

    derived: str = ""

    def __new__(cls, value: int, derived: str) -> "DerivedInt":
        self = super().__new__(cls, value)
        self.derived = derived
        return self


_SIZE_OPS = {  # DerivedInt's operators with a symbolic size on the other side, computed as int(self)
    "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge,
    "__eq__": operator.eq, "__ne__": operator.ne, "__add__": operator.add, "__sub__": operator.sub,
    "__mul__": operator.mul, "__floordiv__": operator.floordiv, "__mod__": operator.mod,
    "__truediv__": operator.truediv, "__radd__": lambda a, b: b + a, "__rsub__": lambda a, b: b - a,
    "__rmul__": lambda a, b: b * a, "__rfloordiv__": lambda a, b: b // a, "__rmod__": lambda a, b: b % a,
    "__rtruediv__": lambda a, b: b / a}


def _with_sizes(name: str) -> Any:
    """DerivedInt's `name` (an int's) where the other side is a symbolic size: torch takes plain ints only, so it
    computes with int(self) (`n_cols > BLOCK_SIZE` is a condition on the size, recorded as any other)."""
    plain, sized = getattr(int, name), _SIZE_OPS[name]

    def op(self: int, other: Any) -> Any:
        if isinstance(other, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return sized(int(self), other)
        return plain(self, other)
    return op


for _name in _SIZE_OPS:
    setattr(DerivedInt, _name, _with_sizes(_name))
DerivedInt.__hash__ = int.__hash__  # type: ignore[method-assign]


class Derived:
    """One value launch_fn derived from a size: the size (its text and symbol) and the function."""

    def __init__(self, function: str, text: str, symbol: Any, keys: Any = frozenset()) -> None:
        self.function, self.text, self.symbol = function, text, symbol
        self.keys = keys  # the size's places (Recorder.keys_of)

    def __repr__(self) -> str:
        return f"{self.function}({self.text})" if self.function else self.text

    def within(self, v: int) -> str:
        """The class of v as a condition on the size."""
        return f"{self.text} == {v}" if not self.function else f"{self.text} <= {v}"

    def example(self, v: int) -> int:
        """A size inside the class of v to record it with."""
        return v if not self.function else v * 3 // 4


def begin(rec: Recorder) -> List[Derived]:
    """Starts logging what this thread's recording derives from sizes; returns the log."""
    _state.rec = rec
    _state.calls = []
    return _state.calls


def end() -> None:
    _state.rec = None
    _state.calls = None


class DeviceProperties:
    """torch.cuda.get_device_properties(...) while recording: the op runs on whatever device its inputs are on, so of
    the device kernelop records its SM count, as sm_count() (evaluated per device at launch), and its compute
    capability as the architectures the op compiles for have it (Capability)."""

    def __init__(self, rec: Recorder) -> None:
        self._rec = rec

    @property
    def multi_processor_count(self) -> Any:
        return self._rec.sm_count()

    @property
    def major(self) -> Any:
        return self._capability("major")

    @property
    def minor(self) -> Any:
        return self._capability("minor")

    def _capability(self, name: str) -> Any:
        values = sorted({_arch_capability(a)[name == "minor"] for a in self._rec.archs})
        self._rec.capability_read |= bool(values)
        if not values:
            raise Unexpressible(f"launch_fn reads torch.cuda.get_device_properties(...).{name}; the op runs on any "
                                "device, and its architectures are not known as it is recorded: decide in the kernel, "
                                "or give the value as configs")
        if len(values) == 1:  # every architecture has it: the value itself
            return values[0]
        return Capability(name, tuple(values), self._rec.archs)

    def __getattr__(self, name: str) -> Any:
        raise Unexpressible(f"launch_fn reads torch.cuda.get_device_properties(...).{shorten(name)}; the op runs on "
                            "any device, and of the device kernelop records multi_processor_count (as sm_count(), "
                            "evaluated at launch) and major and minor (as the architectures the op compiles for have "
                            "them): decide on the rest in the kernel, or give it as configs")


def _arch_capability(arch: str) -> Tuple[int, int]:
    """("sm_90a") -> (9, 0)."""
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    return int(digits[:-1]), int(digits[-1])


class CapabilityRefused(Exception):
    """Host code used the device's compute capability in a way the architectures the op compiles for do not decide
    alike (Capability); not a ValueError, which library code may catch as "unknown" and fall back from."""


class Capability:
    """The device's compute capability major (or minor) while recording, where the architectures the op compiles for
    have different `values` of it: host code may compare it with a number only where they all decide alike (QuACK's
    ``props.major >= 10`` for sm_80 and sm_90a); a decision they split on, and anything else done with it (no int:
    formatting, arithmetic, hashing would take one architecture's value for the device's), is refused, naming them."""

    def __init__(self, name: str, values: Tuple[int, ...], archs: Tuple[str, ...]) -> None:
        self.name, self.values, self.archs = name, values, archs

    def _decide(self, op: Any, text: str, other: Any) -> Any:
        results = {op(v, other) for v in self.values}
        if len(results) > 1:
            raise CapabilityRefused(f"launch_fn decides 'device {self.name} {text} {other}' on the host, which the "
                                    f"architectures the op compiles for ({', '.join(self.archs)}) decide differently; "
                                    "record one op per architecture (arch=...)")
        return results.pop()

    def _refuse(self, what: str) -> Any:
        raise CapabilityRefused(f"launch_fn {what} the device's {self.name} on the host, which the architectures the "
                                f"op compiles for ({', '.join(self.archs)}) have as "
                                f"{', '.join(map(str, self.values))}; it may only compare it with a number they all "
                                "decide alike, or record one op per architecture (arch=...)")


COMPARISONS = {"__lt__": (operator.lt, "<"), "__le__": (operator.le, "<="), "__gt__": (operator.gt, ">"),
               "__ge__": (operator.ge, ">="), "__eq__": (operator.eq, "=="), "__ne__": (operator.ne, "!=")}
"""A comparison's dunder -> (its operator, how it is written): what host code compares a size or the device's
capability with (Capability, size_comparison)."""

for _name, (_op, _text) in COMPARISONS.items():
    setattr(Capability, _name, lambda self, other, _op=_op, _text=_text: self._decide(_op, _text, other))
# Anything but a comparison would use one of the values as if it were the device's: refused (with an error no
# library's `except ValueError:` fallback takes for an answer).
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
              "__truediv__", "__rtruediv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__",
              "__abs__", "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
              "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__divmod__", "__rdivmod__", "__round__",
              "__trunc__", "__floor__", "__ceil__", "__int__", "__index__", "__float__", "__hash__", "__str__",
              "__format__", "__bool__", "__reduce__", "__reduce_ex__", "__getnewargs__"):
    setattr(Capability, _name, lambda self, *args, _what=_name.strip("_"): self._refuse(f"computes with ({_what})"))


def device_properties(original: Any, *args: Any, **kwargs: Any) -> Any:
    """torch.cuda.get_device_properties while recording (DeviceProperties); Triton's own otherwise."""
    rec: Optional[Recorder] = getattr(_state, "rec", None)
    return original(*args, **kwargs) if rec is None else DeviceProperties(rec)


def power_of_two(original: Any, n: Any) -> Any:
    """triton.next_power_of_2 while recording: of a size, the power of two of the example's class, with the class's
    bounds as guards (Note [size classes]); of anything else, Triton's own."""
    rec: Optional[Recorder] = getattr(_state, "rec", None)
    if rec is None or not isinstance(n, torch.SymInt):
        return original(n)
    text = rec.expr(n, "next_power_of_2's argument")
    hint = n.node.hint
    if hint is None:
        raise Unexpressible(f"next_power_of_2({text}): kernelop specialises on sizes of inputs, and {text} is an int "
                            "scalar's value, which the recording does not know; pass a size, or give the values as "
                            "configs")
    keys = rec.keys_of(n.node.expr)
    _state.calls.append(Derived("next_power_of_2", text, n.node.expr, keys))
    exact = _exact_value(keys)
    if exact is not None:  # a size of a class of one value: its bounds are requirements, not guards
        v = next_power_of_2(exact)
        if canonical(f"{text} == {exact}") not in rec.class_requirements:  # (which the size's own value implies)
            for requirement in _bounds(text, v):
                if requirement not in rec.class_requirements:
                    rec.class_requirements.append(requirement)
        return DerivedInt(v, f"next_power_of_2({text})")
    v = next_power_of_2(int(hint))
    # The class's bounds, as the guards a size comparison makes (hence requirements of the class's configs).
    bool(n <= v)
    bool(n > v // 2)
    return DerivedInt(v, f"next_power_of_2({text})")


class exact_values:
    """While a class is recorded on this thread: the value of each size of a class of one value, by the size's place
    (SizeClasses.exact; Note [size classes])."""

    def __init__(self, values: Dict[Any, int]) -> None:
        self.values = values

    def __enter__(self) -> None:
        self.saved = getattr(_state, "exact", None)
        _state.exact = self.values

    def __exit__(self, *exc: Any) -> None:
        _state.exact = self.saved


def exact_size(n: Any) -> Any:
    """A size passed to a constexpr as it is, while recording: the example's value, its class (n == value) a
    requirement of the recording (Note [size classes]); anything else as it is (the DSL refuses it)."""
    rec: Optional[Recorder] = getattr(_state, "rec", None)
    if rec is None or not isinstance(n, torch.SymInt) or n.node.hint is None or not n.node.expr.is_Symbol:
        return n  # not one size: the DSL refuses it
    text = rec.expr(n, "a constexpr's value")
    keys = rec.keys_of(n.node.expr)
    v = _exact_value(keys)  # the class recorded (exact_values)
    v = int(n.node.hint) if v is None else v
    _state.calls.append(Derived("", text, n.node.expr, keys))
    requirement = canonical(f"{text} == {v}")
    if requirement not in rec.class_requirements:
        implied = _bounds(text, next_power_of_2(v))  # next_power_of_2's bounds on the size, if it came first
        rec.class_requirements[:] = [r for r in rec.class_requirements if r not in implied] + [requirement]
    return DerivedInt(v, text)


# Note [sizes as ints]: library host code compiles sizes in (QuACK's ``Softmax.compile(dtype, out_dtype, N)`` with
# ``N = x.size(1)``, hashed into a cache key and passed to math.gcd). While recording, int() and index() of a SymInt
# that is one input size give that size's value in the class recorded, as a constexpr taking the size does
# (exact_size): the class ``size == value`` is a requirement of the recording, the values recorded are those
# ``specialize`` lists, and the size stays symbolic everywhere else (an output like the input keeps dim(x, 1)).
# Comparing such a size with a number gives the comparison of that value (no guard: the class implies it), and its
# hash is the value's, so a table keyed by sizes (``WARPS.get(n)``) finds it as it would the int. A library's cache
# of compiled kernels keyed by sizes may therefore hold a kernel compiled for real before the recording: calling one
# while recording is refused, naming it (it cannot be recorded: clear that cache, or record before running the op).
# Any other SymInt (a product of sizes, an unbacked value) is PyTorch's own: a guard, which the recorder refuses as a
# specialisation.


def size_as_int(original: Any, n: Any) -> Any:
    """SymInt.__int__ / __index__ while recording (Note [sizes as ints]); PyTorch's own for anything else."""
    rec: Optional[Recorder] = getattr(_state, "rec", None)
    if rec is None or getattr(_state, "calls", None) is None or n.node.hint is None or not n.node.expr.is_Symbol \
            or not rec.keys_of(n.node.expr):
        return original(n)
    return int(exact_size(n))


def size_comparison(name: str) -> Any:
    """SymInt.<name> (a comparison) with a number while recording: of a size whose class of one value is recorded,
    the comparison of that value (a plain bool: the class's requirement implies it; host code choosing a config by
    N, QuACK's ``N <= 3072``, adds no guard); PyTorch's own for anything else."""
    compare = COMPARISONS[name][0]

    def handler(original: Any, n: Any, other: Any) -> Any:
        rec: Optional[Recorder] = getattr(_state, "rec", None)
        if rec is None or isinstance(other, bool) or not isinstance(other, (int, float)) or n.node.hint is None \
                or not n.node.expr.is_Symbol:
            return original(n, other)
        v = _exact_value(rec.keys_of(n.node.expr))
        return original(n, other) if v is None else compare(v, other)
    return handler


def size_hash(original: Any, n: Any) -> Any:
    """SymInt.__hash__ while recording: the hash of size_as_int's value, as the int it compares equal to (PyTorch
    refuses to hash a SymInt): a table keyed by sizes finds it, as for the plain int."""
    v = size_as_int(lambda m: None, n)
    return original(n) if v is None else hash(v)


def _exact_value(keys: Any) -> Optional[int]:
    """The value of the class of one value being recorded that a size at these places has, or None."""
    exact = getattr(_state, "exact", None) or {}
    return next((exact[k] for k in sorted(keys) if k in exact), None)


def _bounds(text: str, v: int) -> Tuple[str, str]:
    """The class of next_power_of_2(size) == v as requirements."""
    return canonical(f"{text} <= {v}"), canonical(f"{text} > {v // 2}")


MAX_CLASSES = 64  # the most size classes one op records without specialize listing every size's values


class SizeClasses:
    """The classes launch_fn is recorded at (Note [size classes]): the sizes it derives from, grouped by their value
    in the examples (sizes of one value move together, as a hidden size and the weight's length do), the values each
    group takes, and their product (one recording each)."""

    def __init__(self, groups: List[List[Derived]], hints: List[int], values: List[List[int]]) -> None:
        self.groups, self.hints, self.values = groups, hints, values
        self.combos: List[Tuple[int, ...]] = list(itertools.product(*values))

    def lead(self, g: int) -> Derived:
        """The size that names group g: one a constexpr takes as it is (its values decide), else the first."""
        return next((x for x in self.groups[g] if not x.function), self.groups[g][0])

    def within(self, combo: Tuple[int, ...]) -> str:
        """The class as a condition on the sizes, in words (messages)."""
        return " and ".join(self.lead(g).within(v) for g, v in enumerate(combo))

    def condition(self, combo: Tuple[int, ...]) -> str:
        """The class as a condition on the sizes, a kernelop expression."""
        from .configs import conjunction
        return conjunction([self.lead(g).within(v) for g, v in enumerate(combo)])

    def key(self, combo: Tuple[int, ...]) -> int:
        """The class's size_class value: the value itself for one size, else the class's index."""
        return combo[0] if len(self.groups) == 1 else self.combos.index(combo)

    def examples(self, combo: Tuple[int, ...]) -> Dict[int, int]:
        """Example value -> a size inside the class, to record it with (a class of 1 keeps the example's size:
        exact)."""
        return {h: self.lead(g).example(v) for g, (h, v) in enumerate(zip(self.hints, combo))
                if self.lead(g).function or v >= 2}

    def exact(self, combo: Tuple[int, ...]) -> Dict[Any, int]:
        """The place of each size of a class of one value (a size a constexpr takes as it is, and the sizes moving
        with it) -> the class's value (exact_values)."""
        return {k: v for g, v in enumerate(combo) if not self.lead(g).function for m in self.groups[g] for k in m.keys}

    def __repr__(self) -> str:
        return ", ".join(repr(self.lead(g)) for g in range(len(self.groups)))


def classes_of(where: str, derived: List[Derived], specialize: Any, hint_of: Any,
               first_use: bool = False) -> SizeClasses:
    """The sizes derived from, grouped by example value (`hint_of(symbol)`), and the classes to record: for each
    group, powers of two, or, for a size a constexpr takes as it is, the values `specialize` lists (with
    `first_use` and no list, the example's; Note [first-use growth]); their product."""
    texts = {d.text: d for d in derived}
    by_hint: Dict[int, List[Derived]] = {}
    for d in texts.values():
        hint = hint_of(d.symbol)
        if hint is None:
            raise ValueError(f"{where}: {d!r}: kernelop specialises on one size of an input, and {d.text} is not one")
        by_hint.setdefault(int(hint), []).append(d)
    if len(by_hint) > 1 and specialize is not None and not isinstance(specialize, Mapping):
        raise ValueError(f"{where}: launch_fn derives compile-time values from {len(texts)} sizes "
                         f"({shorten(', '.join(texts), 300)}); specialize must name each: {{size: [values]}}")
    unknown = [k for k in specialize if k not in texts] if isinstance(specialize, Mapping) and len(by_hint) > 1 else []
    if unknown:
        raise ValueError(f"{where}: specialize names {unknown[0]!r}, which launch_fn derives no compile-time value "
                         f"from; it derives them from {shorten(', '.join(texts), 300)}")
    groups, hints, values = [], [], []
    for hint, members in by_hint.items():
        group_specialize = specialize
        if isinstance(specialize, Mapping):
            named = [m.text for m in members if m.text in specialize]
            group_specialize = {named[0]: specialize[named[0]]} if named else \
                (None if len(by_hint) > 1 else specialize)
        lead = next((x for x in members if not x.function), members[0])
        groups.append(members)
        hints.append(hint)
        values.append([hint] if first_use and group_specialize is None and not lead.function else
                      _values_of(where, lead, members, group_specialize))
    classes = SizeClasses(groups, hints, values)
    if len(classes.combos) > MAX_CLASSES and not (isinstance(specialize, Mapping) and
                                                  all(any(m.text in specialize for m in g) for g in groups)):
        raise ValueError(f"{where}: launch_fn derives compile-time values from {len(texts)} sizes "
                         f"({shorten(', '.join(texts), 300)}); kernelop records the product of their classes, "
                         f"{len(classes.combos)} here: list the values of each in "
                         "specialize={size: [values]} (the sizes the op serves)")
    return classes


def _values_of(where: str, d: Derived, members: List[Derived], specialize: Any) -> List[int]:
    """The classes of one size (`d`, the group's lead) to record it at: powers of two, or, for a size a constexpr
    takes as it is, the values `specialize` lists."""
    if isinstance(specialize, Mapping) and len(specialize) == 1 and d.text not in specialize:
        key = next(iter(specialize))
        if any(m.text == key for m in members):  # named by another size of the group
            specialize = {d.text: specialize[key]}
    values: Optional[Sequence[int]]
    if not d.function:
        values = specialize.get(d.text) if isinstance(specialize, Mapping) else specialize
        if values is None and specialize is not None:
            raise ValueError(f"{where}: specialize names {shorten(', '.join(map(repr, specialize)), 300)}, not "
                             f"{d.text!r}, the size a constexpr takes as it is")
        if values is None:
            raise ValueError(f"{where}: a constexpr takes {d.text}, a size, as it is (or the host code compiles it "
                             "in as an int): the DSL compiles one kernel per value, so kernelop compiles the values "
                             "you list: kernelop.triton(..., specialize=[...]) or kernelop.cutedsl(..., specialize="
                             f"[...]) (or {{{d.text!r}: [...]}}), e.g. the sizes of the models the op serves; other "
                             "sizes are refused (or compiled when first called, with first_use=True)")
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
        if bad or not values:
            raise ValueError(f"{where}: specialize must list the values of {d.text} (ints >= 1), got "
                             f"{shorten(repr(list(values)), 300)}")
        return sorted(set(values))
    values = DEFAULT_CLASSES
    if specialize is not None:
        values = specialize.get(d.text) if isinstance(specialize, Mapping) else specialize
        if values is None:
            raise ValueError(f"{where}: specialize names {shorten(', '.join(map(repr, specialize)), 300)}, not "
                             f"{d.text!r}, the size launch_fn derives {d.function}() from")
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 4 or v & (v - 1)]
        if bad or not values:
            raise ValueError(f"{where}: specialize must list powers of two >= 4 (the values of {d.function}"
                             f"({d.text})), got {shorten(repr(list(values)), 300)}")
    return sorted(set(values or ()))


def check_first_use(where: str, first_use: Any) -> bool:
    """`first_use` as the user gave it (Note [first-use growth])."""
    if not isinstance(first_use, bool):
        raise TypeError(f"{where}: first_use must be True or False, got {shorten(repr(first_use))}")
    return first_use


def check_specialize(where: str, specialize: Any) -> Any:
    """`specialize` as the user gave it: None, a list of values (powers of two for next_power_of_2, sizes for a size
    itself), or a dict of size text -> such a list."""
    if specialize is None:
        return None
    if isinstance(specialize, Mapping):
        for k, v in specialize.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: specialize's keys are sizes as kernelop writes them ('dim(x, -1)'), got "
                                f"{shorten(repr(k))}")
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
                raise TypeError(f"{where}: specialize[{k!r}] must be a list of ints, got "
                                f"{type(v).__name__}")
        return {k: tuple(v) for k, v in specialize.items()}
    if isinstance(specialize, (str, bytes)) or not isinstance(specialize, Sequence):
        raise TypeError(f"{where}: specialize must be a list of ints (or a dict of size -> list), got "
                        f"{type(specialize).__name__}")
    return tuple(specialize)
