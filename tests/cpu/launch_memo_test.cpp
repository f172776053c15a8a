// Note [launch memo]: the memo must launch exactly what the full path launches, and refuse
// exactly what it refuses. This test runs the whole launch path against tests/fake_driver (a
// libcuda.so.1 that records each launch's function, geometry and parameter bytes), over a
// corpus of random calls of the examples and of an op that reads every kind of leaf: each call
// goes to an op without a memo (KERNELOP_LAUNCH_MEMO=0) and to the same op with one, and the two
// records (a launch's text, or an error's message) must be equal, call after call.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver/fake_driver.hpp"
#include "kernelop/kernelop.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;
using testing::fake;
using testing::record_launches_of;

// An op that reads every kind of leaf the memo's key must cover: dtypes (a type parameter,
// itemsize), shapes, strides (a strided input), int scalars (in shapes, requirements, extras,
// geometry), a bool and a float scalar, requirements, edited and expression output shapes.
const char* kRich = R"json({
  "op": "memo_test::rich",
  "kernel_name": "rich<T>",
  "kernel_source": "#include <cuda_fp16.h>\ntemplate <class T> __global__ void rich(const T* x, const float* w, int n, bool flip, float alpha, long long sx, int m, int isz, T* y, T* z) {}\n",
  "type_params": [{"name": "T", "dtypes": ["float32", "float16"]}],
  "inputs": [{"name": "x", "dtype": "T", "strided": true}, {"name": "w", "dtype": "float32"},
             {"name": "n", "scalar": "int"}, {"name": "flip", "scalar": "bool"},
             {"name": "alpha", "scalar": "float"}],
  "outputs": [{"name": "y", "shape": {"same_as": "x", "dims": {"-1": "dim(x, -1) * n"}}},
              {"name": "z", "shape": ["n + 1", "numel(w)"], "dtype_from": "x"}],
  "extras": [{"expr": "stride(x, 0)", "int64": true}, {"expr": "select(n > 2, numel(x), 7)"},
             {"expr": "itemsize(x)"}],
  "requires": ["n >= 1", "dim(w, 0) <= 64", "rank(x) >= 2"],
  "geometry": {"custom": {"grid": ["cdiv(numel(x) * n, 128)", "max(dim(x, 0), 1)", 1],
                          "block": [128, 1, 1], "shared_mem": "itemsize(x) * 128"}}
})json";

// Note [launch memo] for cluster launches: the cluster is evaluated per call (a select over a
// scalar and a size) and checked against the grid, as the full path does.
const char* kClustered = R"json({
  "op": "memo_test::clustered",
  "kernel_name": "clustered",
  "kernel_source": "__global__ void clustered(const float* x, int n, float* y) {}\n",
  "inputs": [{"name": "x", "dtype": "float32"}, {"name": "n", "scalar": "int"}],
  "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
  "requires": ["n >= 0"],
  "geometry": {"custom": {"grid": ["2 * cdiv(numel(x), 128)", "max(dim(x, 0), 1)", 1],
                          "block": [128, 1, 1],
                          "cluster": ["select(n > 1, 2, 1)", "select(n == 3, dim(x, 0), 1)"]}}
})json";

CompiledImage compile_for_test(const OpDecl& decl) {
  CompileOptions o;
  o.archs = {"sm_90"};
  return compile(derive_plan(decl), o);
}

// One call: its arguments, owned.
struct Call {
  std::vector<TensorView> inputs, outputs;
  std::vector<ScalarArg> scalars;
  bool allocating = false;
};

class Corpus {
 public:
  explicit Corpus(unsigned seed) : rng_(seed) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::int64_t dim() {
    static const std::int64_t dims[] = {0, 1, 2, 3, 4, 5, 8, 16, 64, 100};
    return chance(0.05) ? 0 : dims[1 + pick(9)];
  }
  // Mostly 4096-aligned, sometimes less: aligned() requirements then hold or not.
  void* pointer() {
    static const std::uintptr_t offsets[] = {0, 0, 0, 4, 8, 16, 2048};
    return reinterpret_cast<void*>(0x100000 + 0x1000 * static_cast<std::uintptr_t>(pick(64)) +
                                   offsets[pick(7)]);
  }

