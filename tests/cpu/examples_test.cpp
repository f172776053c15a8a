// Every example compiles with NVRTC for sm_80 and sm_90 (plus PTX), with its calling
// convention verified and resources reported.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "compile/cubin_info.hpp"
#include "core/ptx_entry.hpp"
#include "kernelop/compile.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

// Bytes of a parameter type as ptx_entry_param_types and cubin_entry write them (".u64",
// ".b8[24] .align 8"); 0 when unknown.
int byte_size(const std::string& type) {
  std::size_t open = type.find('[');
  std::string scalar = type.substr(0, open);
  int bits = scalar.size() > 2 ? std::atoi(scalar.c_str() + 2) : 0;
  if (open == std::string::npos) return bits / 8;
  return bits / 8 * std::atoi(type.c_str() + open + 1);
}

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(testing::examples_dir())) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ExampleCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleCompiles, ForSm80AndSm90) {
  OpPlan plan = derive_plan(testing::example(GetParam()));
  CompileOptions options;
  options.archs = {"sm_80", "sm_90", "compute_90"};
  options.use_cache = false;
  CompiledImage image = compile(plan, options);
  // Three images per compilation (configs that differ in a define are compiled apart).
  ASSERT_EQ(image.images.size(), 3u * plan.programs.size());
  ASSERT_EQ(image.lowered_names.size(), plan.instances.size());
  for (const ArchImage& a : image.images) {
    SCOPED_TRACE(a.arch + " program " + std::to_string(a.program));
    EXPECT_FALSE(a.cache_hit);
    std::vector<int> members = plan.instances_of(a.program);
    ASSERT_FALSE(members.empty());
    if (a.is_ptx()) {
      EXPECT_NE(a.data.find(".target sm_90"), std::string::npos);
      for (int i : members) {
        const std::string& name = image.lowered_names[static_cast<std::size_t>(i)];
        EXPECT_NE(a.data.find(".entry " + name), std::string::npos) << name;
      }
      EXPECT_TRUE(a.usage.empty());
    } else {
      EXPECT_EQ(a.data.substr(0, 4),
                "\x7f"
                "ELF");
      ASSERT_EQ(a.usage.size(), members.size());
      for (const auto& u : a.usage) EXPECT_GT(u.registers, 0);
      // The CUBIN's own parameter records (what images without PTX, cuTile's, are checked
      // against) agree with the PTX it was assembled from.
      const ArchImage* ptx = nullptr;
      for (const ArchImage& p : image.images) {
        if (p.is_ptx() && p.program == a.program) ptx = &p;
      }
      ASSERT_NE(ptx, nullptr);
      for (int i : members) {
        const std::string& name = image.lowered_names[static_cast<std::size_t>(i)];
        auto from_cubin = detail::cubin_entry(a.data, name);
        auto from_ptx = detail::ptx_entry_param_types(ptx->data, name);
        ASSERT_TRUE(from_cubin && from_ptx) << name;
        ASSERT_EQ(from_cubin->param_types.size(), from_ptx->size()) << name;
        for (std::size_t k = 0; k < from_ptx->size(); ++k) {
          EXPECT_EQ(byte_size(from_cubin->param_types[k]), byte_size((*from_ptx)[k]))
              << name << " parameter " << k << ": " << from_cubin->param_types[k] << " vs "
              << (*from_ptx)[k];
        }
      }
    }
  }
  EXPECT_EQ(image.log, "") << "examples compile without warnings";
  // Every tensor's dtype is known after compilation (declared, bound or inferred).
  for (const auto& arg : image.plan.args) {
    if (arg.is_pointer()) {
      EXPECT_TRUE(image.plan.element(arg).has_value()) << arg.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleCompiles, ::testing::ValuesIn(example_names()),
                         [](const auto& param_info) { return param_info.param; });

TEST(Examples, AllKernelsArePresent) {
  std::vector<std::string> expected = {"add",     "bias_add_2d", "cache_scatter",  "cluster_rowsum",
                                       "colsum",  "gemm_tiled",  "relu",           "relu_generic",
                                       "repeat2", "rowsum",      "rowsum_keepdim", "scale",
                                       "sigmoid", "sin_cos",     "softmax",        "softmax_tuned"};
  EXPECT_EQ(example_names(), expected);
}

TEST(Examples, ReductionsReportTheirStaticSharedMemory) {
  CompileOptions options;
  options.archs = {"sm_90"};
  options.use_cache = false;
  for (const char* name : {"rowsum", "softmax"}) {
    CompiledImage image = compile(derive_plan(testing::example(name)), options);
    EXPECT_EQ(image.images[0].usage[0].static_shared, 256 * 4) << name;
  }
}

}  // namespace
}  // namespace kernelop
