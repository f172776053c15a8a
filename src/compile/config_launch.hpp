// The compile-time check that every config can launch on every architecture it was built for:
// shared by NVRTC images and images from binaries (Triton).
#pragma once

#include <array>
#include <functional>

#include "kernelop/error.hpp"
#include "kernelop/image.hpp"

namespace kernelop::detail {

/// Throws Error(Compile) "op ns::x: tactic 1 (B=2048) cannot launch: ..." when a config whose
/// block is constant (given its values) has too many threads, needs more registers than an SM
/// has, or more shared memory (its geometry's, static, and the image's launch_shared) than a
/// block may use, on a CUBIN architecture where its requires do not exclude it.
void check_configs_launch(const CompiledImage& image);

/// Throws (through `fail`) unless every config of `program` whose block is constant on
/// architecture `arch` (90 for sm_90; the block may read arch()) launches the block its machine
/// code requires (`required`, the CUBIN's .reqntid): the driver refuses any other.
void check_required_block(const OpPlan& plan, int program, int arch,
                          const std::array<int, 3>& required,
                          const std::function<ErrorStream(ErrorKind)>& fail);

}  // namespace kernelop::detail
