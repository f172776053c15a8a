// A tuned op's tactic state: the tuning tables per device (memory, disk, package), KERNELOP_TACTIC,
// persistence, and the public tactic API. The choice is tactic_selector.cpp's (Note [tactic
// selection]); timing is tuner.cpp's (Note [tuning runs]).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/file_io.hpp"
#include "core/hash.hpp"
#include "kernelop/numbers.hpp"
#include "kernelop/package.hpp"
#include "kernelop/tuning.hpp"
#include "runtime/kernel_op_state.hpp"

namespace kernelop {
namespace detail {

std::uint64_t key_hash(const std::vector<std::int64_t>& words) {
  std::uint64_t h = TuneKey{}.hash;
  for (std::int64_t w : words) h = TuneKey::mix(h, w);
  return h;
}

int DeviceTuning::find(const TuneKey& key) const {
  std::shared_lock lock(mutex);
  auto [begin, end] = index.equal_range(key.hash);
  for (auto it = begin; it != end; ++it) {
    const TuningEntry& e = table.entries[it->second];
    if (key.equals(e.key)) return e.config;
  }
  return -1;
}

void DeviceTuning::put(TuningEntry entry) {
  std::unique_lock lock(mutex);
  std::uint64_t h = key_hash(entry.key);
  auto [begin, end] = index.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    if (table.entries[it->second].key == entry.key) {
      table.entries[it->second] = std::move(entry);
      return;
    }
  }
  index.emplace(h, table.entries.size());
  table.entries.push_back(std::move(entry));
}

int env_tactic(const OpPlan& plan) {
  const char* env = std::getenv("KERNELOP_TACTIC");
  if (!env || !*env) return -1;
  std::string_view text(env);
  auto parse = [&](std::string_view n) {
    std::optional<std::int64_t> v = parse_int64(n);
    if (!v || *v < 0 || *v >= static_cast<std::int64_t>(plan.configs.size())) {
      KERNELOP_FAIL(Spec) << "KERNELOP_TACTIC='" << shorten(std::string(text), 200) << "': for op "
                          << plan.op_name << " expected a tactic id from 0 to "
                          << static_cast<std::int64_t>(plan.configs.size()) - 1 << ", got '"
                          << shorten(std::string(n), 40) << "'";
    }
    return static_cast<int>(*v);
  };
  if (text.find('=') == std::string_view::npos) return parse(text);
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    std::size_t eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == plan.op_name) {
      return parse(item.substr(eq + 1));
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return -1;
}

}  // namespace detail

using detail::DeviceTuning;
using detail::TuneKey;

DeviceTuning& KernelOp::State::device_tuning(int device) {
  auto& slot = tactics->devices[static_cast<std::size_t>(device)];
  if (DeviceTuning* t = slot.load(std::memory_order_acquire)) return *t;
  std::lock_guard lock(tactics->tables_mutex);
  if (DeviceTuning* t = slot.load(std::memory_order_relaxed)) return *t;
  const LoadInfo& info = module_for(device).info;
  if (tactics->fingerprint.empty()) tactics->fingerprint = op_fingerprint(image);
  // Another device of the same model shares the table.
  for (const auto& other : tactics->owned) {
    if (other->table.device == info.device_name && other->table.arch == info.device_arch) {
      slot.store(other.get(), std::memory_order_release);
      return *other;
    }
  }
  auto t = std::make_unique<DeviceTuning>();
  t->table.op = plan().op_name;
  t->table.fingerprint = tactics->fingerprint;
  t->table.device = info.device_name;
  t->table.arch = info.device_arch;
  t->table.version = std::string(version());
  for (const ConfigPlan& c : plan().configs) t->table.configs.push_back(c.text);
  auto merge = [&](const TuningTable& from) {
    if (from.device != t->table.device || from.arch != t->table.arch) return;
    for (const TuningEntry& e : from.entries) t->put(e);
  };
  for (const TuningTable& from : tactics->added) merge(from);
  bool persist = options.persist_tuning && !env_flag("KERNELOP_DISABLE_CACHE");
  if (persist) {
    std::filesystem::path dir =
        options.tuning_dir.empty() ? detail::cache_root() / "tuning" : options.tuning_dir;
    detail::Hasher h;
    h.field("kernelop.tuning").field(t->table.fingerprint).field(t->table.device);
    h.field(t->table.arch).field(t->table.version);
    std::string why = detail::private_directory(dir, "tuning table");
    if (!why.empty()) {
      warn("tuning table directory '" + detail::shorten(dir.string(), 300) + "' is unusable (" +
           why + "); tuning results stay in memory");
    } else {
      t->file = dir / (h.digest().hex() + ".json");
      std::string text;
      switch (detail::try_read_file(t->file, detail::kMaxTextFileBytes, &text, &why)) {
        case detail::ReadStatus::Ok:
          try {
            TuningTable disk = parse_tuning_table(text, t->file.string());
            std::string mismatch = tuning_table_mismatch(disk, image);
            if (!mismatch.empty()) throw Error(ErrorKind::Format, mismatch);
            merge(disk);
          } catch (const Error& e) {
            warn("tuning table '" + t->file.string() + "' is ignored (" + e.message() +
                 "); it will be rewritten");
          }
          break;
        case detail::ReadStatus::Missing:
          break;
        case detail::ReadStatus::Failed:
          warn("cannot read tuning table '" + t->file.string() + "' (" + why + "); ignoring it");
          break;
      }
    }
  }
  DeviceTuning* raw = t.get();
  tactics->owned.push_back(std::move(t));
  slot.store(raw, std::memory_order_release);
  return *raw;
}

