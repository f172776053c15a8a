// The runtime: a KernelOp launches a compiled kernel on the caller's device buffers, on any
// CUDA device, through the driver API (loaded at run time, so CPU-only programs still link).
//
// Note [launch path]: launch() checks every argument (dtype, device, rank, contiguity, sizes,
// 32-bit extras, CUDA grid limits), evaluates the plan's expressions and calls cuLaunchKernel on
// the caller's stream. It allocates nothing on the heap and takes no lock once the kernel is
// loaded on the device: modules are loaded lazily, once per device, under a per-op mutex, and
// published through an atomic pointer. Its expressions are flattened once per op (Note [flat
// expressions], expr.hpp), and a call that repeats the previous one but for its pointers is
// launched from the op's launch memo (Note [launch memo], src/runtime/launch_memo.hpp).
#pragma once

#include <array>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernelop/image.hpp"
#include "kernelop/tensor.hpp"

namespace kernelop {

/// Largest device index a KernelOp serves (CUDA devices 0..kMaxDevices-1).
inline constexpr int kMaxDevices = 64;
/// Most kernel parameters a KernelOp passes.
inline constexpr int kMaxKernelArgs = 64;

/// How a kernel was loaded on one device (for logs and inspection).
struct LoadInfo {
  int device = -1;
  std::string device_name;
  std::string device_arch;  ///< "sm_90"
  /// the image used: "sm_90" (CUBIN), "compute_90" (PTX JIT) or "tileir" (Tile IR bytecode)
  std::string image_arch;
  bool via_ptx = false;
  bool via_tileir = false;
  double load_ms = 0;  ///< module load, including any PTX JIT
};

/// Options for loading images onto devices.
struct LoadOptions {
  /// Skip CUBINs and JIT the PTX (to test the forward-compatibility path).
  bool prefer_ptx = false;
  /// Skip CUBINs and PTX and give the driver the Tile IR bytecode (cuTile's ops; to test the
  /// path of GPUs no CUBIN was built for). Wins over prefer_ptx.
  bool prefer_tileir = false;
  /// Print one line per device load, tuning and untuned choice to stderr (also enabled by
  /// KERNELOP_LOG=1).
  bool log = false;
  /// A tuned op (one with configs) times its eligible configs on a tuning-table miss, unless the
  /// stream is capturing a CUDA graph. Off (or KERNELOP_TUNE=0): a miss takes the first eligible
  /// config.
  bool tune = true;
  /// Where tuning tables persist: empty is the tuning/ folder of the cache root (kernelop/
  /// tuning.hpp); nothing persists when persist_tuning is false or KERNELOP_DISABLE_CACHE=1.
  std::filesystem::path tuning_dir;
  bool persist_tuning = true;
  /// Timed runs per config when tuning (median taken), after one warm-up run.
  int tuning_runs = 5;
};

/// What tuning has done for one op, in this process.
struct TuningStats {
  std::uint64_t timed_runs = 0;  ///< kernel runs made to time configs, warm-ups included
  std::uint64_t tunings = 0;     ///< keys tuned
  std::uint64_t table_hits = 0;  ///< launches whose config came from a tuning table
  std::uint64_t defaults = 0;    ///< launches that took the first eligible config (no tuning)
  std::uint64_t pinned = 0;      ///< launches of a pinned tactic
  /// Launches where exactly one config could run these inputs: nothing to choose, nothing timed.
  std::uint64_t single = 0;
};

/// One argument of KernelOp::launch_raw(): a tensor (passed as its data pointer) or a number
/// (passed by value as the kernel's parameter type).
struct RawArg {
  bool is_tensor = false;
  TensorView tensor;
  ScalarArg scalar;
  static RawArg of_tensor(const TensorView& t) { return {true, t, {}}; }
  static RawArg of_scalar(const ScalarArg& v) { return {false, {}, v}; }
};

/// The grid, block and dynamic shared memory (bytes) of a raw launch.
struct LaunchDims {
  std::array<std::int64_t, 3> grid = {1, 1, 1};
  std::array<std::int64_t, 3> block = {1, 1, 1};
  std::int64_t shared_mem = 0;
};

/// Makes output `index` of a launch (KernelOp::launch_allocating) once its dtype and shape are
/// known, and returns its view. A non-owning reference to a callable, so that a launch allocates
/// nothing of its own: the callable must outlive the call.
class OutputAllocator {
 public:
  template <class Fn>
  OutputAllocator(Fn& fn)  // NOLINT(google-explicit-constructor): passed as a lambda
      : ctx_(&fn), call_([](void* ctx, std::size_t index, DType dtype, const Shape& shape) {
          return (*static_cast<Fn*>(ctx))(index, dtype, shape);
        }) {}
  TensorView operator()(std::size_t index, DType dtype, const Shape& shape) const {
    return call_(ctx_, index, dtype, shape);
  }

