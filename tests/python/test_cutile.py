"""cuTile kernels as kernelop ops (kernelop.cutile / custom_plugin / record_plugin).

CPU (needs cuda-tile and its tileiras): the recorded spec (tensors as cuTile arrays: pointer, sizes and strides;
scalars; ct.Constant values compiled in, configs as tactics; the grid as expressions of the sizes; the block each
CUBIN requires, per architecture), the inputs a kernel writes found in its Tile IR, CUBINs for sm_80, sm_90 and sm_100
checked in C++ against the CUBIN's own parameter records and .reqntid (tampered specs refused), the Meta kernel,
packages loaded where cuda.tile cannot be imported, and every refusal message.
GPU (needs no cuTile: it runs the packages built on the CPU machine, or builds them when cuTile is there): every
tactic of every example against PyTorch at ragged sizes, CUDA graphs, torch.compile, opcheck, in-place ops.
"""

import dataclasses
import json
import os
import pathlib
import random
import sys
import tempfile
import unittest

import torch

import kernelop as ko
from expect import expect_error
from isolated import run_python_without
from kernelop_testing import example_packages, replay_with_new_input, run_tests
from tactic_pins import each_tactic
from kernelop import _kernelop

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
try:
    import cuda.tile as ct  # noqa: F401 - whether cuTile is installed
    import cutile_kernels as ck
    import cutile_test_kernels as tk
    import cutile_view_kernels as vk
    from kernelop._cutile import written_parameters
    HAVE_CUTILE = True
except ImportError:
    HAVE_CUTILE = False

CUDA = torch.cuda.is_available()
NAMES = ("scaled_add", "softmax", "matmul")
TEST_NAMES = ("add_one_", "copy_count", "store_to_chosen", "ping_pong", "reduce_into", "scatter", "flat_view",
              "transposed")
_recorded = {}


def recorded():
    if not _recorded:
        _recorded.update(ck.recorded("kop_ct"))
    return _recorded


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="meta")


