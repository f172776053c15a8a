// Expression construction, printing, simplification and checked int64 arithmetic (the parser:
// expr_parse.cpp).
#include "kernelop/expr.hpp"

#include "core/words.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

namespace kernelop {
namespace {

using NodePtr = std::shared_ptr<const ExprNode>;

int precedence(ExprOp op) {
  return expr_op_info(op).precedence;
}

void print(const ExprNode& n, std::ostream& out) {
  switch (n.op) {
    case ExprOp::Const:
      out << n.value;
      return;
    case ExprOp::NumelExcept:
      out << expr_op_info(n.op).spelling << "(" << n.name;
      for (auto a : n.axes) out << ", " << a;
      out << ")";
      return;
    case ExprOp::Scalar:
    case ExprOp::Tunable:
      out << n.name;
      return;
    case ExprOp::Dim:
    case ExprOp::Stride:
    case ExprOp::Aligned:
      out << expr_op_info(n.op).spelling << "(" << n.name << ", " << n.value << ")";
      return;
    case ExprOp::Arch:
    case ExprOp::SmCount:
      out << expr_op_info(n.op).spelling << "()";
      return;
    case ExprOp::Numel:
    case ExprOp::ItemSize:
    case ExprOp::Rank:
    case ExprOp::Item:
      out << expr_op_info(n.op).spelling << "(" << n.name << ")";
      return;
    case ExprOp::SameShape:
      out << expr_op_info(n.op).spelling << "(" << n.lhs->name << ", " << n.rhs->name << ")";
      return;
    case ExprOp::Select:
      out << expr_op_info(n.op).spelling << "(";
      print(*n.cond, out);
      out << ", ";
      print(*n.lhs, out);
      out << ", ";
      print(*n.rhs, out);
      out << ")";
      return;
    case ExprOp::CeilDiv:
    case ExprOp::Min:
    case ExprOp::Max:
      out << expr_op_info(n.op).spelling << "(";
      print(*n.lhs, out);
      out << ", ";
      print(*n.rhs, out);
      out << ")";
      return;
    case KERNELOP_EXPR_COMPARISONS:
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::FloorDiv:
    case ExprOp::Mod:
      break;
  }
  int p = precedence(n.op);
  // Comparisons do not chain: a comparison operand of a comparison keeps its parentheses.
  bool lhs_parens = precedence(n.lhs->op) < p || (p == 0 && precedence(n.lhs->op) == 0);
  bool rhs_parens = precedence(n.rhs->op) <= p;
  if (lhs_parens) out << "(";
  print(*n.lhs, out);
  if (lhs_parens) out << ")";
  out << ' ' << expr_op_info(n.op).spelling << ' ';
  if (rhs_parens) out << "(";
  print(*n.rhs, out);
  if (rhs_parens) out << ")";
}

NodePtr make_leaf(ExprOp op, std::string name, std::int64_t value,
                  std::vector<std::int64_t> axes = {}) {
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  n->name = std::move(name);
  n->value = value;
  n->axes = std::move(axes);
  return n;
}

bool nodes_equal(const ExprNode& a, const ExprNode& b) {
  if (a.op != b.op || a.value != b.value || a.name != b.name || a.axes != b.axes) return false;
  if (is_leaf(a.op)) return true;
  if (a.op == ExprOp::Select && !nodes_equal(*a.cond, *b.cond)) return false;
  return nodes_equal(*a.lhs, *b.lhs) && nodes_equal(*a.rhs, *b.rhs);
}

[[noreturn]] void arith_fail(const ExprNode& where, std::string_view what) {
  KERNELOP_FAIL(Launch) << "expression '" << detail::shorten(to_string(where)) << "' " << what;
}

}  // namespace

bool is_nonnegative(const ExprNode& node) {
  switch (node.op) {
    case ExprOp::Const:
      return node.value >= 0;
    case KERNELOP_EXPR_COMPARISONS:
    case ExprOp::SameShape:
    case ExprOp::Dim:
    case ExprOp::Numel:
    case ExprOp::NumelExcept:
    case ExprOp::ItemSize:
    case ExprOp::Aligned:
    case ExprOp::Arch:
    case ExprOp::Rank:
    case ExprOp::SmCount:
      return true;
    case ExprOp::Scalar:
    case ExprOp::Tunable:
    case ExprOp::Item:    // a tensor's value
    case ExprOp::Stride:  // a view's strides are the caller's
    case ExprOp::Sub:
      return false;
    case ExprOp::Select:
    case ExprOp::Add:
    case ExprOp::Mul:
    case ExprOp::FloorDiv:
    case ExprOp::CeilDiv:
    case ExprOp::Mod:
    case ExprOp::Min:
    case ExprOp::Max:
      return is_nonnegative(*node.lhs) && is_nonnegative(*node.rhs);
  }
  return false;
}

Expr::Expr(std::int64_t value) : node_(make_leaf(ExprOp::Const, {}, value)) {}
Expr Expr::dim(std::string tensor, std::int64_t axis) {
  return Expr(make_leaf(ExprOp::Dim, std::move(tensor), axis));
}
Expr Expr::numel(std::string tensor) {
  return Expr(make_leaf(ExprOp::Numel, std::move(tensor), 0));
}
Expr Expr::numel_except(std::string tensor, std::vector<std::int64_t> axes) {
  if (axes.empty()) return Expr::numel(std::move(tensor));  // keeps the text form parseable
  return Expr(make_leaf(ExprOp::NumelExcept, std::move(tensor), 0, std::move(axes)));
}
Expr Expr::scalar(std::string name) {
  return Expr(make_leaf(ExprOp::Scalar, std::move(name), 0));
}
Expr Expr::itemsize(std::string tensor) {
  return Expr(make_leaf(ExprOp::ItemSize, std::move(tensor), 0));
}
Expr Expr::stride(std::string tensor, std::int64_t axis) {
  return Expr(make_leaf(ExprOp::Stride, std::move(tensor), axis));
}
Expr Expr::aligned(std::string tensor, std::int64_t bytes) {
  if (!valid_alignment(bytes)) KERNELOP_FAIL(Spec) << kAlignmentRule << ", got " << bytes;
  return Expr(make_leaf(ExprOp::Aligned, std::move(tensor), bytes));
}
Expr Expr::tunable(std::string name) {
  return Expr(make_leaf(ExprOp::Tunable, std::move(name), 0));
}
Expr Expr::arch() {
  return Expr(make_leaf(ExprOp::Arch, {}, 0));
}
Expr Expr::sm_count() {
  return Expr(make_leaf(ExprOp::SmCount, {}, 0));
}
Expr Expr::item(std::string tensor) {
  return Expr(make_leaf(ExprOp::Item, std::move(tensor), 0));
}

Expr Expr::rank(std::string tensor) {
  return Expr(make_leaf(ExprOp::Rank, std::move(tensor), 0));
}

Expr Expr::select(Expr cond, Expr if_true, Expr if_false) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Select;
  n->cond = std::move(cond.node_);
  n->lhs = std::move(if_true.node_);
  n->rhs = std::move(if_false.node_);
  return Expr(std::move(n));
}

