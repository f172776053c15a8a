// validate(): one test per error it can raise (kind, field path and message), plus what it accepts.
#include "kernelop/validate.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

InputDecl tensor(const std::string& name, std::optional<DTypeDecl> dtype = std::nullopt) {
  InputDecl t;
  t.name = name;
  t.dtype = std::move(dtype);
  return t;
}
ScalarInput scalar(const std::string& name, ScalarType type) {
  return ScalarInput{.name = name, .type = type};
}
OutputDecl output(const std::string& name, ShapeRel shape) {
  OutputDecl o;
  o.name = name;
  o.shape = std::move(shape);
  return o;
}
Elementwise elementwise(std::vector<std::int64_t> block, Layout layout = Layout::Flat,
                        std::optional<std::string> over = std::nullopt) {
  Elementwise g;
  g.block = std::move(block);
  g.layout = layout;
  g.over = std::move(over);
  return g;
}
Reduction reduction(std::vector<std::int64_t> reduce_dims, std::int64_t block_size = 256,
                    std::optional<Expr> shared_mem = std::nullopt) {
  Reduction g;
  g.reduce_dims = std::move(reduce_dims);
  g.block_size = block_size;
  g.shared_mem = std::move(shared_mem);
  return g;
}

// A small valid op: relu(x: float32) -> y same_as x, extras [numel(x)], elementwise flat 256.
OpDecl relu_decl() {
  OpDecl d;
  d.op_name = "test::relu";
  d.spec.kernel_source = "extern \"C\" __global__ void relu(const float* x, int n, float* y) {}\n";
  d.spec.kernel_name = "relu";
  d.spec.inputs = std::vector<Input>{tensor("x", DType::Float32)};
  d.spec.outputs = std::vector<OutputDecl>{output("y", SameAs{"x", {}})};
  d.spec.extras = {Numel{.input = "x"}};
  d.spec.geometry = elementwise({256}, Layout::Flat);
  return d;
}

// Expects validate(d, options) to throw Error(Spec) whose message contains `needle`.
void expect_invalid(const OpDecl& d, const std::string& needle, ValidateOptions options = {}) {
  expect_error([&] { validate(d, options); }, ErrorKind::Spec, needle);
}

TEST(ValidateTest, BaseDeclIsValid) {
  EXPECT_NO_THROW(validate(relu_decl()));
  EXPECT_NO_THROW(validate(relu_decl(), {.has_meta_fn = true, .has_eager_fn = true}));
}

TEST(ValidateTest, ErrorCarriesContext) {
  OpDecl d = relu_decl();
  d.spec.compile_std = "c++03";
  try {
    validate(d);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Spec);
    EXPECT_EQ(e.context().op, "test::relu");
    EXPECT_EQ(e.context().kernel, "relu");
    EXPECT_EQ(e.context().stage, "validate");
    EXPECT_EQ(e.message(),
              "op test::relu: compile_std: 'c++03' is not supported; expected c++11, c++14, "
              "c++17 or c++20");
  }
}

// --- op name and kernel ---------------------------------------------------------------------

TEST(ValidateTest, OpNameWithoutNamespace) {
  OpDecl d = relu_decl();
  d.op_name = "relu";
  expect_invalid(d,
                 "op name 'relu' is invalid: expected 'namespace::name' where both parts are "
                 "identifiers");
}

TEST(ValidateTest, OpNameWithNonIdentifierParts) {
  for (std::string name : {"1ns::relu", "ns::1relu", "::relu", "ns::", "n-s::relu", "ns::re lu",
                           "ns::relu::x", "ns:relu", ""}) {
    SCOPED_TRACE(name);
    OpDecl d = relu_decl();
    d.op_name = name;
    expect_invalid(d, "op name '" + name + "' is invalid");
  }
}

TEST(ValidateTest, OpNameWithReservedPart) {
  OpDecl d = relu_decl();
  d.op_name = "test::int";
  expect_invalid(d, "op name 'test::int': 'int' is a reserved name");
  d.op_name = "lambda::relu";
  expect_invalid(d, "op name 'lambda::relu': 'lambda' is a reserved name");
  d.op_name = "__kop::relu";
  expect_invalid(d, "op name '__kop::relu': '__kop' is a reserved name");
}

TEST(ValidateTest, EmptyKernelSource) {
  for (std::string source : {"", " \n\t\r\n"}) {
    OpDecl d = relu_decl();
    d.spec.kernel_source = source;
    expect_invalid(d, "op test::relu: kernel_source: is empty; expected CUDA C++ source text");
  }
}

TEST(ValidateTest, BadKernelName) {
  for (std::string name : {"", "1relu", "relu(", "relu<T", "relu-x", "ns::", "re lu"}) {
    SCOPED_TRACE(name);
    OpDecl d = relu_decl();
    d.spec.kernel_name = name;
    expect_invalid(d, "op test::relu: kernel_name: '" + name +
                          "' is not a kernel name; expected an identifier, optionally qualified "
                          "and with template arguments");
  }
}

TEST(ValidateTest, GoodKernelNames) {
  for (std::string name : {"relu", "ns::relu", "a::b::relu", "rowsum<256>", "relu<float, 4>"}) {
    SCOPED_TRACE(name);
    OpDecl d = relu_decl();
    d.spec.kernel_name = name;
    EXPECT_NO_THROW(validate(d));
  }
}

