// CUDA's launch limits, checked in one place.
#include "kernelop/launch_limits.hpp"

#include "kernelop/error.hpp"

namespace kernelop {

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
