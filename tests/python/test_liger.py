"""Liger-Kernel's Triton kernels registered from Liger's own host functions, unchanged (scripts/fetch-liger puts the
pinned release in .deps/liger; nothing of it is committed).

RMSNorm forward: ``liger_kernel.ops.rms_norm.rms_norm_forward`` as Liger's autograd Function calls it, wrapped only
to say which of its returns are the op's outputs. Its host code takes views (``X.view(-1, dim)``), derives
``BLOCK_SIZE, num_warps = calculate_settings(n_cols)`` (``triton.next_power_of_2``, a limit of its own), branches
on the sizes, opens ``torch.cuda.device``, and passes the literal ``offset=0.0``: the recording is rank-free, one
size class per block, and the op runs from C++.

CPU: the recorded spec, the Meta kernel at ranks 1-4, the package. GPU: values against Liger's own launch and plain
torch, float32 and bfloat16, ragged sizes, CUDA graphs, opcheck.
"""

import os
import pathlib
import sys
import tempfile
import unittest

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIGER = ROOT / ".deps" / "liger"
sys.path.insert(0, str(LIGER))

import kernelop as ko  # noqa: E402
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


def recorded(dtype=torch.float32, op_name="kop_liger::rms_norm"):
    return ko.record_plugin(ko.triton(rms_norm_fwd, specialize=CLASSES), op_name=op_name,
                            example_inputs=(torch.empty(4, 4096, dtype=dtype), torch.empty(4096, dtype=dtype)))


_ops = {}


def op(dtype):
    if dtype not in _ops:
        _ops[dtype] = recorded(dtype, f"kop_liger::rms_norm_{str(dtype).split('.')[-1]}").register()
    return _ops[dtype]


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

    def test_the_package_loads_where_liger_and_triton_cannot_be_imported(self):
        import subprocess
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rms.kop")
            recorded(op_name="kop_liger_pkg::rms_norm").build_package(path, ["sm_90"])
            code = (
                "import sys\n"
                "sys.modules['triton'] = None\n"
                "sys.modules['liger_kernel'] = None\n"
                "import torch, kernelop as ko\n"
                f"op = ko.load_package({path!r})\n"
                "y, r = op(torch.empty(2, 3, 1000, device='meta'), torch.empty(1000, device='meta'), 1e-6)\n"
                "print(op.default._schema, tuple(y.shape), tuple(r.shape))\n")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "kop_liger_pkg::rms_norm(Tensor X, Tensor W, float eps) -> "
                                             "(Tensor, Tensor) (2, 3, 1000) (6,)")


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


if __name__ == "__main__":
    run_tests(cpu=[Recording], gpu=[Cuda], cuda=CUDA)
