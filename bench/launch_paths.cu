// Host cost per launch of one kernel (relu, 4096 floats) through each route the CUDA driver and
// runtime offer, interleaved: what KernelOp::launch's own route (cuLaunchKernel through a dlsym'd
// pointer, after cuCtxGetCurrent) is measured against. Rows: the runtime API (<<<>>>,
// cudaLaunchKernel), cuLaunchKernel linked / dlsym'd / through cuGetProcAddress / with a packed
// `extra` buffer, cuLaunchKernelEx, and KernelOp::launch of the NVRTC-compiled example.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <filesystem>

#include "bench_timing.hpp"
#include "kernelop/kernelop.hpp"
#include "nvcc_kernels.hpp"

using namespace kernelop::bench;  // NOLINT(google-build-using-namespace)

__global__ void relu_local(const float* x, int n, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

int main() {
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaFree(nullptr));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  line(std::string("device: ") + prop.name + fmt(" driver %.0f", driver));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int n = 4096;
  float *x, *y;
  CUDA_CHECK(cudaMalloc(&x, n * 4));
  CUDA_CHECK(cudaMalloc(&y, n * 4));
  CUdeviceptr dx = reinterpret_cast<CUdeviceptr>(x), dy = reinterpret_cast<CUdeviceptr>(y);
  int count = n;
  unsigned grid = (n + 255) / 256;

  cudaFunction_t rf;
  CUDA_CHECK(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(relu_local)));
  auto fn = reinterpret_cast<CUfunction>(rf);

  using Launch = decltype(&cuLaunchKernel);
  auto dl = reinterpret_cast<Launch>(dlsym(dlopen("libcuda.so.1", RTLD_NOW), "cuLaunchKernel"));
  void* gpa = nullptr;
  CUdriverProcAddressQueryResult q;
  cuGetProcAddress("cuLaunchKernel", &gpa, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q);
  auto viaproc = reinterpret_cast<Launch>(gpa);

  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);

  kernelop::KernelOp op = kernelop::compile_op(
      std::filesystem::path(KERNELOP_SOURCE_DIR) / "examples" / "relu.json", {});
  std::vector<kernelop::TensorView> in = {
      kernelop::TensorView{x, kernelop::DType::Float32, {n}, {}, 0}};
  std::vector<kernelop::TensorView> out = {
      kernelop::TensorView{y, kernelop::DType::Float32, {n}, {}, 0}};

  struct Row {
    const char* name;
    std::function<void()> f;
    std::vector<double> runs;
  };
  std::vector<Row> rows;
  rows.push_back(
      {"<<<>>> (nvcc, runtime API)", [&] { relu_local<<<grid, 256, 0, s>>>(x, n, y); }, {}});
  rows.push_back({"cudaLaunchKernel(stub)",
                  [&] {
                    void* a[] = {&x, &count, &y};
                    cudaLaunchKernel(reinterpret_cast<const void*>(relu_local), dim3(grid),
                                     dim3(256), a, 0, s);
                  },
                  {}});
  rows.push_back({"cuLaunchKernel (linked)",
                  [&] {
                    void* a[] = {&dx, &count, &dy};
                    cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, s, a, nullptr);
                  },
                  {}});
  rows.push_back({"cuLaunchKernel (dlsym)",
                  [&] {
                    void* a[] = {&dx, &count, &dy};
                    dl(fn, grid, 1, 1, 256, 1, 1, 0, s, a, nullptr);
                  },
                  {}});
  rows.push_back({"cuLaunchKernel (cuGetProcAddress)",
                  [&] {
                    void* a[] = {&dx, &count, &dy};
                    viaproc(fn, grid, 1, 1, 256, 1, 1, 0, s, a, nullptr);
                  },
                  {}});
  rows.push_back({"cuLaunchKernel (extra buffer)",
                  [&] {
                    struct alignas(8) {
                      CUdeviceptr x;
                      int n;
                      CUdeviceptr y;
                    } buf{dx, count, dy};
                    size_t size = sizeof buf;
                    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf,
                                     CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
                    cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, s, nullptr, extra);
                  },
                  {}});
  rows.push_back({"cuLaunchKernelEx",
                  [&] {
                    void* a[] = {&dx, &count, &dy};
                    CUlaunchConfig c{};
                    c.gridDimX = grid;
                    c.gridDimY = c.gridDimZ = 1;
                    c.blockDimX = 256;
                    c.blockDimY = c.blockDimZ = 1;
                    c.hStream = s;
                    cuLaunchKernelEx(&c, fn, a, nullptr);
                  },
                  {}});
  rows.push_back({"cuCtxGetCurrent + cuLaunchKernel",
                  [&] {
                    CUcontext c;
                    cuCtxGetCurrent(&c);
                    void* a[] = {&dx, &count, &dy};
                    cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, s, a, nullptr);
                  },
                  {}});
  rows.push_back({"KernelOp::launch (NVRTC relu)", [&] { op.launch(in, {}, out, s); }, {}});
  rows.push_back({"nvcc_relu (other TU)", [&] { nvcc_relu(x, n, y, s); }, {}});

  std::vector<std::function<void()>> fs;
  for (Row& r : rows) fs.push_back(r.f);
  for (int round = 0; round < 7; ++round) {
    std::vector<double> ns = host_ns_interleaved(fs, s, 100);
    for (std::size_t k = 0; k < rows.size(); ++k) rows[k].runs.push_back(ns[k]);
  }
  line(
      "host ns per launch: median of 7 rounds [min, max of the rounds], each the median of 80 "
      "batches of 256, the rows interleaved batch by batch");
  double base = median(rows[0].runs);
  for (Row& r : rows) {
    double m = median(r.runs);
    line("  " + std::string(r.name) + std::string(36 - std::strlen(r.name), ' ') +
         fmt("%7.0f  [%5.0f, %5.0f]  %.3fx <<<>>>", m,
             *std::min_element(r.runs.begin(), r.runs.end()),
             *std::max_element(r.runs.begin(), r.runs.end()), m / base));
  }
  // A lone driver call, for scale.
  std::vector<double> t;
  for (int b = 0; b < 50; ++b) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) {
      CUcontext c;
      cuCtxGetCurrent(&c);
    }
    t.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
        1000);
  }
  line(fmt("  cuCtxGetCurrent alone %.1f ns", median(t)));
  return 0;
}
