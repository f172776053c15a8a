// KernelOp (kernelop/runtime.hpp): construction, output shapes and the launch. Its argument checks
// are in launch_checks.cpp, its modules in module_cache.cpp and device_module.cpp, the argument
// packing both launch paths share in launch_args.cpp, the raw launch in launch_raw.cpp, the
// tactic choice in tactic_selector.cpp.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernelop/launch_limits.hpp"
#include "kernelop/package.hpp"
#include "kernelop/tuning.hpp"
#include "runtime/kernel_op_state.hpp"

namespace kernelop {

LaunchExprs::LaunchExprs(const OpPlan& p) {
  const LaunchGeometry& g = *p.geometry;
  for (std::size_t i = 0; i < 3; ++i) {
    grid[i] = program.add(g.grid[i]);
    block[i] = program.add(g.block[i]);
  }
  shared_mem = program.add(g.shared_mem);
  for (std::size_t i = 0; i < 3; ++i) cluster[i] = program.add(g.cluster[i]);
  for (std::size_t i = 0; i < p.args.size(); ++i) {
    if (p.args[i].value) extras[i] = program.add(*p.args[i].value);
  }
}

namespace {

// Note [donated inputs] (KernelOp::donatable_input): per output, the input it may take the
// buffer of. An input any kernel reads (the op's own or a later launch's), that the op writes,
// or that two outputs clone, is never given away.
std::vector<int> donatable_inputs(const OpPlan& p, const std::vector<LaunchLink>& links) {
  std::vector<int> readers(static_cast<std::size_t>(p.num_tensor_inputs), 0);
  auto read = [&](int slot) {
    if (slot >= 0 && slot < p.num_tensor_inputs) ++readers[static_cast<std::size_t>(slot)];
  };
  for (const ArgSlot& a : p.args) {
    if (a.kind == ArgSlot::Kind::TensorInput) read(a.index);
  }
  for (const LaunchLink& link : links) {
    for (int slot : link.tensors) read(slot);
  }
  // Note [host reads]: a test or an item() argument reads its tensor too.
  for (const HostTest& t : p.spec.when) read(p.tensor_slot(t.tensor));
  for (int slot : detail::item_slots(p)) read(slot);
  for (const OutputPlan& out : p.outputs) read(out.clone_slot);  // a second clone reads it too
  std::vector<int> out(p.outputs.size(), -1);
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const int i = p.outputs[o].clone_slot;
    if (i >= 0 && i < p.num_tensor_inputs && !p.outputs[o].scratch &&
        !p.tensors[static_cast<std::size_t>(i)].mutated &&
        readers[static_cast<std::size_t>(i)] == 1)
      out[o] = i;
  }
  return out;
}

}  // namespace

