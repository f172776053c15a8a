// Derivation of an OpPlan from a validated spec: schema, shapes, dtypes, geometry, arguments.
#include "kernelop/plan.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "core/words.hpp"
#include "kernelop/validate.hpp"

namespace kernelop {
namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

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

// The alias set of the i-th mutated tensor in the schema: a, b, ..., z, a1, b1, ..., z1, a2, ...
std::string alias_name(int i) {
  std::string name(1, static_cast<char>('a' + i % 26));
  if (i >= 26) name += std::to_string(i / 26);
  return name;
}

class Deriver {
 public:
  Deriver(const OpDecl& decl, const ValidateOptions& overrides)
      : decl_(decl), spec_(decl.spec), overrides_(overrides) {}

  OpPlan run() {
    plan_.op_name = decl_.op_name;
    auto pos = decl_.op_name.find("::");
    plan_.ns = decl_.op_name.substr(0, pos);
    plan_.name = decl_.op_name.substr(pos + 2);
    plan_.spec = spec_;
    plan_.base_dir = decl_.base_dir;
    plan_.type_params = spec_.type_params;
    plan_.tunables = spec_.tunables;
    derive_configs();
    derive_instances();
    if (!spec_.inputs || (!spec_.outputs && overrides_.has_eager_fn)) {
      // The caller's functions supply the schema and the kernels; the convention is incomplete,
      // so raw launches follow the kernel's own parameters.
      plan_.args_from_kernel = true;
      return std::move(plan_);
    }
    derive_slots();
    derive_outputs();
    derive_args();
    derive_geometry();
    derive_requirements();
    derive_config_requirements();
    derive_schema();
    return std::move(plan_);
  }

