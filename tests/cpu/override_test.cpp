// The override path (cuda_kernel_op's meta_fn / eager_fn): which spec fields become optional,
// the plans that result, the kernel's own parameters adopted when the convention is incomplete,
// outputs shaped by the meta function, and the checks of launch() and launch_raw() before any
// driver is involved.
#include <gtest/gtest.h>

#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

constexpr ValidateOptions kMeta{true, false, 0};
constexpr ValidateOptions kEager{false, true, 0};
constexpr ValidateOptions kBoth{true, true, 0};

std::string args(const OpPlan& p) {
  std::string out;
  for (const auto& a : p.args) out += (out.empty() ? "" : ", ") + p.c_type(a) + " " + a.name;
  return out;
}

// repeat2 with its outputs left to a meta function: [R, C] -> [R, 2C].
OpDecl repeat2_without_outputs() {
  OpDecl d = testing::example("repeat2");
  d.spec.outputs.reset();
  d.spec.extras = {DimSize{"x", 1, false}, Numel{"out0", false}};
  return d;
}

CompiledImage compiled(const OpPlan& plan) {
  CompileOptions o;
  o.archs = {"sm_90"};
  return compile(plan, o);
}

TEST(Override, MissingFieldsNeedTheirFunction) {
  OpDecl no_outputs = testing::example("relu");
  no_outputs.spec.outputs.reset();
  expect_error([&] { derive_plan(no_outputs); }, ErrorKind::Spec,
               "op kernelop_examples::relu: outputs: missing; required unless meta_fn is given");
  OpDecl no_geometry = testing::example("relu");
  no_geometry.spec.geometry.reset();
  expect_error([&] { derive_plan(no_geometry); }, ErrorKind::Spec,
               "geometry: missing; required unless eager_fn is given");
  OpDecl no_inputs = testing::example("relu");
  no_inputs.spec.inputs.reset();
  expect_error([&] { derive_plan(no_inputs, kMeta); }, ErrorKind::Spec,
               "inputs: missing; required unless both meta_fn and eager_fn are given");
  // Fields that would be silently ignored are errors.
  expect_error([&] { derive_plan(no_inputs, kBoth); }, ErrorKind::Spec,
               "inputs: missing, so 'outputs' cannot be used (it refers to the inputs)");
  OpDecl eager_no_outputs = testing::example("relu");
  eager_no_outputs.spec.outputs.reset();
  expect_error([&] { derive_plan(eager_no_outputs, kBoth); }, ErrorKind::Spec,
               "outputs: missing, so 'extras' cannot be used: the eager_fn launches the kernel");
}

TEST(Override, MetaOutputsAreCountedNamedAndChecked) {
  OpPlan p = derive_plan(repeat2_without_outputs(), ValidateOptions{true, false, 1});
  EXPECT_EQ(p.schema, "(Tensor x) -> Tensor");
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.outputs[0].shape.kind, ShapeRule::Kind::External);
  EXPECT_EQ(shape_rule_text(p, p.outputs[0].shape), "meta_fn");
  EXPECT_EQ(args(p), "const float* x, int dim(x, 1), int numel(out0), ?* out0");
  EXPECT_EQ(p.geometry->grid[0].to_string(), "cdiv(numel(out0), 256)");
  EXPECT_FALSE(p.is_declarative());
  OpPlan two = derive_plan(repeat2_without_outputs(), ValidateOptions{true, false, 2});
  EXPECT_EQ(two.schema, "(Tensor x) -> (Tensor, Tensor)");

  expect_error(
      [&] {
        derive_plan(testing::example("relu"), ValidateOptions{true, false, 1});
      },
      ErrorKind::Spec, "outputs: meta_outputs = 1 is only for a meta_fn that replaces");
  expect_error(
      [&] {
        derive_plan(repeat2_without_outputs(), ValidateOptions{false, false, 1});
      },
      ErrorKind::Spec, "meta_outputs = 1 is only for a meta_fn");
  OpDecl clash = repeat2_without_outputs();
  std::get<InputDecl>((*clash.spec.inputs)[0]).name = "out0";
  clash.spec.extras.clear();
  expect_error(
      [&] {
        derive_plan(clash, ValidateOptions{true, false, 1});
      },
      ErrorKind::Spec, "the meta_fn's output 0 is named 'out0', which an input already uses");
  OpDecl no_over = repeat2_without_outputs();
  no_over.spec.extras.clear();
  expect_error([&] { derive_plan(no_over, kMeta); }, ErrorKind::Spec,
               "geometry.elementwise.over: missing; Elementwise iterates over output 0");
}

