// RMSNorm with a weight over the last axis, for float and double: y = x * rstd * weight with
// rstd = 1 / sqrt(mean(x^2) + eps) per row, which the forward also returns for the backward.
#include "common.cuh"

template <class T>
__global__ void rms_norm_forward(const T* __restrict__ x, const T* __restrict__ weight, float eps,
                                 int cols, T* __restrict__ y, T* __restrict__ rstd) {
  __shared__ T scratch[256];
  long long row = (long long)blockIdx.x * cols;
  T ss = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += x[row + c] * x[row + c];
  T r = rsqrt_of(block_sum(ss, scratch) / T(cols) + T(eps));
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[row + c] = x[row + c] * r * weight[c];
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// Blocks [0, rows): grad_x of one row, grad_x = r * u - x * r^3 * sum(u * x) / cols with
// u = weight * grad_y. Blocks [rows, rows + cdiv(cols, 256)): grad_weight of 256 columns each,
// sum over rows of grad_y * x * r. Every sum in a fixed order: the same result on every run.
template <class T>
__global__ void rms_norm_backward(const T* __restrict__ x, const T* __restrict__ weight,
                                  const T* __restrict__ rstd, const T* __restrict__ grad_y,
                                  int rows, int cols, T* __restrict__ grad_x,
                                  T* __restrict__ grad_weight) {
  __shared__ T scratch[256];
  if (blockIdx.x < rows) {
    long long row = (long long)blockIdx.x * cols;
    T r = rstd[blockIdx.x];
    T dot = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      dot += weight[c] * grad_y[row + c] * x[row + c];
    dot = block_sum(dot, scratch);
    T k = r * r * r * dot / T(cols);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      grad_x[row + c] = r * weight[c] * grad_y[row + c] - x[row + c] * k;
    return;
  }
  int c = (blockIdx.x - rows) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  T sum = 0;
  for (int i = 0; i < rows; ++i)
    sum += grad_y[(long long)i * cols + c] * x[(long long)i * cols + c] * rstd[i];
  grad_weight[c] = sum;
}
