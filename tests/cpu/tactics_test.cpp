// Tactics without a GPU: tunables and configs in specs (JSON, validation, plan), compiling every
// config, the launch checks of a config, tuning tables (JSON, corruption, merging) and packages
// that carry them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernelop/kernelop.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

// A small tuned op: y = x * 2 over a flat tensor, B threads per block, V elements per thread.
constexpr const char* kSource = R"(
template <int B, int V>
__global__ void twice(const float* x, float* y, long long n) {
  long long i = ((long long)blockIdx.x * B + threadIdx.x) * V;
  for (int k = 0; k < V; ++k) if (i + k < n) y[i + k] = 2.0f * x[i + k];
}
)";

std::string nlohmann_quote(const char* text) {
  return nlohmann::json(text).dump();
}

std::string tuned_json(const std::string& extra = "", const std::string& configs = "") {
  return R"({"op": "t::twice", "kernel_name": "twice<B, V>", "kernel_source": )" +
         nlohmann_quote(kSource) + R"J(,
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "params": ["x", "y", {"expr": "numel(x)", "int64": true}],
    "geometry": {"custom": {"grid": ["cdiv(numel(x), B * V)"], "block": ["B"]}},
    "tunables": ["B", "V"],
    "configs": )J" +
         (configs.empty()
              ? R"J([{"B": 128, "V": 1}, {"B": 256, "V": 4, "requires": ["numel(x) % 4 == 0", "aligned(x, 16)"]}])J"
              : configs) +
         extra + "}";
}

OpDecl tuned(const std::string& extra = "", const std::string& configs = "") {
  return parse_op_json(tuned_json(extra, configs), "", "t.json");
}

TEST(TacticsSpec, JsonRoundTripsForTheExamples) {
  for (const char* name : {"softmax_tuned", "gemm_tiled"}) {
    SCOPED_TRACE(name);
    OpDecl decl = testing::example(name);
    ASSERT_FALSE(decl.spec.configs.empty());
    std::string text = print_op_json(decl);
    OpDecl again = parse_op_json(text, decl.base_dir, "again");
    EXPECT_EQ(again.spec.tunables, decl.spec.tunables);
    EXPECT_EQ(again.spec.configs, decl.spec.configs);
    EXPECT_EQ(again.spec.tuning_key, decl.spec.tuning_key);
    EXPECT_EQ(print_op_json(again), text);
  }
  OpDecl gemm = testing::example("gemm_tiled");
  EXPECT_TRUE(gemm.spec.tunables[1].define);
  EXPECT_EQ(gemm.spec.configs.size(), 8u);
  EXPECT_EQ(gemm.spec.configs[6].requirements.size(), 2u);
}

TEST(TacticsSpec, BoolTunablesReadAndPrintAsBools) {
  OpDecl d = parse_op_json(
      R"J({"op": "t::k", "kernel_name": "k<NEOX>", "kernel_source": "template <bool N> __global__ void k(const float* x, float* y) {}",
          "inputs": [{"name": "x", "dtype": "float32"}, {"name": "is_neox", "scalar": "bool"}],
          "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
          "geometry": {"elementwise": {"block": [128]}},
          "tunables": [{"name": "NEOX", "type": "bool"}],
          "configs": [{"NEOX": false, "requires": ["is_neox == NEOX"]}, {"NEOX": true, "requires": ["is_neox == NEOX"]}]})J",
      "", "b.json");
  EXPECT_EQ(d.spec.configs[1].values, std::vector<std::int64_t>{1});
  OpPlan p = derive_plan(d);
  ASSERT_EQ(p.instances.size(), 2u);
  EXPECT_EQ(p.instances[0].name_expression, "k<false>");
  EXPECT_EQ(p.instances[1].name_expression, "k<true>");
  EXPECT_EQ(p.configs[1].text, "NEOX=true");
  EXPECT_NE(print_op_json(d).find(R"("NEOX": true)"), std::string::npos);
}

