// Derivation: schema, output shapes and dtypes, launch geometry and argument layout, for every
// example and for edge cases.
#include <gtest/gtest.h>

#include <limits>

#include "kernelop/plan.hpp"
#include "kernelop/spec_json.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::example;

std::string grid(const OpPlan& p) {
  const auto& g = p.geometry->grid;
  return g[0].to_string() + " | " + g[1].to_string() + " | " + g[2].to_string();
}
std::string block(const OpPlan& p) {
  const auto& b = p.geometry->block;
  return b[0].to_string() + " | " + b[1].to_string() + " | " + b[2].to_string();
}
std::string args(const OpPlan& p) {
  std::string out;
  for (const auto& a : p.args) out += (out.empty() ? "" : ", ") + p.c_type(a) + " " + a.name;
  return out;
}
std::string shape(const OpPlan& p, std::size_t output) {
  return shape_rule_text(p, p.outputs.at(output).shape);
}

struct Expected {
  const char* example;
  const char* schema;
  const char* shapes;  // output shape rules joined by "; "
  const char* grid;
  const char* block;
  const char* args;
};

TEST(Plan, EveryExample) {
  const Expected table[] = {
      {"relu", "kernelop_examples::relu(Tensor x) -> Tensor", "like(x)",
       "cdiv(numel(y), 256) | 1 | 1", "256 | 1 | 1", "const float* x, int numel(x), float* y"},
      {"sigmoid", "kernelop_examples::sigmoid(Tensor x) -> Tensor", "like(x)",
       "cdiv(numel(y), 256) | 1 | 1", "256 | 1 | 1", "const float* x, int numel(x), float* y"},
      {"add", "kernelop_examples::add(Tensor a, Tensor b) -> Tensor", "like(a)",
       "cdiv(numel(out), 256) | 1 | 1", "256 | 1 | 1",
       "const float* a, const float* b, int numel(a), float* out"},
      {"scale", "kernelop_examples::scale(Tensor x, float alpha) -> Tensor", "like(x)",
       "cdiv(numel(y), 256) | 1 | 1", "256 | 1 | 1",
       "const float* x, float alpha, int numel(x), float* y"},
      {"bias_add_2d", "kernelop_examples::bias_add_2d(Tensor x, Tensor bias) -> Tensor", "like(x)",
       "cdiv(dim(y, -1), 16) | cdiv(dim(y, -2), 16) | numel_except(y, -1, -2)", "16 | 16 | 1",
       "const float* x, const float* bias, int dim(x, -2), int dim(x, -1), float* y"},
      {"rowsum", "kernelop_examples::rowsum(Tensor x) -> Tensor",
       "reduce(x, dims=[-1], keepdim=false)", "numel_except(x, -1) | 1 | 1", "256 | 1 | 1",
       "const float* x, int dim(x, -1), float* y"},
      {"rowsum_keepdim", "kernelop_examples::rowsum_keepdim(Tensor x) -> Tensor",
       "reduce(x, dims=[-1], keepdim=true)", "numel_except(x, -1) | 1 | 1", "256 | 1 | 1",
       "const float* x, int dim(x, -1), float* y"},
      {"softmax", "kernelop_examples::softmax(Tensor x) -> Tensor", "like(x)",
       "numel_except(x, -1) | 1 | 1", "256 | 1 | 1", "const float* x, int dim(x, -1), float* y"},
      {"repeat2", "kernelop_examples::repeat2(Tensor x) -> Tensor", "[dim(x, 0), dim(x, 1) * 2]",
       "cdiv(numel(y), 256) | 1 | 1", "256 | 1 | 1",
       "const float* x, int dim(x, 1), int numel(y), float* y"},
      {"sin_cos", "kernelop_examples::sin_cos(Tensor x) -> (Tensor, Tensor)", "like(x); like(x)",
       "cdiv(numel(s), 256) | 1 | 1", "256 | 1 | 1",
       "const float* x, int numel(x), float* s, float* c"},
      {"cache_scatter",
       "kernelop_examples::cache_scatter(Tensor(a!) cache, Tensor index, Tensor values) -> ()", "",
       "cdiv(numel(values), 256) | 1 | 1", "256 | 1 | 1",
       "float* cache, const long long* index, const float* values, int numel(values), "
       "int dim(values, -1), int dim(cache, 0)"},
      {"relu_generic", "kernelop_examples::relu_generic(Tensor x) -> Tensor", "like(x)",
       "cdiv(numel(y), 256) | 1 | 1", "256 | 1 | 1", "const T* x, int numel(x), T* y"},
  };
  for (const Expected& e : table) {
    SCOPED_TRACE(e.example);
    OpPlan p = derive_plan(example(e.example));
    EXPECT_EQ(p.qualified_schema(), e.schema);
    std::string shapes;
    for (std::size_t i = 0; i < p.outputs.size(); ++i) shapes += (i ? "; " : "") + shape(p, i);
    EXPECT_EQ(shapes, e.shapes);
    ASSERT_TRUE(p.geometry);
    EXPECT_EQ(grid(p), e.grid);
    EXPECT_EQ(block(p), e.block);
    EXPECT_EQ(p.geometry->shared_mem.to_string(), "0");
    EXPECT_EQ(args(p), e.args);
  }
}