 private:
  void* ctx_;
  TensorView (*call_)(void*, std::size_t, DType, const Shape&);
};

class KernelOp {
 public:
  /// Takes ownership of a compiled image (from compile() or a package). Needs no driver until
  /// the first launch.
  explicit KernelOp(CompiledImage image, LoadOptions options = {});
  /// Loads a .kop package (see package.hpp): neither NVRTC nor the kernel source is needed.
  static KernelOp from_package(const std::filesystem::path& path, LoadOptions options = {});

  KernelOp(KernelOp&&) noexcept;
  KernelOp& operator=(KernelOp&&) noexcept;
  ~KernelOp();

  const OpPlan& plan() const;
  const CompiledImage& image() const;

  /// Output shapes for these inputs (tensor inputs in declared order, scalars in declared
  /// order); checks the inputs as launch() does, except their data and device.
  std::vector<Shape> output_shapes(std::span<const TensorView> inputs,
                                   std::span<const ScalarArg> scalars = {}) const;
  /// Output dtypes for these inputs (they follow inputs for dtype-generic kernels).
  std::vector<DType> output_dtypes(std::span<const TensorView> inputs) const;
  /// The checks of a launch that need no sizes: argument counts, input dtypes (for every
  /// instance), scalar kinds and ranges. The Meta kernel runs them on fake tensors, so a traced
  /// graph refuses what a launch would.
  void check_arguments(std::span<const TensorView> inputs,
                       std::span<const ScalarArg> scalars) const;

  /// Launches on `stream` (a CUstream; nullptr is the device's legacy default stream) in the
  /// primary context of the tensors' device. Outputs must be allocated by the caller with the
  /// shapes and dtypes output_shapes()/output_dtypes() give. Zero-element work launches nothing.
  void launch(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
              std::span<const TensorView> outputs, void* stream) const;

  /// launch() with the outputs made by `allocate` from the shapes and dtypes the call's checks
  /// computed: what a framework does (allocate, then launch), with the inputs checked and every
  /// shape evaluated once. Not for ops whose meta_fn shapes outputs (Error(Spec)).
  void launch_allocating(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                         OutputAllocator allocate, void* stream) const;

  /// Launches with the caller's grid, block and arguments: what an op's eager_fn does when the
  /// spec leaves the geometry (or everything but the source) to it. `args` follow the kernel's
  /// parameters, plan().args (adopted from the kernel itself when no inputs are declared):
  /// tensors where it takes pointers (dtype, contiguity and one device checked), numbers where it
  /// takes values (ints range-checked). The device is the tensors'; `device` (>= 0) must agree,
  /// and is used when no tensor is passed. Unlike launch(), a zero-size grid is an error.
  void launch_raw(const LaunchDims& dims, std::span<const RawArg> args, void* stream,
                  int device = -1) const;

  /// Loads the kernel on `device` now (launch() does so lazily), and those of its later launches,
  /// and tells how the op's own kernel was loaded.
  LoadInfo load(int device) const;

  /// Launches replayed from the op's launch memo: calls of launch() or launch_allocating() that
  /// repeated the previous call in everything but data pointers, and skipped re-deriving its
  /// checks, shapes and geometry (Note [launch memo] in src/runtime/launch_memo.hpp). 0 for
  /// ops that may not use a memo (tuned ops, ops that read pointers' alignment or write an input
  /// in place) and with KERNELOP_LAUNCH_MEMO=0.
  std::uint64_t memoized_launches() const;

  /// Note [donated inputs]: the tensor input whose buffer output `output` may take instead of a
  /// copy of it, or -1. Such an output is initialised as a clone of the input (spec "init"
  /// {"clone"}), and no kernel of the op reads that input, the op does not write it and no other
  /// output clones it: a caller that knows nothing else can see the input's buffer (the PyTorch
  /// adapter: a tensor only the call holds, e.g. a tensor autograd saved for a backward that
  /// will not run again) may pass it as the output, and the launch skips the copy onto itself.
  int donatable_input(std::size_t output) const;

  /// Tactics (Note [tactics] in docs/tactics.md): an op with configs has one tactic per config,
  /// id = the config's index; an op without has one, id 0.
  int num_tactics() const;
  /// "BLOCK=256, VEC=4" ("" for the one tactic of an untuned op).
  const std::string& tactic_text(int tactic) const;
  /// Every launch uses `tactic` (-1: choose again); a launch whose inputs it cannot run is an
  /// error, never a fallback. Throws Error(Spec) for an id out of range. KERNELOP_TACTIC=N (all
  /// tuned ops) or KERNELOP_TACTIC=ns::op=N,ns::other=M pins from the environment.
  void pin_tactic(std::int64_t tactic) const;
  int pinned_tactic() const;
  /// The tactic of the latest launch (-1 before any).
  int last_tactic() const;
  TuningStats tuning_stats() const;
  /// The tuning tables in use, one per device model and architecture seen (entries tuned here,
  /// loaded from disk or from the package).
  std::vector<TuningTable> tuning_tables() const;
  /// Adds a table's entries (its device and arch say where they apply). Throws Error(Format)
  /// when it belongs to another op, build or set of configs.
  void add_tuning_table(const TuningTable& table) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// True when a CUDA driver could be loaded and reports at least one device.
bool cuda_available();
int cuda_device_count();

}  // namespace kernelop
