"""kernelop ops in JAX (kernelop.jax): the same specs and .kop packages as XLA FFI custom calls.

CPU (jax[cpu]): loading specs, packages and KernelSpecs; result shapes from the spec's expressions with int and
symbolic sizes (jax.eval_shape, jax.export shape polymorphism); requirements checked at trace time where the sizes
tell; the lowering (the custom call, its target, the op and build attributes, static scalars, aliases of written
inputs); export and deserialization; every refusal with the op's name; kernelop.jax imports no torch.
GPU: values against jax.numpy under jit, vmap, written inputs in place, several results, export round trip in a
fresh process that loaded only the package, XLA command buffers on.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # subprocesses share the GPU with this one

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.test_util  # noqa: E402,F401 - check_grads
import numpy as np  # noqa: E402

import kernelop as ko  # noqa: E402
import kernelop.jax as kj  # noqa: E402
from expect import expect_error  # noqa: E402
from isolated import run_python, run_python_refusing  # noqa: E402
from kernelop_testing import run_tests  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
CUDA = ko._kernelop.cuda_available() and any(d.platform == "gpu" for d in jax.devices())
TARGET = kj._ext.targets()
_ops = {}


def example(name, **kwargs):
    """The op of examples/<name>.json, loaded once per process."""
    if name not in _ops:
        _ops[name] = kj.op(EXAMPLES / f"{name}.json", **kwargs)
    return _ops[name]


def installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is not installed
        return False


def sds(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def lowered_text(fun, *args):
    return kj.export(jax.jit(fun), platforms=["cuda"])(*args).mlir_module()


class Loading(unittest.TestCase):
    def test_a_spec_file_a_package_and_a_kernel_spec(self):
        relu = example("relu")
        self.assertEqual(relu.info["schema"], "kernelop_examples::relu(Tensor x) -> Tensor")
        self.assertEqual(relu.info["target"], f"kernelop_v1_ffi{kj._ext.FFI_API_VERSION.replace('.', '_')}")
        self.assertEqual(relu.info["allocates"], "")
        self.assertEqual(sorted(TARGET), sorted([relu.info["target"], relu.info["target"] + "_alloc"]))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "scale.kop")
            text = (EXAMPLES / "scale.json").read_text()
            ko._kernelop.build_package(text.replace("kernelop_examples::scale", "kop_jax_pkg::scale"), str(EXAMPLES),
                                       ["sm_80", "compute_80"], path)
            scale = kj.op(path)
            self.assertEqual(scale.info["schema"], "kop_jax_pkg::scale(Tensor x, float alpha) -> Tensor")
            self.assertEqual(kj.op(path).info["fingerprint"], scale.info["fingerprint"])  # the same build again
        spec = ko.KernelSpec(kernel_source=(EXAMPLES / "relu.cu").read_text(), kernel_name="relu",
                             inputs=[ko.InputDecl("x", "float32")], outputs=[ko.OutputDecl("y", ko.SameAs("x"))],
                             extras=[ko.Numel("x")], geometry=ko.Elementwise(block=(256,), layout="flat"))
        mine = kj.op(spec, op_name="kop_jax_spec::relu")
        self.assertEqual(mine.result_shapes(sds(7, 3)), [sds(7, 3)])

    def test_an_op_that_allocates_gets_the_other_target(self):
        colsum = example("colsum")
        self.assertEqual(colsum.info["target"], example("relu").info["target"] + "_alloc")
        self.assertEqual(colsum.info["allocates"], "it allocates scratch 'part' per call")

    def test_refusals_name_what_was_wrong(self):
        expect_error(self, FileNotFoundError, "does not exist", kj.op, EXAMPLES / "no_such.json")
        expect_error(self, ValueError, "vmap_method must be one of sequential, sequential_unrolled, expand_dims, "
                     "broadcast_all, got 'batch'", kj.op, EXAMPLES / "relu.json", vmap_method="batch")
        expect_error(self, TypeError, "a KernelSpec needs op_name", kj.op, ko.KernelSpec(kernel_source="",
                                                                                         kernel_name="k"))
        expect_error(self, TypeError, "op_name is for a KernelSpec", kj.op, EXAMPLES / "relu.json", op_name="a::b")
        expect_error(self, TypeError, "source must be a .kop package, a JSON spec file or a KernelSpec, got int",
                     kj.op, 3)
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.kop")
            with open(bad, "wb") as f:
                f.write(b"not a package")
            expect_error(self, RuntimeError, "not a kernelop package", kj.op, bad)
            # Another build under a name already loaded: refused, the first stays.
            doc = json.loads((EXAMPLES / "relu.json").read_text())
            doc["kernel_source"] = (EXAMPLES / "relu.cu").read_text()
            doc.pop("source_file", None)
            doc["geometry"]["elementwise"]["block"] = [128]  # another launch: another build
            other = os.path.join(d, "relu.json")
            with open(other, "w") as f:
                json.dump(doc, f)
            expect_error(self, ValueError, "op kernelop_examples::relu is already loaded for JAX from another build",
                         kj.op, other)
            doc["geometry"]["elementwise"]["block"] = [256]  # the same machine code, another requirement
            doc["requires"] = ["numel(x) > 100"]
            with open(other, "w") as f:
                json.dump(doc, f)
            expect_error(self, ValueError, "op kernelop_examples::relu is already loaded for JAX from another build",
                         kj.op, other)
        self.assertEqual(example("relu").result_shapes(sds(4)), [sds(4)])


class Shapes(unittest.TestCase):
    def test_result_shapes_from_the_spec_with_int_sizes(self):
        self.assertEqual(jax.eval_shape(example("repeat2"), sds(3, 5)), sds(3, 10))
        self.assertEqual(jax.eval_shape(example("rowsum"), sds(4, 6, 7)), sds(4, 6))
        self.assertEqual(jax.eval_shape(example("rowsum_keepdim"), sds(4, 7)), sds(4, 1))
        self.assertEqual(jax.eval_shape(example("sin_cos"), sds(9)), (sds(9), sds(9)))
        self.assertEqual(jax.eval_shape(example("gemm_tiled"), sds(64, 32), sds(32, 48)), sds(64, 48))
        self.assertEqual(jax.eval_shape(lambda x: example("scale")(x, 2.0), sds(5)), sds(5))

    def test_symbolic_sizes(self):
        b, n = jax.export.symbolic_shape("b, n")
        self.assertEqual(jax.eval_shape(example("repeat2"), sds(b, n)), sds(b, 2 * n))
        self.assertEqual(jax.eval_shape(example("rowsum"), sds(b, n)), sds(b))
        out = jax.eval_shape(example("gemm_tiled"), sds(b, n), sds(n, 16))
        self.assertEqual(out, sds(b, 16))
        # A requirement JAX cannot decide for every b and n is left to the launch.
        jax.eval_shape(example("add"), sds(b, n), sds(b, n))

    def test_symbolic_result_shapes_agree_with_int_ones_over_a_corpus(self):
        # Differential: one trace with symbolic sizes, evaluated at random sizes, against a trace at those sizes.
        cases = [("repeat2", ["b n"]), ("rowsum", ["b m n"]), ("rowsum_keepdim", ["b n"]), ("sin_cos", ["n"]),
                 ("gemm_tiled", ["m k", "k n"]), ("bias_add_2d", ["b m n", "n"]), ("relu", ["a b"]),
                 ("softmax", ["b n"]), ("colsum", ["m n"]), ("add", ["n", "n"]), ("cluster_rowsum", ["b m n"])]
        rng = np.random.default_rng(7)
        for name, shapes in cases:
            names = sorted({d for s in shapes for d in s.split()})
            syms = dict(zip(names, jax.export.symbolic_shape(", ".join(names))))
            symbolic = jax.tree.leaves(jax.eval_shape(example(name), *[sds(*[syms[d] for d in s.split()])
                                                                     for s in shapes]))
            for _ in range(25):
                env = {d: int(rng.integers(1, 3000)) for d in names}
                ints = jax.tree.leaves(jax.eval_shape(example(name), *[sds(*[env[d] for d in s.split()])
                                                                     for s in shapes]))
                self.assertEqual([tuple(d if isinstance(d, int) else d._evaluate(env) for d in r.shape)
                                  for r in symbolic], [r.shape for r in ints], f"{name} at {env}")
                self.assertEqual([r.dtype for r in symbolic], [r.dtype for r in ints], name)

    def test_requirements_and_checks_at_trace_time(self):
        expect_error(self, RuntimeError, "op kernelop_examples::add: the inputs break the requirement "
                     "'numel(b) == numel(a)': 4 == 3 is false", jax.eval_shape, example("add"), sds(3), sds(4))
        expect_error(self, RuntimeError, "op kernelop_examples::gemm_tiled: the inputs break the requirement",
                     jax.eval_shape, example("gemm_tiled"), sds(64, 32), sds(16, 48))
        b = jax.export.symbolic_shape("b")[0]  # symbolic, but the broken part is not
        expect_error(self, RuntimeError, "op kernelop_examples::gemm_tiled: the inputs break the requirement",
                     jax.eval_shape, example("gemm_tiled"), sds(b, 32), sds(16, 48))
        expect_error(self, TypeError, "op kernelop_examples::relu: input 'x' must be float32", jax.eval_shape,
                     example("relu"), sds(4, dtype=jnp.int32))
        expect_error(self, TypeError, "op kernelop_examples::relu: input 'x' is an array of complex64, a dtype "
                     "kernelop does not take", jax.eval_shape, example("relu"), sds(4, dtype=jnp.complex64))
        expect_error(self, RuntimeError, "op kernelop_examples::gemm_tiled: input 'a' has rank 1 (shape [4]) but "
                     "extra 2 'dim(a, 1)' needs rank >= 2", jax.eval_shape, example("gemm_tiled"), sds(4), sds(4, 4))
        # JAX makes int64 arrays int32 unless x64 is on: the message says so.
        expect_error(self, TypeError, "op kernelop_examples::cache_scatter: input 'index' must be int64 (kernel "
                     "parameter 1 is const long long*), got int32 (JAX makes 64-bit arrays 32-bit unless "
                     "jax_enable_x64 is on)", jax.eval_shape, example("cache_scatter"), sds(16, 8),
                     sds(4, dtype=jnp.int64), sds(4, 8))

    def test_arguments_are_bound_as_declared(self):
        scale = example("scale")
        self.assertEqual(jax.eval_shape(lambda x: scale(x, alpha=3.0), sds(2)), sds(2))
        expect_error(self, TypeError, "op kernelop_examples::scale: missing input 'alpha'", jax.eval_shape, scale,
                     sds(2))
        expect_error(self, TypeError, "op kernelop_examples::scale: takes 2 input(s) (x, alpha), got 3", scale,
                     sds(2), 1.0, 2.0)
        expect_error(self, TypeError, "op kernelop_examples::scale: no input named 'beta'", scale, sds(2), beta=1.0)
        expect_error(self, TypeError, "op kernelop_examples::scale: input 'x' given twice", scale, sds(2), x=sds(2),
                     alpha=1.0)
        expect_error(self, TypeError, "op kernelop_examples::scale: scalar 'alpha' is static (an attribute of the "
                     "call): pass a Python number", jax.eval_shape, lambda x, a: scale(x, a), sds(2), sds())
        expect_error(self, TypeError, "scalar 'alpha' must be a float, got str", scale, sds(2), "1")
        expect_error(self, TypeError, "op kernelop_examples::scale: input 'x' must be an array, got float", scale,
                     1.0, 2.0)


class Lowering(unittest.TestCase):
    def test_the_custom_call_names_the_op_its_build_and_its_scalars(self):
        scale = example("scale")
        text = lowered_text(lambda x: scale(x, 0.5) + 1, sds(128))
        call = [line for line in text.splitlines() if f"@{scale.info['target']}(" in line]
        self.assertEqual(len(call), 1, text)
        self.assertIn('kernelop_op = "kernelop_examples::scale"', call[0])
        self.assertIn(f'kernelop_fingerprint = "{scale.info["fingerprint"]}"', call[0])
        self.assertIn("alpha = 5.000000e-01 : f64", call[0])

    def test_a_written_input_is_an_aliased_result(self):
        scatter = example("cache_scatter")
        self.assertEqual(scatter.info["schema"], "kernelop_examples::cache_scatter(Tensor(a!) cache, Tensor index, "
                         "Tensor values) -> ()")
        args = (sds(16, 8), sds(4, dtype=jnp.int64), sds(4, 8))
        with jax.enable_x64(True):
            self.assertEqual(jax.eval_shape(scatter, *args), sds(16, 8))  # the cache's new value
            text = lowered_text(scatter, *args)
        self.assertIn("output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], "
                      "operand_index = 0, operand_tuple_indices = []>]", text)

    def test_export_round_trip_with_symbolic_sizes(self):
        b, n = jax.export.symbolic_shape("b, n")
        exported = kj.export(jax.jit(example("repeat2")), platforms=["cuda"])(sds(b, n))
        back = jax.export.deserialize(exported.serialize())
        self.assertEqual(str(back.out_avals[0].shape), "(b, 2*n)")
        self.assertEqual(back.platforms, ("cuda",))

    @unittest.skipUnless(all(installed(m) for m in ("torch", "triton", "cutlass", "cuda.tile")),
                         "records with torch, Triton, the CuTe DSL and cuTile (the CPU machine has them)")
    def test_packages_of_every_front_end_without_torch_or_the_dsl(self):
        """Triton, CuTe DSL and cuTile ops recorded with torch (a subprocess here), then loaded by JAX in a process
        where torch and the DSLs cannot be imported: shapes, checks and the lowering."""
        with tempfile.TemporaryDirectory() as d:
            build = textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {str(EXAMPLES)!r})
                import triton_kernels, cutedsl_kernels, cutile_kernels
                triton_kernels.recorded("kop_jax_tt")["vector_add"].build_package({d!r} + "/tt.kop")
                triton_kernels.recorded("kop_jax_tt")["softmax"].build_package({d!r} + "/tt_softmax.kop")
                cutedsl_kernels.recorded("kop_jax_cute")["vector_add"].build_package({d!r} + "/cute.kop")
                cutile_kernels.recorded("kop_jax_ct")["scaled_add"].build_package({d!r} + "/ct.kop")
            """)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
            r = subprocess.run([sys.executable, "-c", build], capture_output=True, text=True, env=env, timeout=900)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            out = run_python_refusing(["torch", "triton", "cutlass", "cuda"], f"""
                import sys, jax, jax.numpy as jnp, kernelop.jax as kj
                sds = jax.ShapeDtypeStruct
                tt, sm = kj.op({d!r} + "/tt.kop"), kj.op({d!r} + "/tt_softmax.kop")
                cute, ct = kj.op({d!r} + "/cute.kop"), kj.op({d!r} + "/ct.kop")
                print(jax.eval_shape(tt, sds((1000,), jnp.float32), sds((1000,), jnp.float32)).shape)
                print(jax.eval_shape(sm, sds((7, 300), jnp.float32)).shape)
                print(jax.eval_shape(cute, sds((8, 64), jnp.float32), sds((8, 64), jnp.float32)).shape)
                print(jax.eval_shape(lambda a, b: ct(a, b, 0.5), sds((5000,), jnp.float32),
                                     sds((5000,), jnp.float32)).shape)
                text = kj.export(jax.jit(lambda a: ct(a, a, 2.0)), platforms=["cuda"])(
                    sds((4096,), jnp.float32)).mlir_module()
                print('kernelop_op = "kop_jax_ct::scaled_add"' in text, "alpha = 2.0" in text)
                print(tt.info["tactics"], [m for m in ("torch", "triton", "cutlass", "cuda.tile") if m in sys.modules])
            """)
            self.assertEqual(out.split("\n")[:6], ["(1000,)", "(7, 300)", "(8, 64)", "(5000,)", "True True",
                                                    "12 []"], out)

    def test_kernelop_jax_imports_no_torch(self):
        out = run_python_refusing(["torch", "triton", "cutlass"], f"""
            import sys, jax, kernelop.jax as kj
            relu = kj.op({str(EXAMPLES / "relu.json")!r})
            print(jax.eval_shape(relu, jax.ShapeDtypeStruct((3,), "float32")).shape, "torch" in sys.modules)
        """)
        self.assertEqual(out.split(), ["(3,)", "False"])