TEST(Plan, DtypesFollowTheRules) {
  OpPlan relu = derive_plan(example("relu"));
  EXPECT_EQ(relu.outputs[0].dtype_from, 0);
  EXPECT_EQ(relu.tensors[static_cast<std::size_t>(relu.outputs[0].slot)].dtype,
            DTypeDecl(DType::Float32));
  OpPlan generic = derive_plan(example("relu_generic"));
  EXPECT_EQ(generic.tensors[static_cast<std::size_t>(generic.outputs[0].slot)].dtype,
            DTypeDecl(std::string("T")));
  ASSERT_EQ(generic.instances.size(), 3u);
  EXPECT_EQ(generic.instances[0].name_expression, "relu_generic<float>");
  EXPECT_EQ(generic.instances[1].name_expression, "relu_generic<__half>");
  EXPECT_EQ(generic.instances[2].name_expression, "relu_generic<__nv_bfloat16>");
  EXPECT_EQ(generic.instances[2].bindings, std::vector<DType>{DType::BFloat16});
}

OpDecl base_decl() {
  OpDecl d;
  d.op_name = "t::k";
  d.spec.kernel_source = "extern \"C\" __global__ void k() {}";
  d.spec.kernel_name = "k";
  d.spec.inputs =
      std::vector<Input>{InputDecl{"x", DType::Float16, false}, ScalarInput{"n", ScalarType::Int},
                         InputDecl{"w", std::nullopt, false}};
  d.spec.outputs =
      std::vector<OutputDecl>{OutputDecl{"y", SameAs{std::string("x"), {}}, {}, {}, {}}};
  d.spec.geometry = Elementwise{};
  return d;
}

TEST(Plan, NdBlockRequiresRankAndFoldsLeadingAxes) {
  OpDecl d = base_decl();
  d.spec.geometry = Elementwise{{8, 4, 2}, Layout::Nd, std::nullopt};
  OpPlan p = derive_plan(d);
  EXPECT_EQ(grid(p),
            "cdiv(dim(y, -1), 8) | cdiv(dim(y, -2), 4) | cdiv(dim(y, -3), 2) * numel_except(y, -1, "
            "-2, -3)");
  ASSERT_EQ(p.rank_requirements.size(), 1u);
  EXPECT_EQ(p.rank_requirements[0].slot, p.tensor_slot("y"));
  EXPECT_EQ(p.rank_requirements[0].min_rank, 3);
  EXPECT_NE(p.rank_requirements[0].reason.find("Elementwise(block=(8, 4, 2), layout=nd"),
            std::string::npos);

  // A 1-element nd block: grid y is 1 and every leading axis folds into z.
  d.spec.geometry = Elementwise{{128}, Layout::Nd, std::nullopt};
  p = derive_plan(d);
  EXPECT_EQ(grid(p), "cdiv(dim(y, -1), 128) | 1 | numel_except(y, -1)");
  EXPECT_EQ(p.rank_requirements[0].min_rank, 1);
}

TEST(Plan, ReductionOverNegativeAndSeveralAxes) {
  OpDecl d = base_decl();
  d.spec.outputs = std::vector<OutputDecl>{
      OutputDecl{"y", ReduceDims{std::int64_t{0}, {0, -1}, true}, {}, {}, {}}};
  d.spec.geometry = Reduction{{0, -1}, 128, Expr::parse("128 * 4")};
  OpPlan p = derive_plan(d);
  EXPECT_EQ(shape(p, 0), "reduce(x, dims=[0, -1], keepdim=true)");
  EXPECT_EQ(grid(p), "numel_except(x, 0, -1) | 1 | 1");
  EXPECT_EQ(block(p), "128 | 1 | 1");
  EXPECT_EQ(p.geometry->shared_mem.to_string(), "512");  // simplified
  ASSERT_EQ(p.rank_requirements.size(), 1u);
  EXPECT_EQ(p.rank_requirements[0].min_rank, 2);  // axes 0 and -1 need rank >= 2
}

