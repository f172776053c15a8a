// Tactics on a GPU: every config of the tuned examples matches the CPU reference, tuning picks
// the fastest timed config, persists it (a fresh op times nothing), ignores a corrupt table,
// never writes the caller's tensors, tunes once under concurrent first calls, and a package
// with an embedded table times nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "kernelop/kernelop.hpp"
#include "references.hpp"
#include "runtime/driver.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;

class TacticsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    ctx_ = std::make_unique<detail::PrimaryContext>(0);
    detail::Driver::require().cuCtxSetCurrent(ctx_->get());
    dir_ = fs::temp_directory_path() /
           ("kop-tune-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  LoadOptions options(bool persist = true) const {
    LoadOptions o;
    o.tuning_dir = dir_;
    o.persist_tuning = persist;
    return o;
  }
  std::unique_ptr<detail::PrimaryContext> ctx_;
  fs::path dir_;
};

const CompiledImage& image_of(const std::string& name) {
  static std::map<std::string, CompiledImage> images;
  static std::mutex m;
  std::lock_guard lock(m);
  auto it = images.find(name);
  if (it == images.end()) {
    fs::path spec = fs::path(KERNELOP_SOURCE_DIR) / "examples" / (name + ".json");
    CompileOptions c;
    c.archs = {"sm_90", "compute_90"};
    it = images.emplace(name, compile(derive_plan(load_op_file(spec)), c)).first;
  }
  return it->second;
}

// Inputs of the given shapes with the reference's values, on the device.
struct Call {
  std::vector<HostTensor> in_host, out_host;
  std::vector<DeviceBuffer> in, out;
  std::vector<TensorView> in_views, out_views;

  Call(const KernelOp& op, const std::vector<Shape>& shapes, unsigned seed = 1) {
    for (const Shape& s : shapes) in_host.emplace_back(s, DType::Float32);
    std::mt19937_64 rng(seed);
    default_inputs(in_host, rng);
    for (const HostTensor& h : in_host) {
      in.emplace_back(h.bytes());
      in.back().upload(h.encode().data(), h.bytes());
      in_views.push_back(TensorView{in.back().get(), DType::Float32, h.shape, {}, 0});
    }
    std::vector<Shape> out_shapes = op.output_shapes(in_views);
    for (const Shape& s : out_shapes) {
      out_host.emplace_back(s, DType::Float32);
      out.emplace_back(out_host.back().bytes());
      out_views.push_back(TensorView{out.back().get(), DType::Float32, s, {}, 0});
    }
  }
  void poison() {
    for (auto& b : out) b.fill_bytes(0xff);
    ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
  }
  // Every output against the reference.
  void expect_reference(const KernelOp& op, const std::string& what) {
    ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
    const examples::Reference* ref = examples::find_reference(op.plan().op_name);
    ASSERT_NE(ref, nullptr);
    std::vector<HostTensor> want_in = in_host, want_out = out_host;
    ref->compute(want_in, {}, want_out);
    double extra = ref->extra_atol ? ref->extra_atol(in_host) : 0;
    for (std::size_t o = 0; o < out.size(); ++o) {
      HostTensor got = out_host[o];
      std::string bytes(got.bytes(), '\0');
      out[o].download(bytes.data(), bytes.size());
      got.decode(bytes);
      Comparison c = compare(got, want_out[o], extra);
      EXPECT_TRUE(c.passed()) << what << ": worst element " << c.worst_index << " off by "
                              << c.max_abs_error;
    }
  }
};

