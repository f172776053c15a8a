// Ops from pre-compiled PTX (ptx_op): the entry and its parameters are checked against the
// calling convention; nothing is inferred.
#include <gtest/gtest.h>

#include "kernelop/compile.hpp"
#include "kernelop/runtime.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

std::string relu_ptx() {
  CompileOptions o;
  o.archs = {"compute_80"};
  return compile(derive_plan(testing::example("relu")), o).images.at(0).data;
}

TEST(Ptx, ImageFromPtxChecksTheEntry) {
  std::string ptx = relu_ptx();
  CompiledImage image = image_from_ptx(derive_plan(testing::example("relu")), ptx, "relu");
  ASSERT_EQ(image.images.size(), 1u);
  EXPECT_EQ(image.images[0].arch, "compute_80");
  EXPECT_EQ(image.lowered_names, std::vector<std::string>{"relu"});
  KernelOp op(std::move(image));  // launchable: JIT-compiled by the driver on first use
  EXPECT_EQ(op.plan().qualified_schema(), "kernelop_examples::relu(Tensor x) -> Tensor");
}

TEST(Ptx, MismatchesAreNamed) {
  std::string ptx = relu_ptx();
  expect_error([&] { image_from_ptx(derive_plan(testing::example("relu")), ptx, "rleu"); },
               ErrorKind::Spec,
               "op kernelop_examples::relu: PTX entry 'rleu': no such .entry in the PTX");
  OpDecl wide = testing::example("relu");
  wide.spec.extras = {Numel{"x", true}};
  expect_error(
      [&] { image_from_ptx(derive_plan(wide), ptx, "relu"); }, ErrorKind::Compile,
      "parameter 1 is 32-bit but the calling convention passes 'numel(x)' as long long (64-bit)");
  OpDecl fewer = testing::example("relu");
  fewer.spec.extras = {};
  expect_error([&] { image_from_ptx(derive_plan(fewer), ptx, "relu"); }, ErrorKind::Compile,
               "takes 3 parameter(s) but the calling convention passes 2");
  OpDecl untyped = testing::example("relu");
  std::get<InputDecl>((*untyped.spec.inputs)[0]).dtype.reset();
  expect_error([&] { image_from_ptx(derive_plan(untyped), ptx, "relu"); }, ErrorKind::Spec,
               "'x' needs a declared dtype: nothing can be inferred from PTX");
  expect_error([&] { image_from_ptx(derive_plan(testing::example("relu")), "// nothing", "relu"); },
               ErrorKind::Spec, "the PTX has no .target line");
}

}  // namespace
}  // namespace kernelop