TEST(Plan, ScalarsKeepTheirPositionAndDtypeFromOverridesTheSource) {
  OpDecl d = base_decl();
  d.spec.outputs = std::vector<OutputDecl>{
      OutputDecl{"y", SameAs{std::int64_t{1}, {}}, std::string("x"), {}, {}},
      OutputDecl{"z", ShapeExprs{{Expr::parse("dim(x, 0) * n"), 4}}, {}, DType::Int64, {}}};
  d.spec.extras = {Numel{"z", true}, DimSize{"w", -2, false},
                   ExtraExpr{Expr::parse("cdiv(numel(x), n)"), false}};
  OpPlan p = derive_plan(d);
  EXPECT_EQ(p.schema, "(Tensor x, int n, Tensor w) -> (Tensor, Tensor)");
  EXPECT_EQ(args(p),
            "const __half* x, int n, const ?* w, long long numel(z), int dim(w, -2), "
            "int cdiv(numel(x), n), __half* y, long long* z");
  EXPECT_EQ(shape(p, 0), "like(w)");  // SameAs index 1 among tensor inputs is w
  EXPECT_EQ(p.outputs[0].dtype_from, p.tensor_slot("x"));
  EXPECT_EQ(p.outputs[1].dtype_from, -1);
  EXPECT_EQ(p.tensors[static_cast<std::size_t>(p.outputs[1].slot)].dtype, DTypeDecl(DType::Int64));
  // Leaves resolve to slots: tensors by tensor slot, scalars by scalar slot.
  const Expr& dim0 = p.outputs[1].shape.dims[0];
  EXPECT_EQ(dim0.lhs().slot(), p.tensor_slot("x"));
  EXPECT_EQ(dim0.rhs().slot(), 0);
  EXPECT_EQ(p.args[3].value->slot(), p.tensor_slot("z"));
  // dim(w, -2) needs rank(w) >= 2.
  bool found = false;
  for (const auto& r : p.rank_requirements) {
    if (r.slot == p.tensor_slot("w")) {
      found = true;
      EXPECT_EQ(r.min_rank, 2);
      EXPECT_NE(r.reason.find("extra 1 'dim(w, -2)'"), std::string::npos) << r.reason;
    }
  }
  EXPECT_TRUE(found);
}

TEST(Plan, CustomGeometryPadsToThreeDims) {
  OpDecl d = base_decl();
  d.spec.geometry = Custom{{Expr::parse("cdiv(numel(x), 4 * 64)"), Expr::parse("n")},
                           {Expr::parse("64")},
                           Expr::parse("64 * 4"),
                           {}};
  OpPlan p = derive_plan(d);
  EXPECT_EQ(grid(p), "cdiv(numel(x), 256) | n | 1");
  EXPECT_EQ(block(p), "64 | 1 | 1");
  EXPECT_EQ(p.geometry->shared_mem.to_string(), "256");
  EXPECT_EQ(p.geometry->description, "Custom");
}

TEST(Plan, MutatedInputsGetAliasAnnotationsInOrder) {
  OpDecl d = base_decl();
  d.spec.inputs =
      std::vector<Input>{InputDecl{"k", DType::Float32, true}, InputDecl{"v", DType::Float32, true},
                         InputDecl{"x", DType::Float32, false}};
  d.spec.outputs = std::vector<OutputDecl>{};
  d.spec.geometry = Elementwise{{256}, Layout::Flat, std::string("x")};
  OpPlan p = derive_plan(d);
  EXPECT_EQ(p.schema, "(Tensor(a!) k, Tensor(b!) v, Tensor x) -> ()");
  EXPECT_EQ(args(p), "float* k, float* v, const float* x");
}

TEST(Plan, MultipleTypeParametersInstantiateTheCartesianProduct) {
  OpDecl d = base_decl();
  d.spec.kernel_name = "cast<In, Out, 128>";
  d.spec.type_params = {TypeParam{"In", {DType::Float32, DType::Float16}},
                        TypeParam{"Out", {DType::BFloat16, DType::Int8}}};
  d.spec.inputs = std::vector<Input>{InputDecl{"x", std::string("In"), false}};
  d.spec.outputs = std::vector<OutputDecl>{
      OutputDecl{"y", SameAs{std::string("x"), {}}, {}, std::string("Out"), {}}};
  OpPlan p = derive_plan(d);
  std::vector<std::string> names;
  for (const auto& inst : p.instances) names.push_back(inst.name_expression);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "cast<float, __nv_bfloat16, 128>", "cast<float, signed char, 128>",
                       "cast<__half, __nv_bfloat16, 128>", "cast<__half, signed char, 128>"}));
  EXPECT_EQ(p.instances[3].bindings, (std::vector<DType>{DType::Float16, DType::Int8}));
}

