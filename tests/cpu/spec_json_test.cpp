// The JSON spec format: lossless round trips, every field, and errors that name the field path.
#include "kernelop/spec_json.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernelop/plan.hpp"
#include "kernelop/validate.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;
namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out) << path;
}

// A fresh empty directory under the system temp directory, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("kernelop_spec_json_test_" + std::string(info->name()) +
                                         "_" + std::to_string(static_cast<long long>(::getpid())));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A spec document as ordered (field, JSON text) pairs: set() replaces a field or appends it,
// erase() drops it. The default document is a valid relu with an inline kernel.
class Doc {
 public:
  Doc& set(const std::string& key, const std::string& json) {
    for (auto& field : fields_) {
      if (field.first == key) {
        field.second = json;
        return *this;
      }
    }
    fields_.emplace_back(key, json);
    return *this;
  }
  Doc& erase(const std::string& key) {
    std::erase_if(fields_, [&](const auto& field) { return field.first == key; });
    return *this;
  }
  std::string str() const {
    std::string out = "{";
    for (const auto& [key, value] : fields_) {
      out += (out.size() > 1 ? ", \"" : "\"") + key + "\": " + value;
    }
    return out + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_ = {
      {"op", R"("test::relu")"},
      {"kernel_name", R"("relu")"},
      {"kernel_source", R"("__global__ void relu() {}")"},
      {"inputs", R"([{"name": "x", "dtype": "float32"}])"},
      {"outputs", R"([{"name": "y", "shape": {"same_as": "x"}}])"},
      {"extras", R"([{"numel": "x"}])"},
      {"geometry", R"({"elementwise": {"block": [256]}})"},
  };
};

constexpr const char* kBaseDir = "/nonexistent-kernelop-base";

OpDecl parse(const Doc& doc) {
  return parse_op_json(doc.str(), kBaseDir, "t.json");
}

void expect_parse_error(const std::string& text, ErrorKind kind, const std::string& needle) {
  SCOPED_TRACE(text);
  expect_error([&] { parse_op_json(text, kBaseDir, "t.json"); }, kind, needle);
}
void expect_parse_error(const Doc& doc, ErrorKind kind, const std::string& needle) {
  expect_parse_error(doc.str(), kind, needle);
}

// Checks parse(print(d)) == d and that printing the result again gives the same text.
void expect_round_trip(const OpDecl& decl) {
  std::string text = print_op_json(decl);
  OpDecl again = parse_op_json(text, decl.base_dir, "round-trip");
  EXPECT_TRUE(again == decl) << "printed:\n" << text << "reprinted:\n" << print_op_json(again);
  EXPECT_EQ(print_op_json(again), text);
}

std::vector<fs::path> example_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(testing::examples_dir())) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// --- round trips ----------------------------------------------------------------------------

TEST(SpecJsonTest, EveryExampleRoundTrips) {
  auto files = example_files();
  EXPECT_GE(files.size(), 12u);
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    OpDecl decl = load_op_file(file);
    EXPECT_EQ(decl.base_dir, file.parent_path().string());
    ASSERT_TRUE(decl.spec.source_file.has_value());
    EXPECT_EQ(decl.spec.kernel_source, read_text(file.parent_path() / *decl.spec.source_file));
    expect_round_trip(decl);
  }
}

TEST(SpecJsonTest, LoadsRelu) {
  OpDecl d = testing::example("relu");
  EXPECT_EQ(d.op_name, "kernelop_examples::relu");
  EXPECT_EQ(d.spec.kernel_name, "relu");
  EXPECT_EQ(d.spec.source_file, std::optional<std::string>("relu.cu"));
  EXPECT_EQ(d.spec.kernel_source, read_text(testing::examples_dir() / "relu.cu"));
  EXPECT_EQ(d.base_dir, testing::examples_dir().string());
  ASSERT_TRUE(d.spec.inputs.has_value());
  ASSERT_EQ(d.spec.inputs->size(), 1u);
  EXPECT_TRUE((*d.spec.inputs)[0] == Input(InputDecl{.name = "x", .dtype = DType::Float32}));
  ASSERT_TRUE(d.spec.outputs.has_value());
  ASSERT_EQ(d.spec.outputs->size(), 1u);
  EXPECT_EQ((*d.spec.outputs)[0].name, "y");
  EXPECT_TRUE((*d.spec.outputs)[0].shape == ShapeRel(SameAs{"x", {}}));
  EXPECT_FALSE((*d.spec.outputs)[0].dtype_from.has_value());
  EXPECT_FALSE((*d.spec.outputs)[0].dtype.has_value());
  ASSERT_EQ(d.spec.extras.size(), 1u);
  EXPECT_TRUE(d.spec.extras[0] == Extra(Numel{.input = "x", .int64 = false}));
  Elementwise g;
  g.block = {256};
  g.layout = Layout::Flat;
  EXPECT_TRUE(d.spec.geometry == std::optional<Geometry>(g));
  EXPECT_EQ(d.spec.compile_std, "c++17");
  EXPECT_TRUE(d.spec.include_paths.empty());
  EXPECT_TRUE(d.spec.arch_override.empty());
  EXPECT_TRUE(d.spec.defines.empty());
  EXPECT_FALSE(d.spec.fast_math);
  EXPECT_FALSE(d.spec.line_info);
  EXPECT_TRUE(d.spec.type_params.empty());
}

TEST(SpecJsonTest, PrintsReluExactly) {
  EXPECT_EQ(print_op_json(testing::example("relu")), R"({
  "op": "kernelop_examples::relu",
  "kernel_name": "relu",
  "source_file": "relu.cu",
  "inputs": [
    {
      "name": "x",
      "dtype": "float32"
    }
  ],
  "outputs": [
    {
      "name": "y",
      "shape": {
        "same_as": "x"
      }
    }
  ],
  "extras": [
    {
      "numel": "x"
    }
  ],
  "geometry": {
    "elementwise": {
      "block": [
        256
      ],
      "layout": "flat"
    }
  }
}
)");
}

// A document that sets every field; `geometry` and `arch_override` are JSON texts.
std::string everything_json(const std::string& geometry, const std::string& arch_override) {
  return R"js({
  "op": "test::everything",
  "kernel_name": "everything<T, 128>",
  "kernel_source": "template <class T, int N>\n__global__ void everything() { /* \"q\" \\ \t \u00b5 */ }\n",
  "inputs": [
    {"name": "x", "dtype": "T"},
    {"name": "cache", "dtype": "float16", "mutated": true},
    {"name": "idx"},
    {"name": "a", "scalar": "float"},
    {"name": "b", "scalar": "float64"},
    {"name": "n", "scalar": "int"},
    {"name": "m", "scalar": "int64"},
    {"name": "flag", "scalar": "bool"}
  ],
  "outputs": [
    {"name": "y", "shape": {"same_as": "x"}},
    {"name": "z", "shape": {"same_as": 1}, "dtype_from": "idx"},
    {"name": "r", "shape": {"reduce_dims": {"input": "x", "dims": [-1, 0], "keepdim": true}},
     "dtype": "float32"},
    {"name": "r2", "shape": {"reduce_dims": {"input": 2, "dims": [1]}}, "dtype": "T"},
    {"name": "e", "shape": ["dim(x, 0)", 4, "n * 2", "cdiv(numel(x), m)", -1]}
  ],
  "extras": [
    {"numel": "x"},
    {"numel": "y", "int64": true},
    {"dim_size": "x", "axis": -1},
    {"dim_size": "cache", "axis": 0, "int64": true},
    {"expr": "numel_except(x, 0) // 2"},
    {"expr": 7, "int64": true}
  ],
  "geometry": )js" +
         geometry + R"js(,
  "include_paths": ["include", "/abs/inc"],
  "compile_std": "c++20",
  "arch_override": )js" +
         arch_override + R"js(,
  "defines": ["FOO", "BAR=2"],
  "fast_math": true,
  "line_info": true,
  "type_params": [{"name": "T", "dtypes": ["float32", "float16"]}]
})js";
}

