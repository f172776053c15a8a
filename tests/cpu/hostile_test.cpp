// Hostile input, second pass (issue "Trust, second pass"): what a careless or hostile user feeds
// the surfaces that landed since trust_test -- numbers from users, the evaluator's semantics,
// requirements that cannot be evaluated, select over ranks, written views that overlap,
// misspelled kernels. Each case failed before its fix. The CLI's cases are in cli_test
// (Hostile*), the Python ones in tests/python/test_hostile*.py.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/words.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/numbers.hpp"
#include "kernelop/plan.hpp"
#include "kernelop/runtime.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

constexpr const char* kKernel =
    R"J(extern \"C\" __global__ void k(const float* x, int k, float* y) { y[0] = x[0]; })J";

KernelOp op_of(const std::string& json) {
  return KernelOp(compile(derive_plan(parse_op_json(json, ".", "spec"))));
}

TensorView view(std::initializer_list<std::int64_t> shape,
                std::initializer_list<std::int64_t> strides = {}) {
  TensorView v;
  v.shape = Shape(shape);
  v.strides = Shape(strides);
  return v;
}

// Numbers from users parse whole or are refused (Note [numbers from users]).
TEST(HostileNumbers, PartialAndForeignSpellingsAreRefused) {
  EXPECT_EQ(parse_int64("12"), 12);
  EXPECT_EQ(parse_int64("-3"), -3);
  for (const char* bad :
       {"12abc", "1e3", "1.5", " 7", "7 ", "+7", "0x10", "", "-", "99999999999999999999"}) {
    EXPECT_FALSE(parse_int64(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_double("1e3"), 1000.0);
  EXPECT_EQ(parse_double("-2.5"), -2.5);
  for (const char* bad : {"1.5xyz", "1,5", "", " 1", "1e", "e3"}) {
    EXPECT_FALSE(parse_double(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_bool("true"), true);
  EXPECT_EQ(parse_bool("0"), false);
  for (const char* bad : {"True", "yes", "2", "", "on", "FALSE"}) {
    EXPECT_FALSE(parse_bool(bad).has_value()) << bad;
  }
}

TEST(HostileNumbers, EnvironmentFlagsAreOneOrZero) {
  ::setenv("KERNELOP_HOSTILE_FLAG", "1", 1);
  EXPECT_TRUE(env_flag("KERNELOP_HOSTILE_FLAG"));
  ::setenv("KERNELOP_HOSTILE_FLAG", "0", 1);
  EXPECT_FALSE(env_flag("KERNELOP_HOSTILE_FLAG", true));
  ::setenv("KERNELOP_HOSTILE_FLAG", "", 1);
  EXPECT_TRUE(env_flag("KERNELOP_HOSTILE_FLAG", true));
  for (const char* bad : {"yes", "true", "2", "1 "}) {
    ::setenv("KERNELOP_HOSTILE_FLAG", bad, 1);
    expect_error([] { (void)env_flag("KERNELOP_HOSTILE_FLAG"); }, ErrorKind::Spec,
                 "environment variable KERNELOP_HOSTILE_FLAG='" + std::string(bad) +
                     "': expected 1 (on) or 0 (off)");
  }
  ::unsetenv("KERNELOP_HOSTILE_FLAG");
}

// A requirement or a shape that divides by zero names the op (and the requirement).
TEST(HostileEvaluation, ADivisionByZeroNamesTheOpAndTheRequirement) {
  KernelOp req = op_of(std::string(R"J({"op": "hostile::req", "kernel_name": "k",
    "kernel_source": ")J") +
                       kKernel + R"J(",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "k", "scalar": "int"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "geometry": {"elementwise": {}}, "requires": ["numel(x) // k >= 0"]})J");
  TensorView x = view({8});
  ScalarArg zero = ScalarArg::of_int(0);
  expect_error(
      [&] {
        (void)req.output_shapes({&x, 1}, {&zero, 1});
      },
      ErrorKind::Launch,
      "op hostile::req: the requirement 'numel(x) // k >= 0' cannot be evaluated for "
      "these inputs: expression 'numel(x) // k' divides by zero");
  ScalarArg two = ScalarArg::of_int(2);
  EXPECT_EQ(req.output_shapes({&x, 1}, {&two, 1}).at(0).to_string(), "[8]");

  KernelOp shape = op_of(std::string(R"J({"op": "hostile::shape", "kernel_name": "k",
    "kernel_source": ")J") +
                         kKernel + R"J(",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "k", "scalar": "int"}],
    "outputs": [{"name": "y", "shape": ["cdiv(numel(x), k)"]}],
    "geometry": {"elementwise": {"over": "x"}}})J");
  expect_error(
      [&] {
        (void)shape.output_shapes({&x, 1}, {&zero, 1});
      },
      ErrorKind::Launch, "op hostile::shape: expression 'cdiv(numel(x), k)' divides by zero");
}

