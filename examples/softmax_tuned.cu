// Row softmax over the last axis, tunable: THREADS threads per row, ROWS rows per block (short
// rows share a block), VEC elements per load (float4 when 4: needs rows of a multiple of 4
// elements and 16-byte aligned data, which the configs' requires state).
template <int THREADS>
__device__ float row_reduce(float v, float* scratch, bool take_max) {
  constexpr int kWidth = THREADS < 32 ? THREADS : 32;
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    float other = __shfl_xor_sync(0xffffffffu, v, offset, kWidth);
    v = take_max ? fmaxf(v, other) : v + other;
  }
  if (THREADS <= 32) return v;
  constexpr int kWarps = THREADS / 32;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kWarps; ++w) v = take_max ? fmaxf(v, scratch[w]) : v + scratch[w];
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

template <int VEC>
__device__ void load(const float* p, float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    for (int i = 0; i < VEC; ++i) v[i] = p[i];
  }
}

template <int THREADS, int VEC, int ROWS>
__global__ void softmax_tuned(const float* __restrict__ x, float* __restrict__ y, long long rows,
                              int cols) {
  __shared__ float scratch[ROWS][THREADS / 32 + 1];
  long long row = (long long)blockIdx.x * ROWS + threadIdx.y;
  bool active = row < rows;
  const float* in = x + (active ? row : 0) * cols;
  float* out = y + (active ? row : 0) * cols;
  float m = __int_as_float(0xff800000);  // -infinity
  if (active) {
    for (int c = threadIdx.x * VEC; c < cols; c += THREADS * VEC) {
      float v[VEC];
      load<VEC>(in + c, v);
      for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[i]);
    }
  }
  m = row_reduce<THREADS>(m, scratch[threadIdx.y], true);
  float s = 0.0f;
  if (active) {
    for (int c = threadIdx.x * VEC; c < cols; c += THREADS * VEC) {
      float v[VEC];
      load<VEC>(in + c, v);
      for (int i = 0; i < VEC; ++i) s += __expf(v[i] - m);
    }
  }
  s = row_reduce<THREADS>(s, scratch[threadIdx.y], false);
  float inv = 1.0f / s;
  if (!active) return;
  for (int c = threadIdx.x * VEC; c < cols; c += THREADS * VEC) {
    float v[VEC];
    load<VEC>(in + c, v);
    if constexpr (VEC == 4) {
      *reinterpret_cast<float4*>(out + c) =
          make_float4(__expf(v[0] - m) * inv, __expf(v[1] - m) * inv, __expf(v[2] - m) * inv,
                      __expf(v[3] - m) * inv);
    } else {
      for (int i = 0; i < VEC; ++i) out[c + i] = __expf(v[i] - m) * inv;
    }
  }
}