// The OpDecl everything_json() describes.
OpDecl everything_decl(Geometry geometry, std::vector<std::string> arch_override) {
  OpDecl d;
  d.op_name = "test::everything";
  d.base_dir = kBaseDir;
  KernelSpec& s = d.spec;
  s.kernel_name = "everything<T, 128>";
  s.kernel_source =
      "template <class T, int N>\n__global__ void everything() { /* \"q\" \\ \t \xc2\xb5 */ }\n";
  InputDecl cache{.name = "cache", .dtype = DType::Float16};
  cache.mutated = true;
  s.inputs = std::vector<Input>{
      InputDecl{.name = "x", .dtype = std::string("T")},
      cache,
      InputDecl{.name = "idx", .dtype = std::nullopt},
      ScalarInput{.name = "a", .type = ScalarType::Float},
      ScalarInput{.name = "b", .type = ScalarType::Float64},
      ScalarInput{.name = "n", .type = ScalarType::Int},
      ScalarInput{.name = "m", .type = ScalarType::Int64},
      ScalarInput{.name = "flag", .type = ScalarType::Bool},
  };
  std::vector<OutputDecl> outputs(5);
  outputs[0].name = "y";
  outputs[0].shape = SameAs{"x", {}};
  outputs[1].name = "z";
  outputs[1].shape = SameAs{std::int64_t{1}, {}};
  outputs[1].dtype_from = "idx";
  outputs[2].name = "r";
  outputs[2].shape = ReduceDims{.input = "x", .dims = {-1, 0}, .keepdim = true};
  outputs[2].dtype = DType::Float32;
  outputs[3].name = "r2";
  outputs[3].shape = ReduceDims{.input = std::int64_t{2}, .dims = {1}, .keepdim = false};
  outputs[3].dtype = std::string("T");
  outputs[4].name = "e";
  outputs[4].shape = ShapeExprs{{Expr::dim("x", 0), Expr(4), Expr::scalar("n") * 2,
                                 cdiv(Expr::numel("x"), Expr::scalar("m")), Expr(-1)}};
  s.outputs = std::move(outputs);
  s.extras = {
      Numel{.input = "x", .int64 = false},
      Numel{.input = "y", .int64 = true},
      DimSize{.input = "x", .axis = -1, .int64 = false},
      DimSize{.input = "cache", .axis = 0, .int64 = true},
      ExtraExpr{.value = floordiv(Expr::numel_except("x", {0}), 2), .int64 = false},
      ExtraExpr{.value = 7, .int64 = true},
  };
  s.geometry = std::move(geometry);
  s.include_paths = {"include", "/abs/inc"};
  s.compile_std = "c++20";
  s.arch_override = std::move(arch_override);
  s.defines = {"FOO", "BAR=2"};
  s.fast_math = true;
  s.line_info = true;
  s.type_params = {TypeParam{.name = "T", .dtypes = {DType::Float32, DType::Float16}}};
  return d;
}

struct GeometryCase {
  std::string json;
  Geometry geometry;
};

std::vector<GeometryCase> geometry_cases() {
  Elementwise elementwise;
  elementwise.block = {16, 8};
  elementwise.layout = Layout::Nd;
  elementwise.over = "cache";
  Elementwise defaults;
  Reduction reduction;
  reduction.reduce_dims = {-1, 0};
  reduction.block_size = 128;
  reduction.shared_mem = Expr(128) * 4;
  Reduction reduction_defaults;
  reduction_defaults.reduce_dims = {1};
  Custom custom{.grid = {cdiv(Expr::numel("y"), 256), 1, Expr::scalar("n")},
                .block = {256, 2},
                .shared_mem = Expr::dim("x", -1) * 4,
                .cluster = {}};
  Custom custom_defaults{.grid = {1}, .block = {32}, .shared_mem = 0, .cluster = {}};
  Custom clustered{.grid = {2, Expr::scalar("n")},
                   .block = {128},
                   .shared_mem = 0,
                   .cluster = {2, Expr::parse("select(n > 4, 4, 1)")}};
  return {
      {R"({"elementwise": {"block": [16, 8], "layout": "nd", "over": "cache"}})", elementwise},
      {R"({"elementwise": {}})", defaults},
      {R"({"reduction": {"reduce_dims": [-1, 0], "block_size": 128, "shared_mem": "128 * 4"}})",
       reduction},
      {R"({"reduction": {"reduce_dims": [1]}})", reduction_defaults},
      {R"js({"custom": {"grid": ["cdiv(numel(y), 256)", 1, "n"], "block": [256, "2"],
                     "shared_mem": "dim(x, -1) * 4"}})js",
       custom},
      {R"({"custom": {"grid": [1], "block": [32]}})", custom_defaults},
      {R"js({"custom": {"grid": [2, "n"], "block": [128], "cluster": [2, "select(n > 4, 4, 1)"]}})js",
       clustered},
  };
}

TEST(SpecJsonTest, EveryFieldRoundTrips) {
  for (const auto& [geometry_json, geometry] : geometry_cases()) {
    SCOPED_TRACE(geometry_json);
    std::string text = everything_json(geometry_json, R"(["sm_90", "compute_80"])");
    OpDecl parsed = parse_op_json(text, kBaseDir, "everything.json");
    OpDecl expected = everything_decl(geometry, {"sm_90", "compute_80"});
    EXPECT_TRUE(parsed == expected) << "parsed:\n"
                                    << print_op_json(parsed) << "expected:\n"
                                    << print_op_json(expected);
    EXPECT_NO_THROW(validate(parsed));
    expect_round_trip(parsed);
  }
}

TEST(SpecJsonTest, ArchOverrideAsString) {
  Elementwise g;
  OpDecl parsed = parse_op_json(everything_json(R"({"elementwise": {}})", R"("sm_90")"), kBaseDir);
  EXPECT_EQ(parsed.spec.arch_override, std::vector<std::string>{"sm_90"});
  EXPECT_TRUE(parsed == everything_decl(g, {"sm_90"}));
  expect_round_trip(parsed);
  // The printed form is always a list.
  EXPECT_NE(print_op_json(parsed).find("\"arch_override\": [\n    \"sm_90\"\n  ]"),
            std::string::npos)
      << print_op_json(parsed);
}

TEST(SpecJsonTest, StringListsAcceptASingleString) {
  OpDecl d = parse(Doc().set("include_paths", R"("inc")").set("defines", R"("FOO=1")"));
  EXPECT_EQ(d.spec.include_paths, std::vector<std::string>{"inc"});
  EXPECT_EQ(d.spec.defines, std::vector<std::string>{"FOO=1"});
}

TEST(SpecJsonTest, DefaultsAreOmittedWhenPrinting) {
  OpDecl d = parse(Doc()
                       .set("inputs", R"([{"name": "x", "mutated": false}])")
                       .set("compile_std", R"("c++17")")
                       .set("fast_math", "false")
                       .set("line_info", "false")
                       .set("extras", R"([{"numel": "x", "int64": false}])")
                       .set("outputs",
                            R"([{"name": "y", "shape": {"reduce_dims": {"dims": [0],
                                 "keepdim": false}}}])"));
  std::string text = print_op_json(d);
  for (std::string absent :
       {"mutated", "compile_std", "fast_math", "line_info", "int64", "keepdim", "dtype",
        "include_paths", "arch_override", "defines", "type_params", "source_file"}) {
    EXPECT_EQ(text.find("\"" + absent + "\""), std::string::npos) << absent << " in\n" << text;
  }
  expect_round_trip(d);
}

