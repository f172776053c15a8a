// A C++ program without Python that makes a kernel spec a PyTorch operator: it compiles the relu
// example (NVRTC, no GPU needed), registers it into PyTorch's dispatcher from C++, and calls it
// through the dispatcher on Meta tensors (the shapes a launch would produce) and on a CPU tensor
// (which kernelop refuses by name). Run from the repository's root, as the spec's path is relative
// to it.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdio>

#include <kernelop/kernelop.hpp>
#include <kernelop/torch.hpp>

int main() {
  kernelop::torch_ops::Registration reg =
      kernelop::torch_ops::register_op(kernelop::compile_op("examples/relu.json"));
  std::printf("registered %s\n", reg.schema().c_str());
  auto relu = c10::Dispatcher::singleton()
                  .findSchemaOrThrow("kernelop_examples::relu", "")
                  .typed<at::Tensor(const at::Tensor&)>();
  at::Tensor y = relu.call(at::empty({333, 7}, at::TensorOptions().device(at::kMeta)));
  std::printf("meta output [%lld, %lld] %s\n", static_cast<long long>(y.size(0)),
              static_cast<long long>(y.size(1)), c10::toString(y.scalar_type()));
  try {
    relu.call(at::ones({4}));
    std::printf("a CPU tensor was not refused\n");
    return 1;
  } catch (const c10::Error& e) {
    std::printf("refused: %s\n", e.what_without_backtrace());
  }
  return 0;
}
