// CPU references for the example kernels, computed in double, used by `kernelop run --check`
// and the GPU test suite.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "host_tensor.hpp"

namespace kernelop::examples {

struct Reference {
  /// Fills the inputs (shapes and dtypes set by the caller) with valid random values; the
  /// default draws uniformly from [-2, 2).
  std::function<void(std::vector<HostTensor>& inputs, std::mt19937_64& rng)> make_inputs;
  /// Computes the outputs (shapes and dtypes set) and updates mutated inputs in place.
  std::function<void(std::vector<HostTensor>& inputs, const std::vector<ScalarArg>& scalars,
                     std::vector<HostTensor>& outputs)>
      compute;
  /// Absolute tolerance on top of the dtype's, for reductions whose float32 error grows with
  /// the number of terms (0: none).
  std::function<double(const std::vector<HostTensor>& inputs)> extra_atol;
};

/// The reference for an example op ("kernelop_examples::relu"), or nullptr.
const Reference* find_reference(std::string_view op_name);

}  // namespace kernelop::examples