TEST(TacticsSpec, JsonErrorsNameTheField) {
  expect_error([] { tuned("", R"([{"B": 128}])"); }, ErrorKind::Spec,
               "t.json: configs[0].V: missing; every config binds every tunable");
  expect_error([] { tuned("", R"([{"B": 128, "V": 1, "W": 2}])"); }, ErrorKind::Spec,
               "configs[0].W: is not a tunable (tunables: B, V)");
  expect_error([] { tuned("", R"([{"B": "128", "V": 1}])"); }, ErrorKind::Spec,
               "configs[0].B: expected an integer, found string");
  expect_error([] { tuned("", R"([[128, 1]])"); }, ErrorKind::Spec,
               "configs[0]: expected an object binding every tunable, found array");
  expect_error([] { tuned(R"J(, "tuning_key": "numel(x)")J"); }, ErrorKind::Spec, "tuning_key");
}

TEST(TacticsValidate, RefusesWhatCannotWork) {
  auto expect_spec = [](const OpDecl& d, const std::string& needle) {
    expect_error([&] { derive_plan(d); }, ErrorKind::Spec, needle);
  };
  OpDecl d = tuned();
  d.spec.configs.clear();
  expect_spec(d, "op t::twice: configs: is empty, but tunables are declared");
  d = tuned();
  d.spec.tunables.clear();
  for (auto& c : d.spec.configs) c.values.clear();
  expect_spec(d, "tunables: is empty, but configs are given");
  d = tuned();
  d.spec.configs[1].values = {128, 1};
  expect_spec(d, "configs[1]: binds the same values as configs[0]");
  d = tuned();
  d.spec.configs[0].values = {128};
  expect_spec(d, "configs[0]: binds 1 value(s) for 2 tunable(s)");
  d = tuned();
  d.spec.tunables[0].boolean = true;
  expect_spec(d, "configs[0].B: is 128; the tunable is a bool");
  d = tuned();
  d.spec.outputs->front().shape = ShapeExprs{{Expr::parse("numel(x) // B")}};
  expect_spec(d,
              "tunable 'B' cannot shape an output: every config (and every device) must give "
              "the same shapes");
  d = tuned();
  d.spec.requirements.push_back(Requirement::parse("numel(x) % V == 0"));
  expect_spec(d,
              "tunable 'V' cannot be read by the op's requires (a Meta kernel checks them); "
              "put it in a config's requires");
  d = tuned();
  d.spec.requirements.push_back(Requirement::parse("arch() >= 80"));
  expect_spec(d, "arch() cannot be read by the op's requires");
  d = tuned();
  d.spec.tunables.push_back(Tunable{"UNUSED"});
  d.spec.configs[0].values.push_back(1);
  d.spec.configs[1].values.push_back(2);
  expect_spec(d, "tunables[2]: 'UNUSED' is used nowhere");
  d = tuned();
  d.spec.tunables[0].name = "x";
  d.spec.kernel_name = "twice<x, V>";
  expect_spec(d, "tunables[0].name: 'x' is also an input's name");
  d = tuned();
  d.spec.tunables[0].name = "requires";
  expect_spec(d, "tunables[0].name: 'requires' is a reserved name");
  d = tuned();
  d.spec.tuning_key = std::vector<Expr>{};
  expect_spec(d, "tuning_key: has 0 entries; expected 1 to 16");
  d = tuned();
  d.spec.tuning_key = std::vector<Expr>{Expr::parse("B")};
  expect_spec(d, "tuning_key[0]: 'B': tunable 'B' cannot shape an output");
  d = tuned();
  d.spec.configs[1].requirements.push_back(Requirement::parse("numel(nothing) > 0"));
  expect_spec(d, "configs[1].requires[2]: 'numel(nothing) > 0': 'nothing' is not a tensor");
  d = tuned();
  d.spec.configs.resize(300, d.spec.configs[0]);
  expect_spec(d, "has 300 configs; at most 256 are allowed");
  // Configs need a launch kernelop makes: not with a meta_fn/eager_fn override.
  ValidateOptions o;
  o.has_eager_fn = true;
  expect_error([&] { derive_plan(tuned(), o); }, ErrorKind::Spec,
               "configs: need a launch kernelop makes itself");
}