def autograd_example(name):
    return example(f"autograd/{name}")


# An op that writes its input (x *= 2) and returns y = x * x, whose backward reads x as the op left it.
WRITES_AND_SQUARES = {
    "op": "kop_jax_w::sqd", "kernel_name": "sqd",
    "kernel_source": "extern \"C\" __global__ void sqd(float* x, int n, float* y) {\n"
                     "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                     "  if (i < n) { float v = x[i]; y[i] = v * v; x[i] = 2 * v; }\n}\n",
    "inputs": [{"name": "x", "dtype": "float32", "mutated": True}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}],
    "geometry": {"elementwise": {"block": [256], "layout": "flat"}},
    "backward": {
        "differentiable": ["x"], "kernel_name": "sqd_bwd",
        "kernel_source": "extern \"C\" __global__ void sqd_bwd(const float* x, const float* g, int n, float* gx) {\n"
                         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  if (i < n) gx[i] = x[i] * g[i];  // d(v*v)/dv = 2v = the new x\n}\n",
        "inputs": [{"name": "x"}, {"name": "grad_y"}],
        "outputs": [{"name": "grad_x", "shape": {"same_as": "x"}}],
        "extras": [{"numel": "x"}],
        "geometry": {"elementwise": {"block": [256], "layout": "flat"}},
    },
}