Expr Expr::same_shape(std::string a, std::string b) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::SameShape;
  n->lhs = Expr::rank(std::move(a)).node_;
  n->rhs = Expr::rank(std::move(b)).node_;
  return Expr(std::move(n));
}

Expr Expr::binary(ExprOp op, Expr lhs, Expr rhs) {
  KERNELOP_INTERNAL_CHECK(!is_leaf(op) && op != ExprOp::Select) << "(not a binary operator)";
  KERNELOP_INTERNAL_CHECK(op != ExprOp::SameShape ||
                          (lhs.op() == ExprOp::Rank && rhs.op() == ExprOp::Rank))
      << "(same_shape's operands are rank leaves)";
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  n->lhs = std::move(lhs.node_);
  n->rhs = std::move(rhs.node_);
  return Expr(std::move(n));
}

std::string to_string(const ExprNode& node) {
  std::ostringstream out;
  print(node, out);
  return out.str();
}

std::string Expr::to_string() const {
  return kernelop::to_string(*node_);
}

bool operator==(const Expr& a, const Expr& b) {
  return a.node_ == b.node_ || nodes_equal(*a.node_, *b.node_);
}

Expr Expr::simplified() const {
  if (is_leaf(op())) {
    if (op() == ExprOp::NumelExcept && axes().empty()) return Expr::numel(name());
    return *this;
  }
  if (op() == ExprOp::Select) {
    Expr c = cond().simplified();
    if (c.is_const()) return (c.const_value() != 0 ? lhs() : rhs()).simplified();
    Expr a = lhs().simplified(), b = rhs().simplified();
    if (a == b) return a;
    return Expr::select(c, a, b);
  }
  Expr a = lhs().simplified();
  Expr b = rhs().simplified();
  ExprOp o = op();
  if (a.is_const() && b.is_const()) {
    try {
      return Expr(ExprArith<std::int64_t>::apply(o, a.const_value(), b.const_value(), node()));
    } catch (const Error&) {
      // Overflow or division by zero: keep the expression; evaluation will report it.
    }
  }
  auto is = [](const Expr& e, std::int64_t v) { return e.is_const() && e.const_value() == v; };
  switch (o) {
    case ExprOp::Add:
      if (is(a, 0)) return b;
      if (is(b, 0)) return a;
      // (e + c1) + c2 -> e + (c1 + c2)
      if (b.is_const() && a.op() == ExprOp::Add && a.rhs().is_const()) {
        return (a.lhs() + (a.rhs() + b)).simplified();
      }
      break;
    case ExprOp::Sub:
      if (is(b, 0)) return a;
      break;
    case ExprOp::Mul:
      if (is(a, 1)) return b;
      if (is(b, 1)) return a;
      if (is(a, 0) || is(b, 0)) return Expr(0);
      // (e * c1) * c2 -> e * (c1 * c2)
      if (b.is_const() && a.op() == ExprOp::Mul && a.rhs().is_const()) {
        return (a.lhs() * (a.rhs() * b)).simplified();
      }
      break;
    case ExprOp::FloorDiv:
    case ExprOp::CeilDiv:
      if (is(b, 1)) return a;
      break;
    case ExprOp::Min:
    case ExprOp::Max:
      if (a == b) return a;
      break;
    case KERNELOP_EXPR_COMPARISONS:
    case ExprOp::Mod:
    case ExprOp::SameShape:
      break;
    case KERNELOP_EXPR_LEAVES:
    case ExprOp::Select:
      KERNELOP_FAIL(Internal) << "Expr::simplified: a leaf or select reached the binary case";
  }
  return Expr::binary(o, a, b);
}