// --- required sections ----------------------------------------------------------------------

TEST(ValidateTest, InputsMissing) {
  OpDecl d = relu_decl();
  d.spec.inputs.reset();
  const std::string msg =
      "op test::relu: inputs: missing; required unless both meta_fn and eager_fn are given";
  expect_invalid(d, msg);
  expect_invalid(d, msg, {.has_meta_fn = true});
  expect_invalid(d, msg, {.has_eager_fn = true});
}

TEST(ValidateTest, InputsMayBeMissingWithMetaAndEagerFn) {
  OpDecl d = relu_decl();
  d.spec.inputs.reset();
  d.spec.outputs.reset();
  d.spec.extras.clear();
  d.spec.geometry.reset();
  EXPECT_NO_THROW(validate(d, {.has_meta_fn = true, .has_eager_fn = true}));
}

TEST(ValidateTest, OutputsMissing) {
  OpDecl d = relu_decl();
  d.spec.outputs.reset();
  expect_invalid(d, "op test::relu: outputs: missing; required unless meta_fn is given");
  expect_invalid(d, "outputs: missing", {.has_eager_fn = true});
}

TEST(ValidateTest, OutputsMayBeMissingWithMetaFn) {
  OpDecl d = relu_decl();
  d.spec.outputs.reset();
  d.spec.geometry = elementwise({256}, Layout::Flat, "x");
  EXPECT_NO_THROW(validate(d, {.has_meta_fn = true}));
  // Without outputs, Elementwise has nothing to iterate over unless `over` names a tensor.
  d.spec.geometry = Elementwise{};
  expect_invalid(d, "op test::relu: geometry.elementwise.over: missing", {.has_meta_fn = true});
}

TEST(ValidateTest, GeometryMissing) {
  OpDecl d = relu_decl();
  d.spec.geometry.reset();
  expect_invalid(d, "op test::relu: geometry: missing; required unless eager_fn is given");
  expect_invalid(d, "geometry: missing", {.has_meta_fn = true});
  EXPECT_NO_THROW(validate(d, {.has_eager_fn = true}));
}

// --- inputs ---------------------------------------------------------------------------------

TEST(ValidateTest, NoTensorInput) {
  OpDecl d = relu_decl();
  d.spec.inputs = std::vector<Input>{scalar("a", ScalarType::Float), scalar("n", ScalarType::Int)};
  expect_invalid(d,
                 "op test::relu: inputs: has no tensor input (found 2 scalar input(s)); a kernel "
                 "op needs at least one tensor input");
  d.spec.inputs = std::vector<Input>{};
  expect_invalid(d, "op test::relu: inputs: has no tensor input (found 0 scalar input(s))");
}

TEST(ValidateTest, DuplicateInputName) {
  OpDecl d = relu_decl();
  d.spec.inputs = std::vector<Input>{tensor("x"), tensor("w"), tensor("x")};
  expect_invalid(d, "op test::relu: inputs[2].name: duplicate input name 'x'");
  d.spec.inputs = std::vector<Input>{tensor("x"), scalar("x", ScalarType::Int)};
  expect_invalid(d, "op test::relu: inputs[1].name: duplicate input name 'x'");
}

TEST(ValidateTest, OutputNamedLikeInput) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].name = "x";
  expect_invalid(d,
                 "op test::relu: outputs[0].name: duplicate name 'x' (input and output names "
                 "must be unique)");
}

TEST(ValidateTest, DuplicateOutputName) {
  OpDecl d = relu_decl();
  d.spec.outputs->push_back(output("y", SameAs{"x", {}}));
  expect_invalid(d, "op test::relu: outputs[1].name: duplicate name 'y'");
}

TEST(ValidateTest, NonIdentifierNames) {
  for (std::string name : {"", "1x", "x-y", "x y", "x.y", "ü"}) {
    SCOPED_TRACE(name);
    OpDecl d = relu_decl();
    d.spec.inputs = std::vector<Input>{tensor("x"), tensor(name)};
    expect_invalid(d, "op test::relu: inputs[1].name: '" + name +
                          "' is not an identifier (letters, digits, '_', not starting with a "
                          "digit)");
    d = relu_decl();
    d.spec.inputs->push_back(scalar(name, ScalarType::Int));
    expect_invalid(d, "inputs[1].name: '" + name + "' is not an identifier");
    d = relu_decl();
    (*d.spec.outputs)[0].name = name;
    expect_invalid(d, "op test::relu: outputs[0].name: '" + name + "' is not an identifier");
  }
}

TEST(ValidateTest, ReservedNames) {
  for (std::string name : {"int", "lambda", "Tensor", "__x", "numel", "_X", "None", "dim"}) {
    SCOPED_TRACE(name);
    OpDecl d = relu_decl();
    d.spec.inputs = std::vector<Input>{tensor(name)};
    expect_invalid(d, "op test::relu: inputs[0].name: '" + name + "' is a reserved name");
    d = relu_decl();
    (*d.spec.outputs)[0].name = name;
    expect_invalid(d, "op test::relu: outputs[0].name: '" + name + "' is a reserved name");
  }
}

TEST(ValidateTest, InputDtypeNamingUnknownTypeParam) {
  OpDecl d = relu_decl();
  d.spec.inputs = std::vector<Input>{tensor("x", std::string("T"))};
  expect_invalid(d,
                 "op test::relu: inputs[0].dtype: 'T' is neither a dtype nor a type parameter "
                 "(type parameters: none)");
}

