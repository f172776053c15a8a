// KernelOp (kernelop/runtime.hpp): construction, output shapes and the launch. Its argument checks
// are in launch_checks.cpp, its modules in module_cache.cpp and device_module.cpp, the argument
// packing both launch paths share in launch_args.cpp, the raw launch in launch_raw.cpp, the
// tactic choice in tactic_selector.cpp.
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
  bool dynamic_shared = !p.geometry || !(p.geometry->shared_mem.is_const() &&
                                         p.geometry->shared_mem.const_value() == 0);
  for (const ArchImage& a : state_->image.images)
    dynamic_shared = dynamic_shared || a.launch_shared > 0;
  state_->modules.set_dynamic_shared(dynamic_shared);
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
  detail::prepare(plan(), inputs, scalars, *f);
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
  int instance = detail::select_instance(plan(), inputs);
  std::vector<DType> out;
  for (const OutputPlan& o : plan().outputs) {
    auto d = detail::output_dtype(plan(), o, instance, inputs);
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
  detail::check_arguments(plan(), inputs, scalars, f);
}

LoadInfo KernelOp::load(int device) const {
  return state_->module_for(device).info;
}

void KernelOp::launch(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                      std::span<const TensorView> outputs, void* stream) const {
  State& s = *state_;
  const OpPlan& p = s.plan();
  detail::require_declared_launch(p);
  if (outputs.size() != p.outputs.size()) {
    KERNELOP_RAISE(s.error(ErrorKind::Type))
        << "expected " << p.outputs.size() << " output(s), got " << outputs.size();
  }
  Frame f;
  detail::prepare(p, inputs, scalars, f, outputs);
  s.launch_prepared(f, inputs, scalars, outputs, stream);
}

void KernelOp::launch_allocating(std::span<const TensorView> inputs,
                                 std::span<const ScalarArg> scalars, OutputAllocator allocate,
                                 void* stream) const {
  State& s = *state_;
  const OpPlan& p = s.plan();
  detail::require_declared_launch(p);
  if (p.has_external_outputs()) {
    KERNELOP_RAISE(s.error(ErrorKind::Spec, " "))
        << "shapes outputs with its meta_fn: allocate them and call launch()";
  }
  Frame f;
  detail::prepare(p, inputs, scalars, f);
  std::array<TensorView, kMaxKernelArgs> made;
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    std::optional<DType> dtype = detail::output_dtype(p, out, f.instance, inputs);
    made[o] = allocate(o, *dtype, f.shapes[static_cast<std::size_t>(out.slot)]);
  }
  s.launch_prepared(f, inputs, scalars, std::span<const TensorView>(made.data(), p.outputs.size()),
                    stream);
}

void KernelOp::State::launch_prepared(Frame& f, std::span<const TensorView> inputs,
                                      std::span<const ScalarArg> scalars,
                                      std::span<const TensorView> outputs, void* stream) {
  const OpPlan& p = plan();
  auto [device, work] = detail::check_tensors(p, inputs, outputs, f);
  if (!work) return;  // zero-element outputs: nothing to launch
  TensorPtrs ptrs;
  for (std::size_t i = 0; i < inputs.size(); ++i) ptrs[i] = inputs[i].data;
  for (std::size_t o = 0; o < outputs.size(); ++o)
    ptrs[static_cast<std::size_t>(p.outputs[o].slot)] = outputs[o].data;
  // One config: its requires are checked like the op's (choose_config raises when they fail).
  int config = p.configs.size() == 1 && p.configs[0].requirements.empty()
                   ? 0
                   : choose_config(f, inputs, scalars, outputs, ptrs, device, stream);
  launch_config(f, config, ptrs, scalars, device, stream);
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