 private:
  void derive_slots() {
    for (const Input& input : *spec_.inputs) {
      std::visit(
          Overloaded{
              [&](const InputDecl& t) {
                plan_.input_order.push_back({true, static_cast<int>(plan_.tensors.size())});
                plan_.tensors.push_back(TensorSlot{t.name, false, t.mutated, t.dtype, t.strided});
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

  // Declared outputs, else the meta function's: out0, out1, ...
  std::vector<std::string> output_names() const {
    std::vector<std::string> names;
    if (spec_.outputs) {
      for (const auto& out : *spec_.outputs) names.push_back(out.name);
    } else {
      for (int i = 0; i < overrides_.meta_outputs; ++i) names.push_back("out" + std::to_string(i));
    }
    return names;
  }

  Expr resolve(const Expr& e) const {
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
          return 0;
        case ExprOp::Dim:
        case ExprOp::Numel:
        case ExprOp::NumelExcept:
        case ExprOp::ItemSize:
        case ExprOp::Stride:
        case ExprOp::Aligned:
        case ExprOp::Rank:
          return plan_.tensor_slot(leaf.name());
        case ExprOp::Const:
        case ExprOp::Add:
        case ExprOp::Sub:
        case ExprOp::Mul:
        case ExprOp::FloorDiv:
        case ExprOp::CeilDiv:
        case ExprOp::Mod:
        case ExprOp::Min:
        case ExprOp::Max:
        case ExprOp::Lt:
        case ExprOp::Le:
        case ExprOp::Gt:
        case ExprOp::Ge:
        case ExprOp::Eq:
        case ExprOp::Ne:
        case ExprOp::Select:
          break;
      }
      KERNELOP_FAIL(Internal) << "resolve: '" << leaf.to_string() << "' is not a leaf";
    });
  }

  // A tunable's value as C++ text (template arguments): a number, or false/true.
  static std::string value_text(const Tunable& t, std::int64_t v) {
    if (t.boolean) return v ? "true" : "false";
    return std::to_string(v);
  }

  // The configs' values and compilations; their requires once the slots are known. An untuned op
  // has one config with no values.
  void derive_configs() {
    if (spec_.configs.empty()) {
      plan_.configs.push_back(ConfigPlan{});
      return;
    }
    plan_.programs.clear();
    for (const Config& c : spec_.configs) {
      ConfigPlan cp;
      cp.values = c.values;
      std::vector<std::string> defines;
      for (std::size_t t = 0; t < plan_.tunables.size(); ++t) {
        const Tunable& tunable = plan_.tunables[t];
        cp.text += (t ? ", " : "") + tunable.name + "=" + value_text(tunable, c.values[t]);
        if (tunable.define) defines.push_back(tunable.name + "=" + std::to_string(c.values[t]));
      }
      // A foreign (Triton, CuTe DSL) kernel's configs are each its own compilation (their values
      // are compile-time constants).
      auto it = spec_.foreign ? plan_.programs.end()
                              : std::find(plan_.programs.begin(), plan_.programs.end(), defines);
      cp.program = static_cast<int>(it - plan_.programs.begin());
      if (it == plan_.programs.end()) plan_.programs.push_back(std::move(defines));
      plan_.configs.push_back(std::move(cp));
    }
  }

  void derive_config_requirements() {
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

  RequirementPlan requirement(const Requirement& r) {
    RequirementPlan p{resolve(r.condition), r.to_string(), false};
    require_ranks_of(p.condition, "requirement '" + p.text + "'");
    p.condition.for_each_leaf([&](const Expr& leaf) {
      p.reads_pointers = p.reads_pointers || leaf.op() == ExprOp::Aligned;
    });
    return p;
  }

  int input_ref_slot(const InputRef& ref) const {
    return std::visit(Overloaded{
                          [](std::int64_t index) { return static_cast<int>(index); },
                          [&](const std::string& name) { return plan_.tensor_slot(name); },
                      },
                      ref);
  }

  void require_rank(int slot, std::int64_t rank, std::string reason) {
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

  // The ranks `e` needs whatever the inputs: a select's branches are read only when taken, so
  // their axes are checked when evaluated (`select(rank(x) >= 3, stride(x, -3), 0)` takes a
  // rank-1 x), not demanded of every call.
  void require_ranks_of(const Expr& e, const std::string& reason) {
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

  void derive_outputs() {
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
                         require_rank(source, rank_needed(e.axis),
                                      "output '" + decl.name + "' (its axis " +
                                          std::to_string(e.axis) + ")");
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
      plan_.outputs.push_back(std::move(out));
    }
  }

  // The kernel's arguments: in the order of `params` when given, else the default convention
  // (inputs as declared, then extras, then outputs).
  void derive_args() {
    int extras = 0;
    if (spec_.params) {
      for (const Param& param : *spec_.params) {
        std::visit(Overloaded{
                       [&](const ParamName& n) { plan_.args.push_back(named_arg(n.name)); },
                       [&](const Extra& e) { plan_.args.push_back(extra_arg(e, extras++)); },
                       [&](const ParamStruct& st) {
                         StructParam sp;
                         sp.first = static_cast<int>(plan_.args.size());
                         for (const ParamField& field : st.fields) {
                           plan_.args.push_back(std::visit(
                               Overloaded{[&](const ParamName& n) { return named_arg(n.name); },
                                          [&](const Extra& e) { return extra_arg(e, extras++); }},
                               field));
                           int size = arg_size(plan_.args.back());
                           sp.size = (sp.size + size - 1) / size * size;
                           sp.offsets.push_back(sp.size);
                           sp.size += size;
                           sp.align = std::max(sp.align, size);
                         }
                         sp.size = (sp.size + sp.align - 1) / sp.align * sp.align;
                         plan_.structs.push_back(std::move(sp));
                       },
                   },
                   param);
      }
      return;
    }
    for (auto [is_tensor, slot] : plan_.input_order)
      plan_.args.push_back(is_tensor ? tensor_arg(slot) : scalar_arg(slot));
    for (const Extra& e : spec_.extras) plan_.args.push_back(extra_arg(e, extras++));
    for (const auto& out : plan_.outputs) plan_.args.push_back(tensor_arg(out.slot));
  }

  ArgSlot named_arg(const std::string& name) const {
    int t = plan_.tensor_slot(name);
    return t >= 0 ? tensor_arg(t) : scalar_arg(plan_.scalar_slot(name));
  }

  ArgSlot tensor_arg(int slot) const {
    const TensorSlot& t = plan_.tensors[static_cast<std::size_t>(slot)];
    ArgSlot arg;
    arg.kind = t.is_output ? ArgSlot::Kind::Output : ArgSlot::Kind::TensorInput;
    arg.name = t.name;
    arg.index = slot;
    arg.is_const = !t.is_output && !t.mutated;
    return arg;
  }

  ArgSlot scalar_arg(int slot) const {
    KERNELOP_INTERNAL_CHECK(slot >= 0) << "(a parameter names no input; validate() admits none)";
    const ScalarSlot& s = plan_.scalars[static_cast<std::size_t>(slot)];
    ArgSlot arg;
    arg.kind = ArgSlot::Kind::ScalarInput;
    arg.name = s.name;
    arg.index = slot;
    arg.value_type = s.type;
    return arg;
  }

  ArgSlot extra_arg(const Extra& extra, int index) {
    Expr value = 0;
    bool int64 = false;
    std::visit(Overloaded{
                   [&](const Numel& e) { value = Expr::numel(e.input), int64 = e.int64; },
                   [&](const DimSize& e) { value = Expr::dim(e.input, e.axis), int64 = e.int64; },
                   [&](const ExtraExpr& e) { value = e.value, int64 = e.int64; },
               },
               extra);
    ArgSlot arg;
    arg.kind = ArgSlot::Kind::ExtraValue;
    arg.index = index;
    arg.value = resolve(value);
    arg.name = value.to_string();
    arg.value_type = int64 ? ScalarType::Int64 : ScalarType::Int;
    require_ranks_of(*arg.value, "extra " + std::to_string(index) + " '" + arg.name + "'");
    return arg;
  }

  void derive_geometry() {
    if (!spec_.geometry) return;
    LaunchGeometry g;
    std::ostringstream desc;
    std::visit(Overloaded{[&](const Elementwise& e) { elementwise(e, g, desc); },
                          [&](const Reduction& r) { reduction(r, g, desc); },
                          [&](const Custom& c) { custom(c, g, desc); }},
               *spec_.geometry);
    finish_geometry(g, desc);
  }

  void elementwise(const Elementwise& elementwise, LaunchGeometry& g, std::ostringstream& desc) {
    const Elementwise* e = &elementwise;
    {
      std::string over =
          e->over ? *e->over
                  : plan_.tensors[static_cast<std::size_t>(plan_.num_tensor_inputs)].name;
      auto k = e->block.size();
      desc << "Elementwise(block=(";
      for (std::size_t i = 0; i < k; ++i) desc << (i ? ", " : "") << e->block[i];
      desc << (k == 1 ? ",)" : ")") << ", layout=" << (e->layout == Layout::Flat ? "flat" : "nd")
           << ", over=" << over << ")";
      for (std::size_t i = 0; i < k; ++i) g.block[i] = e->block[i];
      if (e->layout == Layout::Flat) {
        g.grid[0] = cdiv(Expr::numel(over), e->block[0]);
      } else {
        for (std::size_t i = 0; i < k; ++i) {
          g.grid[i] = cdiv(Expr::dim(over, -static_cast<std::int64_t>(i) - 1), e->block[i]);
        }
        std::vector<std::int64_t> trailing;
        for (std::size_t i = 0; i < k; ++i) trailing.push_back(-static_cast<std::int64_t>(i) - 1);
        Expr leading = Expr::numel_except(over, trailing);
        g.grid[2] = k == 3 ? g.grid[2] * leading : leading;
      }
    }
  }

  void reduction(const Reduction& reduction, LaunchGeometry& g, std::ostringstream& desc) {
    const Reduction* r = &reduction;
    {
      const std::string& first = plan_.tensors.front().name;
      desc << "Reduction(reduce_dims=" << detail::int_list_text(r->reduce_dims)
           << ", block_size=" << r->block_size << ", over=" << first << ")";
      g.grid[0] = Expr::numel_except(first, r->reduce_dims);
      g.block[0] = r->block_size;
      if (r->shared_mem) g.shared_mem = *r->shared_mem;
    }
  }

  void custom(const Custom& c, LaunchGeometry& g, std::ostringstream& desc) {
    desc << "Custom";
    for (std::size_t i = 0; i < c.grid.size(); ++i) g.grid[i] = c.grid[i];
    for (std::size_t i = 0; i < c.block.size(); ++i) g.block[i] = c.block[i];
    g.shared_mem = c.shared_mem;
  }

  void finish_geometry(LaunchGeometry& g, std::ostringstream& desc) {
    g.description = desc.str();
    for (auto* part : {&g.grid, &g.block}) {
      for (Expr& x : *part) {
        x = resolve(x.simplified());
        require_ranks_of(x, "geometry " + g.description);
      }
    }
    g.shared_mem = resolve(g.shared_mem.simplified());
    require_ranks_of(g.shared_mem, "geometry " + g.description);
    plan_.geometry = std::move(g);
  }

  void derive_requirements() {
    for (const Requirement& r : spec_.requirements) plan_.requirements.push_back(requirement(r));
  }

  // Note [instances and configs]: per config, per combination of the type parameters' dtypes
  // (first parameter varying slowest), the kernel's name with the dtypes' CUDA types and the
  // tunables' values spliced into its template arguments.
  void derive_instances() {
    std::string name = trim(spec_.kernel_name);
    std::vector<std::vector<DType>> combos = {{}};
    for (const auto& tp : spec_.type_params) {
      std::vector<std::vector<DType>> next;
      for (const auto& combo : combos) {
        for (DType d : tp.dtypes) {
          next.push_back(combo);
          next.back().push_back(d);
        }
      }
      combos = std::move(next);
    }
    // Split the template arguments once at the whole-word uses of type parameters and tunables,
    // then splice each instance's text in. No parameter is named like a word of a CUDA type
    // (those are keywords or reserved), so this is what replacing one after another gives.
    // Index < type_params.size(): a type parameter; else a tunable.
    std::unordered_map<std::string_view, std::size_t> param_index;
    for (std::size_t i = 0; i < spec_.type_params.size(); ++i) {
      param_index.emplace(spec_.type_params[i].name, i);
    }
    for (std::size_t i = 0; i < spec_.tunables.size(); ++i) {
      param_index.emplace(spec_.tunables[i].name, spec_.type_params.size() + i);
    }
    std::size_t open = name.find('<');
    std::string_view args =
        open == std::string::npos ? std::string_view() : std::string_view(name).substr(open);
    std::vector<std::pair<std::string_view, std::size_t>> uses;  // text before, parameter
    std::size_t done = 0;
    for (std::size_t p = 0; p < args.size();) {
      if (!detail::is_ident_char(args[p])) {
        ++p;
        continue;
      }
      std::size_t end = p;
      while (end < args.size() && detail::is_ident_char(args[end])) ++end;
      if (auto it = param_index.find(args.substr(p, end - p)); it != param_index.end()) {
        uses.emplace_back(args.substr(done, p - done), it->second);
        done = end;
      }
      p = end;
    }
    std::string_view head = std::string_view(name).substr(0, name.size() - args.size());
    for (std::size_t c = 0; c < plan_.configs.size(); ++c) {
      for (const auto& combo : combos) {
        std::string instance(head);
        for (const auto& [text, param] : uses) {
          instance.append(text);
          if (param < combo.size()) {
            instance.append(dtype_cuda_type(combo[param]));
          } else {
            std::size_t t = param - combo.size();
            instance.append(value_text(plan_.tunables[t], plan_.configs[c].values[t]));
          }
        }
        instance.append(args.substr(done));
        plan_.instances.push_back(KernelInstance{std::move(instance), combo, static_cast<int>(c)});
      }
    }
  }

  void derive_schema() {
    std::ostringstream s;
    s << "(";
    int aliases = 0;
    for (std::size_t i = 0; i < plan_.input_order.size(); ++i) {
      auto [is_tensor, slot] = plan_.input_order[i];
      if (i) s << ", ";
      if (is_tensor) {
        const TensorSlot& t = plan_.tensors[static_cast<std::size_t>(slot)];
        s << "Tensor";
        if (t.mutated) s << "(" << alias_name(aliases++) << "!)";
        s << " " << t.name;
      } else {
        const ScalarSlot& sc = plan_.scalars[static_cast<std::size_t>(slot)];
        s << (sc.symint ? "SymInt" : scalar_schema_type(sc.type)) << " " << sc.name;
        if (sc.default_value) {
          // A float scalar's integer default is written as a float ("float g=2.0").
          ScalarDefault v = *sc.default_value;
          bool is_float = sc.type == ScalarType::Float || sc.type == ScalarType::Float64;
          if (is_float && std::holds_alternative<std::int64_t>(v))
            v = static_cast<double>(std::get<std::int64_t>(v));
          s << "=" << scalar_default_text(v);
        }
      }
    }
    s << ") -> ";
    if (plan_.outputs.size() == 1) {
      s << "Tensor";
    } else {
      s << "(";
      for (std::size_t i = 0; i < plan_.outputs.size(); ++i) s << (i ? ", " : "") << "Tensor";
      s << ")";
    }
    plan_.schema = s.str();
  }

  const OpDecl& decl_;
  const KernelSpec& spec_;
  ValidateOptions overrides_;
  OpPlan plan_;
};

}  // namespace

CompletedPlan complete_plan(OpPlan plan) {
  return CompletedPlan(std::move(plan));
}

OpPlan derive_plan(const OpDecl& decl, const ValidateOptions& overrides) {
  validate(decl, overrides);
  OpPlan plan = Deriver(decl, overrides).run();
  if (!plan.spec.backward.empty()) detail::check_backward(plan, overrides);
  return plan;
}

}  // namespace kernelop
