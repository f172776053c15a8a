// CUDA's launch limits: one table, used by validation (constant geometry) and by every launch
// (KernelOp::launch and launch_raw), so the two can never disagree.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kernelop {

using Dims3 = std::array<std::int64_t, 3>;

/// Grid and block extents per axis (x, y, z), threads per block, dynamic shared memory.
inline constexpr Dims3 kMaxGrid = {2147483647, 65535, 65535};
inline constexpr Dims3 kMaxBlock = {1024, 1024, 64};
inline constexpr std::int64_t kMaxThreadsPerBlock = 1024;
inline constexpr std::int64_t kMaxSharedMemBytes = 2147483647;  // what cuLaunchKernel takes
inline constexpr std::array<std::string_view, 3> kAxisNames = {"x", "y", "z"};

/// True when the dimensions are within CUDA's limits (the launch path's cheap test).
constexpr bool within_launch_limits(const Dims3& grid, const Dims3& block,
                                    std::int64_t shared_mem) {
  for (std::size_t i = 0; i < 3; ++i) {
    if (grid[i] < 1 || grid[i] > kMaxGrid[i] || block[i] < 1 || block[i] > kMaxBlock[i])
      return false;
  }
  return block[0] * block[1] * block[2] <= kMaxThreadsPerBlock && shared_mem >= 0 &&
         shared_mem <= kMaxSharedMemBytes;
}

/// Thread-block clusters: the blocks of one cluster (sm_90's limit with the non-portable size
/// allowed, which kernelop sets on a clustered op's kernels: the portable limit is 8), and the
/// first architecture that has them.
inline constexpr std::int64_t kMaxClusterBlocks = 16;
inline constexpr int kFirstClusterArch = 90;

/// True when a cluster launch of `grid` can be made: each cluster axis >= 1 and dividing the
/// grid's, at most kMaxClusterBlocks blocks (the launch path's cheap test).
constexpr bool within_cluster_limits(const Dims3& grid, const Dims3& cluster) {
  for (std::size_t i = 0; i < 3; ++i) {
    if (cluster[i] < 1 || cluster[i] > kMaxClusterBlocks || grid[i] % cluster[i] != 0) return false;
  }
  return cluster[0] * cluster[1] * cluster[2] <= kMaxClusterBlocks;
}

/// Why a constant cluster (1 to 3 extents, as a spec declares it) cannot launch, or "".
std::string cluster_problem(const std::vector<std::int64_t>& cluster);

/// Throws Error(Launch) "op <op>: grid y = 3 is not a multiple of cluster y = 2 ('expr')" when
/// the cluster is outside the limits or does not divide the grid.
void check_cluster(std::string_view op, const Dims3& grid, const Dims3& cluster,
                   const std::array<std::string, 3>* text = nullptr);

/// Why a constant block (1 to 3 extents, as a spec declares it) cannot launch, or "": "has 2048
/// threads per block; CUDA allows at most 1024", "z dimension is 128; CUDA allows at most 64".
std::string block_problem(const std::vector<std::int64_t>& block);

/// Registers of one SM (every architecture kernelop builds for, sm_50 to sm_120): a block whose
/// threads x registers exceed it cannot launch.
inline constexpr std::int64_t kRegistersPerSm = 65536;
/// The shared memory (static + dynamic) one block may use on an architecture (sm_90: 227 KiB),
/// with the opt-in kernelop makes; 48 KiB for architectures it does not know.
std::int64_t max_shared_per_block(int arch_number);

/// The expressions behind launch dimensions, for messages ("" when the caller gave numbers).
struct DimsText {
  std::array<std::string, 3> grid, block;
  std::string shared_mem;
};

/// Throws Error(Launch) "op <op>: grid y = 70000 ('expr'); CUDA allows 1..65535" when a
/// dimension, the threads per block or the shared memory are outside CUDA's limits.
void check_launch_dims(std::string_view op, const Dims3& grid, const Dims3& block,
                       std::int64_t shared_mem, const DimsText* text = nullptr);

}  // namespace kernelop