// --- output shapes --------------------------------------------------------------------------

TEST(ValidateTest, SameAsIndexOutOfRange) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].shape = SameAs{std::int64_t{-1}};
  expect_invalid(d,
                 "op test::relu: outputs[0].shape.same_as: index -1 is out of range; expected 0 <= "
                 "index < 1 (tensor inputs: x)");
  // Indices count tensor inputs only: with inputs (x, s, w) index 1 is w and 2 is out of range.
  d.spec.inputs = std::vector<Input>{tensor("x"), scalar("s", ScalarType::Float), tensor("w")};
  (*d.spec.outputs)[0].shape = SameAs{std::int64_t{1}, {}};
  EXPECT_NO_THROW(validate(d));
  (*d.spec.outputs)[0].shape = SameAs{std::int64_t{2}};
  expect_invalid(d,
                 "op test::relu: outputs[0].shape.same_as: index 2 is out of range; expected 0 <= "
                 "index < 2 (tensor inputs: x, w)");
}

TEST(ValidateTest, ReduceDimsIndexOutOfRange) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].shape = ReduceDims{.input = std::int64_t{1}, .dims = {0}};
  expect_invalid(
      d,
      "op test::relu: outputs[0].shape.reduce_dims.input: index 1 is out of range; expected 0 <= "
      "index < 1 (tensor inputs: x)");
}

TEST(ValidateTest, ShapeInputNamingScalar) {
  OpDecl d = relu_decl();
  d.spec.inputs->push_back(scalar("s", ScalarType::Int));
  (*d.spec.outputs)[0].shape = SameAs{"s"};
  expect_invalid(d,
                 "op test::relu: outputs[0].shape.same_as: 's' is a scalar input; expected a "
                 "tensor input (x)");
  (*d.spec.outputs)[0].shape = ReduceDims{.input = "s", .dims = {0}};
  expect_invalid(
      d,
      "op test::relu: outputs[0].shape.reduce_dims.input: 's' is a scalar input; expected a "
      "tensor input (x)");
}

TEST(ValidateTest, ShapeInputNamingUnknownTensor) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].shape = SameAs{"q"};
  expect_invalid(d,
                 "op test::relu: outputs[0].shape.same_as: 'q' is not a tensor input (tensor "
                 "inputs: x)");
  // An output is not an input.
  (*d.spec.outputs)[0].shape = SameAs{"x", {}};
  d.spec.outputs->push_back(output("z", ReduceDims{.input = "y", .dims = {0}}));
  expect_invalid(
      d,
      "op test::relu: outputs[1].shape.reduce_dims.input: 'y' is not a tensor input (tensor "
      "inputs: x)");
}

TEST(ValidateTest, ReduceDimsEmpty) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].shape = ReduceDims{.input = "x", .dims = {}};
  expect_invalid(
      d, "op test::relu: outputs[0].shape.reduce_dims.dims: is empty; expected the axes to reduce");
}

TEST(ValidateTest, ReduceDimsDuplicateAxes) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].shape = ReduceDims{.input = "x", .dims = {0, -1, 0}};
  expect_invalid(d, "op test::relu: outputs[0].shape.reduce_dims.dims: lists an axis twice");
  (*d.spec.outputs)[0].shape = ReduceDims{.input = "x", .dims = {0, -1}, .keepdim = true};
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, ShapeExprReferringToOutput) {
  OpDecl d = relu_decl();
  d.spec.outputs->push_back(output("z", ShapeExprs{{Expr::dim("x", 0), Expr::dim("y", 1)}}));
  expect_invalid(d,
                 "op test::relu: outputs[1].shape[1]: 'dim(y, 1)': output 'y' cannot be used "
                 "here; output shapes depend on inputs only");
  (*d.spec.outputs)[1].shape = ShapeExprs{{Expr::numel("z")}};
  expect_invalid(d, "outputs[1].shape[0]: 'numel(z)': output 'z' cannot be used here");
}

TEST(ValidateTest, ShapeExprNamingUnknownTensor) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].shape = ShapeExprs{{Expr::dim("q", 0) * 2}};
  expect_invalid(d,
                 "op test::relu: outputs[0].shape[0]: 'dim(q, 0) * 2': 'q' is not a tensor "
                 "(known tensors: x)");
}

TEST(ValidateTest, ShapeExprWithIntScalars) {
  OpDecl d = relu_decl();
  d.spec.inputs->push_back(scalar("n", ScalarType::Int));
  d.spec.inputs->push_back(scalar("m", ScalarType::Int64));
  (*d.spec.outputs)[0].shape =
      ShapeExprs{{Expr::scalar("n"), Expr::dim("x", 0) * Expr::scalar("m")}};
  EXPECT_NO_THROW(validate(d));
}

// --- output dtypes --------------------------------------------------------------------------

TEST(ValidateTest, DtypeFromUnknownTensor) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].dtype_from = "q";
  expect_invalid(d,
                 "op test::relu: outputs[0].dtype_from: 'q' is not a tensor input (tensor "
                 "inputs: x)");
}

TEST(ValidateTest, DtypeFromScalar) {
  OpDecl d = relu_decl();
  d.spec.inputs->push_back(scalar("s", ScalarType::Float));
  (*d.spec.outputs)[0].dtype_from = "s";
  expect_invalid(d,
                 "op test::relu: outputs[0].dtype_from: 's' is a scalar input; expected a tensor "
                 "input (x)");
}