KernelOp::KernelOp(CompiledImage image, LoadOptions options) : state_(std::make_unique<State>()) {
  state_->image = std::move(image);
  state_->options = std::move(options);
  const OpPlan& p = state_->plan();
  if (p.args.size() > static_cast<std::size_t>(kMaxKernelArgs) ||
      p.tensors.size() > static_cast<std::size_t>(kMaxKernelArgs)) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": " << p.args.size()
                        << " kernel parameters; kernelop passes at most " << kMaxKernelArgs;
  }
  if (p.scalars.size() > static_cast<std::size_t>(kMaxKernelArgs)) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": " << p.scalars.size()
                        << " scalar inputs; kernelop takes at most " << kMaxKernelArgs;
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
      state_->reads_device =
          state_->reads_device || leaf.op() == ExprOp::Arch || leaf.op() == ExprOp::SmCount;
    });
  };
  for (const ArgSlot& a : p.args) {
    if (a.value) note_arch(*a.value);
  }
  if (p.geometry) {
    try {
      state_->exprs.emplace(p);
    } catch (const Error& e) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": " << e.message();
    }
    for (const Expr& e : p.geometry->grid) note_arch(e);
    for (const Expr& e : p.geometry->block) note_arch(e);
    for (const Expr& e : p.geometry->cluster) note_arch(e);
    note_arch(p.geometry->shared_mem);
    state_->clustered = p.geometry->clustered();
  }
  for (const ConfigPlan& c : p.configs) {
    for (const RequirementPlan& r : c.requirements) note_arch(r.condition);
  }
  state_->args = detail::arg_codes(p);
  state_->memo_pointer_bits = detail::reads_pointer_alignment(p);
  state_->inits_outputs = std::any_of(p.outputs.begin(), p.outputs.end(), [](const OutputPlan& o) {
    return o.fill || o.clone_slot >= 0;
  });
  if (detail::memo_eligible(p)) {
    state_->launch_memo = std::make_unique<detail::LaunchMemo>();
    state_->memo_outputs = detail::MemoValue::kExtras;
    for (const ArgSlot& a : p.args) state_->memo_outputs += a.kind == ArgSlot::Kind::ExtraValue;
  }
  // Note [several launches]: each later launch is an op of its own, sharing the load options.
  if (state_->image.then.size() != p.spec.then.size()) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": its spec declares " << p.spec.then.size()
                        << " later launch(es) and the image holds " << state_->image.then.size()
                        << " (compile_launches compiles them)";
  }
  for (std::size_t k = 0; k < state_->image.then.size(); ++k) {
    const CompiledImage& launch = state_->image.then[k];
    if (!derives_launch(p, k, launch.plan)) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": its launch " << k + 1 << " image ("
                          << launch.plan.op_name << ") is not the one its spec derives";
    }
    state_->then_links.push_back(link_launch(p, k, launch.plan));
    state_->then.emplace_back(launch, state_->options);
  }
  // A launch that may not run (Note [host reads]) takes the program's path, which decides.
  state_->program =
      !state_->then.empty() || p.num_results() != p.outputs.size() || !p.spec.when.empty();
  state_->reads_items = !detail::item_slots(p).empty();
  state_->donatable = donatable_inputs(p, state_->then_links);
  for (const LaunchStep& step : p.spec.then) state_->before += step.before;
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
  // Results never read the device (validation); scratch shapes may, and are not reported: they
  // are evaluated with a placeholder device rather than a division by sm_count() == 0.
  if (state_->program) f->sm_count = f->arch = 1;
  detail::prepare(plan(), inputs, scalars, *f);
  std::vector<Shape> out;
  for (std::size_t o = 0; o < plan().num_results(); ++o)
    out.push_back(f->shapes[static_cast<std::size_t>(plan().outputs[o].slot)]);
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
  for (std::size_t r = 0; r < plan().num_results(); ++r) {
    const OutputPlan& o = plan().outputs[r];
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

int KernelOp::donatable_input(std::size_t output) const {
  return output < state_->donatable.size() ? state_->donatable[output] : -1;
}

std::uint64_t KernelOp::memoized_launches() const {
  return state_->launch_memo ? state_->launch_memo->hits.load(std::memory_order_relaxed) : 0;
}

LoadInfo KernelOp::load(int device) const {
  // Note [several launches]: the later launches' kernels too, so that a call after load() (in a
  // CUDA graph capture, say) loads nothing.
  for (const KernelOp& launch : state_->then) (void)launch.load(device);
  return state_->module_for(device).info;
}

void KernelOp::launch(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                      std::span<const TensorView> outputs, void* stream) const {
  State& s = *state_;
  const OpPlan& p = s.plan();
  detail::require_declared_launch(p);
  if (outputs.size() != p.num_results()) {
    KERNELOP_RAISE(s.error(ErrorKind::Type))
        << "expected " << p.num_results() << " output(s), got " << outputs.size();
  }
  if (s.program) {
    s.launch_program(inputs, scalars, outputs, nullptr, stream);
    return;
  }
  // Note [launch memo]: a call that repeats the last one in everything but its pointers.
  detail::MemoKey key;
  detail::MemoValue memo;
  bool keyed = s.launch_memo &&
               key.build(detail::MemoMode::Launch, inputs, scalars, outputs, s.memo_pointer_bits);
  // (Up to the extra arguments: launch() has its outputs.)
  if (keyed &&
      s.launch_memo->entry.find(key.span(), memo.words.data(), &memo.size, s.memo_outputs)) {
    s.launch_memoized(memo, inputs, scalars, outputs, stream);
    return;
  }
  std::uint64_t generation = s.tactics->generation.load(std::memory_order_acquire);
  Frame f;
  detail::prepare(p, inputs, scalars, f, outputs);
  memo.size = 0;
  s.launch_prepared(f, inputs, scalars, outputs, stream, keyed ? &memo : nullptr);
  if (keyed && memo.size > 0) s.remember_launch(key, memo, generation);
}

void KernelOp::State::remember_launch(const detail::MemoKey& key, const detail::MemoValue& value,
                                      std::uint64_t generation) {
  launch_memo->entry.store(key.span(), value.span(), [&] {
    return tactics->generation.load(std::memory_order_acquire) == generation;
  });
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
  if (s.program) {
    s.launch_program(inputs, scalars, {}, &allocate, stream);
    return;
  }
  std::array<TensorView, kMaxKernelArgs> made;
  std::span<const TensorView> outputs(made.data(), p.outputs.size());
  detail::MemoKey key;
  detail::MemoValue memo;
  bool keyed = s.launch_memo &&
               key.build(detail::MemoMode::Allocating, inputs, scalars, {}, s.memo_pointer_bits);
  if (keyed && s.launch_memo->entry.find(key.span(), memo.words.data(), &memo.size)) {
    // The outputs the memoised call had, allocated again; launched from the memo when the
    // allocator made them as it did then (else the full path below checks them).
    std::size_t w = s.memo_outputs;
    for (std::size_t o = 0; o < p.outputs.size(); ++o) {
      auto dtype = static_cast<DType>(memo.words[w]);
      auto rank = static_cast<std::size_t>(memo.words[w + 1]);
      Shape shape(std::span<const std::int64_t>(
          reinterpret_cast<const std::int64_t*>(&memo.words[w + 2]), rank));
      made[o] = allocate(o, dtype, shape);
      w += 2 + rank;
    }
    detail::MemoKey as_allocated;
    as_allocated.size = 0;
    bool same = true;
    for (std::size_t o = 0; o < p.outputs.size() && same; ++o) {
      same = as_allocated.add_tensor(made[o], s.memo_pointer_bits);
    }
    same = same && w + as_allocated.size == memo.size &&
           std::equal(as_allocated.words.begin(), as_allocated.words.begin() + as_allocated.size,
                      memo.words.begin() + static_cast<std::ptrdiff_t>(w));
    if (same) {
      s.launch_memoized(memo, inputs, scalars, outputs, stream);
      return;
    }
    Frame f;
    detail::prepare(p, inputs, scalars, f);
    s.launch_prepared(f, inputs, scalars, outputs, stream);
    return;
  }
  std::uint64_t generation = s.tactics->generation.load(std::memory_order_acquire);
  Frame f;
  detail::prepare(p, inputs, scalars, f);
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    std::optional<DType> dtype = detail::output_dtype(p, out, f.instance, inputs);
    made[o] = allocate(o, *dtype, f.shapes[static_cast<std::size_t>(out.slot)]);
  }
  memo.size = 0;
  s.launch_prepared(f, inputs, scalars, outputs, stream, keyed ? &memo : nullptr);
  if (keyed && memo.size > 0) {
    // The outputs as allocated, for the next hit to compare its own with.
    detail::MemoKey as_allocated;
    as_allocated.size = 0;
    bool fits = true;
    for (const TensorView& t : outputs)
      fits = fits && as_allocated.add_tensor(t, s.memo_pointer_bits);
    for (std::size_t i = 0; fits && i < as_allocated.size; ++i)
      fits = memo.push(as_allocated.words[i]);
    if (fits) s.remember_launch(key, memo, generation);
  }
}

