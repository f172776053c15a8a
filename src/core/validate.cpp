// Spec validation: every error names the op, the field path, what was expected and what was found.
#include "kernelop/validate.hpp"

#include "core/arch.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "core/words.hpp"
#include "kernelop/launch_limits.hpp"

namespace kernelop {
namespace {

// The largest number of kernel instantiations type parameters may ask for: each is compiled
// for every architecture, and the product of the dtype lists grows fast.
constexpr std::size_t kMaxInstances = 1024;

// A list for messages; "none" when empty.
std::string join(const std::vector<std::string>& items) {
  return items.empty() ? "none" : detail::join(items);
}

class Validator {
 public:
  Validator(const OpDecl& decl, const ValidateOptions& options)
      : decl_(decl), spec_(decl.spec), options_(options) {}

  void run() {
    check_op_name();
    check_kernel();
    check_type_params();
    check_inputs();
    if (spec_.inputs) {
      check_outputs();
      check_extras();
      check_geometry();
      check_requirements();
    }
    check_compile_options();
  }

 private:
  // Starts an error for the field at `path`; the caller streams the rest of the message.
  detail::ErrorStream fail_at(std::string_view path, ErrorKind kind = ErrorKind::Spec) const {
    detail::ErrorStream s(kind);
    s.context(ErrorContext{decl_.op_name, spec_.kernel_name, {}, "validate", {}});
    s << "op " << decl_.op_name << ": " << path << ": ";
    return s;
  }

  void check_op_name() {
    if (!is_valid_op_name(decl_.op_name)) {
      KERNELOP_FAIL(Spec) << "op name '" << decl_.op_name
                          << "' is invalid: expected 'namespace::name' where both parts are "
                             "identifiers (letters, digits, '_', not starting with a digit)";
    }
    auto pos = decl_.op_name.find("::");
    for (const std::string& part : {decl_.op_name.substr(0, pos), decl_.op_name.substr(pos + 2)}) {
      if (is_reserved_name(part)) {
        KERNELOP_FAIL(Spec) << "op name '" << decl_.op_name << "': '" << part
                            << "' is a reserved name";
      }
    }
  }

  void check_kernel() {
    if (spec_.kernel_source.find_first_not_of(" \t\r\n") == std::string::npos) {
      KERNELOP_RAISE(fail_at("kernel_source")) << "is empty; expected CUDA C++ source text";
    }
    if (!detail::is_kernel_name(spec_.kernel_name)) {
      KERNELOP_RAISE(fail_at("kernel_name"))
          << "'" << spec_.kernel_name
          << "' is not a kernel name; expected an identifier, optionally qualified and with "
             "template arguments (e.g. 'relu', 'relu<T>', 'rowsum<256>')";
    }
  }

  void check_type_params() {
    std::set<std::string> seen;
    std::size_t instances = 1;
    for (std::size_t i = 0; i < spec_.type_params.size(); ++i) {
      const auto& tp = spec_.type_params[i];
      std::string path = "type_params[" + std::to_string(i) + "]";
      check_name(tp.name, path + ".name");
      if (!seen.insert(tp.name).second) {
        KERNELOP_RAISE(fail_at(path + ".name")) << "duplicate type parameter '" << tp.name << "'";
      }
      if (tp.dtypes.empty()) {
        KERNELOP_RAISE(fail_at(path + ".dtypes"))
            << "is empty; expected at least one dtype for '" << tp.name << "'";
      }
      std::set<DType> unique(tp.dtypes.begin(), tp.dtypes.end());
      if (unique.size() != tp.dtypes.size()) {
        KERNELOP_RAISE(fail_at(path + ".dtypes")) << "lists a dtype twice";
      }
      auto lt = spec_.kernel_name.find('<');
      if (lt == std::string::npos ||
          detail::find_word(std::string_view(spec_.kernel_name).substr(lt), tp.name) ==
              std::string_view::npos) {
        KERNELOP_RAISE(fail_at("kernel_name"))
            << "'" << spec_.kernel_name << "' does not use type parameter '" << tp.name
            << "'; expected it among the template arguments, e.g. '"
            << spec_.kernel_name.substr(0, lt) << "<" << tp.name << ">'";
      }
      instances *= tp.dtypes.size();  // at most kMaxInstances * 12: no overflow
      if (instances > kMaxInstances) {
        KERNELOP_RAISE(fail_at("type_params"))
            << "ask for more than " << kMaxInstances
            << " kernel instantiations (the product of the numbers of dtypes)";
      }
    }
  }

