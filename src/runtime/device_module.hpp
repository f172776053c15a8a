// An op's module on one device: the image chosen for the device, loaded in its primary context,
// with each instance's function and limits.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernelop/image.hpp"
#include "kernelop/runtime.hpp"
#include "runtime/driver.hpp"

namespace kernelop::detail {

/// Whether loading and tuning log to stderr: LoadOptions::log, or KERNELOP_LOG=1.
bool log_enabled(const LoadOptions& options);

/// Move-less and copy-less: owned by the KernelOp that loaded it. The destructor makes the
/// module's context current before unloading it (cuModuleUnload acts on the current context).
struct DeviceModule {
  // What every launch reads comes first and per instance in one record (Note [launch path]).
  const Driver* driver = nullptr;  // loaded: a module exists only once the driver does
  CUcontext context = nullptr;     // ctx->get()
  int max_dynamic_shared = 48 * 1024;
  int arch = 0;      // compute capability, major * 10 + minor (arch() in expressions)
  int sm_count = 0;  // streaming multiprocessors (sm_count() in expressions)
  struct Scratch {
    int bytes = 0, align = 0, param = -1;  // the loaded image's ArchImage::scratch_*
  };
  struct Instance {
    CUfunction function = nullptr;
    int max_threads = 0;
    int static_shared = 0;
    int launch_shared = 0;  // the loaded image's ArchImage::launch_shared
    Scratch scratch;
  };
  std::vector<Instance> instances;
  std::unique_ptr<PrimaryContext> ctx;
  std::vector<CUmodule> modules;  // per compilation (OpPlan::programs)
  LoadInfo info;

  DeviceModule() = default;
  DeviceModule(const DeviceModule&) = delete;
  DeviceModule& operator=(const DeviceModule&) = delete;
  ~DeviceModule();
};

/// Loads `image` on `device`: the exact CUBIN, else a compatible one, else PTX through the
/// driver's JIT. `dynamic_shared`: allow dynamic shared memory beyond the 48 KiB default.
std::unique_ptr<DeviceModule> load_device_module(const CompiledImage& image,
                                                 const LoadOptions& options, int device,
                                                 bool dynamic_shared);

}  // namespace kernelop::detail
