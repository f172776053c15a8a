// Expr::parse: the text form of expressions, untrusted (it comes from spec files and packages).
#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "core/words.hpp"
#include "kernelop/expr.hpp"

namespace kernelop {
namespace {

// Recursive-descent parser over the canonical grammar (whitespace is free):
//   expr := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//   sum  := term (("+" | "-") term)*
//   term := atom (("*" | "//" | "%") atom)*
//   atom := INT | "-" INT | IDENT | IDENT "(" args ")" | "(" expr ")"
// Expressions can come from untrusted packages, and the parser and every walk over the tree
// recurse, so both the nesting of parentheses and calls and the height of the tree are bounded
// by kMaxExprDepth.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expr parse_all() {
    Expr e = parse_expr().expr;
    skip_space();
    if (pos_ != text_.size())
      KERNELOP_RAISE(error()) << "unexpected '" << std::string(1, text_[pos_]) << "'";
    return e;
  }

 private:
  // An expression and the height of its tree (0 for a leaf).
  struct Parsed {
    Expr expr;
    int height = 0;
  };

  // "invalid expression 'TEXT' at column N: ..." (Note [raising errors]).
  detail::ErrorStream error() const {
    detail::ErrorStream e(ErrorKind::Spec);
    e << "invalid expression '" << detail::excerpt(text_, pos_) << "' at column " << (pos_ + 1)
      << ": ";
    return e;
  }

  [[noreturn]] void fail_too_deep() const {
    KERNELOP_RAISE(error()) << "expression nests deeper than " << kMaxExprDepth << " levels";
  }

