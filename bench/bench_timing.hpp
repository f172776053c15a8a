// What the GPU benchmarks share: CUDA_CHECK, the report table, medians, device time per
// launch, host cost per call.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#define CUDA_CHECK(x)                                                      \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

namespace kernelop::bench {

/// The benchmark's table, printed as it grows and written to a file at the end.
inline std::ostringstream report;
inline void line(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
  report << s << "\n";
}
inline std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kBatch = 10;  // launches per timed sample

// Median milliseconds per launch over `reps` samples, each `enqueue` (kBatch launches) between two
// events on `s`.
inline double median_event_ms(const std::function<void()>& enqueue, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, s);
    enqueue();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms / kBatch);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

// Median device time (ms) per launch over `reps` samples. Each sample brackets a queue of
// kBatch back-to-back launches with events, so the GPU never waits for the host between them:
// one launch per event pair would also time the host's launch cost (the GPU idles from the
// first event until the kernel arrives), which differs between the two sides compared.
inline double device_ms(const std::function<void()>& launch, cudaStream_t s, int reps = 200) {
  for (int i = 0; i < 20; ++i) launch();
  return median_event_ms(
      [&] {
        for (int k = 0; k < kBatch; ++k) launch();
      },
      s, reps);
}

// Median device milliseconds per launch with the launches back to back on the device: a queue of
// kBatch launches captured once as a CUDA graph, the graph timed between events. What a kernel
// costs in a stream the host keeps ahead of (the tuner measures the same way, Note [tuning
// runs]); device_ms's host-launched queues also count the gaps of a host slower than the kernel.
inline double device_ms_graph(const std::function<void()>& launch, cudaStream_t s, int reps = 200) {
  for (int i = 0; i < 3; ++i) launch();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int k = 0; k < kBatch; ++k) launch();
  cudaStreamEndCapture(s, &graph);
  cudaGraphInstantiate(&exec, graph, 0);
  for (int i = 0; i < 5; ++i) cudaGraphLaunch(exec, s);
  double ms = median_event_ms([&] { cudaGraphLaunch(exec, s); }, s, reps);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms;
}

// Median host nanoseconds per call of `launch`, in batches of 256 with a sync between batches.
inline double host_ns(const std::function<void()>& launch, cudaStream_t s, int batches = 300) {
  std::vector<double> per_call;
  for (int batch = 0; batch < batches; ++batch) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 256; ++i) launch();
    auto t1 = std::chrono::steady_clock::now();
    cudaStreamSynchronize(s);
    if (batch >= 20)
      per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 256);
  }
  return median(per_call);
}

// Median host nanoseconds per call of each of `launches`, interleaved batch by batch (a batch of
// 256 calls of the first, then of the second, ...), so that drift in the machine's state (clock,
// caches, the driver's queues) hits every side alike; `rounds` medians per side, their median.
inline std::vector<double> host_ns_interleaved(const std::vector<std::function<void()>>& launches,
                                               cudaStream_t s, int batches = 300) {
  std::vector<std::vector<double>> per_call(launches.size());
  for (int batch = 0; batch < batches; ++batch) {
    for (std::size_t k = 0; k < launches.size(); ++k) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 256; ++i) launches[k]();
      auto t1 = std::chrono::steady_clock::now();
      cudaStreamSynchronize(s);
      if (batch >= 20)
        per_call[k].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 256);
    }
  }
  std::vector<double> out;
  for (auto& v : per_call) out.push_back(median(v));
  return out;
}

}  // namespace kernelop::bench