  TensorView tensor(const OpPlan& p, int slot) {
    TensorView t;
    const auto& decl = p.tensors[static_cast<std::size_t>(slot)].dtype;
    static const DType dtypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32,
                                   DType::Int64};
    t.dtype = dtypes[pick(5)];
    if (decl && std::holds_alternative<DType>(*decl) && chance(0.9))
      t.dtype = std::get<DType>(*decl);
    if (decl && std::holds_alternative<std::string>(*decl) && chance(0.8))
      t.dtype = chance(0.5) ? DType::Float32 : DType::Float16;
    int rank = 1 + pick(3);
    for (int d = 0; d < rank; ++d) t.shape.push_back(dim());
    if (p.tensors[static_cast<std::size_t>(slot)].strided && chance(0.5)) {
      // A row-padded view: the leading stride wider than the row.
      std::int64_t s = 1;
      std::vector<std::int64_t> strides(static_cast<std::size_t>(rank));
      for (int d = rank - 1; d >= 0; --d) {
        strides[static_cast<std::size_t>(d)] = s;
        s *= std::max<std::int64_t>(t.shape[d], 1) + (d == rank - 1 ? pick(3) : 0);
      }
      t.strides = Shape(std::span<const std::int64_t>(strides));
    }
    t.data = chance(0.03) ? nullptr : pointer();
    t.device = chance(0.03) ? 1 : 0;
    return t;
  }

  ScalarArg scalar(const ScalarSlot& s) {
    if (chance(0.04)) return ScalarArg::of_bool(true);  // sometimes the wrong kind
    switch (s.type) {
      case ScalarType::Float:
      case ScalarType::Float64:
        return ScalarArg::of_float(0.5 * pick(7));
      case ScalarType::Int:
      case ScalarType::Int64: {
        // Values that agree in their low bits too (0, 256, 2^32, 2^33): a key that kept only
        // some bits would confuse them.
        static const std::int64_t ints[] = {
            -1, 0, 1, 2, 3, 256, 257, std::int64_t{1} << 32, (std::int64_t{1} << 33) + 1};
        return ScalarArg::of_int(chance(0.7) ? pick(4) : ints[pick(9)]);
      }
      case ScalarType::Bool:
        return chance(0.05) ? ScalarArg::of_int(1) : ScalarArg::of_bool(chance(0.5));
    }
    return {};
  }

  // A fresh call; outputs shaped as the op says (mostly), so that most calls launch.
  Call fresh(const KernelOp& op) {
    const OpPlan& p = op.plan();
    Call c;
    c.allocating = chance(0.4);
    // A valid base: x and w-like inputs of shapes the op accepts are likelier with retries.
    for (int attempt = 0; attempt < 20; ++attempt) {
      c.inputs.clear();
      c.scalars.clear();
      for (int i = 0; i < p.num_tensor_inputs; ++i) c.inputs.push_back(tensor(p, i));
      if (attempt < 19 && chance(0.7)) {
        // Like shapes everywhere: elementwise ops and requirements tying dims are satisfied.
        for (auto& t : c.inputs) {
          if (&t != &c.inputs[0]) t.shape = c.inputs[0].shape, t.strides = {};
        }
      }
      for (const ScalarSlot& s : p.scalars) c.scalars.push_back(scalar(s));
      try {
        op.output_shapes(c.inputs, c.scalars);
        break;
      } catch (const Error&) {
        if (chance(0.1)) break;  // keep some refused calls
      }
    }
    fill_outputs(op, c);
    return c;
  }

  void fill_outputs(const KernelOp& op, Call& c) {
    c.outputs.clear();
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    try {
      shapes = op.output_shapes(c.inputs, c.scalars);
      dtypes = op.output_dtypes(c.inputs);
    } catch (const Error&) {
    }
    for (std::size_t o = 0; o < op.plan().outputs.size(); ++o) {
      TensorView t;
      t.data = pointer();
      t.dtype = o < dtypes.size() && chance(0.95) ? dtypes[o] : DType::Float32;
      t.shape = o < shapes.size() && chance(0.95) ? shapes[o] : Shape{3, 5};
      c.outputs.push_back(t);
    }
  }

  // The next call: fresh, the same again, the same with other pointers, or one thing changed.
  Call next(const KernelOp& op, const Call& last) {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (last.inputs.empty() || r < 0.3) return fresh(op);
    Call c = last;
    if (r < 0.55) return c;  // exactly again
    if (r < 0.8) {           // other buffers
      for (auto& t : c.inputs) t.data = t.data ? pointer() : nullptr;
      for (auto& t : c.outputs) t.data = pointer();
      return c;
    }
    // Exactly one thing changed, so that whatever the memo's key left out would be confused.
    const OpPlan& p = op.plan();
    bool keep_outputs = false;
    auto one_of = [&](std::vector<TensorView>& v) -> TensorView* {
      return v.empty() ? nullptr : &v[static_cast<std::size_t>(pick(static_cast<int>(v.size())))];
    };
    TensorView* t = one_of(c.inputs);
    switch (pick(9)) {
      case 0:  // one dim
        if (t && t->shape.rank() > 0) {
          int d = pick(t->shape.rank());
          t->shape[d] = t->shape[d] == 1 ? 2 : t->shape[d] * 2 - 1;
          t->strides = {};
        }
        break;
      case 1: {  // the strides alone: padded rows, or explicit contiguous ones, or none
        if (!t || t->shape.rank() == 0) break;
        std::vector<std::int64_t> strides(static_cast<std::size_t>(t->shape.rank()));
        std::int64_t s = 1, pad = pick(3);
        for (int d = t->shape.rank() - 1; d >= 0; --d) {
          strides[static_cast<std::size_t>(d)] = s;
          s *= std::max<std::int64_t>(t->shape[d], 1) + (d == t->shape.rank() - 1 ? pad : 0);
        }
        t->strides = chance(0.3) ? Shape{} : Shape(std::span<const std::int64_t>(strides));
        break;
      }
      case 2:  // a dtype
        if (t) t->dtype = t->dtype == DType::Float32 ? DType::Float16 : DType::Float32;
        break;
      case 3:  // a device
        if (t) t->device = t->device == 0 ? 1 : 0;
        break;
      case 4:  // a null pointer
        if (t) t->data = t->data ? nullptr : pointer();
        break;
      case 5:  // a scalar
        if (!c.scalars.empty()) {
          auto i = static_cast<std::size_t>(pick(static_cast<int>(c.scalars.size())));
          c.scalars[i] = scalar(p.scalars[i]);
        }
        break;
      case 6: {  // an output's shape, dtype, strides or device
        keep_outputs = true;
        TensorView* o = one_of(c.outputs);
        if (!o) break;
        int what = pick(4);
        if (what == 0 && o->shape.rank() > 0) o->shape[0] += 1;
        if (what == 1) o->dtype = o->dtype == DType::Float32 ? DType::Float16 : DType::Float32;
        if (what == 2 && o->shape.rank() > 0) {
          std::vector<std::int64_t> strides(static_cast<std::size_t>(o->shape.rank()), 1);
          strides[0] = 2;
          o->strides = Shape(std::span<const std::int64_t>(strides));
        }
        if (what == 3) o->device = 1;
        break;
      }
      case 7:
        c.allocating = !c.allocating;
        keep_outputs = true;
        break;
      default:  // one argument fewer
        if (!c.inputs.empty() && chance(0.5))
          c.inputs.pop_back();
        else if (!c.scalars.empty())
          c.scalars.pop_back();
        break;
    }
    if (!keep_outputs) fill_outputs(op, c);
    return c;
  }

 private:
  std::mt19937 rng_;
};

// What a call did: the launch the fake driver saw (or nothing), the outputs allocated, or the
// error.
std::string outcome(const KernelOp& op, const Call& c) {
  std::string allocated;
  try {
    if (c.allocating) {
      std::size_t next = 0;
      auto allocate = [&](std::size_t index, DType dtype, const Shape& shape) {
        allocated += "alloc " + std::to_string(index) + " " + std::string(dtype_name(dtype)) + " " +
                     shape.to_string() + "\n";
        TensorView t;
        t.data = reinterpret_cast<void*>(0x900000 + 0x1000 * next++);
        t.dtype = dtype;
        t.shape = shape;
        return t;
      };
      op.launch_allocating(c.inputs, c.scalars, allocate, reinterpret_cast<void*>(0x77));
    } else {
      op.launch(c.inputs, c.scalars, c.outputs, reinterpret_cast<void*>(0x77));
    }
  } catch (const Error& e) {
    return allocated + "error " + std::string(error_kind_name(e.kind())) + ": " + e.message() +
           "\n" + fake().launches();
  }
  return allocated + fake().launches();
}

class LaunchMemo : public ::testing::TestWithParam<std::string> {};

