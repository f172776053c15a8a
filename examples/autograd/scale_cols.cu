// y = x * w, w one value per column, for float and double. Its backward takes two launches
// (Note [several launches]): grad_x = grad_y * w, while each block adds up grad_y * x over a stripe
// of rows into its own row of per-SM partials (scratch); then one kernel adds up the partials into
// grad_w. The pattern of Liger-Kernel's RMSNorm backward.
template <class T>
__global__ void scale_cols(const T* __restrict__ x, const T* __restrict__ w, long long n, int cols,
                           T* __restrict__ y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i] * w[i % cols];
}

template <class T>
__global__ void scale_cols_backward(const T* __restrict__ x, const T* __restrict__ w,
                                    const T* __restrict__ grad_y, long long rows, int cols,
                                    T* __restrict__ grad_x, T* __restrict__ part) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const T wc = w[c];
    T acc = 0;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
      const long long i = r * cols + c;
      grad_x[i] = grad_y[i] * wc;
      acc += grad_y[i] * x[i];
    }
    part[(long long)blockIdx.x * cols + c] = acc;
  }
}

template <class T>
__global__ void sum_partials(const T* __restrict__ part, int parts, int cols,
                             T* __restrict__ grad_w) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  T s = 0;
  for (int p = 0; p < parts; ++p) s += part[(long long)p * cols + c];
  grad_w[c] = s;
}
