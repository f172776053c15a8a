// The example kernels compiled by nvcc, with <<<>>> launch wrappers (see nvcc_kernels.hpp).
#include "nvcc_kernels.hpp"

#include "../examples/add.cu"
#include "../examples/bias_add_2d.cu"
#include "../examples/relu.cu"
#include "../examples/relu_generic.cu"
#include "../examples/repeat2.cu"
#include "../examples/rowsum.cu"
#include "../examples/scale.cu"
#include "../examples/sigmoid.cu"
#include "../examples/sin_cos.cu"
#undef BLOCK
#include "../examples/softmax.cu"

static unsigned blocks(long long n) {
  return static_cast<unsigned>((n + 255) / 256);
}

void nvcc_relu(const float* x, int n, float* y, cudaStream_t s) {
  relu<<<blocks(n), 256, 0, s>>>(x, n, y);
}
void nvcc_sigmoid(const float* x, int n, float* y, cudaStream_t s) {
  sigmoid<<<blocks(n), 256, 0, s>>>(x, n, y);
}
void nvcc_scale(const float* x, float alpha, int n, float* y, cudaStream_t s) {
  scale<<<blocks(n), 256, 0, s>>>(x, alpha, n, y);
}
void nvcc_sin_cos(const float* x, int n, float* so, float* co, cudaStream_t s) {
  sin_cos<<<blocks(n), 256, 0, s>>>(x, n, so, co);
}
void nvcc_add(const float* a, const float* b, int n, float* out, cudaStream_t s) {
  add<<<blocks(n), 256, 0, s>>>(a, b, n, out);
}
void nvcc_relu_generic_f32(const float* x, int n, float* y, cudaStream_t s) {
  relu_generic<float><<<blocks(n), 256, 0, s>>>(x, n, y);
}
void nvcc_bias_add_2d(const float* x, const float* bias, int batch, int rows, int cols, float* y,
                      cudaStream_t s) {
  dim3 grid((cols + 15) / 16, (rows + 15) / 16, batch);
  bias_add_2d<<<grid, dim3(16, 16), 0, s>>>(x, bias, rows, cols, y);
}
void nvcc_rowsum(const float* x, int rows, int cols, float* y, cudaStream_t s) {
  rowsum<<<rows, 256, 0, s>>>(x, cols, y);
}
void nvcc_softmax(const float* x, int rows, int cols, float* y, cudaStream_t s) {
  softmax<<<rows, 256, 0, s>>>(x, cols, y);
}
void nvcc_repeat2(const float* x, int rows, int cols, float* y, cudaStream_t s) {
  repeat2<<<blocks(2LL * rows * cols), 256, 0, s>>>(x, cols, 2 * rows * cols, y);
}
