// An op's backward (Note [backward]): its declaration derived from the forward's, the rules it must
// follow, and the link that tells autograd where each of its inputs comes from.
#include <algorithm>
#include <set>

#include "core/words.hpp"
#include "kernelop/error.hpp"
#include "kernelop/plan.hpp"

namespace kernelop {
namespace {

constexpr std::string_view kGrad = "grad_";
// A written result's incoming gradient is grad_<input>_out: grad_<input> is the gradient the
// backward gives the input (that of its value before the call).
constexpr std::string_view kOut = "_out";

// "op ns::name: backward.PATH: " for the forward op `plan`.
detail::ErrorStream fail_at(const OpPlan& plan, std::string_view path) {
  detail::ErrorStream s(ErrorKind::Spec);
  s.context(ErrorContext{plan.op_name, plan.spec.kernel_name, {}, "validate", {}});
  s << "op " << plan.op_name << ": backward" << (path.empty() ? "" : ".") << path << ": ";
  return s;
}

const std::string* declared_name(const Input& input) {
  return std::visit([](const auto& d) { return &d.name; }, input);
}

// The forward's input_order index of the tensor or scalar input `name`, or -1.
int input_position(const OpPlan& p, std::string_view name) {
  for (std::size_t i = 0; i < p.input_order.size(); ++i) {
    auto [is_tensor, slot] = p.input_order[i];
    const std::string& n = is_tensor ? p.tensors[static_cast<std::size_t>(slot)].name
                                     : p.scalars[static_cast<std::size_t>(slot)].name;
    if (n == name) return static_cast<int>(i);
  }
  return -1;
}

int output_position(const OpPlan& p, std::string_view name) {
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    if (p.outputs[o].scratch) continue;  // the launch's own: no backward reads it
    if (p.tensors[static_cast<std::size_t>(p.outputs[o].slot)].name == name)
      return static_cast<int>(o);
  }
  return -1;
}

// The input_order position of the written input that holds the result `name` (<input>_out), or -1.
int result_position(const OpPlan& p, std::string_view name) {
  if (name.size() <= kOut.size() || name.substr(name.size() - kOut.size()) != kOut) return -1;
  int i = input_position(p, name.substr(0, name.size() - kOut.size()));
  if (i < 0 || !p.input_order[static_cast<std::size_t>(i)].is_tensor) return -1;
  const TensorSlot& t =
      p.tensors[static_cast<std::size_t>(p.input_order[static_cast<std::size_t>(i)].slot)];
  return t.result ? i : -1;
}

// The names whose gradients a backward may read: the outputs', then the written results'
// (<input>_out).
std::vector<std::string> graded_names(const OpPlan& p) {
  std::vector<std::string> names;
  for (const OutputPlan& o : p.outputs) {
    if (!o.scratch) names.push_back(p.tensors[static_cast<std::size_t>(o.slot)].name);
  }
  for (const TensorSlot& t : p.tensors) {
    if (t.result) names.push_back(t.name + std::string(kOut));
  }
  return names;
}

// The tensor a backward name is, or whose gradient it is (grad_<output>, grad_<input>_out), or -1.
int graded_slot(const OpPlan& p, std::string_view name) {
  if (int slot = p.tensor_slot(name); slot >= 0) return slot;
  if (name.substr(0, kGrad.size()) != kGrad) return -1;
  std::string_view base = name.substr(kGrad.size());
  if (int o = output_position(p, base); o >= 0) return p.outputs[static_cast<std::size_t>(o)].slot;
  if (int i = result_position(p, base); i >= 0)
    return p.input_order[static_cast<std::size_t>(i)].slot;
  return -1;
}

// What the backward input `name` receives: its `from` entry, else its own name.
std::string_view received(const OpPlan& p, const std::string& name) {
  return detail::renamed(p.spec.backward.at(0).from, name);
}

// What a backward input of this name receives, or nullopt when it names nothing of the forward.
std::optional<BackwardLink::Source> source_of(const OpPlan& p, std::string_view name) {
  using Kind = BackwardLink::Source::Kind;
  if (int i = input_position(p, name); i >= 0) return BackwardLink::Source{Kind::ForwardInput, i};
  if (int o = output_position(p, name); o >= 0) return BackwardLink::Source{Kind::ForwardOutput, o};
  if (name.substr(0, kGrad.size()) == kGrad) {
    if (int o = output_position(p, name.substr(kGrad.size())); o >= 0)
      return BackwardLink::Source{Kind::Grad, o};
    if (int i = result_position(p, name.substr(kGrad.size())); i >= 0)
      return BackwardLink::Source{Kind::ResultGrad, i};
  }
  return std::nullopt;
}

// The dtype of what a backward input or output named `name` carries (a forward tensor's).
std::optional<DTypeDecl> forward_dtype(const OpPlan& p, std::string_view name) {
  int slot = graded_slot(p, name);
  if (slot < 0) return std::nullopt;
  return p.tensors[static_cast<std::size_t>(slot)].dtype;
}

// The dtype of the gradient grad_<input>: the input's.
std::optional<DTypeDecl> gradient_dtype(const OpPlan& p, std::string_view name) {
  if (name.substr(0, kGrad.size()) != kGrad) return std::nullopt;
  int slot = p.tensor_slot(name.substr(kGrad.size()));
  if (slot < 0) return std::nullopt;
  return p.tensors[static_cast<std::size_t>(slot)].dtype;
}

// Floating point, or a type parameter whose dtypes all are; unknown counts as floating (the
// kernel's signature decides it later).
bool floating(const OpPlan& p, const std::optional<DTypeDecl>& dtype) {
  if (!dtype) return true;
  if (const auto* d = std::get_if<DType>(&*dtype)) return dtype_is_floating(*d);
  for (const TypeParam& tp : p.type_params) {
    if (tp.name == std::get<std::string>(*dtype))
      return std::all_of(tp.dtypes.begin(), tp.dtypes.end(), dtype_is_floating);
  }
  return true;
}

std::string known_names(const OpPlan& p) {
  std::vector<std::string> names;
  for (auto [is_tensor, slot] : p.input_order) {
    names.push_back(is_tensor ? p.tensors[static_cast<std::size_t>(slot)].name
                              : p.scalars[static_cast<std::size_t>(slot)].name);
  }
  for (const OutputPlan& o : p.outputs) {
    if (o.scratch) continue;
    const std::string& n = p.tensors[static_cast<std::size_t>(o.slot)].name;
    names.push_back(n);
    names.push_back(std::string(kGrad) + n);
  }
  for (const TensorSlot& t : p.tensors) {
    if (t.result) names.push_back(std::string(kGrad) + t.name + std::string(kOut));
  }
  return detail::join(names);
}

}  // namespace