TEST(ValidateTest, DtypeFromAndDtype) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].dtype_from = "x";
  (*d.spec.outputs)[0].dtype = DType::Float16;
  expect_invalid(
      d, "op test::relu: outputs[0]: gives both dtype_from and dtype; expected at most one");
  (*d.spec.outputs)[0].dtype.reset();
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, OutputDtypeNamingUnknownTypeParam) {
  OpDecl d = relu_decl();
  (*d.spec.outputs)[0].dtype = std::string("U");
  expect_invalid(d,
                 "op test::relu: outputs[0].dtype: 'U' is neither a dtype nor a type parameter "
                 "(type parameters: none)");
  d.spec.kernel_name = "relu<T>";
  d.spec.type_params = {TypeParam{.name = "T", .dtypes = {DType::Float32}}};
  expect_invalid(d,
                 "op test::relu: outputs[0].dtype: 'U' is neither a dtype nor a type parameter "
                 "(type parameters: T)");
  (*d.spec.outputs)[0].dtype = std::string("T");
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, OutputsEmptyWithoutMutatedInput) {
  OpDecl d = relu_decl();
  d.spec.outputs = std::vector<OutputDecl>{};
  d.spec.geometry = elementwise({256}, Layout::Flat, "x");
  expect_invalid(d,
                 "op test::relu: outputs: is empty and no input is mutated; the op would produce "
                 "nothing");
  std::get<InputDecl>((*d.spec.inputs)[0]).mutated = true;
  EXPECT_NO_THROW(validate(d));
}

// --- extras ---------------------------------------------------------------------------------

TEST(ValidateTest, ExtraNamingUnknownTensor) {
  OpDecl d = relu_decl();
  d.spec.extras = {Numel{.input = "y"}, Numel{.input = "q"}};
  expect_invalid(d,
                 "op test::relu: extras[1].numel: 'numel(q)': 'q' is not a tensor (known "
                 "tensors: x, y)");
  d.spec.extras = {DimSize{.input = "q", .axis = -1}};
  expect_invalid(d,
                 "op test::relu: extras[0].dim_size: 'dim(q, -1)': 'q' is not a tensor (known "
                 "tensors: x, y)");
}

TEST(ValidateTest, ExtraNumelOfScalar) {
  OpDecl d = relu_decl();
  d.spec.inputs->push_back(scalar("n", ScalarType::Int));
  d.spec.extras = {Numel{.input = "n"}};
  expect_invalid(d, "op test::relu: extras[0].numel: 'numel(n)': 'n' is not a tensor");
}

TEST(ValidateTest, ExtraExprUsingFloatScalar) {
  OpDecl d = relu_decl();
  d.spec.inputs->push_back(scalar("s", ScalarType::Float));
  d.spec.extras.push_back(ExtraExpr{.value = Expr::scalar("s") * 2});
  expect_invalid(d,
                 "op test::relu: extras[1].expr: 's * 2': scalar input 's' is not an integer; "
                 "expressions take int scalars only");
  d.spec.inputs = std::vector<Input>{tensor("x"), scalar("s", ScalarType::Float64)};
  expect_invalid(d, "extras[1].expr: 's * 2': scalar input 's' is not an integer");
  d.spec.inputs = std::vector<Input>{tensor("x"), scalar("s", ScalarType::Bool)};
  expect_invalid(d, "extras[1].expr: 's * 2': scalar input 's' is not an integer");
  d.spec.inputs = std::vector<Input>{tensor("x"), scalar("s", ScalarType::Int64)};
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, ExprUsingUnknownScalar) {
  OpDecl d = relu_decl();
  d.spec.extras = {ExtraExpr{.value = Expr::numel("x") + Expr::scalar("n")}};
  expect_invalid(d,
                 "op test::relu: extras[0].expr: 'numel(x) + n': 'n' is not an integer scalar "
                 "input (integer scalars: none)");
  d.spec.inputs->push_back(scalar("k", ScalarType::Int));
  d.spec.inputs->push_back(scalar("j", ScalarType::Int64));
  expect_invalid(d, "'n' is not an integer scalar input (integer scalars: j, k)");
}

// --- geometry: elementwise ------------------------------------------------------------------

TEST(ValidateTest, ElementwiseBlockEmpty) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({});
  expect_invalid(
      d, "op test::relu: geometry.elementwise.block: is empty; expected 1 to 3 positive ints");
}

TEST(ValidateTest, ElementwiseBlockNonPositive) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({0});
  expect_invalid(d, "op test::relu: geometry.elementwise.block: has 0; expected positive ints");
  d.spec.geometry = elementwise({16, -2}, Layout::Nd);
  expect_invalid(d, "op test::relu: geometry.elementwise.block: has -2; expected positive ints");
}

TEST(ValidateTest, ElementwiseBlockFourDims) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({4, 4, 4, 4}, Layout::Nd);
  expect_invalid(
      d, "op test::relu: geometry.elementwise.block: has 4 dims; CUDA blocks have at most 3");
}

