"""CuTe DSL kernels as kernelop ops (kernelop.cutedsl / custom_plugin / record_plugin).

CPU (needs nvidia-cutlass-dsl): the recorded spec (tensors as struct parameters of pointer, dynamic shape and strides;
host-side layout algebra, the grid, block and scalars as expressions of the input sizes; configs as tactics), the
lowered host function read symbolically (kernelop._llvm_host), compilation for sm_80 and sm_90a checked against the
spec, the Meta kernel, packages loaded where the CuTe DSL cannot be imported, and every refusal message.
GPU (needs no CuTe DSL: it runs the packages built on the CPU machine, or builds them when the DSL is there): every
tactic of every example against PyTorch at several shapes, CUDA graphs, opcheck and torch.compile.
"""

import os
import pathlib
import random
import sys
import tempfile
import unittest

import torch

import kernelop as ko
from expect import expect_error
from isolated import run_python_without
from kernelop_testing import example_packages, run_tests
from tactic_pins import each_tactic
from kernelop import _kernelop, _llvm_host as H

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
try:
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack
    import cutedsl_kernels as ck
    HAVE_CUTE = True
except ImportError:
    HAVE_CUTE = False

CUDA = torch.cuda.is_available()
NAMES = ("vector_add", "axpy", "add_int", "add_twice")


def run_python(code):
    """Runs code in a fresh python3 where `import cutlass` fails; returns its stdout."""
    return run_python_without("cutlass", code)


