// The baseline of bench/jax_bench.py: the hand-written XLA FFI handler a JAX user writes for one
// kernel, here examples/relu.cu's relu (the very kernel kernelop's relu op launches, with the same
// 256-thread blocks), built by the bench with nvcc against jaxlib's FFI headers. Command-buffer
// compatible, as kernelop's target is.
#include <cuda_runtime.h>

#include "../../examples/relu.cu"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

static ffi::Error hand_relu(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  if (x.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("relu: float32 only");
  const int n = static_cast<int>(x.element_count());
  if (n > 0) {
    relu<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(x.untyped_data()), n,
                                              static_cast<float*>(y->untyped_data()));
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return ffi::Error::Internal(cudaGetErrorString(err));
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(HandRelu, hand_relu,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>(),
                              {ffi::Traits::kCmdBufferCompatible});
