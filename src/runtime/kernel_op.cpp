// KernelOp: argument checks, output shapes and the launch (the per-device module is in
// device_module.cpp, the argument helpers both launch paths share in launch_args.cpp, the raw
// launch in launch_raw.cpp).
#include <cstring>
#include <limits>

#include "kernelop/launch_limits.hpp"
#include "kernelop/package.hpp"
#include "kernelop/tuning.hpp"
#include "runtime/kernel_op_state.hpp"

namespace kernelop {

KernelOp::KernelOp(CompiledImage image, LoadOptions options) : state_(std::make_unique<State>()) {
  state_->image = std::move(image);
  state_->options = std::move(options);
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
    if (a.is_pointer() && !p.element(a) && !open_dtype) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": the dtype of '" << a.name
                          << "' is unknown; compile the op (which infers it) or declare it";
    }
  }
  if (p.configs.size() > 1) {
    state_->tactics->pinned = detail::env_tactic(p);
    for (const TuningTable& t : state_->image.tuning) {
      if (std::string why = tuning_table_mismatch(t, state_->image); !why.empty()) {
        warn("op " + p.op_name + ": a tuning table that came with the op is ignored: " + why);
        continue;
      }
      state_->tactics->added.push_back(t);
    }
  }
  auto note_arch = [&](const Expr& e) {
    e.for_each_leaf([&](const Expr& leaf) {
      state_->reads_arch = state_->reads_arch || leaf.op() == ExprOp::Arch;
    });
  };
  for (const ArgSlot& a : p.args) {
    if (a.value) note_arch(*a.value);
  }
  if (p.geometry) {
    for (const Expr& e : p.geometry->grid) note_arch(e);
    for (const Expr& e : p.geometry->block) note_arch(e);
    note_arch(p.geometry->shared_mem);
  }
  for (const ConfigPlan& c : p.configs) {
    for (const RequirementPlan& r : c.requirements) note_arch(r.condition);
  }
  // Raw launches (no geometry) choose their shared memory per call.
  state_->dynamic_shared = !p.geometry || !(p.geometry->shared_mem.is_const() &&
                                            p.geometry->shared_mem.const_value() == 0);
  for (const ArchImage& a : state_->image.images)
    state_->dynamic_shared = state_->dynamic_shared || a.launch_shared > 0;
}

