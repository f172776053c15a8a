"""Recording Triton and CuTe DSL launches against hostile input (issue "Trust, second pass").

CPU: launch locations in a clone whose folder is named "kernelop", a launch_fn that records another op (refused,
never a deadlock), more tactics than kernelop allows (refused before anything is compiled), launch parameters taken
from the inputs, hostile ``archs``, constexprs named like kernelop's own tunables, and user strings of 10 MB in
messages. The CuTe DSL cases are skipped (and counted as skipped) where nvidia-cutlass-dsl is not installed.
GPU: an op recorded from a folder named "kernelop" runs, and one set of architectures is compiled once.
"""

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

import torch
import triton
import triton.language as tl

import kernelop as ko
from expect import expect_error
from kernelop_testing import run_tests, temp_dir

try:
    from cutlass.cute.runtime import from_dlpack
    HAVE_CUTE = True
except ImportError:
    HAVE_CUTE = False

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
BIG = 10_000_000  # characters of a hostile user string
SMALL = 2_000  # the most a message about it may have


@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


@triton.jit
def divisible_kernel(X, Y, n, divisible: tl.constexpr):
    offs = tl.program_id(0) * 128 + tl.arange(0, 128)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * divisible, mask=offs < n)


@triton.jit
def scale_kernel(X, Y, n, SCALE: tl.constexpr):
    offs = tl.program_id(0) * 128 + tl.arange(0, 128)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * SCALE, mask=offs < n)


def copy_launch(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    copy_kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, y, x.numel(), BLOCK=128)
    return y


def _no_compile(*args, **kwargs):
    raise AssertionError("compiled before the spec was checked")


def no_compiling():
    """Any compilation (Triton's or the CuTe DSL's) fails the test."""
    patches = [mock.patch.object(ko._recording.compiling, "compile_binaries", _no_compile),
               mock.patch.object(triton, "compile", _no_compile)]
    if HAVE_CUTE:
        patches.append(mock.patch.object(ko._cutedsl, "_compile", _no_compile))
    stack = contextlib.ExitStack()
    for p in patches:
        stack.enter_context(p)
    return stack


