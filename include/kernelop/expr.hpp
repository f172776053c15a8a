// Symbolic integer expressions: the one type that carries every shape-dependent number
// (output dims, launch geometry, extra kernel arguments) and every condition on them
// (requirements: a comparison is an expression worth 1 or 0).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/error.hpp"

namespace kernelop {

enum class ExprOp : std::uint8_t {
  // leaves
  Const,        ///< an integer literal
  Dim,          ///< dim(t, axis): size of axis `axis` (negative counts from the end) of tensor t
  Numel,        ///< numel(t): number of elements of t
  NumelExcept,  ///< numel_except(t, a, ...): product of t's sizes over all axes but the listed
  Scalar,       ///< n: the value of integer scalar input n
  ItemSize,     ///< itemsize(t): bytes per element of t's dtype
  Stride,       ///< stride(t, axis): t's stride along `axis`, in elements
  Aligned,      ///< aligned(t, bytes): 1 when t's data pointer is a multiple of `bytes`, else 0
  Tunable,      ///< BLOCK: the value the chosen config binds to tunable BLOCK (resolved form of
                ///< a name that is a tunable; launch values and configs' requires only)
  Arch,         ///< arch(): the device's compute capability, major * 10 + minor (sm_90 -> 90)
  Rank,         ///< rank(t): number of dims of tensor t
  SmCount,      ///< sm_count(): the device's number of streaming multiprocessors (launch only)
  Item,         ///< item(t): the value of one-element integer tensor t, read on the host at
                ///< launch, a host sync (kernel arguments only: Note [host reads])
  // binary operators (Python semantics: // floors, % takes the divisor's sign)
  Add,
  Sub,
  Mul,
  FloorDiv,
  CeilDiv,  ///< cdiv(a, b)
  Mod,
  Min,  ///< min(a, b)
  Max,  ///< max(a, b)
  // comparisons: 1 when true, else 0 (they do not chain: `a < b < c` is refused)
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  // select(c, a, b): a when c != 0, else b; only the chosen operand is evaluated
  Select,
  // same_shape(a, b): 1 when tensors a and b have the same rank and sizes, else 0 (any rank). Its
  // operands are rank(a) and rank(b), so that leaves name and resolve its tensors as any other.
  SameShape,
};

/// How an operator is written (Note [operator table]).
enum class ExprForm : std::uint8_t {
  Literal,   ///< 42
  Name,      ///< n (a scalar input, or a tunable once resolved)
  LeafCall,  ///< dim(x, 0): a leaf whose arguments are names and integer literals
  Call,      ///< cdiv(a, b): a function of expressions
  Infix,     ///< a + b
};

/// Note [operator table]: one row per ExprOp, in enum order. The printer, the parser and the
/// reserved names read it; each evaluator (int64 and SymInt) switches over ExprOp listing every
/// enumerator, with no `default:` (-Werror=switch), so an operator added to the enum fails to
/// build until the table and every evaluator have it.
struct ExprOpInfo {
  ExprOp op;
  ExprForm form;
  std::string_view spelling;  ///< Infix: the symbol; LeafCall, Call: the function; else ""
  int precedence;             ///< Infix: 0 comparisons, 1 + -, 2 * // %; else 3 (an atom)
  int arity;                  ///< expression operands: Infix and cdiv/min/max 2, select 3, else 0
};
inline constexpr std::array<ExprOpInfo, 29> kExprOps = {{
    {ExprOp::Const, ExprForm::Literal, "", 3, 0},
    {ExprOp::Dim, ExprForm::LeafCall, "dim", 3, 0},
    {ExprOp::Numel, ExprForm::LeafCall, "numel", 3, 0},
    {ExprOp::NumelExcept, ExprForm::LeafCall, "numel_except", 3, 0},
    {ExprOp::Scalar, ExprForm::Name, "", 3, 0},
    {ExprOp::ItemSize, ExprForm::LeafCall, "itemsize", 3, 0},
    {ExprOp::Stride, ExprForm::LeafCall, "stride", 3, 0},
    {ExprOp::Aligned, ExprForm::LeafCall, "aligned", 3, 0},
    {ExprOp::Tunable, ExprForm::Name, "", 3, 0},
    {ExprOp::Arch, ExprForm::LeafCall, "arch", 3, 0},
    {ExprOp::Rank, ExprForm::LeafCall, "rank", 3, 0},
    {ExprOp::SmCount, ExprForm::LeafCall, "sm_count", 3, 0},
    {ExprOp::Item, ExprForm::LeafCall, "item", 3, 0},
    {ExprOp::Add, ExprForm::Infix, "+", 1, 2},
    {ExprOp::Sub, ExprForm::Infix, "-", 1, 2},
    {ExprOp::Mul, ExprForm::Infix, "*", 2, 2},
    {ExprOp::FloorDiv, ExprForm::Infix, "//", 2, 2},
    {ExprOp::CeilDiv, ExprForm::Call, "cdiv", 3, 2},
    {ExprOp::Mod, ExprForm::Infix, "%", 2, 2},
    {ExprOp::Min, ExprForm::Call, "min", 3, 2},
    {ExprOp::Max, ExprForm::Call, "max", 3, 2},
    {ExprOp::Lt, ExprForm::Infix, "<", 0, 2},
    {ExprOp::Le, ExprForm::Infix, "<=", 0, 2},
    {ExprOp::Gt, ExprForm::Infix, ">", 0, 2},
    {ExprOp::Ge, ExprForm::Infix, ">=", 0, 2},
    {ExprOp::Eq, ExprForm::Infix, "==", 0, 2},
    {ExprOp::Ne, ExprForm::Infix, "!=", 0, 2},
    {ExprOp::Select, ExprForm::Call, "select", 3, 3},
    {ExprOp::SameShape, ExprForm::Call, "same_shape", 3, 0},  // operands: tensors, not expressions
}};
namespace detail {
constexpr bool expr_ops_in_enum_order() {
  for (std::size_t i = 0; i < kExprOps.size(); ++i) {
    if (static_cast<std::size_t>(kExprOps[i].op) != i) return false;
  }
  return static_cast<std::size_t>(ExprOp::SameShape) + 1 == kExprOps.size();
}
}  // namespace detail
static_assert(detail::expr_ops_in_enum_order(), "kExprOps needs one row per ExprOp, in order");

// Case labels by category (Note [operator table]), for a switch that treats a whole category
// alike (`case KERNELOP_EXPR_LEAVES: ...`); a switch that implements operators one by one lists
// them itself, so that a new operator fails to build there. The categories are tied to the table
// below.
// clang-format off
#define KERNELOP_EXPR_LEAVES                                                                   \
  ExprOp::Const: case ExprOp::Dim: case ExprOp::Numel: case ExprOp::NumelExcept:              \
  case ExprOp::Scalar: case ExprOp::ItemSize: case ExprOp::Stride: case ExprOp::Aligned:      \
  case ExprOp::Tunable: case ExprOp::Arch: case ExprOp::Rank: case ExprOp::SmCount:          \
  case ExprOp::Item
#define KERNELOP_EXPR_ARITHMETIC                                                               \
  ExprOp::Add: case ExprOp::Sub: case ExprOp::Mul: case ExprOp::FloorDiv:                     \
  case ExprOp::CeilDiv: case ExprOp::Mod: case ExprOp::Min: case ExprOp::Max
#define KERNELOP_EXPR_COMPARISONS                                                              \
  ExprOp::Lt: case ExprOp::Le: case ExprOp::Gt: case ExprOp::Ge: case ExprOp::Eq: case ExprOp::Ne
// clang-format on

namespace detail {
// Each operator's category by the macros above must be its form in the table.
constexpr bool expr_categories_match_table() {
  for (const ExprOpInfo& row : kExprOps) {
    bool leaf = false, arithmetic = false, comparison = false;
    switch (row.op) {
      case KERNELOP_EXPR_LEAVES:
        leaf = true;
        break;
      case KERNELOP_EXPR_ARITHMETIC:
        arithmetic = true;
        break;
      case KERNELOP_EXPR_COMPARISONS:
        comparison = true;
        break;
      case ExprOp::Select:
      case ExprOp::SameShape:
        break;
    }
    bool is_leaf_form = row.form == ExprForm::Literal || row.form == ExprForm::Name ||
                        row.form == ExprForm::LeafCall;
    if (leaf != is_leaf_form) return false;
    if (comparison != (row.form == ExprForm::Infix && row.precedence == 0)) return false;
    if (arithmetic != (!leaf && !comparison && row.arity == 2)) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::expr_categories_match_table(),
              "KERNELOP_EXPR_LEAVES / ARITHMETIC / COMPARISONS must match kExprOps");

constexpr const ExprOpInfo& expr_op_info(ExprOp op) {
  return kExprOps[static_cast<std::size_t>(op)];
}
constexpr bool is_leaf(ExprOp op) {
  ExprForm f = expr_op_info(op).form;
  return f == ExprForm::Literal || f == ExprForm::Name || f == ExprForm::LeafCall;
}
constexpr bool is_comparison(ExprOp op) {
  return expr_op_info(op).form == ExprForm::Infix && expr_op_info(op).precedence == 0;
}
/// "<", "<=", ">", ">=", "==", "!=" (empty for other operators).
constexpr std::string_view comparison_text(ExprOp op) {
  return is_comparison(op) ? expr_op_info(op).spelling : std::string_view();
}

/// The deepest nesting Expr::parse accepts: of parentheses and calls, and of the tree it builds
/// (each binary operator is one level), since walks over the tree recurse.
inline constexpr int kMaxExprDepth = 256;

class Expr;

/// Immutable expression node. Leaves name a tensor or scalar input; `slot` is the index the
/// plan assigned to that name (-1 until the expression is resolved against a plan).
struct ExprNode {
  ExprOp op = ExprOp::Const;
  std::int64_t value = 0;          // Const: the literal; Dim, Stride: the axis; Aligned: bytes
  std::string name;                // the tensor or scalar of a leaf
  std::vector<std::int64_t> axes;  // NumelExcept
  int slot = -1;
  std::shared_ptr<const ExprNode> lhs, rhs;  // operands; Select: the two choices
  std::shared_ptr<const ExprNode> cond;      // Select: the condition
};

/// A value-semantic handle to an immutable expression tree; copies share nodes.
///
/// Note [expression text]: the text form is canonical: binary operators surrounded by single
/// spaces, function arguments separated by ", ", parentheses only where precedence needs them.
/// parse(text).to_string() == text for every canonical text, and
/// parse(e.to_string()) == e for every expression e.
class Expr {
 public:
  Expr(std::int64_t value);  // NOLINT(google-explicit-constructor): literals read naturally
  Expr(int value) : Expr(static_cast<std::int64_t>(value)) {}  // NOLINT

  static Expr dim(std::string tensor, std::int64_t axis);
  static Expr numel(std::string tensor);
  static Expr numel_except(std::string tensor, std::vector<std::int64_t> axes);
  static Expr scalar(std::string name);
  static Expr itemsize(std::string tensor);
  static Expr stride(std::string tensor, std::int64_t axis);
  static Expr aligned(std::string tensor, std::int64_t bytes);
  static Expr tunable(std::string name);
  static Expr arch();
  static Expr sm_count();
  static Expr item(std::string tensor);
  static Expr rank(std::string tensor);
  static Expr binary(ExprOp op, Expr lhs, Expr rhs);
  static Expr select(Expr cond, Expr if_true, Expr if_false);
  static Expr same_shape(std::string a, std::string b);

  /// Parses the text form; throws Error(Spec) naming the column on malformed input or on
  /// nesting deeper than kMaxExprDepth.
  static Expr parse(std::string_view text);

  ExprOp op() const { return node_->op; }
  const ExprNode& node() const { return *node_; }
  bool is_const() const { return node_->op == ExprOp::Const; }
  std::int64_t const_value() const { return node_->value; }
  const std::string& name() const { return node_->name; }
  std::int64_t axis() const { return node_->value; }
  const std::vector<std::int64_t>& axes() const { return node_->axes; }
  int slot() const { return node_->slot; }
  Expr lhs() const { return Expr(node_->lhs); }
  Expr rhs() const { return Expr(node_->rhs); }
  Expr cond() const { return Expr(node_->cond); }  ///< Select only

  std::string to_string() const;

  /// Folds constants and removes identities (x * 1, x + 0, cdiv(x, 1), ...), for readability.
  Expr simplified() const;

  /// A copy whose leaves carry the slot `slot_of(leaf)` returns.
  Expr resolved(const std::function<int(const Expr& leaf)>& slot_of) const;
  /// A copy in which the name leaves (ExprOp::Scalar) listed in `names` are Tunable leaves.
  Expr with_tunables(const std::vector<std::string>& names) const;

  /// Calls fn on every leaf other than constants, left to right.
  void for_each_leaf(const std::function<void(const Expr& leaf)>& fn) const;

  friend bool operator==(const Expr& a, const Expr& b);

 private:
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  std::shared_ptr<const ExprNode> node_;
};

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr cdiv(Expr a, Expr b);
Expr mod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr if_true, Expr if_false);

/// Arithmetic used by evaluate<Int>. The primary template uses Int's own operators, with `/`
/// and `%` taken to be floor division and Python modulo (as c10::SymInt's are for sizes);
/// specialise it for integer types with other semantics. The int64_t specialisation checks
/// overflow and division by zero and throws Error naming the expression.
template <class Int>
struct ExprArith {
  static Int constant(std::int64_t value) { return Int(value); }
  /// The truth of a condition (a SymInt guards on it).
  static bool truthy(const Int& v) { return v != Int(0); }
  static Int apply(ExprOp op, const Int& a, const Int& b, const ExprNode& /*where*/) {
    const Int one(1), zero(0);
    switch (op) {
      case ExprOp::Add:
        return a + b;
      case ExprOp::Sub:
        return a - b;
      case ExprOp::Mul:
        return a * b;
      case ExprOp::FloorDiv:
        return a / b;
      case ExprOp::CeilDiv:
        return zero - (zero - a) / b;  // ceil(a / b) = -floor(-a / b), for every sign
      case ExprOp::Mod:
        return a % b;
      case ExprOp::Min:
        return b < a ? b : a;
      case ExprOp::Max:
        return a < b ? b : a;
      case ExprOp::Lt:
        return a < b ? one : zero;
      case ExprOp::Le:
        return a <= b ? one : zero;
      case ExprOp::Gt:
        return a > b ? one : zero;
      case ExprOp::Ge:
        return a >= b ? one : zero;
      case ExprOp::Eq:
        return a == b ? one : zero;
      case ExprOp::Ne:
        return a != b ? one : zero;
      case KERNELOP_EXPR_LEAVES:
      case ExprOp::Select:
      case ExprOp::SameShape:
        break;
    }
    KERNELOP_FAIL(Internal) << "ExprArith::apply: not a binary operator";
  }
};

/// Note [one evaluator semantics]: every integer type evaluates with these semantics, those of
/// ExprArith<int64_t>::apply: `a // b` rounds toward negative infinity, `a % b` takes the sign of
/// b, `cdiv(a, b)` is the exact ceiling of a / b for every sign; a zero divisor and an int64
/// overflow are refused (Error(Launch)), never wrapped. A symbolic evaluator (c10::SymInt) takes
/// the int64 path for known values and the same formulas for symbolic ones, so that a traced
/// shape and an eager one never differ (tests/python/test_hostile.py compares them).
template <>
struct ExprArith<std::int64_t> {
  static std::int64_t constant(std::int64_t value) { return value; }
  static bool truthy(std::int64_t v) { return v != 0; }
  static std::int64_t apply(ExprOp op, std::int64_t a, std::int64_t b, const ExprNode& where);
};

/// Note [flat expressions]: the launch path evaluates the same few expressions on every call.
/// FlatExprs keeps them as one contiguous array of 32-byte nodes whose operands are indices, so
/// that an evaluation touches a few cache lines rather than one heap node per operand (which a
/// driver call between launches has evicted). A flat node carries what evaluation reads (op,
/// slot, value) and points at its tree node for the rest (messages, numel_except's axes).
/// evaluate<Int> walks both forms with one function, evaluate_nodes, so they cannot differ.
struct FlatNode {
  ExprOp op = ExprOp::Const;
  std::uint16_t lhs = 0, rhs = 0, cond = 0;  // operand indices in the FlatExprs (Select: cond)
  std::int32_t slot = -1;
  std::int64_t value = 0;
  const ExprNode* source = nullptr;
};
static_assert(sizeof(FlatNode) == 32);

/// The node a leaf or an operator came from: for messages and the fields a flat node lacks.
inline const ExprNode& expr_source(const ExprNode& n) {
  return n;
}
inline const ExprNode& expr_source(const FlatNode& n) {
  return *n.source;
}

/// Expressions flattened into one array (Note [flat expressions]); keeps their trees alive.
class FlatExprs {
 public:
  static constexpr std::size_t kMaxNodes = 65535;
  /// Appends `e`'s nodes and returns its root's index; Error(Spec) beyond kMaxNodes nodes.
  std::uint16_t add(const Expr& e);
  const FlatNode& operator[](std::uint16_t i) const { return nodes_[i]; }
  std::size_t size() const { return nodes_.size(); }

