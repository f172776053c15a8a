"""Liger-Kernel's Triton kernels registered from Liger's own host functions, unchanged (scripts/fetch-liger puts the
pinned release in .deps/liger; nothing of it is committed).

RMSNorm forward and backward: ``liger_kernel.ops.rms_norm.rms_norm_forward`` / ``rms_norm_backward`` as Liger's
autograd Function calls them, wrapped only to say which of its returns are the op's outputs (and, for the backward,
to pass what the Function's ctx holds). Its host code takes views (``X.view(-1, dim)``), derives
``BLOCK_SIZE, num_warps = calculate_settings(n_cols)`` (``triton.next_power_of_2``, a limit of its own), branches
on the sizes, opens ``torch.cuda.device``, and passes the literal ``offset=0.0``: the recording is rank-free, one
size class per block, and the op runs from C++. Its backward launches one kernel on sm_count() programs into per-SM
partials of dW that it allocates and does not return (the op's scratch) and sums them on the host,
``_dW.sum(dim=0).to(W.dtype)``: kernelop records that as a launch of its own sum kernel after Liger's.

SwiGLU forward and backward: ``liger_kernel.ops.swiglu.swiglu_forward`` / ``swiglu_backward``, Liger's host functions
unchanged, the op's backward recorded (``Backward(["a", "b"], ko.triton(...))``). Its kernels take ``n_cols`` as a
constexpr, so the op is compiled for the hidden sizes ``specialize`` lists (others are refused). Liger's backward
writes the gradients over its saved ``a`` and ``b``; kernelop's backward must leave what autograd saved intact, so
the backward launch_fn gives Liger's function copies (``a.clone()``), which kernelop records as outputs initialised
by a copy.

CPU: the recorded specs, the Meta kernels (autograd on meta tensors), the packages. GPU: values and gradients against
Liger's own launch, its autograd Function and plain torch, float32 and bfloat16, ragged sizes, CUDA graphs, opcheck,
torch.compile.
"""

import os
import pathlib
import re
import sys
import tempfile
import textwrap
import unittest

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIGER = ROOT / ".deps" / "liger"
sys.path.insert(0, str(LIGER))

import kernelop as ko  # noqa: E402
from isolated import run_python_refusing  # noqa: E402
from kernelop_testing import run_tests  # noqa: E402

CUDA = torch.cuda.is_available()
CLASSES = [256, 512, 1024, 2048, 4096, 8192]  # the hidden sizes these tests use, and more


def liger():
    if not (LIGER / "VERSION").is_file():
        raise unittest.SkipTest("Liger-Kernel is not fetched: run scripts/fetch-liger")
    from liger_kernel.ops import rms_norm
    return rms_norm


def rms_norm_fwd(X: torch.Tensor, W: torch.Tensor, eps: float):
    """Liger's rms_norm_forward as LigerRMSNormFunction.forward calls it (offset 0, Llama casting, no row mode)."""
    Y, _, RSTD, _, _, _ = liger().rms_norm_forward(X, W, eps, 0.0, "llama", False)
    return Y, RSTD


def rms_norm_bwd(grad_Y_ptr: torch.Tensor, X: torch.Tensor, W: torch.Tensor, RSTD_ptr: torch.Tensor):
    """LigerRMSNormFunction.backward line for line: X as its forward saved it (rms_norm_forward's X.view(-1, dim)),
    BLOCK_SIZE and num_warps as its ctx holds them (calculate_settings of the hidden size), not in place (the
    gradient is autograd's). Liger's rms_norm_backward allocates per-SM partials of dW (scratch) and ends with
    _dW.sum(dim=0).to(W.dtype) (kernelop's glue, a launch of the op)."""
    from liger_kernel.ops.utils import calculate_settings
    X = X.view(-1, X.shape[-1])
    BLOCK_SIZE, num_warps = calculate_settings(X.shape[-1])
    return liger().rms_norm_backward(grad_Y_ptr, X, W, RSTD_ptr, 0.0, "llama", BLOCK_SIZE, num_warps, False, False)


def recorded(dtype=torch.float32, op_name="kop_liger::rms_norm", backward=True):
    return ko.record_plugin(ko.triton(rms_norm_fwd, specialize=CLASSES), op_name=op_name,
                            example_inputs=(torch.empty(4, 4096, dtype=dtype), torch.empty(4096, dtype=dtype)),
                            backward=ko.Backward(["X", "W"], ko.triton(rms_norm_bwd)) if backward else None)


