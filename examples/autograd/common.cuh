// Helpers shared by the autograd examples: exp for float and double, and a block-wide sum.
#pragma once

__device__ inline float exp_of(float v) {
  return expf(v);
}
__device__ inline double exp_of(double v) {
  return exp(v);
}
__device__ inline float rsqrt_of(float v) {
  return rsqrtf(v);
}
__device__ inline double rsqrt_of(double v) {
  return rsqrt(v);
}

// The sum of v over the block (blockDim.x a power of two, at most 1024); every thread gets it.
template <class T>
__device__ T block_sum(T v, T* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
    __syncthreads();
  }
  T total = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return total;
}

// The max of v over the block.
template <class T>
__device__ T block_max(T v, T* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      scratch[threadIdx.x] = fmax(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    __syncthreads();
  }
  T m = scratch[0];
  __syncthreads();
  return m;
}