TEST_P(LaunchMemo, LaunchesAndRefusesWhatTheFullPathDoes) {
  ASSERT_TRUE(fake().ok()) << "libcuda.so.1 is not tests/fake_driver's (LD_LIBRARY_PATH)";
  OpDecl decl = GetParam() == "rich" ? parse_op_json(kRich, testing::source_dir().string())
                : GetParam() == "clustered"
                    ? parse_op_json(kClustered, testing::source_dir().string())
                    : testing::example(GetParam());
  CompiledImage image = compile_for_test(decl);
  // Tuned ops tune in memory (the fake driver times every config alike: the lowest id wins),
  // each op on its own: no table on disk makes one op's first calls differ from the other's.
  LoadOptions options;
  options.persist_tuning = false;
  ::setenv("KERNELOP_LAUNCH_MEMO", "0", 1);
  KernelOp full(image, options);
  ::unsetenv("KERNELOP_LAUNCH_MEMO");
  KernelOp memo(image, options);
  record_launches_of(image);

  Corpus corpus(static_cast<unsigned>(std::hash<std::string>{}(GetParam())));
  Call call;
  int launched = 0, clustered = 0;
  auto stats = [](const KernelOp& op) {
    TuningStats t = op.tuning_stats();
    return std::to_string(t.table_hits) + " table, " + std::to_string(t.defaults) + " defaults, " +
           std::to_string(t.pinned) + " pinned, " + std::to_string(t.single) + " single, " +
           std::to_string(t.tunings) + " tunings, last " + std::to_string(op.last_tactic());
  };
  for (int i = 0; i < 1500; ++i) {
    if (full.num_tactics() > 1 && corpus.chance(0.02)) {
      // A pin (or none) changes what a memoised call of a tuned op must launch.
      int tactic = corpus.pick(full.num_tactics() + 1) - 1;
      full.pin_tactic(tactic);
      memo.pin_tactic(tactic);
    }
    call = corpus.next(full, call);
    std::string want = outcome(full, call);
    std::string got = outcome(memo, call);
    ASSERT_EQ(got, want) << "call " << i << " of " << GetParam();
    // A hit counts as the full path would: the same stats, the same last tactic.
    ASSERT_EQ(stats(memo), stats(full)) << "call " << i << " of " << GetParam();
    launched += want.find(" grid=") != std::string::npos;
    clustered += want.find(" cluster=") != std::string::npos;
  }
  if (GetParam() == "clustered") EXPECT_GT(clustered, 50) << "cluster launches in the corpus";
  // The corpus launched often and the memo served many of those launches.
  EXPECT_GT(launched, 200) << GetParam();
  EXPECT_GT(memo.memoized_launches(), 100u) << GetParam();
  EXPECT_EQ(full.memoized_launches(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Examples, LaunchMemo,
                         ::testing::Values("rich", "clustered", "relu", "relu_generic", "add",
                                           "scale", "bias_add_2d", "rowsum", "rowsum_keepdim",
                                           "repeat2", "sin_cos", "softmax", "softmax_tuned",
                                           "gemm_tiled"));

// A cluster launch goes to cuLaunchKernelEx with the cluster; one that does not divide the grid,
// or has more than 16 blocks, is refused naming the op and the expression; a spec whose constant
// cluster cannot launch is refused before anything is compiled.
TEST(ClusterLaunch, LaunchesWithTheClusterAndChecksIt) {
  ASSERT_TRUE(fake().ok());
  CompiledImage image = compile_for_test(parse_op_json(kClustered, testing::source_dir().string()));
  KernelOp op(image);
  record_launches_of(image);
  auto call = [&](Shape shape, std::int64_t n) {
    TensorView x{reinterpret_cast<void*>(0x100000), DType::Float32, shape, {}, 0};
    TensorView y = x;
    y.data = reinterpret_cast<void*>(0x200000);
    std::vector<ScalarArg> scalars = {ScalarArg::of_int(n)};
    op.launch(std::vector<TensorView>{x}, scalars, std::vector<TensorView>{y},
              reinterpret_cast<void*>(0x77));
    return std::string(fake().launches());
  };
  EXPECT_NE(call({4, 256}, 2).find("grid=16,4,1 block=128,1,1 smem=0 stream=119 cluster=2,1,1 |"),
            std::string::npos);
  std::string plain = call({4, 256}, 1);
  EXPECT_NE(plain.find("grid=16,4,1"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("cluster="), std::string::npos) << "a cluster of 1: a plain launch";
  EXPECT_NE(call({4, 256}, 3).find("cluster=2,4,1"), std::string::npos);
  // 16 blocks: the kernels were allowed the non-portable size when loaded (the fake driver, as
  // sm_90's, refuses more than 8 otherwise).
  EXPECT_NE(call({8, 256}, 3).find("cluster=2,8,1"), std::string::npos);
  expect_error(
      [&] {
        op.launch_raw(LaunchDims{{16, 4, 1}, {128, 1, 1}, 0}, std::vector<RawArg>{}, nullptr);
      },
      ErrorKind::Launch,
      "op memo_test::clustered: launches thread-block clusters (its geometry's \"cluster\"), "
      "which a raw launch does not make");
  expect_error(
      [&] {
        call({9, 256}, 3);
      },
      ErrorKind::Launch,
      "op memo_test::clustered: the cluster [2, 9, 1] has 18 blocks; a cluster has at "
      "most 16");
  EXPECT_EQ(call({0, 256}, 3), "") << "an empty grid launches nothing, whatever its cluster";
  std::string text = kClustered;
  const std::string two = "\"select(n > 1, 2, 1)\"";
  text.replace(text.find(two), two.size(), "\"3\"");
  KernelOp three(compile_for_test(parse_op_json(text, testing::source_dir().string())));
  TensorView x{reinterpret_cast<void*>(0x100000), DType::Float32, Shape{4, 256}, {}, 0};
  TensorView y = x;
  std::vector<ScalarArg> one = {ScalarArg::of_int(1)};
  expect_error(
      [&] { three.launch(std::vector<TensorView>{x}, one, std::vector<TensorView>{y}, nullptr); },
      ErrorKind::Launch,
      "op memo_test::clustered: grid x = 16 is not a multiple of cluster x = 3 ('3')");
  for (auto [cluster, why] :
       {std::pair<std::string, std::string>{"[4, 4, 2]", "has 32 blocks; a cluster has at most 16"},
        {"[1, 1, 1, 1]", "has 4 dims; expected 1 to 3"},
        {"[0]", "x dimension is 0; a cluster has 1 to 16 blocks"},
        {"[]", "is empty; expected 1 to 3"}}) {
    std::string bad = kClustered;
    std::size_t at = bad.find("\"cluster\": [");
    bad.replace(at, bad.find("]}}", at) + 1 - at, "\"cluster\": " + cluster);
    expect_error([&] { derive_plan(parse_op_json(bad, ".")); }, ErrorKind::Spec,
                 "geometry.custom.cluster: " + why);
  }
  // A GPU before sm_90 has no clusters: refused, naming its architecture.
  CompileOptions both;
  both.archs = {"sm_80", "sm_90"};
  KernelOp old(
      compile(derive_plan(parse_op_json(kClustered, testing::source_dir().string())), both));
  fake().set_arch(80);
  std::vector<ScalarArg> n2 = {ScalarArg::of_int(2)};
  TensorView x80{reinterpret_cast<void*>(0x100000), DType::Float32, Shape{4, 256}, {}, 0};
  TensorView y80 = x80;
  std::string refused;
  try {
    old.launch(std::vector<TensorView>{x80}, n2, std::vector<TensorView>{y80}, nullptr);
  } catch (const Error& e) {
    refused = e.what();
  }
  fake().set_arch(90);
  EXPECT_NE(refused.find("op memo_test::clustered: it launches thread-block clusters of [2, 1, 1], "
                         "which need sm_90 or later; this device is sm_80"),
            std::string::npos)
      << refused;
  std::string odd = kClustered;  // a constant grid a constant cluster does not divide
  std::size_t at = odd.find("\"grid\": [");
  odd.replace(at, odd.find("],", at) + 1 - at, "\"grid\": [3, 4]");
  at = odd.find("\"cluster\": [");
  odd.replace(at, odd.find("]}}", at) + 1 - at, "\"cluster\": [2]");
  expect_error([&] { derive_plan(parse_op_json(odd, ".")); }, ErrorKind::Spec,
               "geometry.custom.cluster: x is 2, which does not divide grid x = 3");
}

// Threads launching one op with shapes of their own, so that the memo changes hands all the
// time: every launch must still be the one its own call asks for (a torn read of the seqlock
// would mix two calls' geometry and arguments).
TEST(LaunchMemoThreads, EveryLaunchIsItsOwnCallsUnderContention) {
  ASSERT_TRUE(fake().ok());
  CompiledImage image = compile_for_test(testing::example("repeat2"));
  ::setenv("KERNELOP_LAUNCH_MEMO", "0", 1);
  KernelOp full(image);
  ::unsetenv("KERNELOP_LAUNCH_MEMO");
  KernelOp memo(image);
  record_launches_of(image);
  constexpr int kThreads = 4, kShapes = 2, kCalls = 3200;  // runs of 8, each shape alike
  auto call_of = [](int thread, int shape) {
    Call c;
    TensorView x;
    x.data = reinterpret_cast<void*>(0x100000 * (thread + 1));
    x.shape = Shape{thread + 1, 64 * (shape + 1)};
    TensorView y = x;
    y.data = reinterpret_cast<void*>(0x100000 * (thread + 1) + 0x80000);
    y.shape = Shape{thread + 1, 128 * (shape + 1)};
    c.inputs = {x};
    c.outputs = {y};
    return c;
  };
  std::multiset<std::string> want;
  for (int t = 0; t < kThreads; ++t) {
    for (int s = 0; s < kShapes; ++s) {
      std::string one = outcome(full, call_of(t, s));
      ASSERT_NE(one.find(" grid="), std::string::npos) << one;
      for (int i = 0; i < kCalls / kShapes; ++i) want.insert(one);
    }
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Call calls[kShapes] = {call_of(t, 0), call_of(t, 1)};
      for (int i = 0; i < kCalls; ++i) {
        const Call& c = calls[i / 8 % kShapes];  // runs of 8: hits, and changes of hands
        memo.launch(c.inputs, c.scalars, c.outputs, reinterpret_cast<void*>(0x77));
      }
    });
  }
  for (auto& th : threads) th.join();
  std::multiset<std::string> got;
  std::string all = fake().launches();
  for (std::size_t at = 0; at < all.size();) {
    std::size_t end = all.find('\n', at);
    got.insert(all.substr(at, end - at + 1));
    at = end + 1;
  }
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "a launch from the memo mixed two calls";
  EXPECT_GT(memo.memoized_launches(), 0u);
}

TEST(LaunchMemoEligibility, InPlaceWritesTakeTheFullPathAlways) {
  ASSERT_TRUE(fake().ok());
  for (const char* name : {"cache_scatter"}) {
    KernelOp op(compile_for_test(testing::example(name)));
    Corpus corpus(7);
    Call call;
    for (int i = 0; i < 50; ++i) {
      call = corpus.next(op, call);
      outcome(op, call);
    }
    EXPECT_EQ(op.memoized_launches(), 0u) << name;
  }
}

// A contiguous tensor at a made-up address (the fake driver dereferences nothing).
TensorView tensor(std::uintptr_t at, DType dtype, Shape shape) {
  TensorView t;
  t.data = reinterpret_cast<void*>(at);
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

// A call of one float32 input x at 0x100000 and one output y at 0x200000, both of `shape`.
Call x_to_y(Shape shape) {
  Call c;
  c.inputs = {tensor(0x100000, DType::Float32, shape)};
  c.outputs = {tensor(0x200000, DType::Float32, shape)};
  return c;
}

// Note [float extras]: a float constant of the spec reaches the kernel as the bytes of a float32,
// through the full path and the memo alike; the spec round-trips and refuses what no float32 is.
TEST(FloatExtras, PassTheBytesOfAFloat32AndRoundTrip) {
  ASSERT_TRUE(fake().ok());
  const std::string spec = R"json({
    "op": "float_extra::scale",
    "kernel_name": "scale",
    "kernel_source": "extern \"C\" __global__ void scale(const float* x, float c, int n, float* y) {}\n",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "params": ["x", {"float": -1.5}, {"expr": "numel(x)"}, "y"],
    "geometry": {"custom": {"grid": ["cdiv(numel(x), 128)"], "block": [128]}}
  })json";
  OpDecl decl = parse_op_json(spec, ".");
  EXPECT_EQ(parse_op_json(print_op_json(decl), "."), decl);
  EXPECT_NE(print_op_json(decl).find("\"float\": -1.5"), std::string::npos) << print_op_json(decl);
  CompiledImage image = compile_for_test(decl);
  EXPECT_EQ(image.plan.c_type(image.plan.args[1]), "float");
  record_launches_of(image);
  KernelOp op(image);
  Call c = x_to_y(Shape{300});
  std::string first = outcome(op, c), second = outcome(op, c);  // the full path, then the memo
  EXPECT_EQ(first, second);
  EXPECT_GT(op.memoized_launches(), 0u);
  // -1.5f is 0xbfc00000: little-endian bytes 00 00 c0 bf.
  EXPECT_NE(first.find("0000c0bf"), std::string::npos) << first;
  for (const char* bad :
       {R"({"float": "1.0"})", R"({"float": 1e39})", R"({"float": 1.0, "int64": true})"}) {
    std::string text = spec;
    text.replace(text.find(R"({"float": -1.5})"), 15, bad);
    testing::expect_error([&] { parse_op_json(text, "."); }, ErrorKind::Spec, "params[1]");
  }
}

