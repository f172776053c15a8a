// An op's loaded modules, one per device, loaded on first use (Note [launch path] in
// kernelop/runtime.hpp): lock-free reads of a published module, one load per device under the
// cache's mutex.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/device_module.hpp"

namespace kernelop::detail {

class ModuleCache {
 public:
  /// `image` and `options` are the op's and must outlive the cache. `dynamic_shared`: the op may
  /// ask for dynamic shared memory beyond the 48 KiB default.
  ModuleCache(const CompiledImage& image, const LoadOptions& options)
      : image_(image), options_(options) {}
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  void set_dynamic_shared(bool on) { dynamic_shared_ = on; }
  /// The module on `device` (0..kMaxDevices-1, checked), loaded now if it is not yet.
  const DeviceModule& get(int device);

 private:
  const CompiledImage& image_;
  const LoadOptions& options_;
  bool dynamic_shared_ = false;
  std::mutex load_mutex_;
  std::array<std::atomic<DeviceModule*>, kMaxDevices> devices_{};
  std::vector<std::unique_ptr<DeviceModule>> owned_;
};

}  // namespace kernelop::detail