def load_module_in_a_kernelop_folder(test, source):
    """Imports `source` from <tmp>/kernelop/<name>.py, as in a clone of kernelop (the default `git clone` folder)."""
    folder = temp_dir("hostile-", test)
    os.mkdir(os.path.join(folder, "kernelop"))
    path = os.path.join(folder, "kernelop", "user_launch.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"hostile_user_launch_{id(test)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = textwrap.dedent(source).split("\n")
    marks = {line.split("# MARK ")[1].strip(): i + 1 for i, line in enumerate(lines) if "# MARK " in line}
    return module, path, marks


class Locations(unittest.TestCase):
    SOURCE = """
        import torch, triton, triton.language as tl

        @triton.jit
        def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)

        def two_launches(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            z = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)  # MARK first
            copy_kernel[(1,)](y, z, x.numel(), BLOCK=128, bogus=1)  # MARK second
            return z

        def size_specialised(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            n = 4096 if x.shape[1] == 1031 else x.numel()  # MARK guard
            copy_kernel[(1,)](x, y, n, BLOCK=128)
            return y
    """

    def test_launch_locations_name_the_users_file_in_a_folder_named_kernelop(self):
        module, path, marks = load_module_in_a_kernelop_folder(self, self.SOURCE)
        msg = expect_error(self, ValueError, "passes bogus, which kernelop does not record", ko.record_plugin,
                           ko.triton(module.two_launches), op_name="kop_hr::two")
        self.assertIn(f"the launch at {path}:{marks['second']} passes bogus", msg)

    def test_condition_locations_name_the_users_file_in_a_folder_named_kernelop(self):
        module, path, marks = load_module_in_a_kernelop_folder(self, self.SOURCE)
        msg = expect_error(self, ValueError, "the code makes 'dim(x, 1)' equal 1031", ko.record_plugin,
                           ko.triton(module.size_specialised), op_name="kop_hr::guard")
        self.assertIn(f"(at {path}:{marks['guard']})", msg)


NESTED = r'''
import json, sys, threading
import torch, triton, triton.language as tl
import kernelop as ko

@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)

def inner(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)
    return y

def records_inside(x: torch.Tensor) -> torch.Tensor:
    ko.record_plugin(ko.triton(inner), op_name="kop_hn::inner")
    return inner(x)

def registers_inside(x: torch.Tensor) -> torch.Tensor:
    ko.custom_plugin(ko.triton(inner), op_name="kop_hn::inner_registered", archs=["sm_90"])
    return inner(x)

recorded_outside = ko.record_plugin(ko.triton(inner), op_name="kop_hn::recorded_outside")

def compiles_inside(x: torch.Tensor) -> torch.Tensor:
    recorded_outside.compile(["sm_90"])
    return inner(x)

def grid_records(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    def grid(meta):
        ko.record_plugin(ko.triton(inner), op_name="kop_hn::from_the_grid")
        return (1,)
    copy_kernel[grid](x, y, x.numel(), BLOCK=128)
    return y

worker = {}

def records_on_another_thread(x: torch.Tensor) -> torch.Tensor:
    def work():
        try:
            worker["op"] = ko.record_plugin(ko.triton(inner), op_name="kop_hn::worker").op_name
        except Exception as e:
            worker["error"] = f"{type(e).__name__}: {e}"
    t = threading.Thread(target=work)
    t.start()
    t.join()
    return inner(x)

results = {}
for fn in (records_inside, registers_inside, compiles_inside, grid_records, records_on_another_thread):
    try:
        results[fn.__name__] = "recorded " + ko.record_plugin(ko.triton(fn), op_name=f"kop_hn::{fn.__name__}").op_name
    except Exception as e:
        results[fn.__name__] = f"{type(e).__name__}: {e}"
results["worker"] = worker
if "--cute" in sys.argv:
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack
    sys.path.insert(0, sys.argv[sys.argv.index("--cute") + 1])
    import cutedsl_kernels as ck

    def cute_records_triton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ko.record_plugin(ko.triton(inner), op_name="kop_hn::inner_of_cute")
        return ck.vector_add(a, b)
    try:
        ko.record_plugin(ko.cutedsl(cute_records_triton), op_name="kop_hn::cute_outer")
        results["cute"] = "recorded"
    except Exception as e:
        results["cute"] = f"{type(e).__name__}: {e}"
print("RESULTS " + json.dumps(results))
'''


class Nesting(unittest.TestCase):
    def test_a_launch_fn_that_records_another_op_is_refused_not_deadlocked(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "nested.py")
            with open(script, "w") as f:
                f.write(NESTED)
            argv = [sys.executable, script] + (["--cute", EXAMPLES] if HAVE_CUTE else [])
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
            try:
                r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
            except subprocess.TimeoutExpired:
                self.fail("recording an op from a launch_fn hung (300 s)")
        line = next((x for x in r.stdout.split("\n") if x.startswith("RESULTS ")), None)
        self.assertIsNotNone(line, f"rc {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}")
        results = json.loads(line[len("RESULTS "):])
        outer = "kernelop.custom_plugin('kop_hn::{}')"
        for fn, inner in (("records_inside", "kernelop.custom_plugin('kop_hn::inner')"),
                          ("registers_inside", "kernelop.custom_plugin('kop_hn::inner_registered')"),
                          ("compiles_inside", "op kop_hn::recorded_outside (compiled, registered, checked or "
                                              "packaged)"),
                          ("grid_records", "kernelop.custom_plugin('kop_hn::from_the_grid')")):
            self.assertEqual(results[fn], f"ValueError: {inner} was called while kernelop records "
                             f"{outer.format(fn)} (from its launch_fn, grid function or meta_impl); an op's launch_fn "
                             "must not record, compile or register another op (it runs once, on fake tensors): record "
                             f"and register the other op outside launch_fn, before {outer.format(fn)}")
        # Another thread records on its own while this one records: no lock is held while user code runs.
        self.assertEqual(results["records_on_another_thread"], "recorded kop_hn::records_on_another_thread")
        self.assertEqual(results["worker"], {"op": "kop_hn::worker"})
        if HAVE_CUTE:
            self.assertIn("ValueError: kernelop.custom_plugin('kop_hn::inner_of_cute') was called while kernelop "
                          "records kernelop.custom_plugin('kop_hn::cute_outer')", results["cute"])


class Limits(unittest.TestCase):
    def test_too_many_tactics_are_refused_before_anything_is_compiled(self):
        # x 3 of Triton's specialisations: 258 tactics (blocks Triton can build: powers of two)
        configs = [{"BLOCK": 2 ** (4 + i % 8), "num_warps": 2 ** (i // 8 % 4), "num_stages": 2 + i // 32}
                   for i in range(86)]
        start = time.monotonic()
        with no_compiling():
            msg = expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::many'): 86 configs x 3 Triton "
                               "specialisations (divisible=2, 1, 0) make 258 tactics (tactic t is configs[t // 3]); "
                               "kernelop refuses the recorded spec before compiling: spec: configs: has 258 configs; "
                               "at most 256",
                               ko.custom_plugin, ko.triton(copy_launch, configs), op_name="kop_hr::many",
                               archs=["sm_90"])
        self.assertLess(time.monotonic() - start, 10, msg)
        # 85 configs make 255 tactics: recorded
        self.assertEqual(len(ko.record_plugin(ko.triton(copy_launch, configs[:85]), op_name="kop_hr::fewer")
                             .doc["configs"]), 255)

    @unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
    def test_too_many_cute_dsl_configs_are_refused_before_anything_is_compiled(self):
        sys.path.insert(0, EXAMPLES)
        import cutedsl_kernels as ck
        start = time.monotonic()
        with no_compiling():
            expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::many_cute'): 257 configs make 257 "
                         "tactics; kernelop refuses the recorded spec before compiling: spec: configs: has 257 "
                         "configs; at most 256", ko.record_plugin,
                         ko.cutedsl(ck.axpy, [{"TILE_N": 32 * (i + 1)} for i in range(257)]),
                         op_name="kop_hr::many_cute")
        self.assertLess(time.monotonic() - start, 10)



class LaunchParameters(unittest.TestCase):
    def test_compile_options_and_constexprs_from_the_inputs_are_refused_by_name(self):
        def warps_from_a_size(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128, num_warps=x.shape[0])
            return y
        msg = expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::warps'): the launch at ",
                           ko.record_plugin, ko.triton(warps_from_a_size, [{"BLOCK": 128}, {"BLOCK": 256}]),
                           op_name="kop_hr::warps")
        self.assertIn("sets the launch parameter 'num_warps' to a value computed from the inputs (a size or a scalar "
                      "input); num_warps must be a Python constant or come from configs", msg)

        def stages_from_a_scalar(x: torch.Tensor, s: int) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128, num_stages=s)
            return y
        expect_error(self, ValueError, "sets the launch parameter 'num_stages' to a value computed from the inputs",
                     ko.record_plugin, ko.triton(stages_from_a_scalar), op_name="kop_hr::stages")

        def warps_text(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128, num_warps="4")
            return y
        expect_error(self, ValueError, "sets the launch parameter 'num_warps' to str '4'; expected an int",
                     ko.record_plugin, ko.triton(warps_text), op_name="kop_hr::text")

        def block_from_a_scalar(x: torch.Tensor, b: int) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=b)
            return y
        expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::block'): constexpr 'BLOCK' gets a value "
                     "computed from the inputs (a size or a scalar input); it must be a Python constant, come from "
                     "configs (Triton compiles one kernel per value), be triton.next_power_of_2 of a size",
                     ko.record_plugin, ko.triton(block_from_a_scalar), op_name="kop_hr::block")

        def clusters_from_a_scalar(x: torch.Tensor, c: int) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128, num_ctas=c)
            return y
        expect_error(self, ValueError, "passes num_ctas, which kernelop does not record", ko.record_plugin,
                     ko.triton(clusters_from_a_scalar), op_name="kop_hr::ctas")

    def test_a_decision_on_an_int_scalars_value_is_named(self):
        def branches(x: torch.Tensor, w: int) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[(1,)](x, y, x.numel(), BLOCK=128 if w > 3 else 64)
            return y
        msg = expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::branch'): launch_fn decides on 'w > 3' "
                           "on the host (at ", ko.record_plugin, ko.triton(branches), op_name="kop_hr::branch")
        self.assertIn("test_hostile_recording.py:", msg)
        self.assertIn("kernelop records int scalars as unknown values", msg)
        self.assertNotIn("GuardOnDataDependentSymNode", msg)

        def grid_branches(x: torch.Tensor, w: int) -> torch.Tensor:
            y = torch.empty_like(x)
            copy_kernel[lambda m: (1 if w > 3 else 2,)](x, y, x.numel(), BLOCK=128)
            return y
        expect_error(self, ValueError, "the grid function decides on 'w > 3' on the host", ko.record_plugin,
                     ko.triton(grid_branches), op_name="kop_hr::grid_branch")

    @unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
    def test_a_cute_dsl_constexpr_from_the_inputs_is_refused_by_name(self):
        sys.path.insert(0, EXAMPLES)
        import cutedsl_kernels as ck

        def tile_from_a_size(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
            out = torch.empty_like(x)
            ck.axpy_host(from_dlpack(x), from_dlpack(y), from_dlpack(out), alpha, TILE_N=x.shape[1])
            return out
        expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::tile'): Constexpr 'TILE_N' gets a value "
                     "computed from the inputs (a size or a scalar input); it must be a Python constant or come from "
                     "configs", ko.record_plugin, ko.cutedsl(tile_from_a_size), op_name="kop_hr::tile")


