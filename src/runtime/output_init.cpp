// Note [initialised outputs] at launch: each filled output is a cuMemset*Async and each cloned
// one a cuMemcpyDtoDAsync, on the launch's stream before the kernel (a CUDA graph capture records
// them as memset and copy nodes); a clone whose output is its input's own buffer (a donated input,
// KernelOp::donatable_input) copies nothing. Each tuning run initialises its scratch outputs the
// same way (tuner.cpp); launch_raw, which passes the caller's own arguments, initialises nothing.
#include <cstring>
#include <string>

#include "runtime/kernel_op_state.hpp"

namespace kernelop {

void KernelOp::State::init_outputs(const TensorPtrs& ptrs, std::span<const TensorView> outputs,
                                   int device, void* stream) {
  const OpPlan& p = plan();
  const DeviceModule& m = module_for(device);
  const Driver& d = *m.driver;
  detail::ScopedContext scope(d, m.context);
  auto s = static_cast<CUstream>(stream);
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const OutputPlan& out = p.outputs[o];
    const TensorView& t = outputs[o];
    auto numel = static_cast<std::size_t>(t.shape.numel());
    if (numel == 0) continue;
    const std::string& name = p.tensors[static_cast<std::size_t>(out.slot)].name;
    auto ptr = reinterpret_cast<CUdeviceptr>(ptrs[static_cast<std::size_t>(out.slot)]);
    if (out.fill) {
      std::optional<std::uint64_t> bits = fill_bits(t.dtype, out.fill->value);
      if (!bits) {
        KERNELOP_RAISE(error(ErrorKind::Type))
            << "output '" << name << "' is filled with " << out.fill->value
            << " before the launch, which " << dtype_name(t.dtype) << " cannot hold as it is";
      }
      std::size_t size = dtype_size(t.dtype);
      auto lo = static_cast<std::uint32_t>(*bits);
      auto hi = static_cast<std::uint32_t>(*bits >> 32);
      CUresult r = CUDA_SUCCESS;
      if (size == 1) {
        r = d.cuMemsetD8Async(ptr, static_cast<unsigned char>(lo), numel, s);
      } else if (size == 2) {
        r = d.cuMemsetD16Async(ptr, static_cast<unsigned short>(lo), numel, s);
      } else if (size == 4 || hi == lo) {
        r = d.cuMemsetD32Async(ptr, lo, numel * (size / 4), s);
      } else {
        // 8-byte elements whose halves differ: the low words, then the high ones, each as a
        // column of `numel` rows of one 32-bit value, 8 bytes apart (little-endian).
        r = d.cuMemsetD2D32Async(ptr, 8, lo, 1, numel, s);
        if (r == CUDA_SUCCESS) r = d.cuMemsetD2D32Async(ptr + 4, 8, hi, 1, numel, s);
      }
      check_cuda(r, "cuMemsetAsync", "op " + p.op_name + ", output '" + name + "'");
    } else if (out.clone_slot >= 0) {
      const void* from = ptrs[static_cast<std::size_t>(out.clone_slot)];
      // Note [donated inputs]: the output is the input's own buffer, which holds the copy already.
      if (from == reinterpret_cast<const void*>(ptr)) continue;
      check_cuda(d.cuMemcpyDtoDAsync(ptr, reinterpret_cast<CUdeviceptr>(from),
                                     numel * dtype_size(t.dtype), s),
                 "cuMemcpyDtoDAsync", "op " + p.op_name + ", output '" + name + "'");
    }
  }
}

}  // namespace kernelop