TEST(TacticsPlan, InstancesAreConfigMajorAndDefinesSplitCompilations) {
  OpPlan p = derive_plan(tuned());
  ASSERT_EQ(p.configs.size(), 2u);
  EXPECT_EQ(p.configs[1].text, "B=256, V=4");
  ASSERT_EQ(p.instances.size(), 2u);
  EXPECT_EQ(p.instances[1].name_expression, "twice<256, 4>");
  EXPECT_EQ(p.instances[1].config, 1);
  EXPECT_EQ(p.programs.size(), 1u);
  EXPECT_EQ(p.geometry->grid[0].to_string(), "cdiv(numel(x), B * V)");
  EXPECT_EQ(p.geometry->grid[0].lhs().op(), ExprOp::Numel);
  EXPECT_TRUE(p.configs[1].requirements[1].reads_pointers);

  OpPlan g = derive_plan(testing::example("gemm_tiled"));
  EXPECT_EQ(g.programs.size(), 5u);  // WPT = 1, 2, 4, 8, 16
  EXPECT_EQ(g.programs[0], std::vector<std::string>{"WPT=1"});
  EXPECT_EQ(g.configs[3].program, 1);  // TILE=32, WPT=2 shares WPT=2's compilation
  EXPECT_EQ(g.instances_of(1), (std::vector<int>{1, 3}));

  // Type parameters x configs: config-major, the dtype combination inside.
  OpDecl generic = tuned();
  generic.spec.kernel_name = "twice<T, B, V>";
  generic.spec.type_params = {TypeParam{"T", {DType::Float32, DType::Float16}}};
  generic.spec.inputs = std::vector<Input>{InputDecl{"x", std::string("T")}};
  OpPlan gp = derive_plan(generic);
  ASSERT_EQ(gp.instances.size(), 4u);
  EXPECT_EQ(gp.dtype_combinations(), 2);
  EXPECT_EQ(gp.instances[3].name_expression, "twice<__half, 256, 4>");
  EXPECT_EQ(gp.instances[3].config, 1);
}

CompileOptions sm90() {
  CompileOptions o;
  o.archs = {"sm_90"};
  o.use_cache = false;
  return o;
}

TEST(TacticsCompile, AConfigThatCannotLaunchIsRefusedByName) {
  expect_error(
      [] {
        compile(derive_plan(tuned("", R"([{"B": 128, "V": 1}, {"B": 2048, "V": 1}])")), sm90());
      },
      ErrorKind::Compile,
      "op t::twice: tactic 1 (B=2048, V=1) cannot launch: its block [2048, 1, 1] has 2048 "
      "threads per block; CUDA allows at most 1024");
  // Shared memory (here dynamic, a constant for each config) beyond what a block may use on
  // sm_80 (163 KiB).
  OpDecl big = tuned();
  std::get<Custom>(*big.spec.geometry).shared_mem = Expr::parse("B * V * 256");
  big.spec.configs[1].values = {1024, 1};
  CompileOptions o = sm90();
  o.archs = {"sm_80"};
  expect_error([&] { compile(derive_plan(big), o); }, ErrorKind::Compile,
               "tactic 1 (B=1024, V=1) cannot launch: on sm_80 it needs 262144 bytes of shared "
               "memory per block; a block may use 166912");
  // A config that only runs on sm_90 (its requires say so) is not held to sm_80's limits.
  std::get<Custom>(*big.spec.geometry).shared_mem = Expr::parse("B * V * 200");
  big.spec.configs[1].requirements = {Requirement::parse("arch() >= 90")};
  o.archs = {"sm_80", "sm_90"};
  EXPECT_NO_THROW(compile(derive_plan(big), o));
  o.archs = {"sm_80"};
  big.spec.configs[1].requirements = {Requirement::parse("arch() >= 80")};
  expect_error([&] { compile(derive_plan(big), o); }, ErrorKind::Compile,
               "on sm_80 it needs 204800 bytes");
}

