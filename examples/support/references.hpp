// CPU references for the example kernels, computed in double, used by `kernelop run --check`
// and the GPU test suite.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "kernelop/host_tensor.hpp"

namespace kernelop::examples {

/// The CPU reference of an example op (kernelop/host_tensor.hpp).
using Reference = HostReference;

/// The reference for an example op ("kernelop_examples::relu"), or nullptr.
const Reference* find_reference(std::string_view op_name);

}  // namespace kernelop::examples
