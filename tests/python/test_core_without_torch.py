"""The engine-neutral core without PyTorch (DESIGN.md, "engines": JAX never imports torch): ``import kernelop`` and
``kernelop._kernelop`` import no torch; in a python3 where torch, triton and cutlass cannot be imported, a spec is
built with kernelop's classes, validated, compiled to a package and loaded back as a raw ``Op``, and a name that
needs torch says so. This file imports no torch itself (its CPU part runs where torch is not installed)."""

import importlib.util
import os
import textwrap
import unittest

import kernelop as ko
from isolated import run_python, run_python_refusing
from kernelop_testing import run_tests

CUDA = ko._kernelop.cuda_available()
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
HAVE_TORCH = importlib.util.find_spec("torch") is not None

# Runs in the subprocess: the relu of examples/relu.json, written with kernelop's classes.
RELU = textwrap.dedent(f"""\
    import json, os, sys, tempfile
    import kernelop
    import kernelop._kernelop as core

    with open(os.path.join({EXAMPLES!r}, "relu.cu")) as f:
        source = f.read()
    spec = kernelop.KernelSpec(kernel_source=source, kernel_name="relu", inputs=[kernelop.InputDecl("x", "float32")],
                               outputs=[kernelop.OutputDecl("y", kernelop.SameAs("x"))], extras=[kernelop.Numel("x")],
                               geometry=kernelop.Elementwise(block=(256,), layout="flat"))
    doc = json.dumps(spec.to_json("kop_core::relu"))
    """)


class WithoutTorch(unittest.TestCase):
    """In a python3 where torch, triton and cutlass are not installed."""

    def run_refusing(self, code):
        return run_python_refusing(["torch", "triton", "cutlass"], RELU + textwrap.dedent(code))

    def test_the_core_validates_compiles_and_loads_a_package(self):
        out = self.run_refusing("""
            print("schema", core.check_spec(doc, ".", core.Overrides()))
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "relu.kop")
                core.build_package(doc, ".", ["compute_80"], path)
                op = core.Op.from_package(path)
                print("loaded", op.op_name, op.schema, op.parameters, op.tactics)
            print("version", kernelop.__version__ == core.__version__)
            print("dtypes", [d.name for d in kernelop._dtypes.DTYPES] == core.dtype_names())
            print("torch imported", "torch" in sys.modules)
            """)
        schema = "kop_core::relu(Tensor x) -> Tensor"
        self.assertIn(f"schema {schema}\n", out)
        self.assertIn(f"loaded kop_core::relu {schema} ['const float* x', 'int numel(x)', 'float* y'] ['']\n", out)
        self.assertIn("version True\n", out)
        self.assertIn("dtypes True\n", out)
        self.assertIn("torch imported False\n", out)

    def test_an_invalid_spec_is_refused_with_kernelops_message(self):
        out = self.run_refusing("""
            bad = json.dumps(kernelop.KernelSpec(source, "relu", inputs=[kernelop.InputDecl("x", "float32")],
                                                 outputs=[kernelop.OutputDecl("y", kernelop.SameAs("q"))],
                                                 geometry=kernelop.Elementwise()).to_json("kop_core::bad"))
            try:
                core.check_spec(bad, ".", core.Overrides())
            except ValueError as e:
                print("refused", e)
            print("torch imported", "torch" in sys.modules)
            """)
        self.assertRegex(out, r"refused .*'q'")
        self.assertIn("torch imported False\n", out)

    def test_a_name_that_needs_torch_says_so(self):
        out = self.run_refusing("""
            for name in ("cuda_kernel_op", "load_package", "triton", "cutedsl", "record_plugin", "KernelBinary",
                         "_ops"):
                try:
                    getattr(kernelop, name)
                    print(name, "imported")
                except ImportError as e:
                    print(name, type(e).__name__, e.name, str(e).startswith(f"kernelop.{name} needs PyTorch"))
            try:
                from kernelop import cuda_kernel_op
            except ImportError as e:
                print("from-import:", e)
            print("dir lists __all__", set(kernelop.__all__) <= set(dir(kernelop)))
            print("torch imported", "torch" in sys.modules)
            """)
        for name in ("cuda_kernel_op", "load_package", "triton", "cutedsl", "record_plugin", "KernelBinary", "_ops"):
            self.assertIn(f"{name} ImportError torch True\n", out)
        self.assertIn("from-import: kernelop.cuda_kernel_op needs PyTorch, which cannot be imported here (No module "
                      "named 'torch' (refused by the test)); install torch", out)
        self.assertIn("dir lists __all__ True\n", out)
        self.assertIn("torch imported False\n", out)


class Lazy(unittest.TestCase):
    """Where torch is installed: importing kernelop does not import it; the first torch-bound name does."""

    def test_import_kernelop_imports_no_torch(self):
        out = run_python(RELU + textwrap.dedent("""
            core.check_spec(doc, ".", core.Overrides())
            print("after the core", sorted(m for m in ("torch", "triton", "cutlass", "sympy") if m in sys.modules))
            """))
        self.assertEqual(out, "after the core []\n")

    @unittest.skipUnless(HAVE_TORCH, "needs torch")
    def test_every_public_name_resolves_to_its_module(self):
        out = run_python("""
            import sys
            import kernelop
            from kernelop import cuda_kernel_op
            print("torch imported", "torch" in sys.modules)
            print("same", cuda_kernel_op is kernelop._ops.cuda_kernel_op, kernelop.triton is kernelop._triton.triton,
                  kernelop.KernelBinary is kernelop._recording.KernelBinary)
            print("missing", [n for n in kernelop.__all__ if getattr(kernelop, n, None) is None])
            try:
                kernelop.no_such_name
            except AttributeError as e:
                print("AttributeError", e)
            """)
        self.assertEqual(out, "torch imported True\nsame True True True\nmissing []\n"
                              "AttributeError module 'kernelop' has no attribute 'no_such_name'\n")


class CommandLine(unittest.TestCase):
    """``python -m kernelop`` (and the wheel's ``kernelop`` console script, the same function): the C++ tool the
    package carries, from any working directory."""

    def kernelop(self, *args, cwd=None):
        import subprocess
        import sys

        return subprocess.run([sys.executable, "-m", "kernelop", *args], capture_output=True, text=True, cwd=cwd,
                              timeout=120)

    def test_version_is_the_packages(self):
        r = self.kernelop("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"kernelop {ko.__version__}\n")

    def test_bare_is_the_help(self):
        r = self.kernelop()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Usage:", r.stdout)
        for command in ("check", "build", "run", "tune"):
            self.assertIn(command, r.stdout)

    def test_it_checks_a_spec_from_another_directory(self):
        import tempfile

        with tempfile.TemporaryDirectory() as cwd:
            r = self.kernelop("check", os.path.abspath(os.path.join(EXAMPLES, "relu.json")), cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("op kernelop_examples::relu", r.stdout)

    def test_a_package_without_the_tool_says_so(self):
        import shutil
        import subprocess
        import sys
        import tempfile

        with tempfile.TemporaryDirectory() as root:
            shutil.copytree(os.path.dirname(ko.__file__), os.path.join(root, "kernelop"),
                            ignore=shutil.ignore_patterns("bin", "__pycache__"))
            r = subprocess.run([sys.executable, "-m", "kernelop", "--version"], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=root), timeout=120)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the command-line tool is not part of this installation", r.stderr)


if __name__ == "__main__":
    run_tests(cpu=[WithoutTorch, Lazy, CommandLine], gpu=[], cuda=CUDA)