class Architectures(unittest.TestCase):
    def test_hostile_archs_are_refused_before_anything_is_compiled(self):
        r = ko.record_plugin(ko.triton(copy_launch), op_name="kop_hr::archs")
        cases = [([], ValueError, "op kop_hr::archs: argument 'archs' is empty; expected a non-empty list of "
                                  "architectures such as ['sm_80', 'sm_90'], got []"),
                 ("sm_90", TypeError, "op kop_hr::archs: argument 'archs' must be a list of architectures such as "
                                      "['sm_80', 'sm_90'], got str 'sm_90'; write ['sm_90']"),
                 (90, TypeError, "argument 'archs' must be a list of architectures such as ['sm_80', 'sm_90'], got "
                                 "int 90"),
                 ([90], TypeError, "op kop_hr::archs: archs[0] is int 90; expected an architecture string, 'sm_NN' "
                                   "such as 'sm_90'"),
                 ([True], TypeError, "archs[0] is bool True"),
                 (["sm_-90"], ValueError, "op kop_hr::archs: architecture 'sm_-90' is invalid for Triton (archs[0]); "
                                          "expected 'sm_NN' such as 'sm_90'"),
                 (["sm_090"], ValueError, "architecture 'sm_090' is invalid for Triton (archs[0])"),
                 (["sm_90a"], ValueError, "architecture 'sm_90a' is invalid for Triton (archs[0])"),
                 (["sm_80", "sm_90", "sm_80"], ValueError, "op kop_hr::archs: an architecture is listed twice in "
                                                           "archs: 'sm_80'"),
                 (["sm_" + "9" * BIG], ValueError, "is invalid for Triton")]
        with no_compiling():
            for archs, exc, needle in cases:
                msg = expect_error(self, exc, needle, r.compile, archs)
                self.assertLess(len(msg), SMALL)
            # custom_plugin checks them before recording
            expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::archs2'): argument 'archs' is empty",
                         ko.custom_plugin, ko.triton(copy_launch), op_name="kop_hr::archs2", archs=[])
            expect_error(self, ValueError, "kernelop.custom_plugin('copy_launch'): an architecture is listed twice",
                         ko.custom_plugin, ko.triton(copy_launch), archs=("sm_90", "sm_90"))

    def test_binaries_are_kept_per_set_of_architectures(self):
        r = ko.record_plugin(ko.triton(copy_launch), op_name="kop_hr::per_archs")
        self.assertEqual({b.arch for b in r.compile(["sm_90"])}, {"sm_90a", "compute_90a"})
        self.assertEqual({b.arch for b in r.compile()}, {"sm_80", "compute_80", "sm_90a"})  # the default ones
        with no_compiling():
            self.assertEqual({b.arch for b in r.compile(("sm_90",))}, {"sm_90a", "compute_90a"})  # kept, not again

    @unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
    def test_hostile_cute_dsl_archs_are_refused(self):
        sys.path.insert(0, EXAMPLES)
        import cutedsl_kernels as ck
        expect_error(self, ValueError, "kernelop.cutedsl: argument 'arch' is empty", ko.cutedsl, ck.axpy, None, [])
        expect_error(self, TypeError, "kernelop.cutedsl: arch[1] is int 90", ko.cutedsl, ck.axpy, None,
                     ["sm_80", 90])
        expect_error(self, ValueError, "kernelop.cutedsl: architecture 'sm_-90a' is invalid for the CuTe "
                     "DSL", ko.cutedsl, ck.axpy, None, "sm_-90a")
        r = ck.recorded("kop_hr_cd")["vector_add"]
        with no_compiling():
            expect_error(self, ValueError, "op kop_hr_cd::vector_add: argument 'archs' is empty", r.compile, [])
            expect_error(self, ValueError, "an architecture is listed twice in archs: 'sm_90a'", r.compile,
                         ["sm_90a", "sm_90a"])


