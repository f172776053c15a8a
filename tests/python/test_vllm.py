"""vLLM's kernels as their authors wrote them (examples/vllm/, sources from scripts/fetch-vllm):
one kernelop op each, in the kernel's own parameter order. CPU: schemas, Meta shapes, refusals,
export with a dynamic token count, SymInt scalars. GPU: every dtype against pure-torch
references, on views and misaligned tensors, and the exported program."""

import pathlib
import unittest

import torch
import torch.nn.functional as F

import kernelop as ko
from kernelop_testing import run_tests

VLLM = pathlib.Path(__file__).resolve().parents[2] / "examples" / "vllm"
ARCHS = ["sm_80", "sm_90"]
CUDA = torch.cuda.is_available()
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=1e-2, atol=1e-2),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def register():
    for name in ["silu_and_mul", "rms_norm", "fused_add_rms_norm", "rotary_embedding_neox"]:
        ko.register_spec_file(VLLM / f"{name}.json", archs=ARCHS)
    return torch.ops.vllm


OPS = register()


# Pure-torch references with vLLM's op semantics (computed in float32, rounded like the kernels).
def silu_and_mul_ref(x):
    d = x.shape[-1] // 2
    return (F.silu(x[..., :d].float()).to(x.dtype).float() * x[..., d:].float()).to(x.dtype)


def rms_norm_ref(x, w, eps):
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (normed.float() * w.float()).to(x.dtype)