TensorPtrs KernelOp::State::tensor_ptrs(std::span<const TensorView> inputs,
                                        std::span<const TensorView> outputs) const {
  const OpPlan& p = plan();
  TensorPtrs ptrs;
  for (std::size_t i = 0; i < inputs.size(); ++i) ptrs[i] = inputs[i].data;
  for (std::size_t o = 0; o < outputs.size(); ++o)
    ptrs[static_cast<std::size_t>(p.outputs[o].slot)] = outputs[o].data;
  return ptrs;
}

void KernelOp::State::launch_prepared(Frame& f, std::span<const TensorView> inputs,
                                      std::span<const ScalarArg> scalars,
                                      std::span<const TensorView> outputs, void* stream,
                                      detail::MemoValue* record, bool init) {
  const OpPlan& p = plan();
  auto [device, work] = detail::check_tensors(p, inputs, outputs, f);
  if (!work) return;  // zero-element outputs: nothing to launch
  TensorPtrs ptrs = tensor_ptrs(inputs, outputs);
  if (inits_outputs && init) init_outputs(ptrs, outputs, device, stream);
  // One config: its requires are checked like the op's (choose_config raises when they fail).
  detail::Chosen chosen = detail::Chosen::Only;
  int config = p.configs.size() == 1 && p.configs[0].requirements.empty()
                   ? 0
                   : choose_config(f, inputs, scalars, outputs, ptrs, device, stream, chosen);
  // Only a config chosen from a stable source may be replayed (Note [launch memo]).
  if (chosen == detail::Chosen::Unstable) record = nullptr;
  launch_config(f, config, ptrs, scalars, device, stream, record, chosen);
  if (record && record->size > 0) {
    // The outputs' dtypes and shapes, for a hit of launch_allocating to allocate.
    bool fits = true;
    for (std::size_t o = 0; o < outputs.size() && fits; ++o) {
      const Shape& shape = f.shapes[static_cast<std::size_t>(p.outputs[o].slot)];
      fits = record->push(static_cast<std::uint64_t>(outputs[o].dtype)) &&
             record->push(static_cast<std::uint64_t>(shape.rank()));
      for (std::int64_t d : shape) fits = fits && record->push(static_cast<std::uint64_t>(d));
    }
    if (!fits) record->size = 0;
  }
}

