// The one evaluator of a plan's size expressions and output shapes, generic over the integer
// type like evaluate<Int>: int64_t at launch time (KernelOp), c10::SymInt in the PyTorch Meta
// kernel. Both paths call it, so a launch and a Meta kernel accept and refuse the same inputs
// with the same messages (Note [one shape evaluator]).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "kernelop/expr.hpp"
#include "kernelop/plan.hpp"

namespace kernelop {

/// The message of a broken requirement after "op NAME: ", the one text both the launch (int64)
/// and the Meta kernel (c10::SymInt) give: "the inputs break the requirement 'TEXT': A OP B is
/// false" with the two sides of a comparison (lhs and rhs non-null), else without them.
template <class Int>
std::string broken_requirement_text(const RequirementPlan& r, const Int* lhs, const Int* rhs) {
  std::ostringstream s;
  s << "the inputs break the requirement '" << r.text << "'";
  if (lhs && rhs) {
    s << ": " << *lhs << " " << comparison_text(r.condition.op()) << " " << *rhs << " is false";
  }
  return s.str();
}

/// Note [one shape evaluator]: `Sizes` gives the evaluator what a call knows about its inputs:
///
///   std::int64_t rank(int slot) const;        // rank of tensor slot `slot`
///   Int size(int slot, std::int64_t a) const; // size of a normalised axis
///   Int numel(int slot) const;                // product of the sizes
///   Int scalar(int slot) const;               // integer (or bool) scalar input `slot`
///   Int itemsize(int slot) const;             // bytes per element
///   Int stride(int slot, std::int64_t a) const; // stride of a normalised axis, in elements
///   bool aligned(int slot, std::int64_t bytes) const; // data pointer % bytes == 0
///   (launch only) std::int64_t tunable(int slot) const, arch() const, sm_count() const: the chosen
///   config's value of a tunable, the device's compute capability bool negative(const Int& v)
///   const;        // v < 0 (a SymInt may guard) std::string shape_text(int slot) const;   // "[8,
///   s0]", for messages
///
/// Errors are Error(Launch) naming the op, the expression and the shape, whatever Int is.
template <class Int, class Sizes>
struct SizeEnv {
  const OpPlan& plan;
  const Sizes& sizes;

  [[noreturn]] void fail(const std::string& what) const {
    KERNELOP_FAIL(Launch) << "op " << plan.op_name << ": " << what;
  }

  template <class Node>
  std::int64_t axis(int slot, std::int64_t axis, const Node& n) const {
    std::int64_t a = 0;
    if (!normalize_axis(axis, sizes.rank(slot), &a)) {
      fail("'" + to_string(expr_source(n)) + "': axis " + std::to_string(axis) +
           " is out of range for " + expr_source(n).name + " of shape " + sizes.shape_text(slot));
    }
    return a;
  }

  /// A leaf's value; `n` is an ExprNode or a FlatNode (Note [flat expressions]).
  template <class Node>
  Int leaf(const Node& n) const {
    KERNELOP_INTERNAL_CHECK(n.slot >= 0) << "(expression leaf '" << to_string(expr_source(n))
                                         << "' was not resolved against the plan)";
    switch (n.op) {
      case ExprOp::Scalar:
        return sizes.scalar(n.slot);
      case ExprOp::Numel:
        return sizes.numel(n.slot);
      case ExprOp::Dim:
        return sizes.size(n.slot, axis(n.slot, n.value, n));
      case ExprOp::Stride:
        return sizes.stride(n.slot, axis(n.slot, n.value, n));
      case ExprOp::ItemSize:
        return sizes.itemsize(n.slot);
      case ExprOp::Rank:
        return ExprArith<Int>::constant(sizes.rank(n.slot));
      case ExprOp::Aligned:
        return ExprArith<Int>::constant(sizes.aligned(n.slot, n.value) ? 1 : 0);
      case ExprOp::Tunable:
      case ExprOp::Arch:
      case ExprOp::SmCount:
      case ExprOp::Item:
        // Launch values and configs' requires only (validate() keeps them out of shapes and
        // requirements, which a Meta kernel evaluates with sizes that know no config or device;
        // item() out of everything but kernel arguments).
        if constexpr (requires { sizes.tunable(0); }) {
          return ExprArith<Int>::constant(n.op == ExprOp::Arch      ? sizes.arch()
                                          : n.op == ExprOp::SmCount ? sizes.sm_count()
                                          : n.op == ExprOp::Item    ? sizes.item(n.slot)
                                                                    : sizes.tunable(n.slot));
        } else {
          KERNELOP_FAIL(Internal) << "'" << to_string(expr_source(n)) << "' read outside a launch";
        }
      case ExprOp::NumelExcept: {
        std::uint64_t skip = 0;
        const ExprNode& source = expr_source(n);
        for (auto listed : source.axes) {
          std::int64_t a = axis(n.slot, listed, n);
          if (skip >> a & 1u) {
            fail("'" + to_string(source) + "': axis " + std::to_string(listed) +
                 " is listed twice for " + source.name);
          }
          skip |= 1ull << a;
        }
        Int p = ExprArith<Int>::constant(1);
        for (std::int64_t d = 0; d < sizes.rank(n.slot); ++d) {
          if (!(skip >> d & 1u))
            p = ExprArith<Int>::apply(ExprOp::Mul, p, sizes.size(n.slot, d), source);
        }
        return p;
      }
      case KERNELOP_EXPR_ARITHMETIC:
      case KERNELOP_EXPR_COMPARISONS:
      case ExprOp::Const:
      case ExprOp::Select:
      case ExprOp::SameShape:
        break;
    }
    KERNELOP_FAIL(Internal) << "SizeEnv::leaf: not a leaf";
  }

