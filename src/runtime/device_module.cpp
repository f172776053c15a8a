// Loading an op's image on a device (Note [launch path] in runtime.hpp).
#include "runtime/device_module.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "kernelop/launch_limits.hpp"
#include "kernelop/numbers.hpp"
#include "runtime/image_select.hpp"

namespace kernelop::detail {

bool log_enabled(const LoadOptions& options) {
  return options.log || env_flag("KERNELOP_LOG");
}

namespace {

[[noreturn]] void fail(const CompiledImage& image, const std::string& what) {
  KERNELOP_FAIL(Launch) << "op " << image.plan.op_name << ": " << what;
}

// The kind of image tried first: LoadOptions, or KERNELOP_IMAGE=cubin|ptx|tileir (a process's
// PyTorch ops, whose options are the defaults).
ImageFirst image_first(const CompiledImage& image, const LoadOptions& options) {
  if (options.prefer_tileir) return ImageFirst::TileIr;
  if (options.prefer_ptx) return ImageFirst::Ptx;
  const char* env = std::getenv("KERNELOP_IMAGE");
  if (!env || !*env) return ImageFirst::Cubin;
  std::string_view v(env);
  if (v == "cubin") return ImageFirst::Cubin;
  if (v == "ptx") return ImageFirst::Ptx;
  if (v == "tileir") return ImageFirst::TileIr;
  fail(image, "KERNELOP_IMAGE is '" + std::string(v.substr(0, 40)) +
                  "'; expected cubin, ptx or tileir (the kind of image loaded first)");
}

}  // namespace

DeviceModule::~DeviceModule() {
  if (modules.empty()) return;
  const Driver* d = Driver::get();
  if (!d) return;
  // cuModuleUnload acts on the current context: make the module's own current first, without
  // throwing (at exit the driver may already be shutting down).
  CUcontext previous = nullptr;
  bool switched = d->cuCtxGetCurrent(&previous) == CUDA_SUCCESS && previous != ctx->get() &&
                  d->cuCtxSetCurrent(ctx->get()) == CUDA_SUCCESS;
  for (CUmodule module : modules) d->cuModuleUnload(module);
  if (switched) d->cuCtxSetCurrent(previous);
}

std::unique_ptr<DeviceModule> load_device_module(const CompiledImage& image,
                                                 const LoadOptions& options, int device,
                                                 bool dynamic_shared) {
  const Driver& d = Driver::require();
  int count = 0;
  check_cuda(d.cuDeviceGetCount(&count), "cuDeviceGetCount", "");
  if (device >= count) {
    fail(image, "device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                    " CUDA device(s))");
  }
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<DeviceModule>();
  m->ctx = std::make_unique<detail::PrimaryContext>(device);
  m->context = m->ctx->get();
  m->driver = &d;
  CUdevice dev = 0;
  check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet", std::to_string(device));
  int major = 0, minor = 0, optin = 0, sms = 0;
  check_cuda(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
             "cuDeviceGetAttribute", "compute capability");
  check_cuda(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
             "cuDeviceGetAttribute", "compute capability");
  check_cuda(
      d.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
      "cuDeviceGetAttribute", "shared memory");
  check_cuda(d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
             "cuDeviceGetAttribute", "multiprocessor count");
  char name[256] = {};
  check_cuda(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName", std::to_string(device));
  detail::ScopedContext scope(m->ctx->get());
  // One module per compilation (configs that differ in a define tunable are compiled apart).
  const ArchImage* chosen = nullptr;
  const ImageFirst first = image_first(image, options);
  std::vector<int> program_shared;
  std::vector<DeviceModule::Scratch> program_scratch;
  for (std::size_t program = 0; program < image.plan.programs.size(); ++program) {
    std::vector<ArchImage> candidates;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < image.images.size(); ++i) {
      if (image.images[i].program != static_cast<int>(program)) continue;
      where.push_back(i);
      candidates.push_back(ArchImage{image.images[i].arch, {}, {}, false, 0});
    }
    std::string why;
    int index = select_image(candidates, major, minor, first, &why);
    if (index < 0) fail(image, why + " (device " + std::to_string(device) + " '" + name + "')");
    chosen = &image.images[where[static_cast<std::size_t>(index)]];
    char jit_log[8192] = {};
    CUjit_option jit_options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* jit_values[] = {jit_log, reinterpret_cast<void*>(sizeof jit_log)};
    CUmodule module = nullptr;
    CUresult r = d.cuModuleLoadDataEx(&module, chosen->data.c_str(), 2, jit_options, jit_values);
    if (r != CUDA_SUCCESS) {
      std::string hint;
      if (chosen->is_tileir()) {
        int version = 0;
        if (d.cuDriverGetVersion(&version) == CUDA_SUCCESS && version < 13030) {
          hint = "; drivers compile Tile IR bytecode from CUDA 13.3 on (this one is CUDA " +
                 std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) + ")";
        }
        hint += first == ImageFirst::TileIr
                    ? "; the bytecode was loaded because KERNELOP_IMAGE=tileir or "
                      "LoadOptions::prefer_tileir asked for it"
                    : "; build the op with a CUBIN for sm_" + std::to_string(major * 10 + minor);
      }
      fail(image, "cuModuleLoadDataEx(" + chosen->arch + " image on device " +
                      std::to_string(device) + " '" + name +
                      "') failed: " + detail::cuda_error_text(r) + hint +
                      (jit_log[0] ? std::string("\n") + jit_log : ""));
    }
    m->modules.push_back(module);
    program_shared.push_back(chosen->launch_shared);
    program_scratch.push_back(
        {chosen->scratch_bytes, chosen->scratch_align, chosen->scratch_param});
  }
  for (std::size_t inst = 0; inst < image.lowered_names.size(); ++inst) {
    const std::string& lowered = image.lowered_names[inst];
    const auto& config =
        image.plan.configs[static_cast<std::size_t>(image.plan.instances[inst].config)];
    CUmodule module = m->modules[static_cast<std::size_t>(config.program)];
    CUfunction fn = nullptr;
    check_cuda(d.cuModuleGetFunction(&fn, module, lowered.c_str()), "cuModuleGetFunction",
               "kernel=\"" + lowered + "\", op " + image.plan.op_name);
    int threads = 0, shared = 0;
    check_cuda(d.cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
               "cuFuncGetAttribute", lowered);
    check_cuda(d.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
               "cuFuncGetAttribute", lowered);
    if (dynamic_shared) {
      // Allow dynamic shared memory beyond the 48 KiB default, up to what the device offers.
      check_cuda(
          d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - shared),
          "cuFuncSetAttribute", lowered);
    }
    // A cluster launch of more than 8 blocks needs the non-portable size allowed (sm_90's 16).
    if (image.plan.geometry && image.plan.geometry->clustered() &&
        major * 10 + minor >= kFirstClusterArch) {
      check_cuda(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                 "cuFuncSetAttribute", lowered);
    }
    m->instances.push_back({fn, threads, shared,
                            program_shared[static_cast<std::size_t>(config.program)],
                            program_scratch[static_cast<std::size_t>(config.program)]});
  }
  m->max_dynamic_shared = dynamic_shared ? optin : 48 * 1024;
  m->arch = major * 10 + minor;
  m->sm_count = sms;
  m->info.device = device;
  m->info.device_name = name;
  m->info.device_arch = "sm_" + std::to_string(major * 10 + minor);
  m->info.image_arch = chosen->arch;
  m->info.via_ptx = chosen->is_ptx();
  m->info.via_tileir = chosen->is_tileir();
  m->info.load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (log_enabled(options)) {
    std::cerr << "kernelop: op " << image.plan.op_name << " on device " << device << " (" << name
              << ", " << m->info.device_arch << "): loaded "
              << (chosen->is_cubin() ? "CUBIN "
                  : chosen->is_ptx() ? "PTX "
                                     : "")
              << chosen->arch << (chosen->is_cubin() ? "" : " through the driver's JIT") << " in "
              << m->info.load_ms << " ms\n";
  }
  return m;
}

}  // namespace kernelop::detail
