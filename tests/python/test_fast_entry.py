"""kernelop's fast Python entry (Note [fast Python entry], python/src/fast_entry.cpp): the plain calls of a kernelop op
it makes itself; every other call goes to PyTorch's own entry, with PyTorch's results, exception types and messages
(CPU, meta tensors); on the GPU, the same values either way, under opcheck, torch.compile, export and CUDA graphs."""

import json
import pathlib
import unittest

import torch

import kernelop as ko
from kernelop_testing import run_tests, temp_dir
from kernelop import _kernelop_torch

CUDA = torch.cuda.is_available()
ARCHS = None if CUDA else ["sm_80"]
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

MIX_SOURCE = r"""
__global__ void mix(const float* x, float a, int k, bool neg, int n, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (neg ? -1.0f : 1.0f) * (x[i] * a + k);
}
"""
MIX_SPEC = {
    "kernel_name": "mix", "source_file": "mix.cu",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "a", "scalar": "float", "default": 0.5},
               {"name": "k", "scalar": "int", "default": 3}, {"name": "neg", "scalar": "bool", "default": False}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}],
    "geometry": {"elementwise": {"block": [128], "layout": "flat"}},
}
_ops = {}
_files = {}


def mix_op(name="kop_fe::mix"):
    """y = ±(x * a + k): a float, an int and a bool scalar, each with a default."""
    if name not in _ops:
        folder = pathlib.Path(temp_dir("kop_fe_"))
        (folder / "mix.cu").write_text(MIX_SOURCE)
        (folder / "mix.json").write_text(json.dumps({"op": name, **MIX_SPEC}))
        _files[name] = folder / "mix.json"
        _ops[name] = ko.register_spec_file(str(_files[name]), archs=ARCHS)
    return _ops[name]


def rms_norm_op():
    if "rms_norm" not in _ops:
        _ops["rms_norm"] = ko.register_spec_file(str(EXAMPLES / "autograd" / "rms_norm.json"), archs=ARCHS)
    return _ops["rms_norm"]


def outcome(fn, *args, **kwargs):
    """What a call gives: the results' shapes and dtypes, or the exception's type and first line."""
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (the outcome is what is compared)
        return ("raised", type(e).__name__, str(e).splitlines()[0])
    outs = out if isinstance(out, tuple) else (out,)
    return ("returned", tuple((tuple(t.shape), t.dtype, t.device.type) for t in outs), isinstance(out, tuple))


class Recorder(torch.Tensor):
    """A tensor subclass with its own __torch_function__: it must see kernelop's calls."""
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


