// ModuleCache: an op's module per device (module_cache.hpp).
#include "runtime/module_cache.hpp"

#include "runtime/launch_checks.hpp"

namespace kernelop::detail {

const DeviceModule& ModuleCache::get(int device) {
  check_device_index(image_.plan, device);
  auto& slot = devices_[static_cast<std::size_t>(device)];
  if (DeviceModule* m = slot.load(std::memory_order_acquire)) return *m;
  std::lock_guard lock(load_mutex_);
  if (DeviceModule* m = slot.load(std::memory_order_relaxed)) return *m;
  auto m = load_device_module(image_, options_, device, dynamic_shared_);
  DeviceModule* raw = m.get();
  owned_.push_back(std::move(m));
  slot.store(raw, std::memory_order_release);
  return *raw;
}

}  // namespace kernelop::detail
