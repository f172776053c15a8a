// KernelOp: argument checks, output shapes and the launch (the per-device module is in
// device_module.cpp, the argument helpers both launch paths share in launch_args.cpp).
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/words.hpp"
#include "kernelop/launch_limits.hpp"
#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/shape_eval.hpp"
#include "runtime/device_module.hpp"
#include "runtime/driver.hpp"
#include "runtime/launch_args.hpp"

namespace kernelop {
namespace {

using detail::check_cuda;
using detail::Driver;

using detail::DeviceModule;
using detail::Frame;
using detail::FrameEnv;
using detail::FrameSizes;
using detail::PackedArgs;
using detail::scalar_kind_name;

}  // namespace

struct KernelOp::State {
  CompiledImage image;
  LoadOptions options;
  std::mutex load_mutex;
  std::array<std::atomic<DeviceModule*>, kMaxDevices> devices{};
  std::vector<std::unique_ptr<DeviceModule>> owned;
  bool dynamic_shared = false;  // the geometry's shared memory is not the constant 0

  const OpPlan& plan() const { return image.plan; }
  const OutputPlan& output_of(int slot) const {
    return plan().outputs[static_cast<std::size_t>(slot - plan().num_tensor_inputs)];
  }
  void require_declared_launch() const {
    if (plan().args_from_kernel) {
      fail_spec("declares no inputs; its eager_fn launches it (launch_raw)");
    }
    if (!plan().geometry)
      fail_spec("has no launch geometry; its eager_fn launches it (launch_raw)");
  }
  [[noreturn]] void fail_spec(const std::string& what) const {
    KERNELOP_FAIL(Spec) << "op " << plan().op_name << " " << what;
  }

  [[noreturn]] void fail_type(const std::string& what) const {
    KERNELOP_FAIL(Type) << "op " << plan().op_name << ": " << what;
  }
  [[noreturn]] void fail(const std::string& what) const {
    KERNELOP_FAIL(Launch) << "op " << plan().op_name << ": " << what;
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
    std::ostringstream msg;
    msg << "no instantiation of " << p.spec.kernel_name << " takes (";
    for (int i = 0; i < p.num_tensor_inputs; ++i) {
      msg << (i ? ", " : "") << p.tensors[static_cast<std::size_t>(i)].name << ": "
          << dtype_name(inputs[static_cast<std::size_t>(i)].dtype);
    }
    msg << "); instantiated for";
    for (const auto& tp : p.type_params) {
      std::vector<DType> d = tp.dtypes;
      msg << " " << tp.name << " in {" << detail::join(d, dtype_name) << "}";
    }
    fail_type(msg.str());
  }

  std::string param_text(int slot) const {
    for (std::size_t i = 0; i < plan().args.size(); ++i) {
      const ArgSlot& a = plan().args[i];
      if (a.is_pointer() && a.index == slot) {
        return "kernel parameter " + std::to_string(i) + " is " + a.c_type();
      }
    }
    return "";
  }

