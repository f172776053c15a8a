// Images from pre-compiled PTX: find the entry, check its parameters against the plan.
#include <functional>
#include <sstream>

#include "core/ptx_entry.hpp"
#include "core/words.hpp"
#include "kernelop/image.hpp"

namespace kernelop {
namespace {

// Bytes of a PTX parameter type (".u64", ".f32", ...); 0 when unknown (e.g. .align'd arrays).
int ptx_param_bytes(std::string_view type) {
  if (type.size() < 3 || type[0] != '.') return 0;
  std::string_view bits = type.substr(2);
  if (bits == "8") return 1;
  if (bits == "16") return 2;
  if (bits == "32") return 4;
  if (bits == "64") return 8;
  return 0;
}

// What the calling convention passes for an argument, in bytes.
int arg_bytes(const ArgSlot& a) {
  if (a.is_pointer()) return 8;
  switch (a.value_type) {
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

// No inputs were declared: the .entry's parameters become the argument list of raw launches.
// PTX does not type pointers, so 64-bit integers are taken as pointers (tensors).
template <typename Fail>
void adopt_ptx_params(OpPlan& plan, const std::vector<std::string>& types, const Fail& fail) {
  for (std::size_t i = 0; i < types.size(); ++i) {
    const std::string& t = types[i];
    if (t == ".u64" || t == ".s64" || t == ".b64") {
      plan.adopt_pointer_param(false, std::nullopt);
    } else if (t == ".f32") {
      plan.adopt_value_param(ScalarType::Float);
    } else if (t == ".f64") {
      plan.adopt_value_param(ScalarType::Float64);
    } else if (t == ".u32" || t == ".s32" || t == ".b32") {
      plan.adopt_value_param(ScalarType::Int);
    } else if (t == ".u8" || t == ".s8" || t == ".b8" || t == ".pred") {
      plan.adopt_value_param(ScalarType::Bool);
    } else {
      KERNELOP_RAISE(fail(ErrorKind::Compile))
          << "parameter " << i << " has PTX type '" << t
          << "'; without a spec kernelop passes 64-bit pointers, 32-bit "
             "ints, floats, doubles and 8-bit bools";
    }
  }
}

}  // namespace

namespace detail {

std::optional<std::vector<std::string>> ptx_entry_param_types(std::string_view ptx,
                                                              std::string_view entry) {
  std::size_t at = std::string_view::npos;
  for (std::size_t p = ptx.find(".entry"); p != std::string_view::npos;
       p = ptx.find(".entry", p + 6)) {
    std::size_t name = p + 6;
    while (name < ptx.size() && detail::is_space(ptx[name])) ++name;
    if (ptx.compare(name, entry.size(), entry) == 0 &&
        (name + entry.size() == ptx.size() || !detail::is_ident_char(ptx[name + entry.size()]))) {
      at = name + entry.size();
      break;
    }
  }
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t open = ptx.find('(', at), close = ptx.find(')', at);
  std::vector<std::string> types;
  if (open != std::string_view::npos && close != std::string_view::npos && open < close &&
      ptx.find('{', at) > open) {
    std::istringstream list(std::string(ptx.substr(open + 1, close - open - 1)));
    for (std::string item; std::getline(list, item, ',');) {
      std::istringstream words(item);
      std::string word, type;
      while (words >> word) {
        if (word != ".param" && word != ".ptr" && word.rfind(".align", 0) != 0 &&
            word.rfind(".global", 0) != 0 && word[0] == '.' && type.empty())
          type = word;
      }
      if (!type.empty()) types.push_back(type);
    }
  }
  return types;
}

void check_entry_params(const OpPlan& plan, const std::vector<std::string>& types,
                        const std::function<detail::ErrorStream(ErrorKind)>& fail) {
  if (types.size() != plan.args.size()) {
    KERNELOP_RAISE(fail(ErrorKind::Compile))
        << "takes " << types.size() << " parameter(s) but the calling convention passes "
        << plan.args.size();
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    int have = ptx_param_bytes(types[i]);
    int want = arg_bytes(plan.args[i]);
    if (have != want) {
      KERNELOP_RAISE(fail(ErrorKind::Compile))
          << "parameter " << i << " is " << have * 8 << "-bit but the calling convention passes '"
          << plan.args[i].name << "' as " << plan.c_type(plan.args[i]) << " (" << want * 8
          << "-bit)";
    }
  }
}

void check_declared_dtypes(const OpPlan& plan,
                           const std::function<detail::ErrorStream(ErrorKind)>& fail,
                           std::string_view from) {
  for (const ArgSlot& a : plan.args) {
    bool external =
        a.kind == ArgSlot::Kind::Output &&
        plan.outputs[static_cast<std::size_t>(a.index - plan.num_tensor_inputs)].shape.kind ==
            ShapeRule::Kind::External;
    if (a.is_pointer() && !external &&
        (!plan.element(a) || !std::holds_alternative<DType>(*plan.element(a)))) {
      KERNELOP_RAISE(fail(ErrorKind::Spec))
          << "'" << a.name << "' needs a declared dtype: nothing can be inferred from " << from;
    }
  }
}

std::string ptx_target(std::string_view ptx) {
  std::size_t at = ptx.find(".target ");
  if (at == std::string_view::npos) return "";
  std::size_t begin = at + 8;
  std::size_t end = ptx.find_first_of(" ,\n\r", begin);
  return std::string(ptx.substr(begin, (end == std::string_view::npos ? ptx.size() : end) - begin));
}

bool scratch_param_ok(const OpPlan& plan, int param, int align) {
  if (param < 0 || static_cast<std::size_t>(param) >= plan.args.size() || align < 1 ||
      align > 4096 || (align & (align - 1)) != 0)
    return false;
  const ArgSlot& a = plan.args[static_cast<std::size_t>(param)];
  return a.kind == ArgSlot::Kind::ExtraValue && a.value_type == ScalarType::Int64 && a.value &&
         a.value->is_const() && a.value->const_value() == 0;
}

}  // namespace detail

CompiledImage image_from_ptx(OpPlan plan, std::string ptx, const std::string& entry) {
  std::function<detail::ErrorStream(ErrorKind)> fail = [&](ErrorKind kind) {
    detail::ErrorStream s(kind);
    s << "op " << plan.op_name << ": PTX entry '" << entry << "': ";
    return s;
  };
  detail::check_declared_dtypes(plan, fail, "PTX");
  if (plan.instances.size() != 1) {
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "PTX holds one instantiation; type_params are not supported";
  }
  std::string target = detail::ptx_target(ptx);
  if (target.empty()) KERNELOP_RAISE(fail(ErrorKind::Spec)) << "the PTX has no .target line";
  if (target.rfind("sm_", 0) != 0)
    KERNELOP_RAISE(fail(ErrorKind::Spec)) << ".target is '" << target << "'";
  auto types = detail::ptx_entry_param_types(ptx, entry);
  if (!types) {
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "no such .entry in the PTX (kernel names are the mangled "
           "symbols; extern \"C\" kernels keep their names)";
  }
  if (plan.args_from_kernel) adopt_ptx_params(plan, *types, fail);
  detail::check_entry_params(plan, *types, fail);
  CompiledImage image;
  image.lowered_names = {entry};
  image.images.push_back(ArchImage{"compute_" + target.substr(3), std::move(ptx), {}, false, 0});
  image.plan = std::move(plan);
  return image;
}

}  // namespace kernelop
