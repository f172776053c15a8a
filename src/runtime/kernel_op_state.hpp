// KernelOp's private state, shared by kernel_op.cpp (checks, shapes, launch) and
// launch_raw.cpp (the caller-geometry launch and the final cuLaunchKernel).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "core/words.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/shape_eval.hpp"
#include "runtime/device_module.hpp"
#include "runtime/launch_args.hpp"
#include "runtime/tactics.hpp"

namespace kernelop {

// The runtime's own names for its private helpers (this header is included only by its files).
using detail::check_cuda;
using detail::DeviceModule;
using detail::Driver;
using detail::Frame;
using detail::FrameEnv;
using detail::FrameSizes;
using detail::PackedArgs;
using detail::scalar_kind_name;
// Per tensor slot: the data pointer a launch passes (the caller's, or a tuning run's scratch).
using TensorPtrs = std::array<const void*, kMaxKernelArgs>;

struct KernelOp::State {
  CompiledImage image;
  LoadOptions options;
  std::mutex load_mutex;
  std::array<std::atomic<DeviceModule*>, kMaxDevices> devices{};
  std::vector<std::unique_ptr<DeviceModule>> owned;
  bool dynamic_shared = false;  // the geometry's shared memory is not the constant 0
  bool reads_arch = false;      // an expression reads arch(): the device must be known first
  std::unique_ptr<detail::TacticState> tactics = std::make_unique<detail::TacticState>();

  const OpPlan& plan() const { return image.plan; }
  const OutputPlan& output_of(int slot) const {
    return plan().outputs[static_cast<std::size_t>(slot - plan().num_tensor_inputs)];
  }
  void require_declared_launch() const {
    if (plan().args_from_kernel) {
      KERNELOP_RAISE(error(ErrorKind::Spec, " "))
          << "declares no inputs; its eager_fn launches it (launch_raw)";
    }
    if (!plan().geometry) {
      KERNELOP_RAISE(error(ErrorKind::Spec, " "))
          << "has no launch geometry; its eager_fn launches it (launch_raw)";
    }
  }
  // An error about this op: "op NAME: ..." (Note [raising errors]).
  detail::ErrorStream error(ErrorKind kind, const char* separator = ": ") const {
    detail::ErrorStream e(kind);
    e << "op " << plan().op_name << separator;
    return e;
  }

  // The dtype an instance binds a declaration to (nullopt: unknown, anything goes).
  std::optional<DType> bound(int instance, const std::optional<DTypeDecl>& decl) const {
    if (!decl) return std::nullopt;
    if (const auto* d = std::get_if<DType>(&*decl)) return *d;
    const auto& name = std::get<std::string>(*decl);
    for (std::size_t p = 0; p < plan().type_params.size(); ++p) {
      if (plan().type_params[p].name == name) {
        return plan().instances[static_cast<std::size_t>(instance)].bindings[p];
      }
    }
    return std::nullopt;
  }

  int select_instance(std::span<const TensorView> inputs) const {
    const OpPlan& p = plan();
    if (p.type_params.empty()) return 0;
    for (std::size_t inst = 0; inst < p.instances.size(); ++inst) {
      bool match = true;
      for (int i = 0; i < p.num_tensor_inputs && match; ++i) {
        auto want = bound(static_cast<int>(inst), p.tensors[static_cast<std::size_t>(i)].dtype);
        match = !want || *want == inputs[static_cast<std::size_t>(i)].dtype;
      }
      if (match) return static_cast<int>(inst);
    }
    fail_no_instance(inputs);
  }

  // In the user's terms: the first input whose dtype no instantiation left open accepts, the
  // dtypes it could have, and which earlier input fixed its type parameter.
  [[noreturn]] void fail_no_instance(std::span<const TensorView> inputs) const {
    const OpPlan& p = plan();
    std::vector<int> open(p.instances.size());
    for (std::size_t k = 0; k < open.size(); ++k) open[k] = static_cast<int>(k);
    for (int i = 0; i < p.num_tensor_inputs; ++i) {
      const TensorSlot& t = p.tensors[static_cast<std::size_t>(i)];
      DType got = inputs[static_cast<std::size_t>(i)].dtype;
      std::vector<DType> allowed;
      std::vector<int> next;
      for (int inst : open) {
        auto want = bound(inst, t.dtype);
        if (!want || *want == got) next.push_back(inst);
        if (want && std::find(allowed.begin(), allowed.end(), *want) == allowed.end())
          allowed.push_back(*want);
      }
      if (!next.empty()) {
        open = std::move(next);
        continue;
      }
      detail::ErrorStream e = error(ErrorKind::Type);
      e << "input '" << t.name << "' must be " << detail::join(allowed, dtype_name);
      const auto* param = t.dtype ? std::get_if<std::string>(&*t.dtype) : nullptr;
      for (int j = 0; param && j < i; ++j) {
        const auto& earlier = p.tensors[static_cast<std::size_t>(j)].dtype;
        if (earlier && *earlier == *t.dtype) {
          e << " (" << *param << " = " << dtype_name(inputs[static_cast<std::size_t>(j)].dtype)
            << ", from input '" << p.tensors[static_cast<std::size_t>(j)].name << "')";
          break;
        }
      }
      e << ", got " << dtype_name(got);
      KERNELOP_RAISE(e);
    }
    KERNELOP_FAIL(Internal) << "op " << p.op_name
                            << ": no instantiation matched, yet every input did";
  }