Expr Expr::resolved(const std::function<int(const Expr& leaf)>& slot_of) const {
  if (op() == ExprOp::Const) return *this;
  if (is_leaf(op())) {
    auto n = std::make_shared<ExprNode>(*node_);
    n->slot = slot_of(*this);
    return Expr(std::move(n));
  }
  if (op() == ExprOp::Select) {
    return Expr::select(cond().resolved(slot_of), lhs().resolved(slot_of), rhs().resolved(slot_of));
  }
  return Expr::binary(op(), lhs().resolved(slot_of), rhs().resolved(slot_of));
}

Expr Expr::with_tunables(const std::vector<std::string>& names) const {
  if (names.empty() || op() == ExprOp::Const) return *this;
  if (is_leaf(op())) {
    bool tunable =
        op() == ExprOp::Scalar && std::find(names.begin(), names.end(), name()) != names.end();
    return tunable ? Expr::tunable(name()) : *this;
  }
  if (op() == ExprOp::Select) {
    return Expr::select(cond().with_tunables(names), lhs().with_tunables(names),
                        rhs().with_tunables(names));
  }
  return Expr::binary(op(), lhs().with_tunables(names), rhs().with_tunables(names));
}

void Expr::for_each_leaf(const std::function<void(const Expr& leaf)>& fn) const {
  if (op() == ExprOp::Const) return;
  if (is_leaf(op())) {
    fn(*this);
    return;
  }
  if (op() == ExprOp::Select) cond().for_each_leaf(fn);
  lhs().for_each_leaf(fn);
  rhs().for_each_leaf(fn);
}

