// CUDA's launch limits, checked in one place.
#include "kernelop/launch_limits.hpp"

#include "kernelop/error.hpp"

#include <limits>

namespace kernelop {

namespace {
constexpr std::int64_t kib(std::int64_t n) {
  return n * 1024;
}
}  // namespace

std::int64_t max_shared_per_block(int arch_number) {
  switch (arch_number) {
    case 70:
    case 72:
      return kib(96);
    case 75:
      return kib(64);
    case 80:
    case 87:
      return kib(163);
    case 86:
    case 89:
    case 120:
    case 121:
      return kib(99);
    case 90:
    case 100:
    case 101:
    case 103:
    case 110:
      return kib(227);
    default:
      return kib(48);
  }
}

std::string block_problem(const std::vector<std::int64_t>& block) {
  if (block.empty()) return "is empty; expected 1 to 3 positive ints";
  if (block.size() > 3) {
    return "has " + std::to_string(block.size()) + " dims; CUDA blocks have at most 3";
  }
  std::int64_t threads = 1;
  bool overflow = false;
  for (auto b : block) {
    if (b <= 0) return "has " + std::to_string(b) + "; expected positive ints";
    overflow = overflow || __builtin_mul_overflow(threads, b, &threads);
  }
  if (overflow) {
    return "has more than " + std::to_string(std::numeric_limits<std::int64_t>::max()) +
           " threads per block; CUDA allows at most " + std::to_string(kMaxThreadsPerBlock);
  }
  if (threads > kMaxThreadsPerBlock) {
    return "has " + std::to_string(threads) + " threads per block; CUDA allows at most " +
           std::to_string(kMaxThreadsPerBlock);
  }
  for (std::size_t i = 0; i < block.size(); ++i) {
    if (block[i] > kMaxBlock[i]) {
      return std::string(kAxisNames[i]) + " dimension is " + std::to_string(block[i]) +
             "; CUDA allows at most " + std::to_string(kMaxBlock[i]);
    }
  }
  return {};
}

std::string cluster_problem(const std::vector<std::int64_t>& cluster) {
  if (cluster.empty() || cluster.size() > 3) {
    return "has " + std::to_string(cluster.size()) + " dims; expected 1 to 3";
  }
  std::int64_t blocks = 1;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (cluster[i] < 1 || cluster[i] > kMaxClusterBlocks) {
      return std::string(kAxisNames[i]) + " dimension is " + std::to_string(cluster[i]) +
             "; a cluster has 1 to " + std::to_string(kMaxClusterBlocks) + " blocks";
    }
    blocks *= cluster[i];
  }
  if (blocks > kMaxClusterBlocks) {
    return "has " + std::to_string(blocks) + " blocks; a cluster has at most " +
           std::to_string(kMaxClusterBlocks);
  }
  return {};
}

void check_cluster(std::string_view op, const Dims3& grid, const Dims3& cluster,
                   const std::array<std::string, 3>* text) {
  auto quoted = [](const std::string& expr) { return expr.empty() ? "" : " ('" + expr + "')"; };
  if (std::string why = cluster_problem({cluster.begin(), cluster.end()}); !why.empty()) {
    KERNELOP_FAIL(Launch) << "op " << op << ": the cluster [" << cluster[0] << ", " << cluster[1]
                          << ", " << cluster[2] << "] " << why;
  }
  for (std::size_t i = 0; i < 3; ++i) {
    if (grid[i] % cluster[i] != 0) {
      KERNELOP_FAIL(Launch) << "op " << op << ": grid " << kAxisNames[i] << " = " << grid[i]
                            << " is not a multiple of cluster " << kAxisNames[i] << " = "
                            << cluster[i] << quoted(text ? (*text)[i] : "");
    }
  }
}

void check_launch_dims(std::string_view op, const Dims3& grid, const Dims3& block,
                       std::int64_t shared_mem, const DimsText* text) {
  auto quoted = [](const std::string& expr) { return expr.empty() ? "" : " ('" + expr + "')"; };
  for (std::size_t i = 0; i < 3; ++i) {
    if (grid[i] < 1 || grid[i] > kMaxGrid[i]) {
      KERNELOP_FAIL(Launch) << "op " << op << ": grid " << kAxisNames[i] << " = " << grid[i]
                            << quoted(text ? text->grid[i] : "") << "; CUDA allows 1.."
                            << kMaxGrid[i];
    }
    if (block[i] < 1 || block[i] > kMaxBlock[i]) {
      KERNELOP_FAIL(Launch) << "op " << op << ": block " << kAxisNames[i] << " = " << block[i]
                            << quoted(text ? text->block[i] : "") << "; CUDA allows 1.."
                            << kMaxBlock[i];
    }
  }
  // Each extent is at most 1024 here: no overflow.
  std::int64_t threads = block[0] * block[1] * block[2];
  if (threads > kMaxThreadsPerBlock) {
    KERNELOP_FAIL(Launch) << "op " << op << ": a block of " << block[0] << " x " << block[1]
                          << " x " << block[2] << " = " << threads
                          << " threads; CUDA allows at most " << kMaxThreadsPerBlock;
  }
  if (shared_mem < 0 || shared_mem > kMaxSharedMemBytes) {
    KERNELOP_FAIL(Launch) << "op " << op << ": shared memory " << shared_mem
                          << quoted(text ? text->shared_mem : "") << " is out of range (0.."
                          << kMaxSharedMemBytes << " bytes)";
  }
}

}  // namespace kernelop