TEST(ValidateTest, ElementwiseBlockTooManyThreads) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({2048});
  expect_invalid(
      d,
      "op test::relu: geometry.elementwise.block: has 2048 threads per block; CUDA allows at "
      "most 1024");
  d.spec.geometry = elementwise({64, 4, 8}, Layout::Nd);
  expect_invalid(d, "geometry.elementwise.block: has 2048 threads per block");
  d.spec.geometry = elementwise({1024});
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, ElementwiseBlockZTooLarge) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({2, 2, 65}, Layout::Nd);
  expect_invalid(
      d, "op test::relu: geometry.elementwise.block: z dimension is 65; CUDA allows at most 64");
  d.spec.geometry = elementwise({2, 2, 64}, Layout::Nd);
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, ElementwiseFlatWithTwoDims) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({16, 16}, Layout::Flat);
  expect_invalid(
      d,
      "op test::relu: geometry.elementwise.block: has 2 dims with layout='flat'; flat takes one "
      "(use layout='nd' for multi-dimensional blocks)");
  d.spec.geometry = elementwise({16, 16}, Layout::Nd);
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, ElementwiseWithoutOutputsNeedsOver) {
  OpDecl d = relu_decl();
  std::get<InputDecl>((*d.spec.inputs)[0]).mutated = true;
  d.spec.outputs = std::vector<OutputDecl>{};
  d.spec.geometry = Elementwise{};
  expect_invalid(
      d,
      "op test::relu: geometry.elementwise.over: missing; Elementwise iterates over output 0 and "
      "this op has no outputs, so name the tensor to iterate over");
  d.spec.geometry = elementwise({256}, Layout::Flat, "x");
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, ElementwiseOverUnknownTensor) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({256}, Layout::Flat, "y");
  EXPECT_NO_THROW(validate(d));  // outputs may be iterated over
  d.spec.geometry = elementwise({256}, Layout::Flat, "q");
  expect_invalid(
      d,
      "op test::relu: geometry.elementwise.over: 'numel(q)': 'q' is not a tensor (known tensors: "
      "x, y)");
}

// --- geometry: reduction --------------------------------------------------------------------

TEST(ValidateTest, ReductionEmptyReduceDims) {
  OpDecl d = relu_decl();
  d.spec.geometry = reduction({});
  expect_invalid(
      d, "op test::relu: geometry.reduction.reduce_dims: is empty; expected the reduced axes");
}

TEST(ValidateTest, ReductionDuplicateReduceDims) {
  OpDecl d = relu_decl();
  d.spec.geometry = reduction({1, 1});
  expect_invalid(d, "op test::relu: geometry.reduction.reduce_dims: lists an axis twice");
}

TEST(ValidateTest, ReductionBlockSize) {
  OpDecl d = relu_decl();
  for (std::int64_t size : {0, -1, 1025, 2048}) {
    d.spec.geometry = reduction({-1}, size);
    expect_invalid(d, "op test::relu: geometry.reduction.block_size: is " + std::to_string(size) +
                          "; expected 1 to 1024");
  }
  for (std::int64_t size : {1, 1024}) {
    d.spec.geometry = reduction({-1}, size);
    EXPECT_NO_THROW(validate(d));
  }
}

TEST(ValidateTest, ReductionSharedMem) {
  OpDecl d = relu_decl();
  d.spec.geometry = reduction({-1}, 256, Expr::dim("y", -1) * 4);
  EXPECT_NO_THROW(validate(d));
  d.spec.geometry = reduction({-1}, 256, Expr::dim("q", -1) * 4);
  expect_invalid(
      d,
      "op test::relu: geometry.reduction.shared_mem: 'dim(q, -1) * 4': 'q' is not a tensor "
      "(known tensors: x, y)");
}

// --- geometry: custom -----------------------------------------------------------------------

Custom custom_geometry() {
  return Custom{
      .grid = {cdiv(Expr::numel("y"), 256)}, .block = {256}, .shared_mem = 0, .cluster = {}};
}

TEST(ValidateTest, CustomIsValid) {
  OpDecl d = relu_decl();
  d.spec.geometry = custom_geometry();
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, CustomGridDims) {
  OpDecl d = relu_decl();
  Custom g = custom_geometry();
  g.grid = {};
  d.spec.geometry = g;
  expect_invalid(d, "op test::relu: geometry.custom.grid: has 0 dims; expected 1 to 3");
  g.grid = {1, 1, 1, 1};
  d.spec.geometry = g;
  expect_invalid(d, "op test::relu: geometry.custom.grid: has 4 dims; expected 1 to 3");
}

TEST(ValidateTest, CustomBlockDims) {
  OpDecl d = relu_decl();
  Custom g = custom_geometry();
  g.block = {};
  d.spec.geometry = g;
  expect_invalid(d, "op test::relu: geometry.custom.block: has 0 dims; expected 1 to 3");
  g.block = {4, 4, 4, 4};
  d.spec.geometry = g;
  expect_invalid(d, "op test::relu: geometry.custom.block: has 4 dims; expected 1 to 3");
}