def writes_and_squares():
    if "sqd" not in _ops:
        path = os.path.join(tempfile.mkdtemp(), "sqd.json")
        with open(path, "w") as f:
            json.dump(WRITES_AND_SQUARES, f)
        _ops["sqd"] = kj.op(path)
    return _ops["sqd"]


class Autograd(unittest.TestCase):
    def test_a_written_input_its_new_value_read_by_the_backward_and_no_gradient_of_its_own(self):
        sqd = writes_and_squares()
        self.assertEqual(sqd.vmap_method, "sequential")  # a written input: one call per batch element
        self.assertEqual(jax.eval_shape(sqd, sds(10)), (sds(10), sds(10)))  # y, then x's new value
        grad = jax.eval_shape(jax.grad(lambda x: sqd(x)[0].sum()), sds(10))
        self.assertEqual(grad, sds(10))
        expect_error(self, TypeError, "op kop_jax_w::sqd: wrote into its input 'x', whose new value has no gradient",
                     jax.eval_shape, jax.grad(lambda x: sqd(x)[1].sum()), sds(10))

    def test_an_output_returned_as_a_permutation(self):
        rows = kj.op(EXAMPLES.parent / "tests" / "c_api" / "rows_as_columns.json")
        self.assertEqual(jax.eval_shape(rows, sds(3, 5)), sds(5, 3))  # as PyTorch and the C ABI return it
        text = lowered_text(rows, sds(3, 5))
        self.assertIn("-> tensor<3x5xf32>", text)  # the kernel writes [3, 5]; the op returns its transpose
        self.assertIn("stablehlo.transpose", text)

    def test_symbolic_comparisons_jax_decides(self):
        b = jax.export.symbolic_shape("b")[0]
        # dim(x, 0) >= 1 holds for every b (JAX's dimensions are >= 1): rank checks and requirements pass.
        self.assertEqual(str(jax.eval_shape(example("softmax"), sds(b, 7)).shape), "(b, 7)")

    def test_a_backward_makes_a_custom_vjp_calling_the_backward_op(self):
        sigmoid = autograd_example("sigmoid")
        self.assertEqual(sigmoid.backward.name, "kernelop_autograd::sigmoid_backward")
        self.assertEqual(sigmoid.backward.backward.name, "kernelop_autograd::sigmoid_backward_backward")
        self.assertIsNone(example("relu").backward)
        text = lowered_text(jax.grad(lambda x: sigmoid(x).sum()), sds(100))
        self.assertIn('kernelop_op = "kernelop_autograd::sigmoid"', text)
        self.assertIn('kernelop_op = "kernelop_autograd::sigmoid_backward"', text)
        # The double backward: its own op, from the backward's backward.
        text = lowered_text(jax.grad(lambda x: jax.grad(lambda v: sigmoid(v).sum())(x).sum()), sds(100))
        self.assertIn('kernelop_op = "kernelop_autograd::sigmoid_backward_backward"', text)
        # Several inputs, a static scalar, a result the backward reads (rstd).
        rms = autograd_example("rms_norm")
        grads = jax.eval_shape(jax.grad(lambda x, w: rms(x, w, 1e-6)[0].sum(), argnums=(0, 1)), sds(8, 64),
                               sds(64))
        self.assertEqual(grads, (sds(8, 64), sds(64)))

    def test_vmap_method_per_op(self):
        self.assertEqual(example("relu").vmap_method, "broadcast_all")  # Elementwise, flat: a batch is more elements
        self.assertEqual(example("softmax").vmap_method, "sequential")
        self.assertEqual(example("gemm_tiled").vmap_method, "sequential")
        self.assertEqual(kj.op(EXAMPLES / "softmax.json", vmap_method="expand_dims").vmap_method, "expand_dims")
        b = jax.export.symbolic_shape("b")[0]
        self.assertEqual(jax.eval_shape(jax.vmap(example("rowsum")), sds(7, 3, 5)), sds(7, 3))
        self.assertEqual(str(jax.eval_shape(jax.vmap(example("repeat2")), sds(b, 3, 5)).shape), "(b, 3, 10)")