@unittest.skipUnless(HAVE_CUTILE, "cuda-tile is not installed")
class Recording(unittest.TestCase):
    def test_tensors_are_arrays_of_pointer_sizes_and_strides(self):
        doc = recorded()["scaled_add"].doc
        self.assertEqual(doc["cutile"], {"version": "1.7.0"})
        # each array's sizes and strides as expressions of the inputs' sizes (out is shaped like a)
        self.assertEqual(doc["params"], ["a", {"expr": "dim(a, 0)"}, {"expr": "1"},
                                         "b", {"expr": "dim(b, 0)"}, {"expr": "1"},
                                         "out", {"expr": "dim(a, 0)"}, {"expr": "1"}, "alpha"])
        self.assertEqual(doc["inputs"], [{"name": "a", "dtype": "float32"}, {"name": "b", "dtype": "float32"},
                                         {"name": "alpha", "scalar": "float"}])
        # the export assumes every array 16-byte aligned: required of inputs, declared of the output (kernelop
        # allocates it so; a caller's buffer is checked at launch)
        self.assertEqual(doc["outputs"], [{"name": "out", "shape": {"same_as": "a"}, "dtype": "float32", "align": 16}])
        # cdiv(numel, 1024) blocks of the CUBIN's own 128 threads; inputs aligned as the export assumes
        self.assertEqual(doc["geometry"]["custom"], {"grid": ["-1 * (-1 * dim(a, 0) // 1024)", "1", "1"],
                                                     "block": ["128", "1", "1"], "shared_mem": "0"})
        self.assertEqual(doc["requires"], ["rank(a) == 1", "rank(b) == 1", "aligned(a, 16)", "aligned(b, 16)"])

    def test_configs_set_constants_each_a_tactic(self):
        doc = recorded()["softmax"].doc
        self.assertEqual(doc["tunables"], ["TILE"])
        self.assertEqual(doc["configs"], [{"TILE": 256, "requires": ["dim(x, 1) <= 256"]},
                                          {"TILE": 1024, "requires": ["dim(x, 1) <= 1024"]},
                                          {"TILE": 4096, "requires": ["dim(x, 1) <= 4096"]}])
        self.assertIn("dim(x, 1) <= 4096", doc["requires"])  # launch_fn's assert

    def test_the_block_is_each_architectures_own(self):
        # cuTile's compiler gives the matmul two warp groups on sm_100 (and sm_110) and one elsewhere: sm_120, where
        # no CUBIN runs and the driver compiles the Tile IR image, too (probed with tileiras, not shipped)
        doc = recorded()["matmul"].doc
        self.assertEqual(doc["geometry"]["custom"]["block"],
                         ["select(arch() >= 120, 128, select(arch() >= 100, 256, 128))", "1", "1"])
        only = ko.record_plugin(ko.cutile(ck.matmul, tileir=False), op_name="kop_ct_blk::matmul",
                                example_inputs=ck.examples()[ck.matmul])
        self.assertEqual(only.doc["geometry"]["custom"]["block"], ["select(arch() >= 100, 256, 128)", "1", "1"])
        self.assertEqual(doc["geometry"]["custom"]["grid"],
                         ["-1 * (-1 * dim(a, 0) // 64)", "-1 * (-1 * dim(b, 1) // 64)", "1"])
        self.assertEqual(doc["outputs"][0]["shape"], ["dim(a, 0)", "dim(b, 1)"])
        self.assertEqual(doc["inputs"][0]["dtype"], "float16")

    def test_scalar_inputs_and_int_scalars(self):
        r = ko.record_plugin(ko.cutile(tk.fill), example_inputs={"x": meta(1000)})
        self.assertEqual(r.doc["params"], ["out", {"expr": "dim(x, 0)"}, {"expr": "1"}, "value", "n"])
        self.assertEqual(r.doc["inputs"][1:], [{"name": "value", "scalar": "float"}, {"name": "n", "scalar": "int"}])

    def test_views_are_passed_with_their_own_sizes_and_strides(self):
        x = {"x": meta(64, 100)}
        # out.view(-1): one array of numel elements, whatever the rank (no rank requirement)
        r = ko.record_plugin(ko.cutile(vk.flat_view), example_inputs=x)
        self.assertEqual(r.doc["params"], ["out", {"expr": "numel(x)"}, {"expr": "1"}])
        self.assertNotIn("requires", r.doc)
        # x.t(): the sizes and strides swapped; the rank it reads is required
        r = ko.record_plugin(ko.cutile(vk.transposed), example_inputs=x)
        self.assertEqual(r.doc["params"][:5], ["x", {"expr": "dim(x, 1)"}, {"expr": "dim(x, 0)"}, {"expr": "1"},
                                               {"expr": "dim(x, 1)"}])
        self.assertEqual(r.doc["requires"], ["rank(x) == 2", "aligned(x, 16)"])
        r.check()
        expect_error(self, ValueError, "copy2d_kernel's argument 'src' is a view of 'x' at an offset",
                     ko.record_plugin, ko.cutile(vk.sliced), example_inputs=x)

    def test_a_kernel_writing_its_input_makes_it_mutated(self):
        r = ko.record_plugin(ko.cutile(tk.add_one_), example_inputs={"x": meta(1000)})
        self.assertEqual(r.doc["inputs"], [{"name": "x", "dtype": "float32", "mutated": True}])
        self.assertEqual(r.doc["outputs"], [])
        # an atomic on an input writes it too; an input only read stays read-only
        r = ko.record_plugin(ko.cutile(tk.copy_count),
                             example_inputs={"src": meta(1000), "counter": meta(1, dtype=torch.int32)})
        self.assertEqual(r.doc["inputs"], [{"name": "src", "dtype": "float32"},
                                           {"name": "counter", "dtype": "int32", "mutated": True}])
        op = r.register()
        self.assertIn("Tensor(a!) counter", str(op.default._schema))
        self.assertNotIn("Tensor(a!) src", str(op.default._schema))

    def test_writes_through_branches_loops_reductions_and_scatters(self):
        x, i = meta(1000), meta(1000, dtype=torch.int32)
        mutated = {}
        for fn, ex in ((tk.store_to_chosen, {"x": x, "y": x}), (tk.ping_pong, {"x": x, "y": x}),
                       (tk.reduce_into, {"x": x, "acc": x}), (tk.scatter, {"x": x, "idx": i}),
                       (tk.chosen_in_a_loop, {"x": x, "y": x}), (tk.sum_then_swap, {"x": x, "y": x}),
                       (tk.while_swap, {"x": x, "y": x})):
            r = ko.record_plugin(ko.cutile(fn), example_inputs=ex)
            mutated[fn.__name__] = sorted(t["name"] for t in r.doc["inputs"] if t.get("mutated"))
        self.assertEqual(mutated, {"store_to_chosen": ["y"],  # the else branch's
                                   "ping_pong": ["x", "y"],  # swapped every iteration
                                   "reduce_into": ["acc"],  # atomic_red_view_tko
                                   "scatter": [],  # idx is only read: out is written through its values
                                   "chosen_in_a_loop": ["x", "y"],  # a break inside an if
                                   "sum_then_swap": ["x", "y"],  # a reduction's region inside the loop
                                   "while_swap": ["x", "y"]})  # a while loop's carried values

    def test_written_parameters_follow_views_offsets_and_loops(self):
        head = "entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<ptr<f32>>, %arg3: tile<ptr<i32>>) {\n"
        view = ("  %tv = make_tensor_view %arg2, shape = [%arg1], strides = [1] : tile<i32> -> tensor_view<?xf32>\n"
                "  %pv = make_partition_view %tv : partition_view<tile=(8)>\n"
                "  %t, %tok = load_view_tko weak %pv[%arg1] token = %0 : x -> y\n")
        self.assertEqual(written_parameters(head + view + "  %4 = store_view_tko weak %t, %pv[%arg1] token = %0 : "
                                            "a, b -> token\n}")[0], {2})
        offset = "  %o = offset %arg3, %arg1 : tile<ptr<i32>>, tile<i32> -> tile<ptr<i32>>\n"
        self.assertEqual(written_parameters(head + offset + "  %r, %k = atomic_rmw_tko acq_rel device %o, addi, "
                                            "%arg1 token=%0 : x\n}")[0], {3})
        loop = ("  %r = for %i in (%arg1 to %arg1, step %arg1) : tile<i32> iter_values(%p = %arg0) -> (tile<ptr>) {\n"
                "    %q = offset %p, %i : x\n    %s = store_ptr_tko weak %q, %arg1 token=%0 : x\n"
                "    continue %q : x\n  }\n")
        self.assertEqual(written_parameters(head + loop + "}")[0], {0})
        # a pointer whose origin is not in the text: every pointer parameter, and the line named
        written, lines = written_parameters(head + "  %s = store_ptr_tko weak %mystery, %arg1 token=%0 : x\n}")
        self.assertEqual(written, {0, 2, 3})
        self.assertEqual(len(lines), 1)
        self.assertEqual(written_parameters(head + view + "}")[0], set())  # loads only


