// Spec validation, second half: the calling convention (extras, params), the launch geometry,
// requirements and compile options.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/arch.hpp"
#include "core/validator.hpp"
#include "kernelop/launch_limits.hpp"
#include "kernelop/plan.hpp"

namespace kernelop::detail {

void Validator::check_extra(const Extra& extra, const std::string& path) {
  std::visit(
      Overloaded{
          [&](const Numel& e) {
            check_expr(Expr::numel(e.input), path + ".numel", ExprUse::Launch);
          },
          [&](const DimSize& e) {
            check_expr(Expr::dim(e.input, e.axis), path + ".dim_size", ExprUse::Launch);
          },
          [&](const ExtraExpr& e) { check_expr(e.value, path + ".expr", ExprUse::Argument); },
          [&](const ExtraFloat&) {},  // a finite float32, checked when read
      },
      extra);
}

void Validator::check_extras() {
  for (std::size_t i = 0; i < spec_.extras.size(); ++i) {
    check_extra(spec_.extras[i], "extras[" + std::to_string(i) + "]");
  }
}

// The kernel's own parameter order: every output (unless an init sets it or a later launch
// writes it), any name more than once, extras in place of the separate list.
void Validator::check_params() {
  if (!spec_.params) return;
  if (!spec_.extras.empty()) {
    KERNELOP_RAISE(fail_at("extras"))
        << "cannot be combined with 'params', which lists the kernel's parameters in order: "
           "write each extra at its place in 'params'";
  }
  if (!spec_.outputs) {
    KERNELOP_RAISE(fail_at("params"))
        << "needs declared outputs (their shapes come from a meta_fn here, so the kernel's "
           "parameters follow its own signature)";
  }
  std::set<std::string> seen;
  auto check_field = [&](const ParamField& field, const std::string& path) {
    if (const auto* extra = std::get_if<Extra>(&field)) {
      check_extra(*extra, path);
      return;
    }
    const std::string& name = std::get<ParamName>(field).name;
    bool known = names_.count(name) > 0 ||
                 std::find(output_names_.begin(), output_names_.end(), name) != output_names_.end();
    if (!known) {
      std::vector<std::string> all = tensor_inputs_;
      all.insert(all.end(), scalar_inputs_.begin(), scalar_inputs_.end());
      all.insert(all.end(), output_names_.begin(), output_names_.end());
      KERNELOP_RAISE(fail_at(path))
          << "'" << detail::shorten(name)
          << "' is not an input or output (known: " << join_or_none(all) << ")";
    }
    // A name may feed several parameters: Liger passes n_cols as a size and a stride, and its
    // in-place RMSNorm backward reads dY and writes dX through two that are one buffer.
    seen.insert(name);
  };
  for (std::size_t i = 0; i < spec_.params->size(); ++i) {
    std::string path = "params[" + std::to_string(i) + "]";
    std::visit(Overloaded{[&](const ParamStruct& st) {
                            if (st.fields.empty())
                              KERNELOP_RAISE(fail_at(path + ".struct")) << "has no fields";
                            for (std::size_t f = 0; f < st.fields.size(); ++f) {
                              check_field(st.fields[f],
                                          path + ".struct[" + std::to_string(f) + "]");
                            }
                          },
                          [&](const auto& field) { check_field(field, path); }},
               (*spec_.params)[i]);
  }
  // An op of several launches: an output its init sets (a fill, a copy of an input) may be only
  // read by later launches.
  auto set_by_init = [&](const std::string& name) {
    if (spec_.then.empty() || !spec_.outputs) return false;
    for (const OutputDecl& o : *spec_.outputs) {
      if (o.name == name) return o.init.has_value();
    }
    return false;
  };
  for (const std::string& out : output_names_) {
    // An output a later launch writes (Note [several launches]) need not be this kernel's.
    if (!seen.count(out) && !written_later(spec_, out) && !set_by_init(out)) {
      KERNELOP_RAISE(fail_at("params"))
          << "does not pass output '" << out
          << "'; the kernel must receive every output that no later launch writes (or, with later "
             "launches, that an init sets)";
    }
  }
}

void Validator::check_block(const std::vector<std::int64_t>& block, const std::string& path) {
  if (std::string why = block_problem(block); !why.empty()) KERNELOP_RAISE(fail_at(path)) << why;
}

// Requirements constrain the inputs: outputs are not known when they are checked.
void Validator::check_requirements() {
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

// Note [host reads]: each test reads a tensor of the launch.
void Validator::check_when() {
  if (options_.has_eager_fn && !spec_.when.empty()) {
    KERNELOP_RAISE(fail_at("when"))
        << "the op's eager_fn launches the kernel (launch_raw), as it decides; a 'when' decides "
           "kernelop's own launch: test the value in eager_fn, or drop eager_fn";
  }
  for (std::size_t i = 0; i < spec_.when.size(); ++i) {
    const HostTest& t = spec_.when[i];
    std::string path = "when[" + std::to_string(i) + "]";
    if (!std::isfinite(t.value)) {
      KERNELOP_RAISE(fail_at(path))
          << "tests '" << detail::shorten(t.tensor) << "' against a number that is not finite";
    }
    bool known =
        std::find(tensor_inputs_.begin(), tensor_inputs_.end(), t.tensor) != tensor_inputs_.end() ||
        std::find(output_names_.begin(), output_names_.end(), t.tensor) != output_names_.end();
    if (!known) {
      std::vector<std::string> names = tensor_inputs_;
      names.insert(names.end(), output_names_.begin(), output_names_.end());
      KERNELOP_RAISE(fail_at(path))
          << "'" << detail::shorten(t.tensor)
          << "' is not a tensor of the launch (known tensors: " << join_or_none(names) << ")";
    }
  }
}

void Validator::check_geometry() {
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
          // Each axis's expression checked; the extents when every one is a constant.
          auto dims = [&](const std::vector<Expr>& exprs, const std::string& path) {
            std::vector<std::int64_t> constants;
            for (std::size_t d = 0; d < exprs.size(); ++d) {
              check_expr(exprs[d], path + "[" + std::to_string(d) + "]", ExprUse::Launch);
              Expr e = exprs[d].simplified();
              if (e.is_const()) constants.push_back(e.const_value());
            }
            return constants.size() == exprs.size() ? std::optional(constants) : std::nullopt;
          };
          auto grid = dims(g.grid, "geometry.custom.grid");
          if (auto block = dims(g.block, "geometry.custom.block"))
            check_block(*block, "geometry.custom.block");
          check_expr(g.shared_mem, "geometry.custom.shared_mem", ExprUse::Launch);
          if (g.cluster.size() > 3) {
            KERNELOP_RAISE(fail_at("geometry.custom.cluster"))
                << "has " << g.cluster.size() << " dims; expected 1 to 3";
          }
          if (auto cluster = dims(g.cluster, "geometry.custom.cluster");
              cluster && !cluster->empty()) {
            if (std::string why = cluster_problem(*cluster); !why.empty()) {
              KERNELOP_RAISE(fail_at("geometry.custom.cluster")) << why;
            }
            for (std::size_t d = 0; grid && d < cluster->size(); ++d) {
              const std::int64_t extent = d < grid->size() ? (*grid)[d] : 1;
              if (extent % (*cluster)[d] != 0) {
                KERNELOP_RAISE(fail_at("geometry.custom.cluster"))
                    << kAxisNames[d] << " is " << (*cluster)[d] << ", which does not divide grid "
                    << kAxisNames[d] << " = " << extent;
              }
            }
          }
        } else {
          static_assert(kUnhandled<T>, "a geometry kind without validation");
        }
      },
      *spec_.geometry);
}

void Validator::check_compile_options() {
  static const std::set<std::string> kStds = {"c++11", "c++14", "c++17", "c++20"};
  if (!kStds.count(spec_.compile_std)) {
    KERNELOP_RAISE(fail_at("compile_std"))
        << "'" << spec_.compile_std << "' is not supported; expected c++11, c++14, c++17 or c++20";
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

}  // namespace kernelop::detail
