// Row softmax and its backward (from the output and the gradient), for float and double: one
// block of 256 threads per row.
#include "common.cuh"

template <class T>
__global__ void softmax_forward(const T* __restrict__ x, int cols, T* __restrict__ y) {
  __shared__ T scratch[256];
  const T* in = x + (long long)blockIdx.x * cols;
  T* out = y + (long long)blockIdx.x * cols;
  T m = -exp_of(T(1000));  // -infinity in float and double
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmax(m, in[c]);
  m = block_max(m, scratch);
  T s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += exp_of(in[c] - m);
  s = block_sum(s, scratch);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = exp_of(in[c] - m) / s;
}

// grad_x = y * (grad_y - sum(grad_y * y)) per row
template <class T>
__global__ void softmax_backward(const T* __restrict__ y, const T* __restrict__ grad_y, int cols,
                                 T* __restrict__ grad_x) {
  __shared__ T scratch[256];
  long long row = (long long)blockIdx.x * cols;
  T dot = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) dot += grad_y[row + c] * y[row + c];
  dot = block_sum(dot, scratch);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    grad_x[row + c] = y[row + c] * (grad_y[row + c] - dot);
}