TEST(SpecJsonTest, BaseDocument) {
  OpDecl d = parse(Doc());
  EXPECT_EQ(d.op_name, "test::relu");
  EXPECT_EQ(d.base_dir, kBaseDir);
  EXPECT_EQ(d.spec.kernel_source, "__global__ void relu() {}");
  EXPECT_FALSE(d.spec.source_file.has_value());
  EXPECT_NO_THROW(validate(d));
  // Without a source file the kernel is printed inline.
  std::string text = print_op_json(d);
  EXPECT_NE(text.find("\"kernel_source\": \"__global__ void relu() {}\""), std::string::npos);
  EXPECT_EQ(text.find("source_file"), std::string::npos);
}

TEST(SpecJsonTest, OptionalSectionsStayAbsent) {
  OpDecl d = parse(Doc().erase("inputs").erase("outputs").erase("extras").erase("geometry"));
  EXPECT_FALSE(d.spec.inputs.has_value());
  EXPECT_FALSE(d.spec.outputs.has_value());
  EXPECT_TRUE(d.spec.extras.empty());
  EXPECT_FALSE(d.spec.geometry.has_value());
  expect_round_trip(d);
  // Empty lists are kept apart from absent ones.
  OpDecl empty = parse(Doc().set("outputs", "[]"));
  ASSERT_TRUE(empty.spec.outputs.has_value());
  EXPECT_TRUE(empty.spec.outputs->empty());
  expect_round_trip(empty);
}

TEST(SpecJsonTest, InputRefForms) {
  OpDecl d = parse(Doc().set("outputs", R"([
      {"name": "y", "shape": {"same_as": 0}},
      {"name": "z", "shape": {"same_as": "0"}},
      {"name": "w", "shape": {"reduce_dims": {"dims": [1]}}}])"));
  const auto& outputs = *d.spec.outputs;
  EXPECT_TRUE(std::get<SameAs>(outputs[0].shape).input == InputRef(std::int64_t{0}));
  EXPECT_TRUE(std::get<SameAs>(outputs[1].shape).input == InputRef(std::string("0")));
  // reduce_dims.input defaults to tensor input 0.
  EXPECT_TRUE(std::get<ReduceDims>(outputs[2].shape).input == InputRef(std::int64_t{0}));
  expect_round_trip(d);
}

TEST(SpecJsonTest, InlineSourceOption) {
  OpDecl d = testing::example("relu");
  std::string text = print_op_json(d, {.indent = 2, .inline_source = true});
  EXPECT_EQ(text.find("\"source_file\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"kernel_source\""), std::string::npos) << text;
  // The inline form needs no file: parse it against a directory that does not exist.
  OpDecl inlined = parse_op_json(text, kBaseDir);
  OpDecl expected = d;
  expected.spec.source_file.reset();
  expected.base_dir = kBaseDir;
  EXPECT_TRUE(inlined == expected) << print_op_json(inlined);
  EXPECT_EQ(print_op_json(inlined), text);
}

TEST(SpecJsonTest, IndentOption) {
  OpDecl d = parse(Doc());
  std::string compact = print_op_json(d, {.indent = -1, .inline_source = false});
  EXPECT_EQ(compact.find('\n'), compact.size() - 1) << compact;
  EXPECT_TRUE(compact.starts_with(R"({"op":"test::relu","kernel_name":"relu","kernel_source":)"))
      << compact;
  EXPECT_TRUE(parse_op_json(compact, kBaseDir) == d);
  std::string four = print_op_json(d, {.indent = 4, .inline_source = false});
  EXPECT_TRUE(four.starts_with("{\n    \"op\": \"test::relu\",\n    \"kernel_name\"")) << four;
}

TEST(SpecJsonTest, DtypeAliases) {
  OpDecl d = parse(
      Doc()
          .set("kernel_name", R"("relu<T>")")
          .set("inputs", R"([{"name": "a", "dtype": "float"},
                                          {"name": "b", "dtype": "half"},
                                          {"name": "c", "dtype": "torch.bfloat16"},
                                          {"name": "d", "dtype": "double"},
                                          {"name": "e", "dtype": "long"},
                                          {"name": "f", "dtype": "torch.int32"},
                                          {"name": "g", "dtype": "float8_e4m3"}])")
          .set("outputs", R"([{"name": "y", "shape": {"same_as": 0}, "dtype": "torch.half"}])")
          .set("extras", "[]")
          .set("type_params", R"([{"name": "T", "dtypes": ["float", "int"]}])"));
  std::vector<DType> expected = {DType::Float32, DType::Float16, DType::BFloat16,  DType::Float64,
                                 DType::Int64,   DType::Int32,   DType::Float8E4M3};
  ASSERT_EQ(d.spec.inputs->size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& input = std::get<InputDecl>((*d.spec.inputs)[i]);
    EXPECT_TRUE(input.dtype == std::optional<DTypeDecl>(expected[i])) << input.name;
  }
  EXPECT_TRUE((*d.spec.outputs)[0].dtype == std::optional<DTypeDecl>(DType::Float16));
  EXPECT_EQ(d.spec.type_params[0].dtypes, (std::vector<DType>{DType::Float32, DType::Int32}));
  std::string text = print_op_json(d);
  for (std::string name : {"\"float32\"", "\"float16\"", "\"bfloat16\"", "\"float64\"", "\"int64\"",
                           "\"int32\"", "\"float8_e4m3fn\""}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
  for (std::string alias : {"\"float\"", "\"half\"", "torch.", "\"double\"", "\"long\"", "\"int\"",
                            "\"float8_e4m3\""}) {
    EXPECT_EQ(text.find(alias), std::string::npos) << alias;
  }
  expect_round_trip(d);
}

TEST(SpecJsonTest, UnknownDtypeNameIsATypeParameterReference) {
  OpDecl d = parse(Doc().set("inputs", R"([{"name": "x", "dtype": "float31"}])"));
  EXPECT_TRUE(std::get<InputDecl>((*d.spec.inputs)[0]).dtype ==
              std::optional<DTypeDecl>(std::string("float31")));
  expect_error([&] { validate(d); }, ErrorKind::Spec,
               "inputs[0].dtype: 'float31' is neither a dtype nor a type parameter");
}

// --- files ----------------------------------------------------------------------------------

TEST(SpecJsonTest, SourceFileResolvesAgainstBaseDir) {
  TempDir dir;
  fs::create_directories(dir.path() / "kernels");
  write_text(dir.path() / "kernels" / "k.cu", "__global__ void relu() { /* from file */ }\n");
  Doc doc;
  doc.erase("kernel_source").set("source_file", R"("kernels/k.cu")");
  OpDecl d = parse_op_json(doc.str(), dir.path().string(), "t.json");
  EXPECT_EQ(d.spec.kernel_source, "__global__ void relu() { /* from file */ }\n");
  EXPECT_EQ(d.spec.source_file, std::optional<std::string>("kernels/k.cu"));
  EXPECT_EQ(d.base_dir, dir.path().string());
  expect_round_trip(d);
  // load_op_file takes the spec file's folder as the base directory.
  write_text(dir.path() / "op.json", doc.str());
  OpDecl loaded = load_op_file(dir.path() / "op.json");
  EXPECT_TRUE(loaded == d);
}

TEST(SpecJsonTest, LoadOpFileWithBarePathUsesCurrentDirectory) {
  TempDir dir;
  write_text(dir.path() / "k.cu", "__global__ void relu() {}\n");
  write_text(dir.path() / "op.json",
             Doc().erase("kernel_source").set("source_file", R"("k.cu")").str());
  fs::path old = fs::current_path();
  fs::current_path(dir.path());
  OpDecl d;
  EXPECT_NO_THROW(d = load_op_file("op.json"));
  fs::current_path(old);
  EXPECT_EQ(d.base_dir, ".");
  EXPECT_EQ(d.spec.kernel_source, "__global__ void relu() {}\n");
}

TEST(SpecJsonTest, LoadOpFileMissing) {
  expect_error([] { load_op_file("/nonexistent-kernelop-dir/op.json"); }, ErrorKind::Io,
               "cannot read spec file '/nonexistent-kernelop-dir/op.json'");
}