def rotary_neox_ref(positions, q, k, head_size, cache):
    rot = cache.shape[1]
    cos, sin = cache[positions].float().chunk(2, dim=-1)  # [T, rot/2] each

    def apply(t):
        t = t.view(t.shape[0], -1, head_size).float()
        x1, x2, rest = t[..., :rot // 2], t[..., rot // 2:rot], t[..., rot:]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1).flatten(1)
    return apply(q), apply(k)


class Specs(unittest.TestCase):
    def test_schemas_keep_vllms_op_semantics(self):
        self.assertEqual(str(OPS.silu_and_mul.default._schema), "vllm::silu_and_mul(Tensor input) -> Tensor")
        self.assertEqual(str(OPS.rms_norm.default._schema),
                         "vllm::rms_norm(Tensor input, Tensor weight, float epsilon) -> Tensor")
        self.assertEqual(str(OPS.fused_add_rms_norm.default._schema),
                         "vllm::fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, "
                         "float epsilon) -> ()")
        self.assertEqual(str(OPS.rotary_embedding_neox.default._schema),
                         "vllm::rotary_embedding_neox(Tensor positions, Tensor(a!) query, Tensor(b!) key, "
                         "int head_size, Tensor cos_sin_cache) -> ()")

    def test_parameters_follow_the_kernels_own_order(self):
        self.assertEqual(ko.kernel("vllm::rms_norm").parameters,
                         ["T* out", "const T* input", "long long stride(input, -2)", "const T* weight",
                          "float epsilon", "int numel_except(input, -1)", "int dim(input, -1)"])
        self.assertEqual(ko.kernel("vllm::silu_and_mul").parameters,
                         ["T* out", "const T* input", "int dim(input, -1) // 2"])

    def test_meta_shapes_of_any_rank(self):
        for shape in [(6, 16), (2, 3, 16), (1, 1, 1, 2)]:
            x = torch.empty(shape, device="meta", dtype=torch.float16)
            self.assertEqual(OPS.silu_and_mul(x).shape, shape[:-1] + (shape[-1] // 2,))
        x = torch.empty(5, 64, device="meta", dtype=torch.bfloat16)
        y = OPS.rms_norm(x, torch.empty(64, device="meta", dtype=torch.bfloat16), 1e-6)
        self.assertEqual((y.shape, y.dtype), ((5, 64), torch.bfloat16))

    def test_views_pass_meta_checks_where_the_kernel_takes_strides(self):
        wide = torch.empty(5, 128, device="meta", dtype=torch.float16)
        self.assertEqual(OPS.rms_norm(wide[:, :64], torch.empty(64, device="meta", dtype=torch.float16), 1e-6).shape,
                         (5, 64))
        with self.assertRaisesRegex(RuntimeError, r"the requirement 'stride\(input, -1\) == 1': 2 == 1 is false"):
            OPS.rms_norm(wide[:, ::2], torch.empty(64, device="meta", dtype=torch.float16), 1e-6)

    def test_refusals_name_the_requirement(self):
        with self.assertRaisesRegex(RuntimeError, r"vllm::silu_and_mul: the inputs break the requirement "
                                                  r"'dim\(input, -1\) % 2 == 0': 1 == 0 is false"):
            OPS.silu_and_mul(torch.empty(4, 7, device="meta"))
        with self.assertRaisesRegex(RuntimeError, r"'dim\(weight, 0\) == dim\(input, -1\)': 32 == 64 is false"):
            OPS.rms_norm(torch.empty(4, 64, device="meta"), torch.empty(32, device="meta"), 1e-6)
        with self.assertRaisesRegex(TypeError, "input 'positions' must be int64, got int32"):
            OPS.rotary_embedding_neox(torch.empty(4, device="meta", dtype=torch.int32), torch.empty(4, 256, device="meta"),
                                      torch.empty(4, 128, device="meta"), 128, torch.empty(10, 64, device="meta"))
        with self.assertRaisesRegex(TypeError, r"input 'weight' must be float16 \(T = float16, from input 'input'\), "
                                               "got float32"):
            OPS.rms_norm(torch.empty(4, 64, device="meta", dtype=torch.float16), torch.empty(64, device="meta"), 1e-6)

    def test_export_with_a_dynamic_token_count_does_not_specialise(self):
        class M(torch.nn.Module):
            def forward(self, x, w):
                return OPS.rms_norm(OPS.silu_and_mul(x), w, 1e-6)
        x = torch.empty(8, 128, device="meta", dtype=torch.float16)
        w = torch.empty(64, device="meta", dtype=torch.float16)
        ep = torch.export.export(M(), (x, w), dynamic_shapes={"x": {0: torch.export.Dim("tokens")}, "w": None})
        self.assertIn("vllm.silu_and_mul", str(ep.graph))
        out = [n for n in ep.graph.nodes if n.op == "output"][0].args[0][0].meta["val"]
        self.assertIsInstance(out.shape[0], torch.SymInt)
        self.assertEqual(ep.module()(torch.empty(3, 128, device="meta", dtype=torch.float16), w).shape, (3, 64))


class SymIntScalars(unittest.TestCase):
    """An int scalar that carries a size: SymInt in the schema, symbolic in the Meta kernel."""

    @classmethod
    def setUpClass(cls):
        def spec(symint):
            return ko.KernelSpec(
                kernel_source="extern \"C\" __global__ void tile(const float* x, int n, int numel_x, float* y) {}",
                kernel_name="tile", inputs=[ko.InputDecl("x", torch.float32), ko.ScalarInput("n", int, symint=symint)],
                outputs=[ko.OutputDecl("y", ["n", "dim(x, -1)"])], params=["x", "n", ko.Numel("x"), "y"],
                geometry=ko.Custom(grid=["n"], block=[32]), requires=["n >= 0"])
        cls.sym = ko.cuda_kernel_op("kop_vllm::tile_sym", spec(True), archs=["sm_90"])
        cls.plain = ko.cuda_kernel_op("kop_vllm::tile_int", spec(False), archs=["sm_90"])

    def module(self, op):
        class M(torch.nn.Module):
            def forward(self, x):
                return op(x, x.shape[0] * 2)
        return M()

    def test_schema_says_symint(self):
        self.assertEqual(str(self.sym.default._schema), "kop_vllm::tile_sym(Tensor x, SymInt n) -> Tensor")
        self.assertEqual(ko.kernel("kop_vllm::tile_sym").parameters,
                         ["const float* x", "int n", "int numel(x)", "float* y"])

    def test_export_keeps_the_scalar_symbolic(self):
        x = torch.empty(4, 8, device="meta")
        ep = torch.export.export(self.module(self.sym), (x,), dynamic_shapes={"x": {0: torch.export.Dim("b")}})
        self.assertEqual(ep.module()(torch.empty(5, 8, device="meta")).shape, (10, 8))
        # An int schema makes PyTorch specialise the size it carries.
        with self.assertRaisesRegex(Exception, "specializ|specialis|Constraints violated"):
            torch.export.export(self.module(self.plain), (x,), dynamic_shapes={"x": {0: torch.export.Dim("b")}})

    def test_symint_scalar_checks(self):
        with self.assertRaisesRegex(RuntimeError, "the requirement 'n >= 0'"):
            self.sym(torch.empty(4, 8, device="meta"), -1)
        with self.assertRaisesRegex(ValueError, "only int and int64 scalars can be SymInt"):
            ko.cuda_kernel_op("kop_vllm::bad_sym", ko.KernelSpec(
                kernel_source="__global__ void k() {}", kernel_name="k",
                inputs=[ko.InputDecl("x", torch.float32), ko.ScalarInput("a", float, symint=True)],
                outputs=[ko.OutputDecl("y", ko.SameAs("x"))], geometry=ko.Elementwise()))
        self.assertFalse(ko._kernelop_torch.is_registered("kop_vllm::bad_sym"))


@unittest.skipUnless(CUDA, "needs a CUDA device")
class Cuda(unittest.TestCase):
    def test_silu_and_mul_against_torch(self):
        for dtype in DTYPES:
            for shape in [(7, 256), (3, 5, 4096), (1, 2), (0, 64)]:
                with self.subTest(dtype=dtype, shape=shape):
                    x = torch.randn(shape, device="cuda", dtype=dtype)
                    torch.testing.assert_close(OPS.silu_and_mul(x), silu_and_mul_ref(x), **TOL[dtype])

    def test_rms_norm_against_torch_on_views(self):
        for dtype in DTYPES:
            wide = torch.randn(33, 2 * 4096, device="cuda", dtype=dtype)
            w = torch.randn(4096, device="cuda", dtype=dtype)
            for x in [wide[:, :4096], wide[:, 4096:], wide[:, :4096].contiguous(), wide[:1, :100]]:
                with self.subTest(dtype=dtype, shape=tuple(x.shape), stride=x.stride()):
                    ww = w[:x.shape[-1]].contiguous()
                    torch.testing.assert_close(OPS.rms_norm(x, ww, 1e-6), rms_norm_ref(x, ww, 1e-6), **TOL[dtype])

    def test_fused_add_rms_norm_in_place_and_misaligned_views_take_the_generic_kernel(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                x = torch.randn(17, 1024, device="cuda", dtype=dtype)
                r = torch.randn(17, 1024, device="cuda", dtype=dtype)
                w = torch.randn(1024, device="cuda", dtype=dtype)
                want_r = (x.float() + r.float()).to(dtype)
                want_x = rms_norm_ref(want_r, w, 1e-5)
                OPS.fused_add_rms_norm(x, r, w, 1e-5)
                torch.testing.assert_close(r, want_r, **TOL[dtype])
                torch.testing.assert_close(x, want_x, **TOL[dtype])
        # A 2-byte-offset float16 view: as vLLM's host code dispatches, only the generic kernel
        # (WIDTH=0) can run it; the vectorised one (tactic 0, WIDTH=8) is never launched on it.
        base = torch.randn(17 * 1024 + 1, device="cuda", dtype=torch.float16)
        x = base[1:].view(17, 1024)
        r = torch.randn(17, 1024, device="cuda", dtype=torch.float16)
        w = torch.randn(1024, device="cuda", dtype=torch.float16)
        want_r = (x.float() + r.float()).half()
        want_x = rms_norm_ref(want_r, w, 1e-5)
        k = ko.kernel("vllm::fused_add_rms_norm")
        self.assertEqual(k.tactics, ["WIDTH=8", "WIDTH=0"])
        k.pin_tactic(0)
        try:
            with self.assertRaisesRegex(RuntimeError, r"tactic 0 \(WIDTH=8\) is pinned but cannot run these inputs: "
                                                      r"it requires 'aligned\(input, 16\)'"):
                OPS.fused_add_rms_norm(x, r, w, 1e-5)
        finally:
            k.pin_tactic(None)
        OPS.fused_add_rms_norm(x, r, w, 1e-5)
        self.assertEqual(k.last_tactic, 1)
        torch.testing.assert_close(r, want_r, **TOL[torch.float16])
        torch.testing.assert_close(x, want_x, **TOL[torch.float16])

    def test_strided_inputs_are_written_in_place_not_copied(self):
        # The left half of a wider tensor: a copy would take the in-place result with it.
        base = torch.randn(17, 2048, device="cuda", dtype=torch.float16)
        x = base[:, :1024]
        self.assertFalse(x.is_contiguous())
        r = torch.randn(17, 1024, device="cuda", dtype=torch.float16)
        w = torch.randn(1024, device="cuda", dtype=torch.float16)
        right = base[:, 1024:].clone()
        want_r = (x.float() + r.float()).half()
        OPS.fused_add_rms_norm(x, r, w, 1e-5)
        torch.testing.assert_close(base[:, :1024], rms_norm_ref(want_r, w, 1e-5), **TOL[torch.float16])
        torch.testing.assert_close(base[:, 1024:], right, rtol=0, atol=0)  # untouched

    def test_rotary_neox_against_torch(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype):
                tokens, heads, kv_heads, head_size, rot, max_pos = 9, 4, 2, 128, 64, 100
                positions = torch.randint(0, max_pos, (tokens,), device="cuda")
                cache = torch.randn(max_pos, rot, device="cuda", dtype=dtype)
                q = torch.randn(tokens, heads * head_size, device="cuda", dtype=dtype)
                k = torch.randn(tokens, kv_heads * head_size, device="cuda", dtype=dtype)
                want_q, want_k = rotary_neox_ref(positions, q, k, head_size, cache)
                OPS.rotary_embedding_neox(positions, q, k, head_size, cache)
                torch.testing.assert_close(q.float(), want_q, **TOL[dtype])
                torch.testing.assert_close(k.float(), want_k, **TOL[dtype])

    def test_exported_program_runs_at_other_token_counts(self):
        class M(torch.nn.Module):
            def forward(self, x, w):
                return OPS.rms_norm(OPS.silu_and_mul(x), w, 1e-6)
        w = torch.randn(64, device="cuda", dtype=torch.float16)
        ep = torch.export.export(M(), (torch.randn(8, 128, device="cuda", dtype=torch.float16), w),
                                 dynamic_shapes={"x": {0: torch.export.Dim("tokens")}, "w": None})
        for tokens in [1, 3, 300]:
            x = torch.randn(tokens, 128, device="cuda", dtype=torch.float16)
            torch.testing.assert_close(ep.module()(x, w), rms_norm_ref(silu_and_mul_ref(x), w, 1e-6), **TOL[torch.float16])


if __name__ == "__main__":
    run_tests(cpu=[Specs, SymIntScalars], gpu=[Cuda], cuda=CUDA)
