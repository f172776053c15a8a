// Timing a tuned op's eligible configs and recording the fastest (step 5 of Note [tactic
// selection]).
//
// Note [tuning runs]: a tuning never writes the caller's tensors. Outputs and mutated inputs get
// scratch buffers of the same extent (a mutated input's scratch is refilled from the input before
// every measurement); inputs the kernel only reads are shared. Each config runs once to warm up
// (a config that cannot launch here drops out) and once more, timed, to estimate its duration.
// A measurement is then a queue of launches of one config between two events, long enough for
// the fastest config (kMinMeasureMs) to sit well above the events' resolution and the launch
// jitter, and of the same length for every config: a kernel of a few microseconds is timed over
// tens of launches, one of a millisecond alone, after a write over twice the L2 cache so that it
// finds none of the previous run's data (a queue of short launches keeps the cache warm, as a
// model's stream of them does). The queue is captured once into a CUDA
// graph and launched as one, so that the kernels run back to back on the device however long the
// host takes to launch each: a queue launched one by one would time the host, not the kernel.
// Rounds interleave the configs, so that clock drift favours none, until the fastest config's
// median separates from the others by more than their noise, at least LoadOptions::tuning_runs
// rounds and at most kMaxRounds. The fastest median wins, except that a config within the noise of
// it (kMaxTie at most) with a lower id wins instead: between configs the timing cannot tell apart,
// the simpler one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

#include "kernelop/device.hpp"
#include "runtime/kernel_op_state.hpp"

namespace kernelop {
namespace {

constexpr double kMinMeasureMs = 0.1;  // one measurement spans at least this much kernel time
constexpr int kMaxQueue = 2000;        // launches in one measurement, at most
constexpr double kFlushFromMs = 0.05;  // kernels at least this long are timed after an L2 flush
constexpr int kMaxRounds = 40;
constexpr double kMaxTie = 0.03;     // a tie is within the noise, and never more than 3%
constexpr double kMinTie = 0.01;     // configs within 1% are always a tie
constexpr double kMinNoise = 0.005;  // the noise is never taken to be below 0.5%
constexpr double kBudgetMs = 2000;   // a tuning stops adding rounds after this long

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

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double at = q * static_cast<double>(v.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(at));
  std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

// Scratch memory for what the kernel writes (Note [tuning runs]).
struct Scratch {
  TensorPtrs ptrs;
  std::vector<DeviceBuffer> buffers;
  struct Refill {
    CUdeviceptr from, to;
    std::size_t bytes;
  };
  std::vector<Refill> refill;

