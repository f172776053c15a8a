// Kernels as their authors wrote them: the kernel's own parameter order (params), shape edits,
// SymInt scalars, strided inputs, itemsize/stride/select/aligned in specs, and the errors each
// gives a careless spec or call. Everything here runs without a GPU.
#include <gtest/gtest.h>

#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/plan.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/spec_json.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

// A spec for "k(T* out, const T* x, long long stride, int rows, int cols)" with `extra` JSON
// fields replacing the defaults.
std::string spec(const std::string& extra = "") {
  return R"J({"op": "t::rows", "kernel_name": "k<T>",
    "kernel_source": "template <class T> __global__ void k(T* out, const T* x, long long s, int r, int c) {}",
    "type_params": [{"name": "T", "dtypes": ["float32", "float16"]}],
    "inputs": [{"name": "x", "dtype": "T", "strided": true}],
    "outputs": [{"name": "out", "shape": {"same_as": "x", "dims": {"-1": "dim(x, -1) // 2"}}}],
    "params": ["out", "x", {"expr": "stride(x, -2)", "int64": true},
               {"expr": "numel_except(x, -1)"}, {"expr": "dim(x, -1) // 2"}],
    "geometry": {"custom": {"grid": ["numel_except(x, -1)"],
                            "block": ["select(dim(x, -1) < 512, 128, 1024 // itemsize(x))"]}},
    "requires": ["stride(x, -1) == 1", "aligned(x, 16)", "dim(x, -1) % 2 == 0"])J" +
         extra + "}";
}

OpDecl parse(const std::string& text) {
  return parse_op_json(text, ".", "t.json");
}

std::string args_text(const OpPlan& p) {
  std::string out;
  for (const ArgSlot& a : p.args) out += (out.empty() ? "" : ", ") + p.c_type(a) + " " + a.name;
  return out;
}

TEST(AsWritten, ParamsGiveTheKernelsOwnOrder) {
  OpDecl d = parse(spec());
  EXPECT_EQ(parse(print_op_json(d)), d);  // JSON round trip, params and edits included
  OpPlan p = derive_plan(d);
  EXPECT_EQ(args_text(p),
            "T* out, const T* x, long long stride(x, -2), int numel_except(x, -1), int dim(x, -1) "
            "// 2");
  EXPECT_EQ(p.qualified_schema(), "t::rows(Tensor x) -> Tensor");
  EXPECT_EQ(shape_rule_text(p, p.outputs[0].shape), "like(x) with [-1] = dim(x, -1) // 2");
  EXPECT_TRUE(p.tensors[0].strided);
  CompileOptions o;
  o.archs = {"sm_90"};
  CompiledImage image = compile(p, o);  // the signature check follows the params order
  EXPECT_EQ(image.lowered_names.size(), 2u);
  // A package carries the order: the loaded plan is the compiled one, argument for argument.
  Package pkg = parse_package(write_package_bytes(image), "rows.kop");
  EXPECT_EQ(args_text(pkg.image.plan), args_text(image.plan));
  EXPECT_EQ(pkg.image.plan.args, image.plan.args);
  EXPECT_EQ(pkg.image.plan.outputs, image.plan.outputs);
  EXPECT_TRUE(pkg.image.plan.tensors[0].strided);
}

TEST(AsWritten, ParamsMistakesNameTheEntry) {
  auto bad = [](const std::string& params, const std::string& needle) {
    std::string text = spec();
    auto at = text.find("\"params\"");
    auto end = text.find("\"geometry\"");
    text = text.substr(0, at) + "\"params\": " + params + ",\n    " + text.substr(end);
    expect_error([&] { derive_plan(parse(text)); }, ErrorKind::Spec, needle);
  };
  bad(R"(["out", "x", "y"])",
      "op t::rows: params[2]: 'y' is not an input or output (known: x, out)");
  bad(R"(["x"])", "params: does not pass output 'out'; the kernel must receive every output");
  {  // an output through two parameters: a kernel that reads and writes one buffer
    std::string text = spec();
    auto at = text.find("\"params\"");
    auto end = text.find("\"geometry\"");
    text = text.substr(0, at) + R"("params": ["out", "x", "out"],)" + "\n    " + text.substr(end);
    EXPECT_EQ(derive_plan(parse(text)).args.size(), 3u);
  }
  expect_error([&] { derive_plan(parse(spec(R"(, "extras": [{"numel": "x"}])"))); },
               ErrorKind::Spec, "extras: cannot be combined with 'params'");
}

