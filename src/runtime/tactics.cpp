// Choosing a tuned op's config at launch: eligibility, the pin, the tuning table (memory, disk,
// package), timing the eligible configs with CUDA events, and the public tactic API.
//
// Note [tuning runs]: a tuning never writes the caller's tensors. Outputs and mutated inputs
// get scratch buffers of the same extent (a mutated input's scratch is refilled from the input
// before every run); inputs the kernel only reads are shared. Each config runs once to warm up,
// then `tuning_runs` times, configs interleaved round by round so that clock drift favours none,
// each timed run preceded by a write over twice the L2 cache so that no run finds the previous
// one's data in it. Events bracket the kernel alone, on the caller's stream and device.
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

namespace {

// Owned device memory in the current context, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, const char* what) {
    const Driver& d = Driver::require();
    check_cuda(d.cuMemAlloc(&ptr_, std::max<std::size_t>(bytes, 1)), "cuMemAlloc", what);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_) { o.ptr_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) Driver::get()->cuMemFree(ptr_);
  }
  CUdeviceptr get() const { return ptr_; }

 private:
  CUdeviceptr ptr_ = 0;
};

class Event {
 public:
  Event() { check_cuda(Driver::require().cuEventCreate(&e_, 0), "cuEventCreate", "tuning"); }
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  ~Event() {
    if (e_) Driver::get()->cuEventDestroy(e_);
  }
  CUevent get() const { return e_; }

 private:
  CUevent e_ = nullptr;
};

