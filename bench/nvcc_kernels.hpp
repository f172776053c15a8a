// The example kernels built by nvcc and launched with <<<>>>: the baseline kernelop's device
// times are compared against. Geometry matches the examples' specs.
#pragma once

#include <cuda_runtime.h>

void nvcc_relu(const float* x, int n, float* y, cudaStream_t s);
void nvcc_sigmoid(const float* x, int n, float* y, cudaStream_t s);
void nvcc_scale(const float* x, float alpha, int n, float* y, cudaStream_t s);
void nvcc_sin_cos(const float* x, int n, float* sin_out, float* cos_out, cudaStream_t s);
void nvcc_add(const float* a, const float* b, int n, float* out, cudaStream_t s);
void nvcc_relu_generic_f32(const float* x, int n, float* y, cudaStream_t s);
void nvcc_bias_add_2d(const float* x, const float* bias, int batch, int rows, int cols, float* y,
                      cudaStream_t s);
void nvcc_rowsum(const float* x, int rows, int cols, float* y, cudaStream_t s);
void nvcc_softmax(const float* x, int rows, int cols, float* y, cudaStream_t s);
void nvcc_repeat2(const float* x, int rows, int cols, float* y, cudaStream_t s);

// vLLM's kernels (bench/nvcc_vllm.cu; built when scripts/fetch-vllm has run), float16.
void nvcc_vllm_silu_and_mul_f16(void* out, const void* in, int tokens, int d, cudaStream_t s);
void nvcc_vllm_rms_norm_f16(void* out, const void* in, long long stride, const void* w, float eps,
                            int tokens, int hidden, cudaStream_t s);
void nvcc_vllm_fused_add_rms_norm_f16(void* in, long long stride, void* res, const void* w,
                                      float eps, int tokens, int hidden, cudaStream_t s);
void nvcc_vllm_rotary_neox_f16(const long long* pos, void* q, void* k, const void* cache,
                               int rot_dim, long long q_stride, long long k_stride, int head_size,
                               int heads, int kv_heads, int tokens, cudaStream_t s);
