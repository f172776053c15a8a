"""The override path of cuda_kernel_op / ptx_op (meta_fn, eager_fn, schema), as in the reference:
registration, schemas given / derived / inferred, fake kernels, errors and rollback (CPU); eager
launches through kernelop.kernel(...).launch, the derived launch shaped by meta_fn, opcheck,
torch.compile and CUDA graphs (GPU, skipped without one)."""

import pathlib
import shutil
import subprocess
import os
import unittest
import warnings

import torch

import kernelop as ko
from compile_counter import counting_inductor
from kernelop_testing import run_tests

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
ARCHS = ["sm_80", "sm_90", "compute_90"]
CUDA = torch.cuda.is_available()
REPEAT2 = (EXAMPLES / "repeat2.cu").read_text()
RELU = (EXAMPLES / "relu.cu").read_text()


def repeat2_meta(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], x.shape[1] * 2)


def repeat2_transposed_meta(x: torch.Tensor) -> torch.Tensor:
    """repeat2's output as a transposed view: strides kernelop's launch does not write."""
    return x.new_empty(x.shape[:-1] + (x.shape[-1] * 2,)).transpose(0, -1)


def repeat2_eager(x: torch.Tensor) -> torch.Tensor:
    y = x.new_empty(x.shape[0], x.shape[1] * 2)
    n = y.numel()
    ko.kernel("kop_ov::repeat2").launch((n + 127) // 128, 128, (x.contiguous(), x.shape[1], n, y))
    return y


def repeat2_spec(**fields):
    base = dict(kernel_source=REPEAT2, kernel_name="repeat2", inputs=[ko.InputDecl("x", torch.float32)])
    base.update(fields)
    return ko.KernelSpec(**base)


def relu_spec(**fields):
    base = dict(kernel_source=RELU, kernel_name="relu", inputs=[ko.InputDecl("x", torch.float32)],
                outputs=[ko.OutputDecl("y", ko.SameAs("x"))], extras=[ko.Numel("x")], geometry=ko.Elementwise())
    base.update(fields)
    return ko.KernelSpec(**base)


def relu_eager(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    ko.kernel("kop_ov::relu_eager").launch((x.numel() + 255) // 256, 256, (x.contiguous(), x.numel(), y))
    return y


def register_all():
    ops = {}
    # Everything from the caller: only the kernel source and the input list in the spec.
    ops["repeat2"] = ko.cuda_kernel_op("kop_ov::repeat2", repeat2_spec(), meta_fn=repeat2_meta,
                                       eager_fn=repeat2_eager, archs=ARCHS)
    # meta_fn only: no outputs in the spec; kernelop's launch allocates what meta_fn returns.
    ops["repeat2_meta"] = ko.cuda_kernel_op(
        "kop_ov::repeat2_meta", repeat2_spec(extras=[ko.DimSize("x", 1), ko.Numel("out0")],
                                             geometry=ko.Elementwise(block=(128,))),
        meta_fn=repeat2_meta, archs=ARCHS)
    # eager_fn only: no geometry; kernelop derives the schema and the (SymInt) Meta kernel.
    ops["relu_eager"] = ko.cuda_kernel_op("kop_ov::relu_eager", relu_spec(geometry=None), eager_fn=relu_eager,
                                          archs=ARCHS)
    # schema given with a declarative spec: used as is (its names), checked against the spec.
    ops["relu_schema"] = ko.cuda_kernel_op("kop_ov::relu_schema", relu_spec(), schema="(Tensor input) -> Tensor",
                                           archs=ARCHS)
    return ops


OPS = register_all()


def _ptx_of(path):
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = shutil.which("nvcc") or os.path.join(home, "bin", "nvcc")
    if not os.path.exists(nvcc):
        return None
    return subprocess.run([nvcc, "-ptx", "-arch=compute_80", "-o", "-", str(path)], capture_output=True, text=True,
                          check=True).stdout


class OverrideRegistration(unittest.TestCase):
    def test_schemas_given_derived_inferred(self):
        self.assertEqual(str(OPS["repeat2"].default._schema), "kop_ov::repeat2(Tensor x) -> Tensor")  # meta_fn hints
        self.assertEqual(str(OPS["repeat2_meta"].default._schema), "kop_ov::repeat2_meta(Tensor x) -> Tensor")
        self.assertEqual(str(OPS["relu_eager"].default._schema), "kop_ov::relu_eager(Tensor x) -> Tensor")
        self.assertEqual(str(OPS["relu_schema"].default._schema), "kop_ov::relu_schema(Tensor input) -> Tensor")

    def test_which_kernels_are_whose(self):
        has = torch._C._dispatch_has_kernel_for_dispatch_key
        # The caller's meta_fn is the Meta kernel; kernelop's C++ CUDA kernel stays (no eager_fn).
        self.assertTrue(has("kop_ov::repeat2_meta", "Meta"))
        self.assertTrue(has("kop_ov::repeat2_meta", "CUDA"))
        self.assertTrue(has("kop_ov::relu_eager", "Meta"))
        self.assertTrue(has("kop_ov::relu_eager", "CUDA"))

    def test_a_meta_fn_that_traces_to_expressions_becomes_declarative(self):
        # repeat2_meta's meta_fn is x.new_empty(x.shape[0], x.shape[1] * 2): traced at ranks 2 and 3 on symbolic
        # sizes, it is [dim(x, 0), dim(x, 1) * 2] both times, so the op gets kernelop's C++ Meta kernel.
        self.assertTrue(ko.kernel("kop_ov::repeat2_meta").declarative)
        self.assertFalse(ko.kernel("kop_ov::repeat2").declarative)  # eager_fn: the caller's launch
        spec = repeat2_spec(extras=[ko.DimSize("x", 1), ko.Numel("out0")], geometry=ko.Elementwise(block=(128,)))

        def by_rank(x: torch.Tensor) -> torch.Tensor:
            return x.new_empty(x.shape[:-1] + (x.shape[-1] * 2,))
        with self.assertWarnsRegex(UserWarning, r"meta_fn stays a Python fake kernel .*depend on the inputs' rank"):
            op = ko.cuda_kernel_op("kop_ov::repeat2_by_rank", spec, meta_fn=by_rank, archs=ARCHS)
        self.assertFalse(ko.kernel("kop_ov::repeat2_by_rank").declarative)
        self.assertEqual(op(torch.empty(3, 5, device="meta")).shape, (3, 10))

        # A meta_fn whose output is not contiguous: kernelop writes outputs contiguous, so it is not declared (the
        # fake tensor would not be the real one) and, as a Python fake kernel, the CUDA kernel refuses it by name.
        with self.assertWarnsRegex(UserWarning, r"meta_fn stays a Python fake kernel .*: output 0 has strides "
                                   r"\(1, .*\), not contiguous; kernelop allocates outputs contiguous"):
            ko.cuda_kernel_op("kop_ov::repeat2_transposed", spec, meta_fn=repeat2_transposed_meta, archs=ARCHS)
        self.assertFalse(ko.kernel("kop_ov::repeat2_transposed").declarative)

        # An output whose dtype is its own (float32 from any input dtype) is declared so, not copied from x.
        up = ko.cuda_kernel_op("kop_ov::up", ko.KernelSpec(
            kernel_source='#include <cuda_fp16.h>\nextern "C" __global__ void up(const __half* x, int n, float* y) '
                          '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = __half2float(x[i]); }',
            kernel_name="up", inputs=[ko.InputDecl("x")], extras=[ko.Numel("x")], geometry=ko.Elementwise()),
            meta_fn=lambda x: x.new_empty(x.shape, dtype=torch.float32), archs=ARCHS)
        self.assertTrue(ko.kernel("kop_ov::up").declarative)
        self.assertEqual(up(torch.empty(3, dtype=torch.float16, device="meta")).dtype, torch.float32)

        def data_dependent(x: torch.Tensor) -> torch.Tensor:
            return x.new_empty(x.shape[0], int(x.sum().item()))
        with self.assertWarnsRegex(UserWarning, "meta_fn stays a Python fake kernel .*raised"):
            ko.cuda_kernel_op("kop_ov::repeat2_data", spec, meta_fn=data_dependent, archs=ARCHS)
        self.assertFalse(ko.kernel("kop_ov::repeat2_data").declarative)

    def test_meta_fn_is_the_fake_kernel(self):
        m = torch.empty(3, 5, device="meta")
        self.assertEqual(OPS["repeat2"](m).shape, (3, 10))
        self.assertEqual(OPS["repeat2_meta"](m).shape, (3, 10))
        self.assertEqual(OPS["relu_eager"](m).shape, (3, 5))  # kernelop's C++ Meta kernel

    def test_parameters_of_the_compiled_kernel(self):
        # The output meta_fn shapes takes its dtype from the kernel's signature.
        self.assertEqual(ko.kernel("kop_ov::repeat2_meta").parameters,
                         ["const float* x", "int dim(x, 1)", "int numel(out0)", "float* out0"])
        # With eager_fn and no outputs the convention is the kernel's own parameter list.
        self.assertEqual(ko.kernel("kop_ov::repeat2").parameters,
                         ["const float* param0", "int param1", "int param2", "float* param3"])

    def test_export_with_fake_inputs_uses_meta_fn(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return OPS["repeat2_meta"](torch.relu(x)) + 1

        x = torch.empty(4, 6, device="meta")
        ep = torch.export.export(M(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("b"), 1: torch.export.Dim("c")}})
        self.assertIn("kop_ov.repeat2_meta", str(ep.graph))

    def test_identical_registration_is_a_no_op_and_other_functions_conflict(self):
        again = ko.cuda_kernel_op("kop_ov::repeat2", repeat2_spec(), meta_fn=repeat2_meta, eager_fn=repeat2_eager,
                                  archs=ARCHS)
        self.assertIs(again, OPS["repeat2"])
        with self.assertRaisesRegex(ValueError, "already registered by kernelop as 'kop_ov::repeat2\\(Tensor x\\)"):
            ko.cuda_kernel_op("kop_ov::repeat2", repeat2_spec(), meta_fn=lambda x: x, eager_fn=repeat2_eager,
                              schema="(Tensor x) -> Tensor", archs=ARCHS)
        # Only the function differs: the C++ registry's identity includes the caller's functions.
        def other_meta(x: torch.Tensor) -> torch.Tensor:
            return repeat2_meta(x)

        with self.assertRaisesRegex(ValueError, "different spec, schema, functions or build options"):
            ko.cuda_kernel_op("kop_ov::repeat2", repeat2_spec(), meta_fn=other_meta, eager_fn=repeat2_eager,
                              archs=ARCHS)
        with self.assertRaisesRegex(ValueError, "different spec, schema, functions or build options"):
            ko.cuda_kernel_op("kop_ov::repeat2", repeat2_spec(), meta_fn=repeat2_meta, eager_fn=repeat2_eager,
                              archs=["compute_80"])
        self.assertIs(ko.cuda_kernel_op("kop_ov::repeat2", repeat2_spec(), meta_fn=repeat2_meta,
                                        eager_fn=repeat2_eager, archs=ARCHS), OPS["repeat2"])

    def test_missing_fields_need_their_function(self):
        cases = [
            (dict(geometry=ko.Elementwise()), {}, "outputs: missing; required unless meta_fn is given"),
            (dict(outputs=[ko.OutputDecl("y", ["dim(x, 0)", "dim(x, 1) * 2"])]), {},
             "geometry: missing; required unless eager_fn is given"),
            (dict(inputs=None), dict(meta_fn=repeat2_meta),
             "inputs: missing; required unless both meta_fn and eager_fn are given"),
            (dict(inputs=None, extras=[ko.Numel("x")]), dict(meta_fn=repeat2_meta, eager_fn=repeat2_eager),
             "inputs: missing, so 'extras' cannot be used"),
        ]
        for i, (fields, fns, message) in enumerate(cases):
            with self.subTest(message), self.assertRaisesRegex(ValueError, message):
                ko.cuda_kernel_op(f"kop_ov::missing{i}", repeat2_spec(**fields), archs=ARCHS, **fns)
            self.assertFalse(ko._kernelop_torch.is_registered(f"kop_ov::missing{i}"))

    def test_bad_functions_and_schemas(self):
        with self.assertRaisesRegex(TypeError, "meta_fn must be callable, got int"):
            ko.cuda_kernel_op("kop_ov::bad1", repeat2_spec(), meta_fn=3, eager_fn=repeat2_eager)
        with self.assertRaisesRegex(ValueError, "cannot infer the schema from meta_fn's type hints"):
            ko.cuda_kernel_op("kop_ov::bad2", repeat2_spec(), meta_fn=lambda x: x, eager_fn=repeat2_eager)
        with self.assertRaisesRegex(ValueError, "schema '\\(Tensor a, Tensor b\\) -> Tensor' does not match the spec, "
                                                "which derives '\\(Tensor x\\) -> Tensor': it has 2 argument"):
            ko.cuda_kernel_op("kop_ov::bad3", relu_spec(), schema="(Tensor a, Tensor b) -> Tensor", archs=ARCHS)
        with self.assertRaisesRegex(ValueError, "argument 0 \\('x'\\) is 'float' where the spec has tensor input"):
            ko.cuda_kernel_op("kop_ov::bad4", relu_spec(), schema="(float x) -> Tensor", archs=ARCHS)
        with self.assertRaisesRegex(ValueError, "returns 'List\\[Tensor\\]'; kernelop's derived launch"):
            ko.cuda_kernel_op("kop_ov::bad5", repeat2_spec(geometry=ko.Elementwise(over="x")), meta_fn=repeat2_meta,
                              schema="(Tensor x) -> Tensor[]")
        with self.assertRaisesRegex(ValueError, "is not a valid PyTorch schema"):
            ko.cuda_kernel_op("kop_ov::bad6", relu_spec(), schema="(Tensor x -> Tensor", archs=ARCHS)
        with self.assertRaisesRegex(NotImplementedError, "aot_fn configure the TensorRT engine path"):
            ko.cuda_kernel_op("kop_ov::bad7", relu_spec(), aot_fn=lambda *a: None)
        for i in range(1, 8):
            self.assertFalse(ko._kernelop_torch.is_registered(f"kop_ov::bad{i}"))
            self.assertFalse(hasattr(torch.ops.kop_ov, f"bad{i}"))

    def test_failure_after_the_cpp_registration_leaves_nothing(self):
        real = torch.library.register_fake

        def failing(*args, **kwargs):
            raise RuntimeError("injected failure")

        torch.library.register_fake = failing
        try:
            with self.assertRaisesRegex(RuntimeError, "injected failure"):
                ko.cuda_kernel_op("kop_ov::rollback", repeat2_spec(), meta_fn=repeat2_meta, eager_fn=repeat2_eager)
        finally:
            torch.library.register_fake = real
        self.assertFalse(ko._kernelop_torch.is_registered("kop_ov::rollback"))
        # No schema and no kernel; only the name's anchor stays (Note [operator anchors] in torch_ops.cpp).
        with self.assertRaisesRegex(RuntimeError, "Could not find schema for kop_ov::rollback"):
            torch._C._dispatch_find_schema_or_throw("kop_ov::rollback", "")
        for key in ("CPU", "CUDA", "Meta", "Autograd"):
            self.assertFalse(torch._C._dispatch_has_kernel_for_dispatch_key("kop_ov::rollback", key), key)
        with self.assertRaises(AttributeError):
            torch.ops.kop_ov.rollback.default
        op = ko.cuda_kernel_op("kop_ov::rollback", repeat2_spec(), meta_fn=repeat2_meta, eager_fn=repeat2_eager)
        self.assertEqual(op(torch.empty(2, 3, device="meta")).shape, (2, 6))  # a retry succeeds

    def test_failure_after_the_fake_registration_leaves_nothing(self):
        # register_fake succeeds, then the CUDA impl fails: the fake kernel must go too, or the
        # retry would find "already has a fake impl".
        real = torch.library.Library.impl

        def failing(self, name, fn, dispatch_key="", *args, **kwargs):
            if dispatch_key == "CUDA":  # eager_fn's kernel; register_fake's own impl goes through
                raise RuntimeError("injected impl failure")
            return real(self, name, fn, dispatch_key, *args, **kwargs)

        torch.library.Library.impl = failing
        try:
            with self.assertRaisesRegex(RuntimeError, "injected impl failure") as caught:
                ko.cuda_kernel_op("kop_ov::rollback2", repeat2_spec(), meta_fn=repeat2_meta, eager_fn=repeat2_eager)
        finally:
            torch.library.Library.impl = real
        # The exception is still held here (as a user's handler would hold it); its note says where
        # the failure was raised.
        self.assertIn("kernelop rolled back the registration of kop_ov::rollback2", caught.exception.__notes__[0])
        self.assertIn("in failing", caught.exception.__notes__[0])
        self.assertFalse(ko._kernelop_torch.is_registered("kop_ov::rollback2"))
        with self.assertRaises(AttributeError):
            torch.ops.kop_ov.rollback2.default
        op = ko.cuda_kernel_op("kop_ov::rollback2", repeat2_spec(), meta_fn=repeat2_meta, eager_fn=repeat2_eager)
        self.assertEqual(op(torch.empty(2, 3, device="meta")).shape, (2, 6))

    def test_packages_hold_declarative_ops_only(self):
        with self.assertRaisesRegex(ValueError, "geometry: missing"):
            ko.build_package("kop_ov::pkg", relu_spec(geometry=None), "/nonexistent/x.kop")

    def test_kernel_launch_checks_before_the_gpu(self):
        k = ko.kernel("kop_ov::repeat2")
        with self.assertRaisesRegex(TypeError, "kernel argument 0 is a str"):
            k.launch(1, 1, ("x",))
        with self.assertRaisesRegex(RuntimeError, "kernel argument 0 is on cpu"):
            k.launch(1, 1, (torch.ones(2),))
        with self.assertRaisesRegex(ValueError, "no op kop_ov::nothing was registered through kernelop"):
            ko.kernel("kop_ov::nothing")


def relu_ptx_eager(x):
    y = torch.empty_like(x)
    ko.kernel("kop_ov::relu_ptx").launch((x.numel() + 255) // 256, 256, (x, x.numel(), y))
    return y


def relu_ptx_meta(x):
    return torch.empty_like(x)


def register_relu_ptx():
    """ptx_op as the reference calls it: PTX, its entry, meta_fn and eager_fn; None without nvcc."""
    ptx = _ptx_of(EXAMPLES / "relu.cu")
    if not ptx:
        return None, None
    return ptx, ko.ptx_op("kop_ov::relu_ptx", ptx, "relu", relu_ptx_meta, relu_ptx_eager,
                          schema="(Tensor x) -> Tensor")


class OverridePtx(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ptx, cls.op = register_relu_ptx()

    def setUp(self):
        if not self.ptx:
            self.skipTest("no nvcc to make PTX with")

    def test_functions_only_like_the_reference(self):
        self.assertEqual(str(self.op.default._schema), "kop_ov::relu_ptx(Tensor x) -> Tensor")
        # Without a spec the .entry's parameters are the argument list: 64-bit params are pointers.
        self.assertEqual(ko.kernel("kop_ov::relu_ptx").parameters, ["?* param0", "int param1", "?* param2"])
        self.assertEqual(self.op(torch.empty(7, device="meta")).shape, (7,))

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "give a declarative spec=KernelSpec\\(...\\), or both meta_fn and "
                                                "eager_fn"):
            ko.ptx_op("kop_ov::relu_ptx2", self.ptx, "relu", lambda x: x)
        with self.assertRaisesRegex(TypeError, "pass the KernelSpec as spec="):
            ko.ptx_op("kop_ov::relu_ptx3", self.ptx, "relu", relu_spec())
        with self.assertRaisesRegex(NotImplementedError, "aot_fn configure the TensorRT"):
            ko.ptx_op("kop_ov::relu_ptx4", self.ptx, "relu", lambda x: x, relu_ptx_eager, lambda *a: None)


@unittest.skipUnless(CUDA, "no CUDA device")
class OverrideCuda(unittest.TestCase):
    def test_eager_results(self):
        x = torch.randn(37, 301, device="cuda")
        twice = torch.cat([x, x], 1)
        torch.testing.assert_close(OPS["repeat2"](x), twice, rtol=0, atol=0)
        torch.testing.assert_close(OPS["repeat2_meta"](x), twice, rtol=0, atol=0)
        torch.testing.assert_close(OPS["repeat2_meta"](x.t().contiguous().t()), twice, rtol=0, atol=0)
        torch.testing.assert_close(OPS["relu_eager"](x), torch.relu(x), rtol=0, atol=0)
        torch.testing.assert_close(OPS["relu_schema"](x), torch.relu(x), rtol=0, atol=0)
        self.assertEqual(OPS["repeat2_meta"](torch.empty(0, 4, device="cuda")).shape, (0, 8))

    def test_a_meta_fn_with_strides_the_kernel_does_not_write_is_refused(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # meta_fn stays a Python fake kernel: the CPU tests check the warning
            op = ko.cuda_kernel_op("kop_ov::repeat2_transposed_gpu", repeat2_spec(
                extras=[ko.DimSize("x", 1), ko.Numel("out0")], geometry=ko.Elementwise(block=(128,))),
                meta_fn=repeat2_transposed_meta, archs=ARCHS)
        with self.assertRaisesRegex(RuntimeError, r"op kop_ov::repeat2_transposed_gpu: its meta_fn returned output 0 "
                                    r"\('out0'\) with strides \[1, 8\]; kernelop allocates outputs contiguous"):
            op(torch.randn(3, 4, device="cuda"))

    def test_ptx_functions_only(self):
        ptx, op = register_relu_ptx()
        if not ptx:
            self.skipTest("no nvcc to make PTX with")
        x = torch.randn(5000, device="cuda")
        torch.testing.assert_close(op(x), torch.relu(x), rtol=0, atol=0)
        with self.assertRaisesRegex(TypeError, "argument 1 \\('param1', int\\) must be an int, got float"):
            ko.kernel("kop_ov::relu_ptx").launch(1, 32, (x, 1.5, x))

    def test_opcheck(self):
        x = torch.randn(33, 65, device="cuda")
        for name in ("repeat2", "repeat2_meta", "relu_eager", "relu_schema"):
            with self.subTest(name):
                torch.library.opcheck(OPS[name].default, (x,))

    def test_compile_fullgraph_dynamic_without_recompiling(self):
        torch._dynamo.reset()
        backend, counts = counting_inductor()

        def model(x):
            return OPS["relu_eager"](OPS["repeat2_meta"](x) - 0.5) + OPS["repeat2"](x)

        compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
        for shape in [(8, 16), (9, 33), (130, 7)]:
            x = torch.randn(*shape, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-6, atol=1e-6)
        self.assertEqual(counts["n"], 1, "compiled once, no recompilation across sizes")

    def test_cuda_graph_capture_of_the_meta_shaped_launch(self):
        x = torch.randn(64, 48, device="cuda")
        y = OPS["repeat2_meta"](x)  # warm-up loads the module outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = OPS["repeat2_meta"](x)
        x.copy_(torch.randn(64, 48, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, torch.cat([x, x], 1), rtol=0, atol=0)

    def test_cuda_graph_capture_of_an_eager_fn(self):
        x = torch.randn(64, 48, device="cuda")
        y = OPS["repeat2"](x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # Kernel.launch uses the capturing stream (PyTorch's current one)
            y = OPS["repeat2"](x)
        x.copy_(torch.randn(64, 48, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, torch.cat([x, x], 1), rtol=0, atol=0)

    @unittest.skipUnless(CUDA and torch.cuda.device_count() > 1, "needs two CUDA devices")
    def test_second_device(self):
        x = torch.randn(100, 7, device="cuda:1")
        for name in ("repeat2", "repeat2_meta"):
            with self.subTest(name):
                y = OPS[name](x)
                self.assertEqual(y.device, torch.device("cuda:1"))
                torch.testing.assert_close(y, torch.cat([x, x], 1), rtol=0, atol=0)
        y = torch.empty(100, 14, device="cuda:0")
        with self.assertRaisesRegex(RuntimeError, "argument 3 \\('out0', float\\*\\) is on device 0 but an earlier "
                                                  "tensor is on device 1"):
            ko.kernel("kop_ov::repeat2_meta").launch(1, 32, (x, 7, 1400, y))

    def test_kernel_launch_errors(self):
        k = ko.kernel("kop_ov::repeat2_meta")
        x = torch.randn(4, 4, device="cuda")
        y = torch.empty(4, 8, device="cuda")
        with self.assertRaisesRegex(TypeError, "the kernel takes 4 argument\\(s\\) \\(const float\\* x, int dim\\(x, 1\\), "
                                               "int numel\\(out0\\), float\\* out0\\), got 2"):
            k.launch(1, 32, (x, 4))
        with self.assertRaisesRegex(TypeError, "argument 0 \\('x', const float\\*\\) must be float32, got float16"):
            k.launch(1, 32, (x.half(), 4, 32, y))
        with self.assertRaisesRegex(TypeError, "argument 1 \\('dim\\(x, 1\\)', int\\) must be an int, got float"):
            k.launch(1, 32, (x, 4.0, 32, y))
        with self.assertRaisesRegex(RuntimeError, "argument 2 \\('numel\\(out0\\)', int\\) = 4294967296 does not fit"):
            k.launch(1, 32, (x, 4, 2 ** 32, y))
        with self.assertRaisesRegex(RuntimeError, "argument 3 \\('out0', float\\*\\) is not contiguous"):
            k.launch(1, 32, (x, 4, 32, y.t()))
        with self.assertRaisesRegex(RuntimeError, "block x = 2048; CUDA allows 1..1024"):
            k.launch(1, 2048, (x, 4, 32, y))
        k.launch(1, 32, (x, 4, 32, y))
        torch.testing.assert_close(y, torch.cat([x, x], 1), rtol=0, atol=0)


if __name__ == "__main__":
    run_tests(cpu=[OverrideRegistration, OverridePtx], gpu=[OverrideCuda], cuda=CUDA)
