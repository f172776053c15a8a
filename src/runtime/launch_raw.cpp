// KernelOp::launch_raw (the caller's geometry and arguments, checked) and the cuLaunchKernel
// both launch paths end in.
#include <algorithm>
#include <cstring>

#include "kernelop/launch_limits.hpp"
#include "runtime/kernel_op_state.hpp"

namespace kernelop {

void KernelOp::State::launch_packed(int device, int inst, const std::array<std::int64_t, 3>& grid,
                                    const std::array<std::int64_t, 3>& block,
                                    const std::array<std::int64_t, 3>& cluster, std::int64_t smem,
                                    void** params, void* stream) {
  State& s = *this;
  const DeviceModule& m = s.module_for(device);
  auto instance = static_cast<std::size_t>(inst);
  const DeviceModule::Instance& k = m.instances[instance];
  smem += k.launch_shared;  // what the image itself needs (a Triton kernel's)
  std::int64_t threads = block[0] * block[1] * block[2];
  if (threads > k.max_threads) {
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << "block of " << threads << " threads exceeds the kernel's limit of " << k.max_threads
        << " on this device";
  }
  if (smem + k.static_shared > m.max_dynamic_shared) {
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << "shared memory " << smem << " + " << k.static_shared << " static bytes exceeds the "
        << m.max_dynamic_shared << " bytes a block may use";
  }

  const Driver& d = *m.driver;
  detail::ScopedContext scope(d, m.context);
  // Global scratch (a Triton kernel's): per block, allocated stream-ordered for this launch (so a
  // CUDA graph capture records it as allocation nodes), freed after it on the same stream.
  const DeviceModule::Scratch& scratch = k.scratch;
  detail::ScratchMemory memory(d, m.context, static_cast<CUstream>(stream));
  if (scratch.bytes > 0) {
    // grid is within CUDA's limits (< 2^63 blocks); the product with the bytes per block is
    // checked.
    auto blocks = static_cast<std::uint64_t>(grid[0] * grid[1] * grid[2]);
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(blocks, static_cast<std::uint64_t>(scratch.bytes), &bytes) ||
        __builtin_add_overflow(bytes, static_cast<std::uint64_t>(scratch.align), &bytes)) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << "scratch memory of " << scratch.bytes << " bytes per block x " << blocks
          << " blocks does not fit 64 bits";
    }
    CUdeviceptr scratch_ptr = 0;
    if (CUresult a = memory.allocate(bytes, &scratch_ptr); a != CUDA_SUCCESS) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << "cuMemAllocAsync of " << bytes << " bytes of scratch memory (" << scratch.bytes
          << " per block x " << blocks << " blocks) failed: " << detail::cuda_error_text(a);
    }
    auto align = static_cast<CUdeviceptr>(scratch.align);
    CUdeviceptr aligned = (scratch_ptr + align - 1) / align * align;
    std::memcpy(params[static_cast<std::size_t>(scratch.param)], &aligned, sizeof aligned);
  }
  const bool cluster_launch = cluster[0] * cluster[1] * cluster[2] != 1;
  CUresult r = CUDA_SUCCESS;
  if (!cluster_launch) {
    r = d.cuLaunchKernel(k.function, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                         static_cast<unsigned>(grid[2]), static_cast<unsigned>(block[0]),
                         static_cast<unsigned>(block[1]), static_cast<unsigned>(block[2]),
                         static_cast<unsigned>(smem), static_cast<CUstream>(stream), params,
                         nullptr);
  } else {
    if (m.arch < kFirstClusterArch) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << "it launches thread-block clusters of [" << cluster[0] << ", " << cluster[1] << ", "
          << cluster[2] << "], which need sm_" << kFirstClusterArch
          << " or later; this device is sm_" << m.arch;
    }
    if (d.cuLaunchKernelEx == nullptr) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << "it launches thread-block clusters, and this driver has no cuLaunchKernelEx (CUDA "
             "12.0 or later has it)";
    }
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = static_cast<unsigned>(cluster[0]);
    attribute.value.clusterDim.y = static_cast<unsigned>(cluster[1]);
    attribute.value.clusterDim.z = static_cast<unsigned>(cluster[2]);
    CUlaunchConfig config{};
    config.gridDimX = static_cast<unsigned>(grid[0]);
    config.gridDimY = static_cast<unsigned>(grid[1]);
    config.gridDimZ = static_cast<unsigned>(grid[2]);
    config.blockDimX = static_cast<unsigned>(block[0]);
    config.blockDimY = static_cast<unsigned>(block[1]);
    config.blockDimZ = static_cast<unsigned>(block[2]);
    config.sharedMemBytes = static_cast<unsigned>(smem);
    config.hStream = static_cast<CUstream>(stream);
    config.attrs = &attribute;
    config.numAttrs = 1;
    r = d.cuLaunchKernelEx(&config, k.function, params, nullptr);
  }
  CUresult freed = memory.release();
  if (r == CUDA_SUCCESS && freed != CUDA_SUCCESS) {
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << "cuMemFreeAsync of the launch's scratch memory failed: "
        << detail::cuda_error_text(freed);
  }
  if (r != CUDA_SUCCESS) {
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << "cuLaunchKernel(kernel=\"" << s.image.lowered_names[instance] << "\", grid=[" << grid[0]
        << ", " << grid[1] << ", " << grid[2] << "], block=[" << block[0] << ", " << block[1]
        << ", " << block[2] << "], shared=" << smem
        << (cluster_launch
                ? ", cluster=[" + std::to_string(cluster[0]) + ", " + std::to_string(cluster[1]) +
                      ", " + std::to_string(cluster[2]) + "]"
                : std::string())
        << ") failed: " << detail::cuda_error_text(r);
  }
}