@unittest.skipUnless(CUDA, "no CUDA device for JAX")
class Cuda(unittest.TestCase):
    def test_a_written_input_differentiated(self):
        x = jax.random.normal(jax.random.PRNGKey(6), (1000,))
        y, new_x = jax.jit(writes_and_squares())(x)
        np.testing.assert_allclose(y, x * x, rtol=1e-6)
        np.testing.assert_allclose(new_x, 2 * x, rtol=1e-6)
        np.testing.assert_allclose(jax.jit(jax.grad(lambda v: writes_and_squares()(v)[0].sum()))(x), 2 * x,
                                   rtol=1e-6)

    def test_values_under_jit_against_jax_numpy(self):
        key = jax.random.PRNGKey(0)
        for n in (1, 1000, 1 << 20):
            x = jax.random.normal(key, (n,))
            np.testing.assert_allclose(jax.jit(example("relu"))(x), jnp.maximum(x, 0))
            np.testing.assert_allclose(jax.jit(lambda v: example("scale")(v, 0.5))(x), 0.5 * x, rtol=1e-6)
        x = jax.random.normal(key, (37, 1001))
        np.testing.assert_allclose(jax.jit(example("rowsum"))(x), x.sum(-1), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(jax.jit(example("softmax"))(x), jax.nn.softmax(x, -1), rtol=1e-5, atol=1e-6)
        s, c = jax.jit(example("sin_cos"))(x)
        np.testing.assert_allclose(s, jnp.sin(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, jnp.cos(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(example("colsum")(x), x.sum(0), rtol=1e-4, atol=1e-3)  # scratch: the other target

    def test_vmap_sequential_and_broadcast(self):
        x = jax.random.normal(jax.random.PRNGKey(1), (5, 300))
        np.testing.assert_allclose(jax.vmap(example("rowsum"))(x[:, None, :]), x.sum(-1)[:, None], rtol=1e-4,
                                   atol=1e-3)
        relu_b = kj.op(EXAMPLES / "relu.json", vmap_method="broadcast_all")
        np.testing.assert_allclose(jax.jit(jax.vmap(relu_b))(x), jnp.maximum(x, 0))

    def test_gradients_against_jax(self):
        key = jax.random.PRNGKey(2)
        x = jax.random.normal(key, (64, 300))
        w = jax.random.normal(jax.random.PRNGKey(3), (300,))
        sigmoid = autograd_example("sigmoid")
        np.testing.assert_allclose(jax.jit(jax.grad(lambda v: sigmoid(v).sum()))(x),
                                   jax.grad(lambda v: jax.nn.sigmoid(v).sum())(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(jax.grad(lambda v: jax.grad(lambda u: sigmoid(u).sum())(v).sum())(x),
                                   jax.grad(lambda v: jax.grad(lambda u: jax.nn.sigmoid(u).sum())(v).sum())(x),
                                   rtol=1e-4, atol=1e-5)
        rms = autograd_example("rms_norm")

        def rms_ref(v, weight, eps):
            return v * jax.lax.rsqrt(jnp.mean(v * v, -1, keepdims=True) + eps) * weight

        got = jax.jit(jax.grad(lambda v, weight: (rms(v, weight, 1e-6)[0] ** 2).sum(), argnums=(0, 1)))(x, w)
        want = jax.grad(lambda v, weight: (rms_ref(v, weight, 1e-6) ** 2).sum(), argnums=(0, 1))(x, w)
        for g, r in zip(got, want):
            np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-3)
        with jax.enable_x64(True):
            x64, w64 = x.astype(jnp.float64), w.astype(jnp.float64)
            jax.test_util.check_grads(lambda v, weight: autograd_example("scale_cols")(v, weight), (x64, w64),
                                      order=1, modes=["rev"])
            jax.test_util.check_grads(lambda v: autograd_example("softmax")(v), (x64,), order=1, modes=["rev"])

    def test_packages_of_every_front_end(self):
        """The packages built on the CPU machine (scripts/stage-gpu): CUDA C++ with its backward chain, Triton, CuTe
        DSL, cuTile and QuACK's CuTe DSL softmax, run by JAX against jax.numpy."""
        packages = os.environ.get("KERNELOP_CPU_PACKAGES", "")
        if not os.path.isdir(packages):
            self.skipTest("no packages from the CPU machine (KERNELOP_CPU_PACKAGES)")

        def load(name):
            return kj.op(os.path.join(packages, name + ".kop"))

        key1, key2 = jax.random.split(jax.random.PRNGKey(4))
        x, y = jax.random.normal(key1, (10007,)), jax.random.normal(key2, (10007,))
        np.testing.assert_allclose(jax.jit(load("kop_triton.vector_add"))(x, y), x + y, rtol=1e-6)
        np.testing.assert_allclose(jax.jit(lambda a, b: load("kop_cutile.scaled_add")(a, b, 0.5))(x, y), 0.5 * x + y,
                                   rtol=1e-6)
        m = jax.random.normal(key1, (37, 1000))
        np.testing.assert_allclose(jax.jit(load("kop_triton.softmax"))(m), jax.nn.softmax(m, -1), rtol=1e-5,
                                   atol=1e-6)
        a, b = m[:, :512], m[:, 488:]
        np.testing.assert_allclose(jax.jit(load("kop_cutedsl.vector_add"))(a, b), a + b, rtol=1e-6)
        q = jax.random.normal(key2, (64, 4096)).astype(jnp.bfloat16)
        np.testing.assert_allclose(np.asarray(jax.jit(load("kop_quack.softmax"))(q), dtype=np.float32),
                                   np.asarray(jax.nn.softmax(q.astype(jnp.float32), -1)), rtol=2e-2, atol=1e-3)
        # A package's backward chain (in a process of its own: this one loaded the spec's build of the op).
        out = run_python(f"""
            import os, jax, jax.numpy as jnp, numpy as np, kernelop.jax as kj
            sigmoid = kj.op(os.path.join({packages!r}, "kernelop_autograd.sigmoid.kop"))
            x = jax.random.normal(jax.random.PRNGKey(5), (10007,))
            got = jax.jit(jax.grad(lambda v: sigmoid(v).sum()))(x)
            print(float(jnp.abs(got - jax.grad(lambda v: jax.nn.sigmoid(v).sum())(x)).max()))
        """)
        self.assertLess(float(out), 1e-6)

    def test_one_package_run_by_jax_torch_and_a_c_program(self):
        """The scale example's package, built on the CPU machine: JAX and PyTorch (each in a process of its own) and
        the C ABI's test program (c_api_test, KERNELOP_C_API_TEST) run the same file."""
        packages = os.environ.get("KERNELOP_CPU_PACKAGES", "")
        c_program = os.environ.get("KERNELOP_C_API_TEST", "")
        if not os.path.isdir(packages) or not os.access(c_program, os.X_OK):
            self.skipTest("no packages from the CPU machine (KERNELOP_CPU_PACKAGES) or no c_api_test "
                          "(KERNELOP_C_API_TEST)")
        package = os.path.join(packages, "kernelop_examples.scale.kop")
        by_jax = run_python(f"""
            import jax, jax.numpy as jnp, kernelop.jax as kj
            scale = kj.op({package!r})
            x = jnp.arange(-500, 500, dtype=jnp.float32)
            print(float(jnp.abs(jax.jit(lambda v: scale(v, 2.5))(x) - 2.5 * x).max()))
        """)
        by_torch = run_python(f"""
            import torch, kernelop as ko
            scale = ko.load_package({package!r})
            x = torch.arange(-500, 500, dtype=torch.float32, device="cuda")
            print(float((scale(x, 2.5) - 2.5 * x).abs().max()))
        """)
        self.assertEqual((float(by_jax), float(by_torch)), (0.0, 0.0))
        r = subprocess.run([c_program, package, "gpu"], capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])

    @jax.enable_x64(True)
    def test_a_written_input_in_place(self):
        cache = jnp.zeros((16, 8), dtype=jnp.float32)
        index = jnp.array([3, 0, 15, 7], dtype=jnp.int64)
        values = jnp.arange(32, dtype=jnp.float32).reshape(4, 8)
        new = jax.jit(example("cache_scatter"))(cache, index, values)
        np.testing.assert_allclose(new, cache.at[index].set(values))
        np.testing.assert_allclose(cache, jnp.zeros((16, 8)))  # the caller's array is untouched

    def test_runtime_requirements_and_command_buffers(self):
        b, n = jax.export.symbolic_shape("b, n")
        exported = kj.export(jax.jit(example("add")), platforms=["cuda"])(sds(b, n), sds(b, n))
        x = jnp.ones((4, 5))
        np.testing.assert_allclose(exported.call(x, x), 2 * x)
        # A requirement JAX could not decide at trace time is the launch's: its message comes back from XLA.
        p, q = jax.export.symbolic_shape("p, q")
        exported = kj.export(jax.jit(example("add")), platforms=["cuda"])(sds(p), sds(q))
        np.testing.assert_allclose(exported.call(jnp.ones(6), jnp.ones(6)), 2 * jnp.ones(6))
        with self.assertRaisesRegex(Exception, r"op kernelop_examples::add: the inputs break the requirement "
                                               r"'numel\(b\) == numel\(a\)': 5 == 4 is false"):
            np.asarray(exported.call(jnp.ones(4), jnp.ones(5)))
        # Export with symbolic sizes, then run in a fresh process with XLA's command buffers on for custom calls (a
        # computation of 7 kernelop calls: over XLA's smallest graph); that process first loads another op only.
        with tempfile.TemporaryDirectory() as d:
            blob = os.path.join(d, "chain.jax")
            code = textwrap.dedent(f"""
                import os, sys
                os.environ["XLA_FLAGS"] = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL"
                import jax, jax.numpy as jnp, numpy as np
                import kernelop.jax as kj
                spec = lambda name: os.path.join({str(EXAMPLES)!r}, name + ".json")

                def chain(x):
                    y = x
                    for _ in range(6):
                        y = kj.op(spec("scale"))(y, 1.5)
                    return kj.op(spec("repeat2"))(y)

                if sys.argv[1] == "write":
                    b, n = jax.export.symbolic_shape("b, n")
                    exp = kj.export(jax.jit(chain), platforms=["cuda"])(jax.ShapeDtypeStruct((b, n), jnp.float32))
                    open({blob!r}, "wb").write(exp.serialize())
                else:
                    kj.op(spec("relu"))
                    exp = jax.export.deserialize(open({blob!r}, "rb").read())
                    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
                    try:
                        exp.call(x)
                        print("ran without the op")
                    except Exception as e:
                        print("refused:", "op kernelop_examples::scale is not loaded in this process" in str(e))
                    kj.op(spec("scale")), kj.op(spec("repeat2"))
                    call = jax.jit(exp.call)
                    for shape in ((3, 4), (5, 7)):
                        x = jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)
                        print(np.allclose(call(x), jnp.tile(x * 1.5 ** 6, (1, 2)), rtol=1e-5))
            """)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
            for step in ("write", "read"):
                r = subprocess.run([sys.executable, "-c", code, step], capture_output=True, text=True, env=env,
                                   timeout=600)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            self.assertEqual(r.stdout.split("\n")[:3], ["refused: True", "True", "True"], r.stdout + r.stderr[-2000:])


if __name__ == "__main__":
    run_tests([Loading, Shapes, Lowering, Autograd], [Cuda], CUDA)