TEST(ValidateTest, CustomConstantBlockTooLarge) {
  OpDecl d = relu_decl();
  Custom g = custom_geometry();
  g.block = {32, 64};
  d.spec.geometry = g;
  expect_invalid(d,
                 "op test::relu: geometry.custom.block: has 2048 threads per block; CUDA allows at "
                 "most 1024");
  // Constant expressions are folded before the check.
  g.block = {Expr(16) * Expr(128)};
  d.spec.geometry = g;
  expect_invalid(d, "op test::relu: geometry.custom.block: has 2048 threads per block");
  g.block = {1, 1, 128};
  d.spec.geometry = g;
  expect_invalid(
      d, "op test::relu: geometry.custom.block: z dimension is 128; CUDA allows at most 64");
  // A shape-dependent block is checked at launch time only.
  g.block = {Expr::dim("x", 0) * 4096};
  d.spec.geometry = g;
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, CustomExpressionsAreChecked) {
  OpDecl d = relu_decl();
  d.spec.inputs->push_back(scalar("s", ScalarType::Float));
  Custom g = custom_geometry();
  g.grid = {1, Expr::scalar("s")};
  d.spec.geometry = g;
  expect_invalid(d,
                 "op test::relu: geometry.custom.grid[1]: 's': scalar input 's' is not an integer; "
                 "expressions take int scalars only");
  g = custom_geometry();
  g.block = {Expr::numel("q")};
  d.spec.geometry = g;
  expect_invalid(d, "op test::relu: geometry.custom.block[0]: 'numel(q)': 'q' is not a tensor");
  g = custom_geometry();
  g.shared_mem = Expr::scalar("m");
  d.spec.geometry = g;
  expect_invalid(
      d,
      "op test::relu: geometry.custom.shared_mem: 'm': 'm' is not an integer scalar input "
      "(integer scalars: none)");
}

// --- compile options ------------------------------------------------------------------------

TEST(ValidateTest, CompileStd) {
  OpDecl d = relu_decl();
  for (std::string std : {"c++03", "gnu++17", "c++23", ""}) {
    d.spec.compile_std = std;
    expect_invalid(d, "op test::relu: compile_std: '" + std +
                          "' is not supported; expected c++11, c++14, c++17 or c++20");
  }
  for (std::string std : {"c++11", "c++14", "c++17", "c++20"}) {
    d.spec.compile_std = std;
    EXPECT_NO_THROW(validate(d));
  }
}

TEST(ValidateTest, ArchOverride) {
  OpDecl d = relu_decl();
  for (std::string arch : {"sm90", "gfx90a", "sm_9", "sm_90x", "compute90", ""}) {
    SCOPED_TRACE(arch);
    d.spec.arch_override = {"sm_80", arch};
    expect_invalid(d, "op test::relu: arch_override[1]: '" + arch +
                          "' is not an architecture; expected 'sm_NN' (CUBIN) or 'compute_NN' "
                          "(PTX)");
  }
  d.spec.arch_override = {"sm_80", "sm_90a", "compute_90", "sm_100f", "compute_120"};
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, Defines) {
  OpDecl d = relu_decl();
  for (std::string define : {"1BAD", "", "=1", "A B", "-DFOO"}) {
    SCOPED_TRACE(define);
    d.spec.defines = {"OK", define};
    expect_invalid(d, "op test::relu: defines[1]: '" + define + "' is not 'NAME' or 'NAME=VALUE'");
  }
  d.spec.defines = {"FOO", "BAR=1", "_BAZ=a b", "EMPTY="};
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, EmptyIncludePath) {
  OpDecl d = relu_decl();
  d.spec.include_paths = {"include", ""};
  expect_invalid(d, "op test::relu: include_paths[1]: is empty");
}

// --- type parameters ------------------------------------------------------------------------

OpDecl generic_decl() {
  OpDecl d = relu_decl();
  d.spec.kernel_name = "relu<T>";
  d.spec.type_params = {TypeParam{.name = "T", .dtypes = {DType::Float32, DType::Float16}}};
  d.spec.inputs = std::vector<Input>{tensor("x", std::string("T"))};
  return d;
}

TEST(ValidateTest, GenericIsValid) {
  EXPECT_NO_THROW(validate(generic_decl()));
  OpDecl d = generic_decl();
  d.spec.kernel_name = "ns::relu<4, T, U>";
  d.spec.type_params.push_back(TypeParam{.name = "U", .dtypes = {DType::Int32}});
  EXPECT_NO_THROW(validate(d));
}

TEST(ValidateTest, DuplicateTypeParam) {
  OpDecl d = generic_decl();
  d.spec.type_params.push_back(TypeParam{.name = "T", .dtypes = {DType::BFloat16}});
  expect_invalid(d, "op test::relu: type_params[1].name: duplicate type parameter 'T'");
}

TEST(ValidateTest, TypeParamWithoutDtypes) {
  OpDecl d = generic_decl();
  d.spec.type_params[0].dtypes.clear();
  expect_invalid(d,
                 "op test::relu: type_params[0].dtypes: is empty; expected at least one dtype "
                 "for 'T'");
}

TEST(ValidateTest, TypeParamDuplicateDtype) {
  OpDecl d = generic_decl();
  d.spec.type_params[0].dtypes = {DType::Float32, DType::Float16, DType::Float32};
  expect_invalid(d, "op test::relu: type_params[0].dtypes: lists a dtype twice");
}

TEST(ValidateTest, TypeParamNotUsedInKernelName) {
  OpDecl d = generic_decl();
  for (std::string name : {"relu", "relu<float>", "relu<TT>", "T<float>", "relu<T_>"}) {
    SCOPED_TRACE(name);
    d.spec.kernel_name = name;
    std::string base = name.substr(0, name.find('<'));
    expect_invalid(d, "op test::relu: kernel_name: '" + name +
                          "' does not use type parameter 'T'; expected it among the template "
                          "arguments, e.g. '" +
                          base + "<T>'");
  }
}

