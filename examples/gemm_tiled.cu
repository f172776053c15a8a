// C[M, N] = A[M, K] @ B[K, N], float32, row-major, tiled: TILE x TILE tiles of A and B staged in
// shared memory; each thread computes WPT outputs of one column (a block is TILE x TILE / WPT
// threads). TILE is a template argument; WPT comes from the config as a -D define.
#ifndef WPT
#error "WPT (outputs per thread) is defined by the op's config"
#endif

template <int TILE>
__global__ void gemm_tiled(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ c, int m, int n, int k) {
  static_assert(TILE % WPT == 0, "WPT must divide TILE");
  constexpr int kRowThreads = TILE / WPT;
  __shared__ float as[TILE][TILE + 1];
  __shared__ float bs[TILE][TILE + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int col = blockIdx.x * TILE + tx;
  const int row0 = blockIdx.y * TILE;
  float acc[WPT];
  for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    for (int w = 0; w < WPT; ++w) {
      int r = ty + w * kRowThreads;
      int arow = row0 + r, acol = t + tx, brow = t + r;
      as[r][tx] = (arow < m && acol < k) ? a[(long long)arow * k + acol] : 0.0f;
      bs[r][tx] = (brow < k && col < n) ? b[(long long)brow * n + col] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TILE; ++i) {
      float bv = bs[i][tx];
      for (int w = 0; w < WPT; ++w) acc[w] += as[ty + w * kRowThreads][i] * bv;
    }
    __syncthreads();
  }
  for (int w = 0; w < WPT; ++w) {
    int row = row0 + ty + w * kRowThreads;
    if (row < m && col < n) c[(long long)row * n + col] = acc[w];
  }
}
