// repeat2: a shape-changing kernel, [R, C] -> [R, 2C]: y[r, j] = x[r, j % C].
extern "C" __global__ void repeat2(const float* __restrict__ x, int cols, int n_out,
                                   float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_out) return;
  int r = i / (2 * cols);
  int j = i % (2 * cols);
  y[i] = x[r * cols + j % cols];
}
