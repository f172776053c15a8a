// Which image of an op a device runs: a CUBIN it can execute, else PTX it can JIT.
#pragma once

#include <string>
#include <vector>

#include "kernelop/image.hpp"

namespace kernelop::detail {

/// An architecture string split into its number and suffix: "sm_90a" -> {90, 'a', false}.
struct ArchId {
  int number = 0;    ///< 90 for sm_90, 100 for sm_100
  char suffix = 0;   ///< 'a' (arch-specific), 'f' (family) or 0
  bool ptx = false;  ///< compute_NN
  int major() const { return number / 10; }
  int minor() const { return number % 10; }
};
bool parse_arch(const std::string& arch, ArchId* out);

/// The index in `images` to load on a device of compute capability major.minor:
///  1. a CUBIN for exactly that architecture ("sm_90a" preferred over "sm_90");
///  2. else the CUBIN of the same major version with the highest minor not above the device's
///     (CUBINs run on later minor versions of their major version; "a" variants only exactly);
///  3. else the highest PTX not above the device (JIT-compiled by the driver);
/// With prefer_ptx, step 3 comes first. Returns -1 when nothing fits, with the reason in `why`.
int select_image(const std::vector<ArchImage>& images, int major, int minor, bool prefer_ptx,
                 std::string* why);

}  // namespace kernelop::detail