TEST(Plan, DerivationValidatesFirst) {
  OpDecl d = base_decl();
  d.op_name = "nonamespace";
  testing::expect_error([&] { derive_plan(d); }, ErrorKind::Spec,
                        "op name 'nonamespace' is invalid");
}

// Axes come from specs, and specs from untrusted packages: the extremes of int64 saturate the
// rank requirement instead of overflowing while it is computed.
TEST(Plan, ExtremeAxesNeedAnUnreachableRank) {
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t axis : {kMin, kMax}) {
    SCOPED_TRACE(axis);
    OpDecl d = base_decl();
    d.spec.extras = {DimSize{"x", axis, false}};
    OpPlan p = derive_plan(d);
    ASSERT_EQ(p.rank_requirements.size(), 1u);
    EXPECT_EQ(p.rank_requirements[0].slot, p.tensor_slot("x"));
    EXPECT_EQ(p.rank_requirements[0].min_rank, kMax);
  }
  OpDecl d = base_decl();
  d.spec.outputs = std::vector<OutputDecl>{
      OutputDecl{"y", ReduceDims{std::string("x"), {kMin, 0}, false}, {}, {}, {}}};
  EXPECT_EQ(derive_plan(d).rank_requirements.at(0).min_rank, kMax);
}

TEST(Plan, MoreThan26MutatedInputsGetNumberedAliases) {
  OpDecl d = base_decl();
  std::vector<Input> inputs;
  for (int i = 0; i < 30; ++i) inputs.push_back(InputDecl{"m" + std::to_string(i), {}, true});
  d.spec.inputs = inputs;
  d.spec.outputs = std::vector<OutputDecl>{};
  d.spec.geometry = Elementwise{{256}, Layout::Flat, std::string("m0")};
  OpPlan p = derive_plan(d);
  EXPECT_NE(p.schema.find("Tensor(a!) m0, Tensor(b!) m1, "), std::string::npos) << p.schema;
  EXPECT_NE(p.schema.find(", Tensor(z!) m25, Tensor(a1!) m26, Tensor(b1!) m27, "),
            std::string::npos)
      << p.schema;
}

TEST(Plan, TypeParametersAreSubstitutedAsWholeWords) {
  OpDecl d = base_decl();
  d.spec.kernel_name = "k<T, TT, T_x, xT, (T), T>";
  d.spec.type_params = {TypeParam{"T", {DType::Float32}}, TypeParam{"TT", {DType::Float16}}};
  d.spec.inputs = std::vector<Input>{InputDecl{"x", std::string("T"), false}};
  OpPlan p = derive_plan(d);
  ASSERT_EQ(p.instances.size(), 1u);
  EXPECT_EQ(p.instances[0].name_expression, "k<float, __half, T_x, xT, (float), float>");
}

// Scalar defaults reach the schema in the text PyTorch parses; JSON round-trips them; a Triton
// kernel's configs are each their own compilation.
TEST(PlanTest, ScalarDefaultsInTheSchemaAndTritonPrograms) {
  OpDecl decl = parse_op_json(R"json({
    "op": "t::scale_mul", "kernel_name": "k", "kernel_source": "def k(): pass",
    "triton": {"version": "3.6.0"},
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "b", "scalar": "float", "default": 0.2},
               {"name": "a", "scalar": "int", "default": -3}, {"name": "f", "scalar": "bool", "default": false},
               {"name": "g", "scalar": "float", "default": 2}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}, "dtype": "float32"}],
    "params": ["x", "y", "a", "b", "f", "g"],
    "geometry": {"custom": {"grid": ["cdiv(numel(x), B)"], "block": ["W * 32"]}},
    "tunables": ["B", "W"],
    "configs": [{"B": 256, "W": 4}, {"B": 256, "W": 8}, {"B": 1024, "W": 4}]
  })json",
                              ".", "t.json");
  OpPlan p = derive_plan(decl);
  EXPECT_EQ(p.qualified_schema(),
            "t::scale_mul(Tensor x, float b=0.2, int a=-3, bool f=False, float g=2.0) -> Tensor");
  EXPECT_EQ(p.programs.size(), 3u);
  EXPECT_EQ(p.configs[2].program, 2);
  OpDecl again = parse_op_json(print_op_json(decl), ".", "again");
  EXPECT_EQ(again.spec, decl.spec);
}

}  // namespace
}  // namespace kernelop
