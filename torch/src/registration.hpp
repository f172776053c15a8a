// Private to the PyTorch adapter: a registration's state, the dtype table, error mapping, and
// the dispatcher kernels (kernels.cpp) that torch_ops.cpp registers.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string>

#include "kernelop/torch.hpp"

namespace kernelop::torch_ops {

struct Registration::State {
  KernelOp op;
  std::string schema;       // qualified
  std::string fingerprint;  // schema + spec + options: what "identical" means
  std::unique_ptr<torch::Library> library;
  std::shared_ptr<void> owned;  // Registration::keep_alive; guarded by the registry's mutex
  std::string backward_op;      // the op computing this one's gradients, if any
  std::uint64_t id = 0;         // registration_id()
};

namespace impl {

c10::ScalarType to_torch(DType d);
/// Re-raises a kernelop::Error as the matching torch error (TypeError, ValueError, RuntimeError).
[[noreturn]] void rethrow_as_torch(const Error& e);

/// The boxed kernels of one registration, for the CUDA, Meta and CPU keys.
torch::CppFunction make_cuda_kernel(const Registration::State* state);
torch::CppFunction make_meta_kernel(const Registration::State* state);
torch::CppFunction make_cpu_kernel(const Registration::State* state);
/// The Autograd kernel of `forward`, whose backward is the registered op of plan `backward`
/// (autograd.cpp).
torch::CppFunction make_autograd_kernel(const OpPlan& forward, const OpPlan& backward);
/// The Autograd kernel of a backward op that has no backward of its own (autograd.cpp).
torch::CppFunction make_once_differentiable_kernel(const OpPlan& backward,
                                                   const std::string& forward);

}  // namespace impl
}  // namespace kernelop::torch_ops