  std::string param_text(int slot) const {
    for (std::size_t i = 0; i < plan().args.size(); ++i) {
      const ArgSlot& a = plan().args[i];
      if (a.is_pointer() && a.index == slot) {
        return "kernel parameter " + std::to_string(i) + " is " + plan().c_type(a);
      }
    }
    return "";
  }

  // The checks that need no sizes (KernelOp::check_arguments); fills the frame's instance and
  // scalars.
  void check_arguments(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                       Frame& f) const {
    const OpPlan& p = plan();
    if (p.args_from_kernel) {
      KERNELOP_RAISE(error(ErrorKind::Spec, " "))
          << "declares no inputs; its meta_fn gives the output shapes";
    }
    auto n_in = static_cast<std::size_t>(p.num_tensor_inputs);
    if (inputs.size() != n_in) {
      std::string names;
      for (std::size_t i = 0; i < n_in; ++i) names += (i ? ", " : "") + p.tensors[i].name;
      KERNELOP_RAISE(error(ErrorKind::Type))
          << "expected " << n_in << " tensor input(s) (" << names << "), got " << inputs.size();
    }
    if (scalars.size() != p.scalars.size()) {
      std::string names;
      for (std::size_t i = 0; i < p.scalars.size(); ++i)
        names += (i ? ", " : "") + p.scalars[i].name;
      KERNELOP_RAISE(error(ErrorKind::Type))
          << "expected " << p.scalars.size() << " scalar input(s) (" << names << "), got "
          << scalars.size();
    }
    f.instance = select_instance(inputs);
    for (std::size_t i = 0; i < n_in; ++i) {
      const TensorSlot& t = p.tensors[i];
      auto want = bound(f.instance, t.dtype);
      if (want && *want != inputs[i].dtype) {
        KERNELOP_RAISE(error(ErrorKind::Type))
            << "input '" << t.name << "' must be " << dtype_name(*want) << " ("
            << param_text(static_cast<int>(i)) << "), got " << dtype_name(inputs[i].dtype);
      }
    }
    for (std::size_t i = 0; i < p.scalars.size(); ++i) {
      const ScalarSlot& s = p.scalars[i];
      const ScalarArg& a = scalars[i];
      switch (s.type) {
        case ScalarType::Float:
        case ScalarType::Float64:
          if (a.kind == ScalarArg::Kind::Bool) {
            KERNELOP_RAISE(error(ErrorKind::Type))
                << "scalar '" << s.name << "' must be a float, got bool";
          }
          break;
        case ScalarType::Int:
        case ScalarType::Int64:
          if (a.kind != ScalarArg::Kind::Int) {
            KERNELOP_RAISE(error(ErrorKind::Type))
                << "scalar '" << s.name << "' must be an int, got " << scalar_kind_name(a.kind);
          }
          if (s.type == ScalarType::Int) {
            detail::check_int32(
                p.op_name, a.i, [&] { return "scalar '" + s.name + "'"; },
                "; declare it int64 and take a long long");
          }
          f.ints[i] = a.i;
          break;
        case ScalarType::Bool:
          if (a.kind != ScalarArg::Kind::Bool) {
            KERNELOP_RAISE(error(ErrorKind::Type))
                << "scalar '" << s.name << "' must be a bool, got " << scalar_kind_name(a.kind);
          }
          f.ints[i] = a.b ? 1 : 0;
          break;
      }
    }
  }

