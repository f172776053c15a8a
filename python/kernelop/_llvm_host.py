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
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ._symbolic import canonical
from ._llvm_values import (E, FloatConst, LType, Named, Opaque, Ptr, Struct, TensorPtr, Unreadable, Value, const,
                           leaves, nonneg, parse_type, simplify, size_align, text)

__all__ = ["E", "FloatConst", "LType", "Launch", "Named", "Opaque", "Ptr", "Struct", "TensorPtr", "Unreadable",
           "Value", "const", "host_arg_types", "kernel_param", "leaves", "nonneg", "parse_type", "read_launch",
           "simplify", "size_align", "text"]

_BINARY = {"llvm.add": "add", "llvm.sub": "sub", "llvm.mul": "mul", "llvm.sdiv": "sdiv", "llvm.srem": "srem",
           "llvm.udiv": "udiv", "llvm.urem": "urem", "llvm.intr.smin": "min", "llvm.intr.smax": "max",
           "llvm.intr.umin": "min", "llvm.intr.umax": "max"}
_CASTS = ("llvm.sext", "llvm.zext", "llvm.trunc", "llvm.bitcast", "llvm.freeze")
_PREDICATES = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule", 8: "ugt", 9: "uge"}
_DYNAMIC_INDEX = -2147483648  # rawConstantIndices marks an index given by an operand
_LAUNCHES = ("_cudaLaunchKernelEx", "_cudaLaunchKernel")


@dataclass
class Launch:
    grid: List[Value]
    block: List[Value]
    shared_mem: Value
    args: List[Value]
    arg_types: List[LType]
    # the launch attributes written: (the attribute's id, its value's words: one, or a struct's ints in order)
    attributes: List[Tuple[Value, List[Value]]]


def read_launch(module: Any, function: str, arguments: Sequence[Value],
                launcher: str = "_cudaLaunchKernelEx") -> Launch:
    """Evaluates the host function `function` of the lowered `module` with `arguments` (per argument: the value of
    the host argument, a Struct of its fields for a tensor) and returns its one launch."""
    with module.context:
        blocks = list(_function(module, function).regions[0].blocks)
        entry_args = list(blocks[0].arguments)
        if len(entry_args) != len(arguments):
            raise Unreadable(f"the host function takes {len(entry_args)} arguments; kernelop passed "
                             f"{len(arguments)} (one per tensor and non-constexpr scalar of the @cute.jit function)")
        host = _Host(launcher)
        for a, v in zip(entry_args, arguments):
            host.values[a.get_name()] = v
        for b in blocks[1:]:
            for a in b.arguments:
                host.values[a.get_name()] = Opaque("a value that depends on the host function's control flow")
        for block_index, block in enumerate(blocks):
            for o in block.operations:
                op = o.operation
                out = host.step(op, block_index)
                if op.results:
                    host.values[op.results[0].get_name()] = out
        return host.launch()


def host_arg_types(module: Any, function: str) -> List[LType]:
    """The LLVM types of the host function's arguments (a tensor's: a struct of its pointer and dynamic fields)."""
    with module.context:
        return [parse_type(str(a.type)) for a in _function(module, function).regions[0].blocks[0].arguments]


def _function(module: Any, function: str) -> Any:
    fn = None
    for op in module.body.operations:
        if op.operation.name == "llvm.func" and str(op.attributes["sym_name"]).strip('"') == function:
            fn = op
    if fn is None:
        raise Unreadable(f"the compiled module has no host function '{function}'")
    return fn