bool derives_backward(const OpPlan& forward, const OpPlan& candidate) {
  if (forward.spec.backward.empty()) return false;
  OpDecl want = backward_decl(forward);
  return candidate.op_name == want.op_name && candidate.spec == want.spec;
}

void derive_chain(const OpPlan& forward, const std::function<const OpPlan&(OpPlan)>& complete) {
  for (const OpPlan* f = &forward; !f->spec.backward.empty();) {
    f = &complete(derive_plan(backward_decl(*f)));
  }
}

OpDecl backward_decl(const OpPlan& forward) {
  KERNELOP_INTERNAL_CHECK(forward.spec.backward.size() == 1) << "(no backward to derive)";
  const BackwardSpec& b = forward.spec.backward[0];
  OpDecl decl{forward.op_name + "_backward", b.spec, forward.base_dir};
  KernelSpec& s = decl.spec;
  if (s.type_params.empty()) s.type_params = forward.spec.type_params;
  if (s.inputs) {
    for (Input& input : *s.inputs) {
      if (auto* t = std::get_if<InputDecl>(&input); t && !t->dtype)
        t->dtype = forward_dtype(forward, received(forward, t->name));
    }
  }
  if (s.outputs) {
    for (OutputDecl& o : *s.outputs) {
      // A clone has its input's dtype (Note [initialised outputs]); check_backward compares it.
      bool clone = o.init && std::holds_alternative<CloneInit>(*o.init);
      if (!o.dtype && !o.dtype_from && !clone) o.dtype = gradient_dtype(forward, o.name);
    }
  }
  return decl;
}

