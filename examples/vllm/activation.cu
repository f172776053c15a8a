// vLLM's activation-and-gating kernels as their authors wrote them: the device code of vLLM's
// csrc/activation_kernels.cu, byte for byte (scripts/fetch-vllm extracts it from the pinned
// sdist). Only the host headers it uses are shimmed (shim/).
#include "kernelop_vllm_std.h"

#include "cuda_compat.h"  // what the device code below includes first

#include "activation_kernels_device.cuh"  // vLLM's device code
