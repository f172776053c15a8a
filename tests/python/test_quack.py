"""QuACK's CuTe DSL kernels registered from QuACK's own host functions (examples/quack_ops.py; QuACK 0.6.5 from PyPI
in .deps/quack, scripts/fetch-quack; nothing of it is committed).

CPU (needs the CuTe DSL and QuACK): what the recording of a compiled host function holds (QuACK's fake tensors'
static N, divisibility and alignment as requirements, one tactic per N listed in specialize, the TVM FFI stream as
the launch's), what is refused, that QuACK's own caches are left as they were, and packages that load where neither
the CuTe DSL nor QuACK can be imported.
GPU (needs neither: it runs the packages built on the CPU machine): values and gradients against torch at ragged
row counts for every N, sizes refused, CUDA graphs, torch.compile and opcheck.
"""

import os
import pathlib
import sys
import unittest

import torch

import kernelop as ko
from expect import expect_error
from isolated import run_python_refusing
from kernelop_testing import example_packages, replay_with_new_input, run_tests, temp_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUACK = ROOT / ".deps" / "quack"
sys.path.insert(0, str(ROOT / "examples"))
import quack_ops  # noqa: E402  (examples/quack_ops.py: the launch_fns, QuACK's host functions)

CUDA = torch.cuda.is_available()
try:
    import cutlass  # noqa: F401
    HAVE_CUTE = True
except ImportError:
    HAVE_CUTE = False
HAVE_QUACK = HAVE_CUTE and (QUACK / "VERSION").is_file()
_recorded = {}


def recorded():
    """The ops examples/quack_ops.py records (once per process)."""
    if not HAVE_QUACK:
        raise unittest.SkipTest("QuACK is not fetched (scripts/fetch-quack) or the CuTe DSL is not installed")
    if "ops" not in _recorded:
        _recorded["ops"] = quack_ops.recorded("kop_quack_cpu")
    return _recorded["ops"]


def meta(*shape, dtype=quack_ops.DTYPE):
    return torch.empty(*shape, dtype=dtype, device="meta")


def fakes(n, count=3):
    """`count` fake CuTe tensors of (batch, n) float32, row-major, as a library compiles for."""
    import cutlass.cute as cute
    return [cute.runtime.make_fake_tensor(cutlass.Float32, (cute.sym_int(), n), stride=(cute.sym_int64(), 1))
            for _ in range(count)]


def expect_refused(test, cases, example_inputs):
    """Each (launch_fn, message) of `cases`, recorded (N = 64 compiled in), is refused with the message."""
    for fn, message in cases:
        expect_error(test, ValueError, message, ko.record_plugin, ko.cutedsl(fn, specialize=[64]),
                     op_name=f"kop_quack_cpu::{fn.__name__}", example_inputs=example_inputs)