  /// The value of `e`; an arithmetic error (a zero divisor, an overflow) names the op.
  Int eval(const Expr& e) const {
    try {
      return evaluate<Int>(e, *this);
    } catch (const Error& err) {
      if (err.message().starts_with("op ")) throw;  // SizeEnv's own, naming the op already
      fail(err.message());
    }
  }
  /// The value of expression `root` of `program`: as eval() of the expression added.
  Int eval(const FlatExprs& program, std::uint16_t root) const {
    try {
      return evaluate<Int>(program, root, *this);
    } catch (const Error& err) {
      if (err.message().starts_with("op ")) throw;
      fail(err.message());
    }
  }
  /// The value of `e`, part of requirement `text`: an arithmetic error names the op and the
  /// requirement.
  Int eval_requirement(const Expr& e, const std::string& text) const {
    try {
      return evaluate<Int>(e, *this);
    } catch (const Error& err) {
      if (err.message().starts_with("op ")) throw;
      fail("the requirement '" + detail::shorten(text) +
           "' cannot be evaluated for these inputs: " + err.message());
    }
  }
};

/// Appends the dims of output `out` to `dims` (anything with push_back(Int)).
template <class Int, class Sizes, class Dims>
void output_dims(const OpPlan& plan, const OutputPlan& out, const Sizes& sizes, Dims& dims) {
  SizeEnv<Int, Sizes> env{plan, sizes};
  const std::string& name = plan.tensors[static_cast<std::size_t>(out.slot)].name;
  switch (out.shape.kind) {
    case ShapeRule::Kind::Like: {
      const std::int64_t rank = sizes.rank(out.shape.source);
      for (std::int64_t d = 0; d < rank; ++d) {
        // An edited axis takes its expression (check_ranks made every edited axis exist).
        const Expr* edit = nullptr;
        for (std::size_t e = 0; e < out.shape.axes.size(); ++e) {
          std::int64_t a = 0;
          if (normalize_axis(out.shape.axes[e], rank, &a) && a == d) edit = &out.shape.dims[e];
        }
        if (!edit) {
          dims.push_back(sizes.size(out.shape.source, d));
          continue;
        }
        Int v = env.eval(*edit);
        if (!is_nonnegative(edit->node()) && sizes.negative(v)) {
          env.fail("output '" + name + "' axis " + std::to_string(d) + " = '" + edit->to_string() +
                   "' evaluates to a negative size");
        }
        dims.push_back(std::move(v));
      }
      return;
    }
    case ShapeRule::Kind::Reduce: {
      const int src = out.shape.source;
      std::uint64_t reduced = 0;
      for (auto axis : out.shape.axes) {
        std::int64_t a = 0;
        if (!normalize_axis(axis, sizes.rank(src), &a) || (reduced >> a & 1u)) {
          env.fail("output '" + name + "' reduces axis " + std::to_string(axis) +
                   ", out of range or repeated for " +
                   plan.tensors[static_cast<std::size_t>(src)].name + " of shape " +
                   sizes.shape_text(src));
        }
        reduced |= 1ull << a;
      }
      for (std::int64_t d = 0; d < sizes.rank(src); ++d) {
        if (!(reduced >> d & 1u)) {
          dims.push_back(sizes.size(src, d));
        } else if (out.shape.keepdim) {
          dims.push_back(ExprArith<Int>::constant(1));
        }
      }
      return;
    }
    case ShapeRule::Kind::Exprs:
      for (std::size_t d = 0; d < out.shape.dims.size(); ++d) {
        const Expr& e = out.shape.dims[d];
        Int v = env.eval(e);
        // Sizes and non-negative constants cannot go negative: no check (and no guard).
        if (!is_nonnegative(e.node()) && sizes.negative(v)) {
          env.fail("output '" + name + "' dim " + std::to_string(d) + " = '" + e.to_string() +
                   "' evaluates to a negative size");
        }
        dims.push_back(std::move(v));
      }
      return;
    case ShapeRule::Kind::External:
      KERNELOP_FAIL(Spec) << "op " << plan.op_name << " gets the shape of output '" << name
                          << "' from its meta_fn; allocate the outputs by calling it";
  }
}

/// Checks the rank requirements of the inputs (outputs = false) or outputs (true).
template <class Sizes>
void check_ranks(const OpPlan& plan, const Sizes& sizes, bool outputs) {
  for (const RankRequirement& r : plan.rank_requirements) {
    const TensorSlot& t = plan.tensors[static_cast<std::size_t>(r.slot)];
    if (t.is_output != outputs) continue;
    if (sizes.rank(r.slot) < r.min_rank) {
      KERNELOP_FAIL(Launch) << "op " << plan.op_name << ": " << (outputs ? "output '" : "input '")
                            << t.name << "' has rank " << sizes.rank(r.slot) << " (shape "
                            << sizes.shape_text(r.slot) << ") but " << r.reason
                            << " needs rank >= " << r.min_rank;
    }
  }
}

}  // namespace kernelop