// Writes the table to its file, merged with what other processes wrote there
// (store_tuning_table). A failure is a warning: tuning is an optimisation.
void KernelOp::State::persist(DeviceTuning& table) {
  if (table.file.empty()) return;
  TuningTable copy;
  {
    std::shared_lock lock(table.mutex);
    copy = table.table;
  }
  if (std::string why = store_tuning_table(table.file, copy); !why.empty()) {
    warn("cannot write tuning table '" + table.file.string() + "' (" + why +
         "); the result stays in memory");
  }
}

// The public tactic API.

int KernelOp::num_tactics() const {
  return static_cast<int>(plan().configs.size());
}

const std::string& KernelOp::tactic_text(int tactic) const {
  if (tactic < 0 || tactic >= num_tactics()) {
    KERNELOP_RAISE(state_->error(ErrorKind::Spec))
        << "tactic " << tactic << " does not exist (tactics 0.." << num_tactics() - 1 << ")";
  }
  return plan().configs[static_cast<std::size_t>(tactic)].text;
}

void KernelOp::pin_tactic(std::int64_t tactic) const {
  if (tactic < -1 || tactic >= num_tactics()) {
    KERNELOP_RAISE(state_->error(ErrorKind::Spec))
        << "cannot pin tactic " << tactic << "; expected -1 (unpin) or 0.." << num_tactics() - 1;
  }
  State& s = *state_;
  s.tactics->pinned.store(static_cast<int>(tactic), std::memory_order_relaxed);
  // A launch memoised under the previous pin is not replayed (Note [launch memo]).
  s.tactics->generation.fetch_add(1, std::memory_order_acq_rel);
  if (s.launch_memo) s.launch_memo->entry.clear();
}

int KernelOp::pinned_tactic() const {
  return state_->tactics->pinned.load(std::memory_order_relaxed);
}

int KernelOp::last_tactic() const {
  return state_->tactics->last.load(std::memory_order_relaxed);
}

TuningStats KernelOp::tuning_stats() const {
  const detail::TacticState& t = *state_->tactics;
  TuningStats s;
  s.timed_runs = t.timed_runs.load();
  s.tunings = t.tunings.load();
  s.table_hits = t.table_hits.load();
  s.defaults = t.defaults.load();
  s.pinned = t.pins.load();
  s.single = t.single.load();
  return s;
}

std::vector<TuningTable> KernelOp::tuning_tables() const {
  detail::TacticState& t = *state_->tactics;
  std::lock_guard lock(t.tables_mutex);
  std::vector<TuningTable> out;
  for (const auto& d : t.owned) {
    std::shared_lock read(d->mutex);
    out.push_back(d->table);
  }
  // Tables for devices not used yet in this process (a package's, an added one).
  for (const TuningTable& added : t.added) {
    bool seen = std::any_of(out.begin(), out.end(), [&](const TuningTable& o) {
      return o.device == added.device && o.arch == added.arch;
    });
    if (!seen) out.push_back(added);
  }
  return out;
}

void KernelOp::add_tuning_table(const TuningTable& table) const {
  State& s = *state_;
  if (std::string why = tuning_table_mismatch(table, s.image); !why.empty()) {
    KERNELOP_RAISE(s.error(ErrorKind::Format)) << "the tuning table does not fit: " << why;
  }
  detail::TacticState& t = *s.tactics;
  std::lock_guard lock(t.tables_mutex);
  t.added.push_back(table);
  for (const auto& d : t.owned) {
    if (d->table.device != table.device || d->table.arch != table.arch) continue;
    for (const TuningEntry& e : table.entries) d->put(e);
  }
  t.generation.fetch_add(1, std::memory_order_acq_rel);  // a decision may change
  t.memo.clear();
  if (s.launch_memo) s.launch_memo->entry.clear();
}

}  // namespace kernelop