KernelOp KernelOp::from_package(const std::filesystem::path& path, LoadOptions options) {
  return KernelOp(read_package(path), std::move(options));
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
  if (plan().args_from_kernel) {
    KERNELOP_RAISE(state_->error(ErrorKind::Spec, " "))
        << "declares no inputs; its meta_fn gives dtypes";
  }
  if (inputs.size() != static_cast<std::size_t>(plan().num_tensor_inputs)) {
    KERNELOP_RAISE(state_->error(ErrorKind::Type))
        << "expected " << plan().num_tensor_inputs << " tensor input(s), got " << inputs.size();
  }
  int instance = state_->select_instance(inputs);
  std::vector<DType> out;
  for (const OutputPlan& o : plan().outputs) {
    auto d = state_->output_dtype(o, instance, inputs);
    if (!d) {
      KERNELOP_RAISE(state_->error(ErrorKind::Spec, " "))
          << "gets the dtype of output '" << plan().tensors[static_cast<std::size_t>(o.slot)].name
          << "' from its meta_fn (the kernel's parameter does not fix it)";
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
    KERNELOP_RAISE(s.error(ErrorKind::Type))
        << "expected " << p.outputs.size() << " output(s), got " << outputs.size();
  }
  Frame f;
  s.prepare(inputs, scalars, f, outputs);
  // One device for everything, contiguous memory, outputs of the right dtype and shape.
  auto describe = [&](std::size_t i) {
    if (i < inputs.size()) return "input '" + p.tensors[i].name + "'";
    return "output '" +
           p.tensors[static_cast<std::size_t>(p.outputs[i - inputs.size()].slot)].name + "'";
  };
  detail::TensorChecker tensors(p.op_name, describe);
  bool work = false;  // anything to write
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    tensors.check(inputs[i], i, p.tensors[i].strided);
    if (p.tensors[i].mutated && inputs[i].may_overlap()) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << describe(i) << " is written in place but its elements may overlap (shape "
          << inputs[i].shape.to_string() << ", strides " << inputs[i].strides.to_string()
          << ": an expand()ed or otherwise self-overlapping view); pass a tensor whose elements "
             "are distinct, e.g. its .clone()";
    }
    work = work || (p.tensors[i].mutated && inputs[i].shape.numel() > 0);
  }
  // A tensor the kernel writes must share no memory with another it reads or writes: the
  // kernel would race with itself, silently (op(x, x), or x and a view of it).
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!p.tensors[i].mutated || inputs[i].shape.numel() == 0) continue;
    auto [lo, hi] = inputs[i].byte_span();
    for (std::size_t j = 0; j < inputs.size() + outputs.size(); ++j) {
      const TensorView& other = j < inputs.size() ? inputs[j] : outputs[j - inputs.size()];
      if (j == i || other.shape.numel() == 0) continue;
      auto [olo, ohi] = other.byte_span();
      if (olo < hi && lo < ohi) {
        KERNELOP_RAISE(s.error(ErrorKind::Launch))
            << describe(i) << " is written in place and shares memory with " << describe(j)
            << "; pass tensors that do not overlap (e.g. a .clone() of one)";
      }
    }
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    auto want = s.output_dtype(out, f.instance, inputs);
    if (want && outputs[o].dtype != *want) {
      KERNELOP_RAISE(s.error(ErrorKind::Type))
          << describe(inputs.size() + o) << " must be " << dtype_name(*want) << ", got "
          << dtype_name(outputs[o].dtype);
    }
    const Shape& expected = f.shapes[static_cast<std::size_t>(out.slot)];
    if (!(outputs[o].shape == expected)) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << describe(inputs.size() + o) << " has shape " << outputs[o].shape.to_string()
          << " but the op produces " << expected.to_string();
    }
    tensors.check(outputs[o], inputs.size() + o);
    f.views[static_cast<std::size_t>(out.slot)] = &outputs[o];
    work = work || outputs[o].shape.numel() > 0;
  }
  int device = tensors.device();
  if (!work) return;  // zero-element outputs: nothing to launch

  TensorPtrs ptrs;
  for (std::size_t i = 0; i < inputs.size(); ++i) ptrs[i] = inputs[i].data;
  for (std::size_t o = 0; o < outputs.size(); ++o)
    ptrs[static_cast<std::size_t>(p.outputs[o].slot)] = outputs[o].data;
  // One config: its requires are checked like the op's (choose_config raises when they fail).
  int config = p.configs.size() == 1 && p.configs[0].requirements.empty()
                   ? 0
                   : s.choose_config(f, inputs, scalars, outputs, ptrs, device, stream);
  s.launch_config(f, config, ptrs, scalars, device, stream);
}

void KernelOp::State::launch_config(Frame& f, int config, const TensorPtrs& ptrs,
                                    std::span<const ScalarArg> scalars, int device, void* stream) {
  const OpPlan& p = plan();
  f.tunables = p.configs[static_cast<std::size_t>(config)].values.data();
  if (reads_arch) f.arch = module_for(device).arch;
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
      case ArgSlot::Kind::Output:
        detail::pack_pointer(slot, ptrs[static_cast<std::size_t>(a.index)]);
        break;
      case ArgSlot::Kind::ScalarInput:
        detail::pack_scalar(slot, a.value_type, scalars[static_cast<std::size_t>(a.index)]);
        break;
      case ArgSlot::Kind::ExtraValue: {
        std::int64_t v = env.eval(*a.value);
        if (a.value_type == ScalarType::Int) {
          detail::check_int32(
              p.op_name, v,
              [&] { return "extra " + std::to_string(a.index) + " '" + a.name + "'"; },
              "; declare the extra int64 (\"int64\": true) and take a long long");
        }
        detail::pack_scalar(slot, a.value_type, ScalarArg::of_int(v));
        break;
      }
    }
  }
  launch_packed(device, config * p.dtype_combinations() + f.instance, grid, block, smem,
                packed.kernel_params(p), stream);
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
