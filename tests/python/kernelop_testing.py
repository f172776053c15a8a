"""The Python tests' one fixture and one runner: temporary folders that are removed again, and the ``__main__`` of
every test file (``--cpu``: the tests that need no GPU; ``--gpu``: the CUDA ones, exit code 77, counted as skipped,
without a CUDA device; neither: both)."""

import atexit
import os
import shutil
import sys
import tempfile
import unittest


def temp_dir(prefix="kop_", test=None):
    """A new folder (its path, a str), removed when `test` ends if given, else when the process exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    if test is not None:
        test.addCleanup(shutil.rmtree, folder, True)
    else:
        atexit.register(shutil.rmtree, folder, True)
    return folder


def example_packages(dsl, names, recorded):
    """A DSL's example ops, `dsl`.NAME.kop for each of `names`, loaded from the packages scripts/stage-gpu built on the
    CPU machine (KERNELOP_CPU_PACKAGES), else built here from `recorded` (None: the DSL is not installed, and the
    test is skipped). Returns (name -> op, the packages' folder)."""
    import kernelop as ko
    packages = os.environ.get("KERNELOP_CPU_PACKAGES")
    if not packages or not os.path.exists(os.path.join(packages, f"{dsl}.{names[-1]}.kop")):
        if recorded is None:
            raise unittest.SkipTest(f"no CPU-built {dsl} packages and no DSL to build them")
        packages = temp_dir()
        for name, r in recorded(dsl).items():
            r.build_package(os.path.join(packages, f"{dsl}.{name}.kop"))
    return {n: ko.load_package(os.path.join(packages, f"{dsl}.{n}.kop")) for n in names}, packages


def run_tests(cpu, gpu, cuda):
    """Runs the test classes of the part named on the command line and exits with the result."""
    part = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1] in ("--cpu", "--gpu") else None
    if part == "--gpu" and not cuda:
        print("SKIPPED: no CUDA device")
        sys.exit(77)
    classes = {"--cpu": cpu, "--gpu": gpu}.get(part, list(cpu) + list(gpu))
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in classes)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


def replay_with_new_input(call, x):
    """Captures `call(x)` in a CUDA graph, fills `x` with new values, replays it and returns what the replay wrote:
    an op must read its inputs, and write its outputs, at replay (not what the capture saw)."""
    import torch
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call(x)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    return out
