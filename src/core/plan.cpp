// Derivation of an OpPlan from a validated spec: schema, shapes, dtypes, geometry, arguments.
// This part: the stage's entry, configs, kernel instances and the schema; plan_shapes.cpp and
// plan_args.cpp derive the rest (the Deriver class is core/deriver.hpp).
#include "kernelop/plan.hpp"

#include <algorithm>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "core/deriver.hpp"
#include "core/words.hpp"
#include "kernelop/validate.hpp"

namespace kernelop {
namespace detail {
namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The alias set of the i-th mutated tensor in the schema: a, b, ..., z, a1, b1, ..., z1, a2, ...
std::string alias_name(int i) {
  std::string name(1, static_cast<char>('a' + i % 26));
  if (i >= 26) name += std::to_string(i / 26);
  return name;
}

}  // namespace

OpPlan Deriver::run() {
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

std::string Deriver::value_text(const Tunable& t, std::int64_t v) {
  if (t.boolean) return v ? "true" : "false";
  return std::to_string(v);
}

void Deriver::derive_configs() {
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

// Note [instances and configs]: per config, per combination of the type parameters' dtypes
// (first parameter varying slowest), the kernel's name with the dtypes' CUDA types and the
// tunables' values spliced into its template arguments.
void Deriver::derive_instances() {
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

void Deriver::derive_schema() {
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
  if (plan_.num_results() == 1) {
    s << "Tensor";
  } else {
    s << "(";
    for (std::size_t i = 0; i < plan_.num_results(); ++i) s << (i ? ", " : "") << "Tensor";
    s << ")";
  }
  plan_.schema = s.str();
}

}  // namespace detail

CompletedPlan complete_plan(OpPlan plan) {
  return CompletedPlan(std::move(plan));
}

OpPlan derive_plan(const OpDecl& decl, const ValidateOptions& overrides) {
  validate(decl, overrides);
  OpPlan plan = detail::Deriver(decl, overrides).run();
  // (A launch's host reads of the op's tensors are its op's to check: Note [host reads].)
  if (!plan.spec.then.empty() || (!overrides.launch_of_op && reads_on_host(plan.spec)))
    detail::check_launches(plan, overrides);
  if (!plan.spec.backward.empty()) detail::check_backward(plan, overrides);
  return plan;
}

OpPlan derive_launch_plan(const OpPlan& op, std::size_t k) {
  ValidateOptions o;
  o.launch_of_op = true;
  return derive_plan(launch_decl(op, k), o);
}

}  // namespace kernelop
