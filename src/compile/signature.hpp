// Verifying the calling convention against the kernel's real parameter types, in the same
// NVRTC compilation: a generated probe classifies each parameter type, and the probe's lowered
// (mangled) name carries the classification out of the compiler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernelop/plan.hpp"

namespace kernelop::detail {

/// Source appended once to the user's source: the type classifier and the probe template.
std::string signature_probe_source();

/// The NVRTC name expression whose lowered name encodes `kernel_expression`'s signature.
std::string signature_probe_expression(const std::string& kernel_expression);

/// Decodes a probe's lowered name into codes: the arity, then one code per parameter.
std::vector<std::int64_t> parse_signature_codes(const std::string& lowered_name);

/// A kernel parameter's type, as far as the calling convention cares.
struct ParamType {
  bool pointer = false;
  bool is_const = false;     ///< pointer to const
  int base = 0;              ///< element (pointers) or value type code
  std::string text() const;  ///< e.g. "const float*", "int", "<unknown type>*"
  std::optional<DType> dtype() const;
};
ParamType decode_param(std::int64_t code);

/// Checks `plan.args` against each instance's parameter codes (codes[i] for plan.instances[i])
/// and returns the plan completed with the tensor dtypes the spec left open (Note [plan stages]).
/// Throws Error(Compile) naming the op, the parameter, what the calling convention passes and
/// what the kernel declares.
CompletedPlan verify_signature(const OpPlan& plan,
                               const std::vector<std::vector<std::int64_t>>& codes);

}  // namespace kernelop::detail
