// Note [several launches] at launch (spec.hpp): an op with scratch or later launches allocates
// its scratch stream-ordered on the call's stream, launches its own kernel with the outputs and
// the scratch, then each later launch with the op's tensors it names, and frees the scratch after
// the last launch on the same stream (a CUDA graph capture records allocations, kernels and frees
// as nodes). Every launch checks its own arguments, so a later launch whose shapes disagree with
// the op's is an error, never a wrong write.
#include "runtime/kernel_op_state.hpp"

namespace kernelop {

void KernelOp::State::launch_program(std::span<const TensorView> inputs,
                                     std::span<const ScalarArg> scalars,
                                     std::span<const TensorView> results,
                                     const OutputAllocator* allocate, void* stream) {
  const OpPlan& p = plan();
  const std::size_t num_results = p.num_results();
  Frame f;
  // The device first: scratch shapes may read it (sm_count()), and the scratch lives on it.
  int device = !inputs.empty() ? inputs[0].device : !results.empty() ? results[0].device : -1;
  if (device < 0) {
    KERNELOP_RAISE(error(ErrorKind::Type)) << "needs a tensor input to tell its device";
  }
  detail::check_device_index(p, device);
  read_device(f, device);
  detail::prepare(p, inputs, scalars, f, results);
  std::array<TensorView, kMaxKernelArgs> all;
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    const Shape& shape = f.shapes[static_cast<std::size_t>(out.slot)];
    if (o < num_results && !allocate) {
      all[o] = results[o];
      continue;
    }
    std::optional<DType> dtype = detail::output_dtype(p, out, f.instance, inputs);
    if (o < num_results) {
      all[o] = (*allocate)(o, *dtype, shape);
    } else {
      all[o] = TensorView{nullptr, *dtype, shape, {}, device};
    }
  }
  const DeviceModule& m = module_for(device);
  detail::ScratchMemory scratch(*m.driver, m.context, static_cast<CUstream>(stream));
  for (std::size_t o = num_results; o < p.outputs.size(); ++o) {
    TensorView& t = all[o];
    std::size_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<std::size_t>(t.shape.numel()), dtype_size(t.dtype),
                               &bytes)) {
      KERNELOP_RAISE(error(ErrorKind::Launch))
          << "scratch '" << p.tensors[static_cast<std::size_t>(p.outputs[o].slot)].name << "' of "
          << t.shape.numel() << " elements does not fit 64 bits of bytes";
    }
    if (bytes == 0) continue;
    CUdeviceptr ptr = 0;
    if (CUresult r = scratch.allocate(bytes, &ptr); r != CUDA_SUCCESS) {
      KERNELOP_RAISE(error(ErrorKind::Launch))
          << "cuMemAllocAsync of " << bytes << " bytes for scratch '"
          << p.tensors[static_cast<std::size_t>(p.outputs[o].slot)].name
          << "' failed: " << detail::cuda_error_text(r);
    }
    t.data = reinterpret_cast<void*>(ptr);
  }
  std::span<const TensorView> outputs(all.data(), p.outputs.size());
  const bool tested = !p.spec.when.empty();
  if (before > 0 || tested) {
    // Launches before the op's own kernel run after the inits (LaunchStep::before), and so do
    // the reads of its `when` tests (Note [host reads]).
    if (detail::check_tensors(p, inputs, outputs, f).work && inits_outputs)
      init_outputs(tensor_ptrs(inputs, outputs), outputs, device, stream);
    for (std::size_t k = 0; k < before; ++k) launch_step(k, inputs, scalars, outputs, stream);
  }
  if (!tested || detail::HostReader{p, m, stream}.holds(p.spec.when, f.views))
    launch_prepared(f, inputs, scalars, outputs, stream, nullptr, before == 0 && !tested);
  for (std::size_t k = before; k < then.size(); ++k)
    launch_step(k, inputs, scalars, outputs, stream);
  if (CUresult r = scratch.release(); r != CUDA_SUCCESS) {
    KERNELOP_RAISE(error(ErrorKind::Launch))
        << "cuMemFreeAsync of the call's scratch failed: " << detail::cuda_error_text(r);
  }
}

void KernelOp::State::launch_step(std::size_t k, std::span<const TensorView> inputs,
                                  std::span<const ScalarArg> scalars,
                                  std::span<const TensorView> outputs, void* stream) {
  std::array<TensorView, kMaxKernelArgs> views;
  std::array<ScalarArg, kMaxKernelArgs> values;
  const OpPlan& lp = then[k].plan();
  const LaunchLink& link = then_links[k];
  for (std::size_t t = 0; t < link.tensors.size(); ++t) {
    auto slot = static_cast<std::size_t>(link.tensors[t]);
    views[t] = slot < inputs.size() ? inputs[slot] : outputs[slot - inputs.size()];
  }
  for (std::size_t j = 0; j < link.scalars.size(); ++j)
    values[j] = scalars[static_cast<std::size_t>(link.scalars[j])];
  auto n_in = static_cast<std::size_t>(lp.num_tensor_inputs);
  // A launch with a `when` tests it itself, after its own inits (its launch_program).
  then[k].launch(std::span<const TensorView>(views.data(), n_in),
                 std::span<const ScalarArg>(values.data(), link.scalars.size()),
                 std::span<const TensorView>(views.data() + n_in, link.tensors.size() - n_in),
                 stream);
}

}  // namespace kernelop
