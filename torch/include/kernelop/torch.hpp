// The PyTorch adapter: one KernelOp becomes torch.ops.<ns>.<name>, registered from C++ into the
// dispatcher with a CUDA kernel (boxed; validates, allocates outputs through the caching
// allocator, launches on the current stream of the inputs' device) and a Meta kernel that
// computes output shapes with c10::SymInt, so dynamic shapes trace symbolically.
//
// Note [torch registration]: registrations live for the process in a registry keyed by op name.
// Registering an identical op again (same schema and plan) returns the existing registration; a
// different op under a registered name is an Error naming both schemas. A registration that fails
// part-way is undone before the error propagates: nothing is left half-registered.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "kernelop/runtime.hpp"

namespace kernelop::torch_ops {

class CallScope;

/// Note [first-use growth]: an op recorded from a DSL compiles the sizes it serves; a size
/// outside them breaks a requirement. A registration may have a miss handler that the CUDA and
/// Meta kernels call when a call breaks one of the op's requirements: the handler may compile
/// the op for that call (its Python recorder records the size class on first use) and grow the
/// registration (Registration::grow), after which the call is retried once with the new op.
/// Calls in flight keep the op they started with; every op a registration had lives as long as
/// it. The handler runs on the calling thread, inside the call, with no lock of kernelop's held.
struct Miss {
  const OpPlan& plan;                  // the op that refused the call
  std::span<const Shape> shapes;       // the tensor inputs' shapes, in declared order
  std::span<const ScalarArg> scalars;  // the scalars, in declared order
  const std::string& refusal;          // the broken requirement, as the call's error says it
};
struct MissOutcome {
  bool grown = false;  // the registration grew: retry the call
  std::string note;    // else, said after the refusal (why the call's size was not compiled)
};
using MissHandler = std::function<MissOutcome(const Miss&)>;

/// A registered op (kept alive by the registry; copies share it).
class Registration {
 public:
  const OpPlan& plan() const;
  const KernelOp& op() const;
  /// "ns::name(Tensor x) -> Tensor"
  const std::string& schema() const;
  /// True when the register_op() call that returned this handle made the registration; false
  /// when an identical one already existed (and this call changed nothing).
  bool created() const { return created_; }
  /// Ties `owner` (e.g. the caller's own kernels for the parts kernelop does not register) to
  /// the registration: released when the op is unregistered, or with the last handle.
  void keep_alive(std::shared_ptr<void> owner) const;
  /// The identity of this registration (registration_id() while it is the current one).
  std::uint64_t id() const;
  /// False once the op was unregistered (it may since have been registered again).
  bool current() const;
  /// True while this thread is inside a call of this registration (a CallScope of it).
  bool entered_here() const;
  /// Note [first-use growth]: sets the miss handler (one per registration; a second is an
  /// Error(Spec)).
  void on_miss(MissHandler handler) const;
  bool has_miss_handler() const;
  /// Note [first-use growth]: makes `op` the one calls use from now on. It must be the same op
  /// with more tactics: the same schema, inputs, outputs and backward (Error(Spec) otherwise,
  /// and nothing changes). The ops before it stay alive with the registration.
  void grow(KernelOp op) const;
  /// How many ops this registration has had (1 until it grows).
  std::size_t generations() const;

  struct State;
  friend class CallScope;
  Registration(std::shared_ptr<State> state, bool created)
      : state_(std::move(state)), created_(created) {}

 private:
  std::shared_ptr<State> state_;
  bool created_ = false;
};

/// A call of a registration in flight on this thread (Note [registration lifetime]):
/// unregister_op() waits until every scope of the registration has ended. Throws Error(Launch)
/// naming the op once the registration was unregistered, unless this thread is already inside a
/// call of it (that call finishes). Neither copied nor moved: it ends on the thread it began on.
class CallScope {
 public:
  explicit CallScope(const Registration& registration);
  explicit CallScope(Registration::State& state);
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  ~CallScope();

