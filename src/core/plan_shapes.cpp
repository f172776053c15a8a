// The plan deriver, shapes: tensor and scalar slots, output shapes and dtypes, requirements, and
// the ranks their expressions need, with every expression resolved to slots.
#include <algorithm>
#include <limits>

#include "core/deriver.hpp"

namespace kernelop::detail {
namespace {

// Smallest rank for which `axis` (possibly negative) is in range; saturates at INT64_MAX for
// the two axes whose rank is not representable (no tensor has that rank anyway).
std::int64_t rank_needed(std::int64_t axis) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (axis == kMax || axis == std::numeric_limits<std::int64_t>::min()) return kMax;
  return axis >= 0 ? axis + 1 : -axis;
}

// Smallest rank for which every axis is in range and the axes are distinct. Whether, say, 1
// and -1 coincide depends on the rank itself; the launch checks that.
std::int64_t rank_needed(const std::vector<std::int64_t>& axes) {
  auto rank = static_cast<std::int64_t>(axes.size());
  for (auto a : axes) rank = std::max(rank, rank_needed(a));
  return rank;
}

}  // namespace

void Deriver::derive_slots() {
  for (const Input& input : *spec_.inputs) {
    std::visit(Overloaded{
                   [&](const InputDecl& t) {
                     plan_.input_order.push_back({true, static_cast<int>(plan_.tensors.size())});
                     plan_.tensors.push_back(
                         TensorSlot{t.name, false, t.mutated, t.dtype, t.strided, t.result});
                   },
                   [&](const ScalarInput& s) {
                     plan_.input_order.push_back({false, static_cast<int>(plan_.scalars.size())});
                     plan_.scalars.push_back(ScalarSlot{s.name, s.type, s.symint, s.default_value});
                   },
               },
               input);
  }
  plan_.num_tensor_inputs = static_cast<int>(plan_.tensors.size());
  for (const auto& name : output_names()) {
    plan_.tensors.push_back(TensorSlot{name, true, false, std::nullopt});
  }
}

std::vector<std::string> Deriver::output_names() const {
  std::vector<std::string> names;
  if (spec_.outputs) {
    for (const auto& out : *spec_.outputs) names.push_back(out.name);
  } else {
    for (int i = 0; i < overrides_.meta_outputs; ++i) names.push_back("out" + std::to_string(i));
  }
  return names;
}

Expr Deriver::resolve(const Expr& e) const {
  std::vector<std::string> tunables;
  for (const Tunable& t : plan_.tunables) tunables.push_back(t.name);
  return e.with_tunables(tunables).resolved([&](const Expr& leaf) {
    switch (leaf.op()) {
      case ExprOp::Scalar:
        return plan_.scalar_slot(leaf.name());
      case ExprOp::Tunable:
        return static_cast<int>(std::find(tunables.begin(), tunables.end(), leaf.name()) -
                                tunables.begin());
      case ExprOp::Arch:
      case ExprOp::SmCount:
        return 0;
      case ExprOp::Dim:
      case ExprOp::Numel:
      case ExprOp::NumelExcept:
      case ExprOp::ItemSize:
      case ExprOp::Stride:
      case ExprOp::Aligned:
      case ExprOp::Rank:
      case ExprOp::Item:
        return plan_.tensor_slot(leaf.name());
      case KERNELOP_EXPR_ARITHMETIC:
      case KERNELOP_EXPR_COMPARISONS:
      case ExprOp::Const:
      case ExprOp::Select:
      case ExprOp::SameShape:
        break;
    }
    KERNELOP_FAIL(Internal) << "resolve: '" << leaf.to_string() << "' is not a leaf";
  });
}

void Deriver::derive_config_requirements() {
  for (std::size_t c = 0; c < plan_.configs.size() && !spec_.configs.empty(); ++c) {
    for (const Requirement& r : spec_.configs[c].requirements) {
      plan_.configs[c].requirements.push_back(requirement(r));
    }
  }
  if (spec_.tuning_key) {
    for (const Expr& e : *spec_.tuning_key) {
      plan_.tuning_key.push_back(resolve(e));
      require_ranks_of(plan_.tuning_key.back(), "tuning key '" + e.to_string() + "'");
    }
  }
}

void Deriver::derive_requirements() {
  for (const Requirement& r : spec_.requirements) plan_.requirements.push_back(requirement(r));
}

