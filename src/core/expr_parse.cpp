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
      KERNELOP_RAISE(error()) << "unexpected '" << std::string(1, text_[pos_]) << "'" << hint();
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
                                      : ", found the end")
                              << hint();
    }
  }

  // What the user likely meant by the character at the error, from other languages.
  std::string hint() const {
    if (pos_ >= text_.size()) return "";
    switch (text_[pos_]) {
      case '/':
        return " (integer division is '//', which floors; cdiv(a, b) rounds up)";
      case '&':
      case '|':
      case '!':
        return text_.substr(pos_, 2) == "!=" ? ""
                                             : " (there are no logical operators: a requirement "
                                               "list is their 'and'; select(c, a, b) chooses)";
      case '?':
        return " (there is no '?:': select(c, a, b) is a if c != 0, else b)";
      default:
        return "";
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

  // The infix operator of precedence `level` at pos_, consumed; the longest spelling wins
  // ("<=" before "<"). Every operator comes from kExprOps (Note [operator table]).
  std::optional<ExprOp> accept_infix(int level) {
    skip_space();
    const ExprOpInfo* best = nullptr;
    for (const ExprOpInfo& row : kExprOps) {
      if (row.form != ExprForm::Infix || row.precedence != level) continue;
      if (text_.substr(pos_, row.spelling.size()) != row.spelling) continue;
      if (!best || row.spelling.size() > best->spelling.size()) best = &row;
    }
    if (!best) return std::nullopt;
    pos_ += best->spelling.size();
    return best->op;
  }

  Parsed parse_expr() {
    Parsed e = parse_sum();
    auto comparison = [&]() -> std::optional<ExprOp> {
      if (auto op = accept_infix(0)) return op;
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
    while (auto op = accept_infix(1)) e = binary(*op, e, parse_term());
    return e;
  }

  Parsed parse_term() {
    Parsed e = parse_atom();
    while (auto op = accept_infix(2)) e = binary(*op, e, parse_atom());
    return e;
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
    return parse_call(name);
  }

  // name(...): a function of kExprOps, its arguments read as its row's form says.
  Parsed parse_call(const std::string& name) {
    const ExprOpInfo* row = nullptr;
    for (const ExprOpInfo& r : kExprOps) {
      bool call = r.form == ExprForm::LeafCall || r.form == ExprForm::Call;
      if (call && r.spelling == name) row = &r;
    }
    if (!row) {
      std::string known;
      for (const ExprOpInfo& r : kExprOps) {
        if (r.form == ExprForm::LeafCall || r.form == ExprForm::Call)
          known += (known.empty() ? "" : ", ") + std::string(r.spelling);
      }
      KERNELOP_RAISE(error()) << "unknown function '" << name << "' (known: " << known << ")";
    }
    switch (row->op) {
      case ExprOp::Numel:
      case ExprOp::ItemSize:
      case ExprOp::Rank:
      case ExprOp::Item: {
        std::string tensor = parse_ident();
        expect(")");
        return {row->op == ExprOp::Numel      ? Expr::numel(tensor)
                : row->op == ExprOp::ItemSize ? Expr::itemsize(tensor)
                : row->op == ExprOp::Item     ? Expr::item(tensor)
                                              : Expr::rank(tensor)};
      }
      case ExprOp::Dim:
      case ExprOp::Stride: {
        std::string tensor = parse_ident();
        expect(",");
        std::int64_t axis = parse_int();
        expect(")");
        return {row->op == ExprOp::Dim ? Expr::dim(tensor, axis) : Expr::stride(tensor, axis)};
      }
      case ExprOp::Aligned: {
        std::string tensor = parse_ident();
        expect(",");
        std::size_t at = pos_;
        std::int64_t bytes = parse_int();
        if (!valid_alignment(bytes)) {
          pos_ = at;
          KERNELOP_RAISE(error()) << kAlignmentRule << ", got " << bytes;
        }
        expect(")");
        return {Expr::aligned(tensor, bytes)};
      }
      case ExprOp::Arch:
        expect(")");
        return {Expr::arch()};
      case ExprOp::SmCount:
        expect(")");
        return {Expr::sm_count()};
      case ExprOp::NumelExcept: {
        std::string tensor = parse_ident();
        std::vector<std::int64_t> axes;
        while (accept(",")) axes.push_back(parse_int());
        expect(")");
        if (axes.empty()) KERNELOP_RAISE(error()) << "numel_except() needs at least one axis";
        return {Expr::numel_except(tensor, axes)};
      }
      case ExprOp::SameShape: {
        std::string a = parse_ident();
        expect(",");
        std::string b = parse_ident();
        expect(")");
        return {Expr::same_shape(a, b), 2};
      }
      case ExprOp::Select: {
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
      case ExprOp::CeilDiv:
      case ExprOp::Min:
      case ExprOp::Max: {
        Parsed a = parse_nested();
        expect(",");
        Parsed b = parse_nested();
        expect(")");
        return binary(row->op, a, b);
      }
      case KERNELOP_EXPR_COMPARISONS:
      case ExprOp::Const:
      case ExprOp::Scalar:
      case ExprOp::Tunable:
      case ExprOp::Add:
      case ExprOp::Sub:
      case ExprOp::Mul:
      case ExprOp::FloorDiv:
      case ExprOp::Mod:
        break;
    }
    KERNELOP_FAIL(Internal) << "expression parser: '" << name << "' is not a function";
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
