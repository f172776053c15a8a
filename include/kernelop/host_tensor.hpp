// Host-side tensors for checking kernels: values held as double, converted to and from any
// dtype's device bytes (float16 and bfloat16 with round-to-nearest-even), compared with the
// tolerances kernelop's checks use, and an op's CPU reference (HostReference) as `kernelop run
// --check`, the examples and the GPU tests use it.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernelop/tensor.hpp"

namespace kernelop {

struct HostTensor {
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<double> values;  ///< row-major, numel() entries

  HostTensor() = default;
  HostTensor(Shape s, DType d)
      : shape(s), dtype(d), values(static_cast<std::size_t>(s.numel()), 0.0) {}

  std::int64_t numel() const { return shape.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
  /// The values in the dtype's device representation (rounded as the device would store them).
  std::string encode() const;
  /// Replaces the values with those decoded from device bytes.
  void decode(const std::string& bytes);
  /// Rounds every value to what the dtype can hold (so references see what the kernel sees).
  void round_to_dtype();
};

/// Uniform values in [lo, hi), rounded to the dtype.
void fill_uniform(HostTensor& t, std::mt19937_64& rng, double lo, double hi);
/// Default inputs: uniform in [-2, 2).
void default_inputs(std::vector<HostTensor>& inputs, std::mt19937_64& rng);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bfloat16_to_float(std::uint16_t b);
std::uint16_t float_to_bfloat16(float f);

/// Largest |a - b| / (atol + rtol * |b|) over all elements (NaN anywhere gives infinity), with
/// the tolerances kernelop's checks use for the dtype; `extra_atol` widens atol (reductions).
struct Comparison {
  double worst = 0;  ///< <= 1 passes
  double max_abs_error = 0;
  std::int64_t worst_index = -1;
  bool passed() const { return worst <= 1.0; }
};
Comparison compare(const HostTensor& got, const HostTensor& want, double extra_atol = 0);

/// An op's CPU reference, computed in double.
struct HostReference {
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

}  // namespace kernelop
