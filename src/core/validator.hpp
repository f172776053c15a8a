// The spec validator's class, shared by its parts: validate.cpp (names, inputs, outputs),
// validate_exprs.cpp (expressions), validate_launch.cpp (the calling convention, geometry,
// requirements and compile options) and validate_configs.cpp (tunables, configs, the tuning key).
// Private to the library.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/words.hpp"
#include "kernelop/validate.hpp"

namespace kernelop::detail {

// The largest number of kernel instantiations type parameters may ask for: each is compiled
// for every architecture, and the product of the dtype lists grows fast.
inline constexpr std::size_t kMaxInstances = 1024;
// The most configs an op may declare, and entries in its tuning key.
inline constexpr std::size_t kMaxConfigs = 256;
inline constexpr std::size_t kMaxTuningKey = 16;

// The refusal of too many configs, as "has N configs; at most 256 are allowed" after the
// caller's prefix: the spec reader refuses them before reading one, the validator a C++ spec.
inline void check_config_count(std::size_t n, detail::ErrorStream prefix) {
  if (n > kMaxConfigs) {
    KERNELOP_RAISE(prefix) << "has " << n << " configs; at most " << kMaxConfigs << " are allowed";
  }
}

// A list for messages; "none" when empty.
inline std::string join_or_none(const std::vector<std::string>& items) {
  return items.empty() ? "none" : join(items);
}

class Validator {
 public:
  Validator(const OpDecl& decl, const ValidateOptions& options)
      : decl_(decl), spec_(decl.spec), options_(options) {}

  void run();

 private:
  // Where an expression is used decides what it may read: output shapes read input sizes (and
  // element sizes); requirements may also read strides and data pointers (aligned); launch
  // values (extras, geometry) read outputs and strides too, but no pointer. Launch values and
  // configs' requires (Config: what a requirement reads, and bool scalars) may also read the
  // tunables and the device's arch(): they are evaluated at launch only, never by a Meta kernel.
  // Scratch: a scratch output's shape (Note [several launches]), which a launch alone reads, so
  // it may read the device (sm_count(): per-SM partials).
  // Argument: a kernel argument's value, a launch value that may also read item().
  enum class ExprUse : std::uint8_t { Shape, Requirement, Launch, Config, Scratch, Argument };

  // Starts an error for the field at `path`; the caller streams the rest of the message.
  detail::ErrorStream fail_at(std::string_view path, ErrorKind kind = ErrorKind::Spec) const;
  void check_op_name();
  void check_kernel();
  void check_foreign();
  void check_default(const ScalarInput& s, const std::string& path,
                     const std::optional<std::string>& defaults_from);
  void check_type_params();
  void check_dtype_decl(const std::optional<DTypeDecl>& dtype, const std::string& path);
  void check_name(const std::string& name, const std::string& path);
  void check_inputs();
  // Resolves a SameAs/ReduceDims input reference to a tensor input's name.
  std::string check_input_ref(const InputRef& ref, const std::string& path);
  void check_tensor_input_name(const std::string& name, const std::string& path);
  void check_outputs();
  void check_output_shape(const ShapeRel& shape, const std::string& path, bool scratch);
  void check_output_init(const OutputDecl& out, const std::string& path);
  void check_output_permute(const OutputDecl& out, const std::string& path);
  // validate_exprs.cpp: expressions and axis lists.
  // Checks every leaf of an expression: tensors must be known (inputs, and outputs for launch
  // values), scalars must be integer scalar inputs, and the leaf must be readable where it is.
  void check_expr(const Expr& expr, const std::string& path, ExprUse use);
  // The value of `expr` when it is constant. A constant part that overflows or divides by zero,
  // or a division by a constant zero, could never be evaluated: refused here, not at the first
  // launch.
  std::optional<std::int64_t> fold_constants(const Expr& expr, const std::string& path);
  void check_unique_axes(const std::vector<std::int64_t>& axes, const std::string& path) const;
  // validate_launch.cpp: the calling convention, geometry, requirements, compile options.
  void check_extras();
  void check_block(const std::vector<std::int64_t>& block, const std::string& path);
  // Requirements constrain the inputs: outputs are not known when they are checked.
  void check_requirements();
  void check_when();
  void check_geometry();
  void check_compile_options();
  void check_params();
  void check_extra(const Extra& extra, const std::string& path);
  // validate_configs.cpp: tunables' names first (expressions may use them), the configs last.
  void check_tunables();
  void check_configs();
  void check_config(std::size_t index);

  const OpDecl& decl_;
  const KernelSpec& spec_;
  ValidateOptions options_;
  std::set<std::string> names_;
  std::vector<std::string> tensor_inputs_, scalar_inputs_, output_names_;
  std::set<std::string> int_scalars_, bool_scalars_;
  std::set<std::string> tunables_, used_tunables_;
};

}  // namespace kernelop::detail
