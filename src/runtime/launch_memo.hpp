// The launch memo: an op's last launch, replayed when a call repeats it (Note [launch memo]).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

#include "kernelop/plan.hpp"
#include "kernelop/runtime.hpp"

namespace kernelop::detail {

/// Note [launch memo]: a declared launch (KernelOp::launch, launch_allocating) checks its
/// arguments, evaluates the op's shapes, requirements, geometry and extra arguments, chooses a
/// config and packs it all: several hundred instructions over data that a driver call between
/// launches has evicted from the caches. Yet consecutive calls of an op mostly repeat each other
/// (a layer loop, a decode step) in everything but the data pointers. The memo keeps what the
/// last launch derived (the device, the instance, the geometry, the extra arguments, the chosen
/// config and how it was chosen, the outputs' dtypes and shapes), under the call's key
/// (MemoKey): the number of arguments, each tensor's dtype, device, shape, strides and whether
/// its pointer is null, with the low 12 bits of its pointer when the op reads aligned() (whose
/// argument is a power of two up to 4096), and each scalar's kind and, for ints and bools,
/// value. A call whose key equals the memo's is launched from it: its arguments are packed (the
/// same pack_arguments) and launched (the same launch_packed); any other call takes the full
/// path, which then updates the memo.
///
/// This is exact because everything the full path derives is a function of the key, except:
///   - pointers, beyond their null-ness and alignment: read by the overlap check of an input
///     written in place, so ops with such an input use no memo;
///   - the tactic state (a pin, the tuning tables): only a config chosen from a stable source
///     (the only config, a pin, a table decision, the single eligible config) is memoised, and
///     pin_tactic() and add_tuning_table() bump the tactic generation and clear the memo, which
///     a store re-checks under the writer's lock; a hit counts in tuning_stats() as the full
///     path would have.
/// A launch that does nothing (zero elements, an empty grid) or fails is never memoised: errors
/// always come from the full path. Outputs allocated on a hit (launch_allocating) must encode as
/// those of the memoised call did, else the full path checks them.
///
/// Concurrency: one memo per op, a SeqlockEntry. KERNELOP_LAUNCH_MEMO=0 turns the memo off
/// (tests/cpu/launch_memo_test.cpp compares both over a corpus of calls, launches and errors
/// alike, on a recording fake driver).
inline constexpr std::size_t kKeyWords = 128;
inline constexpr std::size_t kValueWords = 128;

/// One entry of key and value words behind a seqlock: readers never block and never see a torn
/// entry; a writer that finds another writing skips its update. The launch memo and the tactic
/// selector's decision memo (Note [decision memo]) are each one.
template <std::size_t KeyWords, std::size_t ValueWords>
class SeqlockEntry {
 public:
  /// Copies the value into `value` (room for ValueWords) when the entry's key is `key`: its
  /// first `max_words` words at most, the size it has in `value_size`.
  bool find(std::span<const std::uint64_t> key, std::uint64_t* value, std::size_t* value_size,
            std::size_t max_words = ValueWords) const {
    std::uint64_t s1 = seq_.load(std::memory_order_acquire);
    if ((s1 & 1u) || key_size_.load(std::memory_order_relaxed) != key.size()) return false;
    for (std::size_t i = 0; i < key.size(); ++i) {
      if (key_[i].load(std::memory_order_relaxed) != key[i]) return false;
    }
    std::size_t n = value_size_.load(std::memory_order_relaxed);
    if (n > ValueWords) return false;
    for (std::size_t i = 0; i < std::min(n, max_words); ++i)
      value[i] = value_[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) != s1) return false;  // a store came between
    *value_size = n;
    return true;
  }
  /// Replaces the entry, unless another thread is storing or `valid()`, checked under the
  /// writer's lock, is false.
  template <class Valid>
  void store(std::span<const std::uint64_t> key, std::span<const std::uint64_t> value,
             Valid valid) {
    std::unique_lock lock(writer_, std::try_to_lock);
    if (!lock || key.size() > KeyWords || value.size() > ValueWords || !valid()) return;
    write(key, value);
  }
  /// Empties the entry (waits for a writer).
  void clear() {
    std::lock_guard lock(writer_);
    write({}, {});
  }

 private:
  void write(std::span<const std::uint64_t> key, std::span<const std::uint64_t> value) {
    std::uint64_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);  // odd: readers miss
    std::atomic_thread_fence(std::memory_order_release);
    // An empty entry has a key size no key has.
    key_size_.store(key.empty() ? KeyWords + 1 : key.size(), std::memory_order_relaxed);
    for (std::size_t i = 0; i < key.size(); ++i) key_[i].store(key[i], std::memory_order_relaxed);
    value_size_.store(value.size(), std::memory_order_relaxed);
    for (std::size_t i = 0; i < value.size(); ++i)
      value_[i].store(value[i], std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }

  std::atomic<std::uint64_t> seq_{0};
  std::atomic<std::size_t> key_size_{KeyWords + 1}, value_size_{0};
  std::array<std::atomic<std::uint64_t>, KeyWords> key_{};
  std::array<std::atomic<std::uint64_t>, ValueWords> value_{};
  std::mutex writer_;
};

enum class MemoMode : std::uint8_t { Launch = 1, Allocating = 2 };

/// The key of a call (see the note). build() returns false when it does not fit.
struct MemoKey {
  std::array<std::uint64_t, kKeyWords> words;
  std::size_t size = 0;
  /// `pointer_bits`: the op reads aligned(), so the low 12 bits of each pointer count.
  bool build(MemoMode mode, std::span<const TensorView> inputs, std::span<const ScalarArg> scalars,
             std::span<const TensorView> outputs, bool pointer_bits);
  bool add_tensor(const TensorView& t, bool pointer_bits);
  bool push(std::uint64_t w) {
    if (size == kKeyWords) return false;
    words[size++] = w;
    return true;
  }
  std::span<const std::uint64_t> span() const { return {words.data(), size}; }
};

/// How a launch's config was chosen: what a hit counts in tuning_stats() (Note [launch memo]).
/// Unstable choices (the first eligible for want of a table entry, a tuning run) are not
/// memoised.
enum class Chosen : std::uint8_t { Only, Pinned, Table, Single, Unstable };

/// What a launch derived from its key. Words, so that the seqlock copies them as atomics.
struct MemoValue {
  std::array<std::uint64_t, kValueWords> words;
  std::size_t size = 0;
  // Layout: device, instance, grid[3], block[3], smem, how the config was chosen, the config,
  // cluster[3], then each ExtraValue argument's value in argument order, then per output its dtype,
  // rank and dims, then (allocating mode) the key words of each output as the full path allocated
  // it.
  static constexpr std::size_t kDevice = 0, kInstance = 1, kGrid = 2, kBlock = 5, kSmem = 8,
                               kChosen = 9, kConfig = 10, kCluster = 11, kExtras = 14;
  bool push(std::uint64_t w) {
    if (size == kValueWords) return false;
    words[size++] = w;
    return true;
  }
  std::span<const std::uint64_t> span() const { return {words.data(), size}; }
};

/// The launch memo itself, and how often it served.
struct LaunchMemo {
  SeqlockEntry<kKeyWords, kValueWords> entry;
  alignas(64) std::atomic<std::uint64_t> hits{0};  // apart from what readers read
};

/// Whether the op may use a launch memo (see the note), and KERNELOP_LAUNCH_MEMO is not 0.
bool memo_eligible(const OpPlan& plan);
/// Whether an expression of the op reads aligned() (its calls' keys then hold pointer bits).
bool reads_pointer_alignment(const OpPlan& plan);

}  // namespace kernelop::detail
