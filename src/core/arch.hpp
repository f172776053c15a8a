// GPU architecture names ("sm_90", "sm_90a", "compute_80"), parsed by hand: std::regex is slow,
// recursive, and has crashed inside Python processes that load a second libstdc++.
#pragma once

#include <string_view>

namespace kernelop::detail {

/// An architecture split into its number and suffix: "sm_90a" -> {90, 'a', false}.
struct ArchId {
  int number = 0;    ///< 90 for sm_90, 100 for sm_100
  char suffix = 0;   ///< 'a' (arch-specific), 'f' (family) or 0
  bool ptx = false;  ///< compute_NN
  int major() const { return number / 10; }
  int minor() const { return number % 10; }
};

/// Parses (sm|compute)_NN[N][a|f]; false for anything else.
inline bool parse_arch(std::string_view arch, ArchId* out) {
  ArchId id;
  if (arch.substr(0, 3) == "sm_") {
    arch.remove_prefix(3);
  } else if (arch.substr(0, 8) == "compute_") {
    arch.remove_prefix(8);
    id.ptx = true;
  } else {
    return false;
  }
  std::size_t digits = 0;
  while (digits < arch.size() && arch[digits] >= '0' && arch[digits] <= '9') {
    id.number = id.number * 10 + (arch[digits] - '0');
    ++digits;
  }
  if (digits < 2 || digits > 3) return false;
  arch.remove_prefix(digits);
  if (arch.size() == 1 && (arch[0] == 'a' || arch[0] == 'f')) {
    id.suffix = arch[0];
    arch.remove_prefix(1);
  }
  if (!arch.empty()) return false;
  *out = id;
  return true;
}

}  // namespace kernelop::detail