void every_tactic_matches(const std::string& name, const std::vector<std::vector<Shape>>& cases) {
  KernelOp op(image_of(name));
  for (const auto& shapes : cases) {
    Call call(op, shapes);
    std::string where = name;
    for (const Shape& s : shapes) where += " " + s.to_string();
    int eligible = 0;
    for (int t = 0; t < op.num_tactics(); ++t) {
      call.poison();
      op.pin_tactic(t);
      try {
        op.launch(call.in_views, {}, call.out_views, nullptr);
      } catch (const Error& e) {
        EXPECT_NE(e.message().find("cannot run these inputs"), std::string::npos) << e.what();
        continue;
      }
      ++eligible;
      EXPECT_EQ(op.last_tactic(), t);
      call.expect_reference(
          op, where + " tactic " + std::to_string(t) + " (" + op.tactic_text(t) + ")");
    }
    EXPECT_GT(eligible, 0) << where;
    op.pin_tactic(-1);
    call.poison();
    op.launch(call.in_views, {}, call.out_views, nullptr);  // tuned (or from the table)
    call.expect_reference(op, where + " tuned: tactic " + std::to_string(op.last_tactic()));
  }
}

TEST_F(TacticsGpu, EveryTacticOfTheTunedExamplesMatchesTheReference) {
  every_tactic_matches(
      "softmax_tuned",
      {{{1, 1}}, {{7, 33}}, {{3, 4099}}, {{64, 1024}}, {{1000, 4096}}, {{4096, 4}}, {{2, 3, 128}}});
  every_tactic_matches("gemm_tiled", {{{1, 1}, {1, 1}},
                                      {{17, 33}, {33, 9}},
                                      {{128, 64}, {64, 256}},
                                      {{300, 257}, {257, 130}},
                                      {{64, 1000}, {1000, 64}}});
}

