// Note [tactic selection]: the config a launch of a tuned op uses, chosen in this order:
//   1. the pinned tactic (KernelOp::pin_tactic, KERNELOP_TACTIC), if it can run the inputs;
//   2. the decision memo (Note [decision memo]): a call exactly like the last one repeats it;
//   3. the only eligible config, when one alone can run the inputs (nothing timed);
//   4. the tuning table (memory, disk, package) for the call's key (Note [tuning key]);
//   5. tuning now (tuner.cpp), unless tuning is off or the stream is capturing a CUDA graph;
//   6. else the first eligible config.
// A config is eligible when its own requires hold for the inputs; one whose requires cannot be
// evaluated (an overflow, a zero divisor) is not. Never a config whose requires the inputs break.
#include <iostream>

#include "kernelop/numbers.hpp"
#include "runtime/kernel_op_state.hpp"

namespace kernelop {
namespace {

// What selection reads of one call.
struct Selection {
  const OpPlan& p;
  Frame& f;
  FrameEnv env;

  Selection(const OpPlan& plan, Frame& frame, const FrameSizes& sizes)
      : p(plan), f(frame), env{plan, sizes} {}

  const ConfigPlan& config(int c) const { return p.configs[static_cast<std::size_t>(c)]; }

  // Whether config c's requires hold (an unevaluable one does not).
  bool holds(int c) {
    f.tunables = config(c).values.data();
    for (const RequirementPlan& r : config(c).requirements) {
      try {
        if (env.eval(r.condition) == 0) return false;
      } catch (const Error&) {
        return false;
      }
    }
    return true;
  }

  std::string config_text(int c) const {
    return "tactic " + std::to_string(c) + " (" + config(c).text + ")";
  }