@unittest.skipUnless(HAVE_CUTILE, "cuda-tile is not installed")
class Refusals(unittest.TestCase):
    def test_what_cannot_be_recorded_is_named(self):
        x = {"a": meta(1000)}
        cases = [
            (tk.on_the_default_stream, "runs on 0; kernelop launches on the caller's stream, which launch_fn names "
                                       "torch.cuda.current_stream()"),
            (tk.launches_twice, "launch_fn made 2 ct.launch calls; kernelop records one launch per cuTile op"),
            (tk.launches_nothing, "launch_fn launched no cuTile kernel"),
            (tk.not_a_kernel, "not a @ct.kernel"),
            (tk.constant_from_a_size, "ct.Constant 'TILE' gets a value computed from the inputs"),
            (tk.wrong_arity, "does not match add_one_kernel's parameters"),
            (tk.grid_of_a_float, "grid axis 0 of the launch at"),
            (tk.bool_argument, "flag_kernel's argument 'flag' is a bool; pass it as a ct.Constant"),
            (tk.static_shape, "compiles sizes or strides in (static_shape_dims / static_stride_dims)"),
            (tk.clustered, "cluster_kernel is built for clusters (num_ctas=2)"),
            (tk.huge_int, "fill_kernel's argument 'n' is 1099511627776, beyond int32"),
            (tk.launched_by_name, "launch_fn raised TypeError while kernelop recorded it on fake tensors with "
                                  "symbolic sizes: Unsupported stream type "
                                  "'torch_cuda_current_stream_while_kernelop_records'"),
            (tk.reads_the_stream, "torch.cuda.current_stream() stands for the caller's stream and has no attribute "
                                  "'cuda_stream'"),
        ]
        for fn, needle in cases:
            with self.subTest(fn.__name__):
                expect_error(self, ValueError, needle, ko.record_plugin, ko.cutile(fn), example_inputs=x)
        expect_error(self, ValueError, "add_one_kernel's argument 'x' is a 0-dim tensor, which cuTile's compiler does "
                     "not take", ko.record_plugin, ko.cutile(tk.rank0), example_inputs={"a": meta(())})

    def test_configs_must_set_constants_or_hints(self):
        x = {"x": meta(64, 100)}
        expect_error(self, ValueError, "configs[0] sets BLOCK, which softmax_kernel has no ct.Constant parameter of "
                     "(its ct.Constant parameters: TILE; options: occupancy, num_worker_warps, opt_level)",
                     ko.record_plugin, ko.cutile(ck.softmax, configs=[{"BLOCK": 4}]), example_inputs=x)
        expect_error(self, ValueError, "configs[1] sets occupancy to 0; cuTile takes an int from 1 to 32",
                     ko.record_plugin, ko.cutile(ck.softmax, configs=[{"TILE": 4096, "occupancy": 1},
                                                                      {"TILE": 4096, "occupancy": 0}]),
                     example_inputs=x)

    def test_configs_may_not_change_a_constant_the_grid_may_follow(self):
        # scaled_add's grid is cdiv(numel, 1024): a TILE of 256 would cover a quarter of the output
        expect_error(self, ValueError, "configs change ct.Constant TILE, and the grid of the launch at",
                     ko.record_plugin, ko.cutile(ck.scaled_add, configs=[{"TILE": 256}, {"TILE": 1024}]),
                     example_inputs={"a": meta(5000), "b": meta(5000)})
        # a row per block: the tile is the configs' (the softmax records)
        self.assertEqual(recorded()["softmax"].doc["geometry"]["custom"]["grid"], ["dim(x, 0)", "1", "1"])
        # hints only: the grid is the launch's
        r = ko.record_plugin(ko.cutile(ck.scaled_add, configs=[{"opt_level": 2}, {"opt_level": 3}]),
                             example_inputs={"a": meta(5000), "b": meta(5000)})
        self.assertEqual(r.doc["configs"], [{"opt_level": 2}, {"opt_level": 3}])
        self.assertEqual(len({b.entry for b in r.compile(["sm_90"])}), 1)  # the symbol names the signature only

    def test_an_input_named_like_a_hint_and_bad_archs(self):
        def occupancy_input(occupancy: torch.Tensor) -> torch.Tensor:
            return ck.softmax(occupancy)

        expect_error(self, ValueError, "launch_fn's parameter 'occupancy' has the name of a compiler hint",
                     ko.record_plugin, ko.cutile(occupancy_input), example_inputs={"occupancy": meta(4, 8)})
        expect_error(self, ValueError, "invalid for cuTile", ko.cutile, ck.softmax, arch="compute_90")
        expect_error(self, ValueError, "an architecture is listed twice", recorded()["softmax"].compile,
                     ["sm_90", "sm_90"])

    def test_an_unsupported_dtype(self):
        expect_error(self, ValueError, "is torch.complex64, which kernelop passes to cuTile kernels as none of",
                     ko.record_plugin, ko.cutile(ck.scaled_add),
                     example_inputs={"a": meta(10, dtype=torch.complex64), "b": meta(10, dtype=torch.complex64)})


