// NVRTC compilation of a plan to CUBIN per architecture plus PTX, with the calling convention
// verified against the kernel's real signature in the same compilation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernelop/plan.hpp"

namespace kernelop {

class CompileCache;

/// The default architectures: CUBIN for sm_80, sm_86, sm_89 and sm_90, and PTX for compute_90
/// so that newer GPUs can JIT the kernel (see docs/spec-format.md, "Architectures").
const std::vector<std::string>& default_archs();

struct CompileOptions {
  /// "sm_NN" -> CUBIN, "compute_NN" -> PTX. Empty: the spec's arch_override, else
  /// default_archs().
  std::vector<std::string> archs;
  std::vector<std::string> include_paths;  ///< searched after the spec's
  std::vector<std::string> defines;        ///< added to the spec's
  std::optional<bool> fast_math;           ///< overrides the spec's
  std::optional<bool> line_info;           ///< overrides the spec's
  /// nullptr: CompileCache::global(). Ignored when use_cache is false.
  CompileCache* cache = nullptr;
  bool use_cache = true;
  /// Parallel NVRTC compilations (one per architecture); 0: one per hardware thread.
  int jobs = 0;
};

/// What ptxas reports for one kernel on one architecture.
struct ResourceUsage {
  int registers = 0;
  int stack_frame = 0;    ///< bytes
  int spill_stores = 0;   ///< bytes
  int spill_loads = 0;    ///< bytes
  int static_shared = 0;  ///< bytes of static __shared__ memory
  int const_bytes = 0;    ///< bytes of cmem[0] (kernel parameters and constants)
  bool operator==(const ResourceUsage&) const = default;
};

/// The machine code for one architecture.
struct ArchImage {
  std::string arch;  ///< "sm_90" (CUBIN) or "compute_90" (PTX)
  bool is_ptx() const { return arch.rfind("compute_", 0) == 0; }
  std::string data;                  ///< CUBIN bytes or PTX text
  std::vector<ResourceUsage> usage;  ///< per instance; empty for PTX
  bool cache_hit = false;
  double compile_ms = 0;  ///< NVRTC time, or the cache read when cache_hit
};

struct CompiledImage {
  OpPlan plan;  ///< the input plan with tensor dtypes inferred from the kernel's signature
  std::vector<std::string> lowered_names;  ///< per plan.instances: the symbol to load
  std::vector<ArchImage> images;           ///< in the order the architectures were given
  std::string log;                         ///< compiler warnings (empty when clean)
  std::vector<std::string> options;        ///< NVRTC options, -arch excepted
  std::string nvrtc_version;
  bool cache_bypassed = false;  ///< a computed #include made the persistent cache unsafe
  double total_ms = 0;
  const ArchImage* find(std::string_view arch) const;
};

/// Compiles every architecture (in parallel, through the cache). Throws Error(Compile) with the
/// op, the stage, the architecture and the full NVRTC log on a compile error, and on a
/// mismatch between the calling convention and the kernel's parameters.
CompiledImage compile(const OpPlan& plan, const CompileOptions& options = {});

/// The CUDA include directory passed to NVRTC by default: $CUDA_HOME/include, $CUDA_PATH/include
/// or the toolkit kernelop was built with; empty when none exists.
std::string cuda_include_dir();

}  // namespace kernelop
