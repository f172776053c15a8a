// RMSNorm with a weight over the last axis, for float and double: y = x * rstd * weight with
// rstd = 1 / sqrt(mean(x^2) + eps) per row, which the forward also returns for the backward.
// Rows are read with 16-byte vector loads where every pointer is aligned and cols is a multiple of
// the vector width, element by element otherwise; a row of up to kRowVecs vectors per thread stays
// in registers between the two passes. Every sum runs in a fixed order: the same result on every
// run.
#include "common.cuh"

constexpr int kRowVecs = 4;  // registers per thread per row tensor: 4096 floats at 256 threads

template <class T>
__global__ void rms_norm_forward(const T* __restrict__ x, const T* __restrict__ weight, float eps,
                                 int cols, T* __restrict__ y, T* __restrict__ rstd) {
  __shared__ T scratch[32];
  const long long row = (long long)blockIdx.x * cols;
  const bool vector = cols % kVec<T> == 0 && aligned16(x) && aligned16(weight) && aligned16(y);
  const int first = threadIdx.x * kVec<T>, step = blockDim.x * kVec<T>;
  const bool in_registers = cols <= kRowVecs * step;
  Vec<T> xs[kRowVecs];
  T ss = 0;
  if (in_registers) {
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) xs[j] = load_vec(x + row, first + j * step, cols, vector);
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) {
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) ss += xs[j].v[k] * xs[j].v[k];
    }
  } else {
    for (int c = first; c < cols; c += step) {
      Vec<T> v = load_vec(x + row, c, cols, vector);
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) ss += v.v[k] * v.v[k];
    }
  }
  const T r = rsqrt_of(block_sum(ss, scratch) / T(cols) + T(eps));
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  auto write = [&](int c, Vec<T> v) {
    Vec<T> w = load_vec(weight, c, cols, vector);
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) v.v[k] = v.v[k] * r * w.v[k];
    store_vec(y + row, c, cols, vector, v);
  };
  if (in_registers) {
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) write(first + j * step, xs[j]);
  } else {
    for (int c = first; c < cols; c += step) write(c, load_vec(x + row, c, cols, vector));
  }
}

// Columns of grad_weight per tile: kColThreads threads of kVec<T> columns each; the other
// blockDim.x / kColThreads threads of the block split the rows.
constexpr int kColThreads = 8;

// grad_weight[c] = sum over rows of grad_y * x * rstd, for the columns of tile `tile`: each
// thread sums its rows in order (four loaded ahead), then one thread per column adds the
// threads' sums in order.
template <class T>
__device__ void grad_weight_tile(const T* __restrict__ x, const T* __restrict__ rstd,
                                 const T* __restrict__ grad_y, int rows, int cols, bool vector,
                                 int tile, T* __restrict__ grad_weight, T* tile_sums) {
  const int lanes = blockDim.x / kColThreads, lane = threadIdx.x / kColThreads;
  const int c = (tile * kColThreads + threadIdx.x % kColThreads) * kVec<T>;
  T acc[kVec<T>] = {};
  auto add = [&](const Vec<T>& g, const Vec<T>& v, T r) {
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) acc[k] += g.v[k] * v.v[k] * r;
  };
  long long i = lane;  // 64-bit: rows may come within a few lanes of INT_MAX
  for (; i + 3LL * lanes < rows; i += 4LL * lanes) {
    Vec<T> g[4], v[4];
    T r[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long at = (i + (long long)u * lanes) * cols;
      g[u] = load_vec(grad_y + at, c, cols, vector);
      v[u] = load_vec(x + at, c, cols, vector);
      r[u] = rstd[i + (long long)u * lanes];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) add(g[u], v[u], r[u]);
  }
  for (; i < rows; i += lanes) {
    const long long at = i * cols;
    add(load_vec(grad_y + at, c, cols, vector), load_vec(x + at, c, cols, vector), rstd[i]);
  }
  const int width = kColThreads * kVec<T>;
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k)
    tile_sums[lane * width + (threadIdx.x % kColThreads) * kVec<T> + k] = acc[k];
  __syncthreads();
  if (threadIdx.x < width) {
    const int col = tile * width + threadIdx.x;
    T sum = 0;
    for (int l = 0; l < lanes; ++l) sum += tile_sums[l * width + threadIdx.x];
    if (col < cols) grad_weight[col] = sum;
  }
  __syncthreads();  // tile_sums is reused by the block's next tile
}

// The first gridDim.x - rows blocks compute grad_weight, tile by tile (the spec gives them one
// tile each); block weight_blocks + r computes row r of grad_x:
// grad_x = r * u - x * r^3 * sum(u * x) / cols with u = weight * grad_y.
// blockDim.x: a multiple of 32 and of kColThreads, at most 256.
template <class T>
__global__ void rms_norm_backward(const T* __restrict__ x, const T* __restrict__ weight,
                                  const T* __restrict__ rstd, const T* __restrict__ grad_y,
                                  int rows, int cols, T* __restrict__ grad_x,
                                  T* __restrict__ grad_weight) {
  __shared__ T shared[256 * kVec<T>];
  const bool vector = cols % kVec<T> == 0 && aligned16(x) && aligned16(weight) &&
                      aligned16(grad_y) && aligned16(grad_x);
  const int weight_blocks = gridDim.x - rows;
  if ((int)blockIdx.x < weight_blocks) {
    const int tiles = (cols + kColThreads * kVec<T> - 1) / (kColThreads * kVec<T>);
    for (int tile = blockIdx.x; tile < tiles; tile += weight_blocks)
      grad_weight_tile(x, rstd, grad_y, rows, cols, vector, tile, grad_weight, shared);
    return;
  }
  const int r_index = blockIdx.x - weight_blocks;
  const long long row = (long long)r_index * cols;
  const T r = rstd[r_index];
  const int first = threadIdx.x * kVec<T>, step = blockDim.x * kVec<T>;
  const bool in_registers = cols <= kRowVecs * step;
  Vec<T> xs[kRowVecs], us[kRowVecs];
  auto u_of = [&](int c) {  // weight * grad_y
    Vec<T> w = load_vec(weight, c, cols, vector), g = load_vec(grad_y + row, c, cols, vector);
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) g.v[k] *= w.v[k];
    return g;
  };
  T dot = 0;
  auto add = [&](const Vec<T>& u, const Vec<T>& v) {
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) dot += u.v[k] * v.v[k];
  };
  if (in_registers) {
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) {
      xs[j] = load_vec(x + row, first + j * step, cols, vector);
      us[j] = u_of(first + j * step);
    }
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) add(us[j], xs[j]);
  } else {
    for (int c = first; c < cols; c += step) add(u_of(c), load_vec(x + row, c, cols, vector));
  }
  const T k3 = r * r * r * block_sum(dot, shared) / T(cols);
  auto write = [&](int c, const Vec<T>& u, Vec<T> v) {
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) v.v[k] = r * u.v[k] - v.v[k] * k3;
    store_vec(grad_x + row, c, cols, vector, v);
  };
  if (in_registers) {
#pragma unroll
    for (int j = 0; j < kRowVecs; ++j) write(first + j * step, us[j], xs[j]);
  } else {
    for (int c = first; c < cols; c += step) write(c, u_of(c), load_vec(x + row, c, cols, vector));
  }
}
