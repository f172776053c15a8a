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
  std::string why;
  const Driver* d = get(&why);
  if (!d) KERNELOP_FAIL(Launch) << "the CUDA driver is not available: " << why;
  return *d;
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

void check_cuda(CUresult result, const char* call, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
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

ScopedContext::ScopedContext(CUcontext ctx) {
  const Driver& d = Driver::require();
  check_cuda(d.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent", "");
  if (previous_ != ctx) {
    check_cuda(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", "");
    switched_ = true;
  }
}

ScopedContext::~ScopedContext() {
  if (switched_) {
    if (const Driver* d = Driver::get()) d->cuCtxSetCurrent(previous_);
  }
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  // cuMemAlloc rejects 0 bytes; a one-byte buffer keeps the pointer valid and distinct.
  check_cuda(Driver::require().cuMemAlloc(&ptr_, bytes ? bytes : 1), "cuMemAlloc",
             std::to_string(bytes) + " bytes");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    if (const Driver* d = Driver::get()) d->cuMemFree(ptr_);
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer gone(std::move(*this));
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  check_cuda(Driver::require().cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD",
             std::to_string(bytes) + " bytes");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes == 0) return;
  check_cuda(Driver::require().cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH",
             std::to_string(bytes) + " bytes");
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  check_cuda(Driver::require().cuMemsetD8(ptr_, value, bytes_ ? bytes_ : 1), "cuMemsetD8", "");
}

Stream::Stream() {
  check_cuda(Driver::require().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate",
             "");
}
Stream::~Stream() {
  if (const Driver* d = Driver::get()) d->cuStreamDestroy(stream_);
}
void Stream::synchronize() const {
  check_cuda(Driver::require().cuStreamSynchronize(stream_), "cuStreamSynchronize", "");
}

Event::Event() {
  check_cuda(Driver::require().cuEventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate", "");
}
Event::~Event() {
  if (const Driver* d = Driver::get()) d->cuEventDestroy(event_);
}
void Event::record(CUstream stream) const {
  check_cuda(Driver::require().cuEventRecord(event_, stream), "cuEventRecord", "");
}
float Event::since(const Event& start) const {
  const Driver& d = Driver::require();
  check_cuda(d.cuEventSynchronize(event_), "cuEventSynchronize", "");
  float ms = 0;
  check_cuda(d.cuEventElapsedTime(&ms, start.event_, event_), "cuEventElapsedTime", "");
  return ms;
}

}  // namespace kernelop::detail
