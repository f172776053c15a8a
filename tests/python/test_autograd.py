"""Autograd: specs that declare their backward kernel (docs/autograd.md).

CPU: the DSL's Backward against the JSON examples, registration of the backward chain from C++, autograd on meta
tensors (saved tensors, non-differentiable outputs, double backward, no_grad), nothing left registered after a
failure, and the reference's Python backward (torch.library.register_autograd) on the override path.
GPU: gradcheck and gradgradcheck in float64 for every example, float32 results against PyTorch, opcheck with inputs
that require grad, a small model trained eager and under torch.compile(fullgraph=True, dynamic=True) with equal
losses and gradients and one compilation across sizes, and torch.export of the inference graph.
"""

import json
import math
import os
import pathlib
import unittest

import torch

import kernelop as ko
from kernelop import _kernelop, _kernelop_torch
from compile_counter import counting_inductor
from expect import expect_error
from isolated import run_python_without
from kernelop_testing import run_tests, temp_dir

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "autograd"
CUDA = torch.cuda.is_available()
ARCHS = None if CUDA else ["sm_80"]  # without a GPU: compile one architecture, it is only registered
_ops = {}


def ops():
    examples = ("sigmoid", "softmax", "rms_norm", "scale_cols")
    for name in examples:
        if name not in _ops:
            _ops[name] = ko.register_spec_file(str(EXAMPLES / f"{name}.json"), archs=ARCHS)
    return {name: _ops[name] for name in examples}


TWO_OUTPUTS = r"""
__global__ void scale2(const float* x, float s, int n, float* a, float* b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { a[i] = x[i] * s; b[i] = x[i] * 2.0f * s; }
}
__global__ void scale2_backward(float s, const float* grad_a, const float* grad_b, int n, float* grad_x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) grad_x[i] = s * grad_a[i] + 2.0f * s * grad_b[i];
}
"""


def two_outputs_op():
    """(a, b) = (x * s, 2 * x * s): a backward that reads a saved scalar and the gradients of two outputs, of which
    a loss may use one (the other's gradient is then zeros)."""
    if "scale2" not in _ops:
        flat = ko.Elementwise(block=[128], layout="flat")
        spec = ko.KernelSpec(
            kernel_source=TWO_OUTPUTS, kernel_name="scale2",
            inputs=[ko.InputDecl("x", "float32"), ko.ScalarInput("s", float)],
            outputs=[ko.OutputDecl("a", ko.SameAs("x")), ko.OutputDecl("b", ko.SameAs("x"))],
            extras=[ko.Numel("x")], geometry=flat,
            backward=ko.Backward(["x"], ko.KernelSpec(
                kernel_source=TWO_OUTPUTS, kernel_name="scale2_backward",
                inputs=[ko.ScalarInput("s", float), ko.InputDecl("grad_a"), ko.InputDecl("grad_b")],
                outputs=[ko.OutputDecl("grad_x", ko.SameAs("grad_a"))], extras=[ko.Numel("grad_a")],
                geometry=flat)))
        _ops["scale2"] = ko.cuda_kernel_op("kop_ag_two::scale2", spec, archs=ARCHS)
    return _ops["scale2"]