  // The checks that need no sizes (KernelOp::check_arguments); fills the frame's instance and
  // scalars.
  void check_arguments(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                       Frame& f) const {
    const OpPlan& p = plan();
    if (p.args_from_kernel) fail_spec("declares no inputs; its meta_fn gives the output shapes");
    auto n_in = static_cast<std::size_t>(p.num_tensor_inputs);
    if (inputs.size() != n_in) {
      std::string names;
      for (std::size_t i = 0; i < n_in; ++i) names += (i ? ", " : "") + p.tensors[i].name;
      fail_type("expected " + std::to_string(n_in) + " tensor input(s) (" + names + "), got " +
                std::to_string(inputs.size()));
    }
    if (scalars.size() != p.scalars.size()) {
      std::string names;
      for (std::size_t i = 0; i < p.scalars.size(); ++i)
        names += (i ? ", " : "") + p.scalars[i].name;
      fail_type("expected " + std::to_string(p.scalars.size()) + " scalar input(s) (" + names +
                "), got " + std::to_string(scalars.size()));
    }
    f.instance = select_instance(inputs);
    for (std::size_t i = 0; i < n_in; ++i) {
      const TensorSlot& t = p.tensors[i];
      auto want = bound(f.instance, t.dtype);
      if (want && *want != inputs[i].dtype) {
        fail_type("input '" + t.name + "' must be " + std::string(dtype_name(*want)) + " (" +
                  param_text(static_cast<int>(i)) + "), got " +
                  std::string(dtype_name(inputs[i].dtype)));
      }
    }
    for (std::size_t i = 0; i < p.scalars.size(); ++i) {
      const ScalarSlot& s = p.scalars[i];
      const ScalarArg& a = scalars[i];
      switch (s.type) {
        case ScalarType::Float:
        case ScalarType::Float64:
          if (a.kind == ScalarArg::Kind::Bool) {
            fail_type("scalar '" + s.name + "' must be a float, got bool");
          }
          break;
        case ScalarType::Int:
        case ScalarType::Int64:
          if (a.kind != ScalarArg::Kind::Int) {
            fail_type("scalar '" + s.name + "' must be an int, got " + scalar_kind_name(a.kind));
          }
          if (s.type == ScalarType::Int) {
            detail::check_int32(p.op_name, "scalar '" + s.name + "'", a.i,
                                "; declare it int64 and take a long long");
          }
          f.ints[i] = a.i;
          break;
        case ScalarType::Bool:
          if (a.kind != ScalarArg::Kind::Bool) {
            fail_type("scalar '" + s.name + "' must be a bool, got " + scalar_kind_name(a.kind));
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
    for (std::size_t i = 0; i < inputs.size(); ++i) f.shapes[i] = inputs[i].shape;
    FrameSizes sizes{f};
    check_ranks(p, sizes, false);
    FrameEnv env{p, sizes};
    for (const RequirementPlan& r : p.requirements) {
      std::int64_t a = env.eval(r.lhs), b = env.eval(r.rhs);
      if (!compare_holds(r.op, a, b)) {
        fail("the inputs break the requirement '" + r.text + "': " + std::to_string(a) + " " +
             std::string(compare_text(r.op)) + " " + std::to_string(b) + " is false");
      }
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

  // nullopt: an output of the meta function whose dtype the kernel's signature leaves open.
  std::optional<DType> output_dtype(const OutputPlan& out, int instance,
                                    std::span<const TensorView> inputs) const {
    if (out.dtype_from >= 0) return inputs[static_cast<std::size_t>(out.dtype_from)].dtype;
    auto d = bound(instance, out.dtype);
    if (!d && out.shape.kind != ShapeRule::Kind::External) {
      fail("output '" + plan().tensors[static_cast<std::size_t>(out.slot)].name +
           "' has no known dtype");
    }
    return d;
  }

  const DeviceModule& module_for(int device) {
    if (device < 0 || device >= kMaxDevices) {
      fail("device " + std::to_string(device) + " is out of range (0.." +
           std::to_string(kMaxDevices - 1) + ")");
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

  // Loads the module on `device` if needed, checks the block against the kernel's limits and
  // launches the packed parameters.
  void launch_packed(int device, int instance, const std::array<std::int64_t, 3>& grid,
                     const std::array<std::int64_t, 3>& block, std::int64_t smem, void** params,
                     void* stream);

  std::unique_ptr<detail::DeviceModule> load_module(int device) {
    return detail::load_device_module(image, options, device, dynamic_shared);
  }
};

KernelOp::KernelOp(CompiledImage image, LoadOptions options) : state_(std::make_unique<State>()) {
  state_->image = std::move(image);
  state_->options = options;
  const OpPlan& p = state_->plan();
  if (p.args.size() > static_cast<std::size_t>(kMaxKernelArgs) ||
      p.tensors.size() > static_cast<std::size_t>(kMaxKernelArgs)) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": " << p.args.size()
                        << " kernel parameters; kernelop passes at most " << kMaxKernelArgs;
  }
  if (state_->image.lowered_names.size() != p.instances.size()) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": the image has "
                        << state_->image.lowered_names.size() << " kernel symbol(s) for "
                        << p.instances.size() << " instantiation(s)";
  }
  for (const ArgSlot& a : p.args) {
    bool open_dtype =
        p.args_from_kernel || (a.kind == ArgSlot::Kind::Output &&
                               state_->output_of(a.index).shape.kind == ShapeRule::Kind::External);
    if (a.is_pointer() && !a.element && !open_dtype) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": the dtype of '" << a.name
                          << "' is unknown; compile the op (which infers it) or declare it";
    }
  }
  // Raw launches (no geometry) choose their shared memory per call.
  state_->dynamic_shared = !p.geometry || !(p.geometry->shared_mem.is_const() &&
                                            p.geometry->shared_mem.const_value() == 0);
}

KernelOp KernelOp::from_package(const std::filesystem::path& path, LoadOptions options) {
  return KernelOp(read_package(path), options);
}

KernelOp::KernelOp(KernelOp&&) noexcept = default;
KernelOp& KernelOp::operator=(KernelOp&&) noexcept = default;
KernelOp::~KernelOp() = default;

const OpPlan& KernelOp::plan() const {
  return state_->plan();
}
const CompiledImage& KernelOp::image() const {
  return state_->image;
}

std::vector<Shape> KernelOp::output_shapes(std::span<const TensorView> inputs,
                                           std::span<const ScalarArg> scalars) const {
  auto f = std::make_unique<Frame>();
  state_->prepare(inputs, scalars, *f);
  std::vector<Shape> out;
  for (const OutputPlan& o : plan().outputs)
    out.push_back(f->shapes[static_cast<std::size_t>(o.slot)]);
  return out;
}

std::vector<DType> KernelOp::output_dtypes(std::span<const TensorView> inputs) const {
  if (plan().args_from_kernel) state_->fail_spec("declares no inputs; its meta_fn gives dtypes");
  if (inputs.size() != static_cast<std::size_t>(plan().num_tensor_inputs)) {
    state_->fail_type("expected " + std::to_string(plan().num_tensor_inputs) +
                      " tensor input(s), got " + std::to_string(inputs.size()));
  }
  int instance = state_->select_instance(inputs);
  std::vector<DType> out;
  for (const OutputPlan& o : plan().outputs) {
    auto d = state_->output_dtype(o, instance, inputs);
    if (!d) {
      state_->fail_spec("gets the dtype of output '" +
                        plan().tensors[static_cast<std::size_t>(o.slot)].name +
                        "' from its meta_fn (the kernel's parameter does not fix it)");
    }
    out.push_back(*d);
  }
  return out;
}

void KernelOp::check_arguments(std::span<const TensorView> inputs,
                               std::span<const ScalarArg> scalars) const {
  Frame f;
  state_->check_arguments(inputs, scalars, f);
}

LoadInfo KernelOp::load(int device) const {
  return state_->module_for(device).info;
}

void KernelOp::launch(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                      std::span<const TensorView> outputs, void* stream) const {
  State& s = *state_;
  const OpPlan& p = s.plan();
  s.require_declared_launch();
  if (outputs.size() != p.outputs.size()) {
    s.fail_type("expected " + std::to_string(p.outputs.size()) + " output(s), got " +
                std::to_string(outputs.size()));
  }
  Frame f;
  s.prepare(inputs, scalars, f, outputs);
  // One device for everything, contiguous memory, outputs of the right dtype and shape.
  detail::TensorChecker tensors(p.op_name);
  bool work = false;  // anything to write
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    tensors.check(inputs[i], "input '" + p.tensors[i].name + "'");
    work = work || (p.tensors[i].mutated && inputs[i].shape.numel() > 0);
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    const std::string& name = p.tensors[static_cast<std::size_t>(out.slot)].name;
    auto want = s.output_dtype(out, f.instance, inputs);
    if (want && outputs[o].dtype != *want) {
      s.fail_type("output '" + name + "' must be " + std::string(dtype_name(*want)) + ", got " +
                  std::string(dtype_name(outputs[o].dtype)));
    }
    const Shape& expected = f.shapes[static_cast<std::size_t>(out.slot)];
    if (!(outputs[o].shape == expected)) {
      s.fail("output '" + name + "' has shape " + outputs[o].shape.to_string() +
             " but the op produces " + expected.to_string());
    }
    tensors.check(outputs[o], "output '" + name + "'");
    work = work || outputs[o].shape.numel() > 0;
  }
  int device = tensors.device();
  if (!work) return;  // zero-element outputs: nothing to launch

  FrameSizes sizes{f};
  FrameEnv env{p, sizes};
  const LaunchGeometry& g = *p.geometry;
  Dims3 grid{}, block{};
  for (std::size_t i = 0; i < 3; ++i) {
    grid[i] = env.eval(g.grid[i]);
    block[i] = env.eval(g.block[i]);
  }
  std::int64_t smem = env.eval(g.shared_mem);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;  // an empty grid: nothing to do
  if (!within_launch_limits(grid, block, smem)) {
    DimsText text;
    for (std::size_t i = 0; i < 3; ++i) {
      text.grid[i] = g.grid[i].to_string();
      text.block[i] = g.block[i].to_string();
    }
    text.shared_mem = g.shared_mem.to_string();
    check_launch_dims(p.op_name, grid, block, smem, &text);
  }

  PackedArgs packed;
  for (std::size_t i = 0; i < p.args.size(); ++i) {
    const ArgSlot& a = p.args[i];
    void* slot = packed.slot(i);
    switch (a.kind) {
      case ArgSlot::Kind::TensorInput:
        detail::pack_pointer(slot, inputs[static_cast<std::size_t>(a.index)].data);
        break;
      case ArgSlot::Kind::Output:
        detail::pack_pointer(slot,
                             outputs[static_cast<std::size_t>(a.index - p.num_tensor_inputs)].data);
        break;
      case ArgSlot::Kind::ScalarInput:
        detail::pack_scalar(slot, a.value_type, scalars[static_cast<std::size_t>(a.index)]);
        break;
      case ArgSlot::Kind::ExtraValue: {
        std::int64_t v = env.eval(*a.value);
        if (a.value_type == ScalarType::Int) {
          detail::check_int32(p.op_name, "extra " + std::to_string(a.index) + " '" + a.name + "'",
                              v,
                              "; declare the extra int64 (\"int64\": true) and take a long long");
        }
        detail::pack_scalar(slot, a.value_type, ScalarArg::of_int(v));
        break;
      }
    }
  }
  s.launch_packed(device, f.instance, grid, block, smem, packed.params.data(), stream);
}

void KernelOp::State::launch_packed(int device, int inst, const std::array<std::int64_t, 3>& grid,
                                    const std::array<std::int64_t, 3>& block, std::int64_t smem,
                                    void** params, void* stream) {
  State& s = *this;
  const DeviceModule& m = s.module_for(device);
  auto instance = static_cast<std::size_t>(inst);
  std::int64_t threads = block[0] * block[1] * block[2];
  if (threads > m.max_threads[instance]) {
    s.fail("block of " + std::to_string(threads) + " threads exceeds the kernel's limit of " +
           std::to_string(m.max_threads[instance]) + " on this device");
  }
  if (smem + m.static_shared[instance] > m.max_dynamic_shared) {
    s.fail("shared memory " + std::to_string(smem) + " + " +
           std::to_string(m.static_shared[instance]) + " static bytes exceeds the " +
           std::to_string(m.max_dynamic_shared) + " bytes a block may use");
  }

  const Driver& d = Driver::require();
  detail::ScopedContext scope(m.ctx->get());
  CUresult r = d.cuLaunchKernel(m.functions[instance], static_cast<unsigned>(grid[0]),
                                static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]),
                                static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
                                static_cast<unsigned>(block[2]), static_cast<unsigned>(smem),
                                static_cast<CUstream>(stream), params, nullptr);
  if (r != CUDA_SUCCESS) {
    s.fail("cuLaunchKernel(kernel=\"" + s.image.lowered_names[instance] + "\", grid=[" +
           std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
           std::to_string(grid[2]) + "], block=[" + std::to_string(block[0]) + ", " +
           std::to_string(block[1]) + ", " + std::to_string(block[2]) +
           "], shared=" + std::to_string(smem) + ") failed: " + detail::cuda_error_text(r));
  }
}

void KernelOp::launch_raw(const LaunchDims& dims, std::span<const RawArg> args, void* stream,
                          int device) const {
  State& s = *state_;
  const OpPlan& p = s.plan();
  if (args.size() != p.args.size()) {
    std::string params;
    for (std::size_t i = 0; i < p.args.size(); ++i) {
      params += (i ? ", " : "") + p.args[i].c_type() + " " + p.args[i].name;
    }
    s.fail_type("the kernel takes " + std::to_string(p.args.size()) + " argument(s) (" + params +
                "), got " + std::to_string(args.size()));
  }
  auto where = [&](std::size_t i) {
    return "argument " + std::to_string(i) + " ('" + p.args[i].name + "', " + p.args[i].c_type() +
           ")";
  };
  // The instance whose pointer dtypes match the tensors (dtype-generic kernels).
  int instance = -1;
  for (std::size_t inst = 0; inst < p.instances.size() && instance < 0; ++inst) {
    bool match = true;
    for (std::size_t i = 0; i < args.size() && match; ++i) {
      if (!p.args[i].is_pointer() || !args[i].is_tensor) continue;
      auto want = s.bound(static_cast<int>(inst), p.args[i].element);
      match = !want || *want == args[i].tensor.dtype;
    }
    if (match) instance = static_cast<int>(inst);
  }
  if (instance < 0 && p.instances.size() > 1) {
    std::string dtypes;
    for (const RawArg& v : args) {
      if (v.is_tensor)
        dtypes += (dtypes.empty() ? "" : ", ") + std::string(dtype_name(v.tensor.dtype));
    }
    s.fail_type("no instantiation of " + p.spec.kernel_name + " takes tensors of dtypes (" +
                dtypes + ")");
  }
  instance = std::max(instance, 0);  // one instance: the loop below names the mismatch
  PackedArgs packed;
  detail::TensorChecker tensors(p.op_name);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ArgSlot& a = p.args[i];
    const RawArg& v = args[i];
    void* slot = packed.slot(i);
    if (a.is_pointer()) {
      if (!v.is_tensor) {
        s.fail_type(where(i) + " must be a tensor, got " + scalar_kind_name(v.scalar.kind));
      }
      auto want = s.bound(instance, a.element);
      if (want && *want != v.tensor.dtype) {
        s.fail_type(where(i) + " must be " + std::string(dtype_name(*want)) + ", got " +
                    std::string(dtype_name(v.tensor.dtype)));
      }
      tensors.check(v.tensor, where(i));
      detail::pack_pointer(slot, v.tensor.data);
      continue;
    }
    if (v.is_tensor) s.fail_type(where(i) + " is passed by value, got a tensor");
    const ScalarArg& x = v.scalar;
    bool is_int = a.value_type == ScalarType::Int || a.value_type == ScalarType::Int64;
    if ((a.value_type == ScalarType::Bool) != (x.kind == ScalarArg::Kind::Bool) ||
        (is_int && x.kind != ScalarArg::Kind::Int)) {
      s.fail_type(where(i) + " must be " +
                  (a.value_type == ScalarType::Bool ? "a bool"
                   : is_int                         ? "an int"
                                                    : "a float") +
                  ", got " + scalar_kind_name(x.kind));
    }
    if (a.value_type == ScalarType::Int) detail::check_int32(p.op_name, where(i), x.i, "");
    detail::pack_scalar(slot, a.value_type, x);
  }
  int tensor_device = tensors.device() >= 0 ? tensors.device() : std::max(device, 0);
  if (device >= 0 && device != tensor_device) {
    s.fail("the tensors are on device " + std::to_string(tensor_device) +
           " but the launch asks for device " + std::to_string(device));
  }
  check_launch_dims(p.op_name, dims.grid, dims.block, dims.shared_mem);
  s.launch_packed(tensor_device, instance, dims.grid, dims.block, dims.shared_mem,
                  packed.params.data(), stream);
}

bool cuda_available() {
  return cuda_device_count() > 0;
}

int cuda_device_count() {
  const Driver* d = Driver::get();
  if (!d) return 0;
  int count = 0;
  if (d->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

}  // namespace kernelop