TEST(ValidateTest, TypeParamNames) {
  OpDecl d = generic_decl();
  d.spec.type_params[0].name = "int";
  expect_invalid(d, "op test::relu: type_params[0].name: 'int' is a reserved name");
  d.spec.type_params[0].name = "T1-x";
  expect_invalid(d, "op test::relu: type_params[0].name: 'T1-x' is not an identifier");
}

TEST(ValidateTest, InputNamedLikeTypeParam) {
  OpDecl d = generic_decl();
  d.spec.inputs = std::vector<Input>{tensor("x", std::string("T")), scalar("T", ScalarType::Int)};
  expect_invalid(d, "op test::relu: inputs[1].name: 'T' is also a type parameter's name");
}

// --- accepted specs and name tables ---------------------------------------------------------

TEST(ValidateTest, EveryExampleValidates) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::examples_dir())) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    ++count;
    OpDecl d = load_op_file(entry.path());
    EXPECT_NO_THROW(validate(d));
  }
  EXPECT_GE(count, 12);
}

TEST(ValidateTest, IsValidOpName) {
  for (std::string_view name : {"a::b", "ns::relu", "_ns::_x", "ns1::op_2", "A::B", "ns::int"}) {
    EXPECT_TRUE(is_valid_op_name(name)) << name;
  }
  for (std::string_view name : {"", "::", "a::", "::b", "relu", "a:b", "a::b::c", "1a::b", "a::1b",
                                "a-b::c", "a::b c", " a::b", "a::b "}) {
    EXPECT_FALSE(is_valid_op_name(name)) << name;
  }
}

TEST(ValidateTest, IsReservedName) {
  for (std::string_view name :
       {"int", "float", "lambda", "None", "True", "Tensor", "SymInt", "Scalar", "numel", "dim",
        "cdiv", "min", "max", "numel_except", "co_await", "__x", "__kop_out", "_X", "_Tensor"}) {
    EXPECT_TRUE(is_reserved_name(name)) << name;
  }
  for (std::string_view name :
       {"x", "_x", "_", "x__", "tensor", "Int", "kop", "input", "output", "T", "numel2"}) {
    EXPECT_FALSE(is_reserved_name(name)) << name;
  }
}

}  // namespace
}  // namespace kernelop

namespace kernelop {
namespace {

TEST(ValidateTypeParams, OutputNamedLikeATypeParameter) {
  OpDecl d;
  d.op_name = "t::g";
  d.spec.kernel_source = "x";
  d.spec.kernel_name = "k<T>";
  d.spec.type_params = {TypeParam{"T", {DType::Float32}}};
  d.spec.inputs = std::vector<Input>{InputDecl{"x", std::string("T"), false}};
  d.spec.outputs =
      std::vector<OutputDecl>{OutputDecl{"T", SameAs{std::string("x"), {}}, {}, {}, {}}};
  d.spec.geometry = Elementwise{};
  testing::expect_error([&] { validate(d); }, ErrorKind::Spec,
                        "op t::g: outputs[0].name: 'T' is also a type parameter's name");
}

// --- untrusted input: no regex recursion, no overflow, bounded work ---------------------------

// Names are matched without std::regex, whose libstdc++ matcher recurses once per character and
// overflowed the stack on names of some ten thousand characters.
TEST(ValidateTest, LongNamesAreMatchedWithoutRecursion) {
  const std::string id(200000, 'a');
  OpDecl d = relu_decl();
  d.spec.kernel_name = " ns::" + id + " < " + std::string(200000, '*') + " > ";
  EXPECT_NO_THROW(validate(d));
  d.spec.kernel_name = id + "(";
  expect_invalid(d, "' is not a kernel name; expected an identifier");
  d = relu_decl();
  d.spec.defines = {id + "=" + std::string(200000, ' ')};
  EXPECT_NO_THROW(validate(d));
  d = generic_decl();
  d.spec.kernel_name = "relu<int, " + id + ">";
  d.spec.type_params[0].name = id;
  d.spec.inputs = std::vector<Input>{tensor("x", id)};
  EXPECT_NO_THROW(validate(d));
}

// What the regexes these matchers replace accepted: '.' in "<.*>" and "=.*" is no line break.
TEST(ValidateTest, KernelNamesAndDefinesKeepTheirGrammar) {
  for (std::string name :
       {"relu", " relu ", "\trelu<T>\n", "a::b<x<y>>", "k<>", "k <T> ", "_k9<(1 > 2)>"}) {
    SCOPED_TRACE(name);
    OpDecl d = generic_decl();
    d.spec.type_params.clear();
    d.spec.inputs = std::vector<Input>{tensor("x", DType::Float32)};
    d.spec.kernel_name = name;
    EXPECT_NO_THROW(validate(d));
  }
  for (std::string name : {"k<\n>", "k<T>x", "k<T> <U>x", "k::", "k:::a", "::k", "k>", "k<T\r>"}) {
    SCOPED_TRACE(name);
    OpDecl d = relu_decl();
    d.spec.kernel_name = name;
    expect_invalid(d, "op test::relu: kernel_name: '" + name + "' is not a kernel name");
  }
  OpDecl d = relu_decl();
  d.spec.defines = {"A=1\n2"};
  expect_invalid(d, "op test::relu: defines[0]: 'A=1\n2' is not 'NAME' or 'NAME=VALUE'");
}

TEST(ValidateTest, BlockSizesThatOverflowInt64) {
  OpDecl d = relu_decl();
  d.spec.geometry = elementwise({std::int64_t{1} << 62, 4}, Layout::Nd);
  expect_invalid(d,
                 "op test::relu: geometry.elementwise.block: has more than 9223372036854775807 "
                 "threads per block; CUDA allows at most 1024");
  Custom c;
  c.grid = {Expr(1)};
  c.block = {Expr(std::int64_t{1} << 32), Expr(std::int64_t{1} << 32)};
  d.spec.geometry = c;
  expect_invalid(d, "op test::relu: geometry.custom.block: has more than 9223372036854775807");
}

TEST(ValidateTest, TooManyInstantiations) {
  OpDecl d = generic_decl();
  std::string names;
  d.spec.type_params.clear();
  for (int i = 0; i < 11; ++i) {  // 2^11 = 2048 instantiations
    std::string name = "T" + std::to_string(i);
    names += (i ? ", " : "") + name;
    d.spec.type_params.push_back(TypeParam{.name = name, .dtypes = {DType::Float32, DType::Int8}});
  }
  d.spec.kernel_name = "relu<" + names + ">";
  d.spec.inputs = std::vector<Input>{tensor("x", DType::Float32)};
  expect_invalid(d,
                 "op test::relu: type_params: ask for more than 1024 kernel instantiations (the "
                 "product of the numbers of dtypes)");
  d.spec.type_params.pop_back();  // 1024 is allowed
  d.spec.kernel_name = "relu<" + names.substr(0, names.rfind(',')) + ">";
  EXPECT_NO_THROW(validate(d));
}

}  // namespace
}  // namespace kernelop