TEST_F(TacticsGpu, TuningChoosesTheFastestPersistsAndAFreshOpTimesNothing) {
  const CompiledImage& image = image_of("softmax_tuned");
  KernelOp first(image, options());
  Call call(first, {{512, 4096}});
  first.launch(call.in_views, {}, call.out_views, nullptr);
  TuningStats s = first.tuning_stats();
  EXPECT_EQ(s.tunings, 1u);
  // Note [tuning runs]: per config a warm-up, an estimate, then at least 5 rounds.
  EXPECT_GE(s.timed_runs, 8u * (2u + 5u)) << "8 eligible configs";
  std::vector<TuningTable> tables = first.tuning_tables();
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_EQ(tables[0].entries.size(), 1u);
  const TuningEntry& e = tables[0].entries[0];
  auto fastest = std::min_element(e.times_ms.begin(), e.times_ms.end()) - e.times_ms.begin();
  // The fastest, or a lower id within its noise (at most 3% slower).
  EXPECT_LE(e.config, fastest);
  EXPECT_LE(e.times_ms[static_cast<std::size_t>(e.config)],
            e.times_ms[static_cast<std::size_t>(fastest)] * 1.03);
  EXPECT_EQ(first.last_tactic(), e.config);
  call.expect_reference(first, "tuned launch");
  // A second launch of the same key, and one in the same bucket (500 rows -> 512): the table.
  first.launch(call.in_views, {}, call.out_views, nullptr);
  EXPECT_EQ(first.tuning_stats().table_hits, 1u);
  // On disk: a private directory and file.
  struct stat st {};
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir_)) {
    if (f.path().extension() == ".json") files.push_back(f.path());  // beside it: its .lock
  }
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(::stat(files[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  // A fresh op (what a second process is) reads the table: zero timing runs.
  KernelOp second(image, options());
  second.launch(call.in_views, {}, call.out_views, nullptr);
  EXPECT_EQ(second.tuning_stats().timed_runs, 0u);
  EXPECT_EQ(second.tuning_stats().table_hits, 1u);
  EXPECT_EQ(second.last_tactic(), e.config);
  // A corrupt table is ignored with a warning and rewritten.
  std::ofstream(files[0]) << "{ not json";
  KernelOp third(image, options());
  ::testing::internal::CaptureStderr();
  third.launch(call.in_views, {}, call.out_views, nullptr);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is ignored"), std::string::npos) << err;
  EXPECT_EQ(third.tuning_stats().tunings, 1u);
  EXPECT_NO_THROW(read_tuning_file(files[0]));
  // The table travels in a package: a deployment with no table on disk times nothing.
  CompiledImage shipped = image;
  shipped.tuning = third.tuning_tables();
  Package pkg = parse_package(write_package_bytes(shipped));
  KernelOp deployed(pkg.image, options(false));
  deployed.launch(call.in_views, {}, call.out_views, nullptr);
  EXPECT_EQ(deployed.tuning_stats().timed_runs, 0u);
  EXPECT_EQ(deployed.tuning_stats().table_hits, 1u);
  call.expect_reference(deployed, "deployed");
}

// Note [tuning runs] at a few microseconds: configs that spin for known numbers of clock cycles
// (about 3, 4 and 5 us at the H100's and H200's clocks). The tuner must tell 3 from 4 us apart,
// and between two identical configs (ids 1 and 3) choose the lower id, every time.
TEST_F(TacticsGpu, TheTunerSeparatesMicrosecondKernelsAndTiesGoToTheLowerId) {
  OpDecl d = parse_op_json(R"J({"op": "t::spin", "kernel_name": "spin<C, PAD>",
    "kernel_source": "template <long long C, int PAD> __global__ void spin(const float* x, float* y) { long long t0 = clock64(); while (clock64() - t0 < C) {} if (threadIdx.x == 0) y[0] = x[0] + PAD; }",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "params": ["x", "y"],
    "geometry": {"custom": {"grid": [1], "block": [32]}},
    "tunables": ["C", "PAD"],
    "configs": [{"C": 8000, "PAD": 0}, {"C": 6000, "PAD": 1}, {"C": 10000, "PAD": 2},
                {"C": 6000, "PAD": 3}]})J",
                           "", "spin.json");
  CompileOptions c;
  c.archs = {"sm_90"};
  CompiledImage image = compile(derive_plan(d), c);
  DeviceBuffer x(4), y(4);
  float one = 1.0f;
  x.upload(&one, 4);
  std::vector<TensorView> in = {TensorView{x.get(), DType::Float32, {1}, {}, 0}};
  std::vector<TensorView> out = {TensorView{y.get(), DType::Float32, {1}, {}, 0}};
  for (int trial = 0; trial < 5; ++trial) {
    KernelOp op(image, options(false));
    op.launch(in, {}, out, nullptr);
    EXPECT_EQ(op.last_tactic(), 1) << "trial " << trial;
    const TuningEntry e = op.tuning_tables().at(0).entries.at(0);
    double t3 = e.times_ms[1], t4 = e.times_ms[0], t5 = e.times_ms[2], twin = e.times_ms[3];
    EXPECT_GT(t3, 0.002) << "a spin of 6000 cycles takes microseconds";
    // Each kernel also costs a fixed launch and block start: the order is certain, the ratios
    // of the cycle counts are an upper bound.
    EXPECT_GT(t4 / t3, 1.15) << t3 << " " << t4;
    EXPECT_LT(t4 / t3, 8000.0 / 6000.0 + 0.05) << t3 << " " << t4;
    EXPECT_GT(t5 / t4, 1.12) << t4 << " " << t5;
    EXPECT_NEAR(twin / t3, 1.0, 0.03) << t3 << " " << twin;
  }
  float got = 0;
  y.download(&got, 4);
  EXPECT_EQ(got, 2.0f);  // the chosen config (PAD = 1) ran after tuning
}

