// The dispatcher kernels of a kernelop op: CUDA (checks, allocates, launches on the current
// stream), Meta (the same checks and the one shape evaluator on symbolic sizes), CPU (a clear
// error).
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <sstream>

#include "kernelop/numbers.hpp"
#include "kernelop/shape_eval.hpp"
#include "kernelop/spec_json.hpp"
#include "kernelop/torch.hpp"
#include "registration.hpp"
#include "symint_arith.hpp"

namespace kernelop::torch_ops {

namespace impl {
namespace {

struct DTypePair {
  DType ours;
  c10::ScalarType theirs;
};
constexpr DTypePair kDTypes[] = {
    {DType::Float32, c10::ScalarType::Float},
    {DType::Float16, c10::ScalarType::Half},
    {DType::BFloat16, c10::ScalarType::BFloat16},
    {DType::Float64, c10::ScalarType::Double},
    {DType::Float8E4M3, c10::ScalarType::Float8_e4m3fn},
    {DType::Float8E5M2, c10::ScalarType::Float8_e5m2},
    {DType::Int8, c10::ScalarType::Char},
    {DType::UInt8, c10::ScalarType::Byte},
    {DType::Int16, c10::ScalarType::Short},
    {DType::Int32, c10::ScalarType::Int},
    {DType::Int64, c10::ScalarType::Long},
    {DType::Bool, c10::ScalarType::Bool},
};

// In DType order, one row per DType (kDTypeTable's order).
constexpr bool torch_dtypes_in_order() {
  if (std::size(kDTypes) != kDTypeTable.size()) return false;
  for (std::size_t i = 0; i < kDTypeTable.size(); ++i) {
    if (kDTypes[i].ours != kDTypeTable[i].dtype) return false;
  }
  return true;
}
static_assert(torch_dtypes_in_order(), "kDTypes needs every DType's torch dtype, in DType order");

}  // namespace

c10::ScalarType to_torch(DType d) {
  return kDTypes[static_cast<std::size_t>(d)].theirs;
}

// Re-raises a kernelop::Error as the matching torch error (TypeError, ValueError, RuntimeError).
[[noreturn]] void rethrow_as_torch(const Error& e) {
  switch (error_class(e.kind())) {
    case ErrorClass::Type:
      TORCH_CHECK_TYPE(false, e.what());
    case ErrorClass::Value:
      TORCH_CHECK_VALUE(false, e.what());
    case ErrorClass::Runtime:
      TORCH_CHECK(false, e.what());
  }
  TORCH_CHECK(false, e.what());
}

namespace {

// The tensor and scalar arguments of one call, read off the dispatcher's stack.
struct Call {
  const OpPlan& plan;
  c10::SmallVector<at::Tensor, 8> tensors;             // tensor inputs (contiguous where needed)
  c10::SmallVector<const c10::TensorImpl*, 8> passed;  // each as the stack holds it
  c10::SmallVector<ScalarArg, 8> scalars;
  // Integer scalars as the Meta kernel evaluates them: a SymInt scalar stays symbolic (its
  // ScalarArg then holds a placeholder 0, which the checks that need no value accept).
  c10::SmallVector<c10::SymInt, 8> sym_ints;