TEST(Override, TheOutputDtypeComesFromTheKernelsSignature) {
  CompiledImage image = compiled(derive_plan(repeat2_without_outputs(), {true, false, 1}));
  EXPECT_EQ(args(image.plan), "const float* x, int dim(x, 1), int numel(out0), float* out0");
  KernelOp op(std::move(image));
  TensorView x{reinterpret_cast<void*>(256), DType::Float32, Shape({3, 4}), {}, 0};
  EXPECT_EQ(op.output_dtypes(std::span(&x, 1)), std::vector<DType>{DType::Float32});
  expect_error([&] { op.output_shapes(std::span(&x, 1)); }, ErrorKind::Spec,
               "gets the shape of output 'out0' from its meta_fn");
  // launch() takes the meta function's shape and checks the dtype the kernel fixes.
  TensorView y{reinterpret_cast<void*>(512), DType::Float16, Shape({3, 8}), {}, 0};
  expect_error([&] { op.launch(std::span(&x, 1), {}, std::span(&y, 1), nullptr); }, ErrorKind::Type,
               "output 'out0' must be float32, got float16");
}

TEST(Override, WithoutInputsTheKernelsParametersAreAdopted) {
  OpDecl d;
  d.op_name = "test::mixed";
  d.spec.kernel_name = "mixed";
  d.spec.kernel_source =
      "#include <cuda_fp16.h>\nextern \"C\" __global__ void mixed(const float* a, __half* b, int "
      "n, unsigned m, "
      "long long k, float s, double t, bool f, float4* v) {}";
  CompiledImage image = compiled(derive_plan(d, kBoth));
  EXPECT_TRUE(image.plan.args_from_kernel);
  EXPECT_EQ(args(image.plan),
            "const float* param0, __half* param1, int param2, int param3, long long param4, "
            "float param5, double param6, bool param7, ?* param8");
  KernelOp op(std::move(image));
  TensorView x{nullptr, DType::Float32, Shape({3}), {}, 0};
  expect_error([&] { op.launch(std::span(&x, 1), {}, {}, nullptr); }, ErrorKind::Spec,
               "op test::mixed declares no inputs; its eager_fn launches it (launch_raw)");
  expect_error([&] { op.output_dtypes(std::span(&x, 1)); }, ErrorKind::Spec,
               "declares no inputs; its meta_fn gives dtypes");

  d.spec.kernel_source = "extern \"C\" __global__ void mixed(const float* a, short s) {}";
  expect_error([&] { compiled(derive_plan(d, kBoth)); }, ErrorKind::Compile,
               "parameter 1 is 'short'; kernelop passes pointers, int, unsigned, long long, float, "
               "double and bool");
  d.spec.kernel_source = "template <typename T> __global__ void g(const T* a) {}";
  d.spec.kernel_name = "g<T>";
  d.spec.type_params = {TypeParam{"T", {DType::Float32, DType::Float16}}};
  expect_error([&] { compiled(derive_plan(d, kBoth)); }, ErrorKind::Compile,
               "a kernel without declared inputs is instantiated once");
}

TEST(Override, EagerWithoutOutputsAdoptsTooAndNeedsNoGeometry) {
  OpDecl d = testing::example("repeat2");
  d.spec.outputs.reset();
  d.spec.extras.clear();
  d.spec.geometry.reset();
  CompiledImage image = compiled(derive_plan(d, kBoth));
  EXPECT_EQ(args(image.plan), "const float* param0, int param1, int param2, float* param3");

  OpDecl no_geometry = testing::example("relu");
  no_geometry.spec.geometry.reset();
  KernelOp op(compiled(derive_plan(no_geometry, kEager)));
  EXPECT_EQ(args(op.plan()), "const float* x, int numel(x), float* y");
  TensorView x{nullptr, DType::Float32, Shape({3}), {}, 0};
  EXPECT_EQ(op.output_shapes(std::span(&x, 1))[0], Shape({3}));  // the Meta kernel still works
  expect_error([&] { op.launch(std::span(&x, 1), {}, std::span(&x, 1), nullptr); }, ErrorKind::Spec,
               "has no launch geometry; its eager_fn launches it (launch_raw)");
}

