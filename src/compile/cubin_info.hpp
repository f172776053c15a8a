// Per-kernel facts read from a CUBIN's ELF sections: registers and stack frame from .nv.info,
// static shared memory from .nv.shared.<kernel> (the fallback when ptxas' verbose report is
// missing from the NVRTC log, seen under heavy parallel compilation), and the parameters and
// required block from .nv.info.<kernel> (for machine code that comes without its PTX: cuTile's).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/image.hpp"

namespace kernelop::detail {

/// nullopt when the bytes are not a 64-bit ELF or hold no such kernel. Never reads out of bounds.
std::optional<ResourceUsage> cubin_resource_usage(std::string_view cubin,
                                                  std::string_view lowered_name);

/// A kernel's entry as the CUBIN states it (EIATTR_KPARAM_INFO and EIATTR_REQNTID of
/// .nv.info.<kernel>).
struct CubinEntry {
  /// Each parameter's type as ptx_entry_param_types writes one, by its size: ".b32", ".b64", or
  /// ".b8[N]" for another size (a by-value struct, whose alignment the CUBIN does not state).
  std::vector<std::string> param_types;
  /// The block the kernel must be launched with (.reqntid), when it states one.
  std::optional<std::array<int, 3>> required_block;
};

/// nullopt when the bytes are not a 64-bit ELF, hold no such kernel, or its parameter records
/// are malformed (ordinals not 0..n-1, overlapping). Never reads out of bounds.
std::optional<CubinEntry> cubin_entry(std::string_view cubin, std::string_view lowered_name);

}  // namespace kernelop::detail