void KernelOp::launch_raw(const LaunchDims& dims, std::span<const RawArg> args, void* stream,
                          int device) const {
  State& s = *state_;
  const OpPlan& p = s.plan();
  if (s.clustered) {  // the cluster is the declared geometry's: a raw launch would drop it
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << "launches thread-block clusters (its geometry's \"cluster\"), which a raw launch "
           "does not make; launch it with its declared arguments";
  }
  if (s.program) {  // Note [several launches]: scratch and later launches are the declared path's
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << (p.spec.when.empty() ? "has scratch or later launches, which a raw launch of its first "
                                  "kernel would skip"
                                : "runs its kernel only when its tests on tensor values hold "
                                  "(\"when\"), which a raw launch cannot read")
        << "; launch it with its declared arguments";
  }
  // A raw launch names no config and cannot evaluate configs' requires (they read the call's
  // sizes and pointers, which a raw launch does not declare): refused rather than run unchecked.
  for (std::size_t c = 0; c < p.configs.size(); ++c) {
    if (!p.configs[c].requirements.empty()) {
      KERNELOP_RAISE(s.error(ErrorKind::Launch))
          << "its tactics have requirements (tactic " << c << ": '"
          << p.configs[c].requirements[0].text
          << "'), which a raw launch cannot check; launch it with its declared arguments";
    }
  }
  if (!p.structs.empty()) {
    KERNELOP_RAISE(s.error(ErrorKind::Launch))
        << "the kernel takes struct parameters (argument " << p.structs[0].first << ", '"
        << p.args[static_cast<std::size_t>(p.structs[0].first)].name
        << "', begins one), which a raw launch does not pack; launch it with its declared "
           "arguments";
  }
  if (args.size() != p.args.size()) {
    std::string params;
    for (std::size_t i = 0; i < p.args.size(); ++i) {
      params += (i ? ", " : "") + p.c_type(p.args[i]) + " " + p.args[i].name;
    }
    KERNELOP_RAISE(s.error(ErrorKind::Type))
        << "the kernel takes " << p.args.size() << " argument(s) (" << params << "), got "
        << args.size();
  }
  auto where = [&](std::size_t i) {
    return "argument " + std::to_string(i) + " ('" + p.args[i].name + "', " + p.c_type(p.args[i]) +
           ")";
  };
  // The instance whose pointer dtypes match the tensors (dtype-generic kernels).
  int instance = -1;
  for (std::size_t inst = 0; inst < p.instances.size() && instance < 0; ++inst) {
    bool match = true;
    for (std::size_t i = 0; i < args.size() && match; ++i) {
      if (!p.args[i].is_pointer() || !args[i].is_tensor) continue;
      auto want = detail::bound_dtype(p, static_cast<int>(inst), p.element(p.args[i]));
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
    KERNELOP_RAISE(s.error(ErrorKind::Type)) << "no instantiation of " << p.spec.kernel_name
                                             << " takes tensors of dtypes (" << dtypes << ")";
  }
  instance = std::max(instance, 0);  // one instance: the loop below names the mismatch
  PackedArgs packed;
  detail::TensorChecker tensors(p.op_name, where);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ArgSlot& a = p.args[i];
    const RawArg& v = args[i];
    void* slot = packed.slot(i);
    if (a.is_pointer()) {
      if (!v.is_tensor) {
        KERNELOP_RAISE(s.error(ErrorKind::Type))
            << where(i) << " must be a tensor, got " << scalar_kind_name(v.scalar.kind);
      }
      auto want = detail::bound_dtype(p, instance, p.element(a));
      if (want && *want != v.tensor.dtype) {
        KERNELOP_RAISE(s.error(ErrorKind::Type)) << where(i) << " must be " << dtype_name(*want)
                                                 << ", got " << dtype_name(v.tensor.dtype);
      }
      tensors.check(v.tensor, i);
      detail::pack_pointer(slot, v.tensor.data);
      continue;
    }
    if (v.is_tensor)
      KERNELOP_RAISE(s.error(ErrorKind::Type)) << where(i) << " is passed by value, got a tensor";
    const ScalarArg& x = v.scalar;
    bool is_int = a.value_type == ScalarType::Int || a.value_type == ScalarType::Int64;
    if ((a.value_type == ScalarType::Bool) != (x.kind == ScalarArg::Kind::Bool) ||
        (is_int && x.kind != ScalarArg::Kind::Int)) {
      KERNELOP_RAISE(s.error(ErrorKind::Type)) << where(i) << " must be "
                                               << (a.value_type == ScalarType::Bool ? "a bool"
                                                   : is_int                         ? "an int"
                                                                                    : "a float")
                                               << ", got " << scalar_kind_name(x.kind);
    }
    if (a.value_type == ScalarType::Int) {
      detail::check_int32(
          p.op_name, x.i, [&] { return where(i); }, "");
    }
    detail::pack_scalar(slot, a.value_type, x);
  }
  int tensor_device = tensors.device() >= 0 ? tensors.device() : std::max(device, 0);
  if (device >= 0 && device != tensor_device) {
    KERNELOP_RAISE(s.error(ErrorKind::Launch)) << "the tensors are on device " << tensor_device
                                               << " but the launch asks for device " << device;
  }
  check_launch_dims(p.op_name, dims.grid, dims.block, dims.shared_mem);
  s.launch_packed(tensor_device, instance, dims.grid, dims.block, {1, 1, 1}, dims.shared_mem,
                  packed.params.data(), stream);
}

}  // namespace kernelop
