// Private to the PyTorch adapter: a registration's state, the dtype table, error mapping, and
// the dispatcher kernels (kernels.cpp) that torch_ops.cpp registers.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "kernelop/torch.hpp"

namespace kernelop::torch_ops {

// Note [registration lifetime]: a registration's kernels, the fast Python entry and saved
// backward nodes enter a call through a CallScope (calls_ counts them). unregister_op() marks the
// state retired, so that later calls fail with a clean error, waits until the calls in flight
// have left, and only then removes the kernels from the dispatcher. The state itself is shared:
// a backward node or a Python entry keeps the state it was made for, never a successor of the
// same name. Every Python call of a kernelop op goes through its fast entry, which holds a scope
// around the whole dispatcher call (PyTorch's entry included), so the dispatcher's own lookup is
// covered too; a C++ caller that calls through a dispatcher handle while another thread may
// unregister the op holds a CallScope of its Registration around the call (PyTorch's dispatcher
// itself does not support deregistration concurrent with calls).
//
// PyTorch's own Python entry (a torch.ops packet that PyTorch made outside kernelop's: a lookup
// racing with the registration on another thread, since torch.ops caches without a lock) holds
// no scope. It reads the op's schema holding the GIL (matching the arguments), then calls the
// dispatcher without it. The Python extension therefore frees schema and kernels holding the GIL
// (set_removal_guard): such a call reads either the whole schema or PyTorch's "Tried to access
// the schema" error, never freed memory. What remains is PyTorch's: a call of such a packet
// already inside the dispatcher (GIL released, before it reaches a kernelop kernel) when the
// kernels are removed reads a dispatch table being rewritten; only a lookup racing with a
// registration makes such a packet, and kernelop's entry replaces it at the next lookup.
struct Registration::State {
  State(KernelOp o, std::string print) : fingerprint(std::move(print)) {
    generations.push_back(std::move(o));
    first = &generations.back();
    current.store(first);
  }
  /// The op calls use now (Note [first-use growth]).
  const KernelOp& op() const { return *current.load(std::memory_order_acquire); }
  // Note [first-use growth]: every op this registration had, the first one first (a deque: the
  // addresses stay), kept to the end since calls in flight, saved graph nodes and plans handed
  // out read them; `current` is the newest. Grown and read under `grow_mutex`, except `current`.
  std::deque<KernelOp> generations;
  const KernelOp* first = nullptr;  // the op it was registered with
  std::atomic<const KernelOp*> current{nullptr};
  std::mutex grow_mutex;
  MissHandler on_miss;  // set once (Registration::on_miss)
  std::atomic<bool> has_miss_handler{false};
  std::string schema;                          // qualified
  std::string fingerprint;                     // schema + spec + options: what "identical" means
  std::unique_ptr<torch::Library> library;     // the kernels
  std::unique_ptr<torch::Library> definition;  // the schema: made last, removed first
  std::shared_ptr<void> owned;         // Registration::keep_alive; guarded by the registry's mutex
  std::string backward_op;             // the op computing this one's gradients, if any
  std::uint64_t id = 0;                // registration_id()
  std::atomic<std::int64_t> calls{0};  // CallScopes alive
  std::atomic<bool> retired{false};    // unregistered: no new call enters
};

namespace impl {

c10::ScalarType to_torch(DType d);
/// Re-raises a kernelop::Error as the matching torch error (TypeError, ValueError, RuntimeError).
[[noreturn]] void rethrow_as_torch(const Error& e);

/// The boxed kernels of one registration, for the CUDA, Meta and CPU keys.
torch::CppFunction make_cuda_kernel(Registration::State* state);
torch::CppFunction make_meta_kernel(Registration::State* state);
torch::CppFunction make_cpu_kernel(Registration::State* state);
/// The Autograd kernel of `forward` (registration `state`), whose backward is the registered op
/// `backward` (autograd.cpp); its graph nodes keep that registration.
torch::CppFunction make_autograd_kernel(Registration::State* state, const OpPlan& forward,
                                        std::shared_ptr<Registration::State> backward);
/// The Autograd kernel of a backward op that has no backward of its own (autograd.cpp).
torch::CppFunction make_once_differentiable_kernel(Registration::State* state,
                                                   const OpPlan& backward,
                                                   const std::string& forward);
/// Note [written inputs with a backward] (autograd.cpp): whether `p` writes inputs; the Autograd
/// kernel of such an op without a backward; its ADInplaceOrView kernel (version bumps).
bool writes_inputs(const OpPlan& p);
torch::CppFunction make_written_without_backward_kernel(Registration::State* state,
                                                        const OpPlan& p);
torch::CppFunction make_written_versions_kernel(Registration::State* state, const OpPlan& p);

}  // namespace impl
}  // namespace kernelop::torch_ops
