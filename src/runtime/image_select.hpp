// Which image of an op a device runs: a CUBIN it can execute, else PTX it can JIT.
#pragma once

#include <string>
#include <vector>

#include "core/arch.hpp"
#include "kernelop/image.hpp"

namespace kernelop::detail {

/// The index in `images` to load on a device of compute capability major.minor:
///  1. a CUBIN for exactly that architecture ("sm_90a" preferred over "sm_90");
///  2. else the CUBIN of the same major version with the highest minor not above the device's
///     (CUBINs run on later minor versions of their major version; "a" variants only exactly);
///  3. else the highest PTX not above the device (JIT-compiled by the driver);
/// With prefer_ptx, step 3 comes first. Returns -1 when nothing fits, with the reason in `why`.
int select_image(const std::vector<ArchImage>& images, int major, int minor, bool prefer_ptx,
                 std::string* why);

}  // namespace kernelop::detail
