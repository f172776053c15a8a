// sin_cos: two outputs from one pass.
extern "C" __global__ void sin_cos(const float* __restrict__ x, int n, float* __restrict__ s,
                                   float* __restrict__ c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) sincosf(x[i], &s[i], &c[i]);
}
