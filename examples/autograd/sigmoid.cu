// sigmoid, its backward (from the output) and its double backward, for float and double: 16-byte
// vector loads, kUnroll vectors per thread in flight (common.cuh), any size and alignment.
#include "common.cuh"

template <class T>
__device__ inline T sigmoid_of(T v) {
  return T(1) / (T(1) + exp_of(-v));
}

template <class T>
__global__ void sigmoid_forward(const T* __restrict__ x, int n, T* __restrict__ y) {
  const bool vector = aligned16(x) && aligned16(y);
  const VecWalk<T> w;
  for (long long i = w.first(); i < n; i += w.stride()) {
    Vec<T> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_vec(x, i + u * w.gap(), n, vector);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) v[u].v[k] = sigmoid_of(v[u].v[k]);
      store_vec(y, i + u * w.gap(), n, vector, v[u]);
    }
  }
}

// grad_x = grad_y * y * (1 - y)
template <class T>
__global__ void sigmoid_backward(const T* __restrict__ y, const T* __restrict__ grad_y, int n,
                                 T* __restrict__ grad_x) {
  const bool vector = aligned16(y) && aligned16(grad_y) && aligned16(grad_x);
  const VecWalk<T> w;
  for (long long i = w.first(); i < n; i += w.stride()) {
    Vec<T> a[kUnroll], g[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      a[u] = load_vec(y, i + u * w.gap(), n, vector);
      g[u] = load_vec(grad_y, i + u * w.gap(), n, vector);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) a[u].v[k] = g[u].v[k] * a[u].v[k] * (T(1) - a[u].v[k]);
      store_vec(grad_x, i + u * w.gap(), n, vector, a[u]);
    }
  }
}

// The backward's own gradients, given grad_grad_x (the gradient flowing into grad_x):
// d/dy = grad_grad_x * g * (1 - 2y), d/dg = grad_grad_x * y * (1 - y), g being grad_y.
template <class T>
__global__ void sigmoid_double_backward(const T* __restrict__ y, const T* __restrict__ g,
                                        const T* __restrict__ grad_grad_x, int n,
                                        T* __restrict__ grad_y, T* __restrict__ grad_g) {
  const bool vector = aligned16(y) && aligned16(g) && aligned16(grad_grad_x) && aligned16(grad_y) &&
                      aligned16(grad_g);
  const VecWalk<T> w;
  for (long long i = w.first(); i < n; i += w.stride()) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long at = i + u * w.gap();
      Vec<T> a = load_vec(y, at, n, vector), b = load_vec(g, at, n, vector);
      Vec<T> gg = load_vec(grad_grad_x, at, n, vector), dy, dg;
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) {
        dy.v[k] = gg.v[k] * b.v[k] * (T(1) - T(2) * a.v[k]);
        dg.v[k] = gg.v[k] * a.v[k] * (T(1) - a.v[k]);
      }
      store_vec(grad_y, at, n, vector, dy);
      store_vec(grad_g, at, n, vector, dg);
    }
  }
}
