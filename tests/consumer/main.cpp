// The README's C++ snippet as a whole program: compile the relu example through NVRTC (no GPU
// needed), then ask what a launch would allocate. A launch needs a GPU; on a machine without one
// the program says so and stops there.
#include <cstdio>
#include <kernelop/kernelop.hpp>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: my_app SPEC.json\n");
    return 2;
  }
  kernelop::KernelOp relu = kernelop::compile_op(argv[1]);  // NVRTC, through the cache
  kernelop::TensorView x{nullptr, kernelop::DType::Float32, {4096}};
  std::vector<kernelop::Shape> shapes = relu.output_shapes(std::vector{x});
  std::printf("%s: output %s\n", relu.plan().op_name.c_str(), shapes.at(0).to_string().c_str());
  if (!kernelop::cuda_available()) {
    std::printf("no CUDA device: compiled, not launched\n");
  }
  return 0;
}
