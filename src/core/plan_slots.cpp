// OpPlan's lookups and texts: slots by name, a pointer argument's element type and C type, the
// parameters a kernel with no declared convention adopts, and the printed forms of dtypes and
// shape rules. The derivation itself is plan.cpp.
#include <algorithm>
#include <sstream>

#include "core/words.hpp"
#include "kernelop/plan.hpp"

namespace kernelop {

int OpPlan::tensor_slot(std::string_view n) const {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

bool OpPlan::has_external_outputs() const {
  return std::any_of(outputs.begin(), outputs.end(),
                     [](const OutputPlan& o) { return o.shape.kind == ShapeRule::Kind::External; });
}

std::vector<int> OpPlan::instances_of(int program) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (configs[static_cast<std::size_t>(instances[i].config)].program == program)
      out.push_back(static_cast<int>(i));
  }
  return out;
}

int OpPlan::scalar_slot(std::string_view n) const {
  for (std::size_t i = 0; i < scalars.size(); ++i) {
    if (scalars[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

std::string dtype_decl_text(const DTypeDecl& dtype) {
  return std::visit(Overloaded{[](DType d) { return std::string(dtype_name(d)); },
                               [](const std::string& param) { return param; }},
                    dtype);
}

const std::optional<DTypeDecl>& OpPlan::element(const ArgSlot& arg) const {
  static const std::optional<DTypeDecl> kNone;
  if (!arg.is_pointer()) return kNone;
  return tensors[static_cast<std::size_t>(arg.index)].dtype;
}

int arg_size(const ArgSlot& arg) {
  if (arg.is_pointer()) return 8;
  switch (arg.value_type) {
    case ScalarType::Float:
    case ScalarType::Int:
      return 4;
    case ScalarType::Float64:
    case ScalarType::Int64:
      return 8;
    case ScalarType::Bool:
      return 1;
  }
  return 0;
}

std::vector<KernelParam> OpPlan::kernel_params() const {
  std::vector<KernelParam> out;
  std::size_t next = 0;  // the next struct
  for (int i = 0; i < static_cast<int>(args.size());) {
    if (next < structs.size() && structs[next].first == i) {
      const StructParam& st = structs[next++];
      auto count = static_cast<int>(st.offsets.size());
      out.push_back(KernelParam{i, count, st.size, st.align, true});
      i += count;
      continue;
    }
    int size = arg_size(args[static_cast<std::size_t>(i)]);
    out.push_back(KernelParam{i, 1, size, size, false});
    ++i;
  }
  return out;
}

std::string OpPlan::c_type(const ArgSlot& arg) const {
  if (!arg.is_pointer()) return std::string(scalar_cuda_type(arg.value_type));
  std::string type = "?";
  if (const auto& e = element(arg)) {
    type = std::visit(Overloaded{[](DType d) { return std::string(dtype_cuda_type(d)); },
                                 [](const std::string& param) { return param; }},
                      *e);
  }
  return (arg.is_const ? "const " : "") + type + "*";
}

void OpPlan::adopt_pointer_param(bool is_const, std::optional<DTypeDecl> element) {
  ArgSlot arg;
  arg.kind = ArgSlot::Kind::TensorInput;
  arg.name = "param" + std::to_string(args.size());
  arg.index = static_cast<int>(tensors.size());
  arg.is_const = is_const;
  tensors.push_back(TensorSlot{arg.name, false, !is_const, std::move(element)});
  args.push_back(std::move(arg));
}

void OpPlan::adopt_value_param(ScalarType type) {
  ArgSlot arg;
  arg.kind = ArgSlot::Kind::ScalarInput;
  arg.name = "param" + std::to_string(args.size());
  arg.index = static_cast<int>(scalars.size());
  arg.value_type = type;
  scalars.push_back(ScalarSlot{arg.name, type});
  args.push_back(std::move(arg));
}

std::string shape_rule_text(const OpPlan& plan, const ShapeRule& rule) {
  const std::string& source = plan.tensors[static_cast<std::size_t>(rule.source)].name;
  std::ostringstream out;
  switch (rule.kind) {
    case ShapeRule::Kind::Like:
      out << "like(" << source << ")";
      for (std::size_t i = 0; i < rule.axes.size(); ++i) {
        out << (i ? ", " : " with ") << "[" << rule.axes[i] << "] = " << rule.dims[i].to_string();
      }
      break;
    case ShapeRule::Kind::Reduce:
      out << "reduce(" << source << ", dims=" << detail::int_list_text(rule.axes)
          << ", keepdim=" << (rule.keepdim ? "true" : "false") << ")";
      break;
    case ShapeRule::Kind::External:
      return "meta_fn";
    case ShapeRule::Kind::Exprs:
      out << "[";
      for (std::size_t i = 0; i < rule.dims.size(); ++i) {
        out << (i ? ", " : "") << rule.dims[i].to_string();
      }
      out << "]";
      break;
  }
  return out.str();
}

}  // namespace kernelop
