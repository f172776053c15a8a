"""AOTInductor deployment, step 1 (Python, once): a model mixing every example op with aten ops
(torch_examples.AllOps) is exported and compiled to model.pt2; each example op is written as a
.kop package; an input and the eager output are saved for the C++ program to compare against.
Usage: python examples/aoti/export_model.py OUTDIR
"""

import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_examples as tex  # noqa: E402

import kernelop as ko  # noqa: E402


def save(path, t):
    t = t.detach().contiguous().cpu().float()
    with open(path, "wb") as f:
        f.write(struct.pack("<q", t.dim()))
        f.write(struct.pack(f"<{t.dim()}q", *t.shape))
        f.write(t.numpy().tobytes())


def main(out):
    os.makedirs(out, exist_ok=True)
    tex.register()
    for name in tex.NAMES:
        ko.build_package_file(tex.spec_file(name), os.path.join(out, f"kernelop_examples.{name}.kop"))
    model = tex.AllOps().cuda()
    x = torch.randn(64, tex.WIDTH, device="cuda")
    batch = torch.export.Dim("batch", min=4, max=4096)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "model.pt2"))
    y = torch.randn(333, tex.WIDTH, device="cuda")  # another batch size than the one exported with
    save(os.path.join(out, "input.bin"), y)
    save(os.path.join(out, "expected.bin"), model(y))
    print(f"wrote {out}/model.pt2, {len(tex.NAMES)} kernelop packages, input.bin, expected.bin")


if __name__ == "__main__":
    main(sys.argv[1])