TEST(SpecJsonTest, LoadOpFileOnADirectory) {
  TempDir dir;
  expect_error([&] { load_op_file(dir.path()); }, ErrorKind::Io,
               "cannot read spec file '" + dir.path().string() + "'");
}

TEST(SpecJsonTest, LoadOpFileErrorsNameTheFile) {
  TempDir dir;
  fs::path file = dir.path() / "bad.json";
  write_text(file, R"({"op": 1})");
  expect_error([&] { load_op_file(file); }, ErrorKind::Spec,
               file.string() + ": op: expected a string, found number");
}

TEST(SpecJsonTest, UnreadableSourceFile) {
  Doc doc;
  doc.erase("kernel_source").set("source_file", R"("missing.cu")");
  expect_parse_error(doc, ErrorKind::Spec,
                     std::string("t.json: source_file: cannot read '") + kBaseDir + "/missing.cu'");
  // A directory opens as a stream but has no text.
  TempDir dir;
  fs::create_directories(dir.path() / "kernels");
  doc.set("source_file", R"("kernels")");
  expect_error([&] { parse_op_json(doc.str(), dir.path().string(), "t.json"); }, ErrorKind::Spec,
               "t.json: source_file: cannot read '" + (dir.path() / "kernels").string() + "'");
}

// --- errors ---------------------------------------------------------------------------------

TEST(SpecJsonTest, NotJson) {
  for (std::string text : {"", "{", "{\"op\": }", "{} x", "{'op': 1}"}) {
    expect_parse_error(text, ErrorKind::Spec, "t.json: not valid JSON: ");
  }
  expect_error([] { parse_op_json("{", kBaseDir); }, ErrorKind::Spec, "<json>: not valid JSON");
}

TEST(SpecJsonTest, RootNotAnObject) {
  expect_parse_error("[1]", ErrorKind::Spec, "t.json: expected an object, found array");
  expect_parse_error("\"op\"", ErrorKind::Spec, "t.json: expected an object, found string");
}

TEST(SpecJsonTest, UnknownTopLevelField) {
  expect_parse_error(
      Doc().set("kernel", R"("relu")"), ErrorKind::Spec,
      "t.json: kernel: unknown field (known fields: op, kernel_name, "
      "kernel_source, source_file, inputs, outputs, extras, params, geometry, "
      "include_paths, compile_std, arch_override, defines, fast_math, line_info, "
      "type_params, requires, tunables, configs, tuning_key, triton, cutedsl, cutile, "
      "backward, then, when)");
}

TEST(SpecJsonTest, RequirementsParseAndPrint) {
  OpDecl d = parse_op_json(
      Doc()
          .set("requires",
               R"J(["dim(x,0)==4", "numel(x) <= 2 * 2", "dim(x, -1)!=cdiv(numel(x), 2)"])J")
          .str(),
      kBaseDir, "t.json");
  ASSERT_EQ(d.spec.requirements.size(), 3u);
  EXPECT_EQ(d.spec.requirements[0].to_string(), "dim(x, 0) == 4");
  EXPECT_EQ(d.spec.requirements[0].condition.op(), ExprOp::Eq);
  EXPECT_EQ(d.spec.requirements[2].condition.op(), ExprOp::Ne);
  EXPECT_EQ(parse_op_json(print_op_json(d), kBaseDir, "again").spec.requirements,
            d.spec.requirements);
  // Any expression is a condition (nonzero holds): aligned() and select() need no comparison.
  EXPECT_EQ(Requirement::parse("aligned(x,16)").to_string(), "aligned(x, 16)");
  EXPECT_EQ(Requirement::parse("dim(x, 0)").condition, Expr::dim("x", 0));
}

TEST(SpecJsonTest, MalformedRequirementsNameTheEntry) {
  expect_parse_error(Doc().set("requires", R"J(["1 < dim(x, 0) < 4"])J"), ErrorKind::Spec,
                     "t.json: requires[0]: invalid expression '1 < dim(x, 0) < 4' at column 16: "
                     "comparisons do not chain");
  expect_parse_error(Doc().set("requires", R"J(["dim(x, 0) =< 4"])J"), ErrorKind::Spec,
                     "requires[0]: invalid expression 'dim(x, 0) =< 4' at column 11: unknown "
                     "operator '='");
  expect_parse_error(Doc().set("requires", R"J(["dim(x, 0) = 4"])J"), ErrorKind::Spec,
                     "unknown operator '='");
  expect_parse_error(Doc().set("requires", R"J(["dim(x, ) == 4"])J"), ErrorKind::Spec,
                     "requires[0]: ");
  expect_parse_error(Doc().set("requires", R"J([3])J"), ErrorKind::Spec,
                     "requires[0]: expected a string, found number");
}

TEST(SpecJsonTest, UnknownNestedField) {
  expect_parse_error(Doc().set("inputs", R"([{"name": "x", "dtyp": "float32"}])"), ErrorKind::Spec,
                     "t.json: inputs[0].dtyp: unknown field (known fields: name, dtype, mutated");
  expect_parse_error(
      Doc().set("inputs", R"([{"name": "x"}, {"name": "s", "scalar": "int", "dtype": "int32"}])"),
      ErrorKind::Spec,
      "t.json: inputs[1].dtype: unknown field (known fields: name, scalar, symint, default)");
  expect_parse_error(
      Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": "x"}, "dtype_form": "x"}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].dtype_form: unknown field (known fields: name, shape, dtype_from, "
      "dtype, init, scratch, permute, align)");
  expect_parse_error(
      Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": "x", "dimz": [0]}}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].shape.dimz: unknown field (known fields: same_as, dims)");
  expect_parse_error(
      Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": "x", "dims": [0]}}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].shape.dims: expected an object of axis: expression, e.g. {\"-1\": ");
  expect_parse_error(
      Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": "x", "dims": {"last": 1}}}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].shape.dims.last: 'last' is not an axis; expected an integer like \"-1\"");
  expect_parse_error(
      Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": "x", "dims": {"-1x": 1}}}])"),
      ErrorKind::Spec, "'-1x' is not an axis");
  expect_parse_error(Doc().set("params", R"(["x", 3])"), ErrorKind::Spec,
                     "t.json: params[1]: expected an input or output name, an extra such as "
                     "{\"expr\": ...} or a {\"struct\": [...]}, found number");
  expect_parse_error(Doc().set("params", R"(["x", {"exp": "1"}])"), ErrorKind::Spec,
                     "t.json: params[1]: expected {\"numel\": ...}");
  expect_parse_error(Doc().set("inputs", R"([{"name": "x", "strided": 1}])"), ErrorKind::Spec,
                     "t.json: inputs[0].strided: expected true or false, found number");
  expect_parse_error(
      Doc().set("outputs",
                R"([{"name": "y", "shape": {"reduce_dims": {"dims": [0], "keep_dim": true}}}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].shape.reduce_dims.keep_dim: unknown field (known fields: input, dims, "
      "keepdim)");
  expect_parse_error(Doc().set("extras", R"([{"numel": "x", "axis": 0}])"), ErrorKind::Spec,
                     "t.json: extras[0].axis: unknown field (known fields: numel, int64)");
  expect_parse_error(Doc().set("extras", R"([{"expr": 1, "input": "x"}])"), ErrorKind::Spec,
                     "t.json: extras[0].input: unknown field (known fields: expr, int64)");
  expect_parse_error(Doc().set("geometry", R"({"elementwise": {"blocks": [256]}})"),
                     ErrorKind::Spec,
                     "t.json: geometry.elementwise.blocks: unknown field (known fields: block, "
                     "layout, over)");
  expect_parse_error(Doc().set("geometry", R"({"reduction": {"reduce_dims": [0], "block": 64}})"),
                     ErrorKind::Spec,
                     "t.json: geometry.reduction.block: unknown field (known fields: reduce_dims, "
                     "block_size, shared_mem)");
  expect_parse_error(Doc().set("geometry", R"({"custom": {"grid": [1], "block": [1], "smem": 0}})"),
                     ErrorKind::Spec,
                     "t.json: geometry.custom.smem: unknown field (known fields: grid, block, "
                     "shared_mem, cluster)");
  expect_parse_error(
      Doc().set("type_params", R"([{"name": "T", "dtypes": ["float32"], "default": "float32"}])"),
      ErrorKind::Spec,
      "t.json: type_params[0].default: unknown field (known fields: name, dtypes)");
}