  void check_dtype_decl(const std::optional<DTypeDecl>& dtype, const std::string& path) {
    if (!dtype || std::holds_alternative<DType>(*dtype)) return;
    const auto& name = std::get<std::string>(*dtype);
    for (const auto& tp : spec_.type_params) {
      if (tp.name == name) return;
    }
    std::vector<std::string> params;
    for (const auto& tp : spec_.type_params) params.push_back(tp.name);
    KERNELOP_RAISE(fail_at(path)) << "'" << name
                                  << "' is neither a dtype nor a type parameter (type parameters: "
                                  << join(params) << ")";
  }

  void check_name(const std::string& name, const std::string& path) {
    if (!detail::is_identifier(name)) {
      KERNELOP_RAISE(fail_at(path)) << "'" << name
                                    << "' is not an identifier (letters, digits, '_', not starting "
                                       "with a digit)";
    }
    if (is_reserved_name(name))
      KERNELOP_RAISE(fail_at(path)) << "'" << name << "' is a reserved name";
  }

  void check_inputs() {
    if (!spec_.inputs) {
      if (!(options_.has_meta_fn && options_.has_eager_fn)) {
        KERNELOP_RAISE(fail_at("inputs"))
            << "missing; required unless both meta_fn and eager_fn are given";
      }
      // Without inputs nothing else can be derived; a field that would be ignored is an error.
      const char* ignored = spec_.outputs                 ? "outputs"
                            : !spec_.extras.empty()       ? "extras"
                            : spec_.geometry              ? "geometry"
                            : !spec_.requirements.empty() ? "requires"
                                                          : nullptr;
      if (ignored) {
        KERNELOP_RAISE(fail_at("inputs"))
            << "missing, so '" << ignored
            << "' cannot be used (it refers to the inputs); declare the "
               "inputs or drop '"
            << ignored << "'";
      }
      return;
    }
    std::set<std::string> type_param_names;
    for (const auto& tp : spec_.type_params) type_param_names.insert(tp.name);
    for (std::size_t i = 0; i < spec_.inputs->size(); ++i) {
      const Input& input = (*spec_.inputs)[i];
      std::string path = "inputs[" + std::to_string(i) + "]";
      const std::string& name =
          std::visit([](const auto& d) -> const std::string& { return d.name; }, input);
      check_name(name, path + ".name");
      if (!names_.insert(name).second) {
        KERNELOP_RAISE(fail_at(path + ".name")) << "duplicate input name '" << name << "'";
      }
      if (type_param_names.count(name)) {
        KERNELOP_RAISE(fail_at(path + ".name"))
            << "'" << name << "' is also a type parameter's name";
      }
      std::visit(Overloaded{
                     [&](const InputDecl& t) {
                       check_dtype_decl(t.dtype, path + ".dtype");
                       tensor_inputs_.push_back(name);
                     },
                     [&](const ScalarInput& s) {
                       scalar_inputs_.push_back(name);
                       if (s.type == ScalarType::Int || s.type == ScalarType::Int64)
                         int_scalars_.insert(name);
                     },
                 },
                 input);
    }
    if (tensor_inputs_.empty()) {
      KERNELOP_RAISE(fail_at("inputs"))
          << "has no tensor input (found " << scalar_inputs_.size()
          << " scalar input(s)); a kernel op needs at least one tensor input";
    }
  }

  // Resolves a SameAs/ReduceDims input reference to a tensor input's name.
  std::string check_input_ref(const InputRef& ref, const std::string& path) {
    return std::visit(Overloaded{
                          [&](std::int64_t index) {
                            auto n = static_cast<std::int64_t>(tensor_inputs_.size());
                            if (index < 0 || index >= n) {
                              KERNELOP_RAISE(fail_at(path))
                                  << "index " << index << " is out of range; expected 0 <= index < "
                                  << n << " (tensor inputs: " << join(tensor_inputs_) << ")";
                            }
                            return tensor_inputs_[static_cast<std::size_t>(index)];
                          },
                          [&](const std::string& name) {
                            check_tensor_input_name(name, path);
                            return name;
                          },
                      },
                      ref);
  }

  void check_tensor_input_name(const std::string& name, const std::string& path) {
    if (std::find(tensor_inputs_.begin(), tensor_inputs_.end(), name) != tensor_inputs_.end()) {
      return;
    }
    if (std::find(scalar_inputs_.begin(), scalar_inputs_.end(), name) != scalar_inputs_.end()) {
      KERNELOP_RAISE(fail_at(path))
          << "'" << name << "' is a scalar input; expected a tensor input (" << join(tensor_inputs_)
          << ")";
    }
    KERNELOP_RAISE(fail_at(path)) << "'" << name << "' is not a tensor input (tensor inputs: "
                                  << join(tensor_inputs_) << ")";
  }

