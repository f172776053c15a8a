// The compile-time check that every config can launch on every architecture it was built for:
// shared by NVRTC images and images from binaries (Triton).
#pragma once

#include "kernelop/image.hpp"

namespace kernelop::detail {

/// Throws Error(Compile) "op ns::x: tactic 1 (B=2048) cannot launch: ..." when a config whose
/// block is constant (given its values) has too many threads, needs more registers than an SM
/// has, or more shared memory (its geometry's, static, and the image's launch_shared) than a
/// block may use, on a CUBIN architecture where its requires do not exclude it.
void check_configs_launch(const CompiledImage& image);

}  // namespace kernelop::detail
