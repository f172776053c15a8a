// Note [launch checks]: every check a launch makes of its arguments against the plan, written
// once: argument counts and kinds, dtypes (the instantiation the inputs select), scalar ranges,
// ranks, the op's requirements (with the message of a broken one), output dtypes and shapes, the
// device index, and the memory a written input shares. KernelOp::launch, output_shapes,
// check_arguments (the Meta kernel's) and the tuner all call these.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "kernelop/plan.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/shape_eval.hpp"
#include "runtime/launch_args.hpp"

namespace kernelop::detail {

/// An error about this op: "op NAME: ..." (Note [raising errors]).
ErrorStream op_error(const OpPlan& plan, ErrorKind kind, const char* separator = ": ");

/// Refuses a launch() of an op whose eager_fn launches it (no inputs or no geometry declared).
void require_declared_launch(const OpPlan& plan);

/// Refuses a device index outside 0..kMaxDevices-1.
void check_device_index(const OpPlan& plan, int device);

/// The dtype an instance binds a declaration to (nullopt: unknown, anything goes).
std::optional<DType> bound_dtype(const OpPlan& plan, int instance,
                                 const std::optional<DTypeDecl>& decl);

/// The instantiation the inputs' dtypes select; throws Error(Type) in the user's terms when none.
int select_instance(const OpPlan& plan, std::span<const TensorView> inputs);

/// The checks that need no sizes (KernelOp::check_arguments); fills the frame's instance and
/// scalars.
void check_arguments(const OpPlan& plan, std::span<const TensorView> inputs,
                     std::span<const ScalarArg> scalars, Frame& f);

/// Checks inputs and scalars and fills the frame with every tensor's shape. Outputs shaped by
/// the meta function take theirs from `outputs` (absent: output_shapes() cannot answer).
void prepare(const OpPlan& plan, std::span<const TensorView> inputs,
             std::span<const ScalarArg> scalars, Frame& f,
             std::span<const TensorView> outputs = {});

/// The output's dtype for these inputs; nullopt: an output of the meta function whose dtype the
/// kernel's signature leaves open.
std::optional<DType> output_dtype(const OpPlan& plan, const OutputPlan& out, int instance,
                                  std::span<const TensorView> inputs);

/// The launch's tensors: one device, contiguous where the kernel needs it, written inputs that
/// neither overlap themselves nor share memory with another tensor, outputs of the frame's dtype
/// and shape. Records the outputs' views in the frame. Returns the device and whether any
/// element is written.
struct CheckedTensors {
  int device = -1;
  bool work = false;
};
CheckedTensors check_tensors(const OpPlan& plan, std::span<const TensorView> inputs,
                             std::span<const TensorView> outputs, Frame& f);

}  // namespace kernelop::detail