TEST(SpecJsonTest, StringExpected) {
  expect_parse_error(Doc().set("op", "5"), ErrorKind::Spec,
                     "t.json: op: expected a string, found number");
  expect_parse_error(Doc().set("kernel_name", "null"), ErrorKind::Spec,
                     "t.json: kernel_name: expected a string, found null");
  expect_parse_error(Doc().set("kernel_source", "[]"), ErrorKind::Spec,
                     "t.json: kernel_source: expected a string, found array");
  expect_parse_error(Doc().set("inputs", R"([{"dtype": "float32"}])"), ErrorKind::Spec,
                     "t.json: inputs[0].name: expected a string, found null");
  expect_parse_error(Doc().set("inputs", R"([{"name": "x", "dtype": 32}])"), ErrorKind::Spec,
                     "t.json: inputs[0].dtype: expected a string, found number");
  expect_parse_error(Doc().set("extras", R"([{"numel": 0}])"), ErrorKind::Spec,
                     "t.json: extras[0].numel: expected a string, found number");
  expect_parse_error(Doc().set("defines", R"(["A", 1])"), ErrorKind::Spec,
                     "t.json: defines[1]: expected a string, found number");
  expect_parse_error(Doc().set("compile_std", "17"), ErrorKind::Spec,
                     "t.json: compile_std: expected a string, found number");
  expect_parse_error(Doc().set("geometry", R"({"elementwise": {"over": ["x"]}})"), ErrorKind::Spec,
                     "t.json: geometry.elementwise.over: expected a string, found array");
}

TEST(SpecJsonTest, IntegerExpected) {
  expect_parse_error(Doc().set("extras", R"([{"dim_size": "x", "axis": "1"}])"), ErrorKind::Spec,
                     "t.json: extras[0].axis: expected an integer, found string");
  expect_parse_error(Doc().set("extras", R"([{"dim_size": "x", "axis": 1.0}])"), ErrorKind::Spec,
                     "t.json: extras[0].axis: expected an integer, found number");
  expect_parse_error(
      Doc().set("outputs", R"([{"name": "y", "shape": {"reduce_dims": {"dims": [0, "1"]}}}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].shape.reduce_dims.dims[1]: expected an integer, found string");
  expect_parse_error(Doc().set("geometry", R"({"elementwise": {"block": [256.0]}})"),
                     ErrorKind::Spec,
                     "t.json: geometry.elementwise.block[0]: expected an integer, found number");
  expect_parse_error(
      Doc().set("geometry", R"({"reduction": {"reduce_dims": [0], "block_size": "256"}})"),
      ErrorKind::Spec, "t.json: geometry.reduction.block_size: expected an integer, found string");
  expect_parse_error(Doc().set("extras", R"([{"dim_size": "x", "axis": 18446744073709551615}])"),
                     ErrorKind::Spec, "t.json: extras[0].axis: out of range");
}

TEST(SpecJsonTest, BoolExpected) {
  expect_parse_error(Doc().set("fast_math", R"("true")"), ErrorKind::Spec,
                     "t.json: fast_math: expected true or false, found string");
  expect_parse_error(Doc().set("line_info", "1"), ErrorKind::Spec,
                     "t.json: line_info: expected true or false, found number");
  expect_parse_error(Doc().set("inputs", R"([{"name": "x", "mutated": "yes"}])"), ErrorKind::Spec,
                     "t.json: inputs[0].mutated: expected true or false, found string");
  expect_parse_error(Doc().set("extras", R"([{"numel": "x", "int64": 1}])"), ErrorKind::Spec,
                     "t.json: extras[0].int64: expected true or false, found number");
  expect_parse_error(
      Doc().set("outputs",
                R"([{"name": "y", "shape": {"reduce_dims": {"dims": [0], "keepdim": null}}}])"),
      ErrorKind::Spec,
      "t.json: outputs[0].shape.reduce_dims.keepdim: expected true or false, found null");
}

TEST(SpecJsonTest, ArrayExpected) {
  expect_parse_error(Doc().set("inputs", R"({"name": "x"})"), ErrorKind::Spec,
                     "t.json: inputs: expected an array, found object");
  expect_parse_error(Doc().set("outputs", R"("y")"), ErrorKind::Spec,
                     "t.json: outputs: expected an array, found string");
  expect_parse_error(Doc().set("extras", R"({"numel": "x"})"), ErrorKind::Spec,
                     "t.json: extras: expected an array, found object");
  expect_parse_error(Doc().set("include_paths", "3"), ErrorKind::Spec,
                     "t.json: include_paths: expected an array, found number");
  expect_parse_error(Doc().set("type_params", R"({"name": "T"})"), ErrorKind::Spec,
                     "t.json: type_params: expected an array, found object");
  expect_parse_error(Doc().set("type_params", R"([{"name": "T", "dtypes": "float32"}])"),
                     ErrorKind::Spec,
                     "t.json: type_params[0].dtypes: expected an array, found string");
  expect_parse_error(Doc().set("geometry", R"({"elementwise": {"block": 256}})"), ErrorKind::Spec,
                     "t.json: geometry.elementwise.block: expected an array, found number");
  expect_parse_error(Doc().set("geometry", R"({"custom": {"grid": "1", "block": [1]}})"),
                     ErrorKind::Spec,
                     "t.json: geometry.custom.grid: expected an array, found string");
}

TEST(SpecJsonTest, ObjectExpected) {
  expect_parse_error(Doc().set("inputs", R"(["x"])"), ErrorKind::Spec,
                     "t.json: inputs[0]: expected an object, found string");
  expect_parse_error(Doc().set("outputs", "[[]]"), ErrorKind::Spec,
                     "t.json: outputs[0]: expected an object, found array");
  expect_parse_error(Doc().set("geometry", R"({"elementwise": [256]})"), ErrorKind::Spec,
                     "t.json: geometry.elementwise: expected an object, found array");
  expect_parse_error(Doc().set("type_params", R"(["T"])"), ErrorKind::Spec,
                     "t.json: type_params[0]: expected an object, found string");
}

TEST(SpecJsonTest, BadDtypeName) {
  expect_parse_error(
      Doc()
          .set("kernel_name", R"("relu<T>")")
          .set("type_params", R"([{"name": "T", "dtypes": ["float32", "float31"]}])"),
      ErrorKind::Spec,
      "t.json: type_params[0].dtypes[1]: 'float31' is not a dtype (dtypes: float32, float16, "
      "bfloat16, float64, float8_e4m3fn, float8_e5m2, int8, uint8, int16, int32, int64, bool)");
}

TEST(SpecJsonTest, BadScalarType) {
  expect_parse_error(Doc().set("inputs", R"([{"name": "x"}, {"name": "s", "scalar": "double"}])"),
                     ErrorKind::Spec,
                     "t.json: inputs[1].scalar: 'double' is not a scalar type; expected float, "
                     "int or bool (or the 64-bit float64, int64)");
  expect_parse_error(Doc().set("inputs", R"([{"name": "s", "scalar": 1}])"), ErrorKind::Spec,
                     "t.json: inputs[0].scalar: expected a string, found number");
}

TEST(SpecJsonTest, BadLayout) {
  expect_parse_error(Doc().set("geometry", R"({"elementwise": {"layout": "linear"}})"),
                     ErrorKind::Spec,
                     "t.json: geometry.elementwise.layout: 'linear' is not a layout; expected "
                     "'flat' or 'nd'");
}

TEST(SpecJsonTest, BadExpression) {
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": ["dim(x, 0) $ 2"]}])"),
                     ErrorKind::Spec,
                     "t.json: outputs[0].shape[0]: invalid expression 'dim(x, 0) $ 2' at "
                     "column 11: unexpected '$'");
  expect_parse_error(Doc().set("extras", R"([{"expr": "numel(x) +"}])"), ErrorKind::Spec,
                     "t.json: extras[0].expr: invalid expression 'numel(x) +' at column 11: "
                     "unexpected end");
  expect_parse_error(
      Doc().set("geometry",
                R"js({"custom": {"grid": [1], "block": [1], "shared_mem": "foo(x)"}})js"),
      ErrorKind::Spec,
      "t.json: geometry.custom.shared_mem: invalid expression 'foo(x)' at column 5: unknown "
      "function 'foo'");
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": [1.5]}])"), ErrorKind::Spec,
                     "t.json: outputs[0].shape[0]: expected an expression (string or integer), "
                     "found number");
}