def sigmoid_spec():
    """The sigmoid example in the Python DSL."""
    src = (EXAMPLES / "sigmoid.cu").read_text()
    def flat(t):  # 256 threads of 2 vectors of 16 bytes each (examples/autograd/common.cuh)
        return ko.Custom(grid=[f"cdiv(numel({t}), 256 * 2 * (16 // itemsize({t})))"], block=[256])
    return ko.KernelSpec(
        kernel_source=src, kernel_name="sigmoid_forward<T>", type_params={"T": ["float32", "float64"]},
        inputs=[ko.InputDecl("x", "T")], outputs=[ko.OutputDecl("y", ko.SameAs("x"))], extras=[ko.Numel("x")],
        geometry=flat("x"),
        backward=ko.Backward(["x"], ko.KernelSpec(
            kernel_source=src, kernel_name="sigmoid_backward<T>",
            inputs=[ko.InputDecl("y"), ko.InputDecl("grad_y")], outputs=[ko.OutputDecl("grad_x", ko.SameAs("y"))],
            extras=[ko.Numel("y")], geometry=flat("y"),
            backward=ko.Backward(["y", "grad_y"], from_={"g": "grad_y"}, spec=ko.KernelSpec(
                kernel_source=src, kernel_name="sigmoid_double_backward<T>",
                inputs=[ko.InputDecl("y"), ko.InputDecl("g"), ko.InputDecl("grad_grad_x")],
                outputs=[ko.OutputDecl("grad_y", ko.SameAs("y")), ko.OutputDecl("grad_grad_y", ko.SameAs("y"))],
                extras=[ko.Numel("y")], geometry=flat("y"))))))


class Spec(unittest.TestCase):
    def test_the_dsl_and_json_map_one_to_one(self):
        def inline(doc):
            if "source_file" in doc:
                doc["kernel_source"] = (EXAMPLES / doc.pop("source_file")).read_text()
            if "backward" in doc:
                inline(doc["backward"])
            return doc

        want = inline(json.loads((EXAMPLES / "sigmoid.json").read_text()))
        got = sigmoid_spec().to_json("kernelop_autograd::sigmoid")

        def normalised(doc):  # the DSL writes defaults the file leaves out
            doc = json.loads(json.dumps(doc))
            for d in [doc, doc["backward"], doc["backward"]["backward"]]:
                d["geometry"]["custom"].setdefault("shared_mem", 0)
                for o in d["outputs"]:
                    o["shape"] = {"same_as": o["shape"]["same_as"]}
                d["inputs"] = [{k: v for k, v in i.items() if v is not None} for i in d["inputs"]]
            return doc

        self.assertEqual(normalised(got), normalised(want))
        self.assertEqual(_kernelop.check_spec(json.dumps(got), ".", _kernelop.Overrides()),
                         "kernelop_autograd::sigmoid(Tensor x) -> Tensor")

    def test_backward_rules_are_checked_before_anything_is_registered(self):
        spec = sigmoid_spec()
        spec.backward.differentiable = ["x", "q"]
        expect_error(self, ValueError, "backward.differentiable[1]: 'q' is not a tensor input", ko.cuda_kernel_op,
                     "kop_ag_bad::sigmoid", spec, archs=ARCHS or ["sm_80"], base_dir=str(EXAMPLES))
        self.assertFalse(_kernelop_torch.is_registered("kop_ag_bad::sigmoid"))
        self.assertFalse(_kernelop_torch.is_registered("kop_ag_bad::sigmoid_backward"))

    def test_a_backward_that_fails_to_compile_registers_nothing(self):
        spec = sigmoid_spec()
        spec.backward.spec.kernel_name = "no_such_kernel<T>"
        expect_error(self, RuntimeError, "kop_ag_nc::sigmoid_backward", ko.cuda_kernel_op, "kop_ag_nc::sigmoid",
                     spec, archs=["sm_80"], base_dir=str(EXAMPLES))
        for name in ("kop_ag_nc::sigmoid", "kop_ag_nc::sigmoid_backward", "kop_ag_nc::sigmoid_backward_backward"):
            self.assertFalse(_kernelop_torch.is_registered(name), name)

    def test_a_backward_in_use_cannot_be_unregistered(self):
        ops()
        expect_error(self, ValueError, "op kernelop_autograd::sigmoid_backward is the backward of "
                     "kernelop_autograd::sigmoid, which is registered: unregister kernelop_autograd::sigmoid first",
                     _kernelop_torch.unregister, "kernelop_autograd::sigmoid_backward")
        self.assertTrue(_kernelop_torch.is_registered("kernelop_autograd::sigmoid_backward"))

    def test_a_forward_pytorch_refuses_takes_its_backward_chain_with_it(self):
        lib = torch.library.Library("kop_ag_clash", "DEF")
        lib.define("sigmoid(Tensor x, int n) -> Tensor")
        expect_error(self, ValueError, "PyTorch refused the registration", ko.cuda_kernel_op,
                     "kop_ag_clash::sigmoid", sigmoid_spec(), archs=["sm_80"], base_dir=str(EXAMPLES))
        for name in ("kop_ag_clash::sigmoid_backward", "kop_ag_clash::sigmoid_backward_backward"):
            self.assertFalse(_kernelop_torch.is_registered(name), name)
        del lib