TEST(Override, RawLaunchChecksEveryArgumentBeforeTheDriver) {
  KernelOp op(compiled(derive_plan(testing::example("relu"))));
  TensorView x{reinterpret_cast<void*>(256), DType::Float32, Shape({8}), {}, 0};
  auto raw = [&](std::vector<RawArg> a, LaunchDims dims = {{1, 1, 1}, {32, 1, 1}, 0}) {
    op.launch_raw(dims, a, nullptr);
  };
  expect_error([&] { raw({RawArg::of_tensor(x)}); }, ErrorKind::Type,
               "the kernel takes 3 argument(s) (const float* x, int numel(x), float* y), got 1");
  TensorView h = x;
  h.dtype = DType::Float16;
  auto n = RawArg::of_scalar(ScalarArg::of_int(8));
  expect_error(
      [&] {
        raw({RawArg::of_tensor(h), n, RawArg::of_tensor(x)});
      },
      ErrorKind::Type, "argument 0 ('x', const float*) must be float32, got float16");
  expect_error(
      [&] {
        raw({n, n, RawArg::of_tensor(x)});
      },
      ErrorKind::Type, "argument 0 ('x', const float*) must be a tensor, got int");
  expect_error(
      [&] {
        raw({RawArg::of_tensor(x), RawArg::of_tensor(x), RawArg::of_tensor(x)});
      },
      ErrorKind::Type, "argument 1 ('numel(x)', int) is passed by value, got a tensor");
  expect_error(
      [&] {
        raw({RawArg::of_tensor(x), RawArg::of_scalar(ScalarArg::of_float(8)),
             RawArg::of_tensor(x)});
      },
      ErrorKind::Type, "argument 1 ('numel(x)', int) must be an int, got float");
  expect_error(
      [&] {
        raw({RawArg::of_tensor(x), RawArg::of_scalar(ScalarArg::of_int(1LL << 31)),
             RawArg::of_tensor(x)});
      },
      ErrorKind::Launch, "argument 1 ('numel(x)', int) = 2147483648 does not fit");
  TensorView other = x;
  other.device = 1;
  expect_error(
      [&] {
        raw({RawArg::of_tensor(x), n, RawArg::of_tensor(other)});
      },
      ErrorKind::Launch,
      "argument 2 ('y', float*) is on device 1 but argument 0 ('x', const float*) is on "
      "device 0; all tensors must be on one device");
  TensorView strided = x;
  strided.shape = Shape({2, 4});
  strided.strides = Shape({1, 2});
  expect_error(
      [&] {
        raw({RawArg::of_tensor(x), n, RawArg::of_tensor(strided)});
      },
      ErrorKind::Launch, "argument 2 ('y', float*) is not contiguous");
  std::vector<RawArg> ok = {RawArg::of_tensor(x), n, RawArg::of_tensor(x)};
  expect_error(
      [&] {
        raw(ok, {{0, 1, 1}, {32, 1, 1}, 0});
      },
      ErrorKind::Launch, "grid x = 0; CUDA allows 1..2147483647");
  expect_error(
      [&] {
        raw(ok, {{1, 70000, 1}, {32, 1, 1}, 0});
      },
      ErrorKind::Launch, "grid y = 70000; CUDA allows 1..65535");
  expect_error(
      [&] {
        raw(ok, {{1, 1, 1}, {2048, 1, 1}, 0});
      },
      ErrorKind::Launch, "block x = 2048; CUDA allows 1..1024");
  // One table of CUDA limits: block z is at most 64 here as in validation (launch_raw once
  // took 1024).
  expect_error(
      [&] {
        raw(ok, {{1, 1, 1}, {1, 1, 128}, 0});
      },
      ErrorKind::Launch, "block z = 128; CUDA allows 1..64");
  expect_error(
      [&] {
        raw(ok, {{1, 1, 1}, {64, 32, 1}, 0});
      },
      ErrorKind::Launch, "a block of 64 x 32 x 1 = 2048 threads; CUDA allows at most 1024");
  expect_error(
      [&] {
        raw(ok, {{1, 1, 1}, {32, 1, 1}, -1});
      },
      ErrorKind::Launch, "shared memory -1 is out of range");
  expect_error(
      [&] {
        op.launch_raw({{1, 1, 1}, {32, 1, 1}, 0}, ok, nullptr, 3);
      },
      ErrorKind::Launch, "the tensors are on device 0 but the launch asks for device 3");
}

TEST(Override, PtxWithoutASpecAdoptsTheEntrysParameters) {
  CompileOptions o;
  o.archs = {"compute_80"};
  std::string ptx = compile(derive_plan(testing::example("scale")), o).images.at(0).data;
  OpDecl d;
  d.op_name = "test::scale_ptx";
  d.spec.kernel_name = "scale";
  d.spec.kernel_source = ptx;  // what ptx_op stores: packages carry the PTX as the source
  CompiledImage image = image_from_ptx(derive_plan(d, kBoth), ptx, "scale");
  EXPECT_EQ(args(image.plan), "?* param0, float param1, int param2, ?* param3");
}

TEST(Override, OnlyDeclarativeOpsGoInPackages) {
  OpDecl no_geometry = testing::example("relu");
  no_geometry.spec.geometry.reset();
  CompiledImage image = compiled(derive_plan(no_geometry, kEager));
  expect_error([&] { write_package_bytes(image); }, ErrorKind::Spec,
               "only declarative ops go in packages");
}

}  // namespace
}  // namespace kernelop
