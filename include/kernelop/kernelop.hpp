// The umbrella header: every stage, plus the one-call path from a spec to a launchable op.
#pragma once

#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/device.hpp"
#include "kernelop/dtype.hpp"
#include "kernelop/error.hpp"
#include "kernelop/expr.hpp"
#include "kernelop/image.hpp"
#include "kernelop/package.hpp"
#include "kernelop/plan.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/spec.hpp"
#include "kernelop/spec_json.hpp"
#include "kernelop/tensor.hpp"
#include "kernelop/tuning.hpp"
#include "kernelop/validate.hpp"

namespace kernelop {

/// Validates, derives, compiles (through the cache) and wraps a spec as a launchable op.
/// Needs kernelop::kernelop (compile + runtime); a deployment that only loads packages links
/// kernelop::runtime and uses KernelOp::from_package instead.
inline KernelOp compile_op(const OpDecl& decl, const CompileOptions& compile_options = {},
                           LoadOptions load_options = {}) {
  return KernelOp(compile(derive_plan(decl), compile_options), std::move(load_options));
}

/// compile_op(load_op_file(path), ...)
inline KernelOp compile_op(const std::filesystem::path& spec_file,
                           const CompileOptions& compile_options = {},
                           LoadOptions load_options = {}) {
  return compile_op(load_op_file(spec_file), compile_options, std::move(load_options));
}

}  // namespace kernelop