@unittest.skipUnless(HAVE_CUTILE, "cuda-tile is not installed")
class Compilation(unittest.TestCase):
    def test_cubins_for_every_architecture_checked_against_the_spec(self):
        r = recorded()["softmax"]
        binaries = [b for b in r.compile() if b.arch != "tileir"]
        self.assertEqual([(b.program, b.arch) for b in binaries],
                         [(p, a) for p in range(3) for a in ("sm_80", "sm_90", "sm_100")])
        for b in binaries:
            self.assertEqual(b.data[:4], b"\x7fELF")
            self.assertEqual(b.ptx, "")  # cuTile gives no PTX: C++ reads the CUBIN's parameter records
            self.assertEqual(_kernelop.cubin_required_block(b.data, b.entry), [128, 1, 1])
        self.assertEqual(len({b.entry for b in binaries}), 3)  # a mangled symbol per config
        r.check()
        r.check(["sm_90"])
        m = recorded()["matmul"]
        self.assertEqual([_kernelop.cubin_required_block(b.data, b.entry) for b in m.compile() if b.arch != "tileir"],
                         [[128, 1, 1], [128, 1, 1], [256, 1, 1]])
        m.check()

    def test_tile_ir_bytecode_per_tactic_checked_against_the_calling_convention(self):
        r = recorded()["softmax"]
        portable = [b for b in r.compile() if b.arch == "tileir"]
        self.assertEqual([b.program for b in portable], [0, 1, 2])
        cubins = {b.program: b.entry for b in r.compile() if b.arch == "sm_90"}
        for b in portable:
            self.assertEqual(b.data[:10], b"\x7fTileIR\x00\x0d\x03")  # architecture-independent, version 13.3
            self.assertEqual(b.entry, cubins[b.program])  # the same kernel as the CUBINs
            self.assertIn(f"entry @{b.entry}(%arg0: tile<ptr<f32>>", b.ptx)  # tileirdisasm's text
        doc = json.dumps(r.doc)
        _kernelop.check_binaries(doc, portable)  # Tile IR alone is an image too

        def refused(message, **changes):  # the bytes: a spec error (ValueError); the entry: a compile error
            damaged = [dataclasses.replace(portable[0], **changes)] + portable[1:]
            expect_error(self, ValueError if {"data", "launch_shared"} & set(changes) else RuntimeError,
                         "binary 0 (program 0, tileir, entry '" + portable[0].entry + "'): " + message,
                         _kernelop.check_binaries, doc, damaged)

        text, entry = portable[0].ptx, portable[0].entry
        refused("the data is not Tile IR bytecode (no \\x7fTileIR header)", data=b"\x7fELF" + portable[0].data[4:])
        refused("no machine code", data=b"")
        refused("the bytecode does not name the entry", data=portable[0].data.replace(entry.encode(), b"x" * len(entry)))
        refused("the Tile IR has no entry @" + entry, ptx=text.replace("entry @", "entry @x"))
        refused("parameter 0 is 'tile<ptr<f16>>' but the calling convention passes 'x' as a pointer to float32",
                ptx=text.replace("%arg0: tile<ptr<f32>>", "%arg0: tile<ptr<f16>>", 1))
        refused("parameter 1 is 'tile<f32>' but the calling convention passes 'dim(x, 0)' as int",
                ptx=text.replace("%arg1: tile<i32>", "%arg1: tile<f32>", 1))
        refused("parameter 0 is 'tile<i64>' but the calling convention passes 'x' as const float*",
                ptx=text.replace("%arg0: tile<ptr<f32>>", "%arg0: tile<i64>", 1))
        refused("parameter 1 is 'tile<i4>', not a pointer or scalar tile kernelop passes",
                ptx=text.replace("%arg1: tile<i32>", "%arg1: tile<i4>", 1))
        refused("takes 9 parameter(s) but the calling convention passes 10",
                ptx=text.replace(", %arg1: tile<i32>", "", 1))
        refused("the entry's parameter list does not end", ptx=text[:text.index("%arg3")])
        refused("Tile IR states no launch shared memory or scratch (given 16 and 0 bytes)", launch_shared=16)
        # Turned off: CUBINs only.
        off = ko.record_plugin(ko.cutile(ck.scaled_add, tileir=False), op_name="kop_ct_off::scaled_add",
                               example_inputs=ck.examples()[ck.scaled_add])
        self.assertEqual([b.arch for b in off.compile()], ["sm_80", "sm_90", "sm_100"])
        expect_error(self, TypeError, "kernelop.cutile: tileir must be True, False or None, not str", ko.cutile,
                     ck.scaled_add, tileir="no")
        # A pointer of another element type of the same width: refused too (bf16 for f16).
        m = [b for b in recorded()["matmul"].compile() if b.arch == "tileir"][0]
        expect_error(self, RuntimeError, "parameter 0 is 'tile<ptr<bf16>>' but the calling convention passes 'a' as a "
                     "pointer to float16", _kernelop.check_binaries, json.dumps(recorded()["matmul"].doc),
                     [dataclasses.replace(m, ptx=m.ptx.replace("%arg0: tile<ptr<f16>>", "%arg0: tile<ptr<bf16>>", 1))])

    def test_tile_ir_only_where_every_tactic_runs_from_it(self):
        """The Tile IR image is the whole op's or none: skipped with a warning (refused with tileir=True) for a tactic
        setting opt_level (a tileiras flag the bytecode does not keep), and for a launch_fn that read the device's
        capability (its decisions hold for the recorded architectures only)."""
        configs = [{"opt_level": 0}, {"opt_level": 3}]
        with self.assertWarnsRegex(UserWarning, "the op ships no Tile IR bytecode \\(CUBINs only\\): a tactic sets "
                                   "opt_level"):
            r = ko.record_plugin(ko.cutile(ck.scaled_add, configs=configs), op_name="kop_ct_opt::scaled_add",
                                 example_inputs=ck.examples()[ck.scaled_add])
            self.assertEqual({b.arch for b in r.compile()}, {"sm_80", "sm_90", "sm_100"})
        strict = ko.record_plugin(ko.cutile(ck.scaled_add, configs=configs, tileir=True),
                                  op_name="kop_ct_opt2::scaled_add", example_inputs=ck.examples()[ck.scaled_add])
        expect_error(self, ValueError, "tileir=True, but a tactic sets opt_level", strict.compile)

    def test_a_spec_that_does_not_match_the_cubin_is_refused_in_cpp(self):
        r = recorded()["matmul"]
        r.compile()

        def tampered(**changes):
            doc = dict(r.doc, **changes)
            return dataclasses.replace(r, doc=doc)

        custom = r.doc["geometry"]["custom"]
        expect_error(self, RuntimeError, "launches a block of [128, 1, 1] but the kernel requires [256, 1, 1] (.reqntid "
                     "in the CUBIN)", tampered(geometry={"custom": dict(custom, block=["128", "1", "1"])}).check)
        expect_error(self, RuntimeError, "takes 15 parameter(s) but the calling convention passes 14",
                     tampered(params=r.doc["params"][:-1]).check)
        params = list(r.doc["params"])
        params[2] = {"expr": "dim(a, 1)", "int64": True}
        expect_error(self, RuntimeError, "parameter 2 is 32-bit but the calling convention passes",
                     tampered(params=params).check)

    def test_damaged_cubins_never_crash_the_reader(self):
        b = recorded()["scaled_add"].compile()[0]
        rng = random.Random(7)
        data = bytearray(b.data)
        for i in range(3000):
            damaged = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            if i % 10 == 0:
                damaged = damaged[:rng.randrange(len(damaged))]
            block = _kernelop.cubin_required_block(bytes(damaged), b.entry)
            self.assertTrue(block is None or len(block) == 3)
        self.assertIsNone(_kernelop.cubin_required_block(b"\x7fELF" + b"\0" * 60, b.entry))
        self.assertIsNone(_kernelop.cubin_required_block(b.data, "no_such_kernel"))