// Note [initialised outputs]: each fill is one memset of the dtype's bytes (two for an 8-byte
// value whose halves differ), each clone one device copy, before the launch, on the full path,
// from the memo and when allocating; an empty grid still initialises; a zero-size output and a
// fill the dtype cannot hold launch nothing.
TEST(InitialisedOutputs, FillsAndClonesComeBeforeEveryLaunch) {
  ASSERT_TRUE(fake().ok());
  OpDecl decl = parse_op_json(R"json({
    "op": "init_test::outs",
    "kernel_name": "outs<T>",
    "kernel_source": "template <class T> __global__ void outs(const T* x, const float* w, int n, T* a, T* b, double* c, bool* d, T* e) {}\n",
    "type_params": [{"name": "T", "dtypes": ["float32", "float16", "int32"]}],
    "inputs": [{"name": "x", "dtype": "T"}, {"name": "w", "dtype": "float32"}],
    "outputs": [{"name": "a", "shape": {"same_as": "x"}, "init": {"fill": 0}},
                {"name": "b", "shape": {"same_as": "x"}, "init": {"fill": -2}},
                {"name": "c", "shape": ["dim(x, 0)"], "dtype": "float64", "init": {"fill": 1.5}},
                {"name": "d", "shape": ["dim(w, 0)"], "dtype": "bool", "init": {"fill": true}},
                {"name": "e", "shape": {"same_as": "x"}, "init": {"clone": "x"}}],
    "extras": [{"expr": "numel(x)"}],
    "geometry": {"custom": {"grid": ["cdiv(numel(w), 128)"], "block": [128]}}
  })json",
                              ".");
  EXPECT_NO_THROW(validate(decl));
  CompiledImage image = compile_for_test(decl);
  record_launches_of(image);
  KernelOp op(image);
  auto call = [&](DType t, std::int64_t n, std::int64_t m) {
    Call c;
    c.inputs = {tensor(0x100000, t, Shape{n, 3}), tensor(0x200000, DType::Float32, Shape{m})};
    c.outputs = {tensor(0x300000, t, Shape{n, 3}), tensor(0x400000, t, Shape{n, 3}),
                 tensor(0x500000, DType::Float64, Shape{n}),
                 tensor(0x600000, DType::Bool, Shape{m}), tensor(0x700000, t, Shape{n, 3})};
    return c;
  };
  const std::string float32_ops =
      "memset32 0x300000 0x0 x15\n"
      "memset32 0x400000 0xc0000000 x15\n"            // -2.0f
      "memset2d32 0x500000 pitch=8 0x0 1x5\n"         // 1.5: 0x3ff8000000000000, low words
      "memset2d32 0x500004 pitch=8 0x3ff80000 1x5\n"  // then high words
      "memset8 0x600000 0x1 x200\n"
      "copy 0x700000 <- 0x100000 bytes=60\n";
  for (int round = 0; round < 2; ++round) {  // the full path, then the memo
    std::string launched = outcome(op, call(DType::Float32, 5, 200));
    EXPECT_EQ(std::string(fake().memory_ops()), float32_ops) << round;
    EXPECT_NE(launched.find("outs"), std::string::npos) << launched;
  }
  EXPECT_GT(op.memoized_launches(), 0u);
  std::string launched = outcome(op, call(DType::Float16, 2, 1));
  EXPECT_EQ(std::string(fake().memory_ops()),
            "memset16 0x300000 0x0 x6\nmemset16 0x400000 0xc000 x6\n"
            "memset2d32 0x500000 pitch=8 0x0 1x2\nmemset2d32 0x500004 pitch=8 0x3ff80000 1x2\n"
            "memset8 0x600000 0x1 x1\ncopy 0x700000 <- 0x100000 bytes=12\n");
  // An empty grid (w has no element) launches nothing, yet leaves the other outputs initialised.
  launched = outcome(op, call(DType::Int32, 2, 0));
  EXPECT_EQ(launched, "");
  EXPECT_EQ(std::string(fake().memory_ops()),
            "memset32 0x300000 0x0 x6\nmemset32 0x400000 0xfffffffe x6\n"
            "memset2d32 0x500000 pitch=8 0x0 1x2\nmemset2d32 0x500004 pitch=8 0x3ff80000 1x2\n"
            "copy 0x700000 <- 0x100000 bytes=24\n");
  // Allocating: the same, into what the allocator made.
  Call allocating = call(DType::Float32, 1, 1);
  allocating.allocating = true;
  launched = outcome(op, allocating);
  EXPECT_NE(launched.find("alloc 4 float32 [1, 3]"), std::string::npos) << launched;
  EXPECT_EQ(std::string(fake().memory_ops()),
            "memset32 0x900000 0x0 x3\nmemset32 0x901000 0xc0000000 x3\n"
            "memset2d32 0x902000 pitch=8 0x0 1x1\nmemset2d32 0x902004 pitch=8 0x3ff80000 1x1\n"
            "memset8 0x903000 0x1 x1\ncopy 0x904000 <- 0x100000 bytes=12\n");

  // A fill the output's dtype, known at launch, cannot hold: refused before anything runs.
  OpDecl frac = parse_op_json(R"json({
    "op": "init_test::frac",
    "kernel_name": "frac<T>",
    "kernel_source": "template <class T> __global__ void frac(const T* x, T* y) {}\n",
    "type_params": [{"name": "T", "dtypes": ["float32", "int32"]}],
    "inputs": [{"name": "x", "dtype": "T"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}, "init": {"fill": 2.5}}],
    "geometry": {"custom": {"grid": [1], "block": [32]}}
  })json",
                              ".");
  KernelOp frac_op(compile_for_test(frac));
  Call c;
  c.inputs = {tensor(0x100000, DType::Int32, Shape{4})};
  c.outputs = {tensor(0x300000, DType::Int32, Shape{4})};
  EXPECT_EQ(outcome(frac_op, c),
            "error TypeError: op init_test::frac: output 'y' is filled with 2.5 before the launch, "
            "which int32 cannot hold as it is\n");
  EXPECT_EQ(std::string(fake().memory_ops()), "");
  c.inputs[0].dtype = c.outputs[0].dtype = DType::Float32;
  c.outputs[0].shape = c.inputs[0].shape = Shape{0};
  EXPECT_EQ(outcome(frac_op, c), "");  // nothing to fill, nothing to launch
  EXPECT_EQ(std::string(fake().memory_ops()), "");
}

