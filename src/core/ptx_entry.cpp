// A PTX .entry's parameters: found, read and checked against a plan (ptx_entry.hpp).
#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

#include "core/ptx_entry.hpp"
#include "core/words.hpp"
#include "kernelop/image.hpp"

namespace kernelop {
namespace {

// Bytes and alignment of a PTX parameter type as ptx_entry_param_types gives it: ".u64",
// ".f32", or an array ".b8[24] .align 8" (a by-value struct); {0, 0} when unknown.
std::pair<int, int> ptx_param_layout(std::string_view type) {
  auto scalar_bytes = [](std::string_view t) {
    if (t.size() < 3 || t[0] != '.') return 0;
    std::string_view bits = t.substr(2);
    if (bits == "8") return 1;
    if (bits == "16") return 2;
    if (bits == "32") return 4;
    if (bits == "64") return 8;
    return 0;
  };
  std::size_t open = type.find('[');
  if (open == std::string_view::npos) {
    int b = scalar_bytes(type);
    return {b, b};
  }
  std::size_t close = type.find(']', open);
  std::size_t align_at = type.find(".align ", close);
  int element = scalar_bytes(type.substr(0, open));
  long count = 0, align = 0;
  try {
    count = std::stol(std::string(type.substr(open + 1, close - open - 1)));
    align = align_at == std::string_view::npos ? element
                                               : std::stol(std::string(type.substr(align_at + 7)));
  } catch (const std::exception&) {
    return {0, 0};
  }
  if (count <= 0 || count > 4096 || align <= 0 || align > 4096) return {0, 0};
  return {element * static_cast<int>(count), static_cast<int>(align)};
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
      std::string word, type, align;
      bool align_next = false;
      while (words >> word) {
        if (align_next) {
          align = word;
          align_next = false;
        } else if (word == ".align") {
          align_next = true;
        } else if (word != ".param" && word != ".ptr" && word.rfind(".global", 0) != 0 &&
                   word[0] == '.' && type.empty()) {
          type = word;
        } else if (!type.empty() && word[0] != '.' && word.find('[') != std::string::npos) {
          // the parameter's name with an array size: a by-value struct, ".b8[24] .align 8"
          type += word.substr(word.find('['));
          if (!align.empty()) type += " .align " + align;
        }
      }
      if (!type.empty()) types.push_back(type);
    }
  }
  return types;
}