  Call(const OpPlan& p, torch::jit::Stack* stack, bool make_contiguous) : plan(p) {
    auto args = torch::jit::last(*stack, p.input_order.size());
    for (std::size_t i = 0; i < p.input_order.size(); ++i) {
      auto [is_tensor, slot] = p.input_order[i];
      const c10::IValue& v = args[i];
      if (is_tensor) {
        const std::string& name = p.tensors[static_cast<std::size_t>(slot)].name;
        TORCH_CHECK_TYPE(v.isTensor() && v.toTensor().defined(), "op ", p.op_name, ": input '",
                         name, "' must be a tensor");
        at::Tensor t = v.toTensor();
        passed.push_back(t.unsafeGetTensorImpl());
        // Documented: an input the kernel takes with its strides is passed as it is. Other
        // inputs the kernel only reads are made contiguous; one it writes cannot be. That is
        // knowable on meta tensors too, so the Meta kernel refuses it as the CUDA one does (a
        // traced graph must not pass fake-tensor checks and fail at run time).
        const TensorSlot& ts = p.tensors[static_cast<std::size_t>(slot)];
        if (!ts.strided && !t.is_contiguous()) {
          TORCH_CHECK(!ts.mutated, "op ", p.op_name, ": input '", name,
                      "' is written in place and must be contiguous (or declared strided, "
                      "with the kernel taking its strides)");
          if (make_contiguous) t = t.contiguous();
        }
        // A written view whose elements may overlap is refused on meta tensors too (the launch
        // refuses it: TensorView::may_overlap).
        if (ts.mutated && ts.strided) {
          bool overlap = false;
          if (t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
            overlap = at::has_internal_overlap(t) == at::MemOverlap::Yes;
          } else {
            try {
              TensorView view;
              view.shape = Shape(std::span<const std::int64_t>(t.sizes().data(), t.sizes().size()));
              view.strides =
                  Shape(std::span<const std::int64_t>(t.strides().data(), t.strides().size()));
              overlap = view.may_overlap();
            } catch (const Error& e) {  // a rank beyond kernelop's
              TORCH_CHECK(false, "op ", p.op_name, ": input '", name, "': ", e.what());
            }
          }
          TORCH_CHECK(!overlap, "op ", p.op_name, ": input '", name,
                      "' is written in place but its elements may overlap (shape ", t.sym_sizes(),
                      ", strides ", t.sym_strides(),
                      ": an expand()ed or otherwise self-overlapping view); pass a tensor whose "
                      "elements are distinct, e.g. its .clone()");
        }
        tensors.push_back(std::move(t));
      } else {
        const ScalarSlot& s = p.scalars[static_cast<std::size_t>(slot)];
        if (v.isBool()) {
          scalars.push_back(ScalarArg::of_bool(v.toBool()));
        } else if (v.isInt() || v.isSymInt()) {
          c10::SymInt value = v.isInt() ? c10::SymInt(v.toInt()) : v.toSymInt();
          std::optional<std::int64_t> known = value.maybe_as_int();
          if (!known && !s.symint) known = value.guard_int(__FILE__, __LINE__);  // an int schema
          scalars.push_back(ScalarArg::of_int(known.value_or(0)));
          sym_ints.resize(p.scalars.size());
          sym_ints[static_cast<std::size_t>(slot)] = std::move(value);
        } else if (v.isDouble()) {
          scalars.push_back(ScalarArg::of_float(v.toDouble()));
        } else {
          TORCH_CHECK_TYPE(false, "op ", p.op_name, ": scalar '", s.name, "' must be a ",
                           scalar_schema_type(s.type), ", got ", v.tagKind());
        }
      }
    }
  }

  DType dtype_of(const at::Tensor& t, const std::string& name) const {
    for (const auto& pair : kDTypes) {
      if (pair.theirs == t.scalar_type()) return pair.ours;
    }
    TORCH_CHECK_TYPE(false, "op ", plan.op_name, ": input '", name, "' has dtype ", t.scalar_type(),
                     ", which kernelop does not support");
  }