if HAVE_CUTE:
    # Test kernels: launches kernelop refuses.
    @cute.jit
    def _twice_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
        ck.vector_add_kernel(mA, mB, mC).launch(grid=(1, 1, 1), block=(256, 1, 1))
        ck.vector_add_kernel(mA, mB, mC).launch(grid=(2, 1, 1), block=(256, 1, 1))

    def launches_twice(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty_like(a)
        _twice_host(from_dlpack(a), from_dlpack(b), from_dlpack(c))
        return c

    @cute.jit
    def _offset_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
        # the kernel gets a view one row into mA: a pointer the host offsets
        ck.vector_add_kernel(cute.domain_offset((1, 0), mA), mB, mC).launch(grid=(1, 1, 1), block=(256, 1, 1))

    def offset_launch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty_like(a)
        _offset_host(from_dlpack(a), from_dlpack(b), from_dlpack(c))
        return c

    def aligned_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty_like(a)
        ck.vector_add_host(from_dlpack(a, assumed_align=16), from_dlpack(b), from_dlpack(c, assumed_align=32))
        return c

    @cute.jit
    def _plain_int_host(mA: cute.Tensor, mC: cute.Tensor, n):
        ck.vector_add_kernel(mA, mA, mC).launch(grid=(n, 1, 1), block=(256, 1, 1))


_registered = {}


def ops():
    if not _registered:
        _registered.update(ck.register("kop_cd"))
    return _registered


class HostArithmetic(unittest.TestCase):
    """The host function's integer operations (C semantics: truncating division, remainder with the dividend's
    sign) as kernelop expressions, against a direct evaluation, over a random corpus of expression trees."""

    LEAVES = {"dim(x, 0)": True, "dim(x, 1)": True, "n": False}  # text -> never negative

    def c_eval(self, e, env):
        op = e[0]
        if op == "c":
            return e[1]
        if op == "leaf":
            return env[e[1]]
        a = [self.c_eval(x, env) if isinstance(x, tuple) else x for x in e[1:]]
        if op == "cmp":
            p, x, y = a
            return int({"eq": x == y, "ne": x != y, "slt": x < y, "sle": x <= y, "sgt": x > y, "sge": x >= y,
                        "ult": x < y, "ule": x <= y, "ugt": x > y, "uge": x >= y}[p])
        if op == "not":
            return int(not a[0])
        if op == "select":
            return a[1] if a[0] else a[2]
        x, y = a
        if op in ("sdiv", "udiv"):
            q = abs(x) // abs(y)
            return q if (x >= 0) == (y > 0) else -q
        if op in ("srem", "urem"):
            return x - y * self.c_eval(("sdiv", ("c", x), ("c", y)), env)
        if op == "cdiv":
            return -(-x // y)
        return {"add": x + y, "sub": x - y, "mul": x * y, "min": min(x, y), "max": max(x, y)}[op]

    def tree(self, rng, depth):
        if depth == 0 or rng.random() < 0.25:
            if rng.random() < 0.3:
                return H.const(rng.randint(-20, 300))
            name = rng.choice(list(self.LEAVES))
            return ("leaf", name, self.LEAVES[name])
        kind = rng.choice(["add", "sub", "mul", "sdiv", "srem", "cmp", "select", "min", "max", "ceil", "floor"])
        a, b = self.tree(rng, depth - 1), self.tree(rng, depth - 1)
        if kind in ("sdiv", "srem"):
            return H.simplify((kind, a, H.const(rng.choice([1, 2, 3, 16, 128, 256]))))
        if kind == "cmp":
            return H.simplify(("cmp", rng.choice(["eq", "ne", "slt", "sle", "sgt", "sge"]), a, b))
        if kind == "select":
            return H.simplify(("select", H.simplify(("cmp", "slt", a, b)), a, self.tree(rng, depth - 1)))
        if kind in ("ceil", "floor"):
            # how the DSL lowers ceil_div(a, d) and a // d: a truncating division and a correction
            d = H.const(rng.choice([2, 4, 64, 256]))
            q = H.simplify(("sdiv", a, d))
            exact = H.simplify(("cmp", "ne", a, H.simplify(("mul", q, d))))
            neg = H.simplify(("cmp", "slt", a, H.const(0)))
            if kind == "ceil":
                cond = H.simplify(("mul", exact, H.simplify(("not", neg))))
                return H.simplify(("select", cond, H.simplify(("add", q, H.const(1))), q))
            return H.simplify(("select", H.simplify(("mul", exact, neg)), H.simplify(("add", q, H.const(-1))), q))
        return H.simplify((kind, a, b))

    def test_random_trees_agree_with_c_semantics(self):
        rng = random.Random(1234)
        checked = 0
        for i in range(1500):
            e = self.tree(rng, rng.randint(1, 4))
            try:
                text = _kernelop.canonical_expr(H.text(e, "tree"))
            except H.Unreadable:
                continue  # refused (e.g. a division whose signs are unknown): never a wrong value
            for _ in range(4):
                env = {"dim(x, 0)": rng.randint(0, 5000), "dim(x, 1)": rng.choice([1, 7, 64, 1001]),
                       "n": rng.randint(-3000, 3000)}
                want = self.c_eval(e, env)
                if abs(want) >= 2 ** 62:
                    continue
                try:
                    got = _kernelop.eval_expr(text, env)
                except (ValueError, RuntimeError) as err:  # overflow checks of the evaluator
                    self.assertIn("overflow", str(err))
                    continue
                self.assertEqual(got, want, f"{e} -> {text} at {env}")
                checked += 1
        self.assertGreater(checked, 3000)

    def test_lowered_ceil_and_floor_division_read_back_as_cdiv_and_floor(self):
        m = ("leaf", "dim(x, 0)", True)
        q = H.simplify(("sdiv", m, H.const(256)))
        cond = H.simplify(("mul", H.simplify(("cmp", "ne", m, H.simplify(("mul", q, H.const(256))))),
                           H.simplify(("not", H.simplify(("cmp", "slt", m, H.const(0)))))))
        e = H.simplify(("select", cond, H.simplify(("add", q, H.const(1))), q))
        self.assertEqual(_kernelop.canonical_expr(H.text(e, "grid")), "cdiv(dim(x, 0), 256)")
        n = ("leaf", "n", False)
        self.assertEqual(_kernelop.canonical_expr(H.text(H.simplify(("sdiv", n, H.const(4))), "x")),
                         "select(n < 0, 0 - (0 - n) // 4, n // 4)")
        with self.assertRaises(H.Unreadable):
            H.text(H.simplify(("sdiv", H.const(100), n)), "x")  # C's division by a value of unknown sign

    def test_llvm_types_lay_out_like_c(self):
        t = H.parse_type("!llvm.struct<(ptr, struct<(struct<(i32, i32)>, i64)>)>")
        self.assertEqual(H.size_align(t), (24, 8))
        self.assertEqual([(p, o) for p, _, o in H.leaves(t)], [((0,), 0), ((1, 0, 0), 8), ((1, 0, 1), 12),
                                                               ((1, 1), 16)])
        self.assertEqual(H.size_align(H.parse_type("!llvm.struct<(struct<(i64, i32)>, i32)>")), (24, 8))
        with self.assertRaises(ValueError):
            H.parse_type("!llvm.vec<4 x f32>")
        # pointers into an address space (global: 1) are pointers
        self.assertEqual(H.parse_type("!llvm.ptr<1>"), ("ptr",))
        self.assertEqual(H.parse_type("!llvm.struct<(ptr<1>, struct<(i32, i32)>)>"),
                         ("struct", [("ptr",), ("struct", [("int", 32), ("int", 32)])]))
        for bad in ("!llvm.ptr<x>", "!llvm.ptr<1", "!llvm.ptr<>", "!llvm.ptr<3>"):
            with self.assertRaises(ValueError, msg=bad):
                H.parse_type(bad)


@unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
class Recording(unittest.TestCase):
    def test_a_tensor_is_a_struct_of_its_pointer_shape_and_strides(self):
        d = ck.recorded("kop_cd_rec")["vector_add"].doc
        self.assertEqual(d["kernel_name"], "vector_add_host")
        self.assertEqual(d["cutedsl"]["version"], cutlass.__version__ if hasattr(cutlass, "__version__")
                         else d["cutedsl"]["version"])
        self.assertEqual([i["name"] for i in d["inputs"]], ["a", "b"])
        self.assertEqual(d["outputs"], [{"name": "mC", "shape": {"same_as": "a"}, "dtype": "float32"}])
        self.assertEqual(d["params"], [
            {"struct": [t, {"expr": f"dim({t}, 0)"}, {"expr": f"dim({t}, 1)"},
                        {"expr": f"stride({t}, 0)", "int64": True}]} for t in ("a", "b", "mC")])
        self.assertEqual(d["geometry"], {"custom": {"grid": ["cdiv(dim(a, 0) * dim(a, 1), 256)", "1", "1"],
                                                    "block": ["256", "1", "1"], "shared_mem": "0"}})
        self.assertEqual(d["requires"], ["rank(a) == 2", "rank(b) == 2"])
        self.assertNotIn("configs", d)

    def test_host_side_layout_algebra_and_configs(self):
        d = ck.recorded("kop_cd_rec")["axpy"].doc
        self.assertEqual(d["tunables"], ["TILE_N"])
        self.assertEqual(d["configs"], [{"TILE_N": 32}, {"TILE_N": 64}])
        tiles_n = "select(TILE_N == 32, cdiv(dim(x, 1), 32), cdiv(dim(x, 1), 64))"
        # zipped_divide by (4, TILE_N): the rest modes' sizes and strides, computed on the host, as expressions
        self.assertEqual(d["params"][0], {"struct": ["x", {"expr": "cdiv(dim(x, 0), 4)"}, {"expr": tiles_n},
                                                     {"expr": "stride(x, 0)", "int64": True},
                                                     {"expr": "stride(x, 0) * 4", "int64": True}]})
        # the identity tensor (no pointer), the shape tuple, and the float scalar as it is
        self.assertEqual(d["params"][3:], [{"struct": [{"expr": "cdiv(dim(x, 0), 4)"}, {"expr": tiles_n}]},
                                           {"expr": "dim(x, 0)"}, {"expr": "dim(x, 1)"}, "alpha"])
        self.assertEqual(d["geometry"]["custom"]["block"], ["select(TILE_N == 32, 128, 256)", "1", "1"])
        self.assertEqual(d["inputs"][2], {"name": "alpha", "scalar": "float"})

    def test_int_scalars_and_sizes_as_int32_arguments(self):
        d = ko.record_plugin(ko.cutedsl(ck.add_int), op_name="kop_cd_rec::add_int").doc
        self.assertEqual(d["params"], [{"struct": ["x", {"expr": "dim(x, 0)"}, {"expr": "dim(x, 1)"},
                                                   {"expr": "stride(x, 0)", "int64": True}]},
                                       {"struct": ["mOut", {"expr": "dim(mOut, 0)"}, {"expr": "dim(mOut, 1)"},
                                                   {"expr": "stride(mOut, 0)", "int64": True}]},
                                       {"expr": "k"}, {"expr": "numel(x)"}])
        # the DSL's floor division, lowered to C's truncation and a correction, reads back as // for a size
        self.assertEqual(d["geometry"]["custom"]["grid"], ["(numel(x) + 127) // 128", "1", "1"])
        self.assertEqual(d["inputs"][1], {"name": "k", "scalar": "int"})

    def test_example_dtypes_and_ranks(self):
        r = ko.record_plugin(ko.cutedsl(ck.vector_add), op_name="kop_cd_rec::add_half",
                             example_inputs=(torch.empty(2, 3, dtype=torch.float16),
                                             torch.empty(2, 3, dtype=torch.float16)))
        self.assertEqual([i["dtype"] for i in r.doc["inputs"]], ["float16", "float16"])
        r.check(["sm_80"])
        # the kernel unpacks two dims: traced at rank 3 the DSL's own error is named with the tactic
        expect_error(self, RuntimeError, "cute.compile of tactic 0 for sm_80 failed", ko.record_plugin,
                     ko.cutedsl(ck.vector_add, arch="sm_80"), op_name="kop_cd_rec::add3",
                     example_inputs=(torch.empty(2, 3, 4), torch.empty(2, 3, 4)))

    def test_an_assumed_alignment_is_a_requirement_of_an_input_and_declared_of_an_output(self):
        r = ko.record_plugin(ko.cutedsl(aligned_add), op_name="kop_cd_rec::aligned_add")
        d = r.doc
        self.assertIn("aligned(a, 16)", d["requires"])
        self.assertNotIn("aligned(b, 16)", d["requires"])
        # the output: kernelop allocates it so (a caller's buffer is checked at launch), never a requirement
        self.assertEqual(d["outputs"][0]["align"], 32)
        self.assertFalse(any("aligned(c" in x for x in d["requires"]))
        r.check(["sm_80"])

    def test_from_dlpack_marks_are_kept_as_requirements(self):
        def marked(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            ck.vector_add_host(from_dlpack(a, assumed_align=16).mark_compact_shape_dynamic(mode=1, divisibility=8),
                               from_dlpack(b, use_32bit_stride=True), from_dlpack(c).mark_layout_dynamic())
            return c
        r = ko.record_plugin(ko.cutedsl(marked, arch="sm_90a"), op_name="kop_cd_marks::marked",
                             example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})
        self.assertEqual(r.doc["params"][1], {"struct": ["b", {"expr": "dim(b, 0)"}, {"expr": "dim(b, 1)"},
                                                         {"expr": "stride(b, 0)"}]})  # a 32-bit stride
        self.assertEqual(r.doc["requires"], ["rank(a) == 2", "aligned(a, 16)", "rank(b) == 2", "dim(a, 1) % 8 == 0"])
        r.check(["sm_90a"])  # the compiled kernel's parameters are the struct's
        op = r.register(["sm_90a"])
        expect_error(self, RuntimeError, "dim(a, 1) % 8 == 0", op, torch.empty(4, 12, device="meta"),
                     torch.empty(4, 12, device="meta"))

        def bad_mode(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            ck.vector_add_host(from_dlpack(a).mark_compact_shape_dynamic(mode=2, divisibility=8), from_dlpack(b),
                               from_dlpack(c))
            return c
        expect_error(self, ValueError, "mark_compact_shape_dynamic's mode 2 is no mode of a tensor of rank 2",
                     ko.record_plugin, ko.cutedsl(bad_mode), op_name="kop_cd_marks::bad_mode",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

    def test_meta_impl_gives_the_shapes_and_must_agree(self):
        r = ko.record_plugin(ko.cutedsl(ck.vector_add), lambda a, b: torch.empty_like(a), op_name="kop_cd_rec::m")
        self.assertEqual(r.doc["outputs"][0]["shape"], {"same_as": "a"})
        expect_error(self, ValueError, "meta_impl says output 0 is torch.float32 [dim(a, 1), dim(a, 0)]",
                     ko.record_plugin, ko.cutedsl(ck.vector_add), lambda a, b: a.new_empty(a.shape[1], a.shape[0]),
                     op_name="kop_cd_rec::m2")

    def test_the_same_launch_gets_the_same_op_name_in_every_process(self):
        a = ko.record_plugin(ko.cutedsl(ck.vector_add)).op_name
        b = ko.record_plugin(ko.cutedsl(ck.vector_add)).op_name
        self.assertEqual(a, b)
        self.assertRegex(a, r"^kernelop_cutedsl::vector_add_host_[0-9a-f]{12}$")


@unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
class SeveralLaunches(unittest.TestCase):
    def test_two_host_calls_are_one_op_with_a_scratch_tensor(self):
        r = ko.record_plugin(ko.cutedsl(ck.add_twice), op_name="kop_cd_two::add_twice",
                             example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})
        d = r.doc
        self.assertEqual([(o["name"], o.get("scratch", False)) for o in d["outputs"]], [("out", False), ("mC", True)])
        (then,) = d["then"]
        self.assertEqual(then["kernel_name"], "vector_add_host")
        scratch = d["outputs"][1]["name"]
        self.assertEqual(d["params"][2]["struct"][0], scratch)  # the first launch writes the scratch
        self.assertEqual(then["params"][0]["struct"][0], scratch)  # which the second reads
        self.assertEqual(then["params"][2]["struct"][0], d["outputs"][0]["name"])  # into the output
        op = r.register(["sm_90a"])
        self.assertEqual(op(torch.empty(3, 5, device="meta")[..., :5], torch.empty(3, 5, device="meta")).shape,
                         (3, 5))


class Refusals(unittest.TestCase):
    def test_what_cannot_be_recorded_is_named(self):
        def no_launch(a: torch.Tensor) -> torch.Tensor:
            return torch.empty_like(a)
        expect_error(self, ValueError, "launch_fn called no @cute.jit function", ko.record_plugin,
                     ko.cutedsl(no_launch))

        outside = torch.zeros(4, 4)  # a tensor of the caller's, not an input (one launch_fn allocates is scratch)

        def captured(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            ck.vector_add_host(from_dlpack(a), from_dlpack(outside), from_dlpack(c))
            return c
        expect_error(self, ValueError, "kernelop records inputs and returned outputs only", ko.record_plugin,
                     ko.cutedsl(captured))

        def twice(a: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            ck.vector_add_host(from_dlpack(a), from_dlpack(a), from_dlpack(c))
            return c
        expect_error(self, ValueError, "tensor 'a' is passed to vector_add_host twice", ko.record_plugin,
                     ko.cutedsl(twice))

        def plain_int(a: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            _plain_int_host(from_dlpack(a), from_dlpack(c), a.shape[0])
            return c
        expect_error(self, ValueError, "_plain_int_host's argument 'n' is", ko.record_plugin, ko.cutedsl(plain_int))
        expect_error(self, ValueError, "(unannotated); kernelop passes cute.Tensor arguments", ko.record_plugin,
                     ko.cutedsl(plain_int))

        expect_error(self, ValueError, "the host function launches 2 kernels; kernelop reads one launch per host "
                     "function",
                     ko.record_plugin, ko.cutedsl(launches_twice))
        expect_error(self, ValueError, "kernel argument 0, field (0,) is a pointer that is not a tensor's own data "
                     "pointer (an address inside tensor 'a' (the host offsets its pointer))", ko.record_plugin,
                     ko.cutedsl(offset_launch))

    def test_configs_must_set_constexpr_parameters(self):
        expect_error(self, ValueError, "configs[0] sets BLOCK, which axpy_host has no cutlass.Constexpr parameter of "
                     "(its cutlass.Constexpr parameters: TILE_N)", ko.record_plugin,
                     ko.cutedsl(ck.axpy, configs=[{"BLOCK": 3}]))
        expect_error(self, TypeError, "configs[0]['TILE_N'] is 'x'", ko.cutedsl, ck.axpy, [{"TILE_N": "x"}])
        expect_error(self, ValueError, "kernelop.cutedsl: architecture 'compute_90' is invalid for the CuTe DSL "
                     "(arch[0]); expected 'sm_NN' or 'sm_NNa'", ko.cutedsl, ck.axpy, None, "compute_90")
        expect_error(self, TypeError, "expected kernelop.triton(...) or kernelop.cutedsl(...)", ko.record_plugin,
                     [ko.cutedsl(ck.axpy), "x"])


@unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
class Compilation(unittest.TestCase):
    def test_every_tactic_for_sm_80_and_sm_90a_plus_ptx_checked_against_the_spec(self):
        r = ck.recorded("kop_cd_cc")["axpy"]
        binaries = r.compile()
        self.assertEqual([(b.program, b.arch) for b in binaries],
                         [(0, "sm_80"), (0, "compute_80"), (0, "sm_90a"), (1, "sm_80"), (1, "compute_80"),
                          (1, "sm_90a")])
        for b in binaries:
            if b.arch.startswith("sm_"):
                self.assertEqual(b.data[:4], b"\x7fELF")
                self.assertIn(f".target {b.arch}", b.ptx)
                # compiled with its tensors in global memory, as the op's are (not generic pointers)
                self.assertIn("ld.global", b.ptx)
                self.assertIn("st.global", b.ptx)
        # the two tactics' kernels are different compilations
        self.assertNotEqual(binaries[0].entry, binaries[3].entry)
        r.check()  # C++: every binary's .entry against the struct parameters, sizes and alignment
        r.check(["sm_90a"])

    def test_a_bad_arch_is_named(self):
        r = ck.recorded("kop_cd_cc")["vector_add"]
        expect_error(self, ValueError, "an architecture is listed twice", r.compile, ["sm_90", "sm_90"])
        expect_error(self, ValueError, "invalid for the CuTe DSL", r.compile, ["compute_90"])


@unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
class Registration(unittest.TestCase):
    def test_the_op_has_a_schema_and_a_cpp_meta_kernel(self):
        op = ops()["axpy"]
        self.assertEqual(str(op.default._schema), "kop_cd::axpy(Tensor x, Tensor y, float alpha) -> Tensor")
        x = torch.empty(37, 1001, device="meta")
        self.assertEqual(op(x, x, 2.0).shape, (37, 1001))
        expect_error(self, RuntimeError, "rank(x) == 2", op, torch.empty(2, 3, 4, device="meta"),
                     torch.empty(2, 3, 4, device="meta"), 1.0)
        k = ko.kernel("kop_cd::axpy")
        self.assertEqual(k.tactics, ["TILE_N=32", "TILE_N=64"])
        self.assertEqual(k.parameters[:5], ["const float* x", "int cdiv(dim(x, 0), 4)",
                                            "int select(TILE_N == 32, cdiv(dim(x, 1), 32), cdiv(dim(x, 1), 64))",
                                            "long long stride(x, 0)", "long long stride(x, 0) * 4"])

    def test_a_package_is_format_3_and_loads_where_the_cute_dsl_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "axpy.kop")
            ck.recorded("kop_cd_pkg")["axpy"].build_package(path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(9)[8], 3)
            out = run_python(f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                print(op.default._schema)
                print(tuple(op(torch.empty(5, 300, device="meta"), torch.empty(5, 300, device="meta"), 1.0).shape))
                print(len(ko.kernel("kop_cd_pkg::axpy").tactics))
            """)
        self.assertEqual(out.split("\n")[:3], ["kop_cd_pkg::axpy(Tensor x, Tensor y, float alpha) -> Tensor",
                                               "(5, 300)", "2"])


def _packaged_ops():
    """The examples' ops from the packages built on the CPU machine, else built here (example_packages)."""
    if "pkg" not in _registered:
        _registered["pkg"], _registered["pkg_dir"] = example_packages("kop_cutedsl", NAMES,
                                                              ck.recorded if HAVE_CUTE else None)
    return _registered["pkg"]


@unittest.skipUnless(CUDA, "no CUDA device")
class Cuda(unittest.TestCase):
    SHAPES = [(1, 1), (4, 64), (5, 33), (37, 1001), (256, 4096), (3, 70001)]

    def each_tactic(self, op_name):
        return each_tactic(op_name)

    def test_every_tactic_matches_pytorch(self):
        ops_ = _packaged_ops()
        for shape in self.SHAPES:
            a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
            for t, text in self.each_tactic("kop_cutedsl::vector_add"):
                torch.testing.assert_close(ops_["vector_add"](a, b), a + b, msg=lambda m: f"{shape} {text}: {m}")
            for t, text in self.each_tactic("kop_cutedsl::axpy"):
                torch.testing.assert_close(ops_["axpy"](a, b, 0.75), 0.75 * a + b,
                                           msg=lambda m: f"{shape} {text}: {m}")
            torch.testing.assert_close(ops_["axpy"](a, b, -2.0), -2.0 * a + b)  # tuned
            for k in (0, 3, -7):
                torch.testing.assert_close(ops_["add_int"](a, k), a + k)
            torch.testing.assert_close(ops_["add_twice"](a, b), a + 2 * b)  # two launches through a scratch

    def test_views_and_wrong_inputs(self):
        ops_ = _packaged_ops()
        x = torch.randn(64, 130, device="cuda")
        # a non-contiguous input is made contiguous (the struct's strides are the contiguous ones)
        v = x[:, :128]
        torch.testing.assert_close(ops_["vector_add"](v, v), v + v)
        expect_error(self, RuntimeError, "input 'a' has rank 1", ops_["vector_add"], x.reshape(-1), x.reshape(-1))
        y = x[1:]  # an offset view that is contiguous: its own pointer goes in the struct
        torch.testing.assert_close(ops_["vector_add"](y, y), y + y)

    def test_cuda_graph_replay_and_compile(self):
        ops_ = _packaged_ops()
        axpy = ops_["axpy"]
        x, y = torch.randn(128, 256, device="cuda"), torch.randn(128, 256, device="cuda")
        axpy(x, y, 1.5)  # tune outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = axpy(x, y, 1.5)
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 1.5 * x + y)
        f = torch.compile(lambda a, b: axpy(a, b, 0.5).relu(), fullgraph=True, dynamic=True)
        for shape in ((8, 64), (33, 100), (300, 17)):
            a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
            torch.testing.assert_close(f(a, b), (0.5 * a + b).relu())
        torch.library.opcheck(axpy.default, (x, y, 0.25))

    def test_packages_run_where_the_cute_dsl_cannot_be_imported(self):
        _packaged_ops()
        packages = _registered["pkg_dir"]
        out = run_python(f"""
            import os, torch, kernelop as ko
            add = ko.load_package(os.path.join({packages!r}, "kop_cutedsl.vector_add.kop"))
            axpy = ko.load_package(os.path.join({packages!r}, "kop_cutedsl.axpy.kop"))
            a, b = torch.randn(77, 513, device="cuda"), torch.randn(77, 513, device="cuda")
            err = max((add(a, b) - (a + b)).abs().max().item(), (axpy(a, b, 3.0) - (3.0 * a + b)).abs().max().item())
            print(err, sys.modules.get("cutlass"))
        """)
        err, module = out.split()
        self.assertLess(float(err), 1e-5)
        self.assertEqual(module, "None")

    @unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
    def test_registered_from_the_dsl_int_scalars(self):
        op = ko.custom_plugin(ko.cutedsl(ck.add_int), op_name="kop_cd::add_int")
        for shape in ((3, 5), (100, 1000)):
            x = torch.randn(shape, device="cuda")
            torch.testing.assert_close(op(x, 3), x + 3)


if __name__ == "__main__":
    run_tests(cpu=[HostArithmetic, Recording, SeveralLaunches, Refusals, Compilation, Registration], gpu=[Cuda], cuda=CUDA)