@unittest.skipUnless(HAVE_CUTILE, "cuda-tile is not installed")
class Registration(unittest.TestCase):
    def test_the_op_has_a_schema_and_a_cpp_meta_kernel(self):
        op = recorded()["softmax"].register()
        self.assertEqual(str(op.default._schema), "kop_ct::softmax(Tensor x) -> Tensor")
        self.assertEqual(op(meta(37, 1001)).shape, (37, 1001))
        expect_error(self, RuntimeError, "'dim(x, 1) <= 4096': 5000 <= 4096 is false", op, meta(2, 5000))
        expect_error(self, RuntimeError, "rank(x) == 2", op, meta(2, 3, 4))
        self.assertEqual(ko.kernel("kop_ct::softmax").tactics, ["TILE=256", "TILE=1024", "TILE=4096"])

    def test_a_package_is_format_7_and_loads_where_cuda_tile_cannot_be_imported(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "matmul.kop")
            ck.recorded("kop_ct_pkg")["matmul"].build_package(path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(9)[8], 7)  # Tile IR bytecode (format 6 without: test_tile_ir_in_packages)
            out = run_python_without("cuda.tile", f"""
                import sys, torch, kernelop as ko
                op = ko.load_package({path!r})
                print(op.default._schema)
                a, b = torch.empty(100, 48, dtype=torch.float16, device="meta"), torch.empty(48, 70,
                                                                                            dtype=torch.float16,
                                                                                            device="meta")
                print(tuple(op(a, b).shape), op(a, b).dtype)
                print(sys.modules.get("cuda.tile"))
            """)
            self.assertEqual(out.split("\n")[:3], ["kop_ct_pkg::matmul(Tensor a, Tensor b) -> Tensor",
                                                   "(100, 70) torch.float16", "None"])
            # the machine code it holds, for another API to launch (bench/cutile_bench.py: CuPy)
            images = _kernelop.package_images(path)
            self.assertEqual([(i["arch"], i["program"]) for i in images],
                             [("sm_80", 0), ("sm_90", 0), ("sm_100", 0), ("tileir", 0)])
            self.assertEqual([_kernelop.cubin_required_block(i["data"], i["entry"]) for i in images[:3]],
                             [[128, 1, 1], [128, 1, 1], [256, 1, 1]])
            self.assertEqual(images[3]["data"][:7], b"\x7fTileIR")
            expect_error(self, RuntimeError, "not a kernelop package", _kernelop.package_images, __file__)


