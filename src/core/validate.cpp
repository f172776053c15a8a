// Spec validation: every error names the op, the field path, what was expected and what was found.
// This part: names, inputs and outputs; validate_exprs.cpp: expressions; validate_launch.cpp: the
// calling convention, geometry, requirements and compile options; validate_configs.cpp: tunables
// and configs.
#include "kernelop/validate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "core/validator.hpp"

namespace kernelop {
namespace detail {

void Validator::run() {
  check_op_name();
  check_kernel();
  check_type_params();
  check_tunables();
  check_inputs();
  if (spec_.inputs) {
    check_outputs();
    check_extras();
    check_params();
    check_geometry();
    check_requirements();
    check_configs();
  }
  check_when();
  check_compile_options();
}

// Starts an error for the field at `path`; the caller streams the rest of the message.
detail::ErrorStream Validator::fail_at(std::string_view path, ErrorKind kind) const {
  detail::ErrorStream s(kind);
  s.context(ErrorContext{decl_.op_name, spec_.kernel_name, {}, "validate", {}});
  s << "op " << detail::shorten(decl_.op_name) << ": " << detail::shorten(path) << ": ";
  return s;
}

void Validator::check_op_name() {
  if (!is_valid_op_name(decl_.op_name)) {
    KERNELOP_FAIL(Spec) << "op name '" << detail::shorten(decl_.op_name)
                        << "' is invalid: expected 'namespace::name' where both parts are "
                           "identifiers (letters, digits, '_', not starting with a digit)";
  }
  auto pos = decl_.op_name.find("::");
  for (const std::string& part : {decl_.op_name.substr(0, pos), decl_.op_name.substr(pos + 2)}) {
    if (is_reserved_name(part)) {
      KERNELOP_FAIL(Spec) << "op name '" << detail::shorten(decl_.op_name) << "': '"
                          << detail::shorten(part) << "' is a reserved name";
    }
  }
}

void Validator::check_kernel() {
  if (spec_.kernel_source.find_first_not_of(" \t\r\n") == std::string::npos) {
    KERNELOP_RAISE(fail_at("kernel_source"))
        << "is empty; expected "
        << (spec_.foreign
                ? "the " + std::string(spec_.foreign->display()) + " kernel's Python source"
                : std::string("CUDA C++ source text"));
  }
  if (spec_.foreign) check_foreign();
  if (!detail::is_kernel_name(spec_.kernel_name)) {
    KERNELOP_RAISE(fail_at("kernel_name"))
        << "'" << detail::shorten(spec_.kernel_name)
        << "' is not a kernel name; expected an identifier, optionally qualified and with "
           "template arguments (e.g. 'relu', 'relu<T>', 'rowsum<256>')";
  }
}

// A scalar's default matches its type, is finite and fits; once an input has a default, every
// later one needs one (a schema's rule), so tensors after it are refused too.
void Validator::check_default(const ScalarInput& s, const std::string& path,
                              const std::optional<std::string>& defaults_from) {
  if (!s.default_value) {
    if (defaults_from) {
      KERNELOP_RAISE(fail_at(path))
          << "missing: scalar '" << s.name << "' follows " << *defaults_from
          << ", which has a default, so it needs one too (callers omit trailing arguments only)";
    }
    return;
  }
  const ScalarDefault& v = *s.default_value;
  auto wrong = [&](const char* expected) {
    KERNELOP_RAISE(fail_at(path)) << "scalar '" << s.name << "' is " << scalar_type_name(s.type)
                                  << "; its default must be " << expected << ", found "
                                  << scalar_default_text(v);
  };
  switch (s.type) {
    case ScalarType::Bool:
      if (!std::holds_alternative<bool>(v)) wrong("true or false");
      break;
    case ScalarType::Int:
    case ScalarType::Int64: {
      if (!std::holds_alternative<std::int64_t>(v)) wrong("an integer");
      std::int64_t i = std::get<std::int64_t>(v);
      if (s.type == ScalarType::Int && (i < INT32_MIN || i > INT32_MAX)) {
        KERNELOP_RAISE(fail_at(path)) << "scalar '" << s.name << "' is a 32-bit int; its default "
                                      << i << " does not fit (declare it int64)";
      }
      break;
    }
    case ScalarType::Float:
    case ScalarType::Float64: {
      if (std::holds_alternative<bool>(v)) wrong("a number");
      double d = std::holds_alternative<double>(v) ? std::get<double>(v)
                                                   : static_cast<double>(std::get<std::int64_t>(v));
      if (!std::isfinite(d)) wrong("a finite number");
      break;
    }
  }
}

void Validator::check_foreign() {
  const ForeignKernel& k = *spec_.foreign;
  std::string what = "a " + std::string(k.display()) + " kernel";
  auto refuse = [&](std::string_view field, std::string_view why) {
    KERNELOP_RAISE(fail_at(field)) << why;
  };
  if (k.version.empty()) {
    KERNELOP_RAISE(fail_at(std::string(k.key()) + ".version"))
        << "is empty; expected the " << k.display() << " version";
  }
  if (!spec_.type_params.empty()) {
    refuse("type_params", what + " is compiled for one dtype per tensor; declare dtypes");
  }
  if (!spec_.include_paths.empty() || !spec_.defines.empty() || spec_.fast_math ||
      spec_.line_info || !spec_.arch_override.empty()) {
    refuse(!spec_.include_paths.empty() ? "include_paths"
           : !spec_.defines.empty()     ? "defines"
           : spec_.fast_math            ? "fast_math"
           : spec_.line_info            ? "line_info"
                                        : "arch_override",
           "is an NVRTC option; " + what + " is compiled by " + std::string(k.compile_fn()));
  }
  if (spec_.inputs && !spec_.params) {
    refuse("params", "missing: " + what + "'s parameters are listed in its own order");
  }
  if (spec_.geometry && !std::holds_alternative<Custom>(*spec_.geometry)) {
    refuse("geometry", what + "'s launch is custom (grid, block, shared memory as recorded)");
  }
}

void Validator::check_type_params() {
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
    if (lt == std::string::npos || detail::find_word(std::string_view(spec_.kernel_name).substr(lt),
                                                     tp.name) == std::string_view::npos) {
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

void Validator::check_dtype_decl(const std::optional<DTypeDecl>& dtype, const std::string& path) {
  if (!dtype || std::holds_alternative<DType>(*dtype)) return;
  const auto& name = std::get<std::string>(*dtype);
  for (const auto& tp : spec_.type_params) {
    if (tp.name == name) return;
  }
  std::vector<std::string> params;
  for (const auto& tp : spec_.type_params) params.push_back(tp.name);
  KERNELOP_RAISE(fail_at(path)) << "'" << name
                                << "' is neither a dtype nor a type parameter (type parameters: "
                                << join_or_none(params) << ")";
}

void Validator::check_name(const std::string& name, const std::string& path) {
  if (!detail::is_identifier(name)) {
    KERNELOP_RAISE(fail_at(path)) << "'" << detail::shorten(name)
                                  << "' is not an identifier (letters, digits, '_', not starting "
                                     "with a digit)";
  }
  if (is_reserved_name(name))
    KERNELOP_RAISE(fail_at(path)) << "'" << detail::shorten(name) << "' is a reserved name";
}

void Validator::check_inputs() {
  if (!spec_.inputs) {
    if (!(options_.has_meta_fn && options_.has_eager_fn)) {
      KERNELOP_RAISE(fail_at("inputs"))
          << "missing; required unless both meta_fn and eager_fn are given";
    }
    // Without inputs nothing else can be derived; a field that would be ignored is an error.
    const char* ignored = spec_.outputs                 ? "outputs"
                          : !spec_.extras.empty()       ? "extras"
                          : spec_.params                ? "params"
                          : spec_.geometry              ? "geometry"
                          : !spec_.requirements.empty() ? "requires"
                          : !spec_.configs.empty()      ? "configs"
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
  std::optional<std::string> defaults_from;  // the first input with a default
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
      KERNELOP_RAISE(fail_at(path + ".name")) << "'" << name << "' is also a type parameter's name";
    }
    std::visit(Overloaded{
                   [&](const InputDecl& t) {
                     if (defaults_from) {
                       KERNELOP_RAISE(fail_at(path))
                           << "tensor '" << name << "' follows " << *defaults_from
                           << ", which has a default; inputs with defaults come last";
                     }
                     check_dtype_decl(t.dtype, path + ".dtype");
                     if (t.result && !t.mutated) {
                       KERNELOP_RAISE(fail_at(path + ".result"))
                           << "'" << name
                           << "' is not mutated; only an input the kernel writes in place "
                              "holds a result (declare \"mutated\": true, or drop \"result\")";
                     }
                     tensor_inputs_.push_back(name);
                   },
                   [&](const ScalarInput& s) {
                     scalar_inputs_.push_back(name);
                     bool is_int = s.type == ScalarType::Int || s.type == ScalarType::Int64;
                     if (is_int) int_scalars_.insert(name);
                     if (s.type == ScalarType::Bool) bool_scalars_.insert(name);
                     if (s.symint && !is_int) {
                       KERNELOP_RAISE(fail_at(path + ".symint"))
                           << "scalar '" << name << "' is " << scalar_type_name(s.type)
                           << "; only int and int64 scalars can be SymInt";
                     }
                     check_default(s, path + ".default", defaults_from);
                     if (s.default_value && !defaults_from) defaults_from = path;
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
std::string Validator::check_input_ref(const InputRef& ref, const std::string& path) {
  return std::visit(Overloaded{
                        [&](std::int64_t index) {
                          auto n = static_cast<std::int64_t>(tensor_inputs_.size());
                          if (index < 0 || index >= n) {
                            KERNELOP_RAISE(fail_at(path))
                                << "index " << index << " is out of range; expected 0 <= index < "
                                << n << " (tensor inputs: " << join_or_none(tensor_inputs_) << ")";
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

void Validator::check_tensor_input_name(const std::string& name, const std::string& path) {
  if (std::find(tensor_inputs_.begin(), tensor_inputs_.end(), name) != tensor_inputs_.end()) {
    return;
  }
  if (std::find(scalar_inputs_.begin(), scalar_inputs_.end(), name) != scalar_inputs_.end()) {
    KERNELOP_RAISE(fail_at(path)) << "'" << name << "' is a scalar input; expected a tensor input ("
                                  << join_or_none(tensor_inputs_) << ")";
  }
  KERNELOP_RAISE(fail_at(path)) << "'" << name << "' is not a tensor input (tensor inputs: "
                                << join_or_none(tensor_inputs_) << ")";
}

void Validator::check_outputs() {
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
        KERNELOP_RAISE(fail_at("outputs")) << "the meta_fn's output " << i << " is named '" << name
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
  bool returns = std::any_of(spec_.outputs->begin(), spec_.outputs->end(),
                             [](const OutputDecl& o) { return !o.scratch; });
  if (!returns && !any_mutated && !options_.has_meta_fn) {
    KERNELOP_RAISE(fail_at("outputs"))
        << (spec_.outputs->empty() ? "is empty" : "holds only scratch")
        << " and no input is mutated; the op would produce nothing";
  }
  for (std::size_t i = 0; i < spec_.outputs->size(); ++i) {
    const OutputDecl& out = (*spec_.outputs)[i];
    std::string path = "outputs[" + std::to_string(i) + "]";
    check_name(out.name, path + ".name");
    if (!out.scratch && i > 0 && (*spec_.outputs)[i - 1].scratch) {
      KERNELOP_RAISE(fail_at(path))
          << "'" << out.name << "' follows scratch '" << (*spec_.outputs)[i - 1].name
          << "'; declare scratch after the outputs the op returns";
    }
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
    check_output_shape(out.shape, path, out.scratch);
    if (out.dtype_from && out.dtype) {
      KERNELOP_RAISE(fail_at(path)) << "gives both dtype_from and dtype; expected at most one";
    }
    if (out.dtype_from) check_tensor_input_name(*out.dtype_from, path + ".dtype_from");
    check_dtype_decl(out.dtype, path + ".dtype");
    if (!out.permute.empty()) check_output_permute(out, path);
    if (out.align != 0 && !valid_output_alignment(out.align)) {
      KERNELOP_RAISE(fail_at(path + ".align"))
          << "expected a power of two from 1 to 256 (bytes: what every buffer kernelop allocates "
             "has), found "
          << out.align;
    }
    if (out.init) check_output_init(out, path);
  }
}

// Note [returned views]: a permutation of the dims of an output of known rank that the op
// returns (a scratch tensor is never returned; a meta_fn shapes its outputs itself).
void Validator::check_output_permute(const OutputDecl& out, const std::string& path) {
  const std::string where = path + ".permute";
  if (out.scratch) {
    KERNELOP_RAISE(fail_at(where)) << "'" << out.name
                                   << "' is scratch, which the op never returns; a permute "
                                      "tells how the op returns an output";
  }
  if (options_.has_meta_fn) {
    KERNELOP_RAISE(fail_at(where)) << "the op's meta_fn shapes its outputs; a permute needs the "
                                      "output's shape in the spec";
  }
  if (options_.has_eager_fn) {  // its outputs are what eager_fn allocates, not the permuted view
    KERNELOP_RAISE(fail_at(where)) << "the op's eager_fn allocates its outputs; a permute is how "
                                      "kernelop allocates them";
  }
  if (out.init && std::holds_alternative<CloneInit>(*out.init)) {
    KERNELOP_RAISE(fail_at(where)) << "'" << out.name
                                   << "' starts as a clone of an input, which is returned as "
                                      "it is; a permute needs a shape of its own";
  }
  const auto* dims = std::get_if<ShapeExprs>(&out.shape);
  if (!dims) {
    KERNELOP_RAISE(fail_at(where))
        << "needs the output's rank: give '" << out.name << "' its shape as a list of expressions";
  }
  const std::size_t rank = dims->dims.size();
  std::vector<bool> seen(rank, false);
  bool ok = out.permute.size() == rank;
  for (std::size_t k = 0; ok && k < out.permute.size(); ++k) {
    const std::int64_t d = out.permute[k];
    ok = d >= 0 && static_cast<std::size_t>(d) < rank && !seen[static_cast<std::size_t>(d)];
    if (ok) seen[static_cast<std::size_t>(d)] = true;
  }
  if (!ok) {
    std::ostringstream found;
    for (std::size_t k = 0; k < out.permute.size(); ++k) found << (k ? ", " : "") << out.permute[k];
    KERNELOP_RAISE(fail_at(where))
        << "expected a permutation of the " << rank << " dims of '" << out.name << "' (each of 0.."
        << (rank ? rank - 1 : 0) << " once), found [" << found.str() << "]";
  }
}

// Note [initialised outputs]: a fill the output's dtype holds (checked again at launch where the
// dtype comes from an input), a clone of a contiguous input with that input's shape and dtype.
void Validator::check_output_init(const OutputDecl& out, const std::string& path) {
  std::visit(Overloaded{
                 [&](const FillInit& fill) {
                   const auto* dtype = out.dtype ? std::get_if<DType>(&*out.dtype) : nullptr;
                   if (dtype && !fill_bits(*dtype, fill.value)) {
                     KERNELOP_RAISE(fail_at(path + ".init.fill"))
                         << "output '" << out.name << "' is " << dtype_name(*dtype)
                         << ", which cannot hold " << fill.value << " as it is";
                   }
                 },
                 [&](const CloneInit& clone) {
                   std::string where = path + ".init.clone";
                   check_tensor_input_name(clone.input, where);
                   for (const Input& input : *spec_.inputs) {
                     const auto* t = std::get_if<InputDecl>(&input);
                     if (t && t->name == clone.input && t->strided) {
                       KERNELOP_RAISE(fail_at(where))
                           << "input '" << clone.input
                           << "' is strided; kernelop clones contiguous inputs (drop \"strided\")";
                     }
                   }
                   const auto* same = std::get_if<SameAs>(&out.shape);
                   if (!same || !same->edits.empty() ||
                       check_input_ref(same->input, path + ".shape.same_as") != clone.input) {
                     KERNELOP_RAISE(fail_at(path + ".shape"))
                         << "output '" << out.name << "' is a clone of '" << clone.input
                         << "': expected {\"same_as\": \"" << clone.input << "\"} with no dims";
                   }
                   if (out.dtype || (out.dtype_from && *out.dtype_from != clone.input)) {
                     KERNELOP_RAISE(fail_at(path + (out.dtype ? ".dtype" : ".dtype_from")))
                         << "output '" << out.name << "' is a clone of '" << clone.input
                         << "' and has its dtype; expected no dtype or dtype_from";
                   }
                 },
             },
             *out.init);
}

// The shape rule of the output at `path`: its input reference, axes and expressions.
void Validator::check_output_shape(const ShapeRel& shape, const std::string& path, bool scratch) {
  const ExprUse use = scratch ? ExprUse::Scratch : ExprUse::Shape;
  std::visit(
      [&](const auto& rel) {
        using T = std::decay_t<decltype(rel)>;
        if constexpr (std::is_same_v<T, SameAs>) {
          check_input_ref(rel.input, path + ".shape.same_as");
          std::set<std::int64_t> axes;
          for (const AxisEdit& e : rel.edits) {
            std::string p = path + ".shape.dims." + std::to_string(e.axis);
            if (!axes.insert(e.axis).second) {
              KERNELOP_RAISE(fail_at(p)) << "axis " << e.axis << " is edited twice";
            }
            check_expr(e.size, p, use);
          }
        } else if constexpr (std::is_same_v<T, ReduceDims>) {
          check_input_ref(rel.input, path + ".shape.reduce_dims.input");
          if (rel.dims.empty()) {
            KERNELOP_RAISE(fail_at(path + ".shape.reduce_dims.dims"))
                << "is empty; expected the axes to reduce";
          }
          check_unique_axes(rel.dims, path + ".shape.reduce_dims.dims");
        } else if constexpr (std::is_same_v<T, ShapeExprs>) {
          for (std::size_t d = 0; d < rel.dims.size(); ++d) {
            check_expr(rel.dims[d], path + ".shape[" + std::to_string(d) + "]", use);
          }
        } else {
          static_assert(kUnhandled<T>, "an output shape kind without validation");
        }
      },
      shape);
}

}  // namespace detail

void validate(const OpDecl& decl, const ValidateOptions& options) {
  detail::Validator(decl, options).run();
}

}  // namespace kernelop
