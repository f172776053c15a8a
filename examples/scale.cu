// scale: y = alpha * x, with alpha a scalar passed by value.
extern "C" __global__ void scale(const float* __restrict__ x, float alpha, int n,
                                 float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}