TEST_F(TacticsGpu, TuningNeverWritesTheCallersTensors) {
  // x = 2 x + 1 in place, three block sizes: tuning runs each config 6 times on scratch.
  OpDecl d = parse_op_json(R"J({"op": "t::inplace", "kernel_name": "twice_plus_one<B>",
      "kernel_source": "template <int B> __global__ void twice_plus_one(float* x, long long n) { long long i = (long long)blockIdx.x * B + threadIdx.x; if (i < n) x[i] = 2.0f * x[i] + 1.0f; }",
      "inputs": [{"name": "x", "dtype": "float32", "mutated": true}],
      "outputs": [],
      "params": ["x", {"expr": "numel(x)", "int64": true}],
      "geometry": {"custom": {"grid": ["cdiv(numel(x), B)"], "block": ["B"]}},
      "tunables": ["B"],
      "configs": [{"B": 128}, {"B": 256}, {"B": 512}]})J",
                           "", "inplace.json");
  KernelOp op(compile(derive_plan(d)), options(false));
  const std::int64_t n = 1 << 20;
  std::vector<float> host(n);
  for (std::int64_t i = 0; i < n; ++i)
    host[static_cast<std::size_t>(i)] = static_cast<float>(i % 97);
  DeviceBuffer x(n * 4);
  x.upload(host.data(), n * 4);
  std::vector<TensorView> in = {TensorView{x.get(), DType::Float32, {n}, {}, 0}};
  op.launch(in, {}, {}, nullptr);
  ASSERT_EQ(op.tuning_stats().tunings, 1u);
  std::vector<float> got(n);
  x.download(got.data(), n * 4);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[static_cast<std::size_t>(i)], 2.0f * host[static_cast<std::size_t>(i)] + 1.0f)
        << "element " << i << ": the op ran more than once on the caller's tensor";
  }
}

// The same for a strided in-place view with a negative stride: the scratch covers exactly the
// elements the view reaches, below its data pointer, and the guard elements around stay intact.
TEST_F(TacticsGpu, TuningAStridedViewWithANegativeStrideStaysInside) {
  OpDecl d = parse_op_json(R"J({"op": "t::inplace_strided", "kernel_name": "twice_plus_one<B>",
      "kernel_source": "template <int B> __global__ void twice_plus_one(float* x, long long s, long long n) { long long i = (long long)blockIdx.x * B + threadIdx.x; if (i < n) x[i * s] = 2.0f * x[i * s] + 1.0f; }",
      "inputs": [{"name": "x", "dtype": "float32", "mutated": true, "strided": true}],
      "outputs": [],
      "params": ["x", {"expr": "stride(x, 0)", "int64": true}, {"expr": "numel(x)", "int64": true}],
      "geometry": {"custom": {"grid": ["cdiv(numel(x), B)"], "block": ["B"]}},
      "tunables": ["B"],
      "configs": [{"B": 128}, {"B": 256}]})J",
                           "", "inplace_strided.json");
  KernelOp op(compile(derive_plan(d)), options(false));
  const std::int64_t n = 4096, guard = 64;
  std::vector<float> host(n + 2 * guard);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 13);
  DeviceBuffer buf(host.size() * 4);
  buf.upload(host.data(), host.size() * 4);
  // Elements guard .. guard + n - 1, walked backwards: data points at the last one, stride -1.
  auto* last = reinterpret_cast<float*>(buf.get()) + guard + n - 1;
  std::vector<TensorView> in = {TensorView{last, DType::Float32, {n}, Shape{-1}, 0}};
  op.launch(in, {}, {}, nullptr);
  ASSERT_EQ(op.tuning_stats().tunings, 1u);
  std::vector<float> got(host.size());
  buf.download(got.data(), got.size() * 4);
  for (std::size_t i = 0; i < host.size(); ++i) {
    bool inside = i >= static_cast<std::size_t>(guard) && i < static_cast<std::size_t>(guard + n);
    ASSERT_EQ(got[i], inside ? 2.0f * host[i] + 1.0f : host[i]) << "element " << i;
  }
}