def _packaged_ops():
    """The examples' ops from the packages built on the CPU machine, else built here (example_packages)."""
    if "pkg" not in _recorded:
        _recorded["pkg"], _recorded["pkg_dir"] = example_packages("kop_cutile", NAMES,
                                                              ck.recorded if HAVE_CUTILE else None)
    return _recorded["pkg"]


@unittest.skipUnless(CUDA, "no CUDA device")
class Cuda(unittest.TestCase):
    def test_every_example_matches_pytorch_at_ragged_sizes(self):
        ops = _packaged_ops()
        for n in (1, 7, 1000, 1024, 1025, 100003, 1 << 20):
            a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            torch.testing.assert_close(ops["scaled_add"](a, b, 0.5), 0.5 * a + b, msg=lambda m: f"{n}: {m}")
        for shape in ((1, 1), (5, 33), (37, 1001), (256, 4096), (3, 255), (4, 4096)):
            x = torch.randn(shape, device="cuda")
            for _, text in each_tactic("kop_cutile::softmax"):
                if shape[1] > int(text.split("=")[1]):
                    continue  # the tactic's requires exclude it
                torch.testing.assert_close(ops["softmax"](x), torch.softmax(x, 1), msg=lambda m: f"{shape} {text}: {m}")
            torch.testing.assert_close(ops["softmax"](x), torch.softmax(x, 1))  # tuned
        for m, k, n in ((64, 32, 64), (1, 1, 1), (100, 48, 70), (257, 129, 255), (1024, 512, 1024)):
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            b = torch.randn(k, n, device="cuda", dtype=torch.float16)
            torch.testing.assert_close(ops["matmul"](a, b), (a.float() @ b.float()).half(), atol=2e-2, rtol=2e-2,
                                       msg=lambda msg: f"{(m, k, n)}: {msg}")

    def test_views_wrong_inputs_and_alignment(self):
        ops = _packaged_ops()
        x = torch.randn(64, 130, device="cuda")
        v = x[:, :128]  # a non-contiguous input is made contiguous
        torch.testing.assert_close(ops["softmax"](v), torch.softmax(v, 1))
        flat = torch.randn(1001, device="cuda")
        expect_error(self, RuntimeError, "aligned(a, 16)", ops["scaled_add"], flat[1:], flat[1:], 1.0)
        expect_error(self, RuntimeError, "input 'a' has rank 2", ops["scaled_add"], x, x, 1.0)

    def test_cuda_graph_replay_compile_and_opcheck(self):
        ops = _packaged_ops()
        softmax = ops["softmax"]
        x = torch.randn(128, 700, device="cuda")
        softmax(x)  # tune outside the capture
        out = replay_with_new_input(softmax, x)
        torch.testing.assert_close(out, torch.softmax(x, 1))
        f = torch.compile(lambda a, b: ops["scaled_add"](a, b, 2.0).relu(), fullgraph=True, dynamic=True)
        for n in (64, 1000, 70001):
            a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            torch.testing.assert_close(f(a, b), (2.0 * a + b).relu())
        torch.library.opcheck(softmax.default, (x,))
        torch.library.opcheck(ops["matmul"].default, (torch.randn(64, 32, device="cuda", dtype=torch.float16),
                                                      torch.randn(32, 48, device="cuda", dtype=torch.float16)))

    def test_packages_run_where_cuda_tile_cannot_be_imported(self):
        _packaged_ops()
        packages = _recorded["pkg_dir"]
        out = run_python_without("cuda.tile", f"""
            import os, sys, torch, kernelop as ko
            mm = ko.load_package(os.path.join({packages!r}, "kop_cutile.matmul.kop"))
            a = torch.randn(300, 200, device="cuda", dtype=torch.float16)
            b = torch.randn(200, 100, device="cuda", dtype=torch.float16)
            print((mm(a, b).float() - a.float() @ b.float()).abs().max().item(), sys.modules.get("cuda.tile"))
        """)
        err, module = out.split()
        self.assertLess(float(err), 0.1)
        self.assertEqual(module, "None")

    def test_the_tile_ir_image_where_asked_for(self):
        """KERNELOP_IMAGE=tileir gives the driver the bytecode even where a CUBIN fits: a driver for CUDA 13.3 or
        later compiles it (the values match), an older one refuses by name; another value is refused."""
        _packaged_ops()
        packages = _recorded["pkg_dir"]
        out = run_python_without("cuda.tile", f"""
            import ctypes, os, torch, kernelop as ko
            version = ctypes.c_int()
            ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version))
            print(version.value)
            for image in ("bogus", "tileir"):
                os.environ["KERNELOP_IMAGE"] = image
                op = ko.load_package(os.path.join({packages!r}, "kop_cutile.scaled_add.kop"))
                a, b = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
                try:
                    print((op(a, b, 0.5) - (0.5 * a + b)).abs().max().item())
                except RuntimeError as e:
                    print("ERR", str(e).replace("\\n", " "))
        """).strip().split("\n")
        version, bogus, tileir = int(out[0]), out[1], out[2]
        self.assertIn("KERNELOP_IMAGE is 'bogus'; expected cubin, ptx or tileir", bogus)
        if version >= 13030:
            self.assertLess(float(tileir), 1e-5)
        else:
            self.assertIn(f"drivers compile Tile IR bytecode from CUDA 13.3 on (this one is CUDA {version // 1000}."
                          f"{version % 1000 // 10}); the bytecode was loaded because KERNELOP_IMAGE=tileir or "
                          "LoadOptions::prefer_tileir asked for it", tileir)

    def test_in_place_atomics_branches_loops_scatters_and_views(self):
        if "test_pkg" not in _recorded:
            _recorded["test_pkg"] = example_packages("kop_cutile_test", TEST_NAMES,
                                                     tk.recorded if HAVE_CUTILE else None)[0]
        ops = _recorded["test_pkg"]
        for n in (1, 255, 1000, 4097):
            x = torch.arange(n, device="cuda", dtype=torch.float32)
            ops["add_one_"](x)
            torch.testing.assert_close(x, torch.arange(n, device="cuda", dtype=torch.float32) + 1)
        src, counter = torch.randn(1000, device="cuda"), torch.zeros(1, device="cuda", dtype=torch.int32)
        torch.testing.assert_close(ops["copy_count"](src, counter), src)
        self.assertEqual(counter.item(), 8)  # cdiv(1000, 128) blocks
        x, y = torch.randn(1000, device="cuda"), torch.zeros(1000, device="cuda")
        torch.testing.assert_close(ops["store_to_chosen"](x, y, 1), x)
        self.assertEqual(y.abs().sum().item(), 0)
        ops["store_to_chosen"](x, y, 0)
        torch.testing.assert_close(y[:1000 // 128 * 128], x[:1000 // 128 * 128])
        a, b = torch.randn(128, device="cuda"), torch.zeros(128, device="cuda")
        ops["ping_pong"](a, b, 3)
        torch.testing.assert_close(b, a)
        acc = torch.zeros(128, device="cuda")
        v = torch.randn(1024, device="cuda")
        ops["reduce_into"](v, acc)
        torch.testing.assert_close(acc, v.view(8, 128).sum(0), atol=1e-4, rtol=1e-4)
        perm = torch.randperm(1000, device="cuda", dtype=torch.int32)
        out = ops["scatter"](v[:1000], perm)
        torch.testing.assert_close(out[perm.long()], v[:1000])
        for shape in ((3, 5), (64, 100), (7, 250)):
            t = torch.randn(shape, device="cuda")
            torch.testing.assert_close(ops["flat_view"](t), t + 1)
            torch.testing.assert_close(ops["transposed"](t), t.t())

if __name__ == "__main__":
    run_tests(cpu=[Recording, Refusals, Compilation, Registration], gpu=[Cuda], cuda=CUDA)