  Parsed binary(ExprOp op, const Parsed& a, const Parsed& b) const {
    int height = 1 + std::max(a.height, b.height);
    if (height > kMaxExprDepth) fail_too_deep();
    return {Expr::binary(op, a.expr, b.expr), height};
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool accept(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) == token) {
      pos_ += token.size();
      return true;
    }
    return false;
  }

  void expect(std::string_view token) {
    if (!accept(token)) {
      KERNELOP_RAISE(error()) << "expected '" << token << "'"
                              << (pos_ < text_.size()
                                      ? ", found '" + std::string(1, text_[pos_]) + "'"
                                      : ", found the end");
    }
  }

  // An expression nested in parentheses or in a call's arguments; the '(' is just behind pos_.
  Parsed parse_nested() {
    if (++nesting_ > kMaxExprDepth) {
      --pos_;  // name the column of the '(' that nests too deep
      fail_too_deep();
    }
    Parsed e = parse_expr();
    --nesting_;
    return e;
  }

  Parsed parse_expr() {
    Parsed e = parse_sum();
    static constexpr std::pair<std::string_view, ExprOp> kComparisons[] = {
        {"<=", ExprOp::Le}, {">=", ExprOp::Ge}, {"==", ExprOp::Eq},
        {"!=", ExprOp::Ne}, {"<", ExprOp::Lt},  {">", ExprOp::Gt}};
    auto comparison = [&]() -> std::optional<ExprOp> {
      for (const auto& [token, op] : kComparisons) {
        if (accept(token)) return op;
      }
      skip_space();
      if (pos_ < text_.size() && (text_[pos_] == '=' || text_[pos_] == '!')) {
        KERNELOP_RAISE(error()) << "unknown operator '" << text_[pos_]
                                << "'; comparisons are == != < <= > >=";
      }
      return std::nullopt;
    };
    auto op = comparison();
    if (!op) return e;
    e = binary(*op, e, parse_sum());
    if (comparison()) {
      KERNELOP_RAISE(error()) << "comparisons do not chain; parenthesise one of them or write "
                                 "two requirements";
    }
    return e;
  }

  Parsed parse_sum() {
    Parsed e = parse_term();
    while (true) {
      if (accept("+")) {
        e = binary(ExprOp::Add, e, parse_term());
      } else if (accept("-")) {
        e = binary(ExprOp::Sub, e, parse_term());
      } else {
        return e;
      }
    }
  }

  Parsed parse_term() {
    Parsed e = parse_atom();
    while (true) {
      if (accept("//")) {
        e = binary(ExprOp::FloorDiv, e, parse_atom());
      } else if (accept("*")) {
        e = binary(ExprOp::Mul, e, parse_atom());
      } else if (accept("%")) {
        e = binary(ExprOp::Mod, e, parse_atom());
      } else {
        return e;
      }
    }
  }

  std::int64_t parse_int() {
    skip_space();
    bool negative = accept("-");
    skip_space();
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      KERNELOP_RAISE(error()) << (negative ? "'-' must be followed by an integer literal"
                                           : "expected an integer");
    }
    // Accumulate negatively so that INT64_MIN parses.
    std::int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int digit = text_[pos_] - '0';
      if (value < (std::numeric_limits<std::int64_t>::min() + digit) / 10) {
        KERNELOP_RAISE(error()) << "integer literal out of int64 range";
      }
      value = value * 10 - digit;
      ++pos_;
    }
    if (!negative) {
      if (value == std::numeric_limits<std::int64_t>::min())
        KERNELOP_RAISE(error()) << "integer literal out of range";
      value = -value;
    }
    return value;
  }

  std::string parse_ident() {
    skip_space();
    std::size_t start = pos_;
    if (pos_ < text_.size() && detail::is_ident_start(text_[pos_])) {
      ++pos_;
      while (pos_ < text_.size() && detail::is_ident_char(text_[pos_])) ++pos_;
    }
    if (start == pos_) KERNELOP_RAISE(error()) << "expected a name";
    return std::string(text_.substr(start, pos_ - start));
  }

  Parsed parse_atom() {
    skip_space();
    if (pos_ >= text_.size()) KERNELOP_RAISE(error()) << "unexpected end";
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      Parsed e = parse_nested();
      expect(")");
      return e;
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return {Expr(parse_int())};
    std::string name = parse_ident();
    if (!accept("(")) return {Expr::scalar(name)};
    // f(tensor) and f(tensor, axis) leaves.
    using OfTensor = Expr (*)(std::string);
    using OfAxis = Expr (*)(std::string, std::int64_t);
    for (auto [fn, make] : {std::pair<std::string_view, OfTensor>{"numel", &Expr::numel},
                            std::pair<std::string_view, OfTensor>{"itemsize", &Expr::itemsize},
                            std::pair<std::string_view, OfTensor>{"rank", &Expr::rank}}) {
      if (name != fn) continue;
      std::string tensor = parse_ident();
      expect(")");
      return {make(tensor)};
    }
    for (auto [fn, make] : {std::pair<std::string_view, OfAxis>{"dim", &Expr::dim},
                            std::pair<std::string_view, OfAxis>{"stride", &Expr::stride}}) {
      if (name != fn) continue;
      std::string tensor = parse_ident();
      expect(",");
      std::int64_t axis = parse_int();
      expect(")");
      return {make(tensor, axis)};
    }
    if (name == "aligned") {
      std::string tensor = parse_ident();
      expect(",");
      std::size_t at = pos_;
      std::int64_t bytes = parse_int();
      if (bytes < 1 || bytes > 4096 || (bytes & (bytes - 1)) != 0) {
        pos_ = at;
        KERNELOP_RAISE(error()) << "aligned() takes a power of two from 1 to 4096 bytes, got "
                                << bytes;
      }
      expect(")");
      return {Expr::aligned(tensor, bytes)};
    }
    if (name == "arch") {
      expect(")");
      return {Expr::arch()};
    }
    if (name == "select") {
      Parsed cond = parse_nested();
      expect(",");
      Parsed a = parse_nested();
      expect(",");
      Parsed b = parse_nested();
      expect(")");
      int height = 1 + std::max({cond.height, a.height, b.height});
      if (height > kMaxExprDepth) fail_too_deep();
      return {Expr::select(cond.expr, a.expr, b.expr), height};
    }
    if (name == "numel_except") {
      std::string tensor = parse_ident();
      std::vector<std::int64_t> axes;
      while (accept(",")) axes.push_back(parse_int());
      expect(")");
      if (axes.empty()) KERNELOP_RAISE(error()) << "numel_except() needs at least one axis";
      return {Expr::numel_except(tensor, axes)};
    }
    ExprOp op;
    if (name == "cdiv") {
      op = ExprOp::CeilDiv;
    } else if (name == "min") {
      op = ExprOp::Min;
    } else if (name == "max") {
      op = ExprOp::Max;
    } else {
      KERNELOP_RAISE(error()) << "unknown function '" << name
                              << "' (known: dim, numel, numel_except, itemsize, rank, "
                                 "stride, aligned, arch, cdiv, min, max, select)";
    }
    Parsed a = parse_nested();
    expect(",");
    Parsed b = parse_nested();
    expect(")");
    return binary(op, a, b);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int nesting_ = 0;  // parentheses and calls open at pos_
};

}  // namespace

Expr Expr::parse(std::string_view text) {
  return Parser(text).parse_all();
}

}  // namespace kernelop