def kernel_param(v: Value, t: LType, what: str) -> Any:
    """A kernel argument of the launch as a kernelop spec parameter: a tensor's name for its data pointer, a float
    scalar's name, an expression for an int, and a struct of those for a struct (laid out as a flat struct of its
    fields, which is how kernelop passes it)."""

    def field(x: Value, ft: LType, fwhat: str) -> Any:
        if ft == ("ptr",):
            if isinstance(x, TensorPtr):
                return x.tensor
            raise Unreadable(f"{fwhat} is a pointer that is not a tensor's own data pointer"
                             + (f" ({x.why})" if isinstance(x, Opaque) else ""))
        if ft[0] == "float":
            if isinstance(x, Named) and ft[1] == 32:
                return x.name
            if isinstance(x, FloatConst) and ft[1] == 32:
                return {"float": x.value}
            raise Unreadable(f"{fwhat} is a {ft[1]}-bit float that is not a float scalar input passed as it is")
        if ft[0] == "int" and ft[1] in (32, 64):
            entry: Dict[str, Any] = {"expr": canonical(text(x, fwhat))}
            if ft[1] == 64:
                entry["int64"] = True
            return entry
        raise Unreadable(f"{fwhat} has the LLVM type {ft}, which kernelop does not pass")

    if t[0] in ("struct", "array"):
        out = []
        offset = 0
        for path, ft, llvm_offset in leaves(t):
            size, align = size_align(ft)
            offset = (offset + align - 1) // align * align
            if offset != llvm_offset:
                raise Unreadable(f"{what}: the field at {path} is at byte {llvm_offset} of the struct, not at "
                                 f"{offset} where a flat struct of its fields puts it")
            offset += size
            x: Value = v
            for i in path:
                x = x.fields[i] if isinstance(x, Struct) and i < len(x.fields) else Opaque("an unknown field")
            out.append(field(x, ft, f"{what}, field {path}"))
        return {"struct": out}
    return field(v, t, what)


