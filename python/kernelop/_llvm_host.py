"""Reading a CuTe DSL host function: its one kernel launch, as kernelop expressions of the op's inputs.

``cute.compile`` lowers a ``@cute.jit`` host function to the LLVM dialect: the host code the DSL traced (shape
arithmetic, layout algebra such as ``zipped_divide``) is plain integer arithmetic on the fields of its arguments
(each tensor is a struct of its pointer and its dynamic shape and stride values), and the launch is one call of
``_cudaLaunchKernelEx(config, kernel, args)`` whose config struct holds the grid, block and dynamic shared memory
and whose args array points at the kernel's arguments. This module evaluates that function symbolically: each value
becomes an expression over the argument fields, which the caller names (``dim(x, 0)``, ``stride(x, 0)``, a scalar
input), and memory is followed through allocas whose cells are written once. What the launch reads must come out
as an expression; anything else (data-dependent values, loops that compute a launch value, host calls) is refused
with the operation that made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

# -- LLVM types -----------------------------------------------------------------------------------------------------

LType = Tuple[Any, ...]  # ("int", bits) | ("float", bits) | ("ptr",) | ("struct", [types]) | ("array", n, type)


def parse_type(text: str) -> LType:
    """An LLVM dialect type as printed: ``!llvm.struct<(ptr, struct<(i32, i64)>)>``, ``i32``, ``!llvm.ptr``."""
    tokens = re.findall(r"!llvm\.|struct<\(|array<|\)>|>|,|x|[A-Za-z_][A-Za-z0-9_]*|\d+", text)
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


Value = Union[E, Ptr, Struct, TensorPtr, Opaque, "Named", None]

_PREDICATES = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule", 8: "ugt", 9: "uge"}
_DYNAMIC_INDEX = -2147483648  # rawConstantIndices marks an index given by an operand


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


# -- the interpreter ------------------------------------------------------------------------------------------------

_BINARY = {"llvm.add": "add", "llvm.sub": "sub", "llvm.mul": "mul", "llvm.sdiv": "sdiv", "llvm.srem": "srem",
           "llvm.udiv": "udiv", "llvm.urem": "urem", "llvm.intr.smin": "min", "llvm.intr.smax": "max",
           "llvm.intr.umin": "min", "llvm.intr.umax": "max"}
_CASTS = ("llvm.sext", "llvm.zext", "llvm.trunc", "llvm.bitcast", "llvm.freeze")


@dataclass
class Launch:
    grid: List[Value]
    block: List[Value]
    shared_mem: Value
    args: List[Value]
    arg_types: List[LType]
    attribute_values: List[Value]


def _int_attr(attr: Any) -> int:
    s = str(attr).strip()
    m = re.fullmatch(r"(-?\d+)(\s*:\s*(i\d+|index))?", s)
    if m:
        return int(m.group(1))
    if s in ("true", "false"):
        return int(s == "true")
    raise ValueError(f"not an integer attribute: {attr}")  # a float constant, for one


def _indices(attr: Any) -> List[int]:
    m = re.search(r"array<i\d+:?\s*([-\d,\s]*)>", str(attr))
    return [int(x) for x in m.group(1).replace(",", " ").split()] if m and m.group(1).strip() else []


def _descend(t: Optional[LType], fields: Sequence[Any]) -> Optional[LType]:
    """The type at `fields` inside `t` (None when unknown)."""
    for f in fields:
        if t is None:
            return None
        if t[0] == "array" and (f is None or 0 <= f < t[1]):  # every element has the same type
            t = t[2]
        elif f is not None and t[0] == "struct" and 0 <= f < len(t[1]):
            t = t[1][f]
        else:
            return None
    return t


def read_launch(module: Any, function: str, arguments: Sequence[Value], launcher: str = "_cudaLaunchKernelEx") -> Launch:
    """Evaluates the host function `function` of the lowered `module` with `arguments` (per argument: the value of
    the host argument, a Struct of its fields for a tensor) and returns its one launch."""
    with module.context:
        fn = None
        for op in module.body.operations:
            if op.operation.name == "llvm.func" and str(op.attributes["sym_name"]).strip('"') == function:
                fn = op
        if fn is None:
            raise Unreadable(f"the compiled module has no host function '{function}'")
        values: Dict[str, Value] = {}
        cells: Dict[str, Dict[Tuple[Any, ...], List[Tuple[Value, int]]]] = {}  # alloca -> path -> (value, block)
        alloca_types: Dict[str, LType] = {}
        clobbered: set = set()  # allocas written by something kernelop does not follow (a call, a copy)
        unknown_writes = [False]  # a store through a pointer kernelop does not follow
        launch_block = [-1]
        calls: List[Any] = []
        blocks = list(fn.regions[0].blocks)
        entry_args = list(blocks[0].arguments)
        if len(entry_args) != len(arguments):
            raise Unreadable(f"the host function takes {len(entry_args)} arguments; kernelop passed "
                             f"{len(arguments)} (one per tensor and non-constexpr scalar of the @cute.jit function)")
        for a, v in zip(entry_args, arguments):
            values[a.get_name()] = v
        for b in blocks[1:]:
            for a in b.arguments:
                values[a.get_name()] = Opaque("a value that depends on the host function's control flow")

        def get(v: Any) -> Value:
            return values.get(v.get_name(), Opaque("a value kernelop does not know"))

        def extract(v: Value, path: Sequence[int]) -> Value:
            for i in path:
                if isinstance(v, Struct) and 0 <= i < len(v.fields):
                    v = v.fields[i]
                else:
                    return Opaque("a field of a value kernelop does not know")
            return v

        def insert(v: Value, path: Sequence[int], new: Value, t: LType) -> Value:
            if not path:
                return new
            n = len(t[1]) if t[0] == "struct" else t[1]
            if not isinstance(v, Struct) or len(v.fields) != n:
                v = Struct(tuple(Opaque("an undefined field") for _ in range(n)))
            sub = t[1][path[0]] if t[0] == "struct" else t[2]
            fields = list(v.fields)
            fields[path[0]] = insert(fields[path[0]], path[1:], new, sub)
            return Struct(tuple(fields))

        def load(p: Value) -> Value:
            # Memory is followed only where it is certain: one write to the cell (or to a struct
            # containing it) and no other overlapping write, in straight-line code on the way to
            # the launch (the entry block or the launch's own), into an alloca nothing else touches.
            if not isinstance(p, Ptr):
                return Opaque("a value loaded from memory kernelop does not follow")
            if None in p.path:
                return Opaque("a value loaded at an index computed at run time")
            if unknown_writes[0] or p.root in clobbered:
                return Opaque("a value in memory written by something kernelop does not follow")
            table = cells.get(p.root, {})
            if any(None in k for k in table):
                return Opaque("a value in memory written at an index computed at run time")
            n = len(p.path)
            overlapping = [(k, v, blk) for k, vs in table.items() for v, blk in vs
                           if k[:min(len(k), n)] == p.path[:min(len(k), n)]]
            if not overlapping:
                return Opaque("a value in memory that was not written")
            if len(overlapping) != 1:
                return Opaque("a value in memory written more than once")
            k, v, blk = overlapping[0]
            if blk not in (0, launch_block[0]):
                return Opaque("a value written under a condition or in a loop")
            if len(k) > n:
                return Opaque("a value in memory only partly written")
            return extract(v, p.path[len(k):])

        def binary(op: str, a: Value, b: Value) -> Value:
            for x in (a, b):
                if isinstance(x, Opaque):
                    return x
                if not isinstance(x, tuple):
                    return Opaque(f"'{op}' of values that are not integers")
            return simplify((op, a, b))

        for block_index, block in enumerate(blocks):
            for o in block.operations:
                op = o.operation
                name = op.name
                ops = list(op.operands)
                res = [r.get_name() for r in op.results]
                out: Value = Opaque(f"the result of '{name}'")
                if name == "llvm.mlir.constant":
                    try:
                        out = const(_int_attr(op.attributes["value"]))
                    except (ValueError, KeyError):
                        out = Opaque("a non-integer constant")
                elif name in ("llvm.mlir.undef", "llvm.mlir.poison", "llvm.mlir.zero"):
                    out = Struct(()) if "struct" in str(op.results[0].type) else \
                        (const(0) if name == "llvm.mlir.zero" else Opaque("an undefined value"))
                elif name in _BINARY:
                    a, b = get(ops[0]), get(ops[1])
                    if name in ("llvm.intr.umin", "llvm.intr.umax", "llvm.udiv", "llvm.urem") and \
                            isinstance(a, tuple) and isinstance(b, tuple) and not (nonneg(a) and nonneg(b)):
                        out = Opaque(f"an unsigned '{name[5:]}' of values that may be negative")
                    else:
                        out = binary(_BINARY[name], a, b)
                elif name in ("llvm.shl", "llvm.lshr", "llvm.ashr"):
                    a, b = get(ops[0]), get(ops[1])
                    if isinstance(b, tuple) and b[0] == "c" and 0 <= b[1] < 63 and isinstance(a, tuple):
                        if name == "llvm.shl":
                            out = simplify(("mul", a, const(1 << b[1])))
                        elif nonneg(a):
                            out = simplify(("sdiv", a, const(1 << b[1])))
                        else:
                            out = Opaque("a right shift of a value that may be negative")
                elif name in ("llvm.and", "llvm.or", "llvm.xor"):
                    a, b = get(ops[0]), get(ops[1])
                    is_bool = str(op.results[0].type) == "i1"
                    if isinstance(a, Opaque) or isinstance(b, Opaque):
                        out = a if isinstance(a, Opaque) else b
                    elif not is_bool:
                        out = Opaque(f"a bitwise '{name[5:]}' of integers")
                    elif name == "llvm.and":
                        out = simplify(("mul", a, b))
                    elif name == "llvm.or":
                        out = simplify(("select", a, const(1), b))
                    else:
                        out = simplify(("not", a)) if b == const(1) else simplify(("not", b)) if a == const(1) \
                            else simplify(("cmp", "ne", a, b))
                elif name == "llvm.icmp":
                    a, b = get(ops[0]), get(ops[1])
                    pred = _PREDICATES.get(_int_attr(op.attributes["predicate"]))
                    if isinstance(a, Opaque) or isinstance(b, Opaque):
                        out = a if isinstance(a, Opaque) else b
                    elif isinstance(a, tuple) and isinstance(b, tuple) and pred:
                        if str(ops[0].type) == "i1" and pred == "eq" and b == const(0):
                            out = simplify(("not", a))
                        elif str(ops[0].type) == "i1" and pred not in ("eq", "ne"):
                            out = Opaque("an ordered comparison of booleans")  # true is -1 when signed
                        else:
                            out = simplify(("cmp", pred, a, b))
                elif name == "llvm.select":
                    c, a, b = get(ops[0]), get(ops[1]), get(ops[2])
                    bad = next((x for x in (c, a, b) if isinstance(x, Opaque)), None)
                    out = bad if bad is not None else simplify(("select", c, a, b)) \
                        if all(isinstance(x, tuple) for x in (c, a, b)) else Opaque("a select of non-integers")
                elif name in _CASTS:
                    a = get(ops[0])
                    from_bool = str(ops[0].type) == "i1"
                    if name == "llvm.zext" and isinstance(a, tuple) and not from_bool and not nonneg(a):
                        out = Opaque("a zero extension of a value that may be negative")
                    elif name == "llvm.sext" and from_bool and isinstance(a, tuple):
                        out = simplify(("sub", const(0), a))  # true is -1
                    elif name == "llvm.trunc" and str(op.results[0].type) == "i1":
                        out = Opaque("a truncation to a boolean")
                    elif name == "llvm.bitcast" and str(ops[0].type) != str(op.results[0].type) and \
                            not str(ops[0].type).startswith("!llvm.ptr"):
                        out = Opaque("a bit cast between types")
                    else:
                        out = a
                elif name == "llvm.extractvalue":
                    out = extract(get(ops[0]), _indices(op.attributes["position"]))
                elif name == "llvm.insertvalue":
                    out = insert(get(ops[0]), _indices(op.attributes["position"]), get(ops[1]),
                                 parse_type(str(op.results[0].type)))
                elif name == "llvm.alloca":
                    out = Ptr(res[0], (0,))
                    cells[res[0]] = {}
                    try:
                        alloca_types[res[0]] = parse_type(str(op.attributes["elem_type"]))
                    except ValueError:
                        pass
                elif name == "llvm.getelementptr":
                    base = get(ops[0])
                    dyn = iter(ops[1:])
                    idx: List[Any] = []
                    for raw in _indices(op.attributes["rawConstantIndices"]):
                        if raw == _DYNAMIC_INDEX:
                            v = get(next(dyn))
                            idx.append(v[1] if isinstance(v, tuple) and v[0] == "c" else None)
                        else:
                            idx.append(raw)
                    try:
                        elem = parse_type(str(op.attributes["elem_type"]))
                    except (KeyError, ValueError):
                        elem = None
                    at = _descend(alloca_types.get(base.root), base.path[1:]) if isinstance(base, Ptr) else None
                    if isinstance(base, Ptr) and idx and elem is not None and at is not None and \
                            at[0] == "array" and elem == at[2] and elem != at:
                        # the array's address used as its first element's (C's decay): element idx[0]
                        out = Ptr(base.root, base.path + (idx[0],) + tuple(idx[1:]))
                    elif isinstance(base, Ptr) and idx and (elem is None or elem != at):
                        # indexing the memory as another type (bytes of a struct): not followed
                        clobbered.add(base.root)
                        out = Opaque("an address computed over another type")
                    elif isinstance(base, Ptr) and idx:
                        first = None if base.path[-1] is None or idx[0] is None else base.path[-1] + idx[0]
                        out = Ptr(base.root, base.path[:-1] + (first,) + tuple(idx[1:]))
                    elif isinstance(base, TensorPtr):
                        out = Opaque(f"an address inside tensor '{base.tensor}' (the host offsets its pointer)")
                    else:
                        out = Opaque("an address kernelop does not follow")
                elif name == "llvm.store":
                    v, p = get(ops[0]), get(ops[1])
                    if isinstance(p, Ptr):
                        cells.setdefault(p.root, {}).setdefault(p.path, []).append((v, block_index))
                    else:
                        unknown_writes[0] = True
                elif name == "llvm.load":
                    out = load(get(ops[0]))
                elif name == "llvm.call":
                    callee = str(op.attributes["callee"]) if "callee" in op.attributes else ""
                    callee = callee.lstrip("@").strip('"')
                    args_ = [get(x) for x in ops]
                    calls.append((callee, args_, block_index))
                    if callee not in (launcher, "_cudaLaunchKernel"):
                        clobbered.update(x.root for x in args_ if isinstance(x, Ptr))  # it may write them
                elif name.startswith("llvm.intr.mem") or name.startswith("llvm.call_intrinsic"):
                    clobbered.update(x.root for x in (get(y) for y in ops) if isinstance(x, Ptr))
                if res:
                    values[res[0]] = out

        launches = [c for c in calls if c[0] in ("_cudaLaunchKernelEx", "_cudaLaunchKernel")]
        if len(launches) != 1:
            raise Unreadable(f"the host function launches {len(launches)} kernels; kernelop records one launch per op")
        callee, call_args, launch_block[0] = launches[0]
        if callee != launcher:
            raise Unreadable(f"the host function launches through {callee}, which kernelop does not read")
        config, _, args_ptr = call_args
        if not isinstance(config, Ptr) or not isinstance(args_ptr, Ptr):
            raise Unreadable(f"the launch's configuration or argument array is not in memory kernelop follows ({config}; {args_ptr})")
        c = config.path[:-1] + (config.path[-1],)
        grid = [load(Ptr(config.root, c + (0, i))) for i in range(3)]
        block = [load(Ptr(config.root, c + (1, i))) for i in range(3)]
        smem = load(Ptr(config.root, c + (2,)))
        # Launch attributes (cooperative, cluster dims, ...): written into an array the config points at (field 4),
        # in a loop; every value written must be 0 (the attribute off) for the plain launch kernelop makes.
        attrs_ptr = load(Ptr(config.root, c + (4,)))
        attribute_values: List[Value] = []
        if not isinstance(attrs_ptr, Ptr):
            raise Unreadable("the launch's attributes are in memory kernelop does not follow")
        root_type = alloca_types.get(attrs_ptr.root)
        for path, stored in cells.get(attrs_ptr.root, {}).items():
            if root_type is not None and root_type[0] == "array":
                path = path[1:]  # (0, attribute, field) of an array of attributes
            if len(path) >= 2 and path[1] == 0:  # (attribute, field 0: its id)
                continue
            if len(path) >= 2 and path[1] == 2:  # (attribute, field 2: the value)
                attribute_values += [v for v, _ in stored]
            else:
                raise Unreadable("the launch's attributes are written in a way kernelop does not read")
        # The argument array: one pointer per kernel argument, each to the argument's value.
        if unknown_writes[0] or args_ptr.root in clobbered or None in args_ptr.path:
            raise Unreadable("the launch's argument array is in memory kernelop does not follow")
        table = cells.get(args_ptr.root, {})
        n = len(table)
        args: List[Value] = []
        types: List[LType] = []
        for i in range(n):
            cell = table.get(args_ptr.path[:-1] + (args_ptr.path[-1] + i,))
            if cell is None or len(cell) != 1 or not isinstance(cell[0][0], Ptr) or \
                    cell[0][0].root not in alloca_types:
                raise Unreadable(f"kernel argument {i} is not written once into the launch's argument array")
            args.append(load(cell[0][0]))
            types.append(alloca_types[cell[0][0].root])
        return Launch(grid, block, smem, args, types, attribute_values)


@dataclass(frozen=True)
class Named:
    """A scalar input passed on as it is (a float scalar: kernelop does no float arithmetic)."""
    name: str


def host_arg_types(module: Any, function: str) -> List[LType]:
    """The LLVM types of the host function's arguments (a tensor's: a struct of its pointer and dynamic fields)."""
    with module.context:
        for op in module.body.operations:
            if op.operation.name == "llvm.func" and str(op.attributes["sym_name"]).strip('"') == function:
                return [parse_type(str(a.type)) for a in op.regions[0].blocks[0].arguments]
    raise Unreadable(f"the compiled module has no host function '{function}'")
