// Expression arithmetic over c10::SymInt, for Meta kernels: concrete values take the exact
// (checked, Python-semantics) int64 path; symbolic ones build SymPy expressions through SymInt.
#pragma once

#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>

#include "kernelop/expr.hpp"

namespace kernelop {

template <>
struct ExprArith<c10::SymInt> {
  static c10::SymInt constant(std::int64_t value) { return c10::SymInt(value); }
  // A comparison or select on symbolic sizes inside an expression guards on its outcome (the
  // traced graph is specialised to that branch; a requirement's top-level comparison is instead
  // a symbolic condition, see requirement_guard).
  static bool truthy(const c10::SymInt& v) { return v.sym_ne(0).guard_bool(__FILE__, __LINE__); }
  static c10::SymInt of(const c10::SymBool& b) {
    return c10::SymInt(b.guard_bool(__FILE__, __LINE__) ? 1 : 0);
  }
  static c10::SymInt apply(ExprOp op, const c10::SymInt& a, const c10::SymInt& b,
                           const ExprNode& where) {
    auto ca = a.maybe_as_int(), cb = b.maybe_as_int();
    if (ca && cb) return c10::SymInt(ExprArith<std::int64_t>::apply(op, *ca, *cb, where));
    switch (op) {
      case ExprOp::Add:
        return a + b;
      case ExprOp::Sub:
        return a - b;
      case ExprOp::Mul:
        return a * b;
      // The int64 evaluator's semantics (Note [one evaluator semantics] in expr.hpp): floor
      // division and a modulo with the divisor's sign, an exact ceiling, and a zero divisor
      // refused (a symbolic one guards on being nonzero).
      case ExprOp::FloorDiv:
      case ExprOp::CeilDiv:
      case ExprOp::Mod:
        if (cb) {
          if (*cb == 0) (void)ExprArith<std::int64_t>::apply(op, 0, 0, where);  // throws
        } else if (b.toSymNodeImplUnowned()->has_hint()) {
          // A symbolic divisor with a value: a guard, refused as the int64 path refuses.
          if (!truthy(b)) (void)ExprArith<std::int64_t>::apply(op, 0, 0, where);  // throws
        } else {
          // A data-dependent one (unbacked): a runtime assertion, never a guard on its value.
          TORCH_SYM_CHECK(b.sym_ne(0), "expression '", to_string(where), "' divides by zero");
        }
        if (op == ExprOp::FloorDiv) return a / b;  // floor division on symbolic sizes
        if (op == ExprOp::Mod) return a % b;
        return c10::SymInt(0) - (c10::SymInt(0) - a) / b;  // ceil(a / b) = -floor(-a / b)
      case ExprOp::Min:
        return a.min(b);
      case ExprOp::Max:
        return a.max(b);
      case ExprOp::Lt:
        return of(a.sym_lt(b));
      case ExprOp::Le:
        return of(a.sym_le(b));
      case ExprOp::Gt:
        return of(a.sym_gt(b));
      case ExprOp::Ge:
        return of(a.sym_ge(b));
      case ExprOp::Eq:
        return of(a.sym_eq(b));
      case ExprOp::Ne:
        return of(a.sym_ne(b));
      case KERNELOP_EXPR_LEAVES:
      case ExprOp::Select:
      case ExprOp::SameShape:
        break;
    }
    KERNELOP_FAIL(Internal) << "ExprArith<SymInt>: not a binary operator";
  }
};

}  // namespace kernelop
