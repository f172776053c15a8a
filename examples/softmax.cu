// softmax over the last axis: one block per row; max and sum by shared-memory reductions.
#define BLOCK 256

__device__ float block_reduce(float v, float* scratch, bool take_max) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      float other = scratch[threadIdx.x + stride];
      scratch[threadIdx.x] =
          take_max ? fmaxf(scratch[threadIdx.x], other) : scratch[threadIdx.x] + other;
    }
    __syncthreads();
  }
  float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

extern "C" __global__ void softmax(const float* __restrict__ x, int cols, float* __restrict__ y) {
  __shared__ float scratch[BLOCK];
  const float* in = x + (long long)blockIdx.x * cols;
  float* out = y + (long long)blockIdx.x * cols;
  float m = __int_as_float(0xff800000);  // -infinity
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, in[c]);
  m = block_reduce(m, scratch, true);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) s += expf(in[c] - m);
  s = block_reduce(s, scratch, false);
  for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = expf(in[c] - m) / s;
}