namespace detail {

void check_backward(const OpPlan& p, const ValidateOptions& options) {
  const auto& backwards = p.spec.backward;
  if (backwards.size() > 1) {
    KERNELOP_RAISE(fail_at(p, "")) << "an op has one backward, found " << backwards.size();
  }
  const BackwardSpec& b = backwards[0];
  if (options.has_meta_fn || options.has_eager_fn || !p.spec.inputs || !p.spec.outputs) {
    KERNELOP_RAISE(fail_at(p, ""))
        << "needs the forward's inputs and outputs declared in the spec (no meta_fn or eager_fn): "
           "the backward's inputs are named after them";
  }
  std::vector<std::string> names;  // every forward name, tensors and scalars
  for (const TensorSlot& t : p.tensors) names.push_back(t.name);
  for (const ScalarSlot& s : p.scalars) names.push_back(s.name);
  // A name is what it says first; grad_<output> is that output's gradient, grad_<input>_out a
  // written result's. They must not meet: a forward name equal to one of them, or to a result's
  // <input>_out (whose grad_ would also be an input's gradient), would make the name ambiguous.
  for (const std::string& graded : graded_names(p)) {
    for (const std::string& name : names) {
      bool result = p.tensor_slot(graded) < 0;  // <input>_out
      if (name == std::string(kGrad) + graded || (result && name == graded)) {
        KERNELOP_RAISE(fail_at(p, ""))
            << "the forward has an input or output named '" << name
            << "', which would also name the gradient of its "
            << (result ? "written result '" + graded.substr(0, graded.size() - kOut.size()) + "'"
                       : "output '" + graded + "'")
            << "; rename it";
      }
    }
  }
  // An input the forward writes (Liger's cross entropy leaves the gradient in the logits) may be
  // differentiable: its gradient is that of the value it had before the call, and a backward that
  // reads it gets the value the forward left there (Note [written inputs with a backward]).
  // differentiable: tensor inputs of a floating dtype, each once
  if (b.differentiable.empty()) {
    KERNELOP_RAISE(fail_at(p, "differentiable"))
        << "is empty; name the tensor inputs that get gradients";
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < b.differentiable.size(); ++i) {
    const std::string& name = b.differentiable[i];
    std::string path = "differentiable[" + std::to_string(i) + "]";
    int slot = p.tensor_slot(name);
    if (slot < 0 || p.tensors[static_cast<std::size_t>(slot)].is_output) {
      KERNELOP_RAISE(fail_at(p, path))
          << "'" << detail::shorten(name) << "' is not a tensor input (scalars get no gradient)";
    }
    if (!seen.insert(name).second) KERNELOP_RAISE(fail_at(p, path)) << "'" << name << "' twice";
    const auto& dtype = p.tensors[static_cast<std::size_t>(slot)].dtype;
    if (!floating(p, dtype)) {
      KERNELOP_RAISE(fail_at(p, path)) << "'" << name << "' is " << dtype_decl_text(*dtype)
                                       << "; only floating-point tensors get gradients";
    }
  }
  // inputs: what the forward has; outputs: exactly the gradients of the differentiable inputs
  const KernelSpec& s = b.spec;
  if (!s.inputs || !s.outputs) {
    KERNELOP_RAISE(fail_at(p, !s.inputs ? "inputs" : "outputs")) << "missing";
  }
  for (std::size_t i = 0; i < s.inputs->size(); ++i) {
    const Input& input = (*s.inputs)[i];
    const std::string& own = *declared_name(input);
    std::string_view name = received(p, own);
    std::string path = "inputs[" + std::to_string(i) + "]";
    auto source = source_of(p, name);
    if (!source) {
      KERNELOP_RAISE(fail_at(p, path))
          << "'" << detail::shorten(name)
          << "' is not a forward input, output or output gradient (known: " << known_names(p)
          << ")";
    }
    bool forward_scalar = source->kind == BackwardLink::Source::Kind::ForwardInput &&
                          !p.input_order[static_cast<std::size_t>(source->index)].is_tensor;
    if (const auto* sc = std::get_if<ScalarInput>(&input)) {
      if (!forward_scalar) {
        KERNELOP_RAISE(fail_at(p, path)) << "'" << name << "' is a tensor in the forward";
      }
      const ScalarSlot& fs = p.scalars[static_cast<std::size_t>(
          p.input_order[static_cast<std::size_t>(source->index)].slot)];
      if (sc->type != fs.type) {
        KERNELOP_RAISE(fail_at(p, path))
            << "scalar '" << name << "' is " << scalar_type_name(sc->type)
            << " but the forward's is " << scalar_type_name(fs.type);
      }
      continue;
    }
    if (forward_scalar) {
      KERNELOP_RAISE(fail_at(p, path)) << "'" << name << "' is a scalar in the forward";
    }
    bool grad = source->kind == BackwardLink::Source::Kind::Grad ||
                source->kind == BackwardLink::Source::Kind::ResultGrad;
    if (grad && !floating(p, forward_dtype(p, name))) {
      KERNELOP_RAISE(fail_at(p, path)) << "'" << name << "' is the gradient of an output that is "
                                       << dtype_decl_text(*forward_dtype(p, name))
                                       << "; only floating-point outputs have gradients";
    }
    const auto& t = std::get<InputDecl>(input);
    auto want = forward_dtype(p, name);
    (void)own;
    if (t.dtype && want && *t.dtype != *want) {
      KERNELOP_RAISE(fail_at(p, path + ".dtype"))
          << "is " << dtype_decl_text(*t.dtype) << " but '" << name << "' is "
          << dtype_decl_text(*want) << " in the forward";
    }
    if (t.mutated) {
      KERNELOP_RAISE(fail_at(p, path))
          << "a backward reads its inputs; '" << name << "' is declared mutated";
    }
  }
  for (const auto& entry : b.from) {
    const std::string& input = entry.first;
    bool declared = std::any_of(s.inputs->begin(), s.inputs->end(),
                                [&](const Input& in) { return *declared_name(in) == input; });
    if (!declared) {
      KERNELOP_RAISE(fail_at(p, "from." + input))
          << "'" << detail::shorten(input) << "' is not an input of the backward";
    }
  }
  std::vector<std::string> want;
  for (const std::string& d : b.differentiable) want.push_back(std::string(kGrad) + d);
  std::vector<std::string> have;  // scratch (Note [several launches]) is the backward's own
  for (const OutputDecl& o : *s.outputs) have.push_back(o.scratch ? std::string() : o.name);
  for (std::size_t i = 0; i < have.size(); ++i) {
    const OutputDecl& o = (*s.outputs)[i];
    if (o.scratch) continue;
    if (o.dtype && gradient_dtype(p, have[i]) && *o.dtype != *gradient_dtype(p, have[i])) {
      KERNELOP_RAISE(fail_at(p, "outputs[" + std::to_string(i) + "].dtype"))
          << "is " << dtype_decl_text(*o.dtype) << " but the gradient of '"
          << have[i].substr(kGrad.size()) << "' is "
          << dtype_decl_text(*gradient_dtype(p, have[i]));
    }
    if (const auto* clone = o.init ? std::get_if<CloneInit>(&*o.init) : nullptr) {
      auto cloned = forward_dtype(p, received(p, clone->input));
      auto want_dtype = gradient_dtype(p, have[i]);
      if (cloned && want_dtype && *cloned != *want_dtype) {
        KERNELOP_RAISE(fail_at(p, "outputs[" + std::to_string(i) + "].init"))
            << "clones '" << detail::shorten(clone->input) << "', which is "
            << dtype_decl_text(*cloned) << ", but the gradient of '" << have[i].substr(kGrad.size())
            << "' is " << dtype_decl_text(*want_dtype);
      }
    }
    if (std::find(want.begin(), want.end(), have[i]) == want.end()) {
      KERNELOP_RAISE(fail_at(p, "outputs[" + std::to_string(i) + "]"))
          << "'" << detail::shorten(have[i])
          << "' is not the gradient of a differentiable input (expected: " << detail::join(want)
          << ")";
    }
  }
  for (const std::string& w : want) {
    if (std::find(have.begin(), have.end(), w) == have.end()) {
      KERNELOP_RAISE(fail_at(p, "outputs"))
          << "has no '" << w << "': every differentiable input gets its gradient";
    }
  }
  // The backward is an op of its own: everything else about it is checked as for any spec
  // (and its own backward, recursively).
  (void)derive_plan(backward_decl(p));
}

}  // namespace detail

