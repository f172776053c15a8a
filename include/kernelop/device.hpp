// Devices, memory, streams and events for programs that launch kernelop ops with no framework of
// their own (the kernelop CLI, C++ hosts, tests, benchmarks). They use the CUDA driver kernelop
// already loads at run time: nothing more to link, and a program without a GPU still starts.
// Every failure throws Error(Launch) naming the driver call and its error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kernelop {

/// The number of CUDA devices (throws when there is no usable driver).
int device_count();

/// Makes the primary context of `device` current for the handle's lifetime (retaining it),
/// restoring the previous context after. Ops load on the device of their tensors themselves;
/// this is for the buffers, streams and events below, which belong to the current context.
class DeviceContext {
 public:
  explicit DeviceContext(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  int device() const;
  /// Waits for all work of the context (cuCtxSynchronize).
  void synchronize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Device memory of the current context, owned by the handle.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// `bytes` may be 0 (a distinct one-byte allocation).
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  void* get() const { return reinterpret_cast<void*>(ptr_); }  // NOLINT(performance-no-int-to-ptr)
  std::size_t size() const { return bytes_; }
  /// Synchronous copies of the first `bytes` bytes (at most size()).
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  /// Sets every byte (on the legacy default stream).
  void fill_bytes(unsigned char value);

 private:
  unsigned long long ptr_ = 0;  // CUdeviceptr
  std::size_t bytes_ = 0;
};

/// A non-blocking stream of the current context; get() is the CUstream to pass to launches.
class DeviceStream {
 public:
  DeviceStream();
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  void* get() const { return stream_; }
  void synchronize() const;

 private:
  void* stream_ = nullptr;  // CUstream
};

/// A timing event of the current context.
class DeviceEvent {
 public:
  DeviceEvent();
  ~DeviceEvent();
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  DeviceEvent(DeviceEvent&& other) noexcept;
  DeviceEvent& operator=(DeviceEvent&&) = delete;
  void record(const DeviceStream& stream) const;
  /// Records on a CUstream of the current context (e.g. the caller's stream of a launch).
  void record(void* stream) const;
  /// Milliseconds from `start` to this event; waits for this event to complete.
  float since(const DeviceEvent& start) const;

 private:
  void* event_ = nullptr;  // CUevent
};

}  // namespace kernelop
