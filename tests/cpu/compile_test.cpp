// The compile stage: architectures, options, errors with the full log, lowered names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/spec_json.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

OpDecl op(const std::string& source, const std::string& kernel = "k") {
  return testing::relu_like_op(source, kernel, "cmp::op");
}

const char* kKernel = R"(extern "C" __global__ void k(const float* x, int n, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * SCALE;
})";

CompileOptions no_cache(std::vector<std::string> archs) {
  CompileOptions o;
  o.archs = std::move(archs);
  o.use_cache = false;
  return o;
}

TEST(Compile, DefaultArchitectures) {
  EXPECT_EQ(default_archs(),
            (std::vector<std::string>{"sm_80", "sm_86", "sm_89", "sm_90", "compute_90"}));
  OpDecl d = op(kKernel);
  d.spec.defines = {"SCALE=2.0f"};
  CompileOptions o;
  o.use_cache = false;
  CompiledImage image = compile(derive_plan(d), o);
  ASSERT_EQ(image.images.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(image.images[i].arch, default_archs()[i]);
  EXPECT_NE(image.find("compute_90"), nullptr);
  EXPECT_EQ(image.find("sm_70"), nullptr);
}

TEST(Compile, CallerArchsOverrideSpecArchsOverrideDefault) {
  OpDecl d = op(kKernel);
  d.spec.defines = {"SCALE=2.0f"};
  d.spec.arch_override = {"sm_86"};
  CompileOptions o;
  o.use_cache = false;
  EXPECT_EQ(compile(derive_plan(d), o).images.at(0).arch, "sm_86");
  o.archs = {"compute_80"};
  CompiledImage image = compile(derive_plan(d), o);
  ASSERT_EQ(image.images.size(), 1u);
  EXPECT_TRUE(image.images[0].is_ptx());
  EXPECT_NE(image.images[0].data.find(".target sm_80"), std::string::npos);
}

TEST(Compile, InvalidOrDuplicateArchitecturesAreSpecErrors) {
  OpDecl d = op(kKernel);
  expect_error([&] { compile(derive_plan(d), no_cache({"sm90"})); }, ErrorKind::Spec,
               "op cmp::op: architecture 'sm90' is invalid");
  expect_error(
      [&] {
        compile(derive_plan(d), no_cache({"sm_90", "sm_90"}));
      },
      ErrorKind::Spec, "architecture 'sm_90' is listed twice");
}

TEST(Compile, CompileErrorCarriesOpStageArchAndFullLog) {
  OpDecl d = op(
      R"(extern "C" __global__ void k(const float* x, int n, float* y) { y[0] = undefined_thing; })");
  try {
    compile(derive_plan(d), no_cache({"sm_90"}));
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Compile);
    std::string what = e.what();
    EXPECT_NE(what.find("op cmp::op: NVRTC failed to compile kernel.cu for sm_90"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("identifier \"undefined_thing\" is undefined"), std::string::npos) << what;
    EXPECT_NE(what.find("--std=c++17"), std::string::npos) << what;
    EXPECT_EQ(e.context().op, "cmp::op");
    EXPECT_EQ(e.context().stage, "compile");
    EXPECT_EQ(e.context().arch, "sm_90");
    EXPECT_NE(e.context().log.find("undefined_thing"), std::string::npos);
    EXPECT_EQ(e.context().log.find("ptxas info"), std::string::npos);
  }
}

TEST(Compile, DefinesFastMathAndLineInfoReachNvrtc) {
  OpDecl d = op(kKernel);
  expect_error([&] { compile(derive_plan(d), no_cache({"sm_90"})); }, ErrorKind::Compile,
               "identifier \"SCALE\" is undefined");
  d.spec.defines = {"SCALE=2.0f"};
  d.spec.fast_math = true;
  CompileOptions o = no_cache({"sm_90"});
  o.line_info = true;
  o.defines = {"EXTRA=1"};
  CompiledImage image = compile(derive_plan(d), o);
  auto has = [&](const std::string& opt) {
    return std::find(image.options.begin(), image.options.end(), opt) != image.options.end();
  };
  EXPECT_TRUE(has("-DSCALE=2.0f"));
  EXPECT_TRUE(has("-DEXTRA=1"));
  EXPECT_TRUE(has("--use_fast_math"));
  EXPECT_TRUE(has("-lineinfo"));
  EXPECT_TRUE(has("--std=c++17"));
  o.fast_math = false;
  image = compile(derive_plan(d), o);
  EXPECT_FALSE(has("--use_fast_math"));
}

TEST(Compile, IncludePathsResolveAgainstTheSpecDirectory) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "kernelop-include-test";
  fs::create_directories(dir / "inc");
  std::ofstream(dir / "inc" / "scale.h") << "#define SCALE 3.0f\n";
  OpDecl d = op("#include \"scale.h\"\n" + std::string(kKernel));
  d.base_dir = dir.string();
  expect_error([&] { compile(derive_plan(d), no_cache({"sm_90"})); }, ErrorKind::Compile,
               "scale.h");
  d.spec.include_paths = {"inc"};
  EXPECT_NO_THROW(compile(derive_plan(d), no_cache({"sm_90"})));
  fs::remove_all(dir);
}

TEST(Compile, CppStandardIsPassed) {
  OpDecl d = op("#if __cplusplus < 202002L\n#error needs c++20\n#endif\n" + std::string(kKernel));
  d.spec.defines = {"SCALE=1.0f"};
  expect_error([&] { compile(derive_plan(d), no_cache({"sm_90"})); }, ErrorKind::Compile,
               "needs c++20");
  d.spec.compile_std = "c++20";
  EXPECT_NO_THROW(compile(derive_plan(d), no_cache({"sm_90"})));
}