// The bytes a view spans from its data pointer (all of a contiguous tensor; the strided extent
// of a view).
// The elements a view reaches from its data pointer: offsets lo..hi (lo < 0 with a negative
// stride). A scratch copy covers exactly them.
struct Extent {
  std::int64_t lo = 0, hi = -1;
  std::size_t bytes(const TensorView& t) const {
    return static_cast<std::size_t>(hi - lo + 1) * dtype_size(t.dtype);
  }
};
Extent extent(const TensorView& t) {
  if (t.shape.numel() == 0) return {};
  Extent e{0, 0};
  for (int d = 0; d < t.shape.rank(); ++d) {
    std::int64_t reach = (t.shape[d] - 1) * t.stride(d);
    (reach < 0 ? e.lo : e.hi) += reach;
  }
  return e;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace
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

int KernelOp::State::choose_config(Frame& f, std::span<const TensorView> inputs,
                                   std::span<const ScalarArg> scalars,
                                   std::span<const TensorView> outputs, const TensorPtrs& ptrs,
                                   int device, void* stream) {
  const OpPlan& p = plan();
  detail::TacticState& t = *tactics;
  if (device < 0 || device >= kMaxDevices) {
    KERNELOP_RAISE(error(ErrorKind::Launch))
        << "device " << device << " is out of range (0.." << kMaxDevices - 1 << ")";
  }
  if (reads_arch) f.arch = module_for(device).arch;
  FrameSizes sizes{f};
  FrameEnv env{p, sizes};
  // A config whose requirement cannot be evaluated for these inputs (it overflows, or divides
  // by zero) cannot run them: it is ineligible, not the whole call's failure.
  auto holds = [&](int c) {
    f.tunables = p.configs[static_cast<std::size_t>(c)].values.data();
    for (const RequirementPlan& r : p.configs[static_cast<std::size_t>(c)].requirements) {
      try {
        if (env.eval(r.condition) == 0) return false;
      } catch (const Error&) {
        return false;
      }
    }
    return true;
  };
  int pinned = t.pinned.load(std::memory_order_relaxed);
  if (pinned >= 0 && holds(pinned)) {
    t.pins.fetch_add(1, std::memory_order_relaxed);
    t.last.store(pinned, std::memory_order_relaxed);
    return pinned;
  }
  // Note [decision memo]: the exact signature of this call.
  std::array<std::int64_t, detail::DecisionMemo::kWords> sig;
  std::size_t n = 0;
  bool memo = pinned < 0 && p.configs.size() > 1;
  auto put = [&](std::int64_t v) {
    if (n < sig.size()) sig[n] = v;
    ++n;
  };
  if (memo) {
    put(device);
    put(f.instance);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const TensorView& v = inputs[i];
      put(v.shape.rank());
      for (int d = 0; d < v.shape.rank(); ++d) put(v.shape[d]);
      put(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(v.data) & 4095u));
      // Strides too: a requirement may read stride() of any tensor, and a contiguous one's
      // strides along size-1 axes are free.
      for (int d = 0; d < v.shape.rank(); ++d) put(v.stride(d));
    }
    for (const TensorView& v : outputs) {
      put(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(v.data) & 4095u));
      for (int d = 0; d < v.shape.rank(); ++d) put(v.stride(d));
    }
    for (std::size_t i = 0; i < p.scalars.size(); ++i) {
      if (p.scalars[i].type != ScalarType::Float && p.scalars[i].type != ScalarType::Float64)
        put(f.ints[i]);
    }
    memo = n <= sig.size();
    if (memo) {
      if (int c = t.memo.find(sig.data(), n); c >= 0) {
        t.table_hits.fetch_add(1, std::memory_order_relaxed);
        t.last.store(c, std::memory_order_relaxed);
        return c;
      }
    }
  }
  // Eligibility: every requirement of the config holds.
  std::array<std::uint64_t, detail::kEligibleWords> mask{};
  int first = -1;
  for (std::size_t c = 0; c < p.configs.size(); ++c) {
    if (!holds(static_cast<int>(c))) continue;
    mask[c / 64] |= 1ull << (c % 64);
    if (first < 0) first = static_cast<int>(c);
  }
  auto eligible = [&](int c) { return (mask[static_cast<std::size_t>(c) / 64] >> (c % 64)) & 1u; };
  auto config_text = [&](int c) {
    return "tactic " + std::to_string(c) + " (" + p.configs[static_cast<std::size_t>(c)].text + ")";
  };
  // Why config c cannot run: its first broken requirement, in its own terms.
  auto why_not = [&](int c) {
    f.tunables = p.configs[static_cast<std::size_t>(c)].values.data();
    for (const RequirementPlan& r : p.configs[static_cast<std::size_t>(c)].requirements) {
      std::string text = "'" + r.text + "'";
      try {
        if (env.eval(r.condition) != 0) continue;
      } catch (const Error& e) {
        return text + ", which cannot be evaluated for these inputs (" + e.message() + ")";
      }
      if (is_comparison(r.condition.op())) {
        text += " (" + std::to_string(env.eval(r.condition.lhs())) + " " +
                std::string(comparison_text(r.condition.op())) + " " +
                std::to_string(env.eval(r.condition.rhs())) + ")";
      }
      return text;
    }
    return std::string("nothing");
  };
  if (pinned >= 0) {
    KERNELOP_RAISE(error(ErrorKind::Launch))
        << config_text(pinned) << " is pinned but cannot run these inputs: it requires "
        << why_not(pinned);
  }
  if (first < 0) {
    detail::ErrorStream e = error(ErrorKind::Launch);
    e << "no config can run these inputs:";
    for (std::size_t c = 0; c < p.configs.size(); ++c) {
      e << (c ? ";" : "") << " " << config_text(static_cast<int>(c)) << " requires "
        << why_not(static_cast<int>(c));
    }
    KERNELOP_RAISE(e);
  }
  if (p.configs.size() == 1) return 0;  // one config, and it can run: nothing to choose
  std::size_t num_eligible = 0;
  for (std::uint64_t w : mask) num_eligible += static_cast<std::size_t>(__builtin_popcountll(w));
  if (num_eligible == 1) {  // one can run these inputs: nothing to choose, nothing to time
    t.single.fetch_add(1, std::memory_order_relaxed);
    t.last.store(first, std::memory_order_relaxed);
    return first;
  }
  // The key: dtype combination, eligible set, bucketed sizes (Note [tuning key]).
  TuneKey key;
  key.push(f.instance);
  for (std::uint64_t w : mask) key.push(static_cast<std::int64_t>(w));
  if (p.tuning_key.empty()) {
    for (int i = 0; i < p.num_tensor_inputs; ++i) {
      const Shape& s = f.shapes[static_cast<std::size_t>(i)];
      key.push(s.rank());
      for (int d = 0; d < s.rank(); ++d) key.push(tuning_bucket(s[d]));
    }
  } else {
    for (const Expr& e : p.tuning_key) {
      std::int64_t v = 0;
      try {
        v = env.eval(e);
      } catch (const Error& err) {
        // A key these inputs cannot be bucketed by: nothing to look up or remember; the first
        // eligible config runs, untuned.
        if (detail::log_enabled(options)) {
          std::cerr << "kernelop: op " << p.op_name << ": tuning key '" << e.to_string()
                    << "' cannot be evaluated (" << err.message() << "); using "
                    << config_text(first) << " untuned\n";
        }
        t.defaults.fetch_add(1, std::memory_order_relaxed);
        t.last.store(first, std::memory_order_relaxed);
        return first;
      }
      key.push(tuning_bucket(v));
    }
  }
  // A decision read before add_tuning_table changes the tables is not memoised after it.
  std::uint64_t generation = t.generation.load(std::memory_order_acquire);
  auto remember = [&](int c) {
    if (memo && t.generation.load(std::memory_order_acquire) == generation) {
      t.memo.store(sig.data(), n, c);
    }
  };
  DeviceTuning& table = device_tuning(device);
  int config = table.find(key);
  if (config >= 0 && eligible(config)) {
    t.table_hits.fetch_add(1, std::memory_order_relaxed);
    t.last.store(config, std::memory_order_relaxed);
    remember(config);
    return config;
  }
  bool tune = options.tune && env_flag("KERNELOP_TUNE", true);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (tune) {
    // Any answer but "not capturing" (an error included) means: time nothing.
    const Driver& d = Driver::require();
    detail::ScopedContext scope(module_for(device).ctx->get());
    if (d.cuStreamIsCapturing(static_cast<CUstream>(stream), &capture) != CUDA_SUCCESS) {
      capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    }
  }
  if (!tune || capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    if (detail::log_enabled(options)) {
      std::cerr << "kernelop: op " << p.op_name << ": "
                << (tune ? "the stream is capturing a CUDA graph" : "tuning is off")
                << "; no tuning for this call, using " << config_text(first)
                << " (the first eligible)\n";
    }
    t.defaults.fetch_add(1, std::memory_order_relaxed);
    t.last.store(first, std::memory_order_relaxed);
    return first;
  }
  std::vector<int> candidates;
  for (int c = 0; c < static_cast<int>(p.configs.size()); ++c) {
    if (eligible(c)) candidates.push_back(c);
  }
  try {
    config = autotune(f, key, candidates, inputs, scalars, outputs, ptrs, device, stream, table);
  } catch (const Error& e) {
    // Tuning is an optimisation: a failure (scratch memory for a large in-place tensor, say)
    // leaves the call to the first eligible config, remembered so that the call does not retry.
    warn("op " + p.op_name + ": tuning failed (" + e.message() + "); using " + config_text(first) +
         " untuned");
    t.defaults.fetch_add(1, std::memory_order_relaxed);
    config = first;
  }
  t.last.store(config, std::memory_order_relaxed);
  remember(config);
  return config;
}