class _Host:
    """One evaluation of a host function: each SSA value's symbolic value, and memory as the cells of its allocas.

    Memory is followed only where it is certain: one write to the cell (or to a struct containing it) and no other
    overlapping write, in straight-line code on the way to the launch (the entry block or the launch's own), into an
    alloca nothing else touches."""

    def __init__(self, launcher: str) -> None:
        self.launcher = launcher
        self.values: Dict[str, Value] = {}
        self.cells: Dict[str, Dict[Tuple[Any, ...], List[Tuple[Value, int]]]] = {}  # alloca -> path -> (value, block)
        self.alloca_types: Dict[str, LType] = {}
        self.clobbered: Set[str] = set()  # allocas written by something kernelop does not follow (a call, a copy)
        self.unknown_writes = False  # a store through a pointer kernelop does not follow
        self.launch_block = -1
        self.calls: List[Tuple[str, List[Value], int]] = []

    def get(self, v: Any) -> Value:
        return self.values.get(v.get_name(), Opaque("a value kernelop does not know"))

    def load(self, p: Value) -> Value:
        if not isinstance(p, Ptr):
            return Opaque("a value loaded from memory kernelop does not follow")
        if None in p.path:
            return Opaque("a value loaded at an index computed at run time")
        if self.unknown_writes or p.root in self.clobbered:
            return Opaque("a value in memory written by something kernelop does not follow")
        table = self.cells.get(p.root, {})
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
        if blk not in (0, self.launch_block):
            return Opaque("a value written under a condition or in a loop")
        if len(k) > n:
            return Opaque("a value in memory only partly written")
        return _extract(v, p.path[len(k):])

    def step(self, op: Any, block_index: int) -> Value:
        """The value of one operation (an Opaque saying what it is when kernelop does not follow it)."""
        name = op.name
        if name in _BINARY or name in ("llvm.shl", "llvm.lshr", "llvm.ashr", "llvm.and", "llvm.or", "llvm.xor",
                                       "llvm.icmp", "llvm.select"):
            return self._arithmetic(op)
        if name == "llvm.mlir.constant":
            try:
                return const(_int_attr(op.attributes["value"]))
            except (ValueError, KeyError):
                return Opaque("a non-integer constant")
        if name in ("llvm.mlir.undef", "llvm.mlir.poison", "llvm.mlir.zero"):
            return Struct(()) if "struct" in str(op.results[0].type) else \
                (const(0) if name == "llvm.mlir.zero" else Opaque("an undefined value"))
        if name in _CASTS:
            return self._cast(op)
        if name == "llvm.extractvalue":
            return _extract(self.get(list(op.operands)[0]), _indices(op.attributes["position"]))
        if name == "llvm.insertvalue":
            ops = list(op.operands)
            return _insert(self.get(ops[0]), _indices(op.attributes["position"]), self.get(ops[1]),
                           parse_type(str(op.results[0].type)))
        return self._memory(op, block_index)

    def _arithmetic(self, op: Any) -> Value:
        name = op.name
        ops = list(op.operands)
        if name in _BINARY:
            a, b = self.get(ops[0]), self.get(ops[1])
            if name in ("llvm.intr.umin", "llvm.intr.umax", "llvm.udiv", "llvm.urem") and \
                    isinstance(a, tuple) and isinstance(b, tuple) and not (nonneg(a) and nonneg(b)):
                return Opaque(f"an unsigned '{name[5:]}' of values that may be negative")
            return _binary(_BINARY[name], a, b)
        if name in ("llvm.shl", "llvm.lshr", "llvm.ashr"):
            a, b = self.get(ops[0]), self.get(ops[1])
            if isinstance(b, tuple) and b[0] == "c" and 0 <= b[1] < 63 and isinstance(a, tuple):
                if name == "llvm.shl":
                    return simplify(("mul", a, const(1 << b[1])))
                if nonneg(a):
                    return simplify(("sdiv", a, const(1 << b[1])))
                return Opaque("a right shift of a value that may be negative")
            return Opaque(f"the result of '{name}'")
        if name in ("llvm.and", "llvm.or", "llvm.xor"):
            a, b = self.get(ops[0]), self.get(ops[1])
            if isinstance(a, Opaque) or isinstance(b, Opaque):
                return a if isinstance(a, Opaque) else b
            if str(op.results[0].type) != "i1":
                return Opaque(f"a bitwise '{name[5:]}' of integers")
            if name == "llvm.and":
                return simplify(("mul", a, b))
            if name == "llvm.or":
                return simplify(("select", a, const(1), b))
            return simplify(("not", a)) if b == const(1) else simplify(("not", b)) if a == const(1) \
                else simplify(("cmp", "ne", a, b))
        if name == "llvm.icmp":
            a, b = self.get(ops[0]), self.get(ops[1])
            pred = _PREDICATES.get(_int_attr(op.attributes["predicate"]))
            if isinstance(a, Opaque) or isinstance(b, Opaque):
                return a if isinstance(a, Opaque) else b
            if isinstance(a, tuple) and isinstance(b, tuple) and pred:
                if str(ops[0].type) == "i1" and pred == "eq" and b == const(0):
                    return simplify(("not", a))
                if str(ops[0].type) == "i1" and pred not in ("eq", "ne"):
                    return Opaque("an ordered comparison of booleans")  # true is -1 when signed
                return simplify(("cmp", pred, a, b))
            return Opaque(f"the result of '{name}'")
        # llvm.select
        c, a, b = self.get(ops[0]), self.get(ops[1]), self.get(ops[2])
        bad = next((x for x in (c, a, b) if isinstance(x, Opaque)), None)
        return bad if bad is not None else simplify(("select", c, a, b)) \
            if all(isinstance(x, tuple) for x in (c, a, b)) else Opaque("a select of non-integers")

    def _cast(self, op: Any) -> Value:
        name = op.name
        ops = list(op.operands)
        a = self.get(ops[0])
        from_bool = str(ops[0].type) == "i1"
        if name == "llvm.zext" and isinstance(a, tuple) and not from_bool and not nonneg(a):
            return Opaque("a zero extension of a value that may be negative")
        if name == "llvm.sext" and from_bool and isinstance(a, tuple):
            return simplify(("sub", const(0), a))  # true is -1
        if name == "llvm.trunc" and str(op.results[0].type) == "i1":
            return Opaque("a truncation to a boolean")
        if name == "llvm.bitcast" and str(ops[0].type) != str(op.results[0].type) and \
                not str(ops[0].type).startswith("!llvm.ptr"):
            return Opaque("a bit cast between types")
        return a

    def _memory(self, op: Any, block_index: int) -> Value:
        name = op.name
        ops = list(op.operands)
        res = [r.get_name() for r in op.results]
        if name == "llvm.alloca":
            self.cells[res[0]] = {}
            try:
                self.alloca_types[res[0]] = parse_type(str(op.attributes["elem_type"]))
            except ValueError:
                pass
            return Ptr(res[0], (0,))
        if name == "llvm.getelementptr":
            return self._address(op)
        if name == "llvm.store":
            v, p = self.get(ops[0]), self.get(ops[1])
            if isinstance(p, Ptr):
                self.cells.setdefault(p.root, {}).setdefault(p.path, []).append((v, block_index))
            else:
                self.unknown_writes = True
        elif name == "llvm.load":
            return self.load(self.get(ops[0]))
        elif name == "llvm.call":
            callee = str(op.attributes["callee"]) if "callee" in op.attributes else ""
            callee = callee.lstrip("@").strip('"')
            args = [self.get(x) for x in ops]
            self.calls.append((callee, args, block_index))
            if callee not in (self.launcher, "_cudaLaunchKernel"):
                self.clobbered.update(x.root for x in args if isinstance(x, Ptr))  # it may write them
        elif name.startswith("llvm.intr.mem") or name.startswith("llvm.call_intrinsic"):
            self.clobbered.update(x.root for x in (self.get(y) for y in ops) if isinstance(x, Ptr))
        return Opaque(f"the result of '{name}'")

    def _address(self, op: Any) -> Value:
        """llvm.getelementptr: a pointer into an alloca at a constant path, where kernelop can follow it."""
        ops = list(op.operands)
        base = self.get(ops[0])
        dyn = iter(ops[1:])
        idx: List[Any] = []
        for raw in _indices(op.attributes["rawConstantIndices"]):
            if raw == _DYNAMIC_INDEX:
                v = self.get(next(dyn))
                idx.append(v[1] if isinstance(v, tuple) and v[0] == "c" else None)
            else:
                idx.append(raw)
        try:
            elem: Optional[LType] = parse_type(str(op.attributes["elem_type"]))
        except (KeyError, ValueError):
            elem = None
        at = _descend(self.alloca_types.get(base.root), base.path[1:]) if isinstance(base, Ptr) else None
        if isinstance(base, Ptr) and idx and elem is not None and at is not None and \
                at[0] == "array" and elem == at[2] and elem != at:
            # the array's address used as its first element's (C's decay): element idx[0]
            return Ptr(base.root, base.path + (idx[0],) + tuple(idx[1:]))
        byte_array = at is not None and at[0] == "array" and at[2] == ("int", 8)
        if isinstance(base, Ptr) and byte_array and len(idx) == 2 and idx[0] == 0:
            offset = _int_field_offset(elem, idx[1])
            if offset is not None:  # a struct of ints written into a byte array (a union's bytes): by byte offset,
                # a step of its own kind (never an index: a load at the array's path is of more than one write)
                return Ptr(base.root, base.path + ((_BYTE, offset),))
        if isinstance(base, Ptr) and idx and (elem is None or elem != at):
            # indexing the memory as another type (bytes of a struct): not followed
            self.clobbered.add(base.root)
            return Opaque("an address computed over another type")
        if isinstance(base, Ptr) and idx:
            first = None if base.path[-1] is None or idx[0] is None else base.path[-1] + idx[0]
            return Ptr(base.root, base.path[:-1] + (first,) + tuple(idx[1:]))
        if isinstance(base, TensorPtr):
            return Opaque(f"an address inside tensor '{base.tensor}' (the host offsets its pointer)")
        return Opaque("an address kernelop does not follow")

    def launch(self) -> Launch:
        """The one launch: its configuration (grid, block, shared memory, attributes) and argument array."""
        launches = [c for c in self.calls if c[0] in _LAUNCHES]
        if len(launches) != 1:
            raise Unreadable(f"the host function launches {len(launches)} kernels; kernelop reads one launch per "
                             "host function (call one per kernel: they are the op's launches, in order)")
        callee, call_args, self.launch_block = launches[0]
        if callee != self.launcher:
            raise Unreadable(f"the host function launches through {callee}, which kernelop does not read")
        config, _, args_ptr = call_args
        if not isinstance(config, Ptr) or not isinstance(args_ptr, Ptr):
            raise Unreadable("the launch's configuration or argument array is not in memory kernelop follows "
                             f"({config}; {args_ptr})")
        c = config.path[:-1] + (config.path[-1],)
        grid = [self.load(Ptr(config.root, c + (0, i))) for i in range(3)]
        block = [self.load(Ptr(config.root, c + (1, i))) for i in range(3)]
        smem = self.load(Ptr(config.root, c + (2,)))
        attributes = self._attributes(self.load(Ptr(config.root, c + (4,))))
        args, types = self._arguments(args_ptr)
        return Launch(grid, block, smem, args, types, attributes)

    def _attributes(self, attrs_ptr: Value) -> List[Tuple[Value, List[Value]]]:
        # Launch attributes (cooperative, cluster dims, ...): written into an array the config points at (field 4),
        # each {id, pad, value union} in a block of its own (the slot is found in a loop, so its index is not
        # known): an attribute is its block's id and value, the value one word or a struct's ints written into the
        # union's bytes (the cluster's x, y, z), by their offset.
        if not isinstance(attrs_ptr, Ptr) or self.unknown_writes or attrs_ptr.root in self.clobbered:
            raise Unreadable("the launch's attributes are in memory kernelop does not follow")
        ids: Dict[Any, List[Value]] = {}
        words: Dict[Any, List[Tuple[int, Value]]] = {}
        root_type = self.alloca_types.get(attrs_ptr.root)
        for path, stored in self.cells.get(attrs_ptr.root, {}).items():
            if root_type is not None and root_type[0] == "array":
                path = path[1:]  # (0, attribute, field) of an array of attributes
            for v, blk in stored:
                key = (path[0], None if path and path[0] is not None else blk) if path else None
                if len(path) == 2 and path[1] == 0:  # (attribute, field 0: its id)
                    ids.setdefault(key, []).append(v)
                elif len(path) == 2 and path[1] == 2:  # (attribute, field 2: the value, one word)
                    words.setdefault(key, []).append((0, v))
                elif len(path) == 3 and path[1] == 2 and isinstance(path[2], tuple) and path[2][0] == _BYTE:
                    words.setdefault(key, []).append((path[2][1], v))  # (a struct's int at this byte offset)
                else:
                    raise Unreadable("the launch's attributes are written in a way kernelop does not read")
        out: List[Tuple[Value, List[Value]]] = []
        for key in set(ids) | set(words):
            written = ids.get(key, [])
            if len(written) != 1:
                raise Unreadable("a launch attribute's id is written more than once, or not at all")
            offsets = [o for o, _ in words.get(key, [])]
            if len(set(offsets)) != len(offsets):
                raise Unreadable("a launch attribute's value is written more than once")
            out.append((written[0], [v for _, v in sorted(words.get(key, []), key=lambda w: w[0])]))
        return out

    def _arguments(self, args_ptr: Ptr) -> Tuple[List[Value], List[LType]]:
        # The argument array: one pointer per kernel argument, each to the argument's value.
        if self.unknown_writes or args_ptr.root in self.clobbered or None in args_ptr.path:
            raise Unreadable("the launch's argument array is in memory kernelop does not follow")
        table = self.cells.get(args_ptr.root, {})
        args: List[Value] = []
        types: List[LType] = []
        for i in range(len(table)):
            cell = table.get(args_ptr.path[:-1] + (args_ptr.path[-1] + i,))
            if cell is None or len(cell) != 1 or not isinstance(cell[0][0], Ptr) or \
                    cell[0][0].root not in self.alloca_types:
                raise Unreadable(f"kernel argument {i} is not written once into the launch's argument array")
            args.append(self.load(cell[0][0]))
            types.append(self.alloca_types[cell[0][0].root])
        return args, types


