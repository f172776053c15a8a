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