void check_entry_params(const OpPlan& plan, const std::vector<std::string>& types,
                        const std::function<detail::ErrorStream(ErrorKind)>& fail) {
  std::vector<KernelParam> params = plan.kernel_params();
  if (types.size() != params.size()) {
    KERNELOP_RAISE(fail(ErrorKind::Compile))
        << "takes " << types.size() << " parameter(s) but the calling convention passes "
        << params.size();
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    auto [have, have_align] = ptx_param_layout(types[i]);
    const KernelParam& k = params[i];
    const ArgSlot& first = plan.args[static_cast<std::size_t>(k.first)];
    if (k.is_struct) {
      if (have != k.size || have_align != k.align) {
        KERNELOP_RAISE(fail(ErrorKind::Compile))
            << "parameter " << i << " is '" << types[i]
            << "' but the calling convention passes a struct of " << k.size << " bytes aligned to "
            << k.align << " (fields from '" << first.name << "')";
      }
      continue;
    }
    if (have != k.size || types[i].find('[') != std::string::npos) {
      KERNELOP_RAISE(fail(ErrorKind::Compile))
          << "parameter " << i << " is "
          << (types[i].find('[') != std::string::npos ? "'" + types[i] + "'"
                                                      : std::to_string(have * 8) + "-bit")
          << " but the calling convention passes '" << first.name << "' as " << plan.c_type(first)
          << " (" << k.size * 8 << "-bit)";
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

namespace {

// The one table of Tile IR element types: each names a kernelop dtype, whose size and kind (the
// dtype table's) are the element's. Integers are signless in Tile IR: i8 is int8 and uint8 alike.
constexpr std::pair<std::string_view, DType> kTileIrElements[] = {{"i1", DType::Bool},
                                                                  {"i8", DType::Int8},
                                                                  {"i8", DType::UInt8},
                                                                  {"i16", DType::Int16},
                                                                  {"i32", DType::Int32},
                                                                  {"i64", DType::Int64},
                                                                  {"f16", DType::Float16},
                                                                  {"bf16", DType::BFloat16},
                                                                  {"f32", DType::Float32},
                                                                  {"f64", DType::Float64},
                                                                  {"f8E4M3FN", DType::Float8E4M3},
                                                                  {"f8E5M2", DType::Float8E5M2}};
constexpr bool every_dtype_has_an_element() {
  for (DType d : kAllDTypes) {
    bool found = false;
    for (const auto& e : kTileIrElements) found = found || e.second == d;
    if (!found) return false;
  }
  return true;
}
static_assert(every_dtype_has_an_element());

// The dtype of a Tile IR element type (the first row naming it), or nullopt.
std::optional<DType> tileir_element(std::string_view name) {
  for (const auto& [element, dtype] : kTileIrElements) {
    if (element == name) return dtype;
  }
  return std::nullopt;
}

// The Tile IR element type of a tensor of dtype `d`.
std::string_view tileir_element_of(DType d) {
  for (const auto& [element, dtype] : kTileIrElements) {
    if (dtype == d) return element;
  }
  return "";
}

}  // namespace

std::string TileIrParam::ptx_type() const {
  if (pointer) return ".u64";
  std::optional<DType> d = tileir_element(element);
  int bits = d ? static_cast<int>(dtype_size(*d)) * 8 : 0;
  return (d && dtype_is_floating(*d) && bits >= 32 ? ".f" : ".b") + std::to_string(bits);
}

std::optional<std::vector<TileIrParam>> tileir_entry_params(std::string_view text,
                                                            std::string_view entry,
                                                            std::string* why) {
  std::string head = "entry @" + std::string(entry) + "(";
  std::size_t at = 0;
  while ((at = text.find(head, at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == '\n' || text[at - 1] == ' ') break;
    at += head.size();
  }
  if (at == std::string_view::npos) {
    *why = "the Tile IR has no entry @" + std::string(entry);
    return std::nullopt;
  }
  std::size_t pos = at + head.size();
  std::vector<TileIrParam> out;
  // %argN: tile<TYPE>, ... ) where TYPE is an element type or ptr<element>.
  while (pos < text.size() && text[pos] != ')') {
    std::size_t colon = text.find(": ", pos);
    std::size_t close = text.find('>', colon == std::string_view::npos ? pos : colon);
    if (colon == std::string_view::npos || close == std::string_view::npos ||
        text.substr(pos, 4) != "%arg") {
      *why = "the entry's parameter list is not Tile IR's (" +
             std::string(text.substr(pos, std::min<std::size_t>(60, text.size() - pos))) + ")";
      return std::nullopt;
    }
    TileIrParam p;
    std::string_view type = text.substr(colon + 2);
    std::size_t end = type.find_first_of(",)");
    if (end == std::string_view::npos) end = type.size();
    type = type.substr(0, end);
    p.text = std::string(type);
    std::string_view inner;
    if (type.starts_with("tile<ptr<") && type.ends_with(">>")) {
      p.pointer = true;
      inner = type.substr(9, type.size() - 11);
    } else if (type.starts_with("tile<") && type.ends_with(">")) {
      inner = type.substr(5, type.size() - 6);
    }
    if (inner.empty() || !tileir_element(inner)) {
      *why = "parameter " + std::to_string(out.size()) + " is '" + p.text +
             "', not a pointer or scalar tile kernelop passes";
      return std::nullopt;
    }
    p.element = std::string(inner);
    out.push_back(std::move(p));
    pos = colon + 2 + end;
    if (pos < text.size() && text[pos] == ',') pos += 1;
    while (pos < text.size() && text[pos] == ' ') ++pos;
  }
  if (pos >= text.size()) {
    *why = "the entry's parameter list does not end";
    return std::nullopt;
  }
  return out;
}

void check_tileir_params(const OpPlan& plan, const std::vector<TileIrParam>& params,
                         const std::function<ErrorStream(ErrorKind)>& fail) {
  std::vector<std::string> types;
  types.reserve(params.size());
  for (const TileIrParam& p : params) types.push_back(p.ptx_type());
  check_entry_params(plan, types, fail);
  std::vector<KernelParam> kernel = plan.kernel_params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ArgSlot& a = plan.args[static_cast<std::size_t>(kernel[i].first)];
    if (kernel[i].is_struct) {
      KERNELOP_RAISE(fail(ErrorKind::Compile))
          << "parameter " << i << " is '" << params[i].text << "' but the calling convention "
          << "passes a struct (fields from '" << a.name << "'), which Tile IR entries do not take";
    }
    const bool element_floating = dtype_is_floating(*tileir_element(params[i].element));
    bool floating = false;
    if (a.is_pointer()) {
      const auto& element = plan.element(a);
      if (element && std::holds_alternative<DType>(*element)) {
        DType d = std::get<DType>(*element);
        floating = dtype_is_floating(d);
        if (params[i].pointer && params[i].element != tileir_element_of(d)) {
          KERNELOP_RAISE(fail(ErrorKind::Compile))
              << "parameter " << i << " is '" << params[i].text << "' but the calling convention "
              << "passes '" << a.name << "' as a pointer to " << dtype_name(d);
        }
      } else {
        floating = element_floating;  // an external output's dtype is the kernel's
      }
    } else {
      floating = a.value_type == ScalarType::Float || a.value_type == ScalarType::Float64;
    }
    if (params[i].pointer != a.is_pointer() || element_floating != floating) {
      KERNELOP_RAISE(fail(ErrorKind::Compile))
          << "parameter " << i << " is '" << params[i].text << "' but the calling convention "
          << "passes '" << a.name << "' as " << plan.c_type(a);
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

// No inputs were declared: the .entry's parameters become the argument list of raw launches.
// PTX does not type pointers, so 64-bit integers are taken as pointers (tensors).
void adopt_ptx_params(OpPlan& plan, const std::vector<std::string>& types,
                      const std::function<ErrorStream(ErrorKind)>& fail) {
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

}  // namespace detail

}  // namespace kernelop