def packaged(name):
    """The example's package: built on the CPU machine (KERNELOP_CPU_PACKAGES), else here."""
    packages = os.environ.get("KERNELOP_CPU_PACKAGES")
    path = os.path.join(packages or "", f"kernelop_autograd.{name}.kop")
    if not packages or not os.path.exists(path):
        path = os.path.join(temp_dir(), f"kernelop_autograd.{name}.kop")
        ko.build_package_file(str(EXAMPLES / f"{name}.json"), path, archs=["sm_80", "compute_80"])
    return path


class Packages(unittest.TestCase):
    def test_a_package_carries_the_backward_chain_and_loads_for_training(self):
        path = packaged("sigmoid")
        with open(path, "rb") as f:
            self.assertEqual(f.read(9)[8], 4)
        out = run_python_without("kernelop_nothing", f"""
            import torch, kernelop as ko
            op = ko.load_package({path!r})
            x = torch.empty(3, 5, device="meta", dtype=torch.float64, requires_grad=True)
            y = op(x)
            g = torch.empty_like(y, requires_grad=True)
            (gx,) = torch.autograd.grad(y, x, g, create_graph=True)
            print(gx.grad_fn.name(), [t.shape for t in torch.autograd.grad(gx.sum(), [x, g])])
            print(torch.ops.kernelop_autograd.sigmoid_backward_backward.default._schema)
        """)
        self.assertEqual(out.split("\n")[:2], [
            "kernelop_autograd::sigmoid_backwardBackward [torch.Size([3, 5]), torch.Size([3, 5])]",
            "kernelop_autograd::sigmoid_backward_backward(Tensor y, Tensor g, Tensor grad_grad_x) -> (Tensor, Tensor)"])


class SeveralLaunchesBackward(unittest.TestCase):
    """A backward of two launches and per-SM scratch (examples/autograd/scale_cols.json, Note [several
    launches]): the scratch is not a gradient, nor in the backward's schema; the package carries the backward's
    launches (its backward section is a format-5 package) and trains where kernelop's compiler is absent."""

    def test_the_scratch_is_the_backwards_own(self):
        o = ops()
        self.assertEqual(str(torch.ops.kernelop_autograd.scale_cols_backward.default._schema),
                         "kernelop_autograd::scale_cols_backward(Tensor x, Tensor w, Tensor grad_y) -> (Tensor, Tensor)")
        x = torch.empty(7, 5, device="meta", dtype=torch.float64, requires_grad=True)
        w = torch.empty(5, device="meta", dtype=torch.float64, requires_grad=True)
        gx, gw = torch.autograd.grad(o["scale_cols"](x, w).sum(), [x, w])
        self.assertEqual((gx.shape, gw.shape, gw.dtype), (x.shape, w.shape, torch.float64))

    def test_a_gradient_must_not_be_scratch(self):
        spec = json.loads((EXAMPLES / "scale_cols.json").read_text())
        spec["op"] = "kop_autograd_bad::scale_cols"
        spec["backward"]["outputs"] = [spec["backward"]["outputs"][0],
                                       dict(spec["backward"]["outputs"][1], scratch=True),
                                       spec["backward"]["outputs"][2]]
        d = pathlib.Path(temp_dir(test=self))
        (d / "bad.json").write_text(json.dumps(spec))
        (d / "scale_cols.cu").write_text((EXAMPLES / "scale_cols.cu").read_text())
        with self.assertRaisesRegex(ValueError, "op kop_autograd_bad::scale_cols: backward.outputs: has no "
                                    "'grad_w': every differentiable input gets its gradient"):
            ko.register_spec_file(str(d / "bad.json"), archs=["sm_80"])
        self.assertFalse(hasattr(torch.ops, "kop_autograd_bad") and
                         hasattr(torch.ops.kop_autograd_bad, "scale_cols"))

    def test_the_package_carries_the_backwards_launches(self):
        path = packaged("scale_cols")
        with open(path, "rb") as f:
            self.assertEqual(f.read(9)[8], 4)  # the forward's own part is format 4; its backward section is 5
        out = run_python_without("kernelop_nothing", f"""
            import torch, kernelop as ko
            op = ko.load_package({path!r})
            x = torch.empty(3, 5, device="meta", dtype=torch.float32, requires_grad=True)
            w = torch.empty(5, device="meta", dtype=torch.float32, requires_grad=True)
            print([tuple(g.shape) for g in torch.autograd.grad(op(x, w).sum(), [x, w])])
        """)
        self.assertEqual(out.strip(), "[(3, 5), (5,)]")