class Names(unittest.TestCase):
    def test_a_constexpr_named_like_a_tunable_kernelop_adds_is_refused_before_compiling(self):
        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            divisible_kernel[(1,)](x, y, x.numel(), divisible=1)
            return y
        with no_compiling():
            expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::div'): the configs set divisible_kernel's "
                         "constexpr 'divisible', but 'divisible' is the name of a tunable kernelop gives every Triton "
                         "tactic", ko.custom_plugin, ko.triton(launch, [{"divisible": 1}, {"divisible": 2}]),
                         op_name="kop_hr::div", archs=["sm_90"])
            # Not tuned, it is compiled in and takes no tunable's name.
            self.assertEqual(ko.record_plugin(ko.triton(launch), op_name="kop_hr::div1").doc["tunables"],
                             ["num_warps", "num_stages", "divisible"])

        def takes_num_warps(x: torch.Tensor, num_warps: int) -> torch.Tensor:
            return copy_launch(x)
        expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::nw'): launch_fn's parameter 'num_warps' has "
                     "the name of a tunable kernelop gives every Triton tactic", ko.record_plugin,
                     ko.triton(takes_num_warps), op_name="kop_hr::nw")

        def takes_block(x: torch.Tensor, BLOCK: int = 4) -> torch.Tensor:
            return copy_launch(x)
        with no_compiling():
            expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::block_input'): 2 configs x 3 Triton "
                         "specialisations (divisible=2, 1, 0) make 6 tactics (tactic t is configs[t // 3]); kernelop "
                         "refuses the recorded spec before compiling: op kop_hr::block_input: tunables[0].name: "
                         "'BLOCK' is also an input's name",
                         ko.custom_plugin, ko.triton(takes_block, [{"BLOCK": 128}, {"BLOCK": 256}]),
                         op_name="kop_hr::block_input", archs=["sm_90"])

    def test_a_config_that_keeps_a_launch_value_that_is_not_an_int_is_refused(self):
        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            scale_kernel[(1,)](x, y, x.numel(), SCALE=0.5)
            return y
        with no_compiling():
            expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::scale'): configs[1] does not set 'SCALE', "
                         "and the value the launch passes for it, 0.5, is not an int", ko.custom_plugin,
                         ko.triton(launch, [{"SCALE": 2}, {"num_warps": 8}]), op_name="kop_hr::scale",
                         archs=["sm_90"])

    def test_an_invalid_op_name_is_refused_before_compiling(self):
        with no_compiling():
            expect_error(self, ValueError, "op name 'no namespace' is invalid", ko.custom_plugin,
                         ko.triton(copy_launch), op_name="no namespace", archs=["sm_90"])
            expect_error(self, TypeError, "kernelop.custom_plugin: op_name must be a str such as 'my_ns::my_op', got "
                         "int 7", ko.custom_plugin, ko.triton(copy_launch), op_name=7)


