// The README's "Using it from C++" as a whole program. relu_4096 below is the README's block,
// line for line (tests/python/test_docs.py checks that). main compiles the relu example through
// NVRTC (no GPU needed), asks what a launch would allocate, and calls relu_4096 with null
// pointers, which kernelop must refuse by name (no driver here, or null data on a GPU machine).
#include <kernelop/kernelop.hpp>

// y = relu(x) for 4096 floats on the GPU: x_ptr and y_ptr are device pointers, stream a CUstream.
void relu_4096(const float* x_ptr, float* y_ptr, void* stream) {
  static kernelop::KernelOp relu = kernelop::compile_op("examples/relu.json");  // NVRTC, cached
  // or, with neither NVRTC nor the source: kernelop::KernelOp::from_package("relu.kop");
  kernelop::TensorView x{const_cast<float*>(x_ptr), kernelop::DType::Float32, {4096}};
  kernelop::TensorView y{y_ptr, kernelop::DType::Float32, {4096}};
  relu.launch({&x, 1}, {}, {&y, 1}, stream);  // checks every argument; no heap allocation
}

#include <cstdio>
#include <vector>

int main() {
  // Run from the repository's root, as the README's path is relative to it.
  kernelop::KernelOp relu = kernelop::compile_op("examples/relu.json");
  kernelop::TensorView x{nullptr, kernelop::DType::Float32, {4096}};
  std::vector<kernelop::Shape> shapes = relu.output_shapes(std::vector{x});
  std::printf("%s: output %s\n", relu.plan().op_name.c_str(), shapes.at(0).to_string().c_str());
  try {
    relu_4096(nullptr, nullptr, nullptr);
    std::printf("a launch with null pointers was not refused\n");
    return 1;
  } catch (const kernelop::Error& e) {
    std::printf("refused: %s\n", e.what());
  }
  return 0;
}
