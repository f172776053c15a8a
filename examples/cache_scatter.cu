// cache_scatter: writes rows of `values` into `cache` at `index` (like a KV-cache update).
// cache is mutated in place; the op has no outputs. One thread per element of values.
extern "C" __global__ void cache_scatter(float* __restrict__ cache,
                                         const long long* __restrict__ index,
                                         const float* __restrict__ values, int n, int width,
                                         int cache_rows) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int row = i / width;
  long long dst = index[row];
  if (dst < 0 || dst >= cache_rows) return;  // out-of-range rows are skipped, never written
  cache[dst * width + i % width] = values[i];
}
