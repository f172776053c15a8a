// Spec validation of expressions: the leaves an expression may read where it is used, constant
// parts folded (no overflow, no division by zero), and axis lists without repeats.
#include <algorithm>
#include <optional>
#include <set>

#include "core/validator.hpp"

namespace kernelop::detail {

// Checks every leaf of an expression: tensors must be known (inputs, and outputs for launch
// values), scalars must be integer scalar inputs, and the leaf must be readable where it is.
void Validator::check_expr(const Expr& expr, const std::string& path, ExprUse use) {
  const bool outputs_allowed =
      use == ExprUse::Launch || use == ExprUse::Config || use == ExprUse::Argument;
  const bool at_launch = outputs_allowed;
  fold_constants(expr, path);
  expr.for_each_leaf([&](const Expr& leaf) {
    const std::string& name = leaf.name();
    bool device = leaf.op() == ExprOp::Arch || leaf.op() == ExprOp::SmCount;
    if (device || (leaf.op() == ExprOp::Scalar && tunables_.count(name))) {
      if (at_launch || (device && use == ExprUse::Scratch)) {
        used_tunables_.insert(name);
        return;
      }
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string() << "': ")
          << (device ? leaf.to_string() : "tunable '" + name + "'")
          << (use == ExprUse::Shape || use == ExprUse::Scratch
                  ? " cannot shape an output: every config (and every device) must give the "
                    "same shapes"
                  : " cannot be read by the op's requires (a Meta kernel checks them); put it "
                    "in a config's requires");
    }
    if (leaf.op() == ExprOp::Scalar && use == ExprUse::Config && bool_scalars_.count(name)) return;
    if (leaf.op() == ExprOp::Item && use != ExprUse::Argument) {
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
          << "': item() reads a tensor's value on the host when the launch is reached (Note "
             "[host reads]): only a kernel argument's value may read it";
    }
    if (leaf.op() == ExprOp::Aligned && use != ExprUse::Requirement && use != ExprUse::Config) {
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
          << "': aligned() tests a data pointer, which only a requirement can read (meta "
             "tensors have none)";
    }
    if (leaf.op() == ExprOp::Stride && (use == ExprUse::Shape || use == ExprUse::Scratch)) {
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
          << "': output shapes depend on input sizes, not strides";
    }
    if (leaf.op() == ExprOp::Scalar) {
      if (int_scalars_.count(name)) return;
      if (std::find(scalar_inputs_.begin(), scalar_inputs_.end(), name) != scalar_inputs_.end()) {
        KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
            << "': scalar input '" << name
            << "' is not an integer; expressions take int scalars only";
      }
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
          << "': '" << name << "' is not an integer scalar input (integer scalars: "
          << join_or_none({int_scalars_.begin(), int_scalars_.end()}) << ")";
    }
    bool is_input =
        std::find(tensor_inputs_.begin(), tensor_inputs_.end(), name) != tensor_inputs_.end();
    bool is_output =
        std::find(output_names_.begin(), output_names_.end(), name) != output_names_.end();
    if (is_input || (is_output && outputs_allowed)) return;
    if (is_output) {
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
          << "': output '" << name << "' cannot be used here; output shapes depend on inputs only";
    }
    std::vector<std::string> known = tensor_inputs_;
    if (outputs_allowed) known.insert(known.end(), output_names_.begin(), output_names_.end());
    KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
        << "': '" << name << "' is not a tensor (known tensors: " << join_or_none(known) << ")";
  });
}

// The value of `expr` when it is constant. A constant part that overflows or divides by zero,
// or a division by a constant zero, could never be evaluated: refused here, not at the first
// launch.
std::optional<std::int64_t> Validator::fold_constants(const Expr& expr, const std::string& path) {
  if (expr.is_const()) return expr.const_value();
  if (is_leaf(expr.op())) return std::nullopt;
  if (expr.op() == ExprOp::Select) {
    std::optional<std::int64_t> c = fold_constants(expr.cond(), path);
    std::optional<std::int64_t> a = fold_constants(expr.lhs(), path);
    std::optional<std::int64_t> b = fold_constants(expr.rhs(), path);
    if (!c) return std::nullopt;
    return *c != 0 ? a : b;
  }
  std::optional<std::int64_t> a = fold_constants(expr.lhs(), path);
  std::optional<std::int64_t> b = fold_constants(expr.rhs(), path);
  bool division =
      expr.op() == ExprOp::FloorDiv || expr.op() == ExprOp::CeilDiv || expr.op() == ExprOp::Mod;
  if (division && b && *b == 0) {
    KERNELOP_RAISE(fail_at(path) << "'" << detail::shorten(expr.to_string()))
        << "' divides by zero";
  }
  if (!a || !b) return std::nullopt;
  try {
    return ExprArith<std::int64_t>::apply(expr.op(), *a, *b, expr.node());
  } catch (const Error& e) {
    KERNELOP_RAISE(fail_at(path)) << e.message();
  }
}

void Validator::check_unique_axes(const std::vector<std::int64_t>& axes,
                                  const std::string& path) const {
  std::set<std::int64_t> unique(axes.begin(), axes.end());
  if (unique.size() != axes.size()) KERNELOP_RAISE(fail_at(path)) << "lists an axis twice";
}

}  // namespace kernelop::detail