  // Where an expression is used decides what it may read: output shapes read input sizes (and
  // element sizes); requirements may also read strides and data pointers (aligned); launch
  // values (extras, geometry) read outputs and strides too, but no pointer.
  enum class ExprUse : std::uint8_t { Shape, Requirement, Launch };

  // Checks every leaf of an expression: tensors must be known (inputs, and outputs for launch
  // values), scalars must be integer scalar inputs, and the leaf must be readable where it is.
  void check_expr(const Expr& expr, const std::string& path, ExprUse use) {
    const bool outputs_allowed = use == ExprUse::Launch;
    fold_constants(expr, path);
    expr.for_each_leaf([&](const Expr& leaf) {
      const std::string& name = leaf.name();
      if (leaf.op() == ExprOp::Aligned && use != ExprUse::Requirement) {
        KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
            << "': aligned() tests a data pointer, which only a requirement can read (meta "
               "tensors have none)";
      }
      if (leaf.op() == ExprOp::Stride && use == ExprUse::Shape) {
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
            << join({int_scalars_.begin(), int_scalars_.end()}) << ")";
      }
      bool is_input =
          std::find(tensor_inputs_.begin(), tensor_inputs_.end(), name) != tensor_inputs_.end();
      bool is_output =
          std::find(output_names_.begin(), output_names_.end(), name) != output_names_.end();
      if (is_input || (is_output && outputs_allowed)) return;
      if (is_output) {
        KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
            << "': output '" << name
            << "' cannot be used here; output shapes depend on inputs only";
      }
      std::vector<std::string> known = tensor_inputs_;
      if (outputs_allowed) known.insert(known.end(), output_names_.begin(), output_names_.end());
      KERNELOP_RAISE(fail_at(path) << "'" << expr.to_string())
          << "': '" << name << "' is not a tensor (known tensors: " << join(known) << ")";
    });
  }

