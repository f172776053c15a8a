// The CUDA driver API, loaded with dlopen so that programs link and run without a driver;
// RAII handles for the contexts kernelop uses (the public ones are in kernelop/device.hpp).
#pragma once

#include <cuda.h>
#include <cstddef>
#include <vector>

#include <memory>
#include <string>
#include <string_view>

namespace kernelop::detail {

// X-macro of every driver entry point kernelop uses. cuda.h maps some names to versioned
// symbols (cuMemAlloc -> cuMemAlloc_v2); the table resolves whatever the macro expands to.
#define KERNELOP_DRIVER_FUNCTIONS(X) \
  X(cuInit)                          \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)                \
  X(cuDeviceGetCount)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetName)                 \
  X(cuDriverGetVersion)              \
  X(cuDeviceGetAttribute)            \
  X(cuDevicePrimaryCtxRetain)        \
  X(cuDevicePrimaryCtxRelease)       \
  X(cuCtxGetCurrent)                 \
  X(cuCtxSetCurrent)                 \
  X(cuCtxSynchronize)                \
  X(cuModuleLoadDataEx)              \
  X(cuModuleUnload)                  \
  X(cuModuleGetFunction)             \
  X(cuFuncGetAttribute)              \
  X(cuFuncSetAttribute)              \
  X(cuLaunchKernel)                  \
  X(cuMemAlloc)                      \
  X(cuMemFree)                       \
  X(cuMemcpyHtoD)                    \
  X(cuMemcpyDtoH)                    \
  X(cuMemsetD8)                      \
  X(cuStreamCreate)                  \
  X(cuStreamDestroy)                 \
  X(cuStreamSynchronize)             \
  X(cuEventCreate)                   \
  X(cuEventDestroy)                  \
  X(cuEventRecord)                   \
  X(cuEventSynchronize)              \
  X(cuEventElapsedTime)              \
  X(cuMemcpyDtoDAsync)               \
  X(cuMemcpyDtoHAsync)               \
  X(cuMemsetD8Async)                 \
  X(cuMemsetD16Async)                \
  X(cuMemsetD32Async)                \
  X(cuMemsetD2D32Async)              \
  X(cuStreamIsCapturing)             \
  X(cuMemAllocAsync)                 \
  X(cuMemFreeAsync)                  \
  X(cuStreamBeginCapture)            \
  X(cuStreamEndCapture)              \
  X(cuGraphInstantiateWithFlags)     \
  X(cuGraphLaunch)                   \
  X(cuGraphExecDestroy)              \
  X(cuGraphDestroy)

struct Driver {
// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is a declarator, not an expression
#define KERNELOP_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  KERNELOP_DRIVER_FUNCTIONS(KERNELOP_DRIVER_MEMBER)
#undef KERNELOP_DRIVER_MEMBER
  /// Optional (CUDA 12.0 and later): only cluster launches need it.
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx = nullptr;

  /// The loaded and initialised driver, or nullptr with the reason in `why` (once per process).
  static const Driver* get(std::string* why = nullptr);
  /// The driver, or Error(Launch) saying why it is unavailable.
  static const Driver& require();
};

/// "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (500): named symbol not found"
std::string cuda_error_text(CUresult result);
[[noreturn]] void fail_cuda(CUresult result, const char* call, std::string_view what);
/// Throws Error(Launch) "<call>(<what>) failed: <name> (<code>): <description>".
inline void check_cuda(CUresult result, const char* call, std::string_view what) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    fail_cuda(result, call, what);
}

/// The primary context of a device, retained for the lifetime of the handle.
class PrimaryContext {
 public:
  explicit PrimaryContext(int device);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  CUcontext get() const { return ctx_; }
  int device() const { return device_; }

 private:
  int device_;
  CUcontext ctx_ = nullptr;
};

/// Makes `ctx` current for a scope when it is not already, restoring the previous one.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx) : ScopedContext(Driver::require(), ctx) {}
  /// With the driver at hand (a launch: no lookup of it).
  ScopedContext(const Driver& driver, CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  const Driver& driver_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

/// Device memory of one call or launch (scratch, a Triton kernel's global scratch), allocated
/// stream-ordered on its stream (a CUDA graph capture records allocation and free nodes) and freed
/// on it when it goes out of scope (errors while unwinding are ignored; release() reports them).
class ScratchMemory {
 public:
  ScratchMemory(const Driver& d, CUcontext ctx, CUstream stream)
      : d_(d), ctx_(ctx), stream_(stream) {}
  ScratchMemory(const ScratchMemory&) = delete;
  ScratchMemory& operator=(const ScratchMemory&) = delete;
  ~ScratchMemory() {
    if (ptrs_.empty()) return;
    ScopedContext scope(d_, ctx_);
    for (CUdeviceptr p : ptrs_) (void)d_.cuMemFreeAsync(p, stream_);
  }
  CUresult allocate(std::size_t bytes, CUdeviceptr* out) {
    ScopedContext scope(d_, ctx_);
    CUresult r = d_.cuMemAllocAsync(out, bytes, stream_);
    if (r == CUDA_SUCCESS) ptrs_.push_back(*out);
    return r;
  }
  // Frees everything now; the first failure's result.
  CUresult release() {
    if (ptrs_.empty()) return CUDA_SUCCESS;  // the hot path: no driver call
    ScopedContext scope(d_, ctx_);
    CUresult first = CUDA_SUCCESS;
    for (CUdeviceptr p : ptrs_) {
      CUresult r = d_.cuMemFreeAsync(p, stream_);
      if (first == CUDA_SUCCESS) first = r;
    }
    ptrs_.clear();
    return first;
  }

 private:
  const Driver& d_;
  CUcontext ctx_;
  CUstream stream_;
  std::vector<CUdeviceptr> ptrs_;
};

}  // namespace kernelop::detail