// Note [donated inputs]: an output cloned from an input no kernel reads may be given that input's
// own buffer; the clone onto itself then copies nothing, on the full path and from the memo. An
// input a kernel reads, one the op writes, or one two outputs clone is never donatable.
TEST(DonatedInputs, AnOutputGivenItsCloneSourcesBufferCopiesNothing) {
  ASSERT_TRUE(fake().ok());
  auto op_of = [](const char* outputs, const char* params,
                  const char* inputs = R"j([{"name": "x", "dtype": "float32"}])j") {
    std::string spec = std::string(R"json({
      "op": "donate_test::inc",
      "kernel_name": "inc",
      "kernel_source": "__global__ void inc(float* y, int n) {}\n__global__ void two(float* y, float* z, int n) {}\n__global__ void reads(const float* x, float* y, int n) {}\n",
      "inputs": )json") +
                       inputs + R"json(,
      "outputs": )json" +
                       outputs + R"json(,
      "params": )json" +
                       params + R"json(,
      "geometry": {"custom": {"grid": ["cdiv(numel(x), 128)"], "block": [128]}}
    })json";
    return spec;
  };
  std::string spec =
      op_of(R"j([{"name": "y", "shape": {"same_as": "x"}, "init": {"clone": "x"}}])j",
            R"j(["y", {"expr": "numel(x)"}])j");
  KernelOp op(compile_for_test(parse_op_json(spec, ".")));
  EXPECT_EQ(op.donatable_input(0), 0);
  EXPECT_EQ(op.donatable_input(1), -1);      // no such output
  for (int round = 0; round < 2; ++round) {  // the full path, then the memo
    Call given;
    given.inputs = {tensor(0x100000, DType::Float32, Shape{4, 8})};
    given.outputs = {tensor(0x100000, DType::Float32, Shape{4, 8})};
    std::string launched = outcome(op, given);
    EXPECT_NE(launched.find("inc"), std::string::npos) << launched;
    EXPECT_EQ(std::string(fake().memory_ops()), "") << round;
  }
  EXPECT_GT(op.memoized_launches(), 0u);
  Call apart;
  apart.inputs = {tensor(0x100000, DType::Float32, Shape{4, 8})};
  apart.outputs = {tensor(0x300000, DType::Float32, Shape{4, 8})};
  outcome(op, apart);
  EXPECT_EQ(std::string(fake().memory_ops()), "copy 0x300000 <- 0x100000 bytes=128\n");

  // The kernel reads x as well: its buffer must stay as it is.
  std::string reads =
      op_of(R"j([{"name": "y", "shape": {"same_as": "x"}, "init": {"clone": "x"}}])j",
            R"j(["x", "y", {"expr": "numel(x)"}])j");
  reads.replace(reads.find(R"j("kernel_name": "inc")j"), 20, R"j("kernel_name": "reads")j");
  EXPECT_EQ(KernelOp(compile_for_test(parse_op_json(reads, "."))).donatable_input(0), -1);
  // Two outputs start as copies of x: neither may take it.
  std::string two = op_of(R"j([{"name": "y", "shape": {"same_as": "x"}, "init": {"clone": "x"}},
                               {"name": "z", "shape": {"same_as": "x"}, "init": {"clone": "x"}}])j",
                          R"j(["y", "z", {"expr": "numel(x)"}])j");
  two.replace(two.find(R"j("kernel_name": "inc")j"), 20, R"j("kernel_name": "two")j");
  KernelOp both(compile_for_test(parse_op_json(two, ".")));
  EXPECT_EQ(both.donatable_input(0), -1);
  EXPECT_EQ(both.donatable_input(1), -1);
}

