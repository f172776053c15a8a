// sigmoid, its backward (from the output) and its double backward, for float and double.
#include "common.cuh"

template <class T>
__global__ void sigmoid_forward(const T* __restrict__ x, int n, T* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = T(1) / (T(1) + exp_of(-x[i]));
}

// grad_x = grad_y * y * (1 - y)
template <class T>
__global__ void sigmoid_backward(const T* __restrict__ y, const T* __restrict__ grad_y, int n,
                                 T* __restrict__ grad_x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) grad_x[i] = grad_y[i] * y[i] * (T(1) - y[i]);
}

// The backward's own gradients, given grad_grad_x (the gradient flowing into grad_x):
// d/dy = grad_grad_x * g * (1 - 2y), d/dg = grad_grad_x * y * (1 - y), g being grad_y.
template <class T>
__global__ void sigmoid_double_backward(const T* __restrict__ y, const T* __restrict__ g,
                                        const T* __restrict__ grad_grad_x, int n,
                                        T* __restrict__ grad_y, T* __restrict__ grad_g) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    T gg = grad_grad_x[i];
    grad_y[i] = gg * g[i] * (T(1) - T(2) * y[i]);
    grad_g[i] = gg * y[i] * (T(1) - y[i]);
  }
}