int KernelOp::State::autotune(Frame& f, const TuneKey& key, const std::vector<int>& eligible,
                              std::span<const TensorView> inputs,
                              std::span<const ScalarArg> scalars,
                              std::span<const TensorView> outputs, const TensorPtrs& ptrs,
                              int device, void* stream, DeviceTuning& table) {
  const OpPlan& p = plan();
  detail::TacticState& t = *tactics;
  std::lock_guard tuning(t.tune_mutex);
  if (int done = table.find(key);  // another thread tuned it meanwhile
      done >= 0 && std::find(eligible.begin(), eligible.end(), done) != eligible.end()) {
    t.table_hits.fetch_add(1, std::memory_order_relaxed);
    return done;
  }
  auto t0 = std::chrono::steady_clock::now();
  const Driver& d = Driver::require();
  const detail::DeviceModule& m = module_for(device);
  detail::ScopedContext scope(m.ctx->get());
  auto s = static_cast<CUstream>(stream);
  // Note [tuning runs]: scratch for what the kernel writes, covering exactly the elements the
  // view reaches (negative strides included); the kernel gets the view's origin inside it.
  TensorPtrs scratch = ptrs;
  std::vector<detail::DeviceBuffer> buffers;
  struct Refill {
    CUdeviceptr from, to;
    std::size_t bytes;
  };
  std::vector<Refill> refill;
  buffers.reserve(inputs.size() + outputs.size() + 1);
  auto make_scratch = [&](const TensorView& v, std::size_t slot, bool copy) {
    detail::Extent e = detail::extent(v);
    std::size_t bytes = e.bytes(v);
    auto lo_bytes =
        static_cast<std::ptrdiff_t>(e.lo) * static_cast<std::ptrdiff_t>(dtype_size(v.dtype));
    buffers.emplace_back(bytes, "tuning scratch");
    CUdeviceptr base = buffers.back().get();
    scratch[slot] = reinterpret_cast<const void*>(base - static_cast<CUdeviceptr>(lo_bytes));
    if (copy && bytes > 0) {
      refill.push_back({reinterpret_cast<CUdeviceptr>(v.data) + static_cast<CUdeviceptr>(lo_bytes),
                        base, bytes});
    }
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (p.tensors[i].mutated) make_scratch(inputs[i], i, true);
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    make_scratch(outputs[o], static_cast<std::size_t>(p.outputs[o].slot), false);
  }
  int l2 = 0;
  CUdevice dev = 0;
  detail::check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet", std::to_string(device));
  detail::check_cuda(d.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev),
                     "cuDeviceGetAttribute", "L2 cache size");
  std::size_t flush_bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(l2), 1 << 20);
  buffers.emplace_back(flush_bytes, "L2 flush buffer");
  CUdeviceptr flush = buffers.back().get();
  auto prepare_run = [&] {
    for (const Refill& r : refill) {
      detail::check_cuda(d.cuMemcpyDtoDAsync(r.to, r.from, r.bytes, s), "cuMemcpyDtoDAsync",
                         "tuning scratch");
    }
  };
  const int runs = std::max(1, options.tuning_runs);
  std::vector<std::string> failed(p.configs.size());
  for (int c : eligible) {  // warm-up (and a config that cannot launch here drops out)
    prepare_run();
    try {
      launch_config(f, c, scratch, scalars, device, stream);
    } catch (const Error& e) {
      failed[static_cast<std::size_t>(c)] = e.message();
    }
    t.timed_runs.fetch_add(1, std::memory_order_relaxed);
  }
  std::vector<std::vector<detail::Event>> events(p.configs.size());
  for (int r = 0; r < runs; ++r) {
    for (int c : eligible) {
      if (!failed[static_cast<std::size_t>(c)].empty()) continue;
      prepare_run();
      detail::check_cuda(d.cuMemsetD8Async(flush, static_cast<unsigned char>(r), flush_bytes, s),
                         "cuMemsetD8Async", "L2 flush");
      auto& ev = events[static_cast<std::size_t>(c)];
      ev.emplace_back();
      ev.emplace_back();
      detail::check_cuda(d.cuEventRecord(ev[ev.size() - 2].get(), s), "cuEventRecord", "tuning");
      launch_config(f, c, scratch, scalars, device, stream);
      detail::check_cuda(d.cuEventRecord(ev.back().get(), s), "cuEventRecord", "tuning");
      t.timed_runs.fetch_add(1, std::memory_order_relaxed);
    }
  }
  TuningEntry entry;
  entry.key.assign(key.words.begin(), key.words.begin() + static_cast<std::ptrdiff_t>(key.size));
  entry.times_ms.assign(p.configs.size(), -1.0);
  int best = -1;
  for (int c : eligible) {
    auto& ev = events[static_cast<std::size_t>(c)];
    if (ev.empty()) continue;
    std::vector<double> ms;
    for (std::size_t i = 0; i < ev.size(); i += 2) {
      detail::check_cuda(d.cuEventSynchronize(ev[i + 1].get()), "cuEventSynchronize", "tuning");
      float v = 0;
      detail::check_cuda(d.cuEventElapsedTime(&v, ev[i].get(), ev[i + 1].get()),
                         "cuEventElapsedTime", "tuning");
      ms.push_back(v);
    }
    double med = detail::median(ms);
    entry.times_ms[static_cast<std::size_t>(c)] = med;
    if (best < 0 || med < entry.times_ms[static_cast<std::size_t>(best)]) best = c;
  }
  if (best < 0) {
    KERNELOP_RAISE(error(ErrorKind::Launch)) << "no eligible config could be launched to tune it; "
                                             << "tactic " << eligible.front() << ": "
                                             << failed[static_cast<std::size_t>(eligible.front())];
  }
  entry.config = best;
  {
    std::ostringstream text;
    for (int i = 0; i < p.num_tensor_inputs; ++i) {
      auto slot = static_cast<std::size_t>(i);
      text << (i ? " " : "") << p.tensors[slot].name << "=" << dtype_name(inputs[slot].dtype)
           << f.shapes[slot].to_string();
    }
    entry.text = text.str();
  }
  if (detail::log_enabled(options)) {
    std::cerr
        << "kernelop: op " << p.op_name << " on device " << device << " (" << table.table.device
        << "): tuned " << entry.text << " in "
        << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()
        << " ms:";
    for (int c : eligible) {
      std::cerr << " [" << c << "] " << entry.times_ms[static_cast<std::size_t>(c)] << " ms";
    }
    std::cerr << "; chose tactic " << best << " (" << p.configs[static_cast<std::size_t>(best)].text
              << ")\n";
  }
  table.put(entry);
  t.tunings.fetch_add(1, std::memory_order_relaxed);
  persist(table);
  return best;
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
  state_->tactics->pinned.store(static_cast<int>(tactic), std::memory_order_relaxed);
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
}

}  // namespace kernelop
