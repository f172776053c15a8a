/* scale_demo.c:
 *   cc -std=c11 scale_demo.c -I<prefix>/include -I/usr/local/cuda/include \
 *      <prefix>/lib/libkernelop_runtime.a <prefix>/lib/libkernelop_core.a \
 *      -L/usr/local/cuda/lib64 -lcudart_static -lstdc++ -ldl -lpthread -lrt -o scale_demo */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernelop/c_api.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  kop_op* op = NULL;
  if (kop_load_package(argv[1], &op) != KOP_OK) {
    fprintf(stderr, "load: %s\n", kop_last_error());
    return 1;
  }
  printf("%s\n", kop_op_schema(op)); /* kernelop_examples::scale(Tensor x, float alpha) -> Tensor */

  enum { N = 1000 };
  int64_t x_shape[1] = {N};
  kop_tensor x = {NULL, KOP_FLOAT32, /*device=*/0, /*rank=*/1, x_shape, NULL};
  kop_scalar alpha = {KOP_SCALAR_FLOAT, 2.5, 0};

  /* Ask for the output's shape and dtype; allocate it. */
  int32_t rank = 0, dtype = 0;
  int64_t dims[KOP_MAX_RANK];
  if (kop_op_output_shapes(op, &x, 1, &alpha, 1, &rank, dims, &dtype) != KOP_OK) {
    fprintf(stderr, "shapes: %s\n", kop_last_error());
    return 1;
  }
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= dims[d];

  float host[N];
  for (int i = 0; i < N; ++i) host[i] = (float)i - 500.0f;
  cudaStream_t stream;
  cudaSetDevice(0);
  cudaStreamCreate(&stream);
  cudaMalloc(&x.data, N * sizeof(float));
  cudaMemcpy(x.data, host, sizeof host, cudaMemcpyHostToDevice);
  kop_tensor y = {NULL, dtype, 0, rank, dims, NULL};
  cudaMalloc(&y.data, (size_t)count * sizeof(float));

  if (kop_op_launch(op, &x, 1, &alpha, 1, &y, 1, (void*)stream) != KOP_OK) {
    fprintf(stderr, "launch: %s\n", kop_last_error());
    return 1;
  }
  cudaStreamSynchronize(stream); /* kernel faults would show up here, not in kop_op_launch */
  cudaMemcpy(host, y.data, sizeof host, cudaMemcpyDeviceToHost);
  printf("y[0] = %g, y[999] = %g\n", host[0], host[N - 1]); /* -1250, 1247.5 */

  cudaFree(x.data);
  cudaFree(y.data);
  cudaStreamDestroy(stream);
  kop_op_destroy(op);
  return 0;
}
