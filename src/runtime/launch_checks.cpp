// Every check a launch makes of its arguments (Note [launch checks] in launch_checks.hpp).
#include "runtime/launch_checks.hpp"

#include <algorithm>
#include <vector>

#include "core/words.hpp"

namespace kernelop::detail {
namespace {

std::string param_text(const OpPlan& p, int slot) {
  for (std::size_t i = 0; i < p.args.size(); ++i) {
    const ArgSlot& a = p.args[i];
    if (a.is_pointer() && a.index == slot) {
      return "kernel parameter " + std::to_string(i) + " is " + p.c_type(a);
    }
  }
  return "";
}

// In the user's terms: the first input whose dtype no instantiation left open accepts, the
// dtypes it could have, and which earlier input fixed its type parameter.
[[noreturn]] void fail_no_instance(const OpPlan& p, std::span<const TensorView> inputs) {
  std::vector<int> open(p.instances.size());
  for (std::size_t k = 0; k < open.size(); ++k) open[k] = static_cast<int>(k);
  for (int i = 0; i < p.num_tensor_inputs; ++i) {
    const TensorSlot& t = p.tensors[static_cast<std::size_t>(i)];
    DType got = inputs[static_cast<std::size_t>(i)].dtype;
    std::vector<DType> allowed;
    std::vector<int> next;
    for (int inst : open) {
      auto want = bound_dtype(p, inst, t.dtype);
      if (!want || *want == got) next.push_back(inst);
      if (want && std::find(allowed.begin(), allowed.end(), *want) == allowed.end())
        allowed.push_back(*want);
    }
    if (!next.empty()) {
      open = std::move(next);
      continue;
    }
    ErrorStream e = op_error(p, ErrorKind::Type);
    e << "input '" << t.name << "' must be " << join(allowed, dtype_name);
    const auto* param = t.dtype ? std::get_if<std::string>(&*t.dtype) : nullptr;
    for (int j = 0; param && j < i; ++j) {
      const auto& earlier = p.tensors[static_cast<std::size_t>(j)].dtype;
      if (earlier && *earlier == *t.dtype) {
        e << " (" << *param << " = " << dtype_name(inputs[static_cast<std::size_t>(j)].dtype)
          << ", from input '" << p.tensors[static_cast<std::size_t>(j)].name << "')";
        break;
      }
    }
    e << ", got " << dtype_name(got);
    KERNELOP_RAISE(e);
  }
  KERNELOP_FAIL(Internal) << "op " << p.op_name
                          << ": no instantiation matched, yet every input did";
}

// The message of a broken requirement, in its own terms: both sides of a comparison, the
// pointer of an alignment. Built only when it fires.
[[noreturn]] void fail_requirement(const OpPlan& p, const RequirementPlan& r, const FrameEnv& env,
                                   const FrameSizes& sizes) {
  ErrorStream e = op_error(p, ErrorKind::Launch);
  ErrorContext where;
  where.op = p.op_name;
  where.stage = kRequirementStage;
  e.context(std::move(where));
  const Expr& c = r.condition;
  if (is_comparison(c.op())) {
    std::int64_t a = env.eval(c.lhs()), b = env.eval(c.rhs());
    e << broken_requirement_text(r, &a, &b);
  } else {
    e << broken_requirement_text<std::int64_t>(r, nullptr, nullptr);
  }
  if (c.op() == ExprOp::SameShape) {
    e << ": " << c.lhs().name() << " has shape " << sizes.view(c.lhs().slot()).shape.to_string()
      << ", " << c.rhs().name() << " " << sizes.view(c.rhs().slot()).shape.to_string();
  }
  c.for_each_leaf([&](const Expr& leaf) {
    if (leaf.op() != ExprOp::Aligned || sizes.aligned(leaf.slot(), leaf.node().value)) return;
    e << "; " << leaf.name() << "'s data pointer " << sizes.view(leaf.slot()).data << " is not "
      << leaf.node().value << "-byte aligned";
  });
  KERNELOP_RAISE(e);
}

void check_scalar(const OpPlan& p, std::size_t i, const ScalarArg& a, Frame& f) {
  const ScalarSlot& s = p.scalars[i];
  switch (s.type) {
    case ScalarType::Float:
    case ScalarType::Float64:
      if (a.kind == ScalarArg::Kind::Bool) {
        KERNELOP_RAISE(op_error(p, ErrorKind::Type))
            << "scalar '" << s.name << "' must be a float, got bool";
      }
      break;
    case ScalarType::Int:
    case ScalarType::Int64:
      if (a.kind != ScalarArg::Kind::Int) {
        KERNELOP_RAISE(op_error(p, ErrorKind::Type))
            << "scalar '" << s.name << "' must be an int, got " << scalar_kind_name(a.kind);
      }
      if (s.type == ScalarType::Int) {
        check_int32(
            p.op_name, a.i, [&] { return "scalar '" + s.name + "'"; },
            "; declare it int64 and take a long long");
      }
      f.ints[i] = a.i;
      break;
    case ScalarType::Bool:
      if (a.kind != ScalarArg::Kind::Bool) {
        KERNELOP_RAISE(op_error(p, ErrorKind::Type))
            << "scalar '" << s.name << "' must be a bool, got " << scalar_kind_name(a.kind);
      }
      f.ints[i] = a.b ? 1 : 0;
      break;
  }
}

}  // namespace

ErrorStream op_error(const OpPlan& plan, ErrorKind kind, const char* separator) {
  ErrorStream e(kind);
  e << "op " << plan.op_name << separator;
  return e;
}

void require_declared_launch(const OpPlan& plan) {
  if (plan.args_from_kernel) {
    KERNELOP_RAISE(op_error(plan, ErrorKind::Spec, " "))
        << "declares no inputs; its eager_fn launches it (launch_raw)";
  }
  if (!plan.geometry) {
    KERNELOP_RAISE(op_error(plan, ErrorKind::Spec, " "))
        << "has no launch geometry; its eager_fn launches it (launch_raw)";
  }
}

void check_device_index(const OpPlan& plan, int device) {
  if (device < 0 || device >= kMaxDevices) {
    KERNELOP_RAISE(op_error(plan, ErrorKind::Launch))
        << "device " << device << " is out of range (0.." << kMaxDevices - 1 << ")";
  }
}

std::optional<DType> bound_dtype(const OpPlan& plan, int instance,
                                 const std::optional<DTypeDecl>& decl) {
  if (!decl) return std::nullopt;
  if (const auto* d = std::get_if<DType>(&*decl)) return *d;
  const auto& name = std::get<std::string>(*decl);
  for (std::size_t p = 0; p < plan.type_params.size(); ++p) {
    if (plan.type_params[p].name == name) {
      return plan.instances[static_cast<std::size_t>(instance)].bindings[p];
    }
  }
  return std::nullopt;
}

int select_instance(const OpPlan& p, std::span<const TensorView> inputs) {
  if (p.type_params.empty()) return 0;
  for (std::size_t inst = 0; inst < p.instances.size(); ++inst) {
    bool match = true;
    for (int i = 0; i < p.num_tensor_inputs && match; ++i) {
      auto want =
          bound_dtype(p, static_cast<int>(inst), p.tensors[static_cast<std::size_t>(i)].dtype);
      match = !want || *want == inputs[static_cast<std::size_t>(i)].dtype;
    }
    if (match) return static_cast<int>(inst);
  }
  fail_no_instance(p, inputs);
}

void check_arguments(const OpPlan& p, std::span<const TensorView> inputs,
                     std::span<const ScalarArg> scalars, Frame& f) {
  if (p.args_from_kernel) {
    KERNELOP_RAISE(op_error(p, ErrorKind::Spec, " "))
        << "declares no inputs; its meta_fn gives the output shapes";
  }
  auto n_in = static_cast<std::size_t>(p.num_tensor_inputs);
  if (inputs.size() != n_in) {
    std::string names;
    for (std::size_t i = 0; i < n_in; ++i) names += (i ? ", " : "") + p.tensors[i].name;
    KERNELOP_RAISE(op_error(p, ErrorKind::Type))
        << "expected " << n_in << " tensor input(s) (" << names << "), got " << inputs.size();
  }
  if (scalars.size() != p.scalars.size()) {
    std::string names;
    for (std::size_t i = 0; i < p.scalars.size(); ++i) names += (i ? ", " : "") + p.scalars[i].name;
    KERNELOP_RAISE(op_error(p, ErrorKind::Type))
        << "expected " << p.scalars.size() << " scalar input(s) (" << names << "), got "
        << scalars.size();
  }
  f.instance = select_instance(p, inputs);
  for (std::size_t i = 0; i < n_in; ++i) {
    const TensorSlot& t = p.tensors[i];
    auto want = bound_dtype(p, f.instance, t.dtype);
    if (want && *want != inputs[i].dtype) {
      KERNELOP_RAISE(op_error(p, ErrorKind::Type))
          << "input '" << t.name << "' must be " << dtype_name(*want) << " ("
          << param_text(p, static_cast<int>(i)) << "), got " << dtype_name(inputs[i].dtype);
    }
  }
  for (std::size_t i = 0; i < p.scalars.size(); ++i) check_scalar(p, i, scalars[i], f);
}

void prepare(const OpPlan& p, std::span<const TensorView> inputs,
             std::span<const ScalarArg> scalars, Frame& f, std::span<const TensorView> outputs) {
  check_arguments(p, inputs, scalars, f);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    f.shapes.set(i, inputs[i].shape);
    f.views[i] = &inputs[i];
  }
  for (std::size_t t = inputs.size(); t < p.tensors.size(); ++t) f.views[t] = nullptr;
  FrameSizes sizes{f};
  check_ranks(p, sizes, false);
  FrameEnv env{p, sizes};
  for (const RequirementPlan& r : p.requirements) {
    if (env.eval_requirement(r.condition, r.text) == 0) fail_requirement(p, r, env, sizes);
  }
  for (const OutputPlan& out : p.outputs) {
    auto slot = static_cast<std::size_t>(out.slot);
    if (out.shape.kind == ShapeRule::Kind::External) {
      auto o = static_cast<std::size_t>(out.slot - p.num_tensor_inputs);
      if (o < outputs.size()) {
        f.shapes.set(slot, outputs[o].shape);
        continue;
      }
    }
    Shape dims;
    output_dims<std::int64_t>(p, out, sizes, dims);
    f.shapes.set(slot, dims);
  }
  check_ranks(p, sizes, true);
}