// Differential: every image of a tuned op with several compilations, through the cache (a fresh
// cache, then the hit) and without it, is byte-identical.
TEST(TacticsCompile, CachedImagesOfEveryCompilationEqualFreshOnes) {
  OpPlan plan = derive_plan(testing::example("gemm_tiled"));
  CompileOptions fresh;
  fresh.archs = {"sm_90", "compute_90"};
  fresh.use_cache = false;
  CompiledImage want = compile(plan, fresh);
  fs::path dir = fs::temp_directory_path() / ("kop-tactics-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CompileCache cache(dir);
  CompileOptions cached = fresh;
  cached.use_cache = true;
  cached.cache = &cache;
  for (int round = 0; round < 2; ++round) {
    CompiledImage got = compile(plan, cached);
    ASSERT_EQ(got.images.size(), want.images.size());
    for (std::size_t i = 0; i < got.images.size(); ++i) {
      SCOPED_TRACE(want.images[i].arch + " program " + std::to_string(want.images[i].program));
      EXPECT_EQ(got.images[i].cache_hit, round == 1);
      EXPECT_EQ(got.images[i].program, want.images[i].program);
      EXPECT_EQ(got.images[i].data, want.images[i].data);
      EXPECT_EQ(got.images[i].usage, want.images[i].usage);
    }
    EXPECT_EQ(got.lowered_names, want.lowered_names);
    EXPECT_EQ(op_fingerprint(got), op_fingerprint(want));
  }
  fs::remove_all(dir);
}

std::vector<TensorView> one(Shape shape, void* data) {
  return {TensorView{data, DType::Float32, shape, {}, 0}};
}

TEST(TacticsRuntime, ChoiceErrorsComeBeforeTheDriver) {
  KernelOp op(
      compile(derive_plan(tuned("", R"J([{"B": 128, "V": 4, "requires": ["numel(x) % 4 == 0"]},
      {"B": 256, "V": 4, "requires": ["numel(x) % 4 == 0", "aligned(x, 16)"]}])J")),
              sm90()));
  EXPECT_EQ(op.num_tactics(), 2);
  EXPECT_EQ(op.tactic_text(1), "B=256, V=4");
  auto* p = reinterpret_cast<void*>(0x10004);
  expect_error([&] { op.launch(one({6}, p), {}, one({6}, p), nullptr); }, ErrorKind::Launch,
               "op t::twice: no config can run these inputs: tactic 0 (B=128, V=4) requires "
               "'numel(x) % 4 == 0' (2 == 0); tactic 1 (B=256, V=4) requires 'numel(x) % 4 == 0' "
               "(2 == 0)");
  op.pin_tactic(1);
  EXPECT_EQ(op.pinned_tactic(), 1);
  expect_error([&] { op.launch(one({8}, p), {}, one({8}, p), nullptr); }, ErrorKind::Launch,
               "op t::twice: tactic 1 (B=256, V=4) is pinned but cannot run these inputs: it "
               "requires 'aligned(x, 16)'");
  expect_error([&] { op.pin_tactic(2); }, ErrorKind::Spec,
               "cannot pin tactic 2; expected -1 (unpin) or 0..1");
  expect_error([&] { op.tactic_text(-1); }, ErrorKind::Spec, "tactic -1 does not exist");
  EXPECT_EQ(op.last_tactic(), -1);
  EXPECT_EQ(op.tuning_stats().timed_runs, 0u);
  // A raw launch names no config, so it could not check their requires: refused.
  std::vector<RawArg> raw = {RawArg::of_scalar(ScalarArg::of_int(1))};
  expect_error(
      [&] {
        op.launch_raw({{1, 1, 1}, {128, 1, 1}, 0}, raw, nullptr);
      },
      ErrorKind::Launch,
      "its tactics have requirements (tactic 0: 'numel(x) % 4 == 0'), which a raw launch "
      "cannot check");

  // One config: nothing to choose, but its requires still guard every launch.
  KernelOp single(compile(
      derive_plan(tuned("", R"J([{"B": 128, "V": 4, "requires": ["numel(x) % 4 == 0"]}])J")),
      sm90()));
  expect_error([&] { single.launch(one({6}, p), {}, one({6}, p), nullptr); }, ErrorKind::Launch,
               "op t::twice: no config can run these inputs: tactic 0 (B=128, V=4) requires "
               "'numel(x) % 4 == 0' (2 == 0)");
}

TEST(TacticsRuntime, TheEnvironmentPinsByOpOrForAll) {
  CompiledImage image = compile(derive_plan(tuned()), sm90());
  struct Env {
    explicit Env(const char* v) { ::setenv("KERNELOP_TACTIC", v, 1); }
    ~Env() { ::unsetenv("KERNELOP_TACTIC"); }
  };
  {
    Env e("1");
    EXPECT_EQ(KernelOp(image).pinned_tactic(), 1);
  }
  {
    Env e("other::op=0,t::twice=1");
    EXPECT_EQ(KernelOp(image).pinned_tactic(), 1);
  }
  {
    Env e("other::op=0");
    EXPECT_EQ(KernelOp(image).pinned_tactic(), -1);
  }
  for (const char* bad : {"7", "t::twice=x", "-1", "t::twice=", "99999999999"}) {
    SCOPED_TRACE(bad);
    Env e(bad);
    expect_error([&] { KernelOp op(image); }, ErrorKind::Spec,
                 "KERNELOP_TACTIC='" + std::string(bad) +
                     "': for op t::twice expected a tactic id from 0 to 1");
  }
}

TuningTable table_for(const CompiledImage& image) {
  TuningTable t;
  t.op = image.plan.op_name;
  t.fingerprint = op_fingerprint(image);
  t.device = "NVIDIA H200";
  t.arch = "sm_90";
  t.version = std::string(version());
  for (const ConfigPlan& c : image.plan.configs) t.configs.push_back(c.text);
  t.entries.push_back(TuningEntry{{0, 3, 0, 0, 0, 1, 1024}, "x=float32[1000]", 1, {0.01, 0.005}});
  return t;
}

TEST(TuningTables, RoundTripMergeAndBuckets) {
  CompiledImage image = compile(derive_plan(tuned()), sm90());
  TuningTable t = table_for(image);
  EXPECT_EQ(parse_tuning_table(tuning_table_json(t), "t"), t);
  EXPECT_EQ(parse_tuning_tables(tuning_tables_json({t, t}), "t").size(), 2u);
  EXPECT_EQ(tuning_table_mismatch(t, image), "");
  std::vector<TuningTable> tables;
  merge_tuning_table(tables, t);
  TuningTable more = t;
  more.entries[0].config = 0;
  more.entries.push_back(TuningEntry{{0, 3, 0, 0, 0, 1, 2048}, "x=float32[2048]", 1, {0.02, 0.01}});
  merge_tuning_table(tables, more);
  ASSERT_EQ(tables.size(), 1u);
  ASSERT_EQ(tables[0].entries.size(), 2u);
  EXPECT_EQ(tables[0].entries[0].config, 0) << "the newer entry of a key replaces the older";
  TuningTable other_device = t;
  other_device.device = "NVIDIA H100 80GB HBM3";
  merge_tuning_table(tables, other_device);
  EXPECT_EQ(tables.size(), 2u);
  for (auto [v, b] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 0}, {1, 1}, {3, 4}, {1000, 1024}, {1024, 1024}, {1025, 2048}, {-5, 0}}) {
    EXPECT_EQ(tuning_bucket(v), b) << v;
  }
  EXPECT_EQ(tuning_bucket(std::numeric_limits<std::int64_t>::max()), std::int64_t{1} << 62);
}

