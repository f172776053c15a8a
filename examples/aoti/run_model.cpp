// AOTInductor deployment, step 2 (C++, no Python in the process): register the kernelop ops
// from their .kop packages (no NVRTC, no kernel source), load model.pt2 with AOTInductor, run it
// on the saved input and compare with the eager output.
// Usage: run_model DIR   (the folder export_model.py wrote)
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "kernelop/package.hpp"
#include "kernelop/torch.hpp"

namespace fs = std::filesystem;

static at::Tensor load(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::int64_t rank = 0;
  in.read(reinterpret_cast<char*>(&rank), sizeof rank);
  std::vector<std::int64_t> shape(static_cast<std::size_t>(rank));
  in.read(reinterpret_cast<char*>(shape.data()), static_cast<std::streamsize>(rank * 8));
  at::Tensor t = at::empty(shape, at::kFloat);
  in.read(reinterpret_cast<char*>(t.data_ptr<float>()),
          static_cast<std::streamsize>(t.numel() * 4));
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return t;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: run_model DIR\n";
    return 2;
  }
  fs::path dir = argv[1];
  try {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".kop") continue;
      auto reg = kernelop::torch_ops::register_op(kernelop::KernelOp::from_package(entry.path()));
      std::cout << "registered " << reg.schema() << " from " << entry.path().filename().string()
                << "\n";
    }
    torch::inductor::AOTIModelPackageLoader loader((dir / "model.pt2").string());
    at::Tensor x = load(dir / "input.bin").to(at::kCUDA);
    std::vector<at::Tensor> outputs = loader.run({x});
    at::Tensor expected = load(dir / "expected.bin");
    at::Tensor got = outputs.at(0).cpu();
    double err = (got - expected).abs().max().item<double>();
    std::cout << "AOTInductor output " << got.sizes() << " vs eager: max |error| " << err << "\n";
    bool ok = got.sizes() == expected.sizes() && err < 1e-4;
    std::cout << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "run_model: " << e.what() << "\n";
    return 1;
  }
}
