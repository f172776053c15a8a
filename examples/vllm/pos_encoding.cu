// vLLM's rotary-embedding kernels as their authors wrote them: the device code of vLLM's
// csrc/pos_encoding_kernels.cu, byte for byte (scripts/fetch-vllm). Host headers are shimmed.
#include "kernelop_vllm_std.h"

#include "cuda_compat.h"  // what the device code below includes first

#include "pos_encoding_kernels_device.cuh"  // vLLM's device code