  // The value of `expr` when it is constant. A constant part that overflows or divides by zero,
  // or a division by a constant zero, could never be evaluated: refused here, not at the first
  // launch.
  std::optional<std::int64_t> fold_constants(const Expr& expr, const std::string& path) {
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

  void check_unique_axes(const std::vector<std::int64_t>& axes, const std::string& path) const {
    std::set<std::int64_t> unique(axes.begin(), axes.end());
    if (unique.size() != axes.size()) KERNELOP_RAISE(fail_at(path)) << "lists an axis twice";
  }

  void check_outputs() {
    if (options_.meta_outputs < 0 || options_.meta_outputs > 64 ||
        (options_.meta_outputs > 0 && (spec_.outputs || !options_.has_meta_fn))) {
      KERNELOP_RAISE(fail_at("outputs"))
          << "meta_outputs = " << options_.meta_outputs
          << " is only for a meta_fn that replaces the declared outputs "
             "(0..64 outputs)";
    }
    if (!spec_.outputs) {
      if (!options_.has_meta_fn) {
        KERNELOP_RAISE(fail_at("outputs")) << "missing; required unless meta_fn is given";
      }
      const char* ignored = !spec_.extras.empty()         ? "extras"
                            : spec_.geometry              ? "geometry"
                            : !spec_.requirements.empty() ? "requires"
                                                          : nullptr;
      if (options_.has_eager_fn && ignored) {
        KERNELOP_RAISE(fail_at("outputs"))
            << "missing, so '" << ignored
            << "' cannot be used: the eager_fn launches the kernel with its "
               "own arguments; declare the outputs or drop '"
            << ignored << "'";
      }
      for (int i = 0; i < options_.meta_outputs; ++i) {
        std::string name = "out" + std::to_string(i);
        if (!names_.insert(name).second) {
          KERNELOP_RAISE(fail_at("outputs"))
              << "the meta_fn's output " << i << " is named '" << name
              << "', which an input already uses; rename the input";
        }
        output_names_.push_back(name);
      }
      return;
    }
    for (const auto& output : *spec_.outputs) output_names_.push_back(output.name);
    bool any_mutated = false;
    if (spec_.inputs) {
      for (const auto& input : *spec_.inputs) {
        if (const auto* t = std::get_if<InputDecl>(&input); t && t->mutated) any_mutated = true;
      }
    }
    if (spec_.outputs->empty() && !any_mutated && !options_.has_meta_fn) {
      KERNELOP_RAISE(fail_at("outputs"))
          << "is empty and no input is mutated; the op would produce nothing";
    }
    for (std::size_t i = 0; i < spec_.outputs->size(); ++i) {
      const OutputDecl& out = (*spec_.outputs)[i];
      std::string path = "outputs[" + std::to_string(i) + "]";
      check_name(out.name, path + ".name");
      for (const auto& tp : spec_.type_params) {
        if (tp.name == out.name) {
          KERNELOP_RAISE(fail_at(path + ".name"))
              << "'" << out.name << "' is also a type parameter's name";
        }
      }
      if (!names_.insert(out.name).second) {
        KERNELOP_RAISE(fail_at(path + ".name"))
            << "duplicate name '" << out.name << "' (input and output names must be unique)";
      }
      std::visit(
          [&](const auto& rel) {
            using T = std::decay_t<decltype(rel)>;
            if constexpr (std::is_same_v<T, SameAs>) {
              check_input_ref(rel.input, path + ".shape.same_as");
            } else if constexpr (std::is_same_v<T, ReduceDims>) {
              check_input_ref(rel.input, path + ".shape.reduce_dims.input");
              if (rel.dims.empty()) {
                KERNELOP_RAISE(fail_at(path + ".shape.reduce_dims.dims"))
                    << "is empty; expected the axes to reduce";
              }
              check_unique_axes(rel.dims, path + ".shape.reduce_dims.dims");
            } else if constexpr (std::is_same_v<T, ShapeExprs>) {
              for (std::size_t d = 0; d < rel.dims.size(); ++d) {
                check_expr(rel.dims[d], path + ".shape[" + std::to_string(d) + "]", ExprUse::Shape);
              }
            } else {
              static_assert(kUnhandled<T>, "an output shape kind without validation");
            }
          },
          out.shape);
      if (out.dtype_from && out.dtype) {
        KERNELOP_RAISE(fail_at(path)) << "gives both dtype_from and dtype; expected at most one";
      }
      if (out.dtype_from) check_tensor_input_name(*out.dtype_from, path + ".dtype_from");
      check_dtype_decl(out.dtype, path + ".dtype");
    }
  }

  void check_extras() {
    for (std::size_t i = 0; i < spec_.extras.size(); ++i) {
      std::string path = "extras[" + std::to_string(i) + "]";
      std::visit(
          [&](const auto& extra) {
            using T = std::decay_t<decltype(extra)>;
            if constexpr (std::is_same_v<T, Numel>) {
              check_expr(Expr::numel(extra.input), path + ".numel", ExprUse::Launch);
            } else if constexpr (std::is_same_v<T, DimSize>) {
              check_expr(Expr::dim(extra.input, extra.axis), path + ".dim_size", ExprUse::Launch);
            } else if constexpr (std::is_same_v<T, ExtraExpr>) {
              check_expr(extra.value, path + ".expr", ExprUse::Launch);
            } else {
              static_assert(kUnhandled<T>, "an extra kind without validation");
            }
          },
          spec_.extras[i]);
    }
  }

  void check_block(const std::vector<std::int64_t>& block, const std::string& path) {
    if (std::string why = block_problem(block); !why.empty()) KERNELOP_RAISE(fail_at(path)) << why;
  }

  // Requirements constrain the inputs: outputs are not known when they are checked.
  void check_requirements() {
    for (std::size_t i = 0; i < spec_.requirements.size(); ++i) {
      const Requirement& r = spec_.requirements[i];
      std::string path = "requires[" + std::to_string(i) + "]";
      check_expr(r.condition, path, ExprUse::Requirement);
      std::optional<std::int64_t> value = fold_constants(r.condition, path);
      if (value && *value == 0) {
        KERNELOP_RAISE(fail_at(path)) << "'" << detail::shorten(r.to_string())
                                      << "' is always false: no input could ever satisfy it";
      }
    }
  }

  void check_geometry() {
    if (!spec_.geometry) {
      if (options_.has_eager_fn) return;
      KERNELOP_RAISE(fail_at("geometry")) << "missing; required unless eager_fn is given";
    }
    std::visit(
        [&](const auto& g) {
          using T = std::decay_t<decltype(g)>;
          if constexpr (std::is_same_v<T, Elementwise>) {
            check_block(g.block, "geometry.elementwise.block");
            if (g.layout == Layout::Flat && g.block.size() != 1) {
              KERNELOP_RAISE(fail_at("geometry.elementwise.block"))
                  << "has " << g.block.size() << " dims with layout='flat'; flat takes one "
                  << "(use layout='nd' for multi-dimensional blocks)";
            }
            if (g.over) {
              check_expr(Expr::numel(*g.over), "geometry.elementwise.over", ExprUse::Launch);
            } else if (output_names_.empty()) {
              KERNELOP_RAISE(fail_at("geometry.elementwise.over"))
                  << "missing; Elementwise iterates over output 0 and this op has no "
                     "outputs, so name the tensor to iterate over";
            }
          } else if constexpr (std::is_same_v<T, Reduction>) {
            if (g.reduce_dims.empty()) {
              KERNELOP_RAISE(fail_at("geometry.reduction.reduce_dims"))
                  << "is empty; expected the reduced axes";
            }
            check_unique_axes(g.reduce_dims, "geometry.reduction.reduce_dims");
            if (g.block_size <= 0 || g.block_size > kMaxThreadsPerBlock) {
              KERNELOP_RAISE(fail_at("geometry.reduction.block_size"))
                  << "is " << g.block_size << "; expected 1 to 1024";
            }
            if (g.shared_mem)
              check_expr(*g.shared_mem, "geometry.reduction.shared_mem", ExprUse::Launch);
          } else if constexpr (std::is_same_v<T, Custom>) {
            if (g.grid.empty() || g.grid.size() > 3) {
              KERNELOP_RAISE(fail_at("geometry.custom.grid"))
                  << "has " << g.grid.size() << " dims; expected 1 to 3";
            }
            if (g.block.empty() || g.block.size() > 3) {
              KERNELOP_RAISE(fail_at("geometry.custom.block"))
                  << "has " << g.block.size() << " dims; expected 1 to 3";
            }
            for (std::size_t d = 0; d < g.grid.size(); ++d) {
              check_expr(g.grid[d], "geometry.custom.grid[" + std::to_string(d) + "]",
                         ExprUse::Launch);
            }
            std::vector<std::int64_t> const_block;
            for (std::size_t d = 0; d < g.block.size(); ++d) {
              check_expr(g.block[d], "geometry.custom.block[" + std::to_string(d) + "]",
                         ExprUse::Launch);
              Expr b = g.block[d].simplified();
              if (b.is_const()) const_block.push_back(b.const_value());
            }
            if (const_block.size() == g.block.size())
              check_block(const_block, "geometry.custom.block");
            check_expr(g.shared_mem, "geometry.custom.shared_mem", ExprUse::Launch);
          } else {
            static_assert(kUnhandled<T>, "a geometry kind without validation");
          }
        },
        *spec_.geometry);
  }

  void check_compile_options() {
    static const std::set<std::string> kStds = {"c++11", "c++14", "c++17", "c++20"};
    if (!kStds.count(spec_.compile_std)) {
      KERNELOP_RAISE(fail_at("compile_std"))
          << "'" << spec_.compile_std
          << "' is not supported; expected c++11, c++14, c++17 or c++20";
    }
    for (std::size_t i = 0; i < spec_.arch_override.size(); ++i) {
      detail::ArchId id;
      if (!detail::parse_arch(spec_.arch_override[i], &id)) {
        KERNELOP_RAISE(fail_at("arch_override[" + std::to_string(i) + "]"))
            << "'" << spec_.arch_override[i]
            << "' is not an architecture; expected 'sm_NN' (CUBIN) or 'compute_NN' (PTX)";
      }
    }
    for (std::size_t i = 0; i < spec_.defines.size(); ++i) {
      if (!detail::is_define(spec_.defines[i])) {
        KERNELOP_RAISE(fail_at("defines[" + std::to_string(i) + "]"))
            << "'" << spec_.defines[i] << "' is not 'NAME' or 'NAME=VALUE'";
      }
    }
    for (std::size_t i = 0; i < spec_.include_paths.size(); ++i) {
      if (spec_.include_paths[i].empty()) {
        KERNELOP_RAISE(fail_at("include_paths[" + std::to_string(i) + "]")) << "is empty";
      }
    }
  }

  const OpDecl& decl_;
  const KernelSpec& spec_;
  ValidateOptions options_;
  std::set<std::string> names_;
  std::vector<std::string> tensor_inputs_, scalar_inputs_, output_names_;
  std::set<std::string> int_scalars_;
};

}  // namespace

void validate(const OpDecl& decl, const ValidateOptions& options) {
  Validator(decl, options).run();
}

}  // namespace kernelop
