"""AOTInductor deployment of Triton kernels, step 1: the Triton examples' .kop packages (recorded and compiled by
kernelop's Python package on a machine without a GPU: scripts/stage-gpu) are registered from the packages alone, a
model mixing them with aten ops is exported and compiled to model.pt2, and the packages are copied next to it.
Step 2 is the same C++ program as for the CUDA examples (run_model.cpp): it registers the packages and runs the
model with no Python, so no Triton, in the process.
Usage: python examples/aoti/export_triton_model.py PACKAGE_DIR OUTDIR
"""

import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_model import save  # noqa: E402

import kernelop as ko  # noqa: E402

NAMES = ("elementwise_scale_mul", "vector_add", "softmax")


class TritonOps(torch.nn.Module):
    def forward(self, x):
        ops = torch.ops.kop_triton
        h = ops.vector_add(x, torch.tanh(x))
        h = ops.elementwise_scale_mul(h, x + 1.0, 0.25, 3)
        return ops.softmax(h * 0.5)


def main(packages, out):
    os.makedirs(out, exist_ok=True)
    for name in NAMES:
        path = os.path.join(packages, f"kop_triton.{name}.kop")
        ko.load_package(path)
        shutil.copy(path, out)
    model = TritonOps().cuda()
    x = torch.randn(64, 1024, device="cuda")
    batch = torch.export.Dim("batch", min=2, max=4096)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "model.pt2"))
    y = torch.randn(333, 1024, device="cuda")  # another batch size than the one exported with
    save(os.path.join(out, "input.bin"), y)
    save(os.path.join(out, "expected.bin"), model(y))
    print(f"wrote {out}/model.pt2, {len(NAMES)} Triton kernelop packages, input.bin, expected.bin")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