def run_rms_package(op_name, code):
    """The RMSNorm op (forward and backward) packaged for sm_90, and `code` run with it as `op` in a process where
    triton and liger_kernel cannot be imported; its stdout."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rms.kop")
        recorded(op_name=op_name).build_package(path, ["sm_90"])
        return run_python_refusing(["triton", "liger_kernel"], f"import torch, kernelop as ko\n"
                                   f"op = ko.load_package({path!r})\n" + textwrap.dedent(code))


_ops = {}


def op(dtype):
    if dtype not in _ops:
        _ops[dtype] = recorded(dtype, f"kop_liger::rms_norm_{str(dtype).split('.')[-1]}").register()
    return _ops[dtype]


HIDDEN = [1024, 4096, 11008]  # the SwiGLU hidden sizes these tests compile for


def swiglu():
    liger()
    from liger_kernel.ops import swiglu as module
    return module


def swiglu_fwd(a: torch.Tensor, b: torch.Tensor, gate_multiplier: float = 1.0) -> torch.Tensor:
    """Liger's swiglu_forward; it returns (a, b, c) for its autograd Function to save: the op's output is c. Its
    kernel reads as many rows of b as a has, which Liger assumes; the assert makes that the op's requirement (and the
    op rank-free: b.view(-1, n_cols) then needs no condition of its own)."""
    assert a.shape == b.shape
    return swiglu().swiglu_forward(a, b, gate_multiplier)[2]


def swiglu_bwd(a: torch.Tensor, b: torch.Tensor, grad_c_ptr: torch.Tensor, gate_multiplier: float = 1.0):
    """Liger's swiglu_backward writes the gradients over a and b; it gets copies, so the saved a and b stay."""
    return swiglu().swiglu_backward(a.clone(), b.clone(), grad_c_ptr, gate_multiplier)


def recorded_swiglu(dtype=torch.float32, op_name="kop_liger::swiglu"):
    shape = (2, 3, 4096)
    return ko.record_plugin(ko.triton(swiglu_fwd, specialize=HIDDEN), op_name=op_name,
                            example_inputs=(torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)),
                            backward=ko.Backward(["a", "b"], ko.triton(swiglu_bwd)))  # the forward's specialize


def swiglu_op(dtype):
    key = ("swiglu", dtype)
    if key not in _ops:
        _ops[key] = recorded_swiglu(dtype, f"kop_liger::swiglu_{str(dtype).split('.')[-1]}").register()
    return _ops[key]