TEST(SpecJsonTest, KernelSourceAndSourceFile) {
  const std::string msg =
      "t.json: expected exactly one of kernel_source (inline text) and source_file (a path)";
  expect_parse_error(Doc().set("source_file", R"("relu.cu")"), ErrorKind::Spec, msg);
  expect_parse_error(Doc().erase("kernel_source"), ErrorKind::Spec, msg);
}

TEST(SpecJsonTest, MissingFields) {
  expect_parse_error(Doc().erase("op"), ErrorKind::Spec,
                     "t.json: op: missing; expected \"namespace::name\"");
  expect_parse_error(Doc().erase("kernel_name"), ErrorKind::Spec, "t.json: kernel_name: missing");
  expect_parse_error(Doc().set("outputs", R"([{"name": "y"}])"), ErrorKind::Spec,
                     "t.json: outputs[0].shape: missing");
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": {"reduce_dims": {}}}])"),
                     ErrorKind::Spec,
                     "t.json: outputs[0].shape.reduce_dims.dims: missing; expected the axes to "
                     "reduce");
  expect_parse_error(Doc().set("extras", R"([{"dim_size": "x"}])"), ErrorKind::Spec,
                     "t.json: extras[0].axis: missing");
  expect_parse_error(Doc().set("geometry", R"({"reduction": {"block_size": 64}})"), ErrorKind::Spec,
                     "t.json: geometry.reduction.reduce_dims: missing");
  expect_parse_error(Doc().set("geometry", R"({"custom": {"block": [1]}})"), ErrorKind::Spec,
                     "t.json: geometry.custom.grid: missing");
  expect_parse_error(Doc().set("geometry", R"({"custom": {"grid": [1]}})"), ErrorKind::Spec,
                     "t.json: geometry.custom.block: missing");
  expect_parse_error(Doc().set("type_params", R"([{"name": "T"}])"), ErrorKind::Spec,
                     "t.json: type_params[0].dtypes: missing");
}

TEST(SpecJsonTest, ShapeOfTheWrongForm) {
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": "x"}])"), ErrorKind::Spec,
                     "t.json: outputs[0].shape: expected {\"same_as\": ...}, {\"reduce_dims\": "
                     "{...}} or a list of expressions, found \"x\"");
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": {"same": "x"}}])"),
                     ErrorKind::Spec,
                     "t.json: outputs[0].shape: expected {\"same_as\": ...}, {\"reduce_dims\": "
                     "{...}} or a list of expressions, found {\"same\":\"x\"}");
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": 3}])"), ErrorKind::Spec,
                     "found 3");
}

TEST(SpecJsonTest, ExtraOfTheWrongForm) {
  expect_parse_error(Doc().set("extras", R"([{"foo": 1}])"), ErrorKind::Spec,
                     "t.json: extras[0]: expected {\"numel\": ...}, {\"dim_size\": ..., "
                     "\"axis\": ...}, {\"expr\": ...} or {\"float\": ...}, found {\"foo\":1}");
  expect_parse_error(Doc().set("extras", R"(["x"])"), ErrorKind::Spec,
                     "t.json: extras[0]: expected {\"numel\": ...}");
}

TEST(SpecJsonTest, GeometryOfTheWrongKindIsATypeError) {
  const std::string msg =
      "t.json: geometry: expected exactly one of {\"elementwise\": ...}, {\"reduction\": ...}, "
      "{\"custom\": ...}, found ";
  expect_parse_error(
      Doc().set("geometry", R"({"elementwise": {}, "reduction": {"reduce_dims": [0]}})"),
      ErrorKind::Type, msg + R"({"elementwise":{},"reduction":{"reduce_dims":[0]}})");
  expect_parse_error(Doc().set("geometry", R"({"tiled": {}})"), ErrorKind::Type,
                     msg + R"({"tiled":{}})");
  expect_parse_error(Doc().set("geometry", "{}"), ErrorKind::Type, msg + "{}");
  expect_parse_error(Doc().set("geometry", R"("elementwise")"), ErrorKind::Type,
                     msg + R"("elementwise")");
}

TEST(SpecJsonTest, InputRefOfTheWrongTypeIsATypeError) {
  const std::string expected =
      ": expected a tensor input's name or its index among the tensor inputs, found ";
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": 1.5}}])"),
                     ErrorKind::Type, "t.json: outputs[0].shape.same_as" + expected + "number");
  expect_parse_error(Doc().set("outputs", R"([{"name": "y", "shape": {"same_as": true}}])"),
                     ErrorKind::Type, "t.json: outputs[0].shape.same_as" + expected + "boolean");
  expect_parse_error(
      Doc().set("outputs",
                R"([{"name": "y", "shape": {"reduce_dims": {"input": ["x"], "dims": [0]}}}])"),
      ErrorKind::Type, "t.json: outputs[0].shape.reduce_dims.input" + expected + "array");
}

}  // namespace
}  // namespace kernelop

namespace kernelop {
namespace {

TEST(SpecJsonStrictness, DuplicateKeysAreErrors) {
  testing::expect_error(
      [] {
        parse_op_json(R"({"op": "a::b", "op": "c::d", "kernel_name": "k", "kernel_source": "x"})",
                      ".", "dup.json");
      },
      ErrorKind::Spec, "dup.json: field 'op' is given twice");
  testing::expect_error(
      [] {
        parse_op_json(R"({"op": "a::b", "kernel_name": "k", "kernel_source": "x",
                          "inputs": [{"name": "x", "dtype": "float32", "dtype": "float16"}]})",
                      ".", "dup.json");
      },
      ErrorKind::Spec, "field 'dtype' is given twice");
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_op_json(R"({"op": "a::b", "kernel_name": "k", "kernel_source": "x",
                                   "inputs": [{"name": "x"}, {"name": "y"}]})",
                                ".", "ok.json"));
}

// Spec JSON is also read from untrusted packages: malformed input is an Error, never a crash.
TEST(SpecJsonStrictness, NumbersBeyondDoubleAreSpecErrors) {
  // nlohmann reports these as out_of_range, not parse_error.
  testing::expect_error([] { parse_op_json(R"({"op": 1e999})", ".", "big.json"); }, ErrorKind::Spec,
                        "big.json: not valid JSON: ");
  testing::expect_error([] { parse_op_json(R"({"op": -1e999})", ".", "big.json"); },
                        ErrorKind::Spec, "number overflow");
}

