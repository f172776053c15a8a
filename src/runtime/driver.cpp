// dlopen of libcuda, error text, and the RAII handles.
#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <mutex>
#include <utility>

#include "kernelop/error.hpp"

namespace kernelop::detail {
namespace {

#define KERNELOP_STRINGIFY2(x) #x
#define KERNELOP_STRINGIFY(x) KERNELOP_STRINGIFY2(x)

struct Loaded {
  Driver driver;
  bool ok = false;
  std::string why;
};

Loaded load_driver() {
  Loaded l;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = ::dlerror();
    l.why = std::string("dlopen(libcuda.so.1) failed: ") + (err ? err : "unknown error");
    return l;
  }
#define KERNELOP_DRIVER_LOAD(name)                                                             \
  l.driver.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, KERNELOP_STRINGIFY(name))); \
  if (!l.driver.name) {                                                                        \
    l.why = "libcuda.so.1 has no " KERNELOP_STRINGIFY(name) " (driver too old?)";              \
    return l;                                                                                  \
  }
  KERNELOP_DRIVER_FUNCTIONS(KERNELOP_DRIVER_LOAD)
#undef KERNELOP_DRIVER_LOAD
  l.driver.cuLaunchKernelEx =
      reinterpret_cast<decltype(&::cuLaunchKernelEx)>(::dlsym(lib, "cuLaunchKernelEx"));
  CUresult r = l.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.driver.cuGetErrorName(r, &name);
    l.why = std::string("cuInit failed: ") + (name ? name : "unknown") + " (" +
            std::to_string(static_cast<int>(r)) + ")";
    return l;
  }
  l.ok = true;  // the library stays loaded for the life of the process
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load_driver();
  return l;
}

}  // namespace

const Driver* Driver::get(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.why;
  return l.ok ? &l.driver : nullptr;
}

const Driver& Driver::require() {
  const Loaded& l = loaded();  // on every launch: no string, one flag
  if (!l.ok) [[unlikely]]
    KERNELOP_FAIL(Launch) << "the CUDA driver is not available: " << l.why;
  return l.driver;
}

std::string cuda_error_text(CUresult result) {
  const Driver* d = Driver::get();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d) {
    d->cuGetErrorName(result, &name);
    d->cuGetErrorString(result, &text);
  }
  return std::string(name ? name : "CUDA_ERROR") + " (" + std::to_string(static_cast<int>(result)) +
         ")" + (text ? std::string(": ") + text : "");
}

void fail_cuda(CUresult result, const char* call, std::string_view what) {
  KERNELOP_FAIL(Launch) << call << "(" << what << ") failed: " << cuda_error_text(result);
}

PrimaryContext::PrimaryContext(int device) : device_(device) {
  const Driver& d = Driver::require();
  CUdevice dev = 0;
  check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet", "device=" + std::to_string(device));
  check_cuda(d.cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain",
             "device=" + std::to_string(device));
}

PrimaryContext::~PrimaryContext() {
  if (const Driver* d = Driver::get()) {
    CUdevice dev = 0;
    if (d->cuDeviceGet(&dev, device_) == CUDA_SUCCESS) d->cuDevicePrimaryCtxRelease(dev);
  }
}

ScopedContext::ScopedContext(const Driver& driver, CUcontext ctx) : driver_(driver) {
  check_cuda(driver_.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent", "");
  if (previous_ != ctx) {
    check_cuda(driver_.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", "");
    switched_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (switched_) driver_.cuCtxSetCurrent(previous_);
}

}  // namespace kernelop::detail