// cdiv is the exact ceiling for every sign; // floors; % takes the divisor's sign (Note [one
// evaluator semantics]). The SymInt side is compared with this one in test_hostile.py.
TEST(HostileEvaluation, IntegerDivisionFollowsOneSemantics) {
  auto eval = [](const std::string& text) { return Expr::parse(text).simplified().const_value(); };
  EXPECT_EQ(eval("cdiv(10, -1)"), -10);
  EXPECT_EQ(eval("cdiv(19, -2)"), -9);
  EXPECT_EQ(eval("cdiv(-19, 2)"), -9);
  EXPECT_EQ(eval("cdiv(-19, -2)"), 10);
  EXPECT_EQ(eval("19 // -2"), -10);
  EXPECT_EQ(eval("-19 // 2"), -10);
  EXPECT_EQ(eval("19 % -2"), -1);
  EXPECT_EQ(eval("-19 % 2"), 1);
  EXPECT_EQ(eval("cdiv(9223372036854775807, 1)"), LLONG_MAX);  // no a + b - 1 overflow
}

// select(rank(x) >= 3, stride(x, -3), 0) reads stride(x, -3) only for rank >= 3 inputs.
TEST(HostileEvaluation, SelectTakesRankRequirementsOnlyFromTheBranchTaken) {
  KernelOp op = op_of(std::string(R"J({"op": "hostile::sel", "kernel_name": "k",
    "kernel_source": ")J") +
                      kKernel + R"J(",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "k", "scalar": "int"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "requires": ["select(rank(x) >= 3, stride(x, -3), 0) != 12"],
    "geometry": {"elementwise": {"over": "x"}}})J");
  EXPECT_TRUE(op.plan().rank_requirements.empty());
  ScalarArg k = ScalarArg::of_int(1);
  TensorView one = view({5});
  EXPECT_EQ(op.output_shapes({&one, 1}, {&k, 1}).at(0).to_string(), "[5]");
  TensorView three = view({2, 3, 4});  // stride(x, -3) = 12: the branch is read
  expect_error(
      [&] {
        (void)op.output_shapes({&three, 1}, {&k, 1});
      },
      ErrorKind::Launch,
      "op hostile::sel: the inputs break the requirement 'select(rank(x) >= 3, stride(x, "
      "-3), 0) != 12': 12 != 12 is false");
  TensorView four = view({2, 2, 5, 4});
  EXPECT_EQ(op.output_shapes({&four, 1}, {&k, 1}).at(0).to_string(), "[2, 2, 5, 4]");
  // A branch taken whose axis is out of range is still refused, by name.
  KernelOp wrong = op_of(std::string(R"J({"op": "hostile::sel2", "kernel_name": "k",
    "kernel_source": ")J") +
                         kKernel + R"J(",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "k", "scalar": "int"}],
    "outputs": [{"name": "y", "shape": ["select(k > 0, dim(x, 2), 1)"]}],
    "geometry": {"elementwise": {"over": "x"}}})J");
  expect_error(
      [&] {
        (void)wrong.output_shapes({&one, 1}, {&k, 1});
      },
      ErrorKind::Launch,
      "op hostile::sel2: 'dim(x, 2)': axis 2 is out of range for x of shape [5]");
  ScalarArg off = ScalarArg::of_int(0);
  EXPECT_EQ(wrong.output_shapes({&one, 1}, {&off, 1}).at(0).to_string(), "[1]");
}

// A kernel must not write a view whose elements overlap.
TEST(HostileTensors, OverlapIsFoundFromTheStrides) {
  EXPECT_FALSE(view({4, 8}).may_overlap());
  EXPECT_FALSE(view({4, 8}, {8, 1}).may_overlap());
  EXPECT_FALSE(view({4, 8}, {1, 4}).may_overlap());   // transposed
  EXPECT_FALSE(view({4, 8}, {16, 1}).may_overlap());  // a slice of a wider tensor
  EXPECT_FALSE(view({4, 8}, {-8, 1}).may_overlap());  // negative strides, nested
  EXPECT_FALSE(view({1, 8}, {0, 1}).may_overlap());   // a size-1 axis may have any stride
  EXPECT_TRUE(view({4, 8}, {0, 1}).may_overlap());    // expand()
  EXPECT_TRUE(view({3, 3}, {1, 2}).may_overlap());    // interleaved: (0,1) and (2,0)
  EXPECT_TRUE(view({2, 2}, {LLONG_MAX, LLONG_MAX}).may_overlap());
  EXPECT_FALSE(view({0, 8}, {0, 1}).may_overlap());  // no elements
}

