// The naming rules of specs: op names and the names kernelop reserves (C++ and Python keywords,
// PyTorch schema types, expression functions, names C++ reserves).
#include <set>
#include <string>

#include "core/words.hpp"
#include "kernelop/expr.hpp"
#include "kernelop/validate.hpp"

namespace kernelop {

bool is_valid_op_name(std::string_view op_name) {
  auto pos = op_name.find("::");
  if (pos == std::string_view::npos) return false;
  return detail::is_identifier(op_name.substr(0, pos)) &&
         detail::is_identifier(op_name.substr(pos + 2));
}

bool is_reserved_name(std::string_view name) {
  static const std::set<std::string_view> kReserved = {
      // C++ and CUDA keywords
      "alignas", "alignof", "asm", "auto", "bool", "break", "case", "catch", "char", "class",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "decltype",
      "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export",
      "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
      "namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "co_await", "co_return", "co_yield",
      "char8_t", "char16_t", "char32_t", "concept",
      // Python keywords
      "False", "None", "True", "and", "as", "assert", "async", "await", "def", "del", "elif",
      "except", "finally", "from", "global", "import", "in", "is", "lambda", "nonlocal", "not",
      "or", "pass", "raise", "with", "yield",
      // PyTorch schema types
      "Tensor", "Scalar", "SymInt", "str", "Device", "Layout", "ScalarType", "MemoryFormat",
      "Generator", "Storage", "Stream", "Dimname", "Any"};
  if (kReserved.count(name)) return true;
  // The expression language's functions (Note [operator table]).
  for (const ExprOpInfo& row : kExprOps) {
    bool call = row.form == ExprForm::LeafCall || row.form == ExprForm::Call;
    if (call && row.spelling == name) return true;
  }
  // C++ reserves "__x" and "_X"; kernelop's generated code uses the "__kop" prefix.
  if (name.size() >= 2 && name[0] == '_' &&
      (name[1] == '_' || (name[1] >= 'A' && name[1] <= 'Z'))) {
    return true;
  }
  return false;
}

}  // namespace kernelop