  // Views for the runtime (shapes concrete; data pointers only for real launches).
  c10::SmallVector<TensorView, 8> views() const {
    c10::SmallVector<TensorView, 8> out;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor& t = tensors[i];
      TensorView v;
      v.data = t.is_meta() ? nullptr : t.data_ptr();
      v.dtype = dtype_of(t, plan.tensors[i].name);
      if (!t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
        v.shape = Shape(std::span<const std::int64_t>(t.sizes().data(), t.sizes().size()));
      }
      v.device = t.is_cuda() ? t.get_device() : 0;
      if (plan.tensors[i].strided && !t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
        v.strides = Shape(std::span<const std::int64_t>(t.strides().data(), t.strides().size()));
      }
      out.push_back(v);
    }
    return out;
  }
};

void push_outputs(torch::jit::Stack* stack, std::size_t n_args,
                  c10::SmallVector<at::Tensor, 4>& outputs) {
  torch::jit::drop(*stack, n_args);
  for (auto& t : outputs) torch::jit::push(*stack, std::move(t));
}

// Note [donated inputs] (KernelOp::donatable_input): tensor input `i`'s buffer as output `o`,
// when only this call can see it: no reference to the tensor but the dispatcher's stack entry and
// the call's own (its own alone for a contiguous copy made here) and a Python wrapper that only
// the tensor keeps (PyTorch preserves a wrapper while C++ holds the tensor; no Python name or
// container reaches it), no other tensor or weak reference on its storage, memory from the CUDA
// caching allocator (not a from_blob / DLPack buffer another library may still read), and the
// output's dtype and shape. Typically a tensor autograd saved for the backward of a graph that is
// not retained (autograd.cpp) that the caller dropped. Undefined when not.
c10::Allocator* cuda_allocator() {  // the one at::empty allocates CUDA tensors with
  static c10::Allocator* const allocator =
      at::empty({0}, at::TensorOptions().device(c10::kCUDA)).storage().allocator();
  return allocator;
}

bool donation_enabled() {  // KERNELOP_DONATE=0 turns it off (docs/autograd.md), read once
  static const bool enabled = env_flag("KERNELOP_DONATE", true);
  return enabled;
}

at::Tensor donated(const KernelOp& op, const Call& call, std::size_t o, DType dtype,
                   const Shape& shape) {
  const int i = op.donatable_input(o);
  if (i < 0 || !donation_enabled()) return {};
  const at::Tensor& t = call.tensors[static_cast<std::size_t>(i)];
  const c10::Storage& storage = t.storage();
  const std::size_t holders =
      t.unsafeGetTensorImpl() == call.passed[static_cast<std::size_t>(i)] ? 2 : 1;
  // PyTorch's own rule for a tensor it may steal (AccumulateGrad's): the references expected, and
  // one more for a Python wrapper nothing but the tensor itself holds.
  if (!torch::autograd::impl::is_tensor_stealable(t, holders) || storage.use_count() != 1 ||
      storage.getWeakStorageImpl().weak_use_count() != 2 ||  // this one and the strong group's
      storage.allocator() != cuda_allocator() ||
      // The allocator's own block: not one shared with another process (CUDA IPC replaces the
      // deleter to keep it alive for the receiver) nor any buffer someone else frees.
      storage.data_ptr().get_deleter() != cuda_allocator()->raw_deleter() ||
      storage.data_ptr().get_deleter() == nullptr || !t.is_contiguous() ||
      to_torch(dtype) != t.scalar_type() ||
      !std::equal(shape.begin(), shape.end(), t.sizes().begin(), t.sizes().end()) ||
      // OutputDecl::align: an input at an offset in its storage may not have it
      reinterpret_cast<std::uintptr_t>(t.data_ptr()) %
              static_cast<std::uintptr_t>(std::max<std::int64_t>(1, op.plan().outputs[o].align)) !=
          0)
    return {};
  // A tensor of its own on the storage: none of the input's autograd history or version.
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage), t.key_set(), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

// Note [returned views] (OutputDecl::permute): the sizes and strides of the view an output is
// returned as, dim k being dim permute[k] of the contiguous tensor of `shape` the launches write.
// Allocated so directly (empty_strided): the op returns a tensor of its own, never a view of one.
// Strides as PyTorch makes them contiguous: a size of 0 counts as 1 (at::empty({2, 0, 3}) has
// strides {3, 3, 1}), so a fake tensor's strides and the real one's agree for empty outputs too.
inline std::int64_t at_least_one(std::int64_t n) {
  return std::max<std::int64_t>(n, 1);
}
inline c10::SymInt at_least_one(const c10::SymInt& n) {
  return n.max(c10::SymInt(1));
}

// Small vectors: no heap allocation per call for ranks up to 8.
template <class Int>
void returned_view(const std::vector<int>& permute, std::span<const Int> shape,
                   c10::SmallVector<Int, 8>& sizes, c10::SmallVector<Int, 8>& strides) {
  c10::SmallVector<Int, 8> contiguous(shape.size(), Int(1));
  for (std::size_t j = shape.size(); j-- > 1;)
    contiguous[j - 1] = contiguous[j] * at_least_one(shape[j]);
  sizes.clear();
  strides.clear();
  for (int d : permute) {
    sizes.push_back(shape[static_cast<std::size_t>(d)]);
    strides.push_back(contiguous[static_cast<std::size_t>(d)]);
  }
}

// The outputs of one call, allocated through the caching allocator, and their views.
struct Outputs {
  c10::SmallVector<at::Tensor, 4> tensors;
  c10::SmallVector<TensorView, 4> views;
  void add(at::Tensor t, DType dtype, Shape shape, c10::Device device) {
    views.push_back(TensorView{t.data_ptr(), dtype, shape, {}, device.index()});
    tensors.push_back(std::move(t));
  }
};

// Note [first-use growth]: the registration's miss handler asked about a call that broke a
// requirement of `p`: true when the registration grew (the call is tried again), else `note` is
// what the handler said. No lock is held while it runs (it may take the GIL, and compile).
bool ask_miss_handler(Registration::State& state, const OpPlan& p, std::span<const Shape> shapes,
                      std::span<const ScalarArg> scalars, const std::string& refusal,
                      std::string& note) {
  MissHandler handler;
  {
    std::lock_guard lock(state.grow_mutex);
    handler = state.on_miss;
  }
  if (!handler) return false;
  MissOutcome outcome = handler(Miss{p, shapes, scalars, refusal});
  if (outcome.grown && &state.op().plan() != &p) return true;
  note = std::move(outcome.note);
  return false;
}

class CudaKernel final : public c10::OperatorKernel {
 public:
  explicit CudaKernel(Registration::State* state) : state_(state) {}

