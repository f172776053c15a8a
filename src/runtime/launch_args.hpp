// The pieces of a launch's argument handling that KernelOp::launch and launch_raw share: the
// per-call frame, checks of tensors and 32-bit values, and packing into parameter slots.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernelop/runtime.hpp"
#include "kernelop/shape_eval.hpp"

namespace kernelop::detail {

/// Per-slot storage that a call writes before it reads (prepare() sets every tensor slot of the
/// plan): nothing is constructed for the kMaxKernelArgs slots, of which a call uses a few, so a
/// frame costs nothing to create (Note [launch path]). Slots begin their lifetime in set().
template <class T, std::size_t N>
class SlotArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  union Slot {
    T value;
    Slot() {}  // NOLINT(modernize-use-equals-default): leaves `value` unconstructed on purpose
  };
  std::array<Slot, N> slots_;

 public:
  void set(std::size_t i, const T& v) { ::new (static_cast<void*>(&slots_[i].value)) T(v); }
  const T& operator[](std::size_t i) const { return slots_[i].value; }
};

struct DeviceModule;

/// Note [host reads] (spec.hpp): reads a one-element tensor on the host after the work queued on
/// the call's stream (host_read.cpp).
struct HostReader {
  const OpPlan& plan;
  const DeviceModule& module;
  void* stream = nullptr;
  /// The value of tensor slot `slot` (view `v`) as a double. Error(Launch) naming the op and the
  /// tensor while the stream is captured (a graph cannot hold a host read), or for a tensor of
  /// other than one element.
  double value(int slot, const TensorView& v) const;
  /// item(t): the value of an integer (or bool) tensor; a floating one is refused.
  std::int64_t integer(int slot, const TensorView& v) const;
  /// Whether every test of a launch's `when` holds (`views`: per tensor slot).
  bool holds(const std::vector<HostTest>& when, std::span<const TensorView* const> views) const;
};

/// Everything a call derives from its arguments, on the stack (Note [launch path]).
struct Frame {
  SlotArray<Shape, kMaxKernelArgs> shapes;        // per tensor slot
  std::array<std::int64_t, kMaxKernelArgs> ints;  // per scalar slot (int and bool scalars)
  /// Per tensor slot: the caller's view (inputs from the start, outputs once given, nullptr
  /// before), for the expressions that read dtypes, strides and pointers. Set by prepare().
  std::array<const TensorView*, kMaxKernelArgs> views;
  int instance = 0;                        // the dtype combination (Note [instances and configs])
  const std::int64_t* tunables = nullptr;  // the chosen config's values
  int arch = 0;                            // the device's compute capability (arch())
  int sm_count = 0;                        // the device's number of SMs (sm_count())
  const HostReader* host = nullptr;        // item() (set by a launch whose arguments read it)
  // item() values, read once a call (per tensor slot, bit `slot` of items_read): a tuning run's
  // launches, captured in a graph, reuse what the call read first.
  mutable std::array<std::int64_t, kMaxKernelArgs> items;
  mutable std::uint64_t items_read = 0;
};

/// The sizes a frame knows, for the one shape evaluator (Note [one shape evaluator]).
struct FrameSizes {
  const Frame& frame;
  const Shape& shape(int slot) const { return frame.shapes[static_cast<std::size_t>(slot)]; }
  std::int64_t rank(int slot) const { return shape(slot).rank(); }
  std::int64_t size(int slot, std::int64_t a) const { return shape(slot)[static_cast<int>(a)]; }
  std::int64_t numel(int slot) const { return shape(slot).numel(); }
  std::int64_t scalar(int slot) const { return frame.ints[static_cast<std::size_t>(slot)]; }
  const TensorView& view(int slot) const {
    const TensorView* v = frame.views[static_cast<std::size_t>(slot)];
    KERNELOP_INTERNAL_CHECK(v != nullptr) << "(tensor slot " << slot << " read before it is known)";
    return *v;
  }
  std::int64_t itemsize(int slot) const {
    return static_cast<std::int64_t>(dtype_size(view(slot).dtype));
  }
  std::int64_t stride(int slot, std::int64_t a) const {
    return view(slot).stride(static_cast<int>(a));
  }
  bool aligned(int slot, std::int64_t bytes) const {
    return reinterpret_cast<std::uintptr_t>(view(slot).data) % static_cast<std::uint64_t>(bytes) ==
           0;
  }
  bool negative(std::int64_t v) const { return v < 0; }
  std::int64_t tunable(int slot) const { return frame.tunables[slot]; }
  std::int64_t arch() const { return frame.arch; }
  std::int64_t sm_count() const { return frame.sm_count; }
  std::int64_t item(int slot) const {
    static_assert(kMaxKernelArgs <= 64, "items_read holds a bit per tensor slot");
    const std::uint64_t bit = std::uint64_t{1} << slot;
    if (!(frame.items_read & bit)) {
      KERNELOP_INTERNAL_CHECK(frame.host != nullptr) << "(item() read with no host reader)";
      frame.items[static_cast<std::size_t>(slot)] = frame.host->integer(slot, view(slot));
      frame.items_read |= bit;
    }
    return frame.items[static_cast<std::size_t>(slot)];
  }
  std::string shape_text(int slot) const { return shape(slot).to_string(); }
};
using FrameEnv = SizeEnv<std::int64_t, FrameSizes>;