TEST(HostileTensors, AWrittenViewWhoseElementsOverlapIsRefusedBeforeTheLaunch) {
  KernelOp op = op_of(std::string(R"J({"op": "hostile::inplace", "kernel_name": "k",
    "kernel_source": "extern \"C\" __global__ void k(float* x, long long s0, long long s1) {}",
    "inputs": [{"name": "x", "dtype": "float32", "mutated": true, "strided": true}],
    "outputs": [],
    "extras": [{"expr": "stride(x, 0)", "int64": true}, {"expr": "stride(x, 1)", "int64": true}],
    "geometry": {"elementwise": {"over": "x"}}})J"));
  float fake = 0;
  TensorView x = view({4, 8}, {0, 1});
  x.data = &fake;
  expect_error(
      [&] {
        op.launch({&x, 1}, {}, {}, nullptr);
      },
      ErrorKind::Launch,
      "op hostile::inplace: input 'x' is written in place but its elements may overlap "
      "(shape [4, 8], strides [0, 1]");
}

// A tensor the kernel writes shares no memory with another it reads: op(x, x) would race.
TEST(HostileTensors, AWrittenInputThatSharesMemoryWithAnotherIsRefused) {
  KernelOp op = op_of(std::string(R"J({"op": "hostile::acc", "kernel_name": "k",
    "kernel_source": "extern \"C\" __global__ void k(float* acc, const float* x, int n) {}",
    "inputs": [{"name": "acc", "dtype": "float32", "mutated": true}, {"name": "x", "dtype": "float32"}],
    "outputs": [], "extras": [{"numel": "x"}], "requires": ["numel(acc) == numel(x)"],
    "geometry": {"elementwise": {"over": "x"}}})J"));
  float buffer[16] = {};
  TensorView acc = view({8}), x = view({8});
  acc.data = buffer;
  x.data = buffer;  // the same memory
  std::vector<TensorView> in = {acc, x};
  expect_error([&] { op.launch(in, {}, {}, nullptr); }, ErrorKind::Launch,
               "op hostile::acc: input 'acc' is written in place and shares memory with input 'x'");
  in[1].data = buffer + 4;  // a partial overlap
  expect_error([&] { op.launch(in, {}, {}, nullptr); }, ErrorKind::Launch, "shares memory");
  EXPECT_EQ(view({2, 3}, {3, 1}).byte_span().second, 6u * 4u);
  TensorView reversed = view({4}, {-1});
  reversed.data = buffer + 3;
  auto [lo, hi] = reversed.byte_span();
  EXPECT_EQ(lo, reinterpret_cast<std::uintptr_t>(buffer));
  EXPECT_EQ(hi, reinterpret_cast<std::uintptr_t>(buffer + 4));
}

// Text that is not UTF-8 is cut too.
TEST(HostileMessages, InvalidUtf8IsCutByBytes) {
  EXPECT_LT(detail::shorten(std::string(1000000, '\x80')).size(), 600u);
  std::string e_acute;
  for (int i = 0; i < 300; ++i) e_acute += "\xc3\xa9";
  std::string cut = detail::shorten(e_acute, 52);
  EXPECT_NE(cut.find("(300 characters)"), std::string::npos) << cut;
  EXPECT_EQ(cut.substr(0, 2), "\xc3\xa9");  // whole characters
}

// A misspelled kernel lists the source's kernels, closest first, not NVRTC's probe text.
TEST(HostileCompile, AMisspelledKernelListsTheClosestGlobalFunctions) {
  std::string source =
      "template <int N> __global__ void __launch_bounds__(256) softmax_rows(float* y) {}\n"
      "extern \"C\" __global__ void relu_kernel(const float* x, int n, float* y) {}\n"
      "extern \"C\" __global__ void gelu_kernel(const float* x, int n, float* y) {}\n"
      "__device__ float helper(float v) { return v; }\n";
  OpDecl d = testing::relu_like_op(source, "relu_kernal");
  try {
    (void)compile(derive_plan(d));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("kernel 'relu_kernal' is not a __global__ function of kernel.cu"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("the source declares 3, the closest: 'relu_kernel', 'gelu_kernel', "
                     "'softmax_rows'"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("__kop_sig"), std::string::npos) << m;
    EXPECT_EQ(m.find("__nv_name_map"), std::string::npos) << m;
    EXPECT_NE(e.context().log.find("error"), std::string::npos);  // the log is kept
  }
  EXPECT_EQ(detail::global_function_names(source),
            (std::vector<std::string>{"softmax_rows", "relu_kernel", "gelu_kernel"}));
  // A 10 MB name costs no more than a short one, and the message stays short.
  std::string huge(10'000'000, 'q');
  try {
    (void)compile(derive_plan(testing::relu_like_op(source, huge)));
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 2000u);
  }
}

}  // namespace
}  // namespace kernelop
