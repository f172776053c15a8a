// cluster_rowsum: the sum over the last axis, one row per thread-block cluster of 2 blocks (the
// geometry's "cluster": [2]). Each block sums half of the row in its shared memory; block 0 then
// adds block 1's total, read through distributed shared memory. sm_90 or later (the spec builds
// sm_90 and compute_90 only): kernelop refuses a cluster launch on an older GPU, and a build for
// an older architecture traps rather than leave the output unwritten.
#include <cooperative_groups.h>

#define BLOCK 256
extern "C" __global__ void cluster_rowsum(const float* __restrict__ x, int cols,
                                          float* __restrict__ y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ float partial[BLOCK];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();  // the cluster is blocks 2r and 2r + 1: row r
  const long long row = blockIdx.x / 2;
  const int half = (cols + 1) / 2;
  const int begin = static_cast<int>(rank) * half;
  const int end = begin + half < cols ? begin + half : cols;
  const float* r = x + row * cols;
  float acc = 0.0f;
  for (int c = begin + static_cast<int>(threadIdx.x); c < end; c += BLOCK) acc += r[c];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  cluster.sync();  // both halves are in their blocks' shared memory
  if (rank == 0 && threadIdx.x == 0) {
    const float* other = cluster.map_shared_rank(partial, 1);
    y[row] = partial[0] + other[0];
  }
  cluster.sync();  // block 1's shared memory lives until block 0 has read it
#else
  __trap();
#endif
}