class Recording(unittest.TestCase):
    def setUp(self):
        liger()

    def test_rms_norm_forward_records_from_ligers_host_function(self):
        d = recorded().doc
        self.assertEqual(d["kernel_name"], "_rms_norm_forward_kernel")
        self.assertEqual([o["name"] for o in d["outputs"]], ["Y_ptr", "RSTD_ptr"])
        self.assertEqual(d["outputs"][0]["shape"], {"same_as": "X"})
        self.assertEqual(d["outputs"][1]["shape"], ["numel_except(X, -1)"])
        self.assertEqual(d["outputs"][1]["dtype"], "float32")  # Llama casting keeps rstd in float32
        self.assertIn({"float": 0.0}, d["params"])  # offset, a literal of Liger's host code
        self.assertIn("eps", d["params"])
        self.assertEqual(d["geometry"]["custom"]["grid"], ["numel_except(X, -1)"])
        self.assertEqual(d["requires"][:2], ["rank(W) == 1", "dim(W, 0) == dim(X, -1)"])
        self.assertEqual(sorted({c["size_class"] for c in d["configs"]}), CLASSES)
        # calculate_settings' warps per block, in every class's configs.
        r = recorded()
        warps = {c["size_class"]: cc["options"]["num_warps"] for c, cc in zip(r.doc["configs"], r.compile_configs)}
        self.assertEqual(warps, {256: 4, 512: 4, 1024: 4, 2048: 8, 4096: 8, 8192: 16})

    def test_the_meta_kernel_at_ranks_1_to_4(self):
        rms = op(torch.bfloat16)
        for shape in ((4096,), (3, 1000), (2, 3, 4096), (2, 1, 3, 300)):
            y, rstd = rms(torch.empty(shape, dtype=torch.bfloat16, device="meta"),
                          torch.empty(shape[-1], dtype=torch.bfloat16, device="meta"), 1e-6)
            self.assertEqual((tuple(y.shape), y.dtype), (shape, torch.bfloat16))
            rows = 1
            for s in shape[:-1]:
                rows *= s
            self.assertEqual((tuple(rstd.shape), rstd.dtype), ((rows,), torch.float32))
        with self.assertRaisesRegex(RuntimeError, "break the requirement"):  # no class: 100 < 129
            rms(torch.empty(3, 100, dtype=torch.bfloat16, device="meta"),
                torch.empty(100, dtype=torch.bfloat16, device="meta"), 1e-6)

    def test_rms_norm_backward_records_partials_as_scratch_and_their_sum_as_glue(self):
        b = recorded().doc["backward"]
        self.assertEqual(b["kernel_name"], "_rms_norm_backward_kernel")
        self.assertEqual([i["name"] for i in b["inputs"]], ["grad_Y_ptr", "X", "W", "RSTD_ptr"])
        self.assertEqual(b["outputs"], [
            {"name": "grad_X", "shape": {"same_as": "grad_Y_ptr"}, "dtype": "float32", "init": {"fill": 0}},
            {"name": "grad_W", "shape": ["dim(grad_Y_ptr, -1)"], "dtype": "float32"},
            {"name": "dW_ptr", "shape": ["sm_count()", "dim(grad_Y_ptr, -1)"], "dtype": "float32", "scratch": True}])
        self.assertEqual(b["geometry"]["custom"]["grid"], ["sm_count()"])
        self.assertIn({"expr": "cdiv(numel_except(grad_Y_ptr, -1), sm_count())"}, b["params"])  # rows_per_program
        (glue,) = b["then"]
        self.assertEqual((glue["kernel_name"], glue["from"]), ("kop_sum_dim<T, U>", {"x": "dW_ptr", "y": "grad_W"}))
        self.assertEqual(sorted({c["size_class"] for c in b["configs"]}), CLASSES)
        bf16 = recorded(torch.bfloat16).doc["backward"]  # dW's .to(W.dtype) folded into the sum
        self.assertEqual(bf16["then"][0]["type_params"], [{"name": "T", "dtypes": ["float32"]},
                                                          {"name": "U", "dtypes": ["bfloat16"]}])

    def test_autograd_on_meta_tensors_at_ranks_1_to_4(self):
        rms = op(torch.bfloat16)
        for shape in ((4096,), (3, 1000), (2, 3, 4096), (2, 1, 3, 300)):
            x = torch.empty(shape, dtype=torch.bfloat16, device="meta", requires_grad=True)
            w = torch.empty(shape[-1], dtype=torch.bfloat16, device="meta", requires_grad=True)
            y, _ = rms(x, w, 1e-6)
            gx, gw = torch.autograd.grad(y, (x, w), torch.empty_like(y))
            self.assertEqual((tuple(gx.shape), tuple(gw.shape), gx.dtype, gw.dtype),
                             (shape, shape[-1:], torch.bfloat16, torch.bfloat16))

    def test_the_package_loads_where_liger_and_triton_cannot_be_imported(self):
        out = run_rms_package("kop_liger_pkg::rms_norm", """
            x = torch.empty(2, 3, 1000, device='meta', requires_grad=True)
            w = torch.empty(1000, device='meta', requires_grad=True)
            y, r = op(x, w, 1e-6)
            gx, gw = torch.autograd.grad(y, (x, w), torch.empty_like(y))
            print(op.default._schema, tuple(y.shape), tuple(r.shape), tuple(gw.shape))
        """)
        self.assertEqual(out.strip(), "kop_liger_pkg::rms_norm(Tensor X, Tensor W, float eps) -> "
                                      "(Tensor, Tensor) (2, 3, 1000) (6,) (1000,)")