TEST(AsWritten, ExpressionsAreReadOnlyWhereTheyMeanSomething) {
  std::string aligned_shape = spec();
  aligned_shape.replace(aligned_shape.find("\"dim(x, -1) // 2\"}"), 18, "\"aligned(x, 16)\"}");
  expect_error([&] { derive_plan(parse(aligned_shape)); }, ErrorKind::Spec,
               "aligned() tests a data pointer, which only a requirement can read");
  std::string stride_shape = spec();
  stride_shape.replace(stride_shape.find("\"dim(x, -1) // 2\"}"), 18, "\"stride(x, 0)\"}");
  expect_error([&] { derive_plan(parse(stride_shape)); }, ErrorKind::Spec,
               "output shapes depend on input sizes, not strides");
  std::string dup = spec();
  dup.replace(dup.find(R"({"-1": "dim(x, -1) // 2"})"), 25, R"({"-1": "1", "-01": "2"})");
  expect_error([&] { derive_plan(parse(dup)); }, ErrorKind::Spec, "axis -1 is edited twice");
  expect_error(
      [&] {
        derive_plan(parse(R"({"op": "t::s", "kernel_name": "k", "kernel_source": "x",
          "inputs": [{"name": "x"}, {"name": "a", "scalar": "float", "symint": true}],
          "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
          "geometry": {"elementwise": {}}})"));
      },
      ErrorKind::Spec, "inputs[1].symint: scalar 'a' is float; only int and int64 scalars");
}

TEST(AsWritten, SymIntScalarsAreSymIntInTheSchema) {
  OpPlan p = derive_plan(parse(R"({"op": "t::s", "kernel_name": "k", "kernel_source": "x",
    "inputs": [{"name": "x"}, {"name": "n", "scalar": "int64", "symint": true}],
    "outputs": [{"name": "y", "shape": ["n"]}], "geometry": {"elementwise": {}}})"));
  EXPECT_EQ(p.qualified_schema(), "t::s(Tensor x, SymInt n) -> Tensor");
  EXPECT_EQ(p.c_type(p.args[1]), "long long");
}

// The runtime checks of a call, on fake pointers: requirements on strides and alignment, the
// edited output shape at every rank, and a strided input passing the contiguity check.
class AsWrittenRuntime : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CompileOptions o;
    o.archs = {"sm_90"};
    op_ = new KernelOp(compile(derive_plan(parse(spec())), o));
  }
  static void TearDownTestSuite() { delete op_; }
  static TensorView view(Shape shape, Shape strides, std::uintptr_t address,
                         DType dtype = DType::Float16) {
    TensorView t;
    t.data = reinterpret_cast<void*>(address);
    t.dtype = dtype;
    t.shape = shape;
    t.strides = strides;
    return t;
  }
  static KernelOp* op_;
};
KernelOp* AsWrittenRuntime::op_ = nullptr;

TEST_F(AsWrittenRuntime, EditedShapesAtAnyRank) {
  for (const auto& [in, out] : std::vector<std::pair<Shape, Shape>>{
           {{4, 8}, {4, 4}}, {{2, 3, 16}, {2, 3, 8}}, {{1, 2}, {1, 1}}}) {
    std::vector<TensorView> x = {view(in, {}, 0x1000)};
    EXPECT_EQ(op_->output_shapes(x).at(0), out) << in.to_string();
  }
}

TEST_F(AsWrittenRuntime, StridedViewsPassWhereTheRequirementsHold) {
  // A [4, 8] slice of a [4, 16] tensor: row stride 16, unit inner stride.
  std::vector<TensorView> slice = {view({4, 8}, {16, 1}, 0x1000)};
  EXPECT_EQ(op_->output_shapes(slice).at(0), (Shape{4, 4}));
  std::vector<TensorView> columns = {view({4, 8}, {1, 4}, 0x1000)};
  expect_error(
      [&] { op_->output_shapes(columns); }, ErrorKind::Launch,
      "op t::rows: the inputs break the requirement 'stride(x, -1) == 1': 4 == 1 is false");
}

TEST_F(AsWrittenRuntime, MisalignedPointersAreRefusedNamingThePointer) {
  std::vector<TensorView> off = {view({4, 8}, {}, 0x1002)};
  expect_error([&] { op_->output_shapes(off); }, ErrorKind::Launch,
               "the inputs break the requirement 'aligned(x, 16)'; x's data pointer 0x1002 is not "
               "16-byte aligned");
  std::vector<TensorView> odd = {view({4, 7}, {}, 0x1000)};
  expect_error([&] { op_->output_shapes(odd); }, ErrorKind::Launch,
               "'dim(x, -1) % 2 == 0': 1 == 0 is false");
}

TEST_F(AsWrittenRuntime, DtypeErrorsSayWhatTheInputAccepts) {
  std::vector<TensorView> f64 = {view({4, 8}, {}, 0x1000, DType::Float64)};
  expect_error([&] { op_->output_shapes(f64); }, ErrorKind::Type,
               "op t::rows: input 'x' must be float32, float16, got float64");
}

TEST(AsWrittenRequirements, UnevaluableRequirementsNameTheOpAndTheRequirement) {
  OpDecl d = parse(
      R"J({"op": "t::div", "kernel_name": "k", "kernel_source": "__global__ void k(const float* x, int n, float* y) {}",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "n", "scalar": "int"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "geometry": {"elementwise": {}}, "requires": ["numel(x) // n >= 1"]})J");
  CompileOptions o;
  o.archs = {"sm_90"};
  KernelOp op(compile(derive_plan(d), o));
  TensorView x;
  x.data = reinterpret_cast<void*>(0x1000);
  x.shape = {4};
  std::vector<TensorView> in = {x};
  std::vector<ScalarArg> zero = {ScalarArg::of_int(0)};
  expect_error([&] { op.output_shapes(in, zero); }, ErrorKind::Launch,
               "op t::div: the requirement 'numel(x) // n >= 1' cannot be evaluated for these "
               "inputs: expression 'numel(x) // n' divides by zero");
}

}  // namespace
}  // namespace kernelop