TEST(SpecJsonStrictness, DeepNestingIsASpecError) {
  auto nested = [](int levels) {
    return R"({"op": "a::b", "kernel_name": "k", "kernel_source": "x", "inputs": )" +
           std::string(static_cast<std::size_t>(levels), '[') +
           std::string(static_cast<std::size_t>(levels), ']') + "}";
  };
  // The document itself is one level; 63 more are accepted (and then fail as an input list).
  testing::expect_error([&] { parse_op_json(nested(63), ".", "deep.json"); }, ErrorKind::Spec,
                        "deep.json: inputs[0]: expected an object, found array");
  testing::expect_error([&] { parse_op_json(nested(64), ".", "deep.json"); }, ErrorKind::Spec,
                        "deep.json: not valid JSON: nests deeper than 64 levels");
  testing::expect_error([&] { parse_op_json(nested(100000), ".", "deep.json"); }, ErrorKind::Spec,
                        "deep.json: not valid JSON: nests deeper than 64 levels");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"a": )";
  objects += "1" + std::string(100000, '}');
  testing::expect_error([&] { parse_op_json(objects, ".", "deep.json"); }, ErrorKind::Spec,
                        "deep.json: not valid JSON: nests deeper than 64 levels");
}

TEST(SpecJsonStrictness, PrintingTextThatIsNotUtf8IsASpecError) {
  OpDecl d = parse_op_json(
      R"({"op": "a::b", "kernel_name": "k", "kernel_source": "x", "inputs": [{"name": "x"}]})", ".",
      "ok.json");
  d.spec.kernel_source = "// caf\xe9 (Latin-1)\n__global__ void k() {}";
  testing::expect_error([&] { print_op_json(d); }, ErrorKind::Spec,
                        "op a::b: cannot print the spec as JSON: ");
}

// --- initialised outputs (Note [initialised outputs]) -----------------------------------------

TEST(OutputInitTest, FillsAndClonesReadPrintAndRoundTrip) {
  OpDecl d = parse(Doc().set("outputs", R"([
      {"name": "a", "shape": {"same_as": "x"}, "init": {"fill": 0}},
      {"name": "b", "shape": {"same_as": "x"}, "init": {"fill": -2.5}},
      {"name": "c", "shape": {"same_as": "x"}, "init": {"fill": "-inf"}},
      {"name": "e", "shape": {"same_as": "x"}, "init": {"fill": "nan"}},
      {"name": "f", "shape": {"same_as": "x"}, "init": {"fill": true}},
      {"name": "g", "shape": {"same_as": "x"}, "init": {"clone": "x"}},
      {"name": "h", "shape": {"same_as": "x"}}])"));
  const auto& o = *d.spec.outputs;
  EXPECT_EQ(std::get<FillInit>(*o[0].init).value, 0.0);
  EXPECT_EQ(std::get<FillInit>(*o[1].init).value, -2.5);
  EXPECT_EQ(std::get<FillInit>(*o[2].init).value, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(std::get<FillInit>(*o[3].init).value));
  EXPECT_EQ(std::get<FillInit>(*o[4].init).value, 1.0);
  EXPECT_EQ(std::get<CloneInit>(*o[5].init).input, "x");
  EXPECT_FALSE(o[6].init.has_value());
  EXPECT_NO_THROW(validate(d));
  expect_round_trip(d);  // NaN included: a fill compares by its bits
  std::string text = print_op_json(d);
  EXPECT_NE(text.find(R"("fill": "-inf")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("fill": "nan")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("clone": "x")"), std::string::npos) << text;
  // The plan carries them to the launch.
  OpPlan p = derive_plan(d);
  EXPECT_EQ(p.outputs[0].fill->value, 0.0);
  EXPECT_EQ(p.outputs[5].clone_slot, p.tensor_slot("x"));
  EXPECT_FALSE(p.outputs[6].fill.has_value());
  EXPECT_EQ(p.outputs[6].clone_slot, -1);
}

// Note [returned views]: an output the op returns as a permutation of what its launches write.
TEST(ReturnedViewTest, APermuteReadsPrintsRoundTripsAndReachesThePlan) {
  OpDecl d = parse(Doc().set("outputs", R"J([
      {"name": "y", "shape": ["dim(x, 0)", "dim(x, 0) + 1", "3"], "permute": [0, 2, 1]},
      {"name": "z", "shape": {"same_as": "x"}}])J"));
  EXPECT_EQ((*d.spec.outputs)[0].permute, (std::vector<std::int64_t>{0, 2, 1}));
  EXPECT_TRUE((*d.spec.outputs)[1].permute.empty());
  EXPECT_NO_THROW(validate(d));
  expect_round_trip(d);
  std::string text = print_op_json(d);
  EXPECT_NE(text.find(R"("permute": [)"), std::string::npos) << text;
  EXPECT_EQ(text.find("permute", text.find(R"("name": "z")")), std::string::npos) << text;
  OpPlan p = derive_plan(d);
  EXPECT_EQ(p.outputs[0].permute, (std::vector<int>{0, 2, 1}));
  EXPECT_TRUE(p.outputs[1].permute.empty());
}

TEST(OutputAlignTest, AnAlignmentReadsPrintsRoundTripsAndReachesThePlan) {
  OpDecl d = parse(Doc().set("outputs", R"J([
      {"name": "y", "shape": {"same_as": "x"}, "align": 16},
      {"name": "z", "shape": {"same_as": "x"}}])J"));
  EXPECT_EQ((*d.spec.outputs)[0].align, 16);
  EXPECT_EQ((*d.spec.outputs)[1].align, 0);
  EXPECT_NO_THROW(validate(d));
  expect_round_trip(d);
  std::string text = print_op_json(d);
  EXPECT_NE(text.find(R"("align": 16)"), std::string::npos) << text;
  EXPECT_EQ(text.find("align", text.find(R"("name": "z")")), std::string::npos) << text;
  OpPlan p = derive_plan(d);
  EXPECT_EQ(p.outputs[0].align, 16);
  EXPECT_EQ(p.outputs[1].align, 0);
  for (const char* bad : {"0", "3", "24", "512", "8192", "-16", "16.5", "\"16\"", "true"}) {
    SCOPED_TRACE(bad);
    expect_parse_error(
        Doc().set(
            "outputs",
            std::string(R"J([{"name": "y", "shape": {"same_as": "x"}, "align": )J") + bad + "}]"),
        ErrorKind::Spec, "outputs[0].align");
  }
}

TEST(ReturnedViewTest, APermuteThatIsNoPermutationOfTheOutputsDimsIsRefusedByName) {
  auto invalid = [](const std::string& outputs, const std::string& want) {
    SCOPED_TRACE(outputs);
    OpDecl d = parse(Doc().set("outputs", outputs));
    expect_error([&] { validate(d); }, ErrorKind::Spec, want);
  };
  const std::string y = R"J({"name": "y", "shape": ["dim(x, 0)", "2", "3"], "permute": )J";
  invalid("[" + y + "[0, 1]}]",
          "op test::relu: outputs[0].permute: expected a permutation of the 3 dims of 'y' (each "
          "of 0..2 once), found [0, 1]");
  invalid("[" + y + "[0, 1, 1]}]", "found [0, 1, 1]");
  invalid("[" + y + "[0, 1, 3]}]", "found [0, 1, 3]");
  invalid("[" + y + "[-1, 0, 1]}]", "found [-1, 0, 1]");
  expect_parse_error(Doc().set("outputs", "[" + y + "[]}]"), ErrorKind::Spec,
                     "outputs[0].permute: is empty; expected a permutation of the output's dims");
  invalid(R"J([{"name": "y", "shape": {"same_as": "x"}, "permute": [1, 0]}])J",
          "outputs[0].permute: needs the output's rank: give 'y' its shape as a list of "
          "expressions");
  invalid(R"J([{"name": "y", "shape": {"same_as": "x"}},
               {"name": "s", "shape": ["2", "3"], "scratch": true, "permute": [1, 0]}])J",
          "outputs[1].permute: 's' is scratch, which the op never returns");
  invalid(R"J([{"name": "y", "shape": ["dim(x, 0)"], "permute": [0], "init": {"clone": "x"}}])J",
          "outputs[0].permute: 'y' starts as a clone of an input, which is returned as it is");
  {
    OpDecl d = parse(Doc().set("outputs", "[" + y + "[0, 2, 1]}]"));
    ValidateOptions eager;
    eager.has_eager_fn = true;
    expect_error([&] { validate(d, eager); }, ErrorKind::Spec,
                 "outputs[0].permute: the op's eager_fn allocates its outputs");
    ValidateOptions meta;
    meta.has_meta_fn = true;
    expect_error([&] { validate(d, meta); }, ErrorKind::Spec,
                 "outputs[0].permute: the op's meta_fn shapes its outputs");
  }
  expect_parse_error(Doc().set("outputs", R"J([{"name": "y", "shape": ["2"], "permute": "0"}])J"),
                     ErrorKind::Spec, "outputs[0].permute");
  expect_parse_error(Doc().set("outputs", R"J([{"name": "y", "shape": ["2"], "permute": [0.5]}])J"),
                     ErrorKind::Spec, "outputs[0].permute");
}