 private:
  std::uint16_t add_node(const ExprNode& n);
  std::vector<FlatNode> nodes_;
  std::vector<Expr> trees_;
};

namespace detail {
// How evaluate_nodes walks each form: the operands of a node, and what a leaf is given.
struct TreeWalk {
  const ExprNode& lhs(const ExprNode& n) const { return *n.lhs; }
  const ExprNode& rhs(const ExprNode& n) const { return *n.rhs; }
  const ExprNode& cond(const ExprNode& n) const { return *n.cond; }
};
struct FlatWalk {
  const FlatExprs& program;
  const FlatNode& lhs(const FlatNode& n) const { return program[n.lhs]; }
  const FlatNode& rhs(const FlatNode& n) const { return program[n.rhs]; }
  const FlatNode& cond(const FlatNode& n) const { return program[n.cond]; }
};
}  // namespace detail

namespace detail {
/// same_shape(a, b) of two rank leaves: their ranks, then each axis, compared with Int's own
/// comparisons (a SymInt guards on each); `env.leaf` of each axis as a dim() of the same tensor.
template <class Int, class Env, class Node>
Int same_shape(const Node& a, const Node& b, const Env& env) {
  using A = ExprArith<Int>;
  const Int ra = env.leaf(a), rb = env.leaf(b);
  if (!A::truthy(A::apply(ExprOp::Eq, ra, rb, expr_source(a)))) return A::constant(0);
  Node da = a, db = b;
  da.op = db.op = ExprOp::Dim;
  for (std::int64_t d = 0; A::truthy(A::apply(ExprOp::Lt, A::constant(d), ra, expr_source(a)));
       ++d) {
    da.value = db.value = d;
    if (!A::truthy(A::apply(ExprOp::Eq, env.leaf(da), env.leaf(db), expr_source(a)))) {
      return A::constant(0);
    }
  }
  return A::constant(1);
}
}  // namespace detail

/// Evaluates node `node` (an ExprNode, or a FlatNode of `walk`'s program) with integers of type
/// Int. `env.leaf(node) -> Int` supplies the value of every leaf but constants (node.op,
/// node.slot, node.value; expr_source(node) for the rest). Walks raw nodes: no allocation and
/// no reference counting on the launch path.
template <class Int, class Env, class Node, class Walk>
Int evaluate_nodes(const Node& node, const Env& env, const Walk& walk) {
  switch (node.op) {
    case ExprOp::Const:
      return ExprArith<Int>::constant(node.value);
    case ExprOp::Dim:
    case ExprOp::Numel:
    case ExprOp::NumelExcept:
    case ExprOp::Scalar:
    case ExprOp::ItemSize:
    case ExprOp::Stride:
    case ExprOp::Aligned:
    case ExprOp::Tunable:
    case ExprOp::Arch:
    case ExprOp::Rank:
    case ExprOp::SmCount:
    case ExprOp::Item:
      return env.leaf(node);
    case ExprOp::Select:
      return ExprArith<Int>::truthy(evaluate_nodes<Int>(walk.cond(node), env, walk))
                 ? evaluate_nodes<Int>(walk.lhs(node), env, walk)
                 : evaluate_nodes<Int>(walk.rhs(node), env, walk);
    case ExprOp::SameShape:
      return detail::same_shape<Int>(walk.lhs(node), walk.rhs(node), env);
    case KERNELOP_EXPR_ARITHMETIC:
    case KERNELOP_EXPR_COMPARISONS:
      break;
  }
  Int a = evaluate_nodes<Int>(walk.lhs(node), env, walk);
  Int b = evaluate_nodes<Int>(walk.rhs(node), env, walk);
  return ExprArith<Int>::apply(node.op, a, b, expr_source(node));
}

/// Evaluates an expression with integers of type Int (see evaluate_nodes).
template <class Int, class Env>
Int evaluate(const ExprNode& node, const Env& env) {
  return evaluate_nodes<Int>(node, env, detail::TreeWalk{});
}
template <class Int, class Env>
Int evaluate(const Expr& expr, const Env& env) {
  return evaluate<Int>(expr.node(), env);
}
/// Evaluates the expression rooted at `root` of a flat program: the same value, or the same
/// error, as evaluate<Int> of the expression added (tests/cpu/expr_test.cpp compares them).
template <class Int, class Env>
Int evaluate(const FlatExprs& program, std::uint16_t root, const Env& env) {
  return evaluate_nodes<Int>(program[root], env, detail::FlatWalk{program});
}

/// True when `node` can never be negative whatever the input sizes: sizes and non-negative
/// constants combined by + * // cdiv % min max (no subtraction, no scalar inputs).
bool is_nonnegative(const ExprNode& node);

/// The canonical text of a node (see Note [expression text]).
std::string to_string(const ExprNode& node);

/// aligned(t, bytes) takes a power of two from 1 to 4096 (so that the low 12 bits of a pointer
/// decide it: the launch and decision memos key on them).
constexpr bool valid_alignment(std::int64_t bytes) {
  return bytes >= 1 && bytes <= 4096 && (bytes & (bytes - 1)) == 0;
}
inline constexpr const char* kAlignmentRule = "aligned() takes a power of two from 1 to 4096 bytes";
/// An output's "align" (OutputDecl::align) is at most 256 bytes: what every buffer kernelop
/// allocates has (cuMemAlloc's, PyTorch's), so kernelop never makes one its own launch refuses.
inline constexpr bool valid_output_alignment(std::int64_t bytes) {
  return valid_alignment(bytes) && bytes <= 256;
}

/// Normalises a possibly negative axis against a rank into *out; false when out of range.
inline bool normalize_axis(std::int64_t axis, std::int64_t rank, std::int64_t* out) {
  std::int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return false;
  *out = a;
  return true;
}

}  // namespace kernelop
