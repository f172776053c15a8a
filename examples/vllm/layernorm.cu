// vLLM's RMSNorm kernels as their authors wrote them: the device code of vLLM's
// csrc/layernorm_kernels.cu, byte for byte (scripts/fetch-vllm), with the headers it includes
// before it (of CUB, the block reduction it uses). Host headers are shimmed (shim/).
#include "kernelop_vllm_std.h"

#include <cub/block/block_reduce.cuh>
#include <cuda/std/functional>

// CUB 3 (CUDA 13) dropped cub::Sum, which vLLM 0.10.2 (built for CUDA 12) still names.
#if CCCL_MAJOR_VERSION >= 3
namespace cub {
using Sum = cuda::std::plus<>;
}  // namespace cub
#endif

#include "type_convert.cuh"  // what the device code below includes first

#include "layernorm_kernels_device.cuh"  // vLLM's device code