  void operator()(const c10::OperatorHandle& handle, c10::DispatchKeySet,
                  torch::jit::Stack* stack) {
    std::optional<CallScope> scope;  // before anything of the state is read
    try {
      scope.emplace(*state_);
    } catch (const Error& e) {
      rethrow_as_torch(e);
    }
    for (bool retried = false;; retried = true) {
      if (attempt(handle, stack, retried)) return;
    }
  }

 private:
  // One try of the call with the registration's op now; false when it broke a requirement and
  // the registration grew for it (Note [first-use growth]): try again.
  bool attempt(const c10::OperatorHandle& handle, torch::jit::Stack* stack, bool retried) {
    const KernelOp& op = state_->op();
    const OpPlan& p = op.plan();
    Call call(p, stack, true);
    for (std::size_t i = 0; i < call.tensors.size(); ++i) {
      TORCH_CHECK(call.tensors[i].is_cuda(), "op ", p.op_name, ": input '", p.tensors[i].name,
                  "' is on ", call.tensors[i].device(), "; kernelop ops run on CUDA tensors");
    }
    try {
      auto views = call.views();
      std::span<const TensorView> in(views.data(), views.size());
      std::span<const ScalarArg> sc(call.scalars.data(), call.scalars.size());
      c10::Device device = call.tensors.front().device();
      Outputs out;
      void* stream = current_stream(device.index());
      if (p.has_external_outputs()) {
        allocate_from_meta(handle, call, stack, device, out);
        op.launch(in, sc, std::span<const TensorView>(out.views.data(), out.views.size()), stream);
      } else {
        // The shapes the launch's checks compute, evaluated once (Note [launch path]).
        auto allocate = [&](std::size_t o, DType dtype, const Shape& shape) {
          const auto options = at::TensorOptions().dtype(to_torch(dtype)).device(device);
          const std::vector<int>& permute = p.outputs[o].permute;
          at::Tensor t;
          if (!permute.empty()) {  // Note [returned views]: the launches see `shape`, contiguous
            c10::SmallVector<std::int64_t, 8> sizes, strides;
            returned_view<std::int64_t>(permute, shape.span(), sizes, strides);
            t = at::empty_strided(sizes, strides, options);
          } else {
            t = donated(op, call, o, dtype, shape);
            if (!t.defined()) t = at::empty(c10::IntArrayRef(shape.begin(), shape.end()), options);
          }
          out.add(std::move(t), dtype, shape, device);
          return out.views.back();
        };
        op.launch_allocating(in, sc, allocate, stream);
      }
      push_outputs(stack, p.input_order.size(), out.tensors);
      return true;
    } catch (const Error& e) {
      // (the op's own requirement: one of a later launch's may break after a launch wrote)
      if (retried || e.context().stage != kRequirementStage || e.context().op != p.op_name) {
        rethrow_as_torch(e);
      }
      auto views = call.views();
      std::vector<Shape> shapes;
      for (const TensorView& v : views) shapes.push_back(v.shape);
      std::string note;
      if (ask_miss_handler(*state_, p, shapes, call.scalars, e.message(), note)) return false;
      if (note.empty()) rethrow_as_torch(e);
      rethrow_as_torch(Error(e.kind(), e.message() + "; " + note, e.context()));
    }
  }