namespace kernelop {
namespace {

TEST(ValidateRequirements, LeavesMustBeInputsOrIntScalars) {
  OpDecl d = relu_decl();
  d.spec.requirements = {Requirement::parse("dim(x, -1) == 4"),
                         Requirement::parse("numel(x) >= 1")};
  EXPECT_NO_THROW(validate(d));
  d.spec.requirements = {Requirement::parse("numel(y) == 4")};
  expect_invalid(d, "requires[0]: 'numel(y) == 4': output 'y' cannot be used here");
  d.spec.requirements = {Requirement::parse("numel(x) == 4"), Requirement::parse("dim(q, 0) < 2")};
  expect_invalid(d, "requires[1]: 'dim(q, 0) < 2': 'q' is not a tensor");
  d.spec.requirements = {Requirement::parse("numel(x) == alpha")};
  expect_invalid(d, "requires[0]: 'numel(x) == alpha': 'alpha' is not an integer scalar input");
}

TEST(ValidateRequirements, IgnoredRequirementsAreErrors) {
  OpDecl d = relu_decl();
  d.spec.requirements = {Requirement::parse("numel(x) == 4")};
  d.spec.inputs.reset();
  d.spec.outputs.reset();
  d.spec.extras.clear();
  d.spec.geometry.reset();
  expect_invalid(d, "inputs: missing, so 'requires' cannot be used",
                 {.has_meta_fn = true, .has_eager_fn = true});
}

TEST(ValidateTest, ScalarDefaultsMatchTheirTypeAndComeLast) {
  auto with = [](std::vector<Input> inputs) {
    OpDecl d = relu_decl();
    d.spec.inputs = std::move(inputs);
    return d;
  };
  Input x = tensor("x", DType::Float32);
  EXPECT_NO_THROW(validate(with({x, ScalarInput{"b", ScalarType::Float, false, 0.2},
                                 ScalarInput{"a", ScalarType::Int, false, std::int64_t{2}},
                                 ScalarInput{"f", ScalarType::Bool, false, true}})));
  EXPECT_NO_THROW(validate(with({x, ScalarInput{"b", ScalarType::Float, false, std::int64_t{2}}})));
  expect_invalid(with({x, ScalarInput{"a", ScalarType::Int, false, 0.5}}),
                 "inputs[1].default: scalar 'a' is int; its default must be an integer, found 0.5");
  expect_invalid(with({x, ScalarInput{"f", ScalarType::Bool, false, std::int64_t{1}}}),
                 "its default must be true or false, found 1");
  expect_invalid(with({x, ScalarInput{"b", ScalarType::Float, false, true}}),
                 "its default must be a number, found True");
  expect_invalid(with({x, ScalarInput{"b", ScalarType::Float, false,
                                      std::numeric_limits<double>::infinity()}}),
                 "its default must be a finite number, found inf");
  expect_invalid(with({x, ScalarInput{"a", ScalarType::Int, false, std::int64_t{1} << 40}}),
                 "is a 32-bit int; its default 1099511627776 does not fit");
  expect_invalid(
      with({x, ScalarInput{"b", ScalarType::Float, false, 0.2}, ScalarInput{"a", ScalarType::Int}}),
      "inputs[2].default: missing: scalar 'a' follows inputs[1], which has a default");
  expect_invalid(with({ScalarInput{"b", ScalarType::Float, false, 0.2}, x}),
                 "inputs[1]: tensor 'x' follows inputs[0], which has a default");
}

}  // namespace
}  // namespace kernelop