class MetaAutograd(unittest.TestCase):
    """The Autograd kernels on meta tensors: what is saved and returned, without a GPU."""

    def test_gradients_have_the_inputs_shapes_and_dtypes(self):
        o = ops()
        x = torch.empty(4, 300, device="meta", dtype=torch.float64, requires_grad=True)
        w = torch.empty(300, device="meta", dtype=torch.float64, requires_grad=True)
        for y in (o["sigmoid"](x), o["softmax"](x)):
            self.assertTrue(y.requires_grad)
            self.assertIn("Backward", y.grad_fn.name())
            (gx,) = torch.autograd.grad(y, x, torch.empty_like(y))
            self.assertEqual((gx.shape, gx.dtype), (x.shape, x.dtype))
        y, rstd = o["rms_norm"](x, w)
        self.assertTrue(y.requires_grad)
        self.assertFalse(rstd.requires_grad)  # the backward does not read grad_rstd
        gx, gw = torch.autograd.grad(y.sum(), [x, w])
        self.assertEqual((gx.shape, gw.shape), (x.shape, w.shape))
        # only some inputs require grad: gradients for those
        (gw,) = torch.autograd.grad(o["rms_norm"](x.detach(), w)[0].sum(), [w])
        self.assertEqual(gw.shape, w.shape)

    def test_a_saved_scalar_and_an_unused_outputs_gradient(self):
        op = two_outputs_op()
        x = torch.empty(5, 7, device="meta", requires_grad=True)
        a, b = op(x, 3.0)
        self.assertEqual(a.grad_fn, b.grad_fn)
        self.assertEqual(a.grad_fn.name(), "kop_ag_two::scale2Backward")
        for loss in (a.sum(), b.sum(), (a + b).sum()):  # b's gradient, then a's, is materialised as zeros
            (gx,) = torch.autograd.grad(loss, x, retain_graph=True)
            self.assertEqual((gx.shape, gx.dtype, gx.device.type), (x.shape, x.dtype, "meta"))

    def test_double_backward_goes_through_the_backward_ops_own_backward(self):
        sig = ops()["sigmoid"]
        x = torch.empty(8, 16, device="meta", dtype=torch.float64, requires_grad=True)
        y = sig(x)
        g = torch.empty_like(y, requires_grad=True)
        (gx,) = torch.autograd.grad(y, x, g, create_graph=True)
        self.assertEqual(gx.grad_fn.name(), "kernelop_autograd::sigmoid_backwardBackward")
        ggx, gg = torch.autograd.grad(gx.sum(), [x, g])
        self.assertEqual((ggx.shape, gg.shape), (x.shape, g.shape))
        # the softmax declares no double backward: saying so, not a wrong answer
        sm = ops()["softmax"]
        (gx,) = torch.autograd.grad(sm(x), x, torch.empty_like(x, requires_grad=True), create_graph=True)
        expect_error(self, RuntimeError, "op kernelop_autograd::softmax_backward is the backward of "
                     "kernelop_autograd::softmax and declares no backward of its own", torch.autograd.grad,
                     gx.sum(), x)

    def test_no_grad_and_inputs_without_grad_record_nothing(self):
        sig = ops()["sigmoid"]
        x = torch.empty(3, device="meta", requires_grad=True)
        with torch.no_grad():
            self.assertIsNone(sig(x).grad_fn)
        self.assertIsNone(sig(x.detach()).grad_fn)
        with torch.inference_mode():
            self.assertFalse(sig(torch.empty(3, device="meta")).requires_grad)

    def test_the_references_python_backward_still_works_on_the_override_path(self):
        src = (EXAMPLES / "sigmoid.cu").read_text()
        spec = ko.KernelSpec(kernel_source=src, kernel_name="sigmoid_forward<float>",
                             inputs=[ko.InputDecl("x", "float32")], outputs=[ko.OutputDecl("y", ko.SameAs("x"))],
                             extras=[ko.Numel("x")], geometry=ko.Elementwise(block=[256], layout="flat"))
        op = ko.cuda_kernel_op("kop_ag_py::sigmoid", spec, archs=ARCHS, base_dir=str(EXAMPLES))
        calls = []

        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        def backward(ctx, grad):
            calls.append(1)
            (y,) = ctx.saved_tensors
            return grad * y * (1 - y)

        torch.library.register_autograd("kop_ag_py::sigmoid", backward, setup_context=setup_context)
        x = torch.empty(5, device="meta", requires_grad=True)
        op(x).sum().backward()
        self.assertEqual((calls, x.grad.shape), ([1], x.shape))