// Differential: the decision memo against the full choice. Calls alternate between an aligned
// and a misaligned view of the same shape (the VEC=4 configs need 16-byte alignment): every call
// gets an eligible tactic, the same one the full choice gives, and the reference's result.
TEST_F(TacticsGpu, TheDecisionMemoAgreesWithTheFullChoice) {
  KernelOp op(image_of("softmax_tuned"), options(false));
  const std::int64_t rows = 64, cols = 1024;
  Call aligned(op, {{rows, cols}}, 3);
  DeviceBuffer shifted(static_cast<std::size_t>(rows * cols + 1) * 4);
  shifted.fill_bytes(0);
  std::vector<TensorView> mis = {
      TensorView{reinterpret_cast<float*>(shifted.get()) + 1, DType::Float32, {rows, cols}, {}, 0}};
  ASSERT_EQ(detail::Driver::require().cuCtxSynchronize(), CUDA_SUCCESS);
  int tuned_aligned = -1, tuned_mis = -1;
  for (int round = 0; round < 6; ++round) {
    bool odd = round % 2 == 1;
    op.launch(odd ? mis : aligned.in_views, {}, aligned.out_views, nullptr);
    int t = op.last_tactic();
    int& first = odd ? tuned_mis : tuned_aligned;
    if (first < 0) first = t;
    EXPECT_EQ(t, first) << "round " << round << ": the memo changed the decision";
    if (odd) {
      EXPECT_EQ(op.tactic_text(t).find("VEC=4"), std::string::npos)
          << "a VEC=4 tactic ran on a misaligned input";
    } else {
      aligned.expect_reference(op, "aligned round " + std::to_string(round));
    }
  }
  EXPECT_EQ(op.tuning_stats().tunings, 2u) << "one tuning per eligible set";
}