// Note [initialised outputs] when tuning: every tuning run (warm-up, timed queue, the queue's
// captured graph) writes a scratch output (the fake driver's allocations are at 0x10000), each
// initialised right before the kernel: one memset per launch, the caller's output's last.
TEST(InitialisedOutputs, EveryTuningRunStartsFromTheInit) {
  ASSERT_TRUE(fake().ok());
  OpDecl decl = parse_op_json(R"json({
    "op": "init_test::tuned",
    "kernel_name": "tuned<B>",
    "kernel_source": "template <int B> __global__ void tuned(const float* x, float* y) {}\n",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}, "init": {"fill": 0}}],
    "params": ["x", "y"],
    "geometry": {"custom": {"grid": ["cdiv(numel(x), B)"], "block": ["B"]}},
    "tunables": ["B"],
    "configs": [{"B": 64}, {"B": 128}]
  })json",
                              ".");
  CompiledImage image = compile_for_test(decl);
  LoadOptions options;
  options.persist_tuning = false;
  KernelOp op(image, options);
  record_launches_of(image);
  std::string launched = outcome(op, x_to_y(Shape{1000}));
  EXPECT_EQ(op.tuning_stats().tunings, 1u);
  std::string memory = fake().memory_ops();
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
    return n;
  };
  std::size_t launches = count(launched, "tuned");
  EXPECT_GT(launches, 2u) << launched;
  EXPECT_EQ(count(memory, "memset32 0x10000 0x0 x1000\n"), launches - 1) << memory;
  EXPECT_EQ(count(memory, "memset32 0x200000 0x0 x1000\n"), 1u) << memory;
  EXPECT_EQ(count(memory, "memset32"), launches) << memory;  // (memset8: the tuner's L2 flush)
}

// sm_count(): the device's number of SMs, read at launch (the fake device has 132), for a
// persistent kernel's grid and arguments; refused where a Meta kernel would need it.
TEST(SmCount, IsTheDevicesAtLaunchAndNowhereElse) {
  ASSERT_TRUE(fake().ok());
  const std::string spec = R"json({
    "op": "sm_test::persistent",
    "kernel_name": "persistent",
    "kernel_source": "extern \"C\" __global__ void persistent(const float* x, int rows_per_program, float* y) {}\n",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "params": ["x", {"expr": "cdiv(dim(x, 0), sm_count())"}, "y"],
    "geometry": {"custom": {"grid": ["min(sm_count(), dim(x, 0))"], "block": [128]}}
  })json";
  OpDecl decl = parse_op_json(spec, ".");
  EXPECT_EQ(parse_op_json(print_op_json(decl), "."), decl);
  CompiledImage image = compile_for_test(decl);
  record_launches_of(image);
  KernelOp op(image);
  Call c = x_to_y(Shape{1000, 4});
  std::string first = outcome(op, c), second = outcome(op, c);  // the full path, then the memo
  EXPECT_EQ(first, second);
  // 132 programs of cdiv(1000, 132) = 8 rows: 08000000 after the pointer.
  EXPECT_NE(first.find("grid=132,1,1"), std::string::npos) << first;
  EXPECT_NE(first.find(" 0000100000000000 08000000 0000200000000000"), std::string::npos) << first;
  c.inputs[0].shape = c.outputs[0].shape = Shape{7, 4};
  EXPECT_NE(outcome(op, c).find("grid=7,1,1"), std::string::npos);

  auto refused = [&](const std::string& from, const std::string& to, const std::string& want) {
    std::string text = spec;
    text.replace(text.find(from), from.size(), to);
    testing::expect_error([&] { validate(parse_op_json(text, ".")); }, ErrorKind::Spec, want);
  };
  refused(R"J("shape": {"same_as": "x"})J", R"J("shape": ["sm_count()"])J",
          "outputs[0].shape[0]: 'sm_count()': sm_count() cannot shape an output");
  refused(R"J("params")J", R"J("requires": ["dim(x, 0) >= sm_count()"], "params")J",
          "requires[0]: 'dim(x, 0) >= sm_count()': sm_count() cannot be read by the op's requires");
}

