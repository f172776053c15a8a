// relu: one thread per element over the flattened tensor.
extern "C" __global__ void relu(const float* __restrict__ x, int n, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
