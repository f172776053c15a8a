// vLLM's kernels (examples/vllm/, the same sources kernelop compiles) built by nvcc and
// launched with <<<>>> as vLLM's own host code launches them (see nvcc_kernels.hpp).
#include "../examples/vllm/activation.cu"
#include "../examples/vllm/layernorm.cu"
#include "../examples/vllm/pos_encoding.cu"
#include "nvcc_kernels.hpp"

#include <algorithm>

void nvcc_vllm_silu_and_mul_f16(void* out, const void* in, int tokens, int d, cudaStream_t s) {
  vllm::act_and_mul_kernel<__half, vllm::silu_kernel<__half>, true>
      <<<tokens, std::min(d, 1024), 0, s>>>(static_cast<__half*>(out),
                                            static_cast<const __half*>(in), d);
}
void nvcc_vllm_rms_norm_f16(void* out, const void* in, long long stride, const void* w, float eps,
                            int tokens, int hidden, cudaStream_t s) {
  vllm::rms_norm_kernel<__half><<<tokens, std::min(hidden, 1024), 0, s>>>(
      static_cast<__half*>(out), static_cast<const __half*>(in), stride,
      static_cast<const __half*>(w), eps, tokens, hidden);
}
void nvcc_vllm_fused_add_rms_norm_f16(void* in, long long stride, void* res, const void* w,
                                      float eps, int tokens, int hidden, cudaStream_t s) {
  int block = std::min(hidden, tokens < 256 ? 1024 : 256);
  vllm::fused_add_rms_norm_kernel<__half, 8>
      <<<tokens, block, 0, s>>>(static_cast<__half*>(in), stride, static_cast<__half*>(res),
                                static_cast<const __half*>(w), eps, tokens, hidden);
}
void nvcc_vllm_rotary_neox_f16(const long long* pos, void* q, void* k, const void* cache,
                               int rot_dim, long long q_stride, long long k_stride, int head_size,
                               int heads, int kv_heads, int tokens, cudaStream_t s) {
  int block = static_cast<int>(std::min<long long>(1LL * heads * rot_dim / 2, 512));
  vllm::rotary_embedding_kernel<__half, true>
      <<<tokens, block, 0, s>>>(reinterpret_cast<const int64_t*>(pos), static_cast<__half*>(q),
                                static_cast<__half*>(k), static_cast<const __half*>(cache), rot_dim,
                                q_stride, k_stride, head_size, heads, kv_heads, head_size);
}