class SwiGLURecording(unittest.TestCase):
    def setUp(self):
        liger()

    def test_forward_and_backward_record_from_ligers_host_functions(self):
        r = recorded_swiglu()
        d, b = r.doc, r.doc["backward"]
        self.assertEqual((d["kernel_name"], b["kernel_name"]), ("_swiglu_forward_kernel", "_swiglu_backward_kernel"))
        self.assertEqual(b["differentiable"], ["a", "b"])
        self.assertEqual([i["name"] for i in b["inputs"]], ["a", "b", "grad_c_ptr", "gate_multiplier"])
        self.assertEqual(b["outputs"], [{"name": "grad_a", "shape": {"same_as": "a"}, "init": {"clone": "a"}},
                                        {"name": "grad_b", "shape": {"same_as": "b"}, "init": {"clone": "b"}}])
        for doc in (d, b):  # n_cols is compiled in: one class per hidden size, each requiring exactly that size
            self.assertEqual(sorted({c["size_class"] for c in doc["configs"]}), HIDDEN)
            for c in doc["configs"]:
                self.assertEqual(c["n_cols"], c["size_class"])
                self.assertTrue(any(re.fullmatch(rf"dim\((a|grad_c_ptr), (2|-1)\) == {c['size_class']}", r)
                                    for r in c["requires"]), c["requires"])

    def test_autograd_on_meta_tensors_and_sizes_not_compiled_for(self):
        op = swiglu_op(torch.bfloat16)
        for shape in ((2, 3, 4096), (5, 7, 11008)):
            a = torch.empty(shape, dtype=torch.bfloat16, device="meta", requires_grad=True)
            b = torch.empty(shape, dtype=torch.bfloat16, device="meta", requires_grad=True)
            c = op(a, b)
            self.assertEqual((tuple(c.shape), c.dtype), (shape, torch.bfloat16))
            ga, gb = torch.autograd.grad(c, (a, b), torch.empty_like(c))
            self.assertEqual((tuple(ga.shape), tuple(gb.shape), ga.dtype), (shape, shape, torch.bfloat16))
        with self.assertRaisesRegex(RuntimeError, "dim\\(a, -1\\) == 4096"):  # 4000 is no hidden size listed
            op(torch.empty(2, 3, 4000, dtype=torch.bfloat16, device="meta"),
               torch.empty(2, 3, 4000, dtype=torch.bfloat16, device="meta"))
        # Rank-free: with a and b of one shape, Liger's views need no condition of their own (ranks 1-4, axes of 1).
        self.assertEqual(recorded_swiglu().doc["requires"][0], "same_shape(b, a)")
        for shape in ((4096,), (1, 4096), (1, 1, 4096), (2, 1, 3, 1024), (7, 11008)):
            a = torch.empty(shape, dtype=torch.bfloat16, device="meta", requires_grad=True)
            c = op(a, torch.empty(shape, dtype=torch.bfloat16, device="meta"))
            self.assertEqual(tuple(c.shape), shape)
            (ga,) = torch.autograd.grad(c, (a,), torch.empty_like(c))
            self.assertEqual(tuple(ga.shape), shape)
        # b with fewer rows than a: the kernel would read past b's end; refused by the requirement.
        with self.assertRaisesRegex(RuntimeError, "same_shape\\(b, a\\)"):
            op(torch.empty(4, 3, 4096, dtype=torch.bfloat16, device="meta"),
               torch.empty(2, 3, 4096, dtype=torch.bfloat16, device="meta"))

    def test_a_size_constexpr_needs_the_sizes_listed(self):
        with self.assertRaisesRegex(ValueError, "a constexpr takes dim\\(a, -1\\), a size, as it is: Triton compiles "
                                    "one kernel per value, so kernelop compiles the values you list"):
            ko.record_plugin(ko.triton(swiglu_fwd), op_name="kop_liger::swiglu_unlisted",
                             example_inputs=(torch.empty(2, 3, 64), torch.empty(2, 3, 64)))

    def test_the_package_trains_where_liger_and_triton_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "swiglu.kop")
            recorded_swiglu(op_name="kop_liger_pkg::swiglu").build_package(path, ["sm_90"])
            out = run_python_refusing(["triton", "liger_kernel"], f"""
                import torch, kernelop as ko
                op = ko.load_package({path!r})
                a = torch.empty(2, 5, 1024, device='meta', requires_grad=True)
                b = torch.empty(2, 5, 1024, device='meta', requires_grad=True)
                ga, gb = torch.autograd.grad(op(a, b, 0.5), (a, b), torch.empty(2, 5, 1024, device='meta'))
                print(op.default._schema, tuple(ga.shape))
            """)
        self.assertEqual(out.strip(), "kop_liger_pkg::swiglu(Tensor a, Tensor b, float gate_multiplier=1.) -> "
                                      "Tensor (2, 5, 1024)")