BackwardLink link_backward(const OpPlan& forward, const OpPlan& backward) {
  BackwardLink link;
  for (auto [is_tensor, slot] : backward.input_order) {
    const std::string& own = is_tensor ? backward.tensors[static_cast<std::size_t>(slot)].name
                                       : backward.scalars[static_cast<std::size_t>(slot)].name;
    std::string_view name = received(forward, own);
    auto source = source_of(forward, name);
    KERNELOP_INTERNAL_CHECK(source.has_value())
        << "(backward input '" << name << "' names nothing of " << forward.op_name << ")";
    link.sources.push_back(*source);
  }
  for (const std::string& d : forward.spec.backward.at(0).differentiable)
    link.differentiable.push_back(input_position(forward, d));
  for (std::size_t r = 0; r < backward.num_results(); ++r) {
    std::string_view name =
        backward.tensors[static_cast<std::size_t>(backward.outputs[r].slot)].name;
    int position = input_position(forward, name.substr(kGrad.size()));
    auto it = std::find(link.differentiable.begin(), link.differentiable.end(), position);
    KERNELOP_INTERNAL_CHECK(it != link.differentiable.end())
        << "(backward output '" << name << "' is no differentiable input's gradient)";
    link.grad_of.push_back(static_cast<int>(it - link.differentiable.begin()));
  }
  return link;
}

}  // namespace kernelop
