// Column sums in two launches (Note [several launches]): each block adds up a stripe of rows into
// its own row of per-SM partials (scratch kernelop allocates for the call), then one kernel adds
// up the partials. The pattern of Liger-Kernel's RMSNorm backward (dW from per-SM partials).
extern "C" __global__ void colsum_partials(const float* x, float* part, long long rows, int cols) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float s = 0.f;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) s += x[r * cols + c];
    part[static_cast<long long>(blockIdx.x) * cols + c] = s;
  }
}

extern "C" __global__ void colsum_total(const float* part, float* y, int parts, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.f;
  for (int p = 0; p < parts; ++p) s += part[static_cast<long long>(p) * cols + c];
  y[c] = s;
}