  // Why config c cannot run: its first broken requirement, in its own terms.
  std::string why_not(int c) {
    f.tunables = config(c).values.data();
    for (const RequirementPlan& r : config(c).requirements) {
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
    return "nothing";
  }

  [[noreturn]] void fail_none_eligible() {
    detail::ErrorStream e = detail::op_error(p, ErrorKind::Launch);
    e << "no config can run these inputs:";
    for (std::size_t c = 0; c < p.configs.size(); ++c) {
      e << (c ? ";" : "") << " " << config_text(static_cast<int>(c)) << " requires "
        << why_not(static_cast<int>(c));
    }
    KERNELOP_RAISE(e);
  }
};

// The tuning key (Note [tuning key]): dtype combination, eligible set, bucketed sizes. nullopt
// when the spec's tuning key cannot be evaluated for these inputs (`why` says why).
std::optional<detail::TuneKey> tuning_key(
    const OpPlan& p, const Frame& f, const FrameEnv& env,
    const std::array<std::uint64_t, detail::kEligibleWords>& mask, std::string& why) {
  detail::TuneKey key;
  key.push(f.instance);
  for (std::uint64_t w : mask) key.push(static_cast<std::int64_t>(w));
  if (p.tuning_key.empty()) {
    for (int i = 0; i < p.num_tensor_inputs; ++i) {
      const Shape& s = f.shapes[static_cast<std::size_t>(i)];
      key.push(s.rank());
      for (int d = 0; d < s.rank(); ++d) key.push(tuning_bucket(s[d]));
    }
    return key;
  }
  for (const Expr& e : p.tuning_key) {
    try {
      key.push(tuning_bucket(env.eval(e)));
    } catch (const Error& err) {
      why = "tuning key '" + e.to_string() + "' cannot be evaluated (" + err.message() + ")";
      return std::nullopt;
    }
  }
  return key;
}

}  // namespace

void KernelOp::State::count_choice(detail::Chosen how, int config) {
  detail::TacticState& t = *tactics;
  std::atomic<std::uint64_t>* counter = nullptr;
  switch (how) {
    case detail::Chosen::Only:
      return;
    case detail::Chosen::Pinned:
      counter = &t.pins;
      break;
    case detail::Chosen::Table:
      counter = &t.table_hits;
      break;
    case detail::Chosen::Single:
      counter = &t.single;
      break;
    case detail::Chosen::Unstable:
      counter = &t.defaults;
      break;
  }
  counter->fetch_add(1, std::memory_order_relaxed);
  t.last.store(config, std::memory_order_relaxed);
}

int KernelOp::State::choose_config(Frame& f, std::span<const TensorView> inputs,
                                   std::span<const ScalarArg> scalars,
                                   std::span<const TensorView> outputs, const TensorPtrs& ptrs,
                                   int device, void* stream, detail::Chosen& chosen) {
  const OpPlan& p = plan();
  detail::TacticState& t = *tactics;
  detail::check_device_index(p, device);
  if (reads_device) read_device(f, device);
  FrameSizes sizes{f};
  Selection sel(p, f, sizes);
  chosen = detail::Chosen::Unstable;
  auto chose = [&](int c, detail::Chosen how) {
    count_choice(how, c);
    chosen = how;
    return c;
  };
  // 1. The pin.
  int pinned = t.pinned.load(std::memory_order_relaxed);
  if (pinned >= 0) {
    if (sel.holds(pinned)) return chose(pinned, detail::Chosen::Pinned);
    KERNELOP_RAISE(error(ErrorKind::Launch))
        << sel.config_text(pinned) << " is pinned but cannot run these inputs: it requires "
        << sel.why_not(pinned);
  }
  // 2. The memo.
  detail::MemoKey sig;
  bool memo = p.configs.size() > 1 &&
              sig.build(detail::MemoMode::Launch, inputs, scalars, outputs, memo_pointer_bits);
  if (memo) {
    std::uint64_t c = 0;
    std::size_t n = 0;
    if (t.memo.find(sig.span(), &c, &n) && n == 1) {
      return chose(static_cast<int>(c), detail::Chosen::Table);
    }
  }
  // 3. Eligibility.
  std::array<std::uint64_t, detail::kEligibleWords> mask{};
  int first = -1, num_eligible = 0;
  for (int c = 0; c < static_cast<int>(p.configs.size()); ++c) {
    if (!sel.holds(c)) continue;
    mask[static_cast<std::size_t>(c) / 64] |= 1ull << (c % 64);
    if (first < 0) first = c;
    ++num_eligible;
  }
  if (first < 0) sel.fail_none_eligible();
  if (p.configs.size() == 1) {
    chosen = detail::Chosen::Only;
    return 0;  // one config, and it can run: nothing to choose
  }
  if (num_eligible == 1) return chose(first, detail::Chosen::Single);
  auto eligible = [&](int c) { return (mask[static_cast<std::size_t>(c) / 64] >> (c % 64)) & 1u; };
  // 4. The table.
  std::string why;
  std::optional<detail::TuneKey> key = tuning_key(p, f, sel.env, mask, why);
  if (!key) {
    // A key these inputs cannot be bucketed by: nothing to look up or remember.
    if (detail::log_enabled(options)) {
      std::cerr << "kernelop: op " << p.op_name << ": " << why << "; using "
                << sel.config_text(first) << " untuned\n";
    }
    return chose(first, detail::Chosen::Unstable);
  }
  // A decision read before add_tuning_table changes the tables is not memoised after it.
  std::uint64_t generation = t.generation.load(std::memory_order_acquire);
  auto remember = [&](int c) {
    if (memo) {
      std::uint64_t value = static_cast<std::uint64_t>(c);
      t.memo.store(sig.span(), {&value, 1},
                   [&] { return t.generation.load(std::memory_order_acquire) == generation; });
    }
    return c;
  };
  detail::DeviceTuning& table = device_tuning(device);
  if (int c = table.find(*key); c >= 0 && eligible(c)) {
    return remember(chose(c, detail::Chosen::Table));
  }
  // 5. Tuning now, 6. else the first eligible.
  bool tune = options.tune && env_flag("KERNELOP_TUNE", true);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (tune) {
    // Any answer but "not capturing" (an error included) means: time nothing.
    detail::ScopedContext scope(module_for(device).context);
    if (Driver::require().cuStreamIsCapturing(static_cast<CUstream>(stream), &capture) !=
        CUDA_SUCCESS) {
      capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    }
  }
  if (!tune || capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    if (detail::log_enabled(options)) {
      std::cerr << "kernelop: op " << p.op_name << ": "
                << (tune ? "the stream is capturing a CUDA graph" : "tuning is off")
                << "; no tuning for this call, using " << sel.config_text(first)
                << " (the first eligible)\n";
    }
    return chose(first, detail::Chosen::Unstable);
  }
  std::vector<int> candidates;
  for (int c = 0; c < static_cast<int>(p.configs.size()); ++c) {
    if (eligible(c)) candidates.push_back(c);
  }
  int config = first;
  try {
    config = autotune(f, *key, candidates, inputs, scalars, outputs, ptrs, device, stream, table);
  } catch (const Error& e) {
    // Tuning is an optimisation: a failure (scratch memory for a large in-place tensor, say)
    // leaves the call to the first eligible config, remembered so that the call does not retry.
    warn("op " + p.op_name + ": tuning failed (" + e.message() + "); using " +
         sel.config_text(first) + " untuned");
    t.defaults.fetch_add(1, std::memory_order_relaxed);
  }
  t.last.store(config, std::memory_order_relaxed);
  return remember(config);
}

}  // namespace kernelop
