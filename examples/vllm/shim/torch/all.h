// kernelop's shim for <torch/all.h> in vLLM's device code: the names that code takes from
// PyTorch, for NVRTC (which has no libtorch). c10::Half and c10::BFloat16 are CUDA's own
// __half and __nv_bfloat16 here, so a kernel instantiated for them takes the pointers kernelop
// passes for float16 and bfloat16 tensors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// What including the CUDA runtime through PyTorch defines; vLLM's type_convert.cuh tests it.
#ifndef CUDA_VERSION
#define CUDA_VERSION (__CUDACC_VER_MAJOR__ * 1000 + __CUDACC_VER_MINOR__ * 10)
#endif

namespace c10 {
using Half = __half;
using BFloat16 = __nv_bfloat16;
}  // namespace c10
