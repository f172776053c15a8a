// A tuned op's tactic state: the pin, the tuning tables per device (in memory, on disk, from a
// package) and the counters. The choice itself is KernelOp::State::choose_config (tactics.cpp).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernelop/runtime.hpp"
#include "kernelop/tuning.hpp"
#include "runtime/launch_memo.hpp"

namespace kernelop::detail {

/// Words of a tuning key (Note [tuning key] in kernelop/tuning.hpp): the dtype combination,
/// the eligible configs (4 words of 64 bits: kMaxConfigs = 256), and the bucketed sizes.
inline constexpr std::size_t kEligibleWords = 4;
inline constexpr std::size_t kMaxKeyWords =
    1 + kEligibleWords + static_cast<std::size_t>(kMaxKernelArgs) * (kMaxRank + 1);
static_assert(kMaxKeyWords == kMaxTuningKeyWords, "the tuning table's key limit is this one");

/// A call's key, built on the stack with its hash (the launch path allocates nothing).
struct TuneKey {
  std::array<std::int64_t, kMaxKeyWords> words;
  std::size_t size = 0;
  std::uint64_t hash = 0x9e3779b97f4a7c15ull;
  static std::uint64_t mix(std::uint64_t h, std::int64_t w) {
    h = (h ^ static_cast<std::uint64_t>(w)) * 0x100000001b3ull;
    return h ^ (h >> 29);
  }
  void push(std::int64_t w) {
    if (size < words.size()) words[size] = w;  // longer keys never match (see equals)
    ++size;
    hash = mix(hash, w);
  }
  bool equals(const std::vector<std::int64_t>& other) const {
    if (other.size() != size || size > words.size()) return false;
    for (std::size_t i = 0; i < size; ++i) {
      if (other[i] != words[i]) return false;
    }
    return true;
  }
};

std::uint64_t key_hash(const std::vector<std::int64_t>& words);

/// KERNELOP_TACTIC: "N" (every tuned op) or "ns::op=N,ns::other=M". -1 when it says nothing
/// about this op; throws Error(Spec) naming the variable when it cannot be read.
int env_tactic(const OpPlan& plan);

/// One device model's table: entries and an index by key hash. Readers share the lock; a new
/// entry takes it exclusively.
struct DeviceTuning {
  TuningTable table;
  std::unordered_multimap<std::uint64_t, std::size_t> index;
  std::filesystem::path file;  ///< where it persists; empty: memory only
  mutable std::shared_mutex mutex;

  /// The entry's config for `key`, or -1.
  int find(const TuneKey& key) const;
  /// Adds (or replaces) the entry of its key.
  void put(TuningEntry entry);
};

/// Note [decision memo]: the latest table decision of the op with the exact key of the call it
/// was made for (MemoKey, Note [launch memo]: dtypes, devices, shapes, strides, the low 12 bits
/// of pointers when the op reads aligned(), integer and bool scalars): a call with the same key
/// repeats the decision without evaluating the configs' requires, the tuning key or the table.
/// It serves the calls the launch memo does not: ops that write an input in place, and calls
/// between two others. Its value is the config.
using DecisionMemo = SeqlockEntry<kKeyWords, 1>;

struct TacticState {
  DecisionMemo memo;
  /// Bumped when the pin or the tables change under a running op (pin_tactic, add_tuning_table):
  /// a decision read before the change is not memoised after it (Note [decision memo], Note
  /// [launch memo]).
  std::atomic<std::uint64_t> generation{0};
  std::atomic<int> pinned{-1};
  std::atomic<int> last{-1};
  std::atomic<std::uint64_t> timed_runs{0}, tunings{0}, table_hits{0}, defaults{0}, pins{0},
      single{0};
  std::mutex tune_mutex;  // one tuning at a time per op: concurrent first calls tune once
  std::mutex tables_mutex;
  std::array<std::atomic<DeviceTuning*>, kMaxDevices> devices{};
  std::vector<std::unique_ptr<DeviceTuning>> owned;
  std::vector<TuningTable> added;  // the package's and add_tuning_table()'s, by device model
  std::string fingerprint;         // of the op's image, computed when a table is first needed
};

}  // namespace kernelop::detail