  // The outputs are shaped by the caller's meta function (registered for the Meta key): run it
  // on meta copies of the inputs and allocate what it returns.
  void allocate_from_meta(const c10::OperatorHandle& handle, const Call& call,
                          torch::jit::Stack* stack, c10::Device device, Outputs& out) const {
    const OpPlan& p = call.plan;
    torch::jit::Stack meta;
    std::size_t t = 0;
    for (const c10::IValue& v : torch::jit::last(*stack, p.input_order.size())) {
      if (v.isTensor()) {
        const at::Tensor& x = call.tensors[t++];
        meta.emplace_back(
            at::empty_strided(x.sizes(), x.strides(), x.options().device(c10::kMeta)));
      } else {
        meta.push_back(v);
      }
    }
    handle.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    TORCH_CHECK(meta.size() == p.outputs.size(), "op ", p.op_name, ": its meta_fn returned ",
                meta.size(), " value(s); the kernel writes ", p.outputs.size(), " output(s)");
    for (std::size_t o = 0; o < meta.size(); ++o) {
      TORCH_CHECK_TYPE(meta[o].isTensor(), "op ", p.op_name, ": its meta_fn returned a ",
                       meta[o].tagKind(), " as output ", o, "; expected a tensor");
      const at::Tensor& m = meta[o].toTensor();
      const std::string& name = p.tensors[static_cast<std::size_t>(p.outputs[o].slot)].name;
      // The kernel writes its outputs contiguous: a meta_fn that says otherwise would give fake
      // tensors (compile, export) strides the real ones do not have.
      TORCH_CHECK(
          m.is_contiguous(), "op ", p.op_name, ": its meta_fn returned output ", o, " ('", name,
          "') with strides ", m.strides(),
          "; kernelop allocates outputs contiguous "
          "(return torch.empty(...) of the shape; a spec returns a permutation of an output "
          "with \"permute\")");
      out.add(at::empty(m.sizes(), m.options().device(device)), call.dtype_of(m, name),
              Shape(std::span<const std::int64_t>(m.sizes().data(), m.sizes().size())), device);
    }
  }

