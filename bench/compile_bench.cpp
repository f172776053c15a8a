// Time to get machine code for each example: a cold compile through kernelop, a warm hit from
// the on-disk cache (a new process), a hit from the in-memory layer (the same process), and the
// bare NVRTC call alone, all for one architecture so that they compare like for like.
#include <benchmark/benchmark.h>
#include <nvrtc.h>
#include <unistd.h>

#include <filesystem>

#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/spec_json.hpp"

namespace fs = std::filesystem;
using namespace kernelop;

namespace {

const char* kExamples[] = {"relu", "softmax", "relu_generic", "cache_scatter"};

OpPlan plan_of(const char* name) {
  return derive_plan(
      load_op_file(fs::path(KERNELOP_SOURCE_DIR) / "examples" / (std::string(name) + ".json")));
}

// A kernel built on CUB (whose headers hold computed #includes): cached through the toolkit's
// identity (Note [include scan]), so a second process gets it from the disk cache.
OpPlan cub_plan() {
  OpDecl d;
  d.op_name = "bench::cub_block_sum";
  d.base_dir = KERNELOP_SOURCE_DIR;
  d.spec.kernel_name = "block_sum";
  d.spec.kernel_source =
      "#include <cub/block/block_reduce.cuh>\n"
      "extern \"C\" __global__ void block_sum(const float* x, int n, float* y) {\n"
      "  using Reduce = cub::BlockReduce<float, 256>;\n"
      "  __shared__ typename Reduce::TempStorage tmp;\n"
      "  int i = blockIdx.x * 256 + threadIdx.x;\n"
      "  float s = Reduce(tmp).Sum(i < n ? x[i] : 0.f);\n"
      "  if (threadIdx.x == 0) y[blockIdx.x] = s;\n}\n";
  d.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float32, false}};
  d.spec.outputs =
      std::vector<OutputDecl>{OutputDecl{"y", ShapeExprs{{cdiv(Expr::numel("x"), 256)}}, {}, {}}};
  d.spec.extras = {Numel{"x", false}};
  d.spec.geometry = Custom{{cdiv(Expr::numel("x"), 256), 1, 1}, {256, 1, 1}, 0};
  return derive_plan(d);
}

fs::path scratch(const std::string& tag) {
  return fs::temp_directory_path() / ("kernelop-bench-" + std::to_string(::getpid()) + "-" + tag);
}

CompileOptions sm90(CompileCache* cache) {
  CompileOptions o;
  o.archs = {"sm_90"};
  o.cache = cache;
  return o;
}

void BM_ColdCompile(benchmark::State& state, const char* name) {
  OpPlan plan = plan_of(name);
  fs::path dir = scratch("cold");
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(dir);
    CompileCache cache(dir);
    state.ResumeTiming();
    benchmark::DoNotOptimize(compile(plan, sm90(&cache)));
  }
  fs::remove_all(dir);
}

void BM_WarmDiskHit(benchmark::State& state, const char* name) {
  OpPlan plan = plan_of(name);
  fs::path dir = scratch("disk");
  {
    CompileCache cache(dir);
    compile(plan, sm90(&cache));
  }
  for (auto _ : state) {
    CompileCache cache(dir);  // empty memory layer: what a new process sees
    CompiledImage image = compile(plan, sm90(&cache));
    if (!image.images[0].cache_hit) state.SkipWithError("expected a cache hit");
    benchmark::DoNotOptimize(image);
  }
  fs::remove_all(dir);
}

void BM_WarmMemoryHit(benchmark::State& state, const char* name) {
  OpPlan plan = plan_of(name);
  CompileCache cache{fs::path()};
  compile(plan, sm90(&cache));
  for (auto _ : state) benchmark::DoNotOptimize(compile(plan, sm90(&cache)));
}

// NVRTC alone: create, compile for sm_90 with the same include path and standard, fetch the
// CUBIN. No signature probe, no include scan, no cache.
void BM_BareNvrtc(benchmark::State& state, const char* name) {
  OpPlan plan = plan_of(name);
  std::vector<std::string> opts = {"--std=c++17", "-I" + plan.base_dir,
                                   "-I" + cuda_include_dirs().at(0), "-arch=sm_90"};
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  for (auto _ : state) {
    nvrtcProgram prog = nullptr;
    nvrtcCreateProgram(&prog, plan.spec.kernel_source.c_str(), "k.cu", 0, nullptr, nullptr);
    for (const auto& inst : plan.instances)
      nvrtcAddNameExpression(prog, inst.name_expression.c_str());
    if (nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data()) != NVRTC_SUCCESS) {
      state.SkipWithError("NVRTC failed");
    }
    std::size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    std::string cubin(size, '\0');
    nvrtcGetCUBIN(prog, cubin.data());
    benchmark::DoNotOptimize(cubin);
    nvrtcDestroyProgram(&prog);
  }
}

// The default architecture list (4 CUBINs + PTX), compiled in parallel, cold vs disk hit.
void BM_ColdCompileDefaultArchs(benchmark::State& state, OpPlan (*make_plan)()) {
  OpPlan plan = make_plan();
  fs::path dir = scratch("cold-all");
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(dir);
    CompileCache cache(dir);
    state.ResumeTiming();
    CompileOptions o;
    o.cache = &cache;
    benchmark::DoNotOptimize(compile(plan, o));
  }
  fs::remove_all(dir);
}

void BM_WarmDiskHitDefaultArchs(benchmark::State& state, OpPlan (*make_plan)()) {
  OpPlan plan = make_plan();
  fs::path dir = scratch("disk-all");
  CompileOptions o;
  {
    CompileCache cache(dir);
    o.cache = &cache;
    compile(plan, o);
  }
  for (auto _ : state) {
    CompileCache cache(dir);
    o.cache = &cache;
    CompiledImage image = compile(plan, o);
    for (const ArchImage& a : image.images)
      if (!a.cache_hit) state.SkipWithError("expected a cache hit");
    benchmark::DoNotOptimize(image);
  }
  fs::remove_all(dir);
}

OpPlan softmax_plan() {
  return plan_of("softmax");
}

int register_all() {
  for (const char* name : kExamples) {
    benchmark::RegisterBenchmark((std::string("ColdCompile/") + name).c_str(), BM_ColdCompile, name)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BareNvrtc/") + name).c_str(), BM_BareNvrtc, name)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("WarmDiskHit/") + name).c_str(), BM_WarmDiskHit, name)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("WarmMemoryHit/") + name).c_str(), BM_WarmMemoryHit,
                                 name)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("ColdCompile/softmax/default_archs", BM_ColdCompileDefaultArchs,
                               softmax_plan)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("WarmDiskHit/softmax/default_archs", BM_WarmDiskHitDefaultArchs,
                               softmax_plan)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("ColdCompile/cub_block_sum/default_archs",
                               BM_ColdCompileDefaultArchs, cub_plan)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  benchmark::RegisterBenchmark("WarmDiskHit/cub_block_sum/default_archs",
                               BM_WarmDiskHitDefaultArchs, cub_plan)
      ->Unit(benchmark::kMillisecond);
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
