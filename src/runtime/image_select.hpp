// Which image of an op a device runs: a CUBIN it can execute, else PTX it can JIT, else Tile IR
// bytecode the driver compiles.
#pragma once

#include <string>
#include <vector>

#include "core/arch.hpp"
#include "kernelop/image.hpp"

namespace kernelop::detail {

/// Which kind of image is tried first (LoadOptions::prefer_ptx / prefer_tileir).
enum class ImageFirst { Cubin, Ptx, TileIr };

/// The index in `images` to load on a device of compute capability major.minor:
///  1. a CUBIN for exactly that architecture ("sm_90a" preferred over "sm_90");
///  2. else the CUBIN of the same major version with the highest minor not above the device's
///     (CUBINs run on later minor versions of their major version; "a" variants only exactly);
///  3. else the highest PTX not above the device (JIT-compiled by the driver);
///  4. else Tile IR bytecode (compiled by the driver, on sm_80 and later).
/// `first` moves its kind to the front (PTX: 3, 1-2, 4; Tile IR: 4, 1-2, 3). Returns -1 when
/// nothing fits, with the reason in `why`.
int select_image(const std::vector<ArchImage>& images, int major, int minor, ImageFirst first,
                 std::string* why);

}  // namespace kernelop::detail
