"""Liger-Kernel's Triton ops registered from Liger's own host functions (examples/liger_ops.py holds the launch_fns;
scripts/fetch-liger puts the pinned release in .deps/liger; nothing of it is committed).

RMSNorm forward and backward: ``rms_norm_forward`` / ``rms_norm_backward`` as Liger's autograd Function calls them.
Its host code takes views (``X.view(-1, dim)``), derives ``BLOCK_SIZE, num_warps = calculate_settings(n_cols)``,
branches on the sizes, opens ``torch.cuda.device`` and passes the literal ``offset=0.0``: the recording is rank-free,
one size class per block, and the op runs from C++. Its backward's per-SM partials of dW are the op's scratch and
``_dW.sum(dim=0).to(W.dtype)`` a launch of kernelop's own sum kernel.

SwiGLU forward and backward: ``swiglu_forward`` / ``swiglu_backward`` unchanged; ``n_cols`` is a constexpr, so the
op is compiled for the hidden sizes ``specialize`` lists. Liger's backward writes the gradients over its saved ``a``
and ``b``; kernelop's gives it copies (outputs initialised by a copy).

Cross entropy: ``cross_entropy_forward`` / ``cross_entropy_backward`` line for line for a mean loss, the count of
kept rows on the device (glue before and after the kernel) instead of Liger's ``.item()`` host sync.

RoPE: ``rope_forward`` / ``rope_backward`` unchanged: a permuted copy (glue) of q and k, rotated in place by the
kernel and returned as a permutation; compiled per batch, head count and head size listed.

CPU: the recorded specs, the Meta kernels (autograd on meta tensors), the packages. GPU: values and gradients against
Liger's own launch, its autograd Function and plain torch, float32 and bfloat16, ragged sizes, ignored targets, CUDA
graphs, opcheck, torch.compile.
"""

import json
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
sys.path.insert(0, str(ROOT / "examples"))

import kernelop as ko  # noqa: E402
import liger_ops  # noqa: E402  (examples/liger_ops.py: the launch_fns, from Liger's host functions)
from isolated import run_python_refusing  # noqa: E402
from kernelop_testing import run_tests  # noqa: E402
from liger_ops import rms_norm_fwd, swiglu_fwd  # noqa: E402

CUDA = torch.cuda.is_available()
CLASSES = [256, 512, 1024, 2048, 4096, 8192]  # the hidden sizes these tests use, and more


def liger():
    if not (LIGER / "VERSION").is_file():
        raise unittest.SkipTest("Liger-Kernel is not fetched: run scripts/fetch-liger")
    from liger_kernel.ops import rms_norm
    return rms_norm


def recorded(dtype=torch.float32, op_name="kop_liger::rms_norm"):
    return liger_ops.rms_norm(dtype, op_name, specialize=CLASSES)


def run_package(recorder, op_name, code):
    """The op `recorder` records (forward and backward), packaged for sm_90, and `code` run with it as `op` in a
    process where triton and liger_kernel cannot be imported; its stdout."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "op.kop")
        recorder(op_name=op_name).build_package(path, ["sm_90"])
        return run_python_refusing(["triton", "liger_kernel"], f"import torch, kernelop as ko\n"
                                   f"op = ko.load_package({path!r})\n" + textwrap.dedent(code))


HIDDEN = [1024, 4096, 11008]  # the SwiGLU hidden sizes these tests compile for
VOCABS = [64, 1024, 32768, 131072]  # the cross entropy's vocabulary classes these tests use (next_power_of_2(V))


def recorded_swiglu(dtype=torch.float32, op_name="kop_liger::swiglu"):
    return liger_ops.swiglu(dtype, op_name, HIDDEN)


def recorded_ce(dtype=torch.float32, op_name="kop_liger::cross_entropy"):
    return liger_ops.cross_entropy(dtype, op_name, VOCABS)


def recorded_ce_in_place(dtype=torch.float32, op_name="kop_liger::cross_entropy_"):
    return liger_ops.cross_entropy(dtype, op_name, VOCABS, in_place=True)


def recorded_ce_synced(dtype=torch.float32, op_name="kop_liger::cross_entropy_synced"):
    return liger_ops.cross_entropy(dtype, op_name, VOCABS, host_sync=True)


def recorded_ce_synced_in_place(dtype=torch.float32, op_name="kop_liger::cross_entropy_synced_"):
    return liger_ops.cross_entropy(dtype, op_name, VOCABS, in_place=True, host_sync=True)


ROPE = dict(batches=(1, 2, 3), q_heads=(4,), kv_heads=(2,), head_dims=(64,))  # the RoPE classes these tests use


def recorded_rope(dtype=torch.float32, op_name="kop_liger::rope"):
    return liger_ops.rope(dtype, op_name, **ROPE)


def recorded_rope_in_place(dtype=torch.float32, op_name="kop_liger::rope_"):
    return liger_ops.rope(dtype, op_name, in_place=True, **ROPE)


def hf_projections(batch, seq, dtype, q_heads=4, kv_heads=2, head_dim=64, requires_grad=True):
    """Leaves standing for HF's projections (batch, seq, heads * head_dim), and q and k as HF makes them from their
    copies: transposed views (batch, heads, seq, head_dim)."""
    pq = torch.randn(batch, seq, q_heads * head_dim, device="cuda", dtype=dtype, requires_grad=requires_grad)
    pk = torch.randn(batch, seq, kv_heads * head_dim, device="cuda", dtype=dtype, requires_grad=requires_grad)

    def views():
        return ((pq * 1.0).view(batch, seq, q_heads, head_dim).transpose(1, 2),
                (pk * 1.0).view(batch, seq, kv_heads, head_dim).transpose(1, 2))
    return pq, pk, views


def rope_reference(q, k, cos, sin):
    """HF Llama's apply_rotary_pos_emb in float32 (cos and sin (seq, head_dim), their halves equal)."""
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), -1)
    c, s = cos.float()[None, None], sin.float()[None, None]
    return q.float() * c + rotate_half(q.float()) * s, k.float() * c + rotate_half(k.float()) * s


def rope_inputs(batch, seq, dtype, hf_layout, q_heads=4, kv_heads=2, head_dim=64, requires_grad=False):
    """q, k (batch, heads, seq, head_dim): contiguous, or as HF makes them (a transposed view of (batch, seq, heads,
    head_dim)); cos and sin (seq, head_dim) of angles, halves equal."""
    def make(heads):
        if hf_layout:
            t = torch.randn(batch, seq, heads, head_dim, device="cuda", dtype=dtype).transpose(1, 2)
        else:
            t = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dtype)
        return t.requires_grad_(requires_grad)
    freqs = torch.outer(torch.arange(seq, device="cuda", dtype=torch.float32),
                        1e4 ** (-torch.arange(0, head_dim, 2, device="cuda", dtype=torch.float32) / head_dim))
    angles = torch.cat((freqs, freqs), -1)
    return make(q_heads), make(kv_heads), angles.cos().to(dtype), angles.sin().to(dtype)


