// The compiled form of an op: its plan plus machine code (CUBIN per architecture, PTX), as
// produced by compile() and stored in packages. No CUDA needed to hold or serialise it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/plan.hpp"

namespace kernelop {

/// What ptxas reports for one kernel on one architecture.
struct ResourceUsage {
  int registers = 0;
  int stack_frame = 0;    ///< bytes
  int spill_stores = 0;   ///< bytes (-1: unknown)
  int spill_loads = 0;    ///< bytes (-1: unknown)
  int static_shared = 0;  ///< bytes of static __shared__ memory (-1: unknown)
  int const_bytes = 0;    ///< bytes of cmem[0] (kernel parameters and constants)
  bool operator==(const ResourceUsage&) const = default;
};

/// The label of an image of Tile IR bytecode (cuTile's, architecture-independent): the driver
/// compiles it for the device when it loads it (drivers for CUDA 13.3 and later).
inline constexpr std::string_view kTileIrArch = "tileir";

/// Whether `data` starts as Tile IR bytecode does ("\x7fTileIR\0").
inline bool is_tileir_bytecode(std::string_view data) {
  constexpr std::string_view kMagic{"\x7fTileIR\0", 8};
  return data.substr(0, kMagic.size()) == kMagic;
}

/// The machine code for one architecture.
struct ArchImage {
  std::string arch;  ///< "sm_90" (CUBIN), "compute_90" (PTX) or "tileir" (Tile IR bytecode)
  bool is_ptx() const { return arch.rfind("compute_", 0) == 0; }
  bool is_cubin() const { return arch.rfind("sm_", 0) == 0; }
  bool is_tileir() const { return arch == kTileIrArch; }
  /// "cubin", "ptx" or "tileir" (an arch of neither form: "")
  std::string_view kind() const {
    return is_cubin() ? "cubin" : is_ptx() ? "ptx" : is_tileir() ? "tileir" : "";
  }
  std::string data;  ///< CUBIN bytes, PTX text or Tile IR bytecode
  /// Per instance of its program (OpPlan::instances_of), in order; empty for PTX and Tile IR.
  std::vector<ResourceUsage> usage;
  bool cache_hit = false;
  double compile_ms = 0;  ///< NVRTC time, or the cache read when cache_hit
  /// The compilation it comes from (OpPlan::programs; 0 unless configs differ in a define).
  int program = 0;
  /// Dynamic shared memory each launch of its kernels needs beyond the geometry's, in bytes
  /// (a Triton kernel's metadata.shared, which depends on the architecture).
  int launch_shared = 0;
  /// Global scratch memory its kernels need (a Triton kernel's metadata.global_scratch_size): each
  /// launch allocates scratch_bytes per block, aligned to scratch_align, stream-ordered, and passes
  /// the pointer as parameter scratch_param (a 64-bit extra declared 0); 0 bytes: none.
  int scratch_bytes = 0;
  int scratch_align = 0;
  int scratch_param = -1;
};

struct TuningEntry {
  std::vector<std::int64_t> key;  ///< Note [tuning key]
  std::string text;               ///< the key in words, for people: "float32 x=[1024, 4096]"
  int config = 0;                 ///< the chosen config (tactic id)
  /// Median time of each config in milliseconds; negative: not timed (ineligible or failed).
  std::vector<double> times_ms;
  bool operator==(const TuningEntry&) const = default;
};

struct TuningTable {
  std::string op;                    ///< "ns::name"
  std::string fingerprint;           ///< op_fingerprint() of the image it was tuned with
  std::string device;                ///< device model: "NVIDIA H200"
  std::string arch;                  ///< "sm_90"
  std::string version;               ///< kernelop's version
  std::vector<std::string> configs;  ///< the configs' texts ("BLOCK=256, VEC=4")
  std::vector<TuningEntry> entries;
  bool operator==(const TuningTable&) const = default;
};

struct CompiledImage {
  /// The derived plan completed by the kernel (Note [plan stages]): tensor dtypes inferred from
  /// its signature.
  CompletedPlan plan;
  std::vector<std::string> lowered_names;  ///< per plan.instances: the symbol to load
  std::vector<ArchImage> images;           ///< in the order the architectures were given
  std::string log;                         ///< compiler warnings (empty when clean)
  std::vector<std::string> options;        ///< NVRTC options, -arch excepted
  std::string nvrtc_version;
  bool cache_bypassed = false;  ///< a computed #include made the persistent cache unsafe
  /// Tuning tables that travel with the image (a package's, see kernelop/tuning.hpp): a
  /// deployment whose device and keys they cover never times anything.
  std::vector<TuningTable> tuning;
  /// The op's later launches (Note [several launches], spec.hpp), one image per
  /// plan.spec.then entry, each compiled from launch_decl(plan, k) (compile_launches).
  std::vector<CompiledImage> then;
  double total_ms = 0;
  const ArchImage* find(std::string_view arch, int program = 0) const;
  /// The resource usage of `instance` on CUBIN architecture `arch` (nullptr when not built).
  const ResourceUsage* usage(std::string_view arch, int instance) const;
};

}  // namespace kernelop
