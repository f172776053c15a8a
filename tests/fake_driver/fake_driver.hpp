// The test's handle on tests/fake_driver (a libcuda.so.1 first on the suite's LD_LIBRARY_PATH):
// what it recorded, launches and memory operations, as text.
#pragma once

#include <dlfcn.h>

#include <vector>

#include "kernelop/kernelop.hpp"

namespace kernelop::testing {

struct FakeDriver {
  void (*set_param_sizes)(const int*, int) = nullptr;
  const char* (*launches)() = nullptr;
  const char* (*memory_ops)() = nullptr;
  const char* (*functions)() = nullptr;
  void (*set_memory)(std::uint64_t, const void*, int) = nullptr;
  void (*set_capturing)(int) = nullptr;
  void (*set_arch)(int) = nullptr;  // the device's compute capability, major * 10 + minor
  FakeDriver() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return;
    set_param_sizes =
        reinterpret_cast<void (*)(const int*, int)>(dlsym(lib, "fake_cuda_set_param_sizes"));
    launches = reinterpret_cast<const char* (*)()>(dlsym(lib, "fake_cuda_launches"));
    memory_ops = reinterpret_cast<const char* (*)()>(dlsym(lib, "fake_cuda_memory_ops"));
    functions = reinterpret_cast<const char* (*)()>(dlsym(lib, "fake_cuda_functions"));
    set_memory = reinterpret_cast<void (*)(std::uint64_t, const void*, int)>(
        dlsym(lib, "fake_cuda_set_memory"));
    set_capturing = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_set_capturing"));
    set_arch = reinterpret_cast<void (*)(int)>(dlsym(lib, "fake_cuda_set_arch"));
  }
  bool ok() const {
    return set_param_sizes && launches && memory_ops && functions && set_memory && set_capturing &&
           set_arch;
  }
};

inline FakeDriver& fake() {
  static FakeDriver f;
  return f;
}

// The fake driver records each launch's parameters at the sizes of `image`'s, from now on;
// what it recorded before is dropped.
inline void record_launches_of(const CompiledImage& image) {
  std::vector<int> sizes;
  for (const KernelParam& k : image.plan.kernel_params()) sizes.push_back(k.size);
  fake().set_param_sizes(sizes.data(), static_cast<int>(sizes.size()));
  fake().launches();
  fake().memory_ops();
}

}  // namespace kernelop::testing