  Registration::State* state_;
};

c10::SymBool sym_compare(const c10::SymInt& a, ExprOp op, const c10::SymInt& b) {
  switch (op) {
    case ExprOp::Eq:
      return a.sym_eq(b);
    case ExprOp::Ne:
      return a.sym_ne(b);
    case ExprOp::Lt:
      return a.sym_lt(b);
    case ExprOp::Le:
      return a.sym_le(b);
    case ExprOp::Gt:
      return a.sym_gt(b);
    case ExprOp::Ge:
      return a.sym_ge(b);
    case KERNELOP_EXPR_LEAVES:
    case KERNELOP_EXPR_ARITHMETIC:
    case ExprOp::Select:
    case ExprOp::SameShape:
      break;
  }
  return a.sym_ne(c10::SymInt(0));  // not a comparison: a condition holds when nonzero
}

// Note [requirement guards]: a requirement becomes a guard on the symbolic sizes. An upper bound
// by a constant, `a <= C` with a >= 0 by construction, is written `a // (C + 1) == 0` (and
// `a < C` as `a // C == 0`): the same truth for every a >= 0, but PyTorch's export solver turns
// it into an integral range and suggests `Dim(..., max=...)`, where the plain `16*s0 <= C` makes
// it derive a rational bound (C/16) that its error formatter cannot print (an AssertionError
// "Expected op to be '=='" from inside torch.export).
// The symbolic condition of a requirement's top-level comparison `a OP b` (TORCH_SYM_CHECK: a
// guard, or a runtime assertion in export); comparisons nested inside it guard as they are
// evaluated.
c10::SymBool comparison_guard(const Expr& c, const c10::SymInt& a, const c10::SymInt& b) {
  auto upper_bound = [](const c10::SymInt& x, const Expr& x_expr, const c10::SymInt& bound,
                        bool strict) -> std::optional<c10::SymBool> {
    std::optional<std::int64_t> k = bound.maybe_as_int();
    if (!k || !is_nonnegative(x_expr.node())) return std::nullopt;
    if (!strict && *k == std::numeric_limits<std::int64_t>::max()) return std::nullopt;
    std::int64_t divisor = strict ? *k : *k + 1;
    if (divisor < 1) return std::nullopt;
    return (x / c10::SymInt(divisor)).sym_eq(c10::SymInt(0));
  };
  std::optional<c10::SymBool> guard;
  switch (c.op()) {
    case ExprOp::Le:
      guard = upper_bound(a, c.lhs(), b, false);
      break;
    case ExprOp::Lt:
      guard = upper_bound(a, c.lhs(), b, true);
      break;
    case ExprOp::Ge:
      guard = upper_bound(b, c.rhs(), a, false);
      break;
    case ExprOp::Gt:
      guard = upper_bound(b, c.rhs(), a, true);
      break;
    case KERNELOP_EXPR_LEAVES:
    case KERNELOP_EXPR_ARITHMETIC:
    case ExprOp::Eq:
    case ExprOp::Ne:
    case ExprOp::Select:
    case ExprOp::SameShape:
      break;
  }
  return guard ? *guard : sym_compare(a, c.op(), b);
}

// The (symbolic) sizes of a call's inputs, for the one shape evaluator (Note [one shape
// evaluator]).
struct MetaSizes {
  const Call& call;
  const at::Tensor& t(int slot) const { return call.tensors[static_cast<std::size_t>(slot)]; }
  std::int64_t rank(int slot) const { return t(slot).dim(); }
  c10::SymInt size(int slot, std::int64_t a) const { return t(slot).sym_size(a); }
  c10::SymInt numel(int slot) const { return t(slot).sym_numel(); }
  c10::SymInt scalar(int slot) const {
    auto s = static_cast<std::size_t>(slot);
    if (s < call.sym_ints.size() && call.plan.scalars[s].symint) return call.sym_ints[s];
    const ScalarArg& a = call.scalars[s];
    return c10::SymInt(a.kind == ScalarArg::Kind::Bool ? (a.b ? 1 : 0) : a.i);
  }
  c10::SymInt itemsize(int slot) const { return c10::SymInt(t(slot).element_size()); }
  c10::SymInt stride(int slot, std::int64_t a) const { return t(slot).sym_stride(a); }
  bool aligned(int /*slot*/, std::int64_t /*bytes*/) const {
    KERNELOP_FAIL(Internal) << "aligned() read on a meta tensor";  // requirements skip it
  }
  bool negative(const c10::SymInt& v) const { return v < 0; }
  std::string shape_text(int slot) const {
    std::ostringstream out;
    out << "[";
    for (std::int64_t d = 0; d < rank(slot); ++d) out << (d ? ", " : "") << size(slot, d);
    out << "]";
    return out.str();
  }
};

class MetaKernel final : public c10::OperatorKernel {
 public:
  explicit MetaKernel(Registration::State* state) : state_(state) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::optional<CallScope> scope;  // before anything of the state is read
    try {
      scope.emplace(*state_);
    } catch (const Error& e) {
      rethrow_as_torch(e);
    }
    for (bool retried = false;; retried = true) {
      if (attempt(stack, retried)) return;
    }
  }

