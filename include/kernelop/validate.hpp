// Validation of a kernel spec, before anything is derived, compiled or registered.
#pragma once

#include "kernelop/spec.hpp"

namespace kernelop {

/// What the caller supplies itself, which makes the matching spec fields optional (the
/// override path of cuda_kernel_op): meta_fn -> outputs, eager_fn -> geometry, both -> inputs.
struct ValidateOptions {
  bool has_meta_fn = false;
  bool has_eager_fn = false;
  /// With meta_fn and no spec outputs: how many tensors the op returns (from its schema). They
  /// become outputs out0, out1, ... whose shapes and dtypes the meta function gives at run time,
  /// so the derived launch still works.
  int meta_outputs = 0;
  /// The spec is one of an op's launches (launch_decl, Note [several launches]): its host reads
  /// of the op's outputs and scratch are checked with the op's, against what runs before it.
  bool launch_of_op = false;
};

/// Throws Error(Spec) (or Error(Type) for a wrongly typed reference) whose message names the op,
/// the field path, what was expected and what was found, e.g.
/// `op ns::relu: outputs[0].shape.input: 'q' is not a tensor input (tensor inputs: x)`.
void validate(const OpDecl& decl, const ValidateOptions& options = {});

/// True for "namespace::name" with identifier parts.
bool is_valid_op_name(std::string_view op_name);

/// True for names that may not be used for inputs, outputs or type parameters: C++, CUDA and
/// Python keywords, PyTorch schema type names, and names reserved to kernelop ("__kop...").
bool is_reserved_name(std::string_view name);

}  // namespace kernelop