TEST(OutputInitTest, MalformedInitsNameTheField) {
  auto with = [](const std::string& init) {
    return Doc().set("outputs",
                     R"([{"name": "y", "shape": {"same_as": "x"}, "init": )" + init + "}]");
  };
  expect_parse_error(
      with(R"({"fill": "zero"})"), ErrorKind::Spec,
      R"(outputs[0].init.fill: expected a number, true, false, "inf", "-inf" or "nan", found "zero")");
  expect_parse_error(with(R"({"fill": null})"), ErrorKind::Spec,
                     "outputs[0].init.fill: expected a number");
  expect_parse_error(with(R"({"fill": 1e400})"), ErrorKind::Spec,
                     "number overflow parsing '1e400'");
  // An int64 fill a double would round (2^53 + 1 -> 2^53) is refused, never filled with another.
  expect_parse_error(with(R"({"fill": 9007199254740993})"), ErrorKind::Spec,
                     "outputs[0].init.fill: expected a number a double holds exactly (an integer "
                     "within +-2^53, or any other), found 9007199254740993, which a double would "
                     "round to 9007199254740992");
  EXPECT_NO_THROW(parse(with(R"({"fill": -9007199254740992})")));
  expect_parse_error(
      with(R"("zeros")"), ErrorKind::Spec,
      R"(outputs[0].init: expected {"fill": value} or {"clone": "input"}, found "zeros")");
  expect_parse_error(with(R"({"fill": 0, "clone": "x"})"), ErrorKind::Spec, "outputs[0].init");
  expect_parse_error(with(R"({"clone": 3})"), ErrorKind::Spec,
                     "outputs[0].init.clone: expected a string, found number");
}

TEST(OutputInitTest, InitsTheOutputCannotHoldAreRefused) {
  auto invalid = [](const std::string& outputs, const std::string& inputs,
                    const std::string& want) {
    SCOPED_TRACE(outputs);
    OpDecl d = parse(Doc().set("outputs", outputs).set("inputs", inputs));
    expect_error([&] { validate(d); }, ErrorKind::Spec, want);
  };
  std::string x = R"J([{"name": "x", "dtype": "float32"}, {"name": "w", "dtype": "float16"}])J";
  invalid(
      R"J([{"name": "y", "shape": {"same_as": "x"}, "dtype": "int32", "init": {"fill": 1.5}}])J", x,
      "op test::relu: outputs[0].init.fill: output 'y' is int32, which cannot hold 1.5 as it is");
  invalid(R"J([{"name": "y", "shape": {"same_as": "x"}, "dtype": "bool", "init": {"fill": 2}}])J",
          x, "output 'y' is bool, which cannot hold 2 as it is");
  invalid(R"J([{"name": "y", "shape": {"same_as": "x"}, "dtype": "uint8", "init": {"fill": -1}}])J",
          x, "output 'y' is uint8, which cannot hold -1 as it is");
  invalid(R"J([{"name": "y", "shape": {"same_as": "x"}, "init": {"clone": "q"}}])J", x,
          "outputs[0].init.clone: 'q' is not a tensor input (tensor inputs: x, w)");
  invalid(
      R"J([{"name": "y", "shape": {"same_as": "w"}, "init": {"clone": "x"}}])J", x,
      R"J(outputs[0].shape: output 'y' is a clone of 'x': expected {"same_as": "x"} with no dims)J");
  invalid(
      R"J([{"name": "y", "shape": {"same_as": "x", "dims": {"0": 4}}, "init": {"clone": "x"}}])J",
      x, "output 'y' is a clone of 'x': expected");
  invalid(R"J([{"name": "y", "shape": ["dim(x, 0)"], "init": {"clone": "x"}}])J", x,
          "output 'y' is a clone of 'x': expected");
  invalid(
      R"J([{"name": "y", "shape": {"same_as": "x"}, "dtype": "float32", "init": {"clone": "x"}}])J",
      x,
      "outputs[0].dtype: output 'y' is a clone of 'x' and has its dtype; expected no dtype or "
      "dtype_from");
  invalid(
      R"J([{"name": "y", "shape": {"same_as": "x"}, "dtype_from": "w", "init": {"clone": "x"}}])J",
      x, "outputs[0].dtype_from: output 'y' is a clone of 'x'");
  invalid(
      R"J([{"name": "y", "shape": {"same_as": "x"}, "init": {"clone": "x"}}])J",
      R"J([{"name": "x", "dtype": "float32", "strided": true}])J",
      R"J(outputs[0].init.clone: input 'x' is strided; kernelop clones contiguous inputs (drop "strided"))J");
}

TEST(OutputInitTest, FillBitsAreTheDtypesOwnBytes) {
  EXPECT_EQ(fill_bits(DType::Float32, 1.0), 0x3f800000u);
  EXPECT_EQ(fill_bits(DType::Float32, -std::numeric_limits<double>::infinity()), 0xff800000u);
  EXPECT_EQ(fill_bits(DType::Float64, -2.0), 0xc000000000000000u);
  EXPECT_EQ(fill_bits(DType::Float16, 1.0), 0x3c00u);
  EXPECT_EQ(fill_bits(DType::Float16, 65504.0), 0x7bffu);
  EXPECT_EQ(fill_bits(DType::Float16, 1e-8), 0u);  // rounds to zero, as PyTorch stores it
  EXPECT_EQ(fill_bits(DType::BFloat16, -1.0), 0xbf80u);
  EXPECT_EQ(fill_bits(DType::Int8, -1), 0xffu);
  EXPECT_EQ(fill_bits(DType::Int16, -2), 0xfffeu);
  EXPECT_EQ(fill_bits(DType::Int32, -1), 0xffffffffu);
  EXPECT_EQ(fill_bits(DType::Int64, -1), ~std::uint64_t{0});
  EXPECT_EQ(fill_bits(DType::Int64, -9223372036854775808.0), std::uint64_t{1} << 63);
  EXPECT_EQ(fill_bits(DType::UInt8, 255), 0xffu);
  EXPECT_EQ(fill_bits(DType::Bool, 1), 1u);
  EXPECT_EQ(fill_bits(DType::Float8E4M3, 0), 0u);
  for (auto [dtype, value] : std::vector<std::pair<DType, double>>{
           {DType::Int8, 128},
           {DType::Int8, 0.5},
           {DType::UInt8, -1},
           {DType::Int16, 40000},
           {DType::Int32, 2147483648.0},
           {DType::Int64, 9223372036854775808.0},
           {DType::Int32, std::numeric_limits<double>::quiet_NaN()},
           {DType::Int64, std::numeric_limits<double>::infinity()},
           {DType::Bool, 0.5},
           {DType::Float8E4M3, 1},
           {DType::Float8E5M2, -0.0},
           {DType::Float16, 65505},
           {DType::BFloat16, -3.4e38},
           {DType::Float32, 1e39}}) {
    EXPECT_FALSE(fill_bits(dtype, value).has_value()) << dtype_name(dtype) << " " << value;
  }
}

}  // namespace
}  // namespace kernelop
