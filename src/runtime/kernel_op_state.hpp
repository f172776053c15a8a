// KernelOp's private state: its image, its modules per device (module_cache.hpp) and its tactic
// state (tactics.hpp), shared by runtime.cpp (shapes, launch), launch_raw.cpp (the caller-geometry
// launch and the final cuLaunchKernel) and the tactic files. Every argument check is in
// launch_checks.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "core/words.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/shape_eval.hpp"
#include "runtime/device_module.hpp"
#include "runtime/launch_args.hpp"
#include "runtime/launch_checks.hpp"
#include "runtime/launch_memo.hpp"
#include "runtime/module_cache.hpp"
#include "runtime/tactics.hpp"

namespace kernelop {

// The runtime's own names for its private helpers (this header is included only by its files).
using detail::check_cuda;
using detail::DeviceModule;
using detail::Driver;
using detail::Frame;
using detail::FrameEnv;
using detail::FrameSizes;
using detail::PackedArgs;
using detail::scalar_kind_name;
using detail::TensorPtrs;

/// The expressions every declared launch evaluates, flattened once per op (Note [flat
/// expressions]): roots of the geometry and of each extra argument (by argument index).
struct LaunchExprs {
  FlatExprs program;
  std::array<std::uint16_t, 3> grid{}, block{};
  std::uint16_t shared_mem = 0;
  std::array<std::uint16_t, 3> cluster{};
  std::array<std::uint16_t, kMaxKernelArgs> extras{};
  explicit LaunchExprs(const OpPlan& p);
};

struct KernelOp::State {
  CompiledImage image;
  LoadOptions options;
  detail::ModuleCache modules{image, options};
  bool reads_device = false;  // an expression reads arch() or sm_count(): the device comes first
  bool clustered = false;     // the geometry has a thread-block cluster (LaunchGeometry::clustered)
  std::optional<LaunchExprs> exprs;   // declared launches (the plan has a geometry)
  std::vector<detail::ArgCode> args;  // arg_codes(plan())
  // Note [launch memo]: null when the op may not use one; memo_outputs: where the outputs
  // begin in a MemoValue (after the fixed words and the extra arguments).
  std::unique_ptr<detail::LaunchMemo> launch_memo;
  std::size_t memo_outputs = 0;
  bool memo_pointer_bits = false;  // an expression reads aligned(): keys hold pointer bits
  bool inits_outputs = false;      // an output is filled or cloned first (output_init.cpp)
  std::vector<int> donatable;      // per output: KernelOp::donatable_input
  std::unique_ptr<detail::TacticState> tactics = std::make_unique<detail::TacticState>();
  // Note [several launches]: the op's later launches and where their tensors and scalars come
  // from; `program` when it has those or scratch (launch_program.cpp runs it).
  std::vector<KernelOp> then;
  std::vector<LaunchLink> then_links;
  bool program = false;
  bool reads_items = false;  // an argument reads item() (Note [host reads])
  std::size_t before = 0;    // the first `before` of `then` run before the op's own kernel

  const OpPlan& plan() const { return image.plan; }
  const OutputPlan& output_of(int slot) const {
    return plan().outputs[static_cast<std::size_t>(slot - plan().num_tensor_inputs)];
  }
  detail::ErrorStream error(ErrorKind kind, const char* separator = ": ") const {
    return detail::op_error(plan(), kind, separator);
  }
  const DeviceModule& module_for(int device) { return modules.get(device); }
  void read_device(Frame& f, int device) {
    const DeviceModule& m = module_for(device);
    f.arch = m.arch;
    f.sm_count = m.sm_count;
  }

  // After prepare(): the tensors checked (check_tensors), the config chosen and launched.
  // `record`: where to note what the launch derived (Note [launch memo]); left empty when
  // nothing was launched.
  void launch_prepared(Frame& f, std::span<const TensorView> inputs,
                       std::span<const ScalarArg> scalars, std::span<const TensorView> outputs,
                       void* stream, detail::MemoValue* record = nullptr, bool init = true);
  // Note [several launches] (launch_program.cpp): the scratch allocated on `stream`, the op's
  // kernel and each later launch run, the scratch freed. `results`: the caller's outputs, or
  // none with `allocate`, which makes them.
  void launch_program(std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
                      std::span<const TensorView> results, const OutputAllocator* allocate,
                      void* stream);
  // Launch k of `then` with the op's tensors and scalars it names (`outputs`: the op's outputs
  // and scratch).
  void launch_step(std::size_t k, std::span<const TensorView> inputs,
                   std::span<const ScalarArg> scalars, std::span<const TensorView> outputs,
                   void* stream);
  // A launch from the memo: the arguments packed, the memo's geometry launched.
  void launch_memoized(const detail::MemoValue& memo, std::span<const TensorView> inputs,
                       std::span<const ScalarArg> scalars, std::span<const TensorView> outputs,
                       void* stream);
  // Note [initialised outputs] (output_init.cpp): fills and clones on `stream`, before the
  // kernel, into the outputs at `ptrs` (the caller's, or a tuning run's scratch; a clone's source
  // is read there too) of the outputs' shapes and dtypes; outputs with no element are skipped.
  void init_outputs(const TensorPtrs& ptrs, std::span<const TensorView> outputs, int device,
                    void* stream);
  TensorPtrs tensor_ptrs(std::span<const TensorView> inputs,
                         std::span<const TensorView> outputs) const;
  // Tactics (tactic_selector.cpp). The config for this call: pinned, else the tuning table, else
  // timed now, else the first eligible config. Never one whose requires the inputs break.
  // `chosen`: how (Note [launch memo]).
  int choose_config(Frame& f, std::span<const TensorView> inputs,
                    std::span<const ScalarArg> scalars, std::span<const TensorView> outputs,
                    const TensorPtrs& ptrs, int device, void* stream, detail::Chosen& chosen);
  // Counts a choice in tuning_stats() and as the last tactic (nothing for the only config).
  void count_choice(detail::Chosen how, int config);
  // Evaluates the geometry and arguments with `config`'s values and launches them.
  void launch_config(Frame& f, int config, const TensorPtrs& ptrs,
                     std::span<const ScalarArg> scalars, int device, void* stream,
                     detail::MemoValue* record = nullptr,
                     detail::Chosen chosen = detail::Chosen::Unstable);
  // Stores a launch's record in the memo unless the tactic state changed since `generation`.
  void remember_launch(const detail::MemoKey& key, const detail::MemoValue& value,
                       std::uint64_t generation);
  // Times every eligible config for `key` and records the fastest (tactics.cpp).
  int autotune(Frame& f, const detail::TuneKey& key, const std::vector<int>& eligible,
               std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
               std::span<const TensorView> outputs, const TensorPtrs& ptrs, int device,
               void* stream, detail::DeviceTuning& table);
  detail::DeviceTuning& device_tuning(int device);
  void persist(detail::DeviceTuning& table);

  // Loads the module on `device` if needed, checks the block against the kernel's limits and
  // launches the packed parameters.
  // A cluster other than {1, 1, 1} is a cluster launch (cuLaunchKernelEx).
  void launch_packed(int device, int instance, const std::array<std::int64_t, 3>& grid,
                     const std::array<std::int64_t, 3>& block,
                     const std::array<std::int64_t, 3>& cluster, std::int64_t smem, void** params,
                     void* stream);
};

}  // namespace kernelop
