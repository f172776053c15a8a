"""AOTInductor deployment, step 1 (Python, once): a model mixing kernelop ops with aten ops is
exported and compiled to model.pt2; the kernelop ops are written as .kop packages; an input and
the eager output are saved for the C++ program to compare against.
Usage: python examples/aoti/export_model.py OUTDIR
"""

import os
import struct
import sys

import torch

import kernelop as ko

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spec(name, **fields):
    return ko.KernelSpec(kernel_source=open(os.path.join(EXAMPLES, f"{name}.cu")).read(), kernel_name=name, **fields)


OPS = {
    "kop_aoti::relu": spec("relu", inputs=[ko.InputDecl("x", torch.float32)],
                           outputs=[ko.OutputDecl("y", ko.SameAs("x"))], extras=[ko.Numel("x")],
                           geometry=ko.Elementwise()),
    "kop_aoti::repeat2": spec("repeat2", inputs=[ko.InputDecl("x", torch.float32)],
                              outputs=[ko.OutputDecl("y", ["dim(x, 0)", "dim(x, 1) * 2"])],
                              extras=[ko.DimSize("x", 1), ko.Numel("y")], geometry=ko.Elementwise()),
    "kop_aoti::softmax": spec("softmax", inputs=[ko.InputDecl("x", torch.float32)],
                              outputs=[ko.OutputDecl("y", ko.SameAs("x"))], extras=[ko.DimSize("x", -1)],
                              geometry=ko.Reduction((-1,), block_size=256)),
}


class Model(torch.nn.Module):
    def forward(self, x):
        h = torch.ops.kop_aoti.relu(x * 2.0 - 1.0)
        h = torch.ops.kop_aoti.repeat2(h) + 0.5
        return torch.ops.kop_aoti.softmax(h).sum(dim=0, keepdim=True) + x.mean()


def save(path, t):
    t = t.detach().contiguous().cpu().float()
    with open(path, "wb") as f:
        f.write(struct.pack("<q", t.dim()))
        f.write(struct.pack(f"<{t.dim()}q", *t.shape))
        f.write(t.numpy().tobytes())


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, s in OPS.items():
        ko.cuda_kernel_op(name, s)
        ko.build_package(name, s, os.path.join(out, name.replace("::", ".") + ".kop"))
    model = Model().cuda()
    x = torch.randn(64, 100, device="cuda")
    batch = torch.export.Dim("batch", min=2, max=4096)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(out, "model.pt2"))
    y = torch.randn(333, 100, device="cuda")  # another batch size than the one exported with
    save(os.path.join(out, "input.bin"), y)
    save(os.path.join(out, "expected.bin"), model(y))
    print(f"wrote {out}/model.pt2, {len(OPS)} kernelop packages, input.bin, expected.bin")


if __name__ == "__main__":
    main(sys.argv[1])
