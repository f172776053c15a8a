// Per-kernel facts read from a CUBIN's ELF sections: registers and stack frame from .nv.info,
// static shared memory from .nv.shared.<kernel>. The fallback when ptxas' verbose report is
// missing from the NVRTC log (seen under heavy parallel compilation).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kernelop/image.hpp"

namespace kernelop::detail {

/// nullopt when the bytes are not a 64-bit ELF or hold no such kernel. Never reads out of bounds.
std::optional<ResourceUsage> cubin_resource_usage(std::string_view cubin,
                                                  std::string_view lowered_name);

}  // namespace kernelop::detail