class Recording(unittest.TestCase):
    def test_softmax_is_quacks_compiled_host_function_with_its_layouts_as_requirements(self):
        doc = recorded()["softmax"].doc
        self.assertEqual(doc["kernel_name"], "Softmax")
        self.assertEqual(doc["outputs"], [{"name": "y", "shape": {"same_as": "x"}, "dtype": "bfloat16", "align": 16}])
        # fake_tensor(dtype, (batch_sym, N), div): the pointer, the dynamic batch and its 64-bit stride; N compiled in
        self.assertEqual(doc["params"][0], {"struct": ["x", {"expr": "dim(x, 0)"},
                                                       {"expr": "stride(x, 0)", "int64": True}]})
        self.assertEqual(len(doc["params"]), 2)  # x and y; the TVM FFI stream is the launch's own
        # (its stride's divisibility by 8 holds of every N compiled in: no requirement of its own)
        self.assertEqual(doc["requires"], ["rank(x) == 2", "aligned(x, 16)", " + ".join(
            f"(dim(x, 1) == {n})" for n in quack_ops.N_VALUES) + " != 0"])
        self.assertEqual([c["requires"] for c in doc["configs"]],
                         [[f"dim(x, 1) == {n}"] for n in quack_ops.N_VALUES])
        self.assertEqual(doc["tunables"], ["size_class"])
        grid = doc["geometry"]["custom"]["grid"][0]  # rows per block: 4 at N = 1024, 2 at 4096, 1 at 8192
        self.assertEqual(grid, "select(size_class == 1024, cdiv(dim(x, 0), 4), select(size_class == 4096, "
                               "cdiv(dim(x, 0), 2), dim(x, 0)))")
        bwd = doc["backward"]
        self.assertEqual(bwd["kernel_name"], "SoftmaxBackward")
        self.assertEqual([i["name"] for i in bwd["inputs"]], ["y", "grad_y"])

    def test_rms_norm_passes_eps_and_the_weight(self):
        doc = recorded()["rms_norm"].doc
        self.assertEqual(doc["kernel_name"], "RMSNorm")
        self.assertEqual(doc["params"][1], {"struct": ["weight"]})  # (N,) with N static: its pointer alone
        self.assertEqual(doc["params"][3], {"struct": ["rstd", {"expr": "dim(rstd, 0)"}]})  # store_rstd=True
        self.assertEqual(doc["params"][4], "eps")
        self.assertEqual([o["name"] for o in doc["outputs"]], ["y", "rstd"])
        self.assertIn("aligned(weight, 16)", doc["requires"])
        self.assertEqual(doc["configs"][1]["requires"], ["dim(x, 1) == 4096", "dim(weight, 0) == 4096"])

    def test_rms_norm_backward_is_quacks_custom_op_its_partials_and_their_sum(self):
        bwd = recorded()["rms_norm"].doc["backward"]
        self.assertEqual(bwd["differentiable"], ["x", "weight"])
        self.assertEqual(bwd["kernel_name"], "RMSNormBackward")  # launched inside torch.ops.quack.rmsnorm_bwd_f
        partials = bwd["outputs"][2]
        self.assertTrue(partials["scratch"])
        # get_sm_count(N, device) for sm_80 and sm_90a (major < 10): 8, 2 and 1 partials per SM by N
        self.assertEqual(partials["shape"], ["select(dim(x, -1) == 1024, 8 * sm_count(), select(dim(x, -1) == 4096, "
                                             "2 * sm_count(), sm_count()))", "dim(x, 1)"])
        (then,) = bwd["then"]
        self.assertEqual(then["kernel_name"], "kop_sum_dim<T, U>")  # dw_partial.sum(dim=0).to(weight.dtype)

    def test_each_row_length_is_its_own_kernel(self):
        entries = {}
        for b in recorded()["softmax"].compile(["sm_90a"]):
            entries.setdefault(b.program, set()).add(b.entry)
        self.assertEqual(len(entries), len(quack_ops.N_VALUES))
        for program, n in enumerate(quack_ops.N_VALUES):
            (entry,) = entries[program]
            self.assertIn(f"o{n}i64div8", entry)  # the kernel QuACK compiles for (batch, N)

    def test_wide_rows_launch_in_the_clusters_quack_picks(self):
        # QuACK's cluster_n (2 blocks a row at 32K, 4 at 64K on sm_90) is the launch's cluster attribute, read from
        # its host function: a select over the row length, the grid's y axis its multiple.
        r = recorded()["softmax_wide"]
        g = r.doc["geometry"]["custom"]
        # (16K rows launch without a cluster: a cluster of 1 in the merged op)
        self.assertEqual(g["cluster"], ["1", "select(size_class == 16384, 1, select(size_class == 32768, 2, 4))", "1"])
        self.assertEqual(g["grid"][1], g["cluster"][1])
        bwd = r.doc["backward"]["geometry"]["custom"]
        self.assertIn("cluster", bwd)
        r.check(["sm_90a"])
        folder = temp_dir()
        path = r.build_package(os.path.join(folder, "wide.kop"))
        with open(path, "rb") as f:
            self.assertEqual(f.read(9)[8], 8)  # package format 8: a cluster launch
        out = run_python_refusing(["cutlass", "quack"], f"""
            import torch, kernelop as ko
            op = ko.load_package({path!r})
            print(tuple(op(torch.empty(3, 65536, dtype=torch.bfloat16, device="meta")).shape))
        """)
        self.assertEqual(out.split(), ["(3,", "65536)"])

    def test_a_literal_eps_is_a_constant_of_the_op(self):
        if not HAVE_QUACK:
            self.skipTest("QuACK is not fetched")

        def rms_norm_default_eps(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            return quack_ops.rms_norm_fwd(x, weight, 1e-6)

        doc = ko.record_plugin(ko.cutedsl(rms_norm_default_eps, specialize=[4096], arch="sm_90a"),
                               op_name="kop_quack_cpu::rms_default_eps",
                               example_inputs={"x": meta(8, 4096), "weight": meta(4096)}).doc
        self.assertEqual(doc["params"][4], {"float": 1e-6})

    def test_the_meta_kernel_refuses_a_row_length_no_kernel_was_compiled_for(self):
        op = recorded()["softmax"].register()
        self.assertEqual(op(meta(3, 4096)).shape, (3, 4096))
        expect_error(self, RuntimeError, "(dim(x, 1) == 1024) + (dim(x, 1) == 4096) + (dim(x, 1) == 8192) != 0",
                     op, meta(3, 2048))

    def test_a_row_length_not_listed_is_compiled_on_first_use(self):
        # Note [first-use growth] with QuACK's static N: the forward and its backward each grow on their own call.
        if not HAVE_QUACK:
            self.skipTest("QuACK is not fetched")
        r = ko.record_plugin(ko.cutedsl(quack_ops.softmax_fwd, specialize=[4096], outputs=["y"], first_use=True,
                                        arch="sm_90a"), op_name="kop_quack_cpu::softmax_first_use",
                             example_inputs={"x": meta(8, 4096)},
                             backward=ko.Backward(["x"], ko.cutedsl(quack_ops.softmax_bwd)))
        op = r.register()
        x = meta(3, 2048).requires_grad_()
        y = op(x)
        (dx,) = torch.autograd.grad(y, (x,), meta(3, 2048))
        self.assertEqual((tuple(y.shape), tuple(dx.shape)), ((3, 2048), (3, 2048)))
        self.assertIn("(dim(x, 1) == 4096) + (dim(x, 1) == 2048) != 0", r.doc["requires"])
        self.assertIn("(dim(grad_y, 1) == 4096) * (dim(y, 1) == 4096) + (dim(grad_y, 1) == 2048) * (dim(y, 1) == 2048) "
                      "!= 0", r.backward.doc["requires"])
        entries = {b.program: b.entry for b in r.compile(["sm_90a"])}
        self.assertIn("o2048i64div8", entries[1])  # QuACK's kernel for (batch, 2048), added as tactic 1
        ahead = ko.record_plugin(ko.cutedsl(quack_ops.softmax_fwd, specialize=[2048], outputs=["y"], arch="sm_90a"),
                                 op_name="kop_quack_cpu::softmax_2048", example_inputs={"x": meta(8, 4096)})
        self.assertEqual({b.arch: b.data for b in r.compile(["sm_90a"]) if b.program == 1},
                         {b.arch: b.data for b in ahead.compile(["sm_90a"])})  # the same machine code
        expect_error(self, RuntimeError, "kernelop compiled no op for dim(x, -1) == 100 on first use", op,
                     meta(3, 100))

    def test_without_specialize_the_size_compiled_in_is_named(self):
        if not HAVE_QUACK:
            self.skipTest("QuACK is not fetched")
        expect_error(self, ValueError, "specialize", ko.record_plugin, ko.cutedsl(quack_ops.softmax_fwd),
                     op_name="kop_quack_cpu::unspecialized", example_inputs={"x": meta(8, 4096)})

    def test_quacks_caches_are_left_as_they_were(self):
        if not HAVE_QUACK:
            self.skipTest("QuACK is not fetched")
        import quack.cache as qc
        cache_dir = temp_dir()
        saved = qc.CACHE_DIR
        qc.CACHE_DIR = cache_dir
        try:
            self.assertTrue(qc.CACHE_ENABLED)
            ko.record_plugin(ko.cutedsl(quack_ops.softmax_fwd, specialize=[1024], arch="sm_80"),
                             op_name="kop_quack_cpu::cache_probe", example_inputs={"x": meta(8, 1024)})
            self.assertTrue(qc.CACHE_ENABLED)  # switched off while recording only
            self.assertEqual([p for p in pathlib.Path(cache_dir).rglob("*.o")], [])  # nothing written to disk
        finally:
            qc.CACHE_DIR = saved
        # The recording's entry in Softmax.compile's in-memory cache is keyed by x.size(1), which hashes and compares
        # as its value (Note [sizes as ints]): a real call of that N gets the recording's stand-in, which compiles for
        # real on its first call outside a recording (CompiledOutsideARecording).
        from kernelop._cutedsl import _Compiled
        softmax_compile = sys.modules["quack.softmax"].Softmax.compile
        cache = softmax_compile.__closure__[softmax_compile.__code__.co_freevars.index("cache")].cell_contents
        self.assertIsInstance(cache[(cutlass.BFloat16, cutlass.BFloat16, 1024)], _Compiled)


class CompiledOutsideARecording(unittest.TestCase):
    def test_the_stand_in_compiles_for_real_once_and_runs(self):
        if not HAVE_CUTE:
            self.skipTest("nvidia-cutlass-dsl is not installed")
        from kernelop._cutedsl import _Compiled
        compiled = []

        def real_compile(fn, *args, **kwargs):  # what cute.compile gives: a function to call
            compiled.append((fn, args, kwargs))
            return lambda *call: ("ran", fn, call)

        stand_in = _Compiled("host", (1, 2), {"options": "--enable-tvm-ffi"}, real_compile)
        self.assertEqual(stand_in("x", "y"), ("ran", "host", ("x", "y")))
        self.assertEqual(stand_in("z"), ("ran", "host", ("z",)))
        self.assertEqual(compiled, [("host", (1, 2), {"options": "--enable-tvm-ffi"})])  # once


class Refusals(unittest.TestCase):
    def setUp(self):
        if not HAVE_CUTE:
            self.skipTest("nvidia-cutlass-dsl is not installed")

    def test_a_function_compiled_before_the_recording_is_named(self):
        import cutlass.cute as cute
        import cutedsl_kernels as ck
        compiled = cute.compile(ck.vector_add_host, *fakes(64), options="--gpu-arch sm_90a")  # for real, as a cache keeps

        def cached(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            compiled(a, b, c)
            return c
        expect_error(self, ValueError, "launch_fn called a CuTe DSL function compiled before this recording",
                     ko.record_plugin, ko.cutedsl(cached), op_name="kop_quack_cpu::cached",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

    def test_a_compiled_function_called_unlike_its_compilation_is_named(self):
        import cutlass.cute as cute
        import cutedsl_kernels as ck

        def too_few(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            cute.compile(ck.vector_add_host, *fakes(a.size(1)))(a, c)
            return c

        def with_keywords(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            cute.compile(ck.vector_add_host, *fakes(a.size(1)))(a, b, mC=c)
            return c

        def wrong_dtype(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a, dtype=torch.float16)
            cute.compile(ck.vector_add_host, *fakes(a.size(1)))(a, b, c)
            return c

        expect_refused(self, ((too_few, "is called with 2 arguments; it takes 3 (mA, mB, mC)"),
                              (with_keywords, "is called with keyword arguments (mC)"),
                              (wrong_dtype, "mC' was compiled for Float32 elements but is called with a "
                                            "torch.float16")), {"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

    def test_what_the_compiled_call_passes_must_be_the_ops_tensors_and_ints(self):
        import dataclasses as dc
        import cutlass.cute as cute
        import cutedsl_kernels as ck

        def transposed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            cute.compile(ck.vector_add_host, *fakes(a.size(0)))(a.t(), b, c)  # a's sizes and strides are not a.t()'s
            return c

        def one_fake_twice(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            f = fakes(a.size(1), 2)
            cute.compile(ck.vector_add_host, f[0], f[0], f[1])(a, b, c)
            return c

        @dc.dataclass
        class Dims:
            n: object

        class Adder:
            def __init__(self, dims):
                self.dims = dims

            @cute.jit
            def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
                ck.vector_add_host(mA, mB, mC)

        def size_in_a_dataclass(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            cute.compile(Adder(Dims(a.size(1))), *fakes(64))(a, b, c)
            return c

        def sizes_in_a_tuple(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            adder = Adder((a.size(0), a.size(1)))
            cute.compile(adder, *fakes(a.size(1)))(a, b, c)
            assert type(adder.dims[1]) is int  # made the int it is compiled in
            return c

        ex = {"a": torch.empty(64, 64), "b": torch.empty(64, 64)}
        expect_refused(self, ((transposed, "is a view of 'a' with other sizes or strides"),
                              (one_fake_twice, "is given one fake tensor for its parameters 'mA' and 'mB'"),
                              (size_in_a_dataclass, "holds a size of the inputs in its attribute 'dims'")), ex)
        r = ko.record_plugin(ko.cutedsl(sizes_in_a_tuple, specialize={"dim(a, 0)": [64], "dim(a, 1)": [64]}),
                             op_name="kop_quack_cpu::tuple", example_inputs=ex)
        self.assertEqual(r.doc["kernel_name"], "Adder")

    def test_values_the_recording_would_freeze_are_refused(self):
        import cutlass.cute as cute
        import cutedsl_kernels as ck
        from cutlass.cute.runtime import from_dlpack

        def doubled_alpha(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
            out = torch.empty_like(x)
            ck.axpy_host(from_dlpack(x), from_dlpack(y), from_dlpack(out), float(alpha) * 2.0)
            return out
        expect_error(self, ValueError, "is none of the op's float inputs (alpha) passed as it is", ko.record_plugin,
                     ko.cutedsl(doubled_alpha), op_name="kop_quack_cpu::doubled_alpha",
                     example_inputs={"x": torch.empty(8, 64), "y": torch.empty(8, 64)})

        def size_in_a_closure(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            n = a.size(1)

            @cute.jit
            def host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
                ck.vector_add_kernel(mA, mB, mC).launch(grid=(int(n), 1, 1), block=(256, 1, 1))
            c = torch.empty_like(a)
            cute.compile(host, *fakes(64))(a, b, c)
            return c
        expect_error(self, ValueError, "host reads a size of the inputs while kernelop compiles it", ko.record_plugin,
                     ko.cutedsl(size_in_a_closure), op_name="kop_quack_cpu::closure",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

        def wrong_prototype(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            protos = [from_dlpack(torch.empty(8, 64, dtype=torch.float16)) for _ in range(3)]
            cute.compile(ck.vector_add_host, *protos)(a, b, c)
            return c
        expect_error(self, ValueError, "was compiled for Float16 elements but is called with a torch.float32",
                     ko.record_plugin, ko.cutedsl(wrong_prototype), op_name="kop_quack_cpu::prototype",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

        def not_last(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            ck.vector_add_host(from_dlpack(a).mark_layout_dynamic(leading_dim=0), from_dlpack(b), from_dlpack(c))
            return c
        expect_error(self, ValueError, "mark_layout_dynamic's leading_dim 0 is not the last mode", ko.record_plugin,
                     ko.cutedsl(not_last), op_name="kop_quack_cpu::not_last",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

    def test_a_stand_in_kept_by_a_cache_with_the_recordings_tensors_is_refused_later(self):
        import cutedsl_kernels as ck
        from cutlass.cute.runtime import from_dlpack
        kept = []

        def cached(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            ta, tb, tc = from_dlpack(a), from_dlpack(b), from_dlpack(c)
            kept.append(cute_compile(ck.vector_add_host, ta, tb, tc))  # a library's cache keeps it
            kept[-1](ta, tb, tc)
            return c
        import cutlass.cute as cute
        cute_compile = cute.compile
        ko.record_plugin(ko.cutedsl(cached), op_name="kop_quack_cpu::kept",
                         example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})
        expect_error(self, RuntimeError, "was compiled while kernelop recorded an op, with from_dlpack tensors",
                     kept[0], 1, 2, 3)

    def test_a_layout_that_can_never_hold_is_named(self):
        import cutlass.cute as cute
        import cutedsl_kernels as ck

        def static_unit_stride_elsewhere(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = torch.empty_like(a)
            f = [cute.runtime.make_fake_tensor(cutlass.Float32, (cute.sym_int(), 64), stride=(1, cute.sym_int64()))
                 for _ in range(3)]
            cute.compile(ck.vector_add_host, *f)(a, b, c)
            return c

        expect_error(self, ValueError, "never true of the tensors the op passes", ko.record_plugin,
                     ko.cutedsl(static_unit_stride_elsewhere), op_name="kop_quack_cpu::column_major",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})


class DeviceCapability(unittest.TestCase):
    """Host code deciding on the device's compute capability (QuACK's get_sm_count: props.major >= 10), decided for
    the architectures the op compiles for (kernelop._recording.sizes.Capability)."""

    def setUp(self):
        if not HAVE_CUTE:
            self.skipTest("nvidia-cutlass-dsl is not installed")

    def launch(self, threshold):
        import cutedsl_kernels as ck

        def vector_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            props = torch.cuda.get_device_properties(a.device)
            if props.major >= threshold:  # a decision the host code makes for the device
                return ck.vector_add(a, b)
            return ck.vector_add(b, a)
        return vector_add

    def test_a_decision_every_architecture_makes_alike_is_recorded(self):
        ex = {"a": torch.empty(8, 64), "b": torch.empty(8, 64)}
        r = ko.record_plugin(ko.cutedsl(self.launch(10), arch=["sm_80", "sm_90a"]), op_name="kop_quack_cpu::cap",
                             example_inputs=ex)
        self.assertEqual(r.doc["kernel_name"], "vector_add_host")
        # decided for sm_80 and sm_90a: compiled for those only
        expect_error(self, ValueError, "launch_fn decided on the device's compute capability for sm_80, sm_90a, as "
                     "it was recorded; compiling it for sm_100a would run those decisions there", r.compile,
                     ["sm_90a", "sm_100a"])

    def test_a_decision_the_architectures_split_on_is_refused_naming_them(self):
        ex = {"a": torch.empty(8, 64), "b": torch.empty(8, 64)}
        expect_error(self, ValueError, "launch_fn decides 'device major >= 9' on the host, which the architectures "
                     "the op compiles for (sm_80, sm_90a) decide differently; record one op per architecture",
                     ko.record_plugin, ko.cutedsl(self.launch(9), arch=["sm_80", "sm_90a"]),
                     op_name="kop_quack_cpu::cap_split", example_inputs=ex)
        r = ko.record_plugin(ko.cutedsl(self.launch(9), arch="sm_90a"), op_name="kop_quack_cpu::cap_one",
                             example_inputs=ex)
        self.assertEqual(r.doc["kernel_name"], "vector_add_host")

    def test_computing_with_a_capability_the_architectures_split_on_is_refused(self):
        import cutedsl_kernels as ck

        def computes(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            props = torch.cuda.get_device_properties(a.device)
            if props.major * 10 + props.minor >= 90:  # sm_80 and sm_90a disagree; the lowest must not stand in
                return ck.vector_add(a, b)
            return ck.vector_add(b, a)
        expect_error(self, ValueError, "launch_fn computes with (mul) the device's major on the host, which the "
                     "architectures the op compiles for (sm_80, sm_90a) have as 8, 9", ko.record_plugin,
                     ko.cutedsl(computes, arch=["sm_80", "sm_90a"]), op_name="kop_quack_cpu::cap_math",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})

        def formats(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            props = torch.cuda.get_device_properties(a.device)
            try:
                arch = "sm_%d%d" % (props.major, props.minor)
            except ValueError:  # a library's fallback for an unknown device must not take the refusal for one
                arch = "sm_0"
            return ck.vector_add(a, b) if arch else ck.vector_add(b, a)
        expect_error(self, ValueError, "launch_fn computes with (int) the device's major", ko.record_plugin,
                     ko.cutedsl(formats, arch=["sm_80", "sm_90a"]), op_name="kop_quack_cpu::cap_format",
                     example_inputs={"a": torch.empty(8, 64), "b": torch.empty(8, 64)})


class Packages(unittest.TestCase):
    def test_packages_load_where_neither_the_cute_dsl_nor_quack_can_be_imported(self):
        folder = temp_dir()
        for name, r in recorded().items():
            r.build_package(os.path.join(folder, f"kop_quack_cpu.{name}.kop"))
        out = run_python_refusing(["cutlass", "quack"], f"""
            import os, sys, torch, kernelop as ko
            sm = ko.load_package(os.path.join({folder!r}, "kop_quack_cpu.softmax.kop"))
            rms = ko.load_package(os.path.join({folder!r}, "kop_quack_cpu.rms_norm.kop"))
            x = torch.empty(5, 8192, dtype=torch.bfloat16, device="meta")
            w = torch.empty(8192, dtype=torch.bfloat16, device="meta")
            print(tuple(sm(x).shape), tuple(rms(x, w, 1e-5)[0].shape), sys.modules.get("cutlass"),
                  sys.modules.get("quack"))
        """)
        self.assertEqual(out.split(), ["(5,", "8192)", "(5,", "8192)", "None", "None"])


def _packaged():
    """The QuACK ops from the packages scripts/stage-gpu built on the CPU machine (or built here)."""
    return example_packages("kop_quack", ("softmax", "rms_norm", "softmax_wide"),
                            (lambda ns: quack_ops.recorded(ns)) if HAVE_QUACK else None)[0]


class Cuda(unittest.TestCase):
    ROWS = (1, 3, 100, 1000, 8192)

    def softmax_matches_torch(self, sm, n_values, rows):
        """Values and gradients of a softmax op against torch's, at each row length and row count."""
        for n in n_values:
            for m in rows:
                x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                y = sm(x)
                ref = torch.softmax(x.float(), 1)
                torch.testing.assert_close(y.float(), ref, atol=2e-3, rtol=2e-2, msg=lambda s: f"[{m}, {n}]: {s}")
                g = torch.randn_like(y)
                (dx,) = torch.autograd.grad(y, x, g)
                (ref_dx,) = torch.autograd.grad(ref, x, g.float())
                torch.testing.assert_close(dx.float(), ref_dx.float(), atol=2e-3, rtol=2e-2,
                                           msg=lambda s: f"grad [{m}, {n}]: {s}")

    def test_softmax_values_and_gradients_match_torch(self):
        self.softmax_matches_torch(_packaged()["softmax"], quack_ops.N_VALUES, self.ROWS)

    def test_rms_norm_values_and_gradients_match_torch(self):
        rms = _packaged()["rms_norm"]
        for n in quack_ops.N_VALUES:
            w = torch.randn(n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for m in self.ROWS:
                x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                y, rstd = rms(x, w, 1e-5)
                ref = torch.nn.functional.rms_norm(x.float(), (n,), w.float(), 1e-5)
                torch.testing.assert_close(y.float(), ref, atol=3e-2, rtol=2e-2, msg=lambda s: f"[{m}, {n}]: {s}")
                torch.testing.assert_close(rstd, torch.rsqrt(x.float().pow(2).mean(1) + 1e-5), atol=1e-3, rtol=1e-3)
                g = torch.randn_like(y)
                dx, dw = torch.autograd.grad(y, (x, w), g)
                ref_dx, ref_dw = torch.autograd.grad(ref, (x, w), g.float())
                torch.testing.assert_close(dx.float(), ref_dx.float(), atol=5e-2, rtol=3e-2,
                                           msg=lambda s: f"dx [{m}, {n}]: {s}")
                torch.testing.assert_close(dw.float(), ref_dw.float(), atol=0.5 + 0.01 * m ** 0.5, rtol=3e-2,
                                           msg=lambda s: f"dw [{m}, {n}]: {s}")

    def test_wide_rows_in_thread_block_clusters_match_torch(self):
        sm = _packaged()["softmax_wide"]
        self.softmax_matches_torch(sm, quack_ops.WIDE_N_VALUES, (1, 3, 100, 1000))
        x = torch.randn(64, 32768, device="cuda", dtype=torch.bfloat16)
        out = replay_with_new_input(sm, x)  # a cluster launch in a CUDA graph
        torch.testing.assert_close(out.float(), torch.softmax(x.float(), 1), atol=2e-3, rtol=2e-2)

    def test_other_sizes_and_misaligned_inputs_are_refused(self):
        ops = _packaged()
        expect_error(self, RuntimeError, "!= 0", ops["softmax"],
                     torch.randn(4, 2048, device="cuda", dtype=torch.bfloat16))
        x = torch.randn(4 * 4096 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(4, 4096)  # 2-byte offset
        expect_error(self, RuntimeError, "aligned(x, 16)", ops["softmax"], x)

    def test_cuda_graph_replay_compile_and_opcheck(self):
        ops = _packaged()
        sm, rms = ops["softmax"], ops["rms_norm"]
        x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        sm(x)
        out = replay_with_new_input(sm, x)
        torch.testing.assert_close(out.float(), torch.softmax(x.float(), 1), atol=2e-3, rtol=2e-2)
        f = torch.compile(lambda a, b: rms(sm(a), b, 1e-5)[0] * 2, fullgraph=True, dynamic=True)
        for m in (7, 300):
            a = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
            ref = torch.nn.functional.rms_norm(torch.softmax(a.float(), 1), (4096,), w.float(), 1e-5) * 2
            torch.testing.assert_close(f(a, w).float(), ref, atol=6e-2, rtol=3e-2)
        torch.library.opcheck(sm.default, (x,))
        torch.library.opcheck(rms.default, (x, w, 1e-5))


if __name__ == "__main__":
    run_tests(cpu=[Recording, CompiledOutsideARecording, Refusals, DeviceCapability, Packages], gpu=[Cuda], cuda=CUDA)
