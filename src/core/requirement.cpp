// Requirements on the inputs ("dim(bias, 0) == dim(x, -1)"): parsing and printing.
#include <array>

#include "kernelop/error.hpp"
#include "kernelop/spec.hpp"

namespace kernelop {
namespace {

struct CompareInfo {
  Compare op;
  std::string_view text;
};
// Two-character operators first, so that "<=" is not read as "<".
constexpr std::array<CompareInfo, 6> kCompares = {{{Compare::Eq, "=="},
                                                   {Compare::Ne, "!="},
                                                   {Compare::Le, "<="},
                                                   {Compare::Ge, ">="},
                                                   {Compare::Lt, "<"},
                                                   {Compare::Gt, ">"}}};

bool is_compare_char(char c) {
  return c == '=' || c == '!' || c == '<' || c == '>';
}

}  // namespace

std::string_view compare_text(Compare op) {
  for (const auto& c : kCompares) {
    if (c.op == op) return c.text;
  }
  return "?";
}

Requirement Requirement::parse(std::string_view text) {
  // Expressions contain none of = ! < >, so the first of them starts the operator.
  std::size_t at = 0;
  while (at < text.size() && !is_compare_char(text[at])) ++at;
  if (at == text.size()) {
    KERNELOP_FAIL(Spec) << "'" << text
                        << "' has no comparison; expected 'lhs OP rhs' with OP one of == != < "
                           "<= > >=";
  }
  const CompareInfo* found = nullptr;
  for (const auto& c : kCompares) {
    if (!found && text.substr(at, c.text.size()) == c.text) found = &c;
  }
  std::size_t rhs_at = at + (found ? found->text.size() : 1);
  if (!found || (rhs_at < text.size() && is_compare_char(text[rhs_at]))) {
    KERNELOP_FAIL(Spec) << "'" << text << "': unknown comparison at '" << text.substr(at, 3)
                        << "'; expected one of == != < <= > >=";
  }
  std::string_view rest = text.substr(rhs_at);
  for (char c : rest) {
    if (is_compare_char(c)) {
      KERNELOP_FAIL(Spec) << "'" << text << "' has more than one comparison; write one per entry";
    }
  }
  return Requirement{Expr::parse(text.substr(0, at)), found->op, Expr::parse(rest)};
}

std::string Requirement::to_string() const {
  return lhs.to_string() + " " + std::string(compare_text(op)) + " " + rhs.to_string();
}

bool compare_holds(Compare op, std::int64_t a, std::int64_t b) {
  switch (op) {
    case Compare::Eq:
      return a == b;
    case Compare::Ne:
      return a != b;
    case Compare::Lt:
      return a < b;
    case Compare::Le:
      return a <= b;
    case Compare::Gt:
      return a > b;
    case Compare::Ge:
      return a >= b;
  }
  return false;
}

bool Requirement::holds(std::int64_t a, std::int64_t b) const {
  return compare_holds(op, a, b);
}

}  // namespace kernelop