def cross_entropy():
    liger()
    from liger_kernel.ops import cross_entropy as module
    return module


_ops = {}
_RECORDERS = {"rms_norm": recorded, "swiglu": recorded_swiglu, "cross_entropy": recorded_ce, "rope": recorded_rope,
              "cross_entropy_in_place": recorded_ce_in_place, "rope_in_place": recorded_rope_in_place,
              "cross_entropy_synced": recorded_ce_synced, "cross_entropy_synced_in_place": recorded_ce_synced_in_place}


def registered(kind, dtype):
    """The op `kind` for `dtype`, registered once per process as kop_liger::<kind>_<dtype>."""
    if (kind, dtype) not in _ops:
        _ops[kind, dtype] = _RECORDERS[kind](dtype, f"kop_liger::{kind}_{str(dtype).split('.')[-1]}").register()
    return _ops[kind, dtype]


def op(dtype):
    return registered("rms_norm", dtype)


def swiglu_op(dtype):
    return registered("swiglu", dtype)


def ce_op(dtype):
    return registered("cross_entropy", dtype)


def rope_op(dtype):
    return registered("rope", dtype)


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
            {"name": "grad_X", "shape": {"same_as": "grad_Y_ptr"}, "init": {"clone": "grad_Y_ptr"}},
            {"name": "grad_W", "shape": ["dim(grad_Y_ptr, -1)"], "dtype": "float32"},
            {"name": "dW_ptr", "shape": ["sm_count()", "dim(grad_Y_ptr, -1)"], "dtype": "float32", "scratch": True}])
        self.assertEqual(b["geometry"]["custom"]["grid"], ["sm_count()"])
        self.assertIn({"expr": "cdiv(numel_except(grad_Y_ptr, -1), sm_count())"}, b["params"])  # rows_per_program
        # in place, as Liger's default: dY and dX are one buffer, a copy of the gradient (none when it is donated)
        self.assertEqual(b["params"][:4], ["grad_X", {"expr": "dim(grad_Y_ptr, -1)"}] * 2)
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
        out = run_package(recorded, "kop_liger_pkg::rms_norm", """
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
        with self.assertRaisesRegex(ValueError, "a constexpr takes dim\\(a, -1\\), a size, as it is \\(or the host "
                                    "code compiles it in as an int\\): the DSL compiles one kernel per value, so "
                                    "kernelop compiles the values you list"):
            ko.record_plugin(ko.triton(swiglu_fwd), op_name="kop_liger::swiglu_unlisted",
                             example_inputs=(torch.empty(2, 3, 64), torch.empty(2, 3, 64)))

    def test_the_package_trains_where_liger_and_triton_cannot_be_imported(self):
        out = run_package(recorded_swiglu, "kop_liger_pkg::swiglu", """
            a = torch.empty(2, 5, 1024, device='meta', requires_grad=True)
            b = torch.empty(2, 5, 1024, device='meta', requires_grad=True)
            ga, gb = torch.autograd.grad(op(a, b, 0.5), (a, b), torch.empty(2, 5, 1024, device='meta'))
            print(op.default._schema, tuple(ga.shape))
        """)
        self.assertEqual(out.strip(), "kop_liger_pkg::swiglu(Tensor a, Tensor b, float gate_multiplier=1.) -> "
                                      "Tensor (2, 5, 1024)")


class CrossEntropyRecording(unittest.TestCase):
    def setUp(self):
        liger()

    def test_the_count_and_the_mean_record_as_glue_before_and_after_the_kernel(self):
        r = recorded_ce()
        d, b = r.doc, r.doc["backward"]
        self.assertEqual(d["kernel_name"], "liger_cross_entropy_kernel")
        self.assertEqual([i["name"] for i in d["inputs"]], ["_input", "target", "ignore_index"])
        self.assertEqual(d["outputs"][:3], [
            {"name": "loss", "shape": [], "dtype": "float32"},
            {"name": "grad", "shape": {"same_as": "_input"}, "init": {"clone": "_input"}},
            {"name": "n_non_ignore", "shape": [], "dtype": "int64"}])
        self.assertEqual([(o["name"], o.get("init")) for o in d["outputs"][3:] if o.get("scratch")],
                         [("loss_ptr", {"fill": 0}), ("scratch1", None)])
        steps = [(t["kernel_name"], t["from"], t.get("before", False)) for t in d["then"]]
        self.assertEqual(steps, [
            ("kop_count_ne<T, U>", {"x": "target", "v": "ignore_index", "y": "n_non_ignore"}, True),
            ("kop_sum_all<T, U>", {"x": "loss_ptr", "y": "scratch1"}, False),
            ("kop_div<T, B>", {"a": "scratch1", "b": "n_non_ignore", "y": "loss"}, False)])
        self.assertIn("rank(_input) == 2", d["requires"])
        self.assertEqual(sorted({c["size_class"] for c in d["configs"]}), VOCABS)
        # BLOCK_SIZE is min(MAX_FUSED_SIZE, next_power_of_2(V)): the largest class binds MAX_FUSED_SIZE.
        self.assertEqual({c["size_class"]: c["BLOCK_SIZE"] for c in d["configs"]},
                         {64: 64, 1024: 1024, 32768: 32768, 131072: cross_entropy().MAX_FUSED_SIZE})
        self.assertEqual(b["kernel_name"], "element_mul_kernel")
        self.assertEqual([i["name"] for i in b["inputs"]], ["grad_loss", "grad", "n_non_ignore"])
        self.assertEqual(b["outputs"][0], {"name": "grad__input", "shape": {"same_as": "grad"},
                                           "init": {"clone": "grad"}})
        # grad_loss / n_non_ignore.clamp(min=1), both before the kernel: a count of 0 divides as 1
        self.assertEqual([(t["kernel_name"], t["from"], t["before"]) for t in b["then"]], [
            ("kop_clamp<T>", {"x": "n_non_ignore", "y": "scratch1"}, True),
            ("kop_div<T, B>", {"a": "grad_loss", "b": "scratch1", "y": "grad_output_ptr"}, True)])
        self.assertIn("dim(target, 0) == dim(_input, 0)", d["requires"])  # the assert: one target per row

    def test_meta_shapes_and_autograd_and_vocabularies_not_compiled_for(self):
        op = ce_op(torch.bfloat16)
        for rows, vocab in ((4, 1000), (1, 32000), (37, 128256), (3, 33)):
            x = torch.empty(rows, vocab, dtype=torch.bfloat16, device="meta", requires_grad=True)
            t = torch.empty(rows, dtype=torch.int64, device="meta")
            loss, grad, n = op(x, t)
            self.assertEqual([(tuple(v.shape), v.dtype) for v in (loss, grad, n)],
                             [((), torch.bfloat16), ((rows, vocab), torch.bfloat16), ((), torch.int64)])
            (gx,) = torch.autograd.grad(loss, (x,), torch.empty_like(loss))
            self.assertEqual((tuple(gx.shape), gx.dtype), ((rows, vocab), torch.bfloat16))
        with self.assertRaisesRegex(RuntimeError, "break the requirement"):  # 2000 is in no class listed
            op(torch.empty(4, 2000, dtype=torch.bfloat16, device="meta"),
               torch.empty(4, dtype=torch.int64, device="meta"))
        with self.assertRaisesRegex(RuntimeError, "dim\\(target, 0\\) == dim\\(_input, 0\\)"):  # a short target
            op(torch.empty(6, 1000, dtype=torch.bfloat16, device="meta"),
               torch.empty(3, dtype=torch.int64, device="meta"))
        with self.assertRaisesRegex(RuntimeError, "rank\\(_input\\) == 2"):  # Liger's BT, V = _input.shape
            op(torch.empty(2, 4, 1000, dtype=torch.bfloat16, device="meta"),
               torch.empty(8, dtype=torch.int64, device="meta"))

    def test_in_place_as_ligers_the_gradient_goes_over_the_logits(self):
        r = recorded_ce_in_place()
        d, b = r.doc, r.doc["backward"]
        self.assertEqual([(i["name"], i.get("mutated", False)) for i in d["inputs"]],
                         [("_input", True), ("target", False), ("ignore_index", False)])
        self.assertEqual([o["name"] for o in d["outputs"] if not o.get("scratch")], ["loss", "n_non_ignore"])
        self.assertEqual([i["name"] for i in b["inputs"]], ["grad_loss", "_input", "n_non_ignore"])
        self.assertEqual(b["outputs"][0], {"name": "grad__input", "shape": {"same_as": "_input"},
                                           "init": {"clone": "_input"}})
        op = registered("cross_entropy_in_place", torch.bfloat16)
        self.assertEqual(str(op.default._schema), "kop_liger::cross_entropy_in_place_bfloat16(Tensor(a!) _input, "
                                                  "Tensor target, int ignore_index=-100) -> (Tensor, Tensor)")
        x = torch.empty(37, 1000, dtype=torch.bfloat16, device="meta", requires_grad=True)
        t = torch.empty(37, dtype=torch.int64, device="meta")
        logits = x * 1.0
        loss, n = op(logits, t)
        self.assertEqual((logits._version, tuple(loss.shape), n.dtype), (1, (), torch.int64))
        (gx,) = torch.autograd.grad(loss, (x,), torch.empty_like(loss))
        self.assertEqual((tuple(gx.shape), gx.dtype), ((37, 1000), torch.bfloat16))
        with self.assertRaisesRegex(RuntimeError, "writes its input '_input' in place: a leaf Variable that "
                                                  "requires grad"):
            op(x, t)
        with self.assertRaisesRegex(RuntimeError, "wrote into its input '_input' in place: the value it left "
                                                  "there has no gradient"):
            torch.autograd.grad(op(x * 1.0, t)[0] + logits.sum(), (x,))
        out = run_package(recorded_ce_in_place, "kop_liger_pkg::cross_entropy_", """
            x = torch.empty(6, 1000, device='meta', requires_grad=True)
            logits = x * 1.0
            loss, n = op(logits, torch.empty(6, dtype=torch.int64, device='meta'))
            (gx,) = torch.autograd.grad(loss, (x,), torch.empty((), device='meta'))
            print(op.default._schema, logits._version, tuple(gx.shape))
        """)
        self.assertEqual(out.strip(), "kop_liger_pkg::cross_entropy_(Tensor(a!) _input, Tensor target, int "
                                      "ignore_index=-100) -> (Tensor, Tensor) 1 (6, 1000)")

    def test_with_host_syncs_it_is_ligers_own_host_code(self):
        # Note [host reads]: n_non_ignore = target_mask.sum().item() is read at launch into both of the kernel's
        # arguments, and Liger's cross_entropy_backward, unchanged, skips its kernel when grad_output is 1.
        for recorder, outputs in ((recorded_ce_synced, ["loss", "grad"]), (recorded_ce_synced_in_place, ["loss"])):
            r = recorder()
            d, b = r.doc, r.doc["backward"]
            self.assertEqual([o["name"] for o in d["outputs"] if not o.get("scratch")], outputs)
            (count,) = [t["from"]["y"] for t in d["then"] if t["kernel_name"] == "kop_count_ne<T, U>"]
            self.assertEqual([p for p in d["params"] if "item(" in json.dumps(p)], [{"expr": f"item({count})"}] * 2)
            self.assertEqual([t["kernel_name"] for t in d["then"]], ["kop_count_ne<T, U>", "kop_sum_all<T, U>"])
            self.assertNotIn("when", d)
            self.assertEqual((b["kernel_name"], b["when"]), ("element_mul_kernel", [{"tensor": "grad_loss", "!=": 1.0}]))
            self.assertEqual([i["name"] for i in b["inputs"]], ["grad_loss", outputs[-1] if len(outputs) == 2
                                                                else "_input"])
            self.assertNotIn("then", b)
        op = registered("cross_entropy_synced", torch.bfloat16)
        self.assertIn(torch.Tag.cudagraph_unsafe, op.default.tags)
        self.assertEqual(str(op.default._schema), "kop_liger::cross_entropy_synced_bfloat16(Tensor _input, Tensor "
                                                  "target, int ignore_index=-100) -> (Tensor, Tensor)")
        x = torch.empty(37, 1000, dtype=torch.bfloat16, device="meta", requires_grad=True)
        loss, grad = op(x, torch.empty(37, dtype=torch.int64, device="meta"))
        (gx,) = torch.autograd.grad(loss, (x,), torch.empty_like(loss))
        self.assertEqual((tuple(loss.shape), tuple(grad.shape), tuple(gx.shape)), ((), (37, 1000), (37, 1000)))
        out = run_package(recorded_ce_synced_in_place, "kop_liger_pkg::cross_entropy_synced_", """
            x = torch.empty(6, 1000, device='meta', requires_grad=True)
            logits = x * 1.0
            loss = op(logits, torch.empty(6, dtype=torch.int64, device='meta'))
            (gx,) = torch.autograd.grad(loss, (x,), torch.empty((), device='meta'))
            print(op.default._schema, torch.Tag.cudagraph_unsafe in op.default.tags, tuple(gx.shape))
        """)
        self.assertEqual(out.strip(), "kop_liger_pkg::cross_entropy_synced_(Tensor(a!) _input, Tensor target, int "
                                      "ignore_index=-100) -> Tensor True (6, 1000)")
        with self.assertRaisesRegex(TypeError, "in_place and host_sync are True or False, got 1, False"):
            liger_ops.cross_entropy(in_place=1)

    def test_the_ce_package_loads_where_liger_and_triton_cannot_be_imported(self):
        out = run_package(recorded_ce, "kop_liger_pkg::cross_entropy", """
            x = torch.empty(6, 1000, device='meta', requires_grad=True)
            loss, grad, n = op(x, torch.empty(6, dtype=torch.int64, device='meta'), -1)
            (gx,) = torch.autograd.grad(loss, (x,), torch.empty((), device='meta'))
            print(op.default._schema, tuple(gx.shape))
        """)
        self.assertEqual(out.strip(), "kop_liger_pkg::cross_entropy(Tensor _input, Tensor target, int "
                                      "ignore_index=-100) -> (Tensor, Tensor, Tensor) (6, 1000)")


class RopeRecording(unittest.TestCase):
    """Liger's rope_forward / rope_backward, unchanged: ``q.transpose(1, 2).contiguous()`` is kernelop's permuted
    copy (q taken with its strides), the kernel rotates that copy in place, and ``q.transpose(1, 2)`` of it is an
    output returned as a permutation. The batch, head counts and head size are constexprs: one class per value
    listed, a batch of 1 included."""

    def setUp(self):
        liger()

    def test_forward_and_backward_record_from_ligers_host_functions(self):
        r = recorded_rope()
        d, b = r.doc, r.doc["backward"]
        self.assertEqual((d["kernel_name"], b["kernel_name"]), ("_triton_rope", "_triton_rope"))
        self.assertEqual(b["differentiable"], ["q", "k"])
        self.assertEqual([(i["name"], i.get("strided", False)) for i in d["inputs"]],
                         [("q", True), ("k", True), ("cos", False), ("sin", False)])
        self.assertEqual([(i["name"], i.get("strided", False)) for i in b["inputs"]],
                         [("grad_q_embed", True), ("grad_k_embed", True), ("cos", False), ("sin", False)])
        self.assertEqual(d["outputs"], [
            {"name": "q_embed", "shape": ["dim(q, 0)", "dim(q, 2)", "dim(q, 1)", "dim(q, 3)"], "dtype": "float32",
             "permute": [0, 2, 1, 3]},
            {"name": "k_embed", "shape": ["dim(q, 0)", "dim(q, 2)", "dim(k, 1)", "dim(q, 3)"], "dtype": "float32",
             "permute": [0, 2, 1, 3]}])
        self.assertEqual([o["permute"] for o in b["outputs"]], [[0, 2, 1, 3]] * 2)
        for doc, q in ((d, "q"), (b, "grad_q_embed")):
            # The copies come first, each a launch of kernelop's permuted copy, from the input to the output.
            self.assertEqual([(t["kernel_name"], t["from"], t.get("before")) for t in doc["then"]],
                             [("kop_permute_copy<T, 4>", {"x": q, "y": doc["outputs"][0]["name"]}, True),
                              ("kop_permute_copy<T, 4>", {"x": q.replace("q", "k"), "y": doc["outputs"][1]["name"]},
                               True)])
            # One class per batch listed (1 too), each config compiled with exactly that batch and requiring it.
            self.assertEqual(sorted({c["bs"] for c in doc["configs"]}), [1, 2, 3])
            for c in doc["configs"]:
                self.assertEqual((c["n_qh"], c["n_kh"], c["hd"], c["pad_n_kh"], c["BLOCK_SIZE"]), (4, 2, 64, 2, 4))
                self.assertIn(f"dim({q}, 0) == {c['bs']}", c["requires"])

    def test_meta_shapes_strides_autograd_and_refusals(self):
        op = rope_op(torch.bfloat16)
        for batch, layout in ((1, "contiguous"), (2, "hf"), (3, "contiguous")):
            q = torch.empty(batch, 4, 7, 64, dtype=torch.bfloat16, device="meta")
            k = torch.empty(batch, 2, 7, 64, dtype=torch.bfloat16, device="meta")
            if layout == "hf":  # a transposed view of (batch, seq, heads, head_dim): taken as it is
                q = torch.empty(batch, 7, 4, 64, dtype=torch.bfloat16, device="meta").transpose(1, 2)
            q.requires_grad_()
            k.requires_grad_()
            cos = torch.empty(7, 64, dtype=torch.bfloat16, device="meta")
            qe, ke = op(q, k, cos, cos)
            self.assertEqual((tuple(qe.shape), qe.stride(), tuple(ke.shape), ke.stride()),
                             ((batch, 4, 7, 64), (7 * 4 * 64, 64, 4 * 64, 1), (batch, 2, 7, 64),
                              (7 * 2 * 64, 64, 2 * 64, 1)))
            gq, gk = torch.autograd.grad((qe, ke), (q, k), (torch.empty_like(qe), torch.empty_like(ke)))
            self.assertEqual((tuple(gq.shape), tuple(gk.shape)), ((batch, 4, 7, 64), (batch, 2, 7, 64)))

        def call(qs=(2, 4, 7, 64), ks=(2, 2, 7, 64), cs=(7, 64), ss=(7, 64)):
            e = lambda s: torch.empty(s, dtype=torch.bfloat16, device="meta")  # noqa: E731
            return op(e(qs), e(ks), e(cs), e(ss))
        for kwargs, message in (({"qs": (4, 4, 7, 64), "ks": (4, 2, 7, 64)}, r"dim\(q, 0\) == 1\) \+ "),
                                ({"qs": (2, 8, 7, 64)}, r"dim\(q, 1\) == 4"),
                                ({"ks": (3, 2, 7, 64)}, r"dim\(k, 0\) == dim\(q, 0\)"),
                                ({"ks": (2, 2, 9, 64)}, r"dim\(k, 2\) == dim\(q, 2\)"),
                                ({"cs": (6, 64), "ss": (6, 64)}, r"dim\(cos, 0\) == dim\(k, 2\)"),
                                ({"ss": (7, 32)}, r"dim\(sin, 1\) == dim\(cos, 1\)"),
                                ({"cs": (1, 7, 64)}, r"rank\(cos\) == 2")):
            with self.assertRaisesRegex(RuntimeError, message, msg=kwargs):
                call(**kwargs)

    def test_in_place_as_ligers_on_hfs_views(self):
        # Recorded from examples laid out as HF's q and k: Liger's contiguous() is no copy, its kernel writes q and k,
        # and the q.transpose(1, 2) it returns is q: written results (docs/autograd.md), their layout required.
        r = recorded_rope_in_place()
        d, b = r.doc, r.doc["backward"]
        self.assertEqual([(i["name"], i.get("mutated", False), i.get("strided", False), i.get("result", False))
                          for i in d["inputs"]],
                         [("q", True, True, True), ("k", True, True, True), ("cos", False, False, False),
                          ("sin", False, False, False)])
        self.assertEqual((d["outputs"], d.get("then")), ([], None))  # no copy, no output: the kernel alone
        for t in ("q", "k"):
            for axis, stride in ((3, "1"), (1, f"dim({t}, 3)"), (2, f"dim({t}, 1) * dim({t}, 3)"),
                                 (0, f"dim({t}, 2) * dim({t}, 1) * dim({t}, 3)")):
                self.assertIn(f"select(dim({t}, {axis}) == 1, 1, stride({t}, {axis}) == {stride})", d["requires"])
        self.assertEqual([i["name"] for i in b["inputs"]], ["grad_q_out", "grad_k_out", "cos", "sin"])
        self.assertEqual([o["name"] for o in b["outputs"]], ["grad_q", "grad_k"])
        op = r.register()
        self.assertEqual(str(op.default._schema), "kop_liger::rope_(Tensor(a!) q, Tensor(b!) k, Tensor cos, "
                                                  "Tensor sin) -> ()")
        cos = torch.empty(7, 64, device="meta")
        pq = torch.empty(2, 7, 256, device="meta", requires_grad=True)
        pk = torch.empty(2, 7, 128, device="meta", requires_grad=True)
        q = (pq * 1.0).view(2, 7, 4, 64).transpose(1, 2)
        k = (pk * 1.0).view(2, 7, 2, 64).transpose(1, 2)
        self.assertIsNone(op(q, k, cos, cos))
        self.assertEqual((q.grad_fn.name(), q._version, q.stride()),
                         ("kop_liger::rope_Backward", 1, (1792, 64, 256, 1)))
        gq, gk = torch.autograd.grad((q.sum() + k.sum()), (pq, pk))
        self.assertEqual((tuple(gq.shape), tuple(gk.shape)), ((2, 7, 256), (2, 7, 128)))
        with self.assertRaisesRegex(RuntimeError, r"op kop_liger::rope_: the inputs break the requirement "
                                                  r"'select\(dim\(q, 1\) == 1, 1, stride\(q, 1\) == dim\(q, 3\)\)'"):
            op(torch.empty(2, 4, 7, 64, device="meta"), k.detach(), cos, cos)  # contiguous: not HF's layout

    def test_the_rope_package_trains_where_liger_and_triton_cannot_be_imported(self):
        out = run_package(recorded_rope, "kop_liger_pkg::rope", """
            q = torch.empty(1, 7, 4, 64, device='meta').transpose(1, 2).requires_grad_()
            k = torch.empty(1, 2, 7, 64, device='meta', requires_grad=True)
            c = torch.empty(7, 64, device='meta')
            qe, ke = op(q, k, c, c)
            gq, gk = torch.autograd.grad((qe, ke), (q, k), (torch.empty_like(qe), torch.empty_like(ke)))
            print(op.default._schema, qe.stride(), tuple(gk.shape))
        """)
        self.assertEqual(out.strip(), "kop_liger_pkg::rope(Tensor q, Tensor k, Tensor cos, Tensor sin) -> (Tensor, "
                                      "Tensor) (1792, 64, 256, 1) (1, 2, 7, 64)")


@unittest.skipUnless(CUDA, "needs a CUDA device")
def compiled_ce_trains(step):
    """`step(x, t)`, twice the mean cross entropy, compiled (fullgraph, dynamic), against torch's at two sizes."""
    step = torch.compile(step, fullgraph=True, dynamic=True)
    for rows in (3, 9):
        xs = torch.randn(rows, 1000, device="cuda", requires_grad=True)
        t = torch.randint(0, 1000, (rows,), device="cuda")
        t[0] = -100
        (g,) = torch.autograd.grad(step(xs, t), (xs,))
        tx = xs.detach().requires_grad_()
        (tg,) = torch.autograd.grad(torch.nn.functional.cross_entropy(tx, t) * 2, (tx,))
        torch.testing.assert_close(g, tg, rtol=1e-5, atol=1e-6)


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
        out = run_package(recorded, "kop_liger_pkg_gpu::rms_norm", """
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


    def test_cross_entropy_matches_ligers_autograd_function_and_torch(self):
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
            op = ce_op(dtype)
            for rows, vocab, ignored in ((4, 1000, 0), (37, 32000, 5), (8, 128256, 8), (3, 33, 1), (513, 1024, 100)):
                x = torch.randn(rows, vocab, device="cuda", dtype=dtype, requires_grad=True)
                target = torch.randint(0, vocab, (rows,), device="cuda")
                target[torch.randperm(rows, device="cuda")[:ignored]] = -100
                x0 = x.detach().clone()
                loss, grad, n = op(x, target)
                (gx,) = torch.autograd.grad(loss * 0.5, (x,))
                self.assertEqual(n.item(), rows - ignored)
                self.assertTrue(torch.equal(x.detach(), x0))  # the logits are kept (Liger's own overwrites them)
                lx = x.detach().clone().requires_grad_()
                lloss = LigerCrossEntropyFunction.apply(lx, target, None, -100)[0]
                (lgx,) = torch.autograd.grad(lloss * 0.5, (lx,))
                what = f"{dtype} {rows}x{vocab}, {ignored} ignored"
                if ignored == rows:  # a mean over no row: nan, as torch's (Liger's own says 0); a zero gradient
                    tx = x.detach().float().requires_grad_()
                    tloss = torch.nn.functional.cross_entropy(tx, target, ignore_index=-100)
                    (tgx,) = torch.autograd.grad(tloss * 0.5, (tx,))
                    self.assertTrue(loss.isnan().item() and tloss.isnan().item(), what)
                    self.assertEqual(lloss.item(), 0.0, what)
                    self.assertTrue(torch.equal(gx, torch.zeros_like(gx)) and torch.equal(tgx, torch.zeros_like(tgx)),
                                    what)
                    continue
                torch.testing.assert_close(loss, lloss, rtol=tol, atol=tol, msg=what)
                # The gradient is Liger's kernel's, scaled once by grad_output / n instead of by 1 / n in the kernel
                # and again by grad_output: one rounding step apart in bfloat16.
                step = 2 ** -7 if dtype == torch.bfloat16 else 1e-6
                torch.testing.assert_close(gx, lgx, rtol=step, atol=step * lgx.float().abs().max().item(), msg=what)
                tx = x.detach().float().requires_grad_()
                tloss = torch.nn.functional.cross_entropy(tx, target, ignore_index=-100)
                (tgx,) = torch.autograd.grad(tloss * 0.5, (tx,))
                torch.testing.assert_close(loss.float(), tloss, rtol=tol, atol=tol, msg=what)
                torch.testing.assert_close(gx.float(), tgx, rtol=tol, atol=tol / rows, msg=what)
            # Every target ignored, and another ignore_index.
            x = torch.randn(5, 1000, device="cuda", dtype=dtype, requires_grad=True)
            loss, _, n = op(x, torch.full((5,), 7, device="cuda"), 7)
            self.assertTrue(loss.isnan().item() and n.item() == 0)
            target = torch.tensor([3, -1, 7, -1, 0], device="cuda")
            loss, _, n = op(x, target, -1)
            want = torch.nn.functional.cross_entropy(x.detach().float(), target, ignore_index=-1)
            torch.testing.assert_close(loss.float(), want, rtol=tol, atol=tol)
            self.assertEqual(n.item(), 3)

    def test_cross_entropy_in_place_writes_ligers_gradient_over_the_logits(self):
        # As Liger's: the kernel leaves the gradient in the logits (the sum's: the mean's times the count), and no
        # copy of them is made, in the forward or, when the caller no longer holds them, in the backward.
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
            op = registered("cross_entropy_in_place", dtype)
            for rows, vocab, ignored in ((37, 32000, 5), (8, 128256, 8), (3, 33, 1), (513, 1024, 100)):
                x = torch.randn(rows, vocab, device="cuda", dtype=dtype, requires_grad=True)
                target = torch.randint(0, vocab, (rows,), device="cuda")
                target[torch.randperm(rows, device="cuda")[:ignored]] = -100
                lx = x.detach().clone().requires_grad_()
                LigerCrossEntropyFunction.apply(lx, target, None, -100)  # leaves its gradient in lx
                logits = x * 1.0
                loss, n = op(logits, target)
                what = f"{dtype} {rows}x{vocab}, {ignored} ignored"
                self.assertEqual(n.item(), rows - ignored, what)
                if ignored < rows:
                    step = 2 ** -7 if dtype == torch.bfloat16 else 1e-6
                    torch.testing.assert_close(logits.detach() / n, lx.detach(), rtol=step,
                                               atol=step * lx.detach().float().abs().max().item(), msg=what)
                (gx,) = torch.autograd.grad(loss * 0.5, (x,))
                tx = x.detach().float().requires_grad_()
                tloss = torch.nn.functional.cross_entropy(tx, target, ignore_index=-100)
                (tgx,) = torch.autograd.grad(tloss * 0.5, (tx,))
                if ignored == rows:
                    self.assertTrue(loss.isnan().item() and torch.equal(gx, torch.zeros_like(gx)), what)
                    continue
                torch.testing.assert_close(loss.float(), tloss, rtol=tol, atol=tol, msg=what)
                torch.testing.assert_close(gx.float(), tgx, rtol=tol, atol=tol / rows, msg=what)
        op = registered("cross_entropy_in_place", torch.bfloat16)
        x = torch.randn(1024, 32000, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        target = torch.randint(0, 32000, (1024,), device="cuda")
        size = x.numel() * x.element_size()

        def peak(step):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            return (torch.cuda.max_memory_allocated() - base) / size
        # The forward: the logits made in the step (x * 1.0) and the gradient over them are one buffer of the logits'
        # size, where the functional op's copy makes two.
        self.assertLess(peak(lambda: op(x * 1.0, target)), 1.05)
        functional = ce_op(torch.bfloat16)
        self.assertGreater(peak(lambda: functional(x * 1.0, target)), 1.95)
        op = registered("cross_entropy_in_place", torch.float32)
        compiled_ce_trains(lambda x, t: op(x * 1.0, t)[0] * 2)

    def test_cross_entropy_with_ligers_host_syncs_is_ligers_bit_for_bit(self):
        # Liger's own host code (host_sync=True): the same kernels with the same arguments give the same bits, the
        # loss as the last layer skips the backward's kernel (the gradient is the forward's, as Liger's), a scaled
        # loss runs it, and a batch with every target ignored has Liger's loss of 0 and a zero gradient.
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        for dtype in (torch.float32, torch.bfloat16):
            op = registered("cross_entropy_synced", dtype)
            in_place = registered("cross_entropy_synced_in_place", dtype)
            for rows, vocab, ignored in ((4, 1000, 0), (37, 32000, 5), (8, 128256, 8), (3, 33, 1), (513, 1024, 100)):
                x = torch.randn(rows, vocab, device="cuda", dtype=dtype, requires_grad=True)
                target = torch.randint(0, vocab, (rows,), device="cuda")
                target[torch.randperm(rows, device="cuda")[:ignored]] = -100
                what = f"{dtype} {rows}x{vocab}, {ignored} ignored"
                for scale in (None, 0.5):
                    lx = x.detach().clone().requires_grad_()
                    lloss = LigerCrossEntropyFunction.apply(lx, target, None, -100)[0]
                    (lgx,) = torch.autograd.grad(lloss if scale is None else lloss * scale, (lx,))
                    loss, grad = op(x, target)
                    (gx,) = torch.autograd.grad(loss if scale is None else loss * scale, (x,))
                    # The gradient: Liger's kernel with Liger's arguments, bit for bit. The loss: kernelop's sum of the
                    # per-row losses where Liger's calls torch.sum, in another order.
                    ulp = 2 ** -7 if dtype == torch.bfloat16 else 2 ** -20
                    torch.testing.assert_close(loss, lloss, rtol=ulp, atol=0, msg=what)
                    torch.testing.assert_close(gx, lgx, rtol=0, atol=0, msg=what)
                    if scale is None:
                        self.assertTrue(torch.equal(gx, grad), what)  # no kernel ran: the forward's gradient
                    logits = x * 1.0
                    lloss_ = in_place(logits, target)
                    (gx2,) = torch.autograd.grad(lloss_ if scale is None else lloss_ * scale, (x,))
                    torch.testing.assert_close(gx2, lgx, rtol=0, atol=0, msg=what)
                if ignored == rows:
                    self.assertEqual(loss.item(), 0.0, what)
                    self.assertTrue(torch.equal(gx, torch.zeros_like(gx)), what)
                    continue
                tx = x.detach().float().requires_grad_()
                tloss = torch.nn.functional.cross_entropy(tx, target, ignore_index=-100)
                tol = 1e-5 if dtype == torch.float32 else 1e-2
                torch.testing.assert_close(loss.float(), tloss, rtol=tol, atol=tol, msg=what)
        op = registered("cross_entropy_synced", torch.float32)
        x = torch.randn(16, 1000, device="cuda", requires_grad=True)
        target = torch.randint(0, 1000, (16,), device="cuda")
        torch.library.opcheck(op, (x, target, -100))
        compiled_ce_trains(lambda x, t: op(x, t)[0] * 2)
        # reduce-overhead: the op is tagged cudagraph_unsafe, so Inductor leaves it out of its graphs
        step = torch.compile(lambda x, t: op(x, t)[0] * 2, mode="reduce-overhead")
        for _ in range(3):
            (g,) = torch.autograd.grad(step(x, target), (x,))
        tx = x.detach().requires_grad_()
        (tg,) = torch.autograd.grad(torch.nn.functional.cross_entropy(tx, target) * 2, (tx,))
        torch.testing.assert_close(g, tg, rtol=1e-5, atol=1e-6)
        with self.assertRaisesRegex(RuntimeError, "reads the value of '.*' on the host at launch \\(a host sync, as "
                                                  "its library's .item\\(\\) / torch.equal\\), which a CUDA graph "
                                                  "cannot capture"):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                op(x, target)

    def test_cross_entropy_opcheck_graphs_and_compile(self):
        op = ce_op(torch.float32)
        x = torch.randn(16, 1000, device="cuda", requires_grad=True)
        target = torch.randint(0, 1000, (16,), device="cuda")
        torch.library.opcheck(op, (x, target, -100))
        compiled_ce_trains(lambda x, t: op(x, t)[0] * 2)

        def grads():
            loss, _, _ = op(x, target)
            return loss, torch.autograd.grad(loss, (x,))[0]
        grads()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # the count, the kernel, the mean and the backward's scale in one graph
            loss, gx = grads()
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            target.copy_(torch.randint(0, 1000, (16,), device="cuda"))
            target[:5] = -100
        graph.replay()
        torch.cuda.synchronize()
        want_loss, want_gx = grads()
        torch.testing.assert_close(loss, want_loss, rtol=0, atol=0)
        torch.testing.assert_close(gx, want_gx, rtol=0, atol=0)

    def test_rope_matches_ligers_autograd_function_and_torch(self):
        """Values and gradients against Liger's own Function and HF's formula, float32 and bfloat16, batches 1-3,
        ragged sequence lengths, q and k contiguous or as HF makes them (transposed views); q and k left intact."""
        from liger_kernel.ops.rope import LigerRopeFunction
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
            op = rope_op(dtype)
            for batch, seq, hf in ((1, 7, False), (2, 129, True), (3, 1, False), (2, 1000, False), (1, 33, True)):
                q, k, cos, sin = rope_inputs(batch, seq, dtype, hf, requires_grad=True)
                q0, k0 = q.detach().clone(), k.detach().clone()
                gq_out, gk_out = torch.randn_like(q), torch.randn_like(k)
                qe, ke = op(q, k, cos, sin)
                g0 = gq_out.clone()
                gq, gk = torch.autograd.grad((qe, ke), (q, k), (gq_out, gk_out))
                what = f"{dtype} batch {batch} seq {seq} hf {hf}"
                # q, k and the incoming gradient are left as they were
                self.assertTrue(torch.equal(q.detach(), q0) and torch.equal(k.detach(), k0), what)
                self.assertTrue(torch.equal(gq_out, g0), what)
                lq, lk = q0.clone().requires_grad_(), k0.clone().requires_grad_()
                lqe, lke = LigerRopeFunction.apply(lq, lk, cos, sin)  # Liger's own (rotates its inputs in place)
                # (and its backward the incoming gradients, when their transpose is contiguous: copies it is given)
                lgq, lgk = torch.autograd.grad((lqe, lke), (lq, lk), (gq_out.clone(), gk_out.clone()))
                for got, want in ((qe, lqe), (ke, lke), (gq, lgq), (gk, lgk)):
                    torch.testing.assert_close(got, want, rtol=0, atol=0, msg=what)
                for t, lt in ((qe, lqe), (ke, lke)):  # Liger's views' strides (a size-1 dim's is any)
                    self.assertEqual([st for st, n in zip(t.stride(), t.shape) if n > 1],
                                     [st for st, n in zip(lt.stride(), lt.shape) if n > 1], what)
                tq, tk = q0.float().requires_grad_(), k0.float().requires_grad_()
                rq, rk = rope_reference(tq, tk, cos, sin)
                rgq, rgk = torch.autograd.grad((rq, rk), (tq, tk), (gq_out.float(), gk_out.float()))
                for got, want in ((qe, rq), (ke, rk), (gq, rgq), (gk, rgk)):
                    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol * 2, msg=what)

    def test_rope_opcheck_graphs_and_compile(self):
        op = rope_op(torch.float32)
        q, k, cos, sin = rope_inputs(2, 9, torch.float32, True, requires_grad=True)
        torch.library.opcheck(op, (q, k, cos, sin))
        step = torch.compile(lambda a, b, c, s: sum(t.square().sum() for t in op(a, b, c, s)), fullgraph=True,
                             dynamic=True)
        for batch, seq in ((1, 5), (3, 17), (2, 64)):
            q, k, cos, sin = rope_inputs(batch, seq, torch.float32, batch == 3, requires_grad=True)
            gq, gk = torch.autograd.grad(step(q, k, cos, sin), (q, k))
            tq, tk = q.detach().requires_grad_(), k.detach().requires_grad_()
            rq, rk = rope_reference(tq, tk, cos, sin)
            rgq, rgk = torch.autograd.grad(rq.square().sum() + rk.square().sum(), (tq, tk))
            torch.testing.assert_close(gq, rgq, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(gk, rgk, rtol=1e-4, atol=1e-4)
        q, k, cos, sin = rope_inputs(2, 40, torch.float32, True)
        op(q, k, cos, sin)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            qe, ke = op(q, k, cos, sin)
        with torch.no_grad():
            q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        rq, rk = rope_reference(q, k, cos, sin)
        torch.testing.assert_close(qe, rq, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ke, rk, rtol=1e-5, atol=1e-5)

    def test_rope_in_place_matches_ligers_autograd_function_and_torch(self):
        """In place on HF's views as Liger's: the values left in q and k and the gradients of the projections against
        Liger's own Function and HF's formula, float32 and bfloat16, batches 1-3, ragged sequence lengths; then
        compiled (fullgraph, dynamic) and the package where Liger and Triton cannot be imported."""
        from liger_kernel.ops.rope import LigerRopeFunction
        for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
            op = registered("rope_in_place", dtype)
            for batch, seq in ((1, 7), (2, 129), (3, 1), (2, 1000)):
                pq, pk, views = hf_projections(batch, seq, dtype)
                _, _, cos, sin = rope_inputs(batch, seq, dtype, True)
                gq_out = torch.randn(batch, 4, seq, 64, device="cuda", dtype=dtype)
                gk_out = torch.randn(batch, 2, seq, 64, device="cuda", dtype=dtype)
                what = f"{dtype} batch {batch} seq {seq}"
                q, k = views()
                self.assertIsNone(op(q, k, cos, sin))
                gq, gk = torch.autograd.grad((q, k), (pq, pk), (gq_out, gk_out))
                lq, lk = views()
                lqe, lke = LigerRopeFunction.apply(lq, lk, cos, sin)
                lgq, lgk = torch.autograd.grad((lqe, lke), (pq, pk), (gq_out.clone(), gk_out.clone()))
                for got, want in ((q, lqe), (k, lke), (gq, lgq), (gk, lgk)):
                    torch.testing.assert_close(got, want, rtol=0, atol=0, msg=what)
                tq = pq.detach().float().view(batch, seq, 4, 64).transpose(1, 2).requires_grad_()
                tk = pk.detach().float().view(batch, seq, 2, 64).transpose(1, 2).requires_grad_()
                rq, rk = rope_reference(tq, tk, cos, sin)
                rgq, rgk = torch.autograd.grad((rq, rk), (tq, tk), (gq_out.float(), gk_out.float()))
                torch.testing.assert_close(q.float(), rq, rtol=tol, atol=tol * 2, msg=what)
                torch.testing.assert_close(gq.float().view(batch, seq, 4, 64).transpose(1, 2), rgq, rtol=tol,
                                           atol=tol * 2, msg=what)
                torch.testing.assert_close(gk.float().view(batch, seq, 2, 64).transpose(1, 2), rgk, rtol=tol,
                                           atol=tol * 2, msg=what)
        op = registered("rope_in_place", torch.float32)

        def step(a, b, c, s):
            q = (a * 1.0).view(a.shape[0], a.shape[1], 4, 64).transpose(1, 2)
            k = (b * 1.0).view(b.shape[0], b.shape[1], 2, 64).transpose(1, 2)
            op(q, k, c, s)
            return q.square().sum() + k.square().sum()
        compiled = torch.compile(step, fullgraph=True, dynamic=True)
        for batch, seq in ((1, 5), (3, 17), (2, 64)):
            pq, pk, _ = hf_projections(batch, seq, torch.float32)
            _, _, cos, sin = rope_inputs(batch, seq, torch.float32, True)
            got = torch.autograd.grad(compiled(pq, pk, cos, sin), (pq, pk))
            want = torch.autograd.grad(step(pq, pk, cos, sin), (pq, pk))
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        pq, pk, views = hf_projections(2, 40, torch.float32, requires_grad=False)
        _, _, cos, sin = rope_inputs(2, 40, torch.float32, True)
        q, k = views()
        q0, k0 = q.clone(), k.clone()
        graph = torch.cuda.CUDAGraph()
        op(q.clone(), k.clone(), cos, sin)  # warm
        with torch.cuda.graph(graph):
            op(q, k, cos, sin)
        q.copy_(q0)
        k.copy_(k0)
        graph.replay()
        torch.cuda.synchronize()
        rq, rk = rope_reference(q0, k0, cos, sin)
        torch.testing.assert_close(q, rq, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(k, rk, rtol=1e-5, atol=1e-5)
        out = run_package(recorded_rope_in_place, "kop_liger_pkg_gpu::rope_", """
            import sys
            sys.path.insert(0, {tests!r})
            from test_liger import hf_projections, rope_inputs, rope_reference
            pq, pk, views = hf_projections(3, 77, torch.float32)
            _, _, cos, sin = rope_inputs(3, 77, torch.float32, True)
            q, k = views()
            op(q, k, cos, sin)
            gq, gk = torch.autograd.grad(q.sum() + 2 * k.sum(), (pq, pk))
            tq = pq.detach().view(3, 77, 4, 64).transpose(1, 2).requires_grad_()
            tk = pk.detach().view(3, 77, 2, 64).transpose(1, 2).requires_grad_()
            rq, rk = rope_reference(tq, tk, cos, sin)
            rgq, rgk = torch.autograd.grad(rq.sum() + 2 * rk.sum(), (tq, tk))
            rgq, rgk = rgq.transpose(1, 2).reshape(3, 77, 256), rgk.transpose(1, 2).reshape(3, 77, 128)
            print(max((a - b).abs().max().item() for a, b in ((q, rq), (k, rk), (gq, rgq), (gk, rgk))))
        """.replace("{tests!r}", repr(str(ROOT / "tests" / "python"))))
        self.assertLess(float(out.split()[-1]), 1e-4)

    def test_the_rope_package_runs_where_liger_and_triton_cannot_be_imported(self):
        out = run_package(recorded_rope, "kop_liger_pkg_gpu::rope", """
            import sys
            sys.path.insert(0, {tests!r})
            from test_liger import rope_inputs, rope_reference
            q, k, cos, sin = rope_inputs(3, 77, torch.float32, True, requires_grad=True)
            qe, ke = op(q, k, cos, sin)
            gq, gk = torch.autograd.grad(qe.sum() + 2 * ke.sum(), (q, k))
            tq, tk = q.detach().requires_grad_(), k.detach().requires_grad_()
            rq, rk = rope_reference(tq, tk, cos, sin)
            rgq, rgk = torch.autograd.grad(rq.sum() + 2 * rk.sum(), (tq, tk))
            print(max((a - b).abs().max().item() for a, b in ((qe, rq), (ke, rk), (gq, rgq), (gk, rgk))))
        """.replace("{tests!r}", repr(str(ROOT / "tests" / "python"))))
        self.assertLess(float(out.split()[-1]), 1e-4)

    def test_the_ce_package_trains_where_liger_and_triton_cannot_be_imported(self):
        out = run_package(recorded_ce, "kop_liger_pkg_gpu::cross_entropy", """
            x = torch.randn(37, 32000, device='cuda', requires_grad=True)
            t = torch.randint(0, 32000, (37,), device='cuda')
            t[::4] = -100
            loss, _, _ = op(x, t)
            (gx,) = torch.autograd.grad(loss, (x,))
            tx = x.detach().requires_grad_()
            tl = torch.nn.functional.cross_entropy(tx, t)
            (tg,) = torch.autograd.grad(tl, (tx,))
            print(max((loss - tl).abs().item(), (gx - tg).abs().max().item() * 1000))
        """)
        self.assertLess(float(out.split()[-1]), 1e-3)


if __name__ == "__main__":
    run_tests(cpu=[Recording, SwiGLURecording, CrossEntropyRecording, RopeRecording], gpu=[Cuda], cuda=CUDA)
