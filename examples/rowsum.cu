// rowsum: the sum over the last axis; one block per row, a shared-memory tree reduction.
#define BLOCK 256
extern "C" __global__ void rowsum(const float* __restrict__ x, int cols, float* __restrict__ y) {
  __shared__ float partial[BLOCK];
  const float* row = x + (long long)blockIdx.x * cols;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) acc += row[c];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = partial[0];
}