def _extract(v: Value, path: Sequence[int]) -> Value:
    for i in path:
        if isinstance(v, Struct) and 0 <= i < len(v.fields):
            v = v.fields[i]
        else:
            return Opaque("a field of a value kernelop does not know")
    return v


def _insert(v: Value, path: Sequence[int], new: Value, t: LType) -> Value:
    if not path:
        return new
    n = len(t[1]) if t[0] == "struct" else t[1]
    if not isinstance(v, Struct) or len(v.fields) != n:
        v = Struct(tuple(Opaque("an undefined field") for _ in range(n)))
    sub = t[1][path[0]] if t[0] == "struct" else t[2]
    fields = list(v.fields)
    fields[path[0]] = _insert(fields[path[0]], path[1:], new, sub)
    return Struct(tuple(fields))


def _binary(op: str, a: Value, b: Value) -> Value:
    for x in (a, b):
        if isinstance(x, Opaque):
            return x
        if not isinstance(x, tuple):
            return Opaque(f"'{op}' of values that are not integers")
    return simplify((op, a, b))


def _int_attr(attr: Any) -> int:
    s = str(attr).strip()
    m = re.fullmatch(r"(-?\d+)(\s*:\s*(i\d+|index))?", s)
    if m:
        return int(m.group(1))
    if s in ("true", "false"):
        return int(s == "true")
    raise ValueError(f"not an integer attribute: {attr}")  # a float constant, for one


_BYTE = "byte"  # a path step into a byte array at a byte offset (_Host._address)


def _int_field_offset(t: Optional[LType], field: Optional[int]) -> Optional[int]:
    """The byte offset of field `field` of a struct of ints of 8 to 64 bits laid out naturally, else None."""
    if t is None or t[0] != "struct" or field is None or not 0 <= field < len(t[1]):
        return None
    offset = 0
    for i, f in enumerate(t[1]):
        if f[0] != "int" or f[1] not in (8, 16, 32, 64):
            return None
        size = f[1] // 8
        offset = (offset + size - 1) // size * size
        if i == field:
            return offset
        offset += size
    return None


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
