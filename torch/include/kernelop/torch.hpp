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

#include <memory>
#include <string>

#include "kernelop/runtime.hpp"

namespace kernelop::torch_ops {

/// A registered op (kept alive by the registry; copies share it).
class Registration {
 public:
  const OpPlan& plan() const;
  const KernelOp& op() const;
  /// "ns::name(Tensor x) -> Tensor"
  const std::string& schema() const;

  struct State;
  explicit Registration(std::shared_ptr<const State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<const State> state_;
};

/// Registers `op` as torch.ops.<ns>.<name> (see Note [torch registration]).
Registration register_op(KernelOp op);

/// True when an op of this name was registered through kernelop in this process.
bool is_registered(const std::string& op_name);

}  // namespace kernelop::torch_ops
