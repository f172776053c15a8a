// relu_generic: one templated kernel instantiated for float, __half and __nv_bfloat16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <class T>
__global__ void relu_generic(const T* __restrict__ x, int n, T* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = static_cast<float>(x[i]);
    y[i] = static_cast<T>(v > 0.0f ? v : 0.0f);
  }
}
