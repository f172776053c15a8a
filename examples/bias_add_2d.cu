// bias_add_2d: y[..., r, c] = x[..., r, c] + bias[c] with a 2-D launch (layout "nd").
// blockIdx.x/threadIdx.x walk columns, blockIdx.y/threadIdx.y rows; every leading axis is
// folded into blockIdx.z, which the kernel decodes as a flat batch index.
extern "C" __global__ void bias_add_2d(const float* __restrict__ x, const float* __restrict__ bias,
                                       int rows, int cols, float* __restrict__ y) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r >= rows || c >= cols) return;
  long long i = ((long long)blockIdx.z * rows + r) * cols + c;
  y[i] = x[i] + bias[c];
}