@unittest.skipUnless(CUDA, "needs a CUDA device")
class Cuda(unittest.TestCase):
    def setUp(self):
        liger()
        torch.manual_seed(0)

    def test_rms_norm_forward_matches_ligers_own_launch_and_torch(self):
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
            rms = op(dtype)
            for shape in ((4096,), (3, 1000), (2, 7, 4096), (2, 1, 3, 300), (17, 8192), (5, 129)):
                x = torch.randn(shape, device="cuda", dtype=dtype)
                w = torch.randn(shape[-1], device="cuda", dtype=dtype)
                y, rstd = rms(x, w, 1e-6)
                want_y, want_rstd = rms_norm_fwd(x, w, 1e-6)  # Liger's own launch
                torch.testing.assert_close(y, want_y, rtol=tol, atol=tol)
                torch.testing.assert_close(rstd, want_rstd, rtol=1e-5, atol=1e-5)
                xf = x.float()
                ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype) * w
                torch.testing.assert_close(y, ref, rtol=tol, atol=tol)

    def test_rms_norm_gradients_match_ligers_autograd_function_and_torch(self):
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
            rms = op(dtype)
            for shape in ((4096,), (3, 1000), (2, 7, 4096), (2, 1, 3, 300), (17, 8192), (5, 129), (4100, 256)):
                x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
                w = torch.randn(shape[-1], device="cuda", dtype=dtype, requires_grad=True)
                g = torch.randn(shape, device="cuda", dtype=dtype)
                y, _ = rms(x, w, 1e-6)
                gx, gw = torch.autograd.grad(y, (x, w), g)
                lx, lw = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
                ly = LigerRMSNormFunction.apply(lx, lw, 1e-6, 0.0, "llama", False)  # Liger's own, not in place
                lgx, lgw = torch.autograd.grad(ly, (lx, lw), g)
                torch.testing.assert_close(y, ly, rtol=0, atol=0)
                torch.testing.assert_close(gx, lgx, rtol=0, atol=0)  # the same kernel on the same values
                # dW: per-SM partials summed in float32 by kernelop's glue and by Liger's torch.sum, in other orders.
                # Triton's JIT also compiles Liger's launch for rows_per_program == 1 (a constant: it specialises
                # ints equal to 1), where the bfloat16 products dY * (X * rstd) round otherwise: apart by a
                # rounding step of the largest term at most.
                step = 2 ** -7 if dtype == torch.bfloat16 else 1e-5
                torch.testing.assert_close(gw, lgw, rtol=step, atol=step * lgw.float().abs().max().item())
                tx, tw = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
                ty = (tx * torch.rsqrt(tx.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype).float() * tw
                tgx, tgw = torch.autograd.grad(ty, (tx, tw), g.float())
                torch.testing.assert_close(gx.float(), tgx, rtol=tol, atol=tol * 4)
                torch.testing.assert_close(gw.float(), tgw, rtol=tol, atol=tol * max(1.0, x.numel() / shape[-1]) ** 0.5)

    def test_rms_norm_training_step_compiles_and_graphs(self):
        rms = op(torch.float32)
        step = torch.compile(lambda x, w: rms(x, w, 1e-6)[0].square().sum(), fullgraph=True, dynamic=True)
        for rows in (3, 9):
            x = torch.randn(rows, 2, 4096, device="cuda", requires_grad=True)
            w = torch.randn(4096, device="cuda", requires_grad=True)
            gx, gw = torch.autograd.grad(step(x, w), (x, w))
            tx, tw = x.detach().requires_grad_(), w.detach().requires_grad_()
            ty = tx * torch.rsqrt(tx.pow(2).mean(-1, keepdim=True) + 1e-6) * tw
            tgx, tgw = torch.autograd.grad(ty.square().sum(), (tx, tw))
            torch.testing.assert_close(gx, tgx, rtol=1e-3, atol=1e-3)
            torch.testing.assert_close(gw, tgw, rtol=1e-3, atol=1e-2)
        x = torch.randn(64, 2048, device="cuda", requires_grad=True)
        w = torch.randn(2048, device="cuda", requires_grad=True)
        g = torch.randn(64, 2048, device="cuda")
        torch.library.opcheck(rms, (x, w, 1e-6))

        def grads():
            y, _ = rms(x, w, 1e-6)
            return torch.autograd.grad(y, (x, w), g)
        grads()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # forward, backward, the scratch and the glue in one graph
            gx, gw = grads()
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            g.copy_(torch.randn_like(g))
        graph.replay()
        torch.cuda.synchronize()
        want = grads()
        torch.testing.assert_close(gx, want[0], rtol=0, atol=0)
        torch.testing.assert_close(gw, want[1], rtol=1e-5, atol=1e-5)

    def test_the_rms_norm_package_trains_where_liger_and_triton_cannot_be_imported(self):
        out = run_rms_package("kop_liger_pkg_gpu::rms_norm", """
            x = torch.randn(2, 37, 4096, device="cuda", requires_grad=True)
            w = torch.randn(4096, device="cuda", requires_grad=True)
            g = torch.randn(2, 37, 4096, device="cuda")
            gx, gw = torch.autograd.grad(op(x, w, 1e-6)[0], (x, w), g)
            tx, tw = x.detach().requires_grad_(), w.detach().requires_grad_()
            ty = tx * torch.rsqrt(tx.pow(2).mean(-1, keepdim=True) + 1e-6) * tw
            tgx, tgw = torch.autograd.grad(ty, (tx, tw), g)
            print(max((gx - tgx).abs().max().item(), (gw - tgw).abs().max().item() / 10))
        """)
        self.assertLess(float(out.split()[-1]), 1e-3)

    def test_cuda_graph_and_opcheck(self):
        rms = op(torch.float32)
        x, w = torch.randn(8, 2048, device="cuda"), torch.randn(2048, device="cuda")
        torch.library.opcheck(rms, (x, w, 1e-6))
        rms(x, w, 1e-6)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y, _ = rms(x, w, 1e-6)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, rms_norm_fwd(x, w, 1e-6)[0])

    def test_swiglu_forward_and_backward_match_liger_and_torch(self):
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
            op = swiglu_op(dtype)
            for shape, gm in (((1, 3, 1024), 1.0), ((2, 7, 4096), 0.5), ((1, 2, 11008), 1.0), ((3, 11, 4096), 2.0)):
                a = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
                b = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
                g = torch.randn(shape, device="cuda", dtype=dtype)
                a0, b0 = a.detach().clone(), b.detach().clone()
                c = op(a, b, gm)
                ga, gb = torch.autograd.grad(c, (a, b), g)
                la, lb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
                lc = LigerSiLUMulFunction.apply(la, lb, gm)  # Liger's own autograd Function
                lga, lgb = torch.autograd.grad(lc, (la, lb), g)
                torch.testing.assert_close(c, lc, rtol=0, atol=0)
                torch.testing.assert_close(ga, lga, rtol=0, atol=0)
                torch.testing.assert_close(gb, lgb, rtol=0, atol=0)
                ta, tb = a.detach().float().requires_grad_(), b.detach().float().requires_grad_()
                tc = torch.nn.functional.silu(ta * gm) * tb
                tga, tgb = torch.autograd.grad(tc, (ta, tb), g.float())
                torch.testing.assert_close(c.float(), tc, rtol=tol, atol=tol)
                torch.testing.assert_close(ga.float(), tga, rtol=tol, atol=tol * 4)
                torch.testing.assert_close(gb.float(), tgb, rtol=tol, atol=tol)
                # kernelop's backward left a and b as they were (Liger's own overwrites the a and b it saved)
                self.assertTrue(torch.equal(a.detach(), a0) and torch.equal(b.detach(), b0))

    def test_swiglu_opcheck_graphs_and_compile(self):
        op = swiglu_op(torch.float32)
        a = torch.randn(2, 4, 1024, device="cuda", requires_grad=True)
        b = torch.randn(2, 4, 1024, device="cuda", requires_grad=True)
        torch.library.opcheck(op, (a, b, 1.0))
        step = torch.compile(lambda x, y: op(x, y).sum(), fullgraph=True, dynamic=True)
        for rows in (3, 9):
            x = torch.randn(rows, 2, 4096, device="cuda", requires_grad=True)
            y = torch.randn(rows, 2, 4096, device="cuda", requires_grad=True)
            gx, gy = torch.autograd.grad(step(x, y), (x, y))
            tx, ty = x.detach().requires_grad_(), y.detach().requires_grad_()
            rgx, rgy = torch.autograd.grad((torch.nn.functional.silu(tx) * ty).sum(), (tx, ty))
            torch.testing.assert_close(gx, rgx, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(gy, rgy, rtol=1e-5, atol=1e-5)
        x, y = torch.randn(8, 2, 1024, device="cuda"), torch.randn(8, 2, 1024, device="cuda")
        op(x, y)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            c = op(x, y)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, swiglu_fwd(x, y), rtol=0, atol=0)


if __name__ == "__main__":
    run_tests(cpu=[Recording, SwiGLURecording], gpu=[Cuda], cuda=CUDA)