// A Tile IR image (cuTile's portable bytecode) is loaded only where no CUBIN or PTX fits, or when
// asked for (LoadOptions::prefer_tileir, KERNELOP_IMAGE=tileir); the fake driver refuses it as
// driver 580 does, and the error names the driver's CUDA version and the CUBIN to add.
TEST(TileIrImages, LoadedLastOrWhenAskedAndRefusedByAnOldDriverByName) {
  ASSERT_TRUE(fake().ok());
  CompiledImage image = compile_for_test(testing::example("relu"));
  ArchImage tileir;
  tileir.arch = "tileir";
  tileir.data = std::string("\x7fTileIR\0\x0d\x03\0\0", 12) + image.lowered_names[0];
  image.images.push_back(tileir);
  Call c = x_to_y(Shape{1000});
  const std::string old_driver =
      "op kernelop_examples::relu: cuModuleLoadDataEx(tileir image on device 0 'Fake sm_90') "
      "failed: "
      "CUDA_ERROR_FAKE (200)";  // the fake's name for CUDA_ERROR_INVALID_IMAGE
  EXPECT_EQ(outcome(KernelOp(image), c).find("error"), std::string::npos);  // the CUBIN
  LoadOptions options;
  options.prefer_tileir = true;
  std::string refused = outcome(KernelOp(image, options), c);
  EXPECT_NE(refused.find(old_driver), std::string::npos) << refused;
  EXPECT_NE(refused.find("; drivers compile Tile IR bytecode from CUDA 13.3 on (this one is CUDA "
                         "13.0); the bytecode was loaded because KERNELOP_IMAGE=tileir or "
                         "LoadOptions::prefer_tileir asked for it"),
            std::string::npos)
      << refused;
  // Chosen because nothing else runs (an sm_80-only build would be on sm_90 too, had it no PTX):
  // the hint names the CUBIN to add.
  CompiledImage only_tileir = image;
  only_tileir.images.erase(only_tileir.images.begin(), only_tileir.images.end() - 1);
  refused = outcome(KernelOp(only_tileir), c);
  EXPECT_NE(refused.find("(this one is CUDA 13.0); build the op with a CUBIN for sm_90"),
            std::string::npos)
      << refused;
  ::setenv("KERNELOP_IMAGE", "tileir", 1);
  refused = outcome(KernelOp(image), c);
  EXPECT_NE(refused.find(old_driver), std::string::npos) << refused;
  ::setenv("KERNELOP_IMAGE", "cuda", 1);
  refused = outcome(KernelOp(image), c);
  EXPECT_NE(
      refused.find(
          "op kernelop_examples::relu: KERNELOP_IMAGE is 'cuda'; expected cubin, ptx or tileir"),
      std::string::npos)
      << refused;
  ::setenv("KERNELOP_IMAGE", "cubin", 1);
  EXPECT_EQ(outcome(KernelOp(image), c).find("error"), std::string::npos);
  ::unsetenv("KERNELOP_IMAGE");
}

