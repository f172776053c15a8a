// A CUDA driver that runs nothing and records launches: built as libcuda.so.1 into its own
// folder, which a test puts first on LD_LIBRARY_PATH, so that the whole launch path (module
// load, argument packing, cuLaunchKernel) runs on a machine without a GPU. One device, sm_90.
// The test reads what was launched through fake_cuda_launches().
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

std::mutex mu;
std::set<CUfunction> non_portable;  // functions allowed clusters above 8 blocks
CUcontext current = nullptr;
const auto kPrimary = reinterpret_cast<CUcontext>(0x1000);
std::vector<std::string> function_names;      // a CUfunction is its index + 1
std::vector<int> param_sizes;                 // bytes of each parameter a launch records
std::vector<std::string> launches;            // one text per launch
std::vector<std::string> memory_ops;          // one text per memset or device copy
std::map<CUdeviceptr, std::string> contents;  // what a test put at an address (host reads)
bool capturing = false;                       // streams report an active capture

std::string hex_of(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[v & 15]);
    v >>= 4;
  } while (v);
  return "0x" + out;
}
void note(std::string text) {
  std::lock_guard lock(mu);
  memory_ops.push_back(std::move(text));
}

template <class T>
CUresult ok(T* out, T v) {
  if (out) *out = v;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

/// The test's view: the bytes of each kernel parameter, which each launch records in hex.
void fake_cuda_set_param_sizes(const int* sizes, int n) {
  std::lock_guard lock(mu);
  param_sizes.assign(sizes, sizes + n);
}
/// Memsets and device-to-device copies recorded since the last call, one per line, as
/// fake_cuda_launches() gives launches.
/// Every kernel looked up so far (cuModuleGetFunction), one per line; never cleared.
const char* fake_cuda_functions() {
  std::lock_guard lock(mu);
  static std::string out;
  out.clear();
  for (const std::string& f : function_names) out += f + "\n";
  return out.c_str();
}

/// Bytes a device-to-host copy from `at` reads (a test's tensor values, Note [host reads]).
void fake_cuda_set_memory(std::uint64_t at, const void* bytes, int n) {
  std::lock_guard lock(mu);
  contents[at].assign(static_cast<const char*>(bytes), static_cast<std::size_t>(n));
}
/// Whether streams report an active capture from now on.
// The compute capability the device reports (major * 10 + minor; sm_90 unless a test says).
std::atomic<int> arch{90};
void fake_cuda_set_arch(int a) {
  arch = a;
}

void fake_cuda_set_capturing(int on) {
  std::lock_guard lock(mu);
  capturing = on != 0;
}

const char* fake_cuda_memory_ops() {
  std::lock_guard lock(mu);
  static std::string out;
  out.clear();
  for (const std::string& m : memory_ops) out += m + "\n";
  memory_ops.clear();
  return out.c_str();
}
/// Launches recorded since the last call, as text ("fn grid block smem stream | params"),
/// separated by newlines; the caller frees nothing (the string lives until the next call).
const char* fake_cuda_launches() {
  static std::string out;
  std::lock_guard lock(mu);
  out.clear();
  for (const auto& l : launches) out += l + "\n";
  launches.clear();
  return out.c_str();
}

CUresult cuInit(unsigned) {
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult, const char** s) {
  return ok(s, "CUDA_ERROR_FAKE");
}
CUresult cuGetErrorString(CUresult, const char** s) {
  return ok(s, "fake driver");
}
CUresult cuDeviceGetCount(int* n) {
  return ok(n, 1);
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  return ordinal == 0 ? ok(d, CUdevice{0}) : CUDA_ERROR_INVALID_DEVICE;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "Fake sm_90", static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return ok(v, arch.load() / 10);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return ok(v, arch.load() % 10);
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      return ok(v, 232448);
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return ok(v, 50 << 20);
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return ok(v, 132);  // an H100 SXM
    default:
      return ok(v, 1024);
  }
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  return ok(c, kPrimary);
}
CUresult cuDevicePrimaryCtxRelease(CUdevice) {
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* c) {
  std::lock_guard lock(mu);
  return ok(c, current);
}
CUresult cuCtxSetCurrent(CUcontext c) {
  std::lock_guard lock(mu);
  current = c;
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize() {
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* v) {
  return ok(v, 13000);  // CUDA 13.0's driver (580)
}
// As driver 580 does: Tile IR bytecode is an image it cannot load.
CUresult cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned, CUjit_option*, void**) {
  if (std::memcmp(image, "\x7fTileIR", 7) == 0) return CUDA_ERROR_INVALID_IMAGE;
  return ok(m, reinterpret_cast<CUmodule>(0x2000));
}
CUresult cuModuleUnload(CUmodule) {
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  std::lock_guard lock(mu);
  function_names.emplace_back(name);
  return ok(f, reinterpret_cast<CUfunction>(function_names.size()));
}
CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  return ok(v, a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0);
}
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  std::lock_guard lock(mu);
  if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED && v == 1) non_portable.insert(f);
  return CUDA_SUCCESS;
}
namespace {
// One launch as text: "<kernel> grid=.. block=.. smem=.. stream=..[ cluster=x,y,z] | params".
void record_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned smem, CUstream stream, void** params,
                   const std::string& cluster) {
  std::lock_guard lock(mu);
  auto index = reinterpret_cast<std::uintptr_t>(f);
  std::string l = (index >= 1 && index <= function_names.size() ? function_names[index - 1]
                                                                : std::string("?")) +
                  " grid=" + std::to_string(gx) + "," + std::to_string(gy) + "," +
                  std::to_string(gz) + " block=" + std::to_string(bx) + "," + std::to_string(by) +
                  "," + std::to_string(bz) + " smem=" + std::to_string(smem) +
                  " stream=" + std::to_string(reinterpret_cast<std::uintptr_t>(stream)) + cluster +
                  " |";
  static const char* hex = "0123456789abcdef";
  for (std::size_t i = 0; i < param_sizes.size(); ++i) {
    l += " ";
    const auto* bytes = static_cast<const unsigned char*>(params[i]);
    for (int b = 0; b < param_sizes[i]; ++b) {
      l += hex[bytes[b] >> 4];
      l += hex[bytes[b] & 15];
    }
  }
  launches.push_back(l);
}
}  // namespace

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream stream, void** params,
                        void**) {
  record_launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, "");
  return CUDA_SUCCESS;
}
// As sm_90's driver: the one attribute kernelop sets is the cluster, which must divide the grid.
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void**) {
  std::string cluster;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) return CUDA_ERROR_INVALID_VALUE;
    const auto& d = c->attrs[i].value.clusterDim;
    if (d.x == 0 || d.y == 0 || d.z == 0 || c->gridDimX % d.x || c->gridDimY % d.y ||
        c->gridDimZ % d.z)
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    bool allowed = false;
    {
      std::lock_guard lock(mu);
      allowed = non_portable.count(f) > 0;
    }
    if (d.x * d.y * d.z > (allowed ? 16u : 8u)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    cluster =
        " cluster=" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z);
  }
  record_launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                c->sharedMemBytes, c->hStream, params, cluster);
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr* p, size_t) {
  return ok(p, CUdeviceptr{0x10000});
}
CUresult cuMemFree(CUdeviceptr) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr, const void*, size_t) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void*, CUdeviceptr, size_t) {
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr, unsigned char, size_t) {
  return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream* s, unsigned) {
  return ok(s, reinterpret_cast<CUstream>(0x4000));
}
CUresult cuStreamDestroy(CUstream) {
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream) {
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned) {
  return ok(e, reinterpret_cast<CUevent>(0x5000));
}
CUresult cuEventDestroy(CUevent) {
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent, CUstream) {
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent) {
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent, CUevent) {
  return ok(ms, 1.0f);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream) {
  note("copy " + hex_of(to) + " <- " + hex_of(from) + " bytes=" + std::to_string(bytes));
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream) {
  note("memset8 " + hex_of(p) + " " + hex_of(v) + " x" + std::to_string(n));
  return CUDA_SUCCESS;
}
CUresult cuMemsetD16Async(CUdeviceptr p, unsigned short v, size_t n, CUstream) {
  note("memset16 " + hex_of(p) + " " + hex_of(v) + " x" + std::to_string(n));
  return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, CUstream) {
  note("memset32 " + hex_of(p) + " " + hex_of(v) + " x" + std::to_string(n));
  return CUDA_SUCCESS;
}
CUresult cuMemsetD2D32Async(CUdeviceptr p, size_t pitch, unsigned v, size_t width, size_t height,
                            CUstream) {
  note("memset2d32 " + hex_of(p) + " pitch=" + std::to_string(pitch) + " " + hex_of(v) + " " +
       std::to_string(width) + "x" + std::to_string(height));
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* s) {
  std::lock_guard lock(mu);
  return ok(s, capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE);
}
CUresult cuMemcpyDtoHAsync(void* to, CUdeviceptr from, size_t bytes, CUstream) {
  note("read " + hex_of(from) + " bytes=" + std::to_string(bytes));
  std::lock_guard lock(mu);
  std::string& c = contents[from];
  c.resize(std::max(c.size(), bytes), '\0');
  std::memcpy(to, c.data(), bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream stream) {
  // Distinct addresses, so that a test sees which allocation each parameter is.
  static std::atomic<int> async_allocations{0};
  CUdeviceptr at = 0x20000 + 0x10000 * static_cast<CUdeviceptr>(async_allocations++);
  note("allocAsync " + std::to_string(bytes) + " bytes -> " + hex_of(at) +
       " stream=" + std::to_string(reinterpret_cast<std::uintptr_t>(stream)));
  return ok(p, at);
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream stream) {
  note("freeAsync " + hex_of(p) +
       " stream=" + std::to_string(reinterpret_cast<std::uintptr_t>(stream)));
  return CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture(CUstream, CUstreamCaptureMode) {
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream, CUgraph* g) {
  return ok(g, reinterpret_cast<CUgraph>(0x7000));
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph, unsigned long long) {
  return ok(e, reinterpret_cast<CUgraphExec>(0x8000));
}
CUresult cuGraphLaunch(CUgraphExec, CUstream) {
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec) {
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph) {
  return CUDA_SUCCESS;
}

}  // extern "C"
