"""The values a CuTe DSL host function computes, read symbolically (kernelop._llvm_host): LLVM dialect types, integer
expressions over the host arguments' fields (with their simplification and kernelop text), pointers into allocas,
structs and the values kernelop cannot follow."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Union

# -- LLVM types -----------------------------------------------------------------------------------------------------

LType = Tuple[Any, ...]  # ("int", bits) | ("float", bits) | ("ptr",) | ("struct", [types]) | ("array", n, type)


def parse_type(text: str) -> LType:
    """An LLVM dialect type as printed: ``!llvm.struct<(ptr, struct<(i32, i64)>)>``, ``i32``, ``!llvm.ptr``, and
    ``!llvm.ptr<1>`` (a pointer into an address space, as QuACK's global tensors are: 8 bytes all the same)."""
    tokens = re.findall(r"!llvm\.|struct<\(|array<|\)>|<|>|,|x|[A-Za-z_][A-Za-z0-9_]*|\d+", text)
    pos = 0

    def peek() -> str:
        return tokens[pos] if pos < len(tokens) else ""

    def take(expected: Optional[str] = None) -> str:
        nonlocal pos
        tok = peek()
        if expected is not None and tok != expected:
            raise ValueError(f"unexpected '{tok}' in the LLVM type {text!r}")
        pos += 1
        return tok

    def one() -> LType:
        if peek() == "!llvm.":
            take()
        tok = take()
        if tok == "struct<(":
            fields = []
            if peek() != ")>":
                fields.append(one())
                while peek() == ",":
                    take()
                    fields.append(one())
            take(")>")
            return ("struct", fields)
        if tok == "array<":
            n = int(take())
            take("x")
            elem = one()
            take(">")
            return ("array", n, elem)
        if tok == "ptr":
            if peek() == "<":  # its address space: generic (0) or global (1), both 8 bytes (shared's may be 4)
                take()
                if take() not in ("0", "1"):
                    raise ValueError(f"a pointer into an address space other than generic or global in the LLVM "
                                     f"type {text!r}")
                take(">")
            return ("ptr",)
        m = re.fullmatch(r"i(\d+)", tok)
        if m:
            return ("int", int(m.group(1)))
        m = re.fullmatch(r"f(16|32|64)", tok)
        if m:
            return ("float", int(m.group(1)))
        raise ValueError(f"unsupported LLVM type {text!r}")

    t = one()
    if pos != len(tokens):
        raise ValueError(f"trailing text in the LLVM type {text!r}")
    return t


def size_align(t: LType) -> Tuple[int, int]:
    """Bytes and alignment of a type under the natural (NVPTX/x86-64) data layout."""
    if t[0] == "int":
        n = max(1, (t[1] + 7) // 8)
        return n, n
    if t[0] == "float":
        return t[1] // 8, t[1] // 8
    if t[0] == "ptr":
        return 8, 8
    if t[0] == "array":
        s, a = size_align(t[2])
        return s * t[1], a
    offset, align = 0, 1
    for f in t[1]:
        s, a = size_align(f)
        offset = (offset + a - 1) // a * a + s
        align = max(align, a)
    return (offset + align - 1) // align * align, align


def leaves(t: LType, path: Tuple[int, ...] = (), offset: int = 0) -> List[Tuple[Tuple[int, ...], LType, int]]:
    """(path, type, byte offset) of every scalar in a struct, in order."""
    if t[0] == "struct":
        out = []
        at = offset
        for i, f in enumerate(t[1]):
            s, a = size_align(f)
            at = (at + a - 1) // a * a
            out += leaves(f, path + (i,), at)
            at += s
        return out
    if t[0] == "array":
        s, _ = size_align(t[2])
        return [x for i in range(t[1]) for x in leaves(t[2], path + (i,), offset + i * s)]
    return [(path, t, offset)]


# -- symbolic values ------------------------------------------------------------------------------------------------

E = Tuple[Any, ...]
"""An integer expression: ("c", int) | ("leaf", text, nonneg) | (op, *operands) with op one of add sub mul sdiv srem
udiv urem cdiv min max select cmp (cmp: ("cmp", pred, a, b)), "not"."""


@dataclass(frozen=True)
class Ptr:
    """A pointer into an alloca (root) at a constant index path; the root itself is (0,)."""
    root: str
    path: Tuple[Any, ...]  # ints, or None where an index is not known


@dataclass(frozen=True)
class Struct:
    fields: Tuple[Any, ...]


@dataclass(frozen=True)
class TensorPtr:
    """A tensor argument's data pointer."""
    tensor: str


@dataclass(frozen=True)
class Opaque:
    """A value kernelop cannot follow; why, for the message if it reaches the launch."""
    why: str


Value = Union[E, Ptr, Struct, TensorPtr, Opaque, "Named", "FloatConst", None]


def const(v: int) -> E:
    return ("c", int(v))


def nonneg(e: Any) -> bool:
    if not isinstance(e, tuple):
        return False
    op = e[0]
    if op == "c":
        return e[1] >= 0
    if op == "leaf":
        return bool(e[2])
    if op in ("add", "mul", "cdiv", "min", "max"):
        return all(nonneg(x) for x in e[1:])
    if op in ("sdiv", "srem", "udiv", "urem"):
        return nonneg(e[1]) and nonneg(e[2])
    if op in ("cmp", "not"):
        return True
    if op == "select":
        return nonneg(e[2]) and nonneg(e[3])
    return False


def simplify(e: E) -> E:
    op = e[0]
    if op in ("c", "leaf"):
        return e
    args = e[1:]
    if op == "cmp":
        a, b = args[1], args[2]
        if a[0] == "c" and b[0] == "c":
            x, y = a[1], b[1]
            return const({"eq": x == y, "ne": x != y, "slt": x < y, "sle": x <= y, "sgt": x > y, "sge": x >= y,
                          "ult": x < y, "ule": x <= y, "ugt": x > y, "uge": x >= y}[args[0]])
        if b == const(0) and nonneg(a) and args[0] in ("slt", "sge"):  # a size is never negative
            return const(int(args[0] == "sge"))
        return e
    if op == "not":
        return const(int(not args[0][1])) if args[0][0] == "c" else e
    if op == "select":
        c, a, b = args
        if c[0] == "c":
            return a if c[1] else b
        if a == b:
            return a
        # The lowering of ceil_div(n, d) for d > 0: q = n / d (truncated); n != q * d and not n < 0 ? q + 1 : q.
        # For every n this is the ceiling (for n < 0 truncation already rounds up).
        if b[0] == "sdiv" and a == simplify(("add", b, const(1))) and b[2][0] == "c" and b[2][1] > 0:
            n, d = b[1], b[2]
            ne = ("cmp", "ne", n, simplify(("mul", b, d)))
            not_neg = ("not", ("cmp", "slt", n, const(0)))
            if c in (simplify(("mul", ne, not_neg)), simplify(("mul", not_neg, ne))) or (nonneg(n) and c == ne):
                return ("cdiv", n, d)
        return e
    if all(x[0] == "c" for x in args):
        x, y = args[0][1], args[1][1]
        if op == "add":
            return const(x + y)
        if op == "sub":
            return const(x - y)
        if op == "mul":
            return const(x * y)
        if op in ("sdiv", "udiv") and y != 0:
            q = abs(x) // abs(y)
            return const(q if (x >= 0) == (y > 0) else -q)
        if op in ("srem", "urem") and y != 0:
            r = abs(x) % abs(y)
            return const(r if x >= 0 else -r)
        if op == "min":
            return const(min(x, y))
        if op == "max":
            return const(max(x, y))
    a, b = args[0], args[1]
    if op == "add" and b == const(0):
        return a
    if op == "add" and a == const(0):
        return b
    if op == "sub" and b == const(0):
        return a
    if op == "mul" and (a == const(1) or b == const(1)):
        return b if a == const(1) else a
    if op == "mul" and (a == const(0) or b == const(0)):
        return const(0)
    if op in ("sdiv", "udiv", "cdiv") and b == const(1):
        return a
    return e


class Unreadable(ValueError):
    """The launch reads a value kernelop cannot state as an expression; the message says which and why."""


def text(e: Any, what: str) -> str:
    """kernelop expression text (canonicalised by the caller)."""
    if isinstance(e, Opaque):
        raise Unreadable(f"{what} is {e.why}")
    if not isinstance(e, tuple):
        raise Unreadable(f"{what} is not an integer value of the host function's arguments")
    op = e[0]
    if op == "c":
        return str(e[1]) if e[1] >= 0 else f"(0 - {-e[1]})"
    if op == "leaf":
        return e[1]
    args = e[1:]
    if op == "cmp":
        pred, a, b = args
        if pred[0] == "u" and not (nonneg(a) and nonneg(b)):
            raise Unreadable(f"{what} compares values that may be negative as unsigned")
        sym = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=", "ult": "<", "ule": "<=",
               "ugt": ">", "uge": ">="}[pred]
        return f"(({text(a, what)}) {sym} ({text(b, what)}))"
    if op == "not":
        return f"(({text(args[0], what)}) == 0)"
    if op == "select":
        return f"select({text(args[0], what)}, {text(args[1], what)}, {text(args[2], what)})"
    if op in ("cdiv", "min", "max"):
        return f"{op}({text(args[0], what)}, {text(args[1], what)})"
    a, b = text(args[0], what), text(args[1], what)
    if op in ("add", "sub", "mul"):
        return f"(({a}) {'+' if op == 'add' else '-' if op == 'sub' else '*'} ({b}))"
    if op in ("sdiv", "srem", "udiv", "urem"):
        divisor_pos = args[1][0] == "c" and args[1][1] > 0 or nonneg(args[1]) and op[0] == "u"
        if nonneg(args[0]) and (nonneg(args[1]) or divisor_pos):
            return f"(({a}) {'//' if op.endswith('div') else '%'} ({b}))"
        if op[0] == "s" and args[1][0] == "c" and args[1][1] > 0:
            # C's truncation for a possibly negative dividend and a positive constant divisor
            if op == "sdiv":
                return f"select(({a}) < 0, 0 - ((0 - ({a})) // ({b})), ({a}) // ({b}))"
            return f"select(({a}) < 0, 0 - ((0 - ({a})) % ({b})), ({a}) % ({b}))"
        raise Unreadable(f"{what} divides values whose signs kernelop cannot tell (C's truncating division)")
    raise Unreadable(f"{what} uses '{op}'")


@dataclass(frozen=True)
class FloatConst:
    """A float literal the host code passes (QuACK's eps): a constant of the op."""
    value: float


@dataclass(frozen=True)
class Named:
    """A scalar input passed on as it is (a float scalar: kernelop does no float arithmetic)."""
    name: str
