// The launch memo: an op's last launch, replayed when a call repeats it (Note [launch memo]).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>

#include "kernelop/plan.hpp"
#include "kernelop/runtime.hpp"

namespace kernelop::detail {

/// Note [launch memo]: a declared launch (KernelOp::launch, launch_allocating) checks its
/// arguments, evaluates the op's shapes, requirements, geometry and extra arguments, and packs
/// them: several hundred instructions over data a driver call between launches has evicted from
/// the caches. Yet consecutive calls of an op mostly repeat each other (a layer loop, a decode
/// step) in everything but the data pointers. The memo keeps what the last launch derived (the
/// device, the instance, the geometry, the extra arguments, the outputs' dtypes and shapes),
/// under a key of everything those were derived from: the number of arguments, each tensor's
/// dtype, device, shape, strides and whether its pointer is null, each scalar's kind and, for
/// ints and bools, value. A call whose key equals the memo's is launched from the memo: its
/// arguments are packed (the same pack_arguments) and launched (the same launch_packed); any
/// other call takes the full path, which then updates the memo.
///
/// This is exact only for ops whose derivations read nothing outside the key, so an op uses a
/// memo only when (memo_eligible):
///   - it has one config and that config has no requires (no tactic choice, which also reads
///     the stream, the tuning tables and the clock);
///   - no expression reads a data pointer (aligned());
///   - no input is written in place (the overlap check reads the pointers);
/// and a call only when its key fits kKeyWords. A launch that does nothing (zero elements, an
/// empty grid) or fails is never memoised: errors always come from the full path. Outputs
/// allocated on a hit (launch_allocating) must encode as those of the memoised call did (their
/// dtype, device, shape and strides), else the full path checks them.
///
/// Concurrency: one memo per op, a seqlock; readers never block, a writer that finds another
/// writing skips its update. KERNELOP_LAUNCH_MEMO=0 turns the memo off (tests/cpu/
/// launch_memo_test.cpp compares both over a corpus of calls, launches and errors alike).
inline constexpr std::size_t kKeyWords = 96;
inline constexpr std::size_t kValueWords = 128;

enum class MemoMode : std::uint8_t { Launch = 1, Allocating = 2 };

/// The key of a call (see the note). build() returns false when it does not fit.
struct MemoKey {
  std::array<std::uint64_t, kKeyWords> words;
  std::size_t size = 0;
  bool build(MemoMode mode, std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
             std::span<const TensorView> outputs);
  bool add_tensor(const TensorView& t);
  bool push(std::uint64_t w) {
    if (size == kKeyWords) return false;
    words[size++] = w;
    return true;
  }
};

/// What a launch derived from its key. Words, so that the seqlock copies them as atomics.
struct MemoValue {
  std::array<std::uint64_t, kValueWords> words;
  std::size_t size = 0;
  // Layout: device, instance, grid[3], block[3], smem, then each ExtraValue argument's value in
  // argument order, then per output its dtype, rank and dims, then (allocating mode) the key
  // words of each output as the full path allocated it.
  static constexpr std::size_t kDevice = 0, kInstance = 1, kGrid = 2, kBlock = 5, kSmem = 8,
                               kExtras = 9;
  bool push(std::uint64_t w) {
    if (size == kValueWords) return false;
    words[size++] = w;
    return true;
  }
};

/// The memo itself: one entry, a seqlock.
class LaunchMemo {
 public:
  /// Copies the entry into `value` when its key is `key`.
  bool find(const MemoKey& key, MemoValue& value) const;
  /// Replaces the entry (skipped when another thread is storing).
  void store(const MemoKey& key, const MemoValue& value);
  /// Counts a launch from the memo (KernelOp::memoized_launches()).
  void count_hit() { hits_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<bool> writing_{false};
  std::atomic<std::uint32_t> key_size_{0}, value_size_{0};
  std::array<std::atomic<std::uint64_t>, kKeyWords> key_{};
  std::array<std::atomic<std::uint64_t>, kValueWords> value_{};
  alignas(64) std::atomic<std::uint64_t> hits_{0};  // apart from what readers read
};

/// Whether the op may use a memo (see the note), and KERNELOP_LAUNCH_MEMO is not 0.
bool memo_eligible(const OpPlan& plan);

}  // namespace kernelop::detail