/// One parameter slot per kernel argument, 8 bytes each, and the pointer array cuLaunchKernel
/// takes. Filled slot by slot; no heap.
struct PackedArgs {
  alignas(8) std::array<std::uint64_t, kMaxKernelArgs> storage;
  std::array<void*, kMaxKernelArgs> params;
  /// The bytes of struct parameters (OpPlan::structs): a field takes at most 8 bytes plus 7 of
  /// padding before it, a struct at most 7 more to its alignment, so 3 words per argument suffice.
  alignas(8) std::array<std::uint64_t, static_cast<std::size_t>(3) * kMaxKernelArgs> struct_bytes;
  void* slot(std::size_t i) {
    params[i] = &storage[i];
    return &storage[i];
  }
  /// The parameter array for the kernel, once every slot is filled: the slots themselves, or
  /// with each struct's fields copied to their offsets and the struct passed as one parameter.
  void** kernel_params(const OpPlan& plan);
};

// Per tensor slot: the data pointer a launch passes (the caller's, or a tuning run's scratch).
using TensorPtrs = std::array<const void*, kMaxKernelArgs>;

/// "float", "int" or "bool".
const char* scalar_kind_name(ScalarArg::Kind kind);

/// Writes a checked scalar into its parameter slot as the kernel's by-value type.
void pack_scalar(void* slot, ScalarType type, const ScalarArg& value);
void pack_pointer(void* slot, const void* data);

/// What packing reads of an ArgSlot, 4 bytes a slot (Note [launch path]): the plan's ArgSlots
/// (names, expressions) span several cache lines each.
struct ArgCode {
  ArgSlot::Kind kind;
  ScalarType value_type;
  std::uint16_t index;
};
std::vector<ArgCode> arg_codes(const OpPlan& p);

/// Fills `packed` with the kernel's arguments in the plan's order (`args`, from arg_codes):
/// tensors' pointers from `ptrs` (by tensor slot), scalars as the kernel's by-value types, and
/// ExtraValue argument i as `extra(i)` gives it (called in argument order). Both the full launch
/// and a memoised one (Note [launch memo]) pack with it.
template <class Extra>
void pack_arguments(std::span<const ArgCode> args, const TensorPtrs& ptrs,
                    std::span<const ScalarArg> scalars, PackedArgs& packed, Extra&& extra) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ArgCode& a = args[i];
    void* slot = packed.slot(i);
    switch (a.kind) {
      case ArgSlot::Kind::TensorInput:
      case ArgSlot::Kind::Output:
        pack_pointer(slot, ptrs[static_cast<std::size_t>(a.index)]);
        break;
      case ArgSlot::Kind::ScalarInput:
        pack_scalar(slot, a.value_type, scalars[static_cast<std::size_t>(a.index)]);
        break;
      case ArgSlot::Kind::ExtraValue:
        if (a.value_type == ScalarType::Float) {  // Note [float extras]: the bits of a float32
          auto bits = static_cast<std::int32_t>(extra(i));
          std::memcpy(slot, &bits, sizeof bits);
        } else {
          pack_scalar(slot, a.value_type, ScalarArg::of_int(extra(i)));
        }
        break;
    }
  }
}

// The failures behind the checks below, out of line: messages are built only when they fire.
[[noreturn]] void fail_device(std::string_view op, const std::string& who, int device,
                              const std::string& first, int first_device);
[[noreturn]] void fail_tensor(std::string_view op, const std::string& who, const TensorView& t);
[[noreturn]] void fail_int32(std::string_view op, const std::string& who, std::int64_t value,
                             std::string_view hint);

/// Where a tensor argument must live and what it must be: one device for all (the first tensor
/// checked sets it), contiguous memory (unless the kernel takes its strides), a data pointer when
/// it has elements. `describe(i)` names
/// tensor i in messages ("input 'x'", "argument 0 ('x', const float*)") and runs only when a
/// check fails: the launch path allocates nothing (Note [launch path]).
template <class Describe>
class TensorChecker {
 public:
  TensorChecker(std::string_view op, Describe describe) : op_(op), describe_(describe) {}
  void check(const TensorView& t, std::size_t index, bool any_strides = false) {
    if (device_ >= 0 && t.device != device_) {
      fail_device(op_, describe_(index), t.device, describe_(first_), device_);
    }
    if (device_ < 0) {
      device_ = t.device;
      first_ = index;
    }
    if ((!any_strides && !t.is_contiguous()) || (t.data == nullptr && t.shape.numel() > 0) ||
        (any_strides && t.strides.rank() != 0 && t.strides.rank() != t.shape.rank())) {
      fail_tensor(op_, describe_(index), t);
    }
  }
  int device() const { return device_; }

 private:
  std::string_view op_;
  Describe describe_;
  int device_ = -1;
  std::size_t first_ = 0;
};

/// Throws Error(Launch) when `value` does not fit the kernel's 32-bit int; `describe()` names the
/// value and `hint` says what to declare instead.
template <class Describe>
void check_int32(std::string_view op, std::int64_t value, Describe describe,
                 std::string_view hint) {
  if (value < -2147483648LL || value > 2147483647LL) fail_int32(op, describe(), value, hint);
}

}  // namespace kernelop::detail
