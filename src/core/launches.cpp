// An op's launches after its own kernel (Note [several launches], spec.hpp): each one's
// declaration derived from the op's, the rules it must follow, and the link that maps its tensors
// and scalars onto the op's.
#include <algorithm>
#include <map>
#include <set>

#include "core/words.hpp"
#include "kernelop/error.hpp"
#include "kernelop/plan.hpp"

namespace kernelop {
namespace {

const std::string& declared_name(const Input& input) {
  return *std::visit([](const auto& d) { return &d.name; }, input);
}

// "op ns::name: then[k].PATH: " for the op `plan`.
detail::ErrorStream fail_at(const OpPlan& plan, std::size_t k, std::string_view path) {
  detail::ErrorStream s(ErrorKind::Spec);
  s.context(ErrorContext{plan.op_name, plan.spec.kernel_name, {}, "validate", {}});
  s << "op " << plan.op_name << ": then[" << k << "]" << (path.empty() ? "" : ".") << path << ": ";
  return s;
}

// What the launch's tensor or scalar `name` is of the op: its `from` entry, else its own name.
std::string_view received(const LaunchStep& step, const std::string& name) {
  return detail::renamed(step.from, name);
}

std::string op_names(const OpPlan& p, bool tensors, bool outputs_only) {
  std::vector<std::string> names;
  for (const TensorSlot& t : p.tensors) {
    if (tensors && (!outputs_only || t.is_output)) names.push_back(t.name);
  }
  if (!tensors) {
    for (const ScalarSlot& s : p.scalars) names.push_back(s.name);
  }
  return names.empty() ? "none" : detail::join(names);
}

// A launch's tensor declared with a dtype must have the op's tensor's: the same dtype or type
// parameter, or a type parameter of the launch's own that takes the op's dtype.
void check_dtype(const OpPlan& p, std::size_t k, const std::string& path, std::string_view name,
                 const std::optional<DTypeDecl>& declared) {
  const auto& want = p.tensors[static_cast<std::size_t>(p.tensor_slot(name))].dtype;
  if (!declared || !want || *declared == *want) return;
  const auto* param = std::get_if<std::string>(&*declared);
  const auto* concrete = std::get_if<DType>(&*want);
  for (const TypeParam& tp : p.spec.then[k].spec.type_params) {
    if (param && concrete && tp.name == *param &&
        std::find(tp.dtypes.begin(), tp.dtypes.end(), *concrete) != tp.dtypes.end()) {
      return;
    }
  }
  KERNELOP_RAISE(fail_at(p, k, path + ".dtype"))
      << "is " << dtype_decl_text(*declared) << " but the op's '" << name << "' is "
      << dtype_decl_text(*want);
}

// Note [host reads]: what a launch reads on the host, by the op's names: the tensors its `when`
// tests and its item() arguments read, with the path of the first read of each.
std::vector<std::pair<std::string, std::string>> host_reads(const OpPlan& launch,
                                                            const LaunchStep* step) {
  auto op_name = [&](const std::string& own) {
    return std::string(step ? received(*step, own) : std::string_view(own));
  };
  std::vector<std::pair<std::string, std::string>> reads;
  for (std::size_t i = 0; i < launch.spec.when.size(); ++i)
    reads.emplace_back(op_name(launch.spec.when[i].tensor), "when[" + std::to_string(i) + "]");
  for (int slot : detail::item_slots(launch)) {
    const std::string& own = launch.tensors[static_cast<std::size_t>(slot)].name;
    reads.emplace_back(op_name(own), "params: item(" + own + ")");
  }
  return reads;
}

}  // namespace

OpDecl launch_decl(const OpPlan& op, std::size_t k) {
  KERNELOP_INTERNAL_CHECK(k < op.spec.then.size())
      << "(op " << op.op_name << " has no launch " << k + 1 << ")";
  const LaunchStep& step = op.spec.then[k];
  OpDecl decl{op.op_name + "_launch" + std::to_string(k + 1), step.spec, op.base_dir};
  KernelSpec& s = decl.spec;
  if (s.type_params.empty()) s.type_params = op.spec.type_params;
  auto fill = [&](const std::string& own, std::optional<DTypeDecl>& dtype) {
    if (dtype) return;
    int slot = op.tensor_slot(received(step, own));
    if (slot >= 0) dtype = op.tensors[static_cast<std::size_t>(slot)].dtype;
  };
  if (s.inputs) {
    for (Input& input : *s.inputs) {
      if (auto* t = std::get_if<InputDecl>(&input)) fill(t->name, t->dtype);
    }
  }
  if (s.outputs) {
    for (OutputDecl& o : *s.outputs) {
      bool clone = o.init && std::holds_alternative<CloneInit>(*o.init);
      if (!o.dtype_from && !clone) fill(o.name, o.dtype);
    }
  }
  return decl;
}

bool derives_launch(const OpPlan& op, std::size_t k, const OpPlan& candidate) {
  if (k >= op.spec.then.size()) return false;
  OpDecl want = launch_decl(op, k);
  return candidate.op_name == want.op_name && candidate.spec == want.spec;
}

LaunchLink link_launch(const OpPlan& op, std::size_t k, const OpPlan& launch) {
  const LaunchStep& step = op.spec.then.at(k);
  LaunchLink link;
  for (const TensorSlot& t : launch.tensors) {
    int slot = op.tensor_slot(received(step, t.name));
    KERNELOP_INTERNAL_CHECK(slot >= 0)
        << "(launch tensor '" << t.name << "' names nothing of " << op.op_name << ")";
    link.tensors.push_back(slot);
  }
  for (const ScalarSlot& s : launch.scalars) {
    int slot = op.scalar_slot(received(step, s.name));
    KERNELOP_INTERNAL_CHECK(slot >= 0)
        << "(launch scalar '" << s.name << "' names nothing of " << op.op_name << ")";
    link.scalars.push_back(slot);
  }
  return link;
}

namespace detail {

bool written_later(const KernelSpec& spec, std::string_view output) {
  for (const LaunchStep& step : spec.then) {
    if (!step.spec.outputs) continue;
    for (const OutputDecl& o : *step.spec.outputs) {
      if (received(step, o.name) == output) return true;
    }
  }
  return false;
}

std::vector<int> item_slots(const OpPlan& p) {
  std::vector<int> slots;
  for (const ArgSlot& a : p.args) {
    if (a.value) {
      a.value->for_each_leaf([&](const Expr& l) {
        if (l.op() == ExprOp::Item) slots.push_back(p.tensor_slot(l.name()));
      });
    }
  }
  return slots;
}

void check_launches(const OpPlan& p, const ValidateOptions& options) {
  // What is written before each launch: initialised outputs, those the op's own kernel takes
  // (all, in the default convention), then each launch's outputs in order.
  // Launches marked `before` run first, after the inits and before the op's own kernel.
  // Note [host reads]: a write by a launch with a `when` happens only when its tests hold, so each
  // write keeps its tests (by the op's names); a read is covered by one write whose tests the
  // reader's own include (written under the same 'g != 1' it reads under), or by an unconditional
  // one. (Two writes under complementary tests do not cover a read together: refused, safely.)
  std::map<std::string, std::vector<std::vector<HostTest>>, std::less<>> written;
  auto write = [&](const std::string& name, const std::vector<HostTest>& when) {
    written[name].push_back(when);
  };
  auto covered = [&](std::string_view name, const std::vector<HostTest>& when) {
    auto it = written.find(name);
    return it != written.end() &&
           std::any_of(it->second.begin(), it->second.end(), [&](const auto& tests) {
             return std::all_of(tests.begin(), tests.end(), [&](const HostTest& t) {
               return std::find(when.begin(), when.end(), t) != when.end();
             });
           });
  };
  auto is_output = [&](std::string_view name) {
    int slot = p.tensor_slot(name);
    return slot >= 0 && p.tensors[static_cast<std::size_t>(slot)].is_output;
  };
  // A host read of an output or scratch before anything writes it would read what cudaMalloc left.
  auto check_host_reads = [&](const OpPlan& launch, const LaunchStep* step, std::size_t k,
                              const std::vector<HostTest>& when) {
    for (const auto& [name, path] : host_reads(launch, step)) {
      if (!is_output(name) || covered(name, when)) continue;
      detail::ErrorStream s = step ? fail_at(p, k, path) : detail::ErrorStream(ErrorKind::Spec);
      if (!step) {
        s.context(ErrorContext{p.op_name, p.spec.kernel_name, {}, "validate", {}});
        s << "op " << p.op_name << ": " << path << ": ";
      }
      KERNELOP_RAISE(std::move(s))
          << "reads '" << name << "' on the host, which nothing writes before "
          << (step ? "this launch" : "the op's kernel")
          << " (no init, no earlier launch writes it, or only under a 'when' this one does not "
             "test)";
    }
  };
  std::vector<std::string> own_kernel_writes;
  for (const OutputPlan& o : p.outputs) {
    const std::string& name = p.tensors[static_cast<std::size_t>(o.slot)].name;
    bool passed =
        !p.spec.params || std::any_of(p.args.begin(), p.args.end(), [&](const ArgSlot& a) {
          return a.kind == ArgSlot::Kind::Output && a.name == name;
        });
    if (o.fill || o.clone_slot >= 0) write(name, {});
    if (passed) own_kernel_writes.push_back(name);
  }
  bool own_kernel_ran = false;
  auto run_own_kernel = [&](std::size_t k) {
    own_kernel_ran = true;
    check_host_reads(p, nullptr, k, p.spec.when);
    for (const std::string& name : own_kernel_writes) write(name, p.spec.when);
  };
  for (std::size_t k = 0; k < p.spec.then.size(); ++k) {
    const LaunchStep& step = p.spec.then[k];
    const KernelSpec& s = step.spec;
    if (step.before && own_kernel_ran) {
      KERNELOP_RAISE(fail_at(p, k, "before"))
          << "a launch before the op's own kernel follows one after it; the launches marked "
             "\"before\" come first in \"then\"";
    }
    if (!step.before && !own_kernel_ran) run_own_kernel(k);
    if (options.has_meta_fn || options.has_eager_fn || !p.spec.inputs || !p.spec.outputs) {
      KERNELOP_RAISE(fail_at(p, k, ""))
          << "needs the op's inputs and outputs declared in the spec (no meta_fn or eager_fn): "
             "a launch's tensors are named after them";
    }
    if (!s.inputs || !s.outputs) {
      KERNELOP_RAISE(fail_at(p, k, !s.inputs ? "inputs" : "outputs"))
          << "missing; a launch declares the op's tensors it reads and those it writes";
    }
    if (!s.backward.empty() || !s.then.empty()) {
      KERNELOP_RAISE(fail_at(p, k, !s.backward.empty() ? "backward" : "then"))
          << "a launch is part of its op: the op declares the backward and every launch";
    }
    // Its tests, by the op's names (a write and a read compare them so).
    std::vector<HostTest> when = s.when;
    for (HostTest& t : when) t.tensor = std::string(received(step, t.tensor));
    // Each of the op's tensors and scalars is one name of the launch: two names for one tensor
    // would alias an input and an output (or two outputs) the launch cannot see.
    std::map<std::string_view, std::string_view> named;
    auto once = [&](const std::string& own, std::string_view path) {
      std::string_view op_name = received(step, own);
      auto [it, fresh] = named.emplace(op_name, own);
      if (!fresh) {
        KERNELOP_RAISE(fail_at(p, k, path))
            << "'" << detail::shorten(own) << "' and '" << detail::shorten(it->second)
            << "' both name the op's '" << detail::shorten(op_name)
            << "'; a launch names each once";
      }
    };
    for (std::size_t i = 0; i < s.inputs->size(); ++i)
      once(declared_name((*s.inputs)[i]), "inputs[" + std::to_string(i) + "]");
    for (std::size_t i = 0; i < s.outputs->size(); ++i)
      once((*s.outputs)[i].name, "outputs[" + std::to_string(i) + "]");
    for (std::size_t i = 0; i < s.inputs->size(); ++i) {
      const Input& input = (*s.inputs)[i];
      std::string path = "inputs[" + std::to_string(i) + "]";
      std::string_view name = received(step, declared_name(input));
      if (const auto* sc = std::get_if<ScalarInput>(&input)) {
        int slot = p.scalar_slot(name);
        if (slot < 0) {
          KERNELOP_RAISE(fail_at(p, k, path))
              << "'" << detail::shorten(name)
              << "' is not a scalar input of the op (scalars: " << op_names(p, false, false) << ")";
        }
        const ScalarSlot& own = p.scalars[static_cast<std::size_t>(slot)];
        if (own.type != sc->type) {
          KERNELOP_RAISE(fail_at(p, k, path))
              << "scalar '" << name << "' is " << scalar_type_name(sc->type) << " but the op's is "
              << scalar_type_name(own.type);
        }
        continue;
      }
      const auto& t = std::get<InputDecl>(input);
      int slot = p.tensor_slot(name);
      if (slot < 0) {
        KERNELOP_RAISE(fail_at(p, k, path))
            << "'" << detail::shorten(name)
            << "' is not a tensor of the op (tensors: " << op_names(p, true, false) << ")";
      }
      check_dtype(p, k, path, name, t.dtype);
      if (p.tensors[static_cast<std::size_t>(slot)].is_output && !covered(name, when)) {
        KERNELOP_RAISE(fail_at(p, k, path))
            << "reads '" << name << "', which nothing writes before this launch (the op's kernel "
            << "does not take it, no earlier launch writes it, it has no init"
            << (written.count(name)
                    ? "; it is written only under a 'when' this launch does not test"
                    : "")
            << ")";
      }
      if (t.mutated) {
        KERNELOP_RAISE(fail_at(p, k, path))
            << "'" << name << "' is declared mutated; a launch writes the op's outputs and "
            << "scratch, declared as its outputs";
      }
    }
    for (std::size_t i = 0; i < s.outputs->size(); ++i) {
      const OutputDecl& o = (*s.outputs)[i];
      std::string path = "outputs[" + std::to_string(i) + "]";
      std::string_view name = received(step, o.name);
      int slot = p.tensor_slot(name);
      if (slot < 0 || !p.tensors[static_cast<std::size_t>(slot)].is_output) {
        KERNELOP_RAISE(fail_at(p, k, path))
            << "'" << detail::shorten(name) << "' is not an output or scratch of the op (a launch "
            << "writes those; outputs and scratch: " << op_names(p, true, true) << ")";
      }
      check_dtype(p, k, path, name, o.dtype);
      if (o.scratch) {
        KERNELOP_RAISE(fail_at(p, k, path + ".scratch"))
            << "the op declares its scratch; a launch writes it as an output";
      }
      if (!o.permute.empty()) {  // Note [returned views]
        KERNELOP_RAISE(fail_at(p, k, path + ".permute"))
            << "the op declares how it returns its outputs; a launch writes them as they are";
      }
    }
    for (const auto& entry : step.from) {
      const std::string& own = entry.first;
      bool declared = std::any_of(s.inputs->begin(), s.inputs->end(),
                                  [&](const Input& in) { return declared_name(in) == own; }) ||
                      std::any_of(s.outputs->begin(), s.outputs->end(),
                                  [&](const OutputDecl& o) { return o.name == own; });
      if (!declared) {
        KERNELOP_RAISE(fail_at(p, k, "from." + own))
            << "'" << detail::shorten(own) << "' is not an input or output of the launch";
      }
    }
    // The launch is an op of its own: everything else about it is checked as for any spec.
    OpPlan launch = derive_launch_plan(p, k);
    // Its outputs' inits run before its tests, whatever they decide; its kernel writes under them.
    for (const OutputDecl& o : *s.outputs) {
      if (o.init) write(std::string(received(step, o.name)), {});
    }
    check_host_reads(launch, &step, k, when);
    for (const OutputDecl& o : *s.outputs) write(std::string(received(step, o.name)), when);
    // Its instance is chosen from its inputs' dtypes: an output whose dtype is a type parameter
    // none of its inputs fixes would take the first instance's, not the op's tensor's.
    for (const OutputPlan& o : launch.outputs) {
      const TensorSlot& t = launch.tensors[static_cast<std::size_t>(o.slot)];
      const auto* param = t.dtype ? std::get_if<std::string>(&*t.dtype) : nullptr;
      if (!param || o.dtype_from >= 0) continue;
      bool fixed =
          std::any_of(launch.tensors.begin(), launch.tensors.end(),
                      [&](const TensorSlot& in) { return !in.is_output && in.dtype == t.dtype; });
      auto tp = std::find_if(launch.type_params.begin(), launch.type_params.end(),
                             [&](const TypeParam& x) { return x.name == *param; });
      if (!fixed && tp != launch.type_params.end() && tp->dtypes.size() > 1) {
        KERNELOP_RAISE(fail_at(p, k, "outputs"))
            << "'" << t.name << "' is " << *param << ", which none of the launch's inputs fixes "
            << "(its kernel is chosen by its inputs' dtypes); read a tensor of type " << *param
            << " or give '" << t.name << "' a dtype";
      }
    }
  }
  if (!own_kernel_ran) run_own_kernel(p.spec.then.size());
}

}  // namespace detail
}  // namespace kernelop