 private:
  // As CudaKernel::attempt.
  bool attempt(torch::jit::Stack* stack, bool retried) {
    const KernelOp& op = state_->op();
    const OpPlan& p = op.plan();
    Call call(p, stack, false);
    const bool may_grow = !retried && state_->has_miss_handler.load();
    // Note [first-use growth]: a requirement the sizes break, decided (a guard) only where the
    // registration has a miss handler; true when the registration grew for them.
    // The handler gets the sizes the broken requirement reads (guarded: the class's requirement
    // pins them anyway), the other concrete sizes, and -1 for the other symbolic ones (never
    // guarded: a dynamic batch stays dynamic).
    auto grown = [&](const RequirementPlan& r, const c10::SymBool& holds, auto text_of) {
      if (!may_grow || holds.guard_or_true(__FILE__, __LINE__)) return false;
      const std::string text = text_of();
      std::vector<std::pair<int, std::int64_t>> read;
      bool reads_numel = false;
      r.condition.for_each_leaf([&](const Expr& leaf) {
        if (leaf.op() == ExprOp::Dim) read.emplace_back(leaf.slot(), leaf.node().value);
        reads_numel = reads_numel || leaf.op() == ExprOp::Numel;
      });
      std::vector<Shape> shapes;
      for (std::size_t i = 0; i < call.tensors.size(); ++i) {
        Shape shape;
        const auto sizes = call.tensors[i].sym_sizes();
        for (std::size_t a = 0; a < sizes.size(); ++a) {
          const auto rank = static_cast<std::int64_t>(sizes.size());
          const bool needed =
              reads_numel || std::any_of(read.begin(), read.end(), [&](const auto& d) {
                return d.first == static_cast<int>(i) &&
                       (d.second == static_cast<std::int64_t>(a) ||
                        d.second == static_cast<std::int64_t>(a) - rank);
              });
          std::optional<std::int64_t> v = sizes[a].maybe_as_int();
          shape.push_back(v ? *v : needed ? sizes[a].guard_int(__FILE__, __LINE__) : -1);
        }
        shapes.push_back(shape);
      }
      std::string note;
      if (ask_miss_handler(*state_, p, shapes, call.scalars, text, note)) return true;
      TORCH_CHECK(note.empty(), "op ", p.op_name, ": ", text, "; ", note);
      return false;
    };
    try {
      MetaSizes sizes{call};
      check_ranks(p, sizes, false);
      auto views = call.views();
      std::span<const TensorView> in(views.data(), views.size());
      // The same checks as a launch, as far as they need no sizes.
      op.check_arguments(in, std::span<const ScalarArg>(call.scalars.data(), call.scalars.size()));
      std::vector<DType> dtypes = op.output_dtypes(in);
      SizeEnv<c10::SymInt, MetaSizes> env{p, sizes};
      for (const RequirementPlan& r : p.requirements) {
        if (r.reads_pointers) continue;  // meta tensors have no data pointer: checked at launch
        // A guard (or, in export, a runtime assertion) when the sizes are symbolic.
        const Expr& c = r.condition;
        if (is_comparison(c.op())) {
          c10::SymInt a = env.eval_requirement(c.lhs(), r.text);
          c10::SymInt b = env.eval_requirement(c.rhs(), r.text);
          c10::SymBool holds = comparison_guard(c, a, b);
          if (grown(r, holds, [&] { return broken_requirement_text(r, &a, &b); })) return false;
          TORCH_SYM_CHECK(holds, "op ", p.op_name, ": ", broken_requirement_text(r, &a, &b));
        } else if (c.op() == ExprOp::SameShape) {
          // The ranks, then one check per axis: the guards (or export's runtime assertions) that
          // dim(a, i) == dim(b, i) would make, for whatever rank the call has.
          const at::Tensor& ta = sizes.t(c.lhs().slot());
          const at::Tensor& tb = sizes.t(c.rhs().slot());
          auto shapes = [&] {
            std::ostringstream s;
            s << broken_requirement_text<c10::SymInt>(r, nullptr, nullptr) << ": " << c.lhs().name()
              << " has shape " << ta.sym_sizes() << ", " << c.rhs().name() << " " << tb.sym_sizes();
            return s.str();
          };
          TORCH_CHECK(ta.dim() == tb.dim(), "op ", p.op_name, ": ", shapes());
          for (std::int64_t d = 0; d < ta.dim(); ++d) {
            TORCH_SYM_CHECK(ta.sym_size(d).sym_eq(tb.sym_size(d)), "op ", p.op_name, ": ",
                            shapes());
          }
        } else {
          c10::SymBool holds = env.eval_requirement(c, r.text).sym_ne(0);
          auto text = [&] { return broken_requirement_text<c10::SymInt>(r, nullptr, nullptr); };
          if (grown(r, holds, text)) return false;
          TORCH_SYM_CHECK(holds, "op ", p.op_name, ": ", text());
        }
      }
      c10::SmallVector<at::Tensor, 4> outputs;
      for (std::size_t o = 0; o < p.num_results(); ++o) {  // scratch is the launch's own
        const OutputPlan& out = p.outputs[o];
        std::vector<c10::SymInt> dims;
        output_dims<c10::SymInt>(p, out, sizes, dims);
        const auto options = at::TensorOptions().dtype(to_torch(dtypes[o])).device(c10::kMeta);
        if (!out.permute.empty()) {  // Note [returned views]
          c10::SmallVector<c10::SymInt, 8> view_sizes, view_strides;
          returned_view<c10::SymInt>(out.permute,
                                     std::span<const c10::SymInt>(dims.data(), dims.size()),
                                     view_sizes, view_strides);
          outputs.push_back(at::empty_strided_symint(view_sizes, view_strides, options));
        } else {
          outputs.push_back(at::empty_symint(dims, options));
        }
      }
      push_outputs(stack, p.input_order.size(), outputs);
      return true;
    } catch (const Error& e) {
      rethrow_as_torch(e);
    }
  }

  Registration::State* state_;
};

// Inputs on the CPU get a message that says what to do, not "could not run on the CPU backend".
class CpuKernel final : public c10::OperatorKernel {
 public:
  explicit CpuKernel(const Registration::State* state) : op_name_(state->op().plan().op_name) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*) {
    TORCH_CHECK(
        false, "op ", op_name_,
        ": got CPU tensors; kernelop ops run on CUDA tensors (move the inputs with .cuda())");
  }

 private:
  std::string op_name_;  // its own copy: nothing of the registration is read on this path
};

}  // namespace

torch::CppFunction make_cuda_kernel(Registration::State* state) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<CudaKernel>(state));
}
torch::CppFunction make_meta_kernel(Registration::State* state) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<MetaKernel>(state));
}
torch::CppFunction make_cpu_kernel(Registration::State* state) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<CpuKernel>(state));
}

}  // namespace impl
}  // namespace kernelop::torch_ops