RequirementPlan Deriver::requirement(const Requirement& r) {
  RequirementPlan p{resolve(r.condition), r.to_string(), false};
  require_ranks_of(p.condition, "requirement '" + p.text + "'");
  p.condition.for_each_leaf([&](const Expr& leaf) {
    p.reads_pointers = p.reads_pointers || leaf.op() == ExprOp::Aligned;
  });
  return p;
}

int Deriver::input_ref_slot(const InputRef& ref) const {
  return std::visit(Overloaded{
                        [](std::int64_t index) { return static_cast<int>(index); },
                        [&](const std::string& name) { return plan_.tensor_slot(name); },
                    },
                    ref);
}

void Deriver::require_rank(int slot, std::int64_t rank, std::string reason) {
  for (auto& r : plan_.rank_requirements) {
    if (r.slot != slot) continue;
    if (rank > r.min_rank) {
      r.min_rank = rank;
      r.reason = std::move(reason);
    }
    return;
  }
  plan_.rank_requirements.push_back(RankRequirement{slot, rank, std::move(reason)});
}

void Deriver::require_ranks_of(const Expr& e, const std::string& reason) {
  if (e.op() == ExprOp::Const) return;
  if (e.op() == ExprOp::Select) {
    require_ranks_of(e.cond(), reason);
    return;
  }
  if (!is_leaf(e.op())) {
    require_ranks_of(e.lhs(), reason);
    require_ranks_of(e.rhs(), reason);
    return;
  }
  if (e.op() == ExprOp::Dim || e.op() == ExprOp::Stride) {
    require_rank(e.slot(), rank_needed(e.axis()), reason);
  } else if (e.op() == ExprOp::NumelExcept) {
    require_rank(e.slot(), rank_needed(e.axes()), reason);
  }
}

void Deriver::derive_outputs() {
  if (!spec_.outputs) {
    // Shapes and dtypes come from the meta function; the dtype is inferred from the kernel's
    // signature at compile time where it can be.
    for (int i = 0; i < overrides_.meta_outputs; ++i) {
      OutputPlan out;
      out.slot = plan_.num_tensor_inputs + i;
      out.shape.kind = ShapeRule::Kind::External;
      plan_.outputs.push_back(std::move(out));
    }
    return;
  }
  for (std::size_t i = 0; i < spec_.outputs->size(); ++i) {
    const OutputDecl& decl = (*spec_.outputs)[i];
    OutputPlan out;
    out.slot = plan_.num_tensor_inputs + static_cast<int>(i);
    std::string where = "output '" + decl.name + "' shape";
    int source = 0;
    std::visit(Overloaded{
                   [&](const SameAs& same) {
                     out.shape.kind = ShapeRule::Kind::Like;
                     source = input_ref_slot(same.input);
                     for (const AxisEdit& e : same.edits) {
                       out.shape.axes.push_back(e.axis);
                       out.shape.dims.push_back(resolve(e.size));
                       require_ranks_of(out.shape.dims.back(), where);
                       require_rank(
                           source, rank_needed(e.axis),
                           "output '" + decl.name + "' (its axis " + std::to_string(e.axis) + ")");
                     }
                   },
                   [&](const ReduceDims& reduce) {
                     out.shape.kind = ShapeRule::Kind::Reduce;
                     source = input_ref_slot(reduce.input);
                     out.shape.axes = reduce.dims;
                     out.shape.keepdim = reduce.keepdim;
                     require_rank(source, rank_needed(reduce.dims), where);
                   },
                   [&](const ShapeExprs& exprs) {
                     out.shape.kind = ShapeRule::Kind::Exprs;
                     for (const Expr& d : exprs.dims) {
                       out.shape.dims.push_back(resolve(d));
                       require_ranks_of(out.shape.dims.back(), where);
                     }
                   },
               },
               decl.shape);
    out.shape.source = source;
    auto& dtype = plan_.tensors[static_cast<std::size_t>(out.slot)].dtype;
    if (decl.dtype) {
      dtype = decl.dtype;
    } else {
      out.dtype_from = decl.dtype_from ? plan_.tensor_slot(*decl.dtype_from) : source;
      dtype = plan_.tensors[static_cast<std::size_t>(out.dtype_from)].dtype;
    }
    if (decl.init) {
      std::visit(Overloaded{
                     [&](const FillInit& f) { out.fill = f; },
                     [&](const CloneInit& c) { out.clone_slot = plan_.tensor_slot(c.input); },
                 },
                 *decl.init);
    }
    out.scratch = decl.scratch;
    out.align = decl.align;
    out.permute.assign(decl.permute.begin(), decl.permute.end());
    plan_.outputs.push_back(std::move(out));
  }
}

}  // namespace kernelop::detail