 private:
  Registration::State* state_;
};

/// What register_op() registers. The override path (cuda_kernel_op's meta_fn / eager_fn /
/// schema) registers the caller's functions itself and turns the matching parts off here.
struct RegisterOptions {
  /// The schema without the name, e.g. "(Tensor x, float alpha) -> Tensor"; empty: the plan's.
  /// When kernelop's own CUDA or Meta kernel is registered it must match the plan: the same
  /// number of arguments, a Tensor for each tensor input (mutable exactly where the input is
  /// mutated), float/int/bool for scalars, and one Tensor return per output. Names may differ.
  std::string schema;
  /// False: the caller registers the CUDA kernel (an eager_fn).
  bool cuda_kernel = true;
  /// False: the caller registers the fake (Meta) kernel (a meta_fn). Required for plans whose
  /// outputs the meta function shapes; kernelop's CUDA kernel then asks that Meta kernel for
  /// the output shapes and dtypes on every call.
  bool meta_kernel = true;
  /// What else, beyond the spec, schema and the options above, makes two registrations of one
  /// name the same: e.g. the identity of the caller's meta/eager functions and build options.
  /// A registration with an identical spec but another caller_key is refused.
  std::string caller_key;
  /// The op's backward (Note [backward]): the name of the kernelop-registered op that computes
  /// its gradients, registered first. Required exactly when the spec declares a backward, and
  /// it must be that backward's op; an Autograd kernel is then registered with the op.
  std::string backward_op;
  /// This op is the backward of the op named here (register_with_backward sets it): when it
  /// declares no backward itself, differentiating through it is an error that says so.
  std::string backward_of;
  bool operator==(const RegisterOptions&) const = default;
};

/// Registers `op` as torch.ops.<ns>.<name> (see Note [torch registration]).
Registration register_op(KernelOp op, const RegisterOptions& options = {});

/// Registers `op` with its backward chain (Note [backward chain]): `chain` holds op's backward,
/// that one's backward, ... (compile_backward's result, or a package's), each the backward the
/// link before derives and exactly as deep as the specs declare; each is registered first (the
/// deepest first), then `op` with its Autograd kernel. A failure unregisters what this call
/// registered.
Registration register_with_backward(KernelOp op, std::vector<KernelOp> chain,
                                    const RegisterOptions& options = {});

/// Removes a registration made through kernelop, with its schema and kernels, from the
/// dispatcher (the override path's rollback when registering the caller's functions fails).
/// Registration objects still held stay valid but the op is gone. No-op for unknown names.
/// Waits for the calls in flight (Note [registration lifetime]); later calls through kernelop's
/// kernels, the fast Python entry or a saved backward fail with an error naming the op.
/// Throws Error(Spec) for the backward of a registered op (unregister that op first) and when
/// called from inside a call of the op itself (it would wait for itself).
void unregister_op(const std::string& op_name);

/// Where PyTorch's own callers read what an unregistration frees without a lock of the
/// dispatcher's (PyTorch's Python entry reads an op's schema holding only the GIL), the embedding
/// layer serialises with them: unregister_op() frees an op's schema and kernels inside
/// `guard(body, context)`, which must call `body(context)` exactly once. kernelop's Python
/// extension installs one that holds the GIL (Note [registration lifetime]); none by default.
using RemovalGuard = void (*)(void (*body)(void*), void* context);
void set_removal_guard(RemovalGuard guard);

/// True when an op of this name was registered through kernelop in this process.
bool is_registered(const std::string& op_name);

/// The registration of `op_name` (its KernelOp launches the kernel: what an eager_fn uses);
/// throws Error(Spec) when kernelop registered no such op.
Registration find_registration(const std::string& op_name);

/// Changes with every registration this adapter makes and every unregistration: a dispatcher
/// handle of a kernelop op cached while it had one value (the Python fast entry's, Note [fast
/// Python entry]) is valid while it keeps it.
std::uint64_t registry_generation();

/// The identity of the current registration of `op_name` (unique in the process; a name
/// registered again gets a new one), 0 when kernelop registered no op of that name.
std::uint64_t registration_id(const std::string& op_name);

/// The current CUDA stream of `device` in PyTorch (a CUstream).
void* current_stream(int device);

}  // namespace kernelop::torch_ops
