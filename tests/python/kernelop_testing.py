"""The Python tests' one fixture and one runner: temporary folders that are removed again, and the ``__main__`` of
every test file (``--cpu``: the tests that need no GPU; ``--gpu``: the CUDA ones, exit code 77, counted as skipped,
without a CUDA device; neither: both)."""

import atexit
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