void KernelOp::State::launch_memoized(const detail::MemoValue& memo,
                                      std::span<const TensorView> inputs,
                                      std::span<const ScalarArg> scalars,
                                      std::span<const TensorView> outputs, void* stream) {
  using V = detail::MemoValue;
  const std::uint64_t* w = memo.words.data();
  count_choice(static_cast<detail::Chosen>(w[V::kChosen]), static_cast<int>(w[V::kConfig]));
  auto word = [&](std::size_t i) { return static_cast<std::int64_t>(w[i]); };
  TensorPtrs ptrs = tensor_ptrs(inputs, outputs);
  if (inits_outputs) init_outputs(ptrs, outputs, static_cast<int>(word(V::kDevice)), stream);
  PackedArgs packed;
  std::size_t extra = V::kExtras;
  detail::pack_arguments(args, ptrs, scalars, packed, [&](std::size_t) { return word(extra++); });
  launch_packed(static_cast<int>(word(V::kDevice)), static_cast<int>(word(V::kInstance)),
                {word(V::kGrid), word(V::kGrid + 1), word(V::kGrid + 2)},
                {word(V::kBlock), word(V::kBlock + 1), word(V::kBlock + 2)},
                {word(V::kCluster), word(V::kCluster + 1), word(V::kCluster + 2)}, word(V::kSmem),
                packed.kernel_params(plan()), stream);
  launch_memo->hits.fetch_add(1, std::memory_order_relaxed);
}

void KernelOp::State::launch_config(Frame& f, int config, const TensorPtrs& ptrs,
                                    std::span<const ScalarArg> scalars, int device, void* stream,
                                    detail::MemoValue* record, detail::Chosen chosen) {
  const OpPlan& p = plan();
  f.tunables = p.configs[static_cast<std::size_t>(config)].values.data();
  if (reads_device) read_device(f, device);
  FrameSizes sizes{f};
  FrameEnv env{p, sizes};
  const LaunchExprs& x = *exprs;
  Dims3 grid{}, block{};
  for (std::size_t i = 0; i < 3; ++i) {
    grid[i] = env.eval(x.program, x.grid[i]);
    block[i] = env.eval(x.program, x.block[i]);
  }
  std::int64_t smem = env.eval(x.program, x.shared_mem);
  Dims3 cluster{1, 1, 1};
  if (clustered) {
    for (std::size_t i = 0; i < 3; ++i) cluster[i] = env.eval(x.program, x.cluster[i]);
  }
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;  // an empty grid: nothing to do
  if (!within_launch_limits(grid, block, smem)) {
    const LaunchGeometry& g = *p.geometry;
    DimsText text;
    for (std::size_t i = 0; i < 3; ++i) {
      text.grid[i] = g.grid[i].to_string();
      text.block[i] = g.block[i].to_string();
    }
    text.shared_mem = g.shared_mem.to_string();
    check_launch_dims(p.op_name, grid, block, smem, &text);
  }
  if (clustered && !within_cluster_limits(grid, cluster)) {
    std::array<std::string, 3> text;
    for (std::size_t i = 0; i < 3; ++i) text[i] = p.geometry->cluster[i].to_string();
    check_cluster(p.op_name, grid, cluster, &text);
  }

  int instance = config * p.dtype_combinations() + f.instance;
  if (record) {
    for (std::int64_t v : {std::int64_t{device}, std::int64_t{instance}, grid[0], grid[1], grid[2],
                           block[0], block[1], block[2], smem, static_cast<std::int64_t>(chosen),
                           std::int64_t{config}, cluster[0], cluster[1], cluster[2]})
      record->push(static_cast<std::uint64_t>(v));
  }
  std::optional<detail::HostReader> host;
  if (reads_items) {
    host.emplace(detail::HostReader{p, module_for(device), stream});
    f.host = &*host;
  }
  PackedArgs packed;
  detail::pack_arguments(args, ptrs, scalars, packed, [&](std::size_t i) {
    const ArgSlot& a = p.args[i];
    std::int64_t v = env.eval(x.program, x.extras[i]);
    if (a.value_type == ScalarType::Int) {
      detail::check_int32(
          p.op_name, v, [&] { return "extra " + std::to_string(a.index) + " '" + a.name + "'"; },
          "; declare the extra int64 (\"int64\": true) and take a long long");
    }
    if (record) record->push(static_cast<std::uint64_t>(v));
    return v;
  });
  launch_packed(device, instance, grid, block, cluster, smem, packed.kernel_params(p), stream);
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