class Mode(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


class Meta(unittest.TestCase):
    def test_installed_on_the_packet_and_its_default_overload(self):
        op = mix_op()
        for target in (op, op.default):
            entry = target._op
            self.assertTrue(_kernelop_torch.is_fast_entry(entry), target)
            self.assertFalse(_kernelop_torch.is_fast_entry(entry.fallback))
            self.assertEqual(hash(entry), hash(entry.fallback))  # OpOverload hashes as its _op: unchanged
            self.assertEqual(entry.__name__, entry.fallback.__name__)  # what the packet forwards
            self.assertIn("kop_fe::mix", repr(entry))
            self.assertFalse(entry.stale)
        self.assertIs(torch.ops.kop_fe.mix, op)
        entry = op.default._op
        again = ko.register_spec_file(str(_files["kop_fe::mix"]), archs=ARCHS)  # identical: no new registration
        self.assertIs(again, op)  # the same packet, its entry not wrapped twice
        self.assertIs(again.default._op, entry)
        self.assertTrue(_kernelop_torch.is_fast_entry(op.default._op))
        self.assertFalse(_kernelop_torch.is_fast_entry(op.default._op.fallback))

    def test_plain_calls_are_made_here_and_give_what_pytorchs_entry_gives(self):
        op = mix_op()
        x = torch.empty(3, 5, device="meta")
        param = torch.nn.Parameter(torch.empty(2, 7, device="meta"))  # __torch_function__ disabled: plain
        calls = [(x,), (x, 2.0), (x, 2), (x, 2.0, 4), (x, 2.0, -4, True), (x, 1.5, 0, False), (param,),
                 (torch.empty(0, device="meta"),), (torch.empty(4, device="meta", dtype=torch.float64),)]
        for target in (op, op.default):
            entry = target._op
            for args in calls:
                taken, passed = entry.taken, entry.passed
                got = outcome(target, *args)
                self.assertEqual(got, outcome(entry.fallback, *args), args)
                self.assertEqual((entry.taken - taken, entry.passed - passed), (1, 0), args)
        rms = rms_norm_op()
        x = torch.empty(4, 33, device="meta")
        w = torch.nn.Parameter(torch.empty(33, device="meta"))
        for args in ((x, w), (x, w, 1e-5), (x, w, 0)):
            taken = rms.default._op.taken
            got = outcome(rms.default, *args)
            self.assertEqual(got, outcome(rms.default._op.fallback, *args))
            self.assertEqual(got[0], "returned")
            self.assertTrue(got[2])  # two outputs: a tuple, as PyTorch's entry returns
            self.assertEqual(rms.default._op.taken - taken, 1)

    def test_every_other_call_goes_to_pytorchs_entry_with_its_messages(self):
        op = mix_op()
        x = torch.empty(3, 5, device="meta")
        corpus = [
            ((x,), {"a": 2.0}),                 # keywords
            ((), {"x": x}),
            ((x, True), {}),                    # a bool where a float goes
            ((x, 2.0, 1.5), {}),                # a float where an int goes
            ((x, 2.0, 2**70), {}),              # an int beyond int64
            ((x, 2.0, 3, 1), {}),               # an int where a bool goes
            ((x, "2"), {}),                     # a str
            ((x, None), {}),
            ((None,), {}),                      # None where a tensor goes
            ((3.0,), {}),                       # a number where a tensor goes
            ((x, torch.tensor(2.0)), {}),       # a tensor where a float goes
            ((), {}),                           # too few
            ((x, 1.0, 2, False, 4), {}),        # too many
            ((x, float("inf")), {}),            # inf is a plain float: taken here (not counted as passed)
        ]
        for args, kwargs in corpus:
            entry = op.default._op
            passed = entry.passed
            got = outcome(op.default, *args, **kwargs)
            self.assertEqual(got, outcome(entry.fallback, *args, **kwargs), (args, kwargs))
            if args[1:2] != (float("inf"),):
                self.assertEqual(entry.passed - passed, 1, (args, kwargs))

    def test_keyword_only_parameters_are_not_taken_by_position(self):
        spec = ko.KernelSpec(kernel_source=MIX_SOURCE, kernel_name="mix",
                             inputs=[ko.InputDecl("x", "float32"), ko.ScalarInput("a", float),
                                     ko.ScalarInput("k", int), ko.ScalarInput("neg", bool)],
                             outputs=[ko.OutputDecl("y", ko.SameAs("x"))], extras=[ko.Numel("x")],
                             geometry=ko.Elementwise(block=[128]))
        op = ko.cuda_kernel_op("kop_fe_kw::mix", spec, archs=ARCHS,
                               schema="(Tensor x, *, float a=0.5, int k=3, bool neg=False) -> Tensor")
        x = torch.empty(5, device="meta")
        entry = op.default._op
        self.assertTrue(_kernelop_torch.is_fast_entry(entry))
        for args, kwargs, taken in (((x,), {}, 1), ((x, 2.0), {}, 0), ((x,), {"a": 2.0}, 0),
                                    ((x, 2.0, 1, True), {}, 0)):
            before = entry.taken
            self.assertEqual(outcome(op.default, *args, **kwargs), outcome(entry.fallback, *args, **kwargs),
                             (args, kwargs))
            self.assertEqual(entry.taken - before, taken, (args, kwargs))
        self.assertEqual(outcome(op.default, x, 2.0)[:2], ("raised", "RuntimeError"))

    def test_named_tensors_go_to_pytorchs_entry(self):
        op = mix_op()
        named = torch.empty(4, names=("N",))  # a CPU tensor: meta tensors cannot be named
        passed = op.default._op.passed
        self.assertEqual(outcome(op.default, named), outcome(op.default._op.fallback, named))
        self.assertEqual(op.default._op.passed - passed, 1)

    def test_the_entry_is_not_instantiable_copies_are_itself_and_torchscript_knows_it(self):
        import copy
        op = mix_op()
        entry = op._op
        with self.assertRaises(TypeError):
            type(entry)()
        self.assertIs(copy.copy(entry), entry)
        self.assertIs(copy.deepcopy(entry), entry)
        self.assertEqual(entry.__module__, entry.fallback.__module__)
        self.assertEqual(entry.__doc__, entry.fallback.__doc__)

        def scripted(t: torch.Tensor) -> torch.Tensor:
            return torch.ops.kop_fe.mix(t, 2.0, 1, False)

        self.assertIn("kop_fe::mix", str(torch.jit.script(scripted).graph))

    def test_a_subclass_and_a_mode_with_torch_function_see_the_call(self):
        op = mix_op()
        r = torch.empty(4, device="meta").as_subclass(Recorder)
        Recorder.seen.clear()
        taken, passed = op._op.taken, op._op.passed
        y = op(r, 2.0)
        self.assertIn(op, Recorder.seen)
        self.assertIsInstance(y, Recorder)
        # PyTorch's entry runs __torch_function__, which calls the op again: PyTorch's entry once more
        self.assertEqual((op._op.taken - taken, op._op.passed - passed), (0, 2))
        plain = torch.empty(4, device="meta")
        with Mode() as mode:
            op.default(plain, 2.0)
        self.assertEqual(mode.seen, [op.default])

    def test_an_unregistered_op_raises_and_a_registration_again_works(self):
        op = mix_op("kop_fe_gone::mix")
        x = torch.empty(6, device="meta")
        self.assertEqual(op(x).shape, (6,))
        _kernelop_torch.unregister("kop_fe_gone::mix")
        _ops.pop("kop_fe_gone::mix")
        self.assertTrue(op._op.stale)
        for call in (lambda: op(x), lambda: op.default(x, a=1.0), lambda: op(torch.empty(2, device="meta"), "s")):
            with self.assertRaises(RuntimeError) as ctx:
                call()
            self.assertIn("op kop_fe_gone::mix is no longer registered (it was unregistered)", str(ctx.exception))
        again = mix_op("kop_fe_gone::mix")
        self.assertIsNot(again, op)  # a fresh packet: PyTorch's cached one belongs to the earlier registration
        self.assertFalse(again._op.stale)
        self.assertEqual(again(x, 1.0, 2).shape, (6,))
        self.assertEqual(again.default(x, a=1.0).shape, (6,))  # PyTorch's entry, of this registration
        # the earlier packet belongs to the earlier registration: every call through it says so
        for call in (lambda: op(x, 1.0), lambda: op.default(x, a=1.0)):
            with self.assertRaises(RuntimeError) as ctx:
                call()
            self.assertIn("op kop_fe_gone::mix was registered again after this torch.ops object was made",
                          str(ctx.exception))
        self.assertTrue(op._op.stale)
        self.assertNotIn(op, [getattr(torch.ops.kop_fe_gone, n) for n in torch.ops.kop_fe_gone])

    def test_autograd_through_the_fast_entry(self):
        rms = rms_norm_op()
        x = torch.empty(4, 40, device="meta", requires_grad=True)
        w = torch.nn.Parameter(torch.empty(40, device="meta"))
        taken = rms._op.taken
        y, rstd = rms(x, w)
        self.assertEqual(rms._op.taken - taken, 1)
        self.assertEqual(y.grad_fn.name(), "kernelop_autograd::rms_normBackward")
        gx, gw = torch.autograd.grad(y.sum(), [x, w])
        self.assertEqual((gx.shape, gw.shape), (x.shape, w.shape))


@unittest.skipUnless(CUDA, "no CUDA device")
class Cuda(unittest.TestCase):
    def test_values_agree_with_pytorchs_entry_and_with_pytorch(self):
        op = mix_op()
        x = torch.randn(1000, device="cuda")
        for args in ((x,), (x, 2.0), (x, -1.5, 7), (x, 0.25, -2, True), (x, 3, 1, False)):
            want = (-1 if (len(args) > 3 and args[3]) else 1) * (x * (args[1] if len(args) > 1 else 0.5)
                                                                 + (args[2] if len(args) > 2 else 3))
            torch.testing.assert_close(op(*args), want)
            torch.testing.assert_close(op.default._op.fallback(*args), want)
        rms = rms_norm_op()
        x, w = torch.randn(8, 512, device="cuda"), torch.nn.Parameter(torch.randn(512, device="cuda"))
        y, rstd = rms(x, w)
        y2, rstd2 = rms.default._op.fallback(x, w, 1e-6)
        torch.testing.assert_close((y, rstd), (y2, rstd2), rtol=0, atol=0)

    def test_opcheck_compile_export_and_cuda_graphs(self):
        op = mix_op()
        x = torch.randn(300, device="cuda")
        torch.library.opcheck(op.default, (x, 2.0, 3, True))
        fn = torch.compile(lambda t: op(torch.relu(t), 2.0, 1), fullgraph=True, dynamic=True)
        for n in (5, 77, 300):
            t = torch.randn(n, device="cuda")
            torch.testing.assert_close(fn(t), torch.relu(t) * 2.0 + 1)

        class M(torch.nn.Module):
            def forward(self, t):
                return op(t, 0.5, 2)

        ep = torch.export.export(M(), (x,))
        self.assertIn("kop_fe.mix", str(ep.graph))
        torch.testing.assert_close(ep.module()(x), x * 0.5 + 2)
        static = torch.randn(256, device="cuda")
        op(static, 1.0, 1)  # warm up outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = op(static, 3.0, 1)
        static.copy_(torch.arange(256.0, device="cuda"))
        g.replay()
        torch.testing.assert_close(out, torch.arange(256.0, device="cuda") * 3 + 1)


if __name__ == "__main__":
    run_tests(cpu=[Meta], gpu=[Cuda], cuda=CUDA)
