// kernelop/device.hpp over the dynamically loaded driver.
#include "kernelop/device.hpp"

#include <utility>

#include "kernelop/error.hpp"
#include "runtime/driver.hpp"

namespace kernelop {

using detail::check_cuda;
using detail::Driver;

namespace {
CUstream as_stream(void* s) {
  return static_cast<CUstream>(s);
}
CUevent as_event(void* e) {
  return static_cast<CUevent>(e);
}
}  // namespace

int device_count() {
  int n = 0;
  check_cuda(Driver::require().cuDeviceGetCount(&n), "cuDeviceGetCount", "");
  return n;
}

struct DeviceContext::Impl {
  explicit Impl(int device) : primary(device), scope(primary.get()) {}
  detail::PrimaryContext primary;
  detail::ScopedContext scope;
};

DeviceContext::DeviceContext(int device) : impl_(std::make_unique<Impl>(device)) {}
DeviceContext::~DeviceContext() = default;
int DeviceContext::device() const {
  return impl_->primary.device();
}
void DeviceContext::synchronize() const {
  check_cuda(Driver::require().cuCtxSynchronize(), "cuCtxSynchronize", "");
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  // cuMemAlloc rejects 0 bytes; a one-byte buffer keeps the pointer valid and distinct.
  CUdeviceptr ptr = 0;
  check_cuda(Driver::require().cuMemAlloc(&ptr, bytes ? bytes : 1), "cuMemAlloc",
             std::to_string(bytes) + " bytes");
  ptr_ = ptr;
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
  if (bytes > bytes_) {
    KERNELOP_FAIL(Launch) << "upload of " << bytes << " bytes into a buffer of " << bytes_;
  }
  if (bytes == 0) return;
  check_cuda(Driver::require().cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD",
             std::to_string(bytes) + " bytes");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) {
    KERNELOP_FAIL(Launch) << "download of " << bytes << " bytes from a buffer of " << bytes_;
  }
  if (bytes == 0) return;
  check_cuda(Driver::require().cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH",
             std::to_string(bytes) + " bytes");
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  check_cuda(Driver::require().cuMemsetD8(ptr_, value, bytes_ ? bytes_ : 1), "cuMemsetD8", "");
}

DeviceStream::DeviceStream() {
  CUstream s = nullptr;
  check_cuda(Driver::require().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "");
  stream_ = s;
}
DeviceStream::~DeviceStream() {
  if (const Driver* d = Driver::get()) d->cuStreamDestroy(as_stream(stream_));
}
void DeviceStream::synchronize() const {
  check_cuda(Driver::require().cuStreamSynchronize(as_stream(stream_)), "cuStreamSynchronize", "");
}

DeviceEvent::DeviceEvent() {
  CUevent e = nullptr;
  check_cuda(Driver::require().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate", "");
  event_ = e;
}
DeviceEvent::~DeviceEvent() {
  if (!event_) return;
  if (const Driver* d = Driver::get()) d->cuEventDestroy(as_event(event_));
}
DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept : event_(other.event_) {
  other.event_ = nullptr;
}
void DeviceEvent::record(const DeviceStream& stream) const {
  record(stream.get());
}
void DeviceEvent::record(void* stream) const {
  check_cuda(Driver::require().cuEventRecord(as_event(event_), as_stream(stream)), "cuEventRecord",
             "");
}
float DeviceEvent::since(const DeviceEvent& start) const {
  const Driver& d = Driver::require();
  check_cuda(d.cuEventSynchronize(as_event(event_)), "cuEventSynchronize", "");
  float ms = 0;
  check_cuda(d.cuEventElapsedTime(&ms, as_event(start.event_), as_event(event_)),
             "cuEventElapsedTime", "");
  return ms;
}

}  // namespace kernelop