std::optional<DType> output_dtype(const OpPlan& p, const OutputPlan& out, int instance,
                                  std::span<const TensorView> inputs) {
  if (out.dtype_from >= 0) return inputs[static_cast<std::size_t>(out.dtype_from)].dtype;
  auto d = bound_dtype(p, instance, p.tensors[static_cast<std::size_t>(out.slot)].dtype);
  if (!d && out.shape.kind != ShapeRule::Kind::External) {
    KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
        << "output '" << p.tensors[static_cast<std::size_t>(out.slot)].name
        << "' has no known dtype";
  }
  return d;
}

CheckedTensors check_tensors(const OpPlan& p, std::span<const TensorView> inputs,
                             std::span<const TensorView> outputs, Frame& f) {
  auto describe = [&](std::size_t i) {
    if (i < inputs.size()) return "input '" + p.tensors[i].name + "'";
    return "output '" +
           p.tensors[static_cast<std::size_t>(p.outputs[i - inputs.size()].slot)].name + "'";
  };
  TensorChecker tensors(p.op_name, describe);
  bool work = false;  // anything to write
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    tensors.check(inputs[i], i, p.tensors[i].strided);
    if (p.tensors[i].mutated && inputs[i].may_overlap()) {
      KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
          << describe(i) << " is written in place but its elements may overlap (shape "
          << inputs[i].shape.to_string() << ", strides " << inputs[i].strides.to_string()
          << ": an expand()ed or otherwise self-overlapping view); pass a tensor whose elements "
             "are distinct, e.g. its .clone()";
    }
    work = work || (p.tensors[i].mutated && inputs[i].shape.numel() > 0);
  }
  // A tensor the kernel writes must share no memory with another it reads or writes: the
  // kernel would race with itself, silently (op(x, x), or x and a view of it).
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!p.tensors[i].mutated || inputs[i].shape.numel() == 0) continue;
    auto [lo, hi] = inputs[i].byte_span();
    for (std::size_t j = 0; j < inputs.size() + outputs.size(); ++j) {
      const TensorView& other = j < inputs.size() ? inputs[j] : outputs[j - inputs.size()];
      if (j == i || other.shape.numel() == 0) continue;
      auto [olo, ohi] = other.byte_span();
      if (olo < hi && lo < ohi) {
        KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
            << describe(i) << " is written in place and shares memory with " << describe(j)
            << "; pass tensors that do not overlap (e.g. a .clone() of one)";
      }
    }
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    auto want = output_dtype(p, out, f.instance, inputs);
    if (want && outputs[o].dtype != *want) {
      KERNELOP_RAISE(op_error(p, ErrorKind::Type))
          << describe(inputs.size() + o) << " must be " << dtype_name(*want) << ", got "
          << dtype_name(outputs[o].dtype);
    }
    const Shape& expected = f.shapes[static_cast<std::size_t>(out.slot)];
    if (!(outputs[o].shape == expected)) {
      KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
          << describe(inputs.size() + o) << " has shape " << outputs[o].shape.to_string()
          << " but the op produces " << expected.to_string();
    }
    tensors.check(outputs[o], inputs.size() + o);
    if (out.align > 1 && outputs[o].shape.numel() > 0 &&
        reinterpret_cast<std::uintptr_t>(outputs[o].data) %
                static_cast<std::uintptr_t>(out.align) !=
            0) {
      KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
          << describe(inputs.size() + o) << "'s data pointer " << outputs[o].data << " is not "
          << out.align << "-byte aligned, which its kernel was compiled assuming (the spec's "
          << "\"align\": " << out.align << "); pass a buffer of that alignment";
    }
    f.views[static_cast<std::size_t>(out.slot)] = &outputs[o];
    work = work || outputs[o].shape.numel() > 0;
  }
  return {tensors.device(), work};
}

}  // namespace kernelop::detail