// Eligibility reads a bool scalar (vLLM's is_neox pattern) and the device's compute capability.
TEST_F(TacticsGpu, ScalarsAndTheDeviceDecideEligibility) {
  OpDecl d = parse_op_json(R"J({"op": "t::pick", "kernel_name": "pick<NEOX, B>",
      "kernel_source": "template <bool NEOX, int B> __global__ void pick(const float* x, float* y, bool is_neox, long long n) { long long i = (long long)blockIdx.x * B + threadIdx.x; if (i < n) y[i] = x[i] * (NEOX ? 2.0f : 3.0f); }",
      "inputs": [{"name": "x", "dtype": "float32"}, {"name": "is_neox", "scalar": "bool"}],
      "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
      "params": ["x", "y", "is_neox", {"expr": "numel(x)", "int64": true}],
      "geometry": {"custom": {"grid": ["cdiv(numel(x), B)"], "block": ["B"]}},
      "tunables": [{"name": "NEOX", "type": "bool"}, "B"],
      "configs": [{"NEOX": false, "B": 128, "requires": ["is_neox == NEOX"]},
                  {"NEOX": true, "B": 128, "requires": ["is_neox == NEOX", "arch() < 10"]},
                  {"NEOX": true, "B": 256, "requires": ["is_neox == NEOX", "arch() >= 50"]}]})J",
                           "", "pick.json");
  KernelOp op(compile(derive_plan(d)), options(false));
  const std::int64_t n = 1000;
  std::vector<float> host(n, 1.5f), got(n);
  DeviceBuffer x(n * 4), y(n * 4);
  x.upload(host.data(), n * 4);
  std::vector<TensorView> in = {TensorView{x.get(), DType::Float32, {n}, {}, 0}};
  std::vector<TensorView> out = {TensorView{y.get(), DType::Float32, {n}, {}, 0}};
  for (bool neox : {false, true}) {
    std::vector<ScalarArg> s = {ScalarArg::of_bool(neox)};
    op.launch(in, s, out, nullptr);
    EXPECT_EQ(op.last_tactic(), neox ? 2 : 0);
    y.download(got.data(), n * 4);
    EXPECT_EQ(got[n - 1], neox ? 3.0f : 4.5f);
  }
  op.pin_tactic(1);
  try {
    op.launch(in, std::vector<ScalarArg>{ScalarArg::of_bool(true)}, out, nullptr);
    ADD_FAILURE() << "tactic 1 needs arch() < 10";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("tactic 1 (NEOX=true, B=128) is pinned but cannot run these "
                               "inputs: it requires 'arch() < 10'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TacticsGpu, ConcurrentFirstCallsTuneOnce) {
  KernelOp op(image_of("softmax_tuned"), options(false));
  Call a(op, {{256, 2048}}, 1), b(op, {{256, 2048}}, 2);
  std::thread t1([&] { op.launch(a.in_views, {}, a.out_views, nullptr); });
  std::thread t2([&] { op.launch(b.in_views, {}, b.out_views, nullptr); });
  t1.join();
  t2.join();
  EXPECT_EQ(op.tuning_stats().tunings, 1u);
  EXPECT_EQ(op.tuning_stats().table_hits, 1u);
  a.expect_reference(op, "first thread");
  b.expect_reference(op, "second thread");
}

// A call that only one config can run times nothing (its own counter); a config whose
// requirement overflows for these inputs is ineligible, not the call's failure; a tuning key
// that overflows leaves the call untuned (issue "Trust, second pass").
TEST_F(TacticsGpu, OneEligibleConfigIsNotTimedAndOverflowsMakeConfigsIneligible) {
  auto make = [&](const std::string& key) {
    OpDecl d = parse_op_json(R"J({"op": "t::single", "kernel_name": "pick<B>",
      "kernel_source": "template <int B> __global__ void pick(const float* x, float* y, long long n) { long long i = (long long)blockIdx.x * B + threadIdx.x; if (i < n) y[i] = x[i] * B; }",
      "inputs": [{"name": "x", "dtype": "float32"}],
      "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
      "params": ["x", "y", {"expr": "numel(x)", "int64": true}],
      "geometry": {"custom": {"grid": ["cdiv(numel(x), B)"], "block": ["B"]}},
      "tunables": ["B"],
      "configs": [{"B": 64, "requires": ["numel(x) * 4611686018427387904 > 0"]},
                  {"B": 128, "requires": ["numel(x) < 0"]},
                  {"B": 256},
                  {"B": 512, "requires": ["numel(x) >= 5000"]}])J" +
                                 key + "}",
                             "", "single.json");
    return KernelOp(compile(derive_plan(d)), options(false));
  };
  KernelOp op = make("");
  const std::int64_t n = 1000;
  std::vector<float> host(n, 1.0f), got(n);
  DeviceBuffer x(n * 4), y(n * 4);
  x.upload(host.data(), n * 4);
  std::vector<TensorView> in = {TensorView{x.get(), DType::Float32, {n}, {}, 0}};
  std::vector<TensorView> out = {TensorView{y.get(), DType::Float32, {n}, {}, 0}};
  for (int i = 0; i < 3; ++i) op.launch(in, {}, out, nullptr);  // 1000 * 2^62 overflows: only B=256
  EXPECT_EQ(op.last_tactic(), 2);
  EXPECT_EQ(op.tuning_stats().single, 3u);
  EXPECT_EQ(op.tuning_stats().timed_runs, 0u);
  EXPECT_EQ(op.tuning_stats().tunings, 0u);
  y.download(got.data(), n * 4);
  EXPECT_EQ(got[n - 1], 256.0f);
  // Pinned to the overflowing config: refused by name, saying why.
  op.pin_tactic(0);
  try {
    op.launch(in, {}, out, nullptr);
    ADD_FAILURE() << "tactic 0 cannot be evaluated";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("tactic 0 (B=64) is pinned but cannot run these inputs: it "
                               "requires 'numel(x) * 4611686018427387904 > 0', which cannot be "
                               "evaluated for these inputs"),
              std::string::npos)
        << e.what();
  }
  // Two eligible (B=256, B=512) and a key that overflows: the first eligible runs, untuned.
  KernelOp keyed = make(R"J(, "tuning_key": ["numel(x) * 4611686018427387904"])J");
  const std::int64_t big = 8192;
  DeviceBuffer bx(big * 4), by(big * 4);
  std::vector<float> ones(big, 1.0f);
  bx.upload(ones.data(), big * 4);
  std::vector<TensorView> bin = {TensorView{bx.get(), DType::Float32, {big}, {}, 0}};
  std::vector<TensorView> bout = {TensorView{by.get(), DType::Float32, {big}, {}, 0}};
  keyed.launch(bin, {}, bout, nullptr);
  EXPECT_EQ(keyed.last_tactic(), 2);
  EXPECT_EQ(keyed.tuning_stats().defaults, 1u);
  EXPECT_EQ(keyed.tuning_stats().timed_runs, 0u);
}

}  // namespace
}  // namespace kernelop