// Processes (here threads) storing their tuning results in one file lose none of them.
TEST(TuningTables, ConcurrentStoresMergeUnderTheLockAndReplaceWhatDoesNotFit) {
  CompiledImage image = compile(derive_plan(tuned()), sm90());
  fs::path dir = fs::temp_directory_path() / ("kop-store-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path file = dir / "t.json";
  std::ofstream(file) << "{ corrupt";
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      TuningTable t = table_for(image);
      t.entries[0].key.back() = 1 << (i + 4);
      for (int round = 0; round < 5; ++round) EXPECT_EQ(store_tuning_table(file, t), "");
    });
  }
  for (auto& t : threads) t.join();
  std::vector<TuningTable> got = read_tuning_file(file);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].entries.size(), 8u);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  // Another build's table in the file is replaced, not merged.
  TuningTable other = table_for(image);
  other.fingerprint = "ff";
  EXPECT_EQ(store_tuning_table(file, other), "");
  got = read_tuning_file(file);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].fingerprint, "ff");
  EXPECT_EQ(got[0].entries.size(), 1u);
  fs::remove_all(dir);
}

TEST(TuningTables, CorruptTablesAreFormatErrorsNeverCrashes) {
  CompiledImage image = compile(derive_plan(tuned()), sm90());
  std::string good = tuning_table_json(table_for(image));
  std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {"[1]", "a tuning table is a JSON object"},
      {R"({"format": 2})", "format is not 1"},
      {R"({"format": 1, "op": 3})", "op is missing or not a string"},
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  cases.emplace_back(replace(R"("config": 1)", R"("config": 2)"),
                     "entries[0].config 2 is not one of the 2 configs");
  cases.emplace_back(replace(R"("config": 1)", R"("config": -1)"),
                     "entries[0].config -1 is not one of the 2 configs");
  cases.emplace_back(replace(R"("config": 1)", R"("config": "1")"),
                     "entries[0].config is not an integer");
  cases.emplace_back(replace("0.005", "1e999"), "not valid JSON");
  cases.emplace_back(replace("0.005", R"("fast")"), "entries[0].times_ms holds a non-number");
  cases.emplace_back(replace("0.01,", ""), "entries[0].times_ms has 1 times for 2 configs");
  cases.emplace_back(replace(R"("key": [)", R"("key": ["a", )"),
                     "entries[0].key holds a non-integer");
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text.substr(0, 60));
    expect_error([&] { parse_tuning_table(text, "bad.json"); }, ErrorKind::Format,
                 "tuning table bad.json: " + needle);
  }
  TuningTable other = table_for(image);
  other.fingerprint = "0";
  EXPECT_NE(tuning_table_mismatch(other, image).find("another build of the op"), std::string::npos);
  other = table_for(image);
  other.configs.pop_back();
  EXPECT_EQ(tuning_table_mismatch(other, image), "its configs differ from the op's");
  // Tables built in code get the parser's checks: no key longer than a call can make (it would
  // not fit the launch path's key), no config or times out of range.
  for (auto broken : std::vector<std::function<void(TuningEntry&)>>{
           [](TuningEntry& e) { e.key.assign(kMaxTuningKeyWords + 1, 0); },
           [](TuningEntry& e) { e.config = 300; }, [](TuningEntry& e) { e.times_ms.pop_back(); }}) {
    other = table_for(image);
    broken(other.entries[0]);
    EXPECT_EQ(tuning_table_mismatch(other, image),
              "entry 0 is malformed (its config, times or key)");
    KernelOp op(image);
    expect_error([&] { op.add_tuning_table(other); }, ErrorKind::Format, "entry 0 is malformed");
  }
}