// A dtype-generic source names no CUDA type: kernelop's instantiations (k<__half>,
// k<__nv_bfloat16>) get their headers pre-included; the source's own include of one is harmless.
TEST(Compile, TypeParametersBringTheHeadersOfTheirDtypes) {
  for (std::string include : {"", "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"}) {
    SCOPED_TRACE(include);
    OpDecl d = parse_op_json(R"json({
      "op": "t::generic", "kernel_name": "k<T>",
      "kernel_source": "template <class T> __global__ void k(const T* x, int n, T* y) { if (n) y[0] = x[0]; }",
      "type_params": [{"name": "T", "dtypes": ["float32", "float16", "bfloat16"]}],
      "inputs": [{"name": "x", "dtype": "T"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
      "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}})json",
                             "");
    d.spec.kernel_source = include + d.spec.kernel_source;
    CompiledImage image = compile(derive_plan(d), no_cache({"sm_90"}));
    EXPECT_EQ(image.lowered_names.size(), 3u);
  }
  // Without a type parameter nothing is pre-included: a float16 kernel includes its header.
  OpDecl plain = op("__global__ void k(const __half* x, int n, __half* y) {}");
  plain.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float16, false}};
  expect_error([&] { compile(derive_plan(plain), no_cache({"sm_90"})); }, ErrorKind::Compile,
               "__half");
}

TEST(Compile, LoweredNamesForExternCAndTemplates) {
  OpDecl d =
      op("template <class T, int N> __global__ void k(const T* x, int n, T* y) {}", "k<float, 4>");
  CompiledImage image = compile(derive_plan(d), no_cache({"sm_90"}));
  ASSERT_EQ(image.lowered_names.size(), 1u);
  EXPECT_EQ(image.lowered_names[0].rfind("_Z", 0), 0u) << image.lowered_names[0];
  EXPECT_NE(image.images[0].data.find(image.lowered_names[0]), std::string::npos);
}

TEST(Compile, WarningsAreKeptWithoutThePtxasReport) {
  OpDecl d =
      op(R"(extern "C" __global__ void k(const float* x, int n, float* y) { int unused = 3; })");
  CompiledImage image = compile(derive_plan(d), no_cache({"sm_90"}));
  EXPECT_NE(image.log.find("unused"), std::string::npos) << image.log;
  EXPECT_EQ(image.log.find("ptxas info"), std::string::npos) << image.log;
}

TEST(Compile, ParallelAndSerialCompilationAgree) {
  OpDecl d = op(kKernel);
  d.spec.defines = {"SCALE=2.0f"};
  CompileOptions serial = no_cache({"sm_80", "sm_86", "sm_90", "compute_90"});
  serial.jobs = 1;
  CompileOptions parallel = serial;
  parallel.jobs = 4;
  CompiledImage a = compile(derive_plan(d), serial), b = compile(derive_plan(d), parallel);
  ASSERT_EQ(a.images.size(), b.images.size());
  for (std::size_t i = 0; i < a.images.size(); ++i) {
    EXPECT_EQ(a.images[i].data, b.images[i].data) << a.images[i].arch;
    EXPECT_EQ(a.images[i].usage, b.images[i].usage);
  }
}

}  // namespace
}  // namespace kernelop

#include "compile/cubin_info.hpp"
#include "compile/resource_usage.hpp"

namespace kernelop {
namespace {

TEST(ResourceUsage, CubinAttributesAgreeWithThePtxasReport) {
  CompileOptions o;
  o.archs = {"sm_80", "sm_90"};
  o.use_cache = false;
  for (const char* name : {"rowsum", "relu_generic", "softmax"}) {
    CompiledImage image = compile(derive_plan(testing::example(name)), o);
    for (const ArchImage& a : image.images) {
      for (std::size_t i = 0; i < image.lowered_names.size(); ++i) {
        auto elf = detail::cubin_resource_usage(a.data, image.lowered_names[i]);
        ASSERT_TRUE(elf) << name << " " << a.arch;
        EXPECT_EQ(elf->registers, a.usage[i].registers) << name << " " << a.arch;
        EXPECT_EQ(elf->stack_frame, a.usage[i].stack_frame) << name << " " << a.arch;
      }
    }
  }
  EXPECT_FALSE(detail::cubin_resource_usage("not an elf", "k"));
  EXPECT_FALSE(detail::cubin_resource_usage(std::string("\x7f"
                                                        "ELF\x02",
                                                        5) +
                                                std::string(100, '\xff'),
                                            "k"));
}

TEST(ResourceUsage, ReportIsReadPerArchitecture) {
  std::string log =
      "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 1024 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 1 barriers\n";
  auto a = detail::parse_resource_usage(log, "k", "sm_80");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->registers, 40);
  EXPECT_EQ(a->spill_stores, 4);
  EXPECT_EQ(a->static_shared, 1024);
  EXPECT_EQ(a->const_bytes, 368);
  auto b = detail::parse_resource_usage(log, "k", "sm_90");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->registers, 12);
  EXPECT_EQ(b->static_shared, 0);
  EXPECT_FALSE(detail::parse_resource_usage(log, "k", "sm_86"));
  EXPECT_FALSE(detail::parse_resource_usage(log, "other", "sm_80"));
}

}  // namespace
}  // namespace kernelop
