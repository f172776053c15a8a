// kernelop::jax: KernelOps as XLA FFI custom calls (Note [jax ffi target]). One generic target
// serves every op: the op is named by the call's attributes and found in this process's
// registry, filled by register_op (kernelop.jax.op in Python loads a package or a spec into it).
// Needs neither Python nor JAX to build beyond jaxlib's FFI headers (header-only C API).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/runtime.hpp"

namespace kernelop::jax {

/// The XLA FFI API version the handlers were built against ("0.3"): the oldest jaxlib whose
/// headers kernelop builds with is 0.10.2; later jaxlibs (0.11: API 0.4) load such handlers.
std::string_view ffi_api_version();

/// The FFI target names, versioned with the FFI API they were built against: the command-buffer
/// compatible target (no host synchronisation, no allocation: XLA may capture it in a CUDA graph)
/// and the one for ops that allocate or read values on the host.
std::string target_name(bool allocates);

/// An op as the FFI handlers launch it.
struct JaxOp {
  KernelOp op;
  std::string fingerprint;  ///< op_fingerprint(): what an exported call names besides the op
  /// Why the op is not command-buffer compatible ("" when it is): it allocates scratch memory
  /// per call, or reads a tensor's value on the host.
  std::string allocates;
};

/// Registers `image` (loaded with tuning off: a JAX op never times anything, Note [jax ffi
/// target]) under its op name; the same op again (same fingerprint) returns the one registered,
/// another op of that name is Error(Spec) naming both.
std::shared_ptr<const JaxOp> register_op(CompiledImage image);
/// The registered op of that name, or nullptr.
std::shared_ptr<const JaxOp> find_op(std::string_view name);

/// The FFI handlers (XLA_FFI_Handler*) and the state's type id (XLA_FFI_TypeId*), for
/// jax.ffi.register_ffi_target / register_ffi_type.
void* instantiate_handler();
void* execute_handler(bool allocates);
void* state_type_id();
void* state_type_info();  ///< XLA_FFI_TypeInfo*: how XLA deletes a state
std::string_view state_type_name();

}  // namespace kernelop::jax