Expr operator+(Expr a, Expr b) {
  return Expr::binary(ExprOp::Add, std::move(a), std::move(b));
}
Expr operator-(Expr a, Expr b) {
  return Expr::binary(ExprOp::Sub, std::move(a), std::move(b));
}
Expr operator*(Expr a, Expr b) {
  return Expr::binary(ExprOp::Mul, std::move(a), std::move(b));
}
Expr floordiv(Expr a, Expr b) {
  return Expr::binary(ExprOp::FloorDiv, std::move(a), std::move(b));
}
Expr cdiv(Expr a, Expr b) {
  return Expr::binary(ExprOp::CeilDiv, std::move(a), std::move(b));
}
Expr mod(Expr a, Expr b) {
  return Expr::binary(ExprOp::Mod, std::move(a), std::move(b));
}
Expr min(Expr a, Expr b) {
  return Expr::binary(ExprOp::Min, std::move(a), std::move(b));
}
Expr max(Expr a, Expr b) {
  return Expr::binary(ExprOp::Max, std::move(a), std::move(b));
}
Expr select(Expr cond, Expr if_true, Expr if_false) {
  return Expr::select(std::move(cond), std::move(if_true), std::move(if_false));
}

std::int64_t ExprArith<std::int64_t>::apply(ExprOp op, std::int64_t a, std::int64_t b,
                                            const ExprNode& where) {
  std::int64_t r = 0;
  switch (op) {
    case ExprOp::Add:
      if (__builtin_add_overflow(a, b, &r)) arith_fail(where, "overflows int64");
      return r;
    case ExprOp::Sub:
      if (__builtin_sub_overflow(a, b, &r)) arith_fail(where, "overflows int64");
      return r;
    case ExprOp::Mul:
      if (__builtin_mul_overflow(a, b, &r)) arith_fail(where, "overflows int64");
      return r;
    case ExprOp::FloorDiv:
    case ExprOp::CeilDiv:
    case ExprOp::Mod: {
      if (b == 0) arith_fail(where, "divides by zero");
      if (a == std::numeric_limits<std::int64_t>::min() && b == -1) {
        if (op == ExprOp::Mod) return 0;
        arith_fail(where, "overflows int64");
      }
      std::int64_t q = a / b;
      std::int64_t m = a % b;
      bool inexact = m != 0;
      bool negative = (a < 0) != (b < 0);
      if (op == ExprOp::Mod) return (inexact && negative) ? m + b : m;
      if (op == ExprOp::FloorDiv) return (inexact && negative) ? q - 1 : q;
      return (inexact && !negative) ? q + 1 : q;
    }
    case ExprOp::Min:
      return a < b ? a : b;
    case ExprOp::Max:
      return a < b ? b : a;
    case ExprOp::Lt:
      return a < b;
    case ExprOp::Le:
      return a <= b;
    case ExprOp::Gt:
      return a > b;
    case ExprOp::Ge:
      return a >= b;
    case ExprOp::Eq:
      return a == b;
    case ExprOp::Ne:
      return a != b;
    case KERNELOP_EXPR_LEAVES:
    case ExprOp::Select:
    case ExprOp::SameShape:
      break;
  }
  KERNELOP_FAIL(Internal) << "ExprArith<int64_t>::apply: not a binary operator";
}

}  // namespace kernelop

namespace kernelop {

std::uint16_t FlatExprs::add(const Expr& e) {
  std::size_t before = nodes_.size();
  try {
    std::uint16_t root = add_node(e.node());
    trees_.push_back(e);
    return root;
  } catch (...) {
    nodes_.resize(before);  // all of `e` or nothing
    throw;
  }
}

std::uint16_t FlatExprs::add_node(const ExprNode& n) {
  FlatNode f{n.op, 0, 0, 0, n.slot, n.value, &n};
  // Operands first (a node's operands precede it), then the node itself.
  if (n.cond) f.cond = add_node(*n.cond);
  if (n.lhs) f.lhs = add_node(*n.lhs);
  if (n.rhs) f.rhs = add_node(*n.rhs);
  if (nodes_.size() >= kMaxNodes) {
    KERNELOP_FAIL(Spec) << "the expressions of one launch have more than " << kMaxNodes << " nodes";
  }
  nodes_.push_back(f);
  return static_cast<std::uint16_t>(nodes_.size() - 1);
}

}  // namespace kernelop