TEST(TuningTables, PackagesCarryCompilationsAndTables) {
  CompiledImage image = compile(derive_plan(testing::example("gemm_tiled")), sm90());
  image.tuning.push_back(table_for(image));
  image.tuning[0].configs.clear();
  for (const ConfigPlan& c : image.plan.configs) image.tuning[0].configs.push_back(c.text);
  image.tuning[0].entries[0].times_ms.assign(image.plan.configs.size(), -1.0);
  image.tuning[0].entries[0].times_ms[1] = 0.25;
  Package pkg = parse_package(write_package_bytes(image));
  ASSERT_EQ(pkg.image.images.size(), image.images.size());
  for (std::size_t i = 0; i < image.images.size(); ++i) {
    EXPECT_EQ(pkg.image.images[i].program, image.images[i].program);
  }
  EXPECT_EQ(pkg.image.tuning, image.tuning);
  EXPECT_EQ(op_fingerprint(pkg.image), op_fingerprint(image));
  KernelOp op(pkg.image);
  ASSERT_EQ(op.tuning_tables().size(), 1u);
  EXPECT_EQ(op.tuning_tables()[0].entries, image.tuning[0].entries);

  // A table of another build cannot be embedded, nor added.
  CompiledImage wrong = image;
  wrong.tuning[0].fingerprint = "00";
  expect_error([&] { write_package_bytes(wrong); }, ErrorKind::Spec,
               "op kernelop_examples::gemm_tiled: the tuning table for NVIDIA H200 (sm_90) does "
               "not fit the op: it was tuned with another build of the op");
  expect_error([&] { op.add_tuning_table(wrong.tuning[0]); }, ErrorKind::Format,
               "the tuning table does not fit");
}

}  // namespace
}  // namespace kernelop