  // Checks inputs and scalars and fills the frame with every tensor's shape. Outputs shaped by
  // the meta function take theirs from `outputs` (absent: output_shapes() cannot answer).
  void prepare(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars, Frame& f,
               std::span<const TensorView> outputs = {}) const {
    const OpPlan& p = plan();
    check_arguments(inputs, scalars, f);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      f.shapes[i] = inputs[i].shape;
      f.views[i] = &inputs[i];
    }
    FrameSizes sizes{f};
    check_ranks(p, sizes, false);
    FrameEnv env{p, sizes};
    for (const RequirementPlan& r : p.requirements) {
      if (!requirement_holds(r, env)) fail_requirement(r, env, sizes);
    }
    for (const OutputPlan& out : p.outputs) {
      Shape& shape = f.shapes[static_cast<std::size_t>(out.slot)];
      if (out.shape.kind == ShapeRule::Kind::External) {
        auto o = static_cast<std::size_t>(out.slot - p.num_tensor_inputs);
        if (o < outputs.size()) {
          shape = outputs[o].shape;
          continue;
        }
      }
      Shape dims;
      output_dims<std::int64_t>(p, out, sizes, dims);
      shape = dims;
    }
    check_ranks(p, sizes, true);
  }

  bool requirement_holds(const RequirementPlan& r, const FrameEnv& env) const {
    return env.eval_requirement(r.condition, r.text) != 0;
  }

  // The message of a broken requirement, in its own terms: both sides of a comparison, the
  // pointer of an alignment. Built only when it fires.
  [[noreturn]] void fail_requirement(const RequirementPlan& r, const FrameEnv& env,
                                     const FrameSizes& sizes) const {
    detail::ErrorStream e = error(ErrorKind::Launch);
    e << "the inputs break the requirement '" << r.text << "'";
    const Expr& c = r.condition;
    if (is_comparison(c.op())) {
      e << ": " << env.eval(c.lhs()) << " " << comparison_text(c.op()) << " " << env.eval(c.rhs())
        << " is false";
    }
    c.for_each_leaf([&](const Expr& leaf) {
      if (leaf.op() != ExprOp::Aligned || sizes.aligned(leaf.slot(), leaf.node().value)) return;
      e << "; " << leaf.name() << "'s data pointer " << sizes.view(leaf.slot()).data << " is not "
        << leaf.node().value << "-byte aligned";
    });
    KERNELOP_RAISE(e);
  }

  // nullopt: an output of the meta function whose dtype the kernel's signature leaves open.
  std::optional<DType> output_dtype(const OutputPlan& out, int instance,
                                    std::span<const TensorView> inputs) const {
    if (out.dtype_from >= 0) return inputs[static_cast<std::size_t>(out.dtype_from)].dtype;
    auto d = bound(instance, plan().tensors[static_cast<std::size_t>(out.slot)].dtype);
    if (!d && out.shape.kind != ShapeRule::Kind::External) {
      KERNELOP_RAISE(error(ErrorKind::Launch))
          << "output '" << plan().tensors[static_cast<std::size_t>(out.slot)].name
          << "' has no known dtype";
    }
    return d;
  }

  const DeviceModule& module_for(int device) {
    if (device < 0 || device >= kMaxDevices) {
      KERNELOP_RAISE(error(ErrorKind::Launch))
          << "device " << device << " is out of range (0.." << kMaxDevices - 1 << ")";
    }
    auto& slot = devices[static_cast<std::size_t>(device)];
    if (DeviceModule* m = slot.load(std::memory_order_acquire)) return *m;
    std::lock_guard lock(load_mutex);
    if (DeviceModule* m = slot.load(std::memory_order_relaxed)) return *m;
    auto m = load_module(device);
    DeviceModule* raw = m.get();
    owned.push_back(std::move(m));
    slot.store(raw, std::memory_order_release);
    return *raw;
  }

  // Tactics (tactics.cpp). The config for this call: pinned, else the tuning table, else timed
  // now, else the first eligible config. Never one whose requires the inputs break.
  int choose_config(Frame& f, std::span<const TensorView> inputs,
                    std::span<const ScalarArg> scalars, std::span<const TensorView> outputs,
                    const TensorPtrs& ptrs, int device, void* stream);
  // Evaluates the geometry and arguments with `config`'s values and launches them.
  void launch_config(Frame& f, int config, const TensorPtrs& ptrs,
                     std::span<const ScalarArg> scalars, int device, void* stream);
  // Times every eligible config for `key` and records the fastest (tactics.cpp).
  int autotune(Frame& f, const detail::TuneKey& key, const std::vector<int>& eligible,
               std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
               std::span<const TensorView> outputs, const TensorPtrs& ptrs, int device,
               void* stream, detail::DeviceTuning& table);
  detail::DeviceTuning& device_tuning(int device);
  void persist(detail::DeviceTuning& table);

  // Loads the module on `device` if needed, checks the block against the kernel's limits and
  // launches the packed parameters.
  void launch_packed(int device, int instance, const std::array<std::int64_t, 3>& grid,
                     const std::array<std::int64_t, 3>& block, std::int64_t smem, void** params,
                     void* stream);

  std::unique_ptr<detail::DeviceModule> load_module(int device) {
    return detail::load_device_module(image, options, device, dynamic_shared);
  }
};

}  // namespace kernelop