// Note [host reads]: item(n) passes the value of one-element tensor n, read on the host when the
// launch is reached (the fake driver's memory), to the kernel, call after call (no memo replays an
// old value); a launch whose `when` fails does not run. Read under a capture, of a tensor of other
// than one element, or item() of a float tensor: errors naming the op and the tensor. item() is a
// kernel argument's only; `when` names a tensor of the launch.
TEST(HostReads, ReadValuesWhenTheLaunchIsReached) {
  ASSERT_TRUE(fake().ok());
  const std::string spec = R"json({
    "op": "host_test::scaled",
    "kernel_name": "scaled<G>",
    "kernel_source": "#include <cuda_bf16.h>\ntemplate <class G> __global__ void scaled(const float* x, const G* g, int n, float* y) {}\n",
    "type_params": [{"name": "G", "dtypes": ["float32", "bfloat16"]}],
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "g", "dtype": "G"}, {"name": "n"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "params": ["x", "g", {"expr": "item(n) * 2"}, "y"],
    "when": [{"tensor": "g", "!=": 1.0}],
    "geometry": {"custom": {"grid": ["dim(x, 0)"], "block": [128]}}
  })json";
  OpDecl decl = parse_op_json(spec, ".");
  EXPECT_EQ(parse_op_json(print_op_json(decl), "."), decl);
  EXPECT_TRUE(reads_on_host(decl.spec));
  CompiledImage image = compile_for_test(decl);
  record_launches_of(image);
  KernelOp op(image);
  auto call = [&](DType g_dtype, DType n_dtype, Shape n_shape) {
    Call c = x_to_y(Shape{5});
    c.inputs.push_back(tensor(0x300000, g_dtype, Shape{}));
    c.inputs.push_back(tensor(0x400000, n_dtype, n_shape));
    return c;
  };
  auto put = [](std::uint64_t at, auto value) { fake().set_memory(at, &value, sizeof value); };
  Call c = call(DType::Float32, DType::Int64, Shape{});
  put(0x300000, 2.0f);
  put(0x400000, std::int64_t{21});
  std::string first = outcome(op, c);
  EXPECT_NE(first.find(" 2a000000 "), std::string::npos) << first;  // item(n) * 2 = 42
  EXPECT_EQ(std::string(fake().memory_ops()), "read 0x300000 bytes=4\nread 0x400000 bytes=8\n");
  put(0x400000, std::int64_t{3});
  std::string second = outcome(op, c);
  EXPECT_NE(second.find(" 06000000 "), std::string::npos) << second;  // read again: 6
  fake().memory_ops();
  put(0x300000, 1.0f);  // the test fails: no launch, nothing else read
  EXPECT_EQ(outcome(op, c), "");
  EXPECT_EQ(std::string(fake().memory_ops()), "read 0x300000 bytes=4\n");
  // bfloat16 1.0 is 0x3f80; 1.0078125 (0x3f81) is not 1.
  Call b = call(DType::BFloat16, DType::Int32, Shape{1, 1});
  put(0x300000, std::uint16_t{0x3f80});
  EXPECT_EQ(outcome(op, b), "");
  put(0x300000, std::uint16_t{0x3f81});
  put(0x400000, std::int32_t{-4});
  EXPECT_NE(outcome(op, b).find(" f8ffffff "), std::string::npos);  // -8
  auto error_of = [&](const Call& x) {
    std::string text = outcome(op, x);
    return text.substr(0, text.find('\n'));
  };
  Call f = call(DType::Float32, DType::Float32, Shape{});
  put(0x300000, 2.0f);
  EXPECT_EQ(
      error_of(f),
      "error TypeError: op host_test::scaled: item(n) passes an integer to the kernel, and the "
      "tensor is float32; kernelop reads integer and bool tensors only");
  EXPECT_EQ(
      error_of(call(DType::Float32, DType::Int64, Shape{2})),
      "error LaunchError: op host_test::scaled: reads the value of 'n' on the host, which needs "
      "one element; it has 2 (shape [2])");
  fake().set_capturing(1);
  std::string captured = error_of(c);
  fake().set_capturing(0);
  EXPECT_EQ(
      captured,
      "error LaunchError: op host_test::scaled: reads the value of 'g' on the host at launch (a "
      "host sync, as its library's .item() / torch.equal), which a CUDA graph cannot "
      "capture; run it outside the graph");
  fake().memory_ops();

  // A later launch with a `when`: tested when it is reached, after the op's own kernel.
  const std::string two = R"json({
    "op": "host_test::two",
    "kernel_name": "first",
    "kernel_source": "extern \"C\" __global__ void first(const float* x, float* y) {}\n",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "g", "dtype": "int32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}},
                {"name": "s", "shape": {"same_as": "x"}, "dtype": "float32", "scratch": true}],
    "params": ["x", "s"],
    "geometry": {"custom": {"grid": [1], "block": [32]}},
    "then": [{"kernel_name": "second",
              "kernel_source": "extern \"C\" __global__ void second(const float* s, float* y) {}\n",
              "inputs": [{"name": "s"}, {"name": "g"}], "outputs": [{"name": "y", "shape": {"same_as": "s"}}],
              "params": ["s", "y"], "when": [{"tensor": "g", "==": 0}],
              "geometry": {"custom": {"grid": [2], "block": [32]}}}]
  })json";
  OpDecl two_decl = parse_op_json(two, ".");
  EXPECT_EQ(parse_op_json(print_op_json(two_decl), "."), two_decl);
  CompiledImage two_image = compile_for_test(two_decl);
  record_launches_of(two_image);  // both kernels take two pointers
  KernelOp two_op(two_image);
  Call t = x_to_y(Shape{4});
  t.inputs.push_back(tensor(0x500000, DType::Int32, Shape{}));
  put(0x500000, std::int32_t{0});
  std::string both = outcome(two_op, t);
  EXPECT_NE(both.find("grid=1,1,1"), std::string::npos) << both;
  EXPECT_NE(both.find("grid=2,1,1"), std::string::npos) << both;
  std::string memory = fake().memory_ops();
  EXPECT_EQ(memory.find("read"), memory.rfind("read")) << memory;  // tested once
  EXPECT_NE(memory.find("read 0x500000 bytes=4\n"), std::string::npos) << memory;
  put(0x500000, std::int32_t{7});
  std::string one = outcome(two_op, t);
  EXPECT_NE(one.find("grid=1,1,1"), std::string::npos) << one;
  EXPECT_EQ(one.find("grid=2,1,1"), std::string::npos) << one;
  fake().memory_ops();

  // An int64 is compared exactly: 2^53 + 1 is not 2^53 (as doubles they are one value).
  std::string wide = two;
  wide.replace(wide.find(R"J("dtype": "int32")J"), 16, R"J("dtype": "int64")J");
  wide.replace(wide.find(R"J("==": 0)J"), 7, R"J("==": 9007199254740992)J");
  KernelOp wide_op(compile_for_test(parse_op_json(wide, ".")));
  Call w = x_to_y(Shape{4});
  w.inputs.push_back(tensor(0x500000, DType::Int64, Shape{1}));
  put(0x500000, std::int64_t{9007199254740992});
  EXPECT_NE(outcome(wide_op, w).find("grid=2,1,1"), std::string::npos);
  put(0x500000, std::int64_t{9007199254740993});
  EXPECT_EQ(outcome(wide_op, w).find("grid=2,1,1"), std::string::npos);
  fake().memory_ops();
  for (const char* value : {"9007199254740993", "-9007199254740993", "18446744073709551615"}) {
    std::string text = wide;
    text.replace(text.find("9007199254740992"), 16, value);
    testing::expect_error([&] { parse_op_json(text, "."); }, ErrorKind::Spec,
                          std::string("then[0].when[0].==: expected a number a double holds "
                                      "exactly (an integer within +-2^53, or any other), found ") +
                              value);
  }

  auto refused = [&](const std::string& from, const std::string& to, const std::string& want) {
    std::string text = spec;
    text.replace(text.find(from), from.size(), to);
    testing::expect_error([&] { validate(parse_op_json(text, ".")); }, ErrorKind::Spec, want);
  };
  refused(R"J("shape": {"same_as": "x"})J", R"J("shape": ["item(n)"])J",
          "outputs[0].shape[0]: 'item(n)': item() reads a tensor's value on the host");
  refused(R"J("grid": ["dim(x, 0)"])J", R"J("grid": ["item(n)"])J",
          "geometry.custom.grid[0]: 'item(n)': item() reads a tensor's value on the host");
  refused(R"J("params")J", R"J("requires": ["item(n) > 0"], "params")J",
          "requires[0]: 'item(n) > 0': item() reads a tensor's value on the host");
  refused(R"J("item(n) * 2")J", R"J("item(m) * 2")J", "'m' is not a tensor");
  refused(R"J({"tensor": "g", "!=": 1.0})J", R"J({"tensor": "h", "!=": 1.0})J",
          "when[0]: 'h' is not a tensor of the launch (known tensors: x, g, n, y)");
  refused(R"J({"tensor": "g", "!=": 1.0})J", R"J({"tensor": "g", "!=": 1.0, "==": 2})J",
          "when[0]: expected {\"tensor\": name, \"==\": number} or {\"tensor\": name, \"!=\": "
          "number}: exactly one test");
  refused(R"J({"tensor": "g", "!=": 1.0})J", R"J({"tensor": "g", "!=": "1"})J",
          "when[0].!=: expected a number, found string");
  refused(R"J({"tensor": "g", "!=": 1.0})J", R"J({"tensor": "g", "<": 1.0})J", "when[0]");
}

}  // namespace
}  // namespace kernelop