  // `copy_outputs`: the outputs hold what launches before the op's kernel wrote (LaunchStep::
  // before), copied like mutated inputs.
  Scratch(const OpPlan& p, const TensorPtrs& caller, std::span<const TensorView> inputs,
          std::span<const TensorView> outputs, bool copy_outputs)
      : ptrs(caller) {
    buffers.reserve(inputs.size() + outputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (p.tensors[i].mutated) add(inputs[i], i, true);
    }
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      add(outputs[o], static_cast<std::size_t>(p.outputs[o].slot), copy_outputs);
    }
  }
  // Covers exactly the elements the view reaches (negative strides included); the kernel gets
  // the view's origin inside it.
  void add(const TensorView& v, std::size_t slot, bool copy) {
    Extent e = extent(v);
    std::size_t bytes = e.bytes(v);
    auto lo_bytes =
        static_cast<std::ptrdiff_t>(e.lo) * static_cast<std::ptrdiff_t>(dtype_size(v.dtype));
    buffers.emplace_back(bytes);
    auto base = reinterpret_cast<CUdeviceptr>(buffers.back().get());
    ptrs[slot] = reinterpret_cast<const void*>(base - static_cast<CUdeviceptr>(lo_bytes));
    if (copy && bytes > 0) {
      refill.push_back({reinterpret_cast<CUdeviceptr>(v.data) + static_cast<CUdeviceptr>(lo_bytes),
                        base, bytes});
    }
  }
  void refill_on(CUstream s) const {
    const Driver& d = Driver::require();
    for (const Refill& r : refill) {
      check_cuda(d.cuMemcpyDtoDAsync(r.to, r.from, r.bytes, s), "cuMemcpyDtoDAsync",
                 "tuning scratch");
    }
  }
};

// A CUDA graph of one config's queue, captured on a private stream (so that the caller's,
// possibly the legacy default stream, is never captured) and launched on the caller's.
class QueueGraph {
 public:
  QueueGraph() = default;
  QueueGraph(const QueueGraph&) = delete;
  QueueGraph& operator=(const QueueGraph&) = delete;
  ~QueueGraph() {
    if (const Driver* d = Driver::get()) {
      if (exec_) d->cuGraphExecDestroy(exec_);
      if (graph_) d->cuGraphDestroy(graph_);
    }
  }
  // Captures what `enqueue(stream)` launches.
  template <class Enqueue>
  void capture(const Enqueue& enqueue) {
    const Driver& d = Driver::require();
    DeviceStream capturing;
    auto cs = static_cast<CUstream>(capturing.get());
    check_cuda(d.cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture", "tuning");
    try {
      enqueue(capturing.get());
    } catch (...) {
      CUgraph partial = nullptr;
      if (d.cuStreamEndCapture(cs, &partial) == CUDA_SUCCESS && partial) d.cuGraphDestroy(partial);
      throw;
    }
    check_cuda(d.cuStreamEndCapture(cs, &graph_), "cuStreamEndCapture", "tuning");
    check_cuda(d.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiate", "tuning");
  }
  void launch(CUstream s) const {
    check_cuda(Driver::require().cuGraphLaunch(exec_, s), "cuGraphLaunch", "tuning");
  }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// One config's measurements: milliseconds per launch, one per round.
struct Timings {
  int queue = 1;
  bool flush = false;
  std::unique_ptr<QueueGraph> graph;
  std::vector<double> ms;
  double median() const { return quantile(ms, 0.5); }
  // The relative spread of the measurements (interquartile range over the median).
  double noise() const {
    if (ms.size() < 3) return kMaxTie;
    double m = median();
    return m > 0 ? std::max(kMinNoise, (quantile(ms, 0.75) - quantile(ms, 0.25)) / m) : kMaxTie;
  }
};

// How close two configs' medians must be to count as a tie: their noise, between 1% and 3%.
double tie(const Timings& a, const Timings& b) {
  return std::clamp(a.noise() + b.noise(), kMinTie, kMaxTie);
}

// The winner among timed configs (Note [tuning runs]): the fastest median, or a lower id within
// the noise of it.
int pick(const std::vector<int>& eligible, const std::vector<Timings>& times) {
  int best = -1;
  for (int c : eligible) {
    const Timings& t = times[static_cast<std::size_t>(c)];
    if (t.ms.empty()) continue;
    if (best < 0 || t.median() < times[static_cast<std::size_t>(best)].median()) best = c;
  }
  if (best < 0) return -1;
  const Timings& b = times[static_cast<std::size_t>(best)];
  for (int c : eligible) {  // in id order: the lowest id within the tie wins
    const Timings& t = times[static_cast<std::size_t>(c)];
    if (!t.ms.empty() && t.median() <= b.median() * (1 + tie(b, t))) return c;
  }
  return best;
}

// Whether the fastest config is told apart from every other: each other median exceeds it by
// more than both configs' noise, or lies within the tie (where the lower id wins anyway).
bool separated(const std::vector<int>& eligible, const std::vector<Timings>& times) {
  int best = -1;
  for (int c : eligible) {
    const Timings& t = times[static_cast<std::size_t>(c)];
    if (!t.ms.empty() && (best < 0 || t.median() < times[static_cast<std::size_t>(best)].median()))
      best = c;
  }
  if (best < 0) return true;
  const Timings& b = times[static_cast<std::size_t>(best)];
  for (int c : eligible) {
    const Timings& t = times[static_cast<std::size_t>(c)];
    if (c == best || t.ms.empty()) continue;
    double gap = t.median() / b.median() - 1;
    double noise = b.noise() + t.noise();
    if (gap > noise) continue;                   // clearly slower
    if (gap <= tie(b, t) && c < best) continue;  // a tie the lower id wins
    return false;
  }
  return true;
}

}  // namespace

int KernelOp::State::autotune(Frame& f, const detail::TuneKey& key,
                              const std::vector<int>& eligible, std::span<const TensorView> inputs,
                              std::span<const ScalarArg> scalars,
                              std::span<const TensorView> outputs, const TensorPtrs& ptrs,
                              int device, void* stream, detail::DeviceTuning& table) {
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
  detail::ScopedContext scope(m.context);
  auto s = static_cast<CUstream>(stream);
  Scratch scratch(p, ptrs, inputs, outputs, before > 0);
  int l2 = 0;
  CUdevice dev = 0;
  check_cuda(d.cuDeviceGet(&dev, device), "cuDeviceGet", std::to_string(device));
  check_cuda(d.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev),
             "cuDeviceGetAttribute", "L2 cache size");
  std::size_t flush_bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(l2), 1 << 20);
  DeviceBuffer flush(flush_bytes);
  DeviceEvent start, stop;
  std::vector<Timings> times(p.configs.size());
  // One launch of config c on the scratch, its outputs initialised first as every launch's are
  // (Note [initialised outputs]: a kernel may spin on a zeroed lock or count into a zeroed sum);
  // after launches before the op's kernel, the outputs as those left them, inits included.
  auto launch_on_scratch = [&](int c, void* on) {
    if (before > 0) {
      scratch.refill_on(static_cast<CUstream>(on));
    } else if (inits_outputs) {
      init_outputs(scratch.ptrs, outputs, device, on);
    }
    launch_config(f, c, scratch.ptrs, scalars, device, on);
  };
  // One measurement of config c: its queue of launches between two events, in ms per launch.
  auto measure = [&](int c, int round) {
    Timings& tc = times[static_cast<std::size_t>(c)];
    scratch.refill_on(s);
    if (tc.flush) {
      check_cuda(d.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(flush.get()),
                                   static_cast<unsigned char>(round), flush_bytes, s),
                 "cuMemsetD8Async", "L2 flush");
    }
    start.record(stream);
    if (tc.graph) {
      tc.graph->launch(s);
    } else {
      for (int i = 0; i < tc.queue; ++i) launch_on_scratch(c, stream);
    }
    stop.record(stream);
    t.timed_runs.fetch_add(static_cast<std::uint64_t>(tc.queue), std::memory_order_relaxed);
    return static_cast<double>(stop.since(start)) / tc.queue;
  };
  // Warm-up (a config that cannot launch here drops out), then one timed launch: the estimates
  // that size the queue.
  std::vector<std::string> failed(p.configs.size());
  std::vector<int> timed;
  double fastest = 0;
  for (int c : eligible) {
    try {
      scratch.refill_on(s);
      launch_on_scratch(c, stream);
      t.timed_runs.fetch_add(1, std::memory_order_relaxed);
      double estimate = std::max(measure(c, 0), 1e-4);
      fastest = timed.empty() ? estimate : std::min(fastest, estimate);
      timed.push_back(c);
    } catch (const Error& e) {
      failed[static_cast<std::size_t>(c)] = e.message();
    }
  }
  if (timed.empty()) {
    KERNELOP_RAISE(error(ErrorKind::Launch))
        << "no eligible config could be launched to tune it; tactic " << eligible.front() << ": "
        << failed[static_cast<std::size_t>(eligible.front())];
  }
  // One queue length and one flush rule for every config, sized by the fastest: a graph's fixed
  // start-up cost, spread over the queue, then weighs the same on each (a shorter queue for one
  // config would add more of it to that config's time per launch).
  const int queue = std::clamp(static_cast<int>(std::ceil(kMinMeasureMs / fastest)), 1, kMaxQueue);
  for (int c : timed) {
    Timings& tc = times[static_cast<std::size_t>(c)];
    tc.queue = queue;
    tc.flush = fastest >= kFlushFromMs;
    if (queue == 1) continue;
    tc.graph = std::make_unique<QueueGraph>();
    tc.graph->capture([&](void* capturing) {
      for (int i = 0; i < queue; ++i) launch_on_scratch(c, capturing);
    });
  }
  const int min_rounds = std::max(1, options.tuning_runs);
  for (int r = 0; r < kMaxRounds; ++r) {
    for (int c : timed) times[static_cast<std::size_t>(c)].ms.push_back(measure(c, r + 1));
    if (r + 1 < min_rounds) continue;
    double spent =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (separated(timed, times) || spent > kBudgetMs) break;
  }
  int best = pick(timed, times);
  TuningEntry entry;
  entry.key.assign(key.words.begin(), key.words.begin() + static_cast<std::ptrdiff_t>(key.size));
  entry.times_ms.assign(p.configs.size(), -1.0);
  for (int c : timed)
    entry.times_ms[static_cast<std::size_t>(c)] = times[static_cast<std::size_t>(c)].median();
  entry.config = best;
  std::ostringstream text;
  for (int i = 0; i < p.num_tensor_inputs; ++i) {
    auto slot = static_cast<std::size_t>(i);
    text << (i ? " " : "") << p.tensors[slot].name << "=" << dtype_name(inputs[slot].dtype)
         << f.shapes[slot].to_string();
  }
  entry.text = text.str();
  if (detail::log_enabled(options)) {
    std::cerr
        << "kernelop: op " << p.op_name << " on device " << device << " (" << table.table.device
        << "): tuned " << entry.text << " in "
        << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()
        << " ms:";
    for (int c : timed) {
      const Timings& tc = times[static_cast<std::size_t>(c)];
      std::cerr << " [" << c << "] " << tc.median() << " ms (x" << tc.queue << ", " << tc.ms.size()
                << " rounds, noise " << tc.noise() * 100 << "%)";
    }
    std::cerr << "; chose tactic " << best << " (" << p.configs[static_cast<std::size_t>(best)].text
              << ")\n";
  }
  table.put(entry);
  t.tunings.fetch_add(1, std::memory_order_relaxed);
  persist(table);
  return best;
}

}  // namespace kernelop