class LongStrings(unittest.TestCase):
    def check_short(self, msg, op="kop_hr::"):
        self.assertLess(len(msg), SMALL, msg[:SMALL])
        self.assertIn(op, msg)

    def test_a_10_mb_config_key_or_value_is_cut_in_messages(self):
        big = "K" * BIG
        msg = expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::key'): configs[0] sets KKK",
                           ko.record_plugin, ko.triton(copy_launch, [{big: 1}]), op_name="kop_hr::key")
        self.check_short(msg)
        self.assertIn(f"({BIG} characters)", msg)
        self.check_short(expect_error(self, TypeError, "kernelop.triton: configs[0] has key ('KKK", ko.triton,
                                      copy_launch, [{(big,): 1}]), "kernelop.triton")
        self.check_short(expect_error(self, TypeError, "config values are ints or bools", ko.triton, copy_launch,
                                      [{"BLOCK": big}]), "kernelop.triton")

    def test_a_10_mb_op_name_or_parameter_name_is_cut_in_messages(self):
        def no_launch(x: torch.Tensor) -> torch.Tensor:
            return torch.empty_like(x)
        self.check_short(expect_error(self, ValueError, "launch_fn launched no Triton kernel", ko.record_plugin,
                                      ko.triton(no_launch), op_name="kop_hr::" + "N" * BIG))
        namespace = {"torch": torch}
        exec(f"def long_parameter(x: torch.Tensor, {'p' * BIG}: list) -> torch.Tensor:\n    return x", namespace)
        self.check_short(expect_error(self, TypeError, "has type hint <class 'list'>", ko.record_plugin,
                                      ko.triton(namespace["long_parameter"]), op_name="kop_hr::param"))

    def test_a_10_mb_constexpr_name_is_cut_in_messages(self):
        name = "C" * BIG
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "long_constexpr.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent(f"""
                    import torch, triton, triton.language as tl

                    @triton.jit
                    def long_kernel(X, Y, n, {name}: tl.constexpr):
                        offs = tl.program_id(0) * 128 + tl.arange(0, 128)
                        tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)

                    def launch(x: torch.Tensor) -> torch.Tensor:
                        y = torch.empty_like(x)
                        long_kernel[(1,)](x, y, x.numel(), {name}=1)
                        return y
                """))
            spec = importlib.util.spec_from_file_location("hostile_long_constexpr", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.check_short(expect_error(self, ValueError, "configs[0] sets BLOK, which long_kernel has no constexpr "
                                          "of (its constexprs: CCC", ko.record_plugin,
                                          ko.triton(module.launch, [{"BLOK": 1}]), op_name="kop_hr::long"))

    @unittest.skipUnless(HAVE_CUTE, "nvidia-cutlass-dsl is not installed")
    def test_a_10_mb_cute_dsl_config_key_is_cut_in_messages(self):
        sys.path.insert(0, EXAMPLES)
        import cutedsl_kernels as ck
        self.check_short(expect_error(self, ValueError, "kernelop.custom_plugin('kop_hr::cute_key'): configs[0] sets "
                                      "KKK", ko.record_plugin, ko.cutedsl(ck.axpy, [{"K" * BIG: 1}]),
                                      op_name="kop_hr::cute_key"))


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class Cuda(unittest.TestCase):
    def test_an_op_recorded_in_a_folder_named_kernelop_runs_and_compiles_once_per_archs(self):
        module, _, _ = load_module_in_a_kernelop_folder(self, Locations.SOURCE)

        def launch(x: torch.Tensor) -> torch.Tensor:
            y = torch.empty_like(x)
            module.copy_kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, y, x.numel(), BLOCK=128)
            return y
        recorded = ko.record_plugin(ko.triton(launch, [{"BLOCK": 128}, {"BLOCK": 256}]), op_name="kop_hr_gpu::copy")
        with tempfile.TemporaryDirectory() as d:
            op = recorded.register()
            # the same archs: compiled once
            with mock.patch.object(ko._recording.compiling, "compile_binaries", _no_compile):
                recorded.build_package(os.path.join(d, "copy.kop"))
        for shape in ((3, 5), (64, 1000)):
            x = torch.randn(shape, device="cuda")
            torch.testing.assert_close(op(x), x)


CPU_CLASSES = [Locations, Nesting, Limits, LaunchParameters, Architectures, Names, LongStrings]

if __name__ == "__main__":
    run_tests(cpu=CPU_CLASSES, gpu=[Cuda], cuda=torch.cuda.is_available())
