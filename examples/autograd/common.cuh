// Helpers shared by the autograd examples, for float and double: exp and rsqrt, 16-byte vector
// loads and stores with a scalar fallback, and block-wide sums and maxima in a fixed order (the
// same result on every run).
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

// Elements of T in 16 bytes: one vector load moves kVec<T> elements (4 floats, 2 doubles). A
// spec's grid expression writes the same width as `16 // itemsize(x)`.
template <class T>
constexpr int kVec = 16 / sizeof(T);

template <class T>
struct alignas(16) Vec {
  T v[kVec<T>];
};

__device__ inline bool aligned16(const void* p) {
  return reinterpret_cast<unsigned long long>(p) % 16 == 0;
}

// The kVec<T> elements of p from index i: one 16-byte load when `vector` holds (every pointer
// aligned, so p + i is) and the whole vector is in bounds, else element by element, with zeros
// past n.
template <class T>
__device__ inline Vec<T> load_vec(const T* __restrict__ p, long long i, long long n, bool vector) {
  if (vector && i + kVec<T> <= n) return *reinterpret_cast<const Vec<T>*>(p + i);
  Vec<T> r;
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) r.v[k] = i + k < n ? p[i + k] : T(0);
  return r;
}

// Stores the elements of r that are in bounds at p + i (one 16-byte store when `vector` holds).
template <class T>
__device__ inline void store_vec(T* __restrict__ p, long long i, long long n, bool vector,
                                 const Vec<T>& r) {
  if (vector && i + kVec<T> <= n) {
    *reinterpret_cast<Vec<T>*>(p + i) = r;
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) {
    if (i + k < n) p[i + k] = r.v[k];
  }
}

// Vectors per thread per step of an elementwise grid-stride walk: the loads of kUnroll vectors
// are issued before any is used, which keeps enough bytes in flight to reach full bandwidth.
constexpr int kUnroll = 2;

// The grid-stride walk of an elementwise kernel over n elements: thread t's step starts at
// first(), its vector u at first() + u * gap(), the next step stride() further. Correct for any
// grid; the spec's grid cdiv(n, blockDim * kUnroll * kVec) makes it one step.
template <class T>
struct VecWalk {
  __device__ long long first() const {
    return ((long long)blockIdx.x * kUnroll * blockDim.x + threadIdx.x) * kVec<T>;
  }
  __device__ long long gap() const { return (long long)blockDim.x * kVec<T>; }
  __device__ long long stride() const { return (long long)gridDim.x * kUnroll * gap(); }
};

template <class T>
__device__ inline T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <class T>
__device__ inline T warp_max(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024; scratch holds 32 values);
// every thread gets it.
template <class T>
__device__ T block_sum(T v, T* scratch) {
  v = warp_sum(v);
  const unsigned warps = blockDim.x / 32;
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < warps ? scratch[threadIdx.x] : T(0);
  if (threadIdx.x < 32) v = warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  T total = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return total;
}

// The max of v over the block (as block_sum).
template <class T>
__device__ T block_max(T v, T* scratch) {
  v = warp_max(v);
  const unsigned warps = blockDim.x / 32;
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T m = scratch[0];
  for (unsigned w = 1; w < warps; ++w) m = fmax(m, scratch[w]);
  __syncthreads();
  return m;
}