@unittest.skipUnless(CUDA, "no CUDA device")
class Cuda(unittest.TestCase):
    def test_gradcheck_and_gradgradcheck_in_float64(self):
        o = ops()
        x = torch.randn(7, 33, device="cuda", dtype=torch.float64, requires_grad=True)
        w = torch.randn(33, device="cuda", dtype=torch.float64, requires_grad=True)
        self.assertTrue(torch.autograd.gradcheck(o["sigmoid"], (x,)))
        self.assertTrue(torch.autograd.gradgradcheck(o["sigmoid"], (x,)))
        self.assertTrue(torch.autograd.gradcheck(o["softmax"], (x,)))
        self.assertTrue(torch.autograd.gradcheck(lambda a, b: o["rms_norm"](a, b, 1e-5)[0], (x, w)))
        for rows in (1, 3, 200, 1000):  # fewer rows than SMs (blocks with none write zeros), and more
            a = torch.randn(rows, 37, device="cuda", dtype=torch.float64, requires_grad=True)
            b = torch.randn(37, device="cuda", dtype=torch.float64, requires_grad=True)
            self.assertTrue(torch.autograd.gradcheck(o["scale_cols"], (a, b), fast_mode=rows > 3))
        wide = torch.randn(3, 700, device="cuda", dtype=torch.float64, requires_grad=True)  # several column blocks
        self.assertTrue(torch.autograd.gradcheck(lambda a, b: o["rms_norm"](a, b, 1e-5)[0],
                                                 (wide, torch.randn(700, device="cuda", dtype=torch.float64,
                                                                    requires_grad=True)), fast_mode=True))

    def test_every_path_of_the_vectorised_kernels_against_pytorch(self):
        """The examples load 16 bytes at a time where they can (common.cuh): a corpus of sizes around the vector
        width, the unrolled step, the registers a row fits in and the weight gradient's tiles, with aligned and
        misaligned inputs (a view one element in), in float32 and float64, against PyTorch."""
        o = ops()

        def tensor(shape, dtype, offset, grad=True):
            n = math.prod(shape)
            t = torch.randn(n + offset, device="cuda", dtype=dtype)[offset:].view(shape)
            return t.requires_grad_(grad)

        def close(a, b, what, dtype):
            tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
            torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{what}: {m}")

        for dtype in (torch.float32, torch.float64):
            for offset in (0, 1):
                for n in (1, 3, 4, 5, 7, 8, 2047, 2048, 2049, 3 * 2048 + 5, 70001):
                    x, g = tensor((n,), dtype, offset), tensor((n,), dtype, offset, grad=False)
                    what = f"sigmoid {dtype} n={n} offset={offset}"
                    y = o["sigmoid"](x)
                    close(y, torch.sigmoid(x), what, dtype)
                    (gx,) = torch.autograd.grad(y, x, g, create_graph=True)
                    (want,) = torch.autograd.grad(torch.sigmoid(x), x, g, create_graph=True)
                    close(gx, want, what + " backward", dtype)
                    gg = tensor((n,), dtype, offset, grad=False)
                    close(torch.autograd.grad(gx, x, gg)[0], torch.autograd.grad(want, x, gg)[0],
                          what + " double backward", dtype)
                for rows, cols in ((1, 1), (3, 5), (2, 4), (0, 8), (5, 4096), (3, 4097), (2, 5000), (700, 33),
                                   (1000, 64), (129, 2048), (7, 2052)):
                    x, g = tensor((rows, cols), dtype, offset), tensor((rows, cols), dtype, offset, grad=False)
                    w = tensor((cols,), dtype, offset)
                    what = f"rms_norm {dtype} {rows}x{cols} offset={offset}"
                    y, rstd = o["rms_norm"](x, w, 1e-6)
                    ref = torch.nn.functional.rms_norm(x, (cols,), w, 1e-6)
                    close(y, ref, what, dtype)
                    close(rstd, torch.rsqrt(x.pow(2).mean(-1) + 1e-6), what + " rstd", dtype)
                    got, want = torch.autograd.grad(y, [x, w], g), torch.autograd.grad(ref, [x, w], g)
                    close(got[0], want[0], what + " grad_x", dtype)
                    # a sum over the rows: its rounding grows with their number
                    torch.testing.assert_close(got[1], want[1], rtol=1e-4 if dtype == torch.float32 else 1e-10,
                                               atol=(1e-4 if dtype == torch.float32 else 1e-10) * max(rows, 1),
                                               msg=lambda m: f"{what} grad_weight: {m}")

    def test_a_saved_scalar_and_an_unused_outputs_gradient_on_the_gpu(self):
        op = two_outputs_op()
        x = torch.randn(5, 300, device="cuda", requires_grad=True)
        a, b = op(x, 3.0)
        for loss, want in ((a.sum(), 3.0), (b.sum(), 6.0), ((a + b).sum(), 9.0), ((2 * a - b).sum(), 0.0)):
            (gx,) = torch.autograd.grad(loss, x, retain_graph=True)
            torch.testing.assert_close(gx, torch.full_like(x, want))
        (gx,) = torch.autograd.grad(op(x, -0.5)[0].sum(), x)  # the scalar of this call, not of another
        torch.testing.assert_close(gx, torch.full_like(x, -0.5))

    def test_float32_results_against_pytorch(self):
        o = ops()
        for shape in ((1, 1), (37, 1001), (4, 4096)):
            x = torch.randn(shape, device="cuda", requires_grad=True)
            w = torch.randn(shape[-1], device="cuda", requires_grad=True)
            g = torch.randn(shape, device="cuda")
            for name, ref in (("sigmoid", torch.sigmoid), ("softmax", lambda t: torch.softmax(t, -1))):
                y = o[name](x)
                torch.testing.assert_close(y, ref(x))
                (gx,) = torch.autograd.grad(y, x, g)
                (want,) = torch.autograd.grad(ref(x), x, g)
                torch.testing.assert_close(gx, want, msg=lambda m: f"{name} {shape}: {m}")
            y, rstd = o["rms_norm"](x, w, 1e-6)
            ref = torch.nn.functional.rms_norm(x, (shape[-1],), w, 1e-6)
            torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(-1) + 1e-6), rtol=1e-4, atol=1e-5)
            got = torch.autograd.grad(y, [x, w], g)
            want = torch.autograd.grad(ref, [x, w], g)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)

    def test_opcheck_with_inputs_that_require_grad(self):
        o = ops()
        x = torch.randn(6, 40, device="cuda", dtype=torch.float64, requires_grad=True)
        w = torch.randn(40, device="cuda", dtype=torch.float64, requires_grad=True)
        torch.library.opcheck(o["sigmoid"].default, (x,))
        torch.library.opcheck(o["softmax"].default, (x,))
        torch.library.opcheck(o["rms_norm"].default, (x, w, 1e-5))

    def test_training_eager_and_compiled_agree_with_one_compilation(self):
        o = ops()

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.up = torch.nn.Linear(64, 128)
                self.norm = torch.nn.Parameter(torch.ones(128))
                self.down = torch.nn.Linear(128, 10)

            def forward(self, x):
                h = o["sigmoid"](self.up(x))
                h, _ = o["rms_norm"](h, self.norm, 1e-5)
                return o["softmax"](self.down(h))

        def train(model, compiled, sizes):
            step = torch.compile(model, fullgraph=True, dynamic=True, backend=compiled) if compiled else model
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            losses = []
            for n in sizes:
                gen = torch.Generator(device="cuda").manual_seed(n)
                x = torch.randn(n, 64, device="cuda", generator=gen)
                target = torch.randint(0, 10, (n,), device="cuda", generator=gen)
                loss = torch.nn.functional.nll_loss(torch.log(step(x) + 1e-9), target)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            return losses, [p.detach().clone() for p in model.parameters()]

        torch.manual_seed(0)
        eager_model = Model().cuda()
        compiled_model = Model().cuda()
        compiled_model.load_state_dict(eager_model.state_dict())
        sizes = [8, 13, 32, 57]
        backend, counts = counting_inductor()
        eager_losses, eager_params = train(eager_model, None, sizes)
        compiled_losses, compiled_params = train(compiled_model, backend, sizes)
        torch.testing.assert_close(compiled_losses, eager_losses, rtol=1e-4, atol=1e-5)
        for a, b in zip(compiled_params, eager_params):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        self.assertEqual(counts["n"], 1)

    def test_packages_built_without_a_gpu_train(self):
        out = run_python_without("kernelop_nothing", f"""
            import torch, kernelop as ko
            ops = [ko.load_package(p) for p in {[packaged(n) for n in ("sigmoid", "softmax", "rms_norm",
                                                                        "scale_cols")]!r}]
            x = torch.randn(5, 40, device="cuda", dtype=torch.float64, requires_grad=True)
            w = torch.randn(40, device="cuda", dtype=torch.float64, requires_grad=True)
            print(torch.autograd.gradcheck(ops[0], (x,)), torch.autograd.gradgradcheck(ops[0], (x,)),
                  torch.autograd.gradcheck(ops[1], (x,)),
                  torch.autograd.gradcheck(lambda a, b: ops[2](a, b, 1e-5)[0], (x, w)),
                  torch.autograd.gradcheck(ops[3], (x, w)))
        """)
        self.assertEqual(out.split(), ["True", "True", "True", "True", "True"])

    def test_export_of_the_inference_graph(self):
        o = ops()

        class M(torch.nn.Module):
            def forward(self, x, w):
                return o["softmax"](o["rms_norm"](o["sigmoid"](x), w)[0])

        x, w = torch.randn(5, 64, device="cuda"), torch.randn(64, device="cuda")
        ep = torch.export.export(M(), (x, w))
        self.assertIn("kernelop_autograd.rms_norm", str(ep.graph))
        torch.testing.assert_close(ep.module()(x, w), M()(x, w))


if __name__ == "__main__":
    run_tests(cpu=[Spec, Packages, SeveralLaunchesBackward, MetaAutograd], gpu=[Cuda], cuda=CUDA)
