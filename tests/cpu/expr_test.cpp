// Symbolic expressions: parsing, canonical printing, evaluation with two integer types,
// overflow checks and simplification.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <vector>

#include "kernelop/expr.hpp"
#include "kernelop/validate.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

// Shapes and scalars the evaluation tables run against.
struct Env {
  std::map<std::string, std::vector<std::int64_t>> shapes = {{"x", {2, 3, 5}}, {"y", {7}}};
  std::map<std::string, std::int64_t> scalars = {{"n", 10}, {"k", -3}};

  // A tree node or a flat one (Note [flat expressions]): op and value from the node itself,
  // names and axes from its source.
  template <class Node>
  std::int64_t leaf(const Node& node) const {
    struct {
      ExprOp op;
      std::int64_t value;
      const std::string& name;
      const std::vector<std::int64_t>& axes;
    } e{node.op, node.value, expr_source(node).name, expr_source(node).axes};
    if (e.op == ExprOp::Scalar) return scalars.at(e.name);
    // x is float16 with strides [30, 5, 1] at address 0x1008; y is float32 at 0x1000.
    if (e.op == ExprOp::ItemSize) return e.name == "x" ? 2 : 4;
    if (e.op == ExprOp::Stride)
      return e.name == "x" ? std::vector<std::int64_t>{30, 5, 1}.at(
                                 static_cast<std::size_t>(e.value < 0 ? e.value + 3 : e.value))
                           : 1;
    if (e.op == ExprOp::Aligned) return (e.name == "x" ? 0x1008 : 0x1000) % e.value == 0;
    const auto& shape = shapes.at(e.name);
    auto rank = static_cast<std::int64_t>(shape.size());
    if (e.op == ExprOp::Dim) {
      std::int64_t a = 0;
      if (!normalize_axis(e.value, rank, &a)) throw std::out_of_range("axis");
      return shape[static_cast<std::size_t>(a)];
    }
    if (e.op == ExprOp::Rank) return rank;
    if (e.op != ExprOp::Numel && e.op != ExprOp::NumelExcept)
      throw std::logic_error("not a tensor leaf");
    std::int64_t p = 1;
    for (std::int64_t i = 0; i < rank; ++i) {
      bool skip = false;
      for (auto a : e.axes) {
        std::int64_t n = 0;
        skip = skip || (normalize_axis(a, rank, &n) && n == i);
      }
      if (!skip) p *= shape[static_cast<std::size_t>(i)];
    }
    return p;
  }
};

std::int64_t eval(const std::string& text) {
  return evaluate<std::int64_t>(Expr::parse(text), Env{});
}

TEST(Expr, CanonicalTextRoundTrips) {
  for (const char* text : {"0",
                           "-7",
                           "42",
                           "n",
                           "dim(x, 0)",
                           "dim(x, -1)",
                           "numel(x)",
                           "numel_except(x, -1)",
                           "numel_except(x, 0, -1)",
                           "dim(x, 0) * 2",
                           "dim(x, 0) + dim(x, 1) * dim(x, 2)",
                           "(dim(x, 0) + 1) * 2",
                           "a - (b - c)",
                           "a - b - c",
                           "a // b // c",
                           "a // (b // c)",
                           "a * (b // c)",
                           "a % b",
                           "(a + b) % c",
                           "cdiv(numel(x), 256)",
                           "min(a, b + 1)",
                           "max(cdiv(n, 4), 1)",
                           "cdiv(dim(x, -1), 16) * numel_except(x, -1, -2)",
                           "a + b - c",
                           "a - (b + c)",
                           "a * b * c",
                           "a * (b * c)",
                           "-1 * n"}) {
    Expr e = Expr::parse(text);
    EXPECT_EQ(e.to_string(), text);
    EXPECT_EQ(Expr::parse(e.to_string()), e) << text;
  }
}

TEST(Expr, WhitespaceAndRedundantParenthesesNormalise) {
  EXPECT_EQ(Expr::parse("  dim( x ,-1 )*2 ").to_string(), "dim(x, -1) * 2");
  EXPECT_EQ(Expr::parse("((a)) + (b * c)").to_string(), "a + b * c");
  EXPECT_EQ(Expr::parse("(a + b) + c").to_string(), "a + b + c");
}

TEST(Expr, PrecedenceAndAssociativity) {
  Expr e = Expr::parse("a + b * c");
  EXPECT_EQ(e.op(), ExprOp::Add);
  EXPECT_EQ(e.rhs().op(), ExprOp::Mul);
  Expr f = Expr::parse("a - b - c");
  EXPECT_EQ(f.op(), ExprOp::Sub);
  EXPECT_EQ(f.lhs().op(), ExprOp::Sub);
  EXPECT_EQ(f.rhs().name(), "c");
}

TEST(Expr, BuildersPrintLikeParsedText) {
  Expr e = cdiv(Expr::numel("x"), 256);
  EXPECT_EQ(e.to_string(), "cdiv(numel(x), 256)");
  EXPECT_EQ((Expr::dim("x", 0) * 2 + 1).to_string(), "dim(x, 0) * 2 + 1");
  EXPECT_EQ((Expr::scalar("a") * (Expr::scalar("b") + 1)).to_string(), "a * (b + 1)");
  EXPECT_EQ(min(Expr::scalar("a"), 3).to_string(), "min(a, 3)");
}

TEST(Expr, EvaluationTable) {
  struct Row {
    const char* text;
    std::int64_t value;
  };
  for (const Row& row : std::vector<Row>{
           {"numel(x)", 30},
           {"rank(x)", 3},
           {"rank(y) == 1", 1},
           {"dim(x, -1)", 5},
           {"dim(x, -3)", 2},
           {"numel_except(x, -1)", 6},
           {"numel_except(x, 0, 2)", 3},
           {"numel_except(x, -1, -2)", 2},
           {"dim(x, 1) * 2", 6},
           {"cdiv(numel(x), 256)", 1},
           {"cdiv(numel(x), 7)", 5},
           {"cdiv(30, 5)", 6},
           {"n // 3", 3},
           {"k // 2", -2},  // floors toward -inf (Python)
           {"k % 2", 1},    // takes the divisor's sign (Python)
           {"n % -3", -2},
           {"cdiv(k, 2)", -1},
           {"min(n, dim(y, 0))", 7},
           {"max(n, dim(y, 0))", 10},
           {"n - 2 * 3", 4},
           {"(n - 2) * 3", 24},
           {"numel(y) + numel(x)", 37},
           {"itemsize(x)", 2},
           {"16 // itemsize(x)", 8},
           {"dim(x, -1) // (16 // itemsize(y))", 1},
           {"stride(x, 0)", 30},
           {"stride(x, -2)", 5},
           {"aligned(x, 8)", 1},
           {"aligned(x, 16)", 0},
           {"aligned(y, 16)", 1},
           {"n < 11", 1},
           {"n <= 9", 0},
           {"n > k", 1},
           {"n >= 10", 1},
           {"dim(x, 0) == 2", 1},
           {"dim(x, 0) != 2", 0},
           {"(n < 11) + (n < 12)", 2},
           {"select(numel(x) < 256, 1024, 256)", 1024},
           {"select(numel(x) < 16, 1024, 256)", 256},
           {"select(n, 1, 2)", 1},
           {"select(n == 0, 0, 100 // n)", 10},
       }) {
    EXPECT_EQ(eval(row.text), row.value) << row.text;
  }
}

// Note [flat expressions]: a flat program evaluates every expression as its tree does, to the
// same value or the same error, whatever else the program holds. A corpus of random expressions
// over every operator and leaf, with constants that overflow and divisors that are zero.
TEST(Expr, FlatProgramsAgreeWithTheirTreesOnARandomCorpus) {
  std::mt19937 rng(2026);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::vector<std::string> leaves = {
      "numel(x)",
      "dim(x, -1)",
      "dim(y, 0)",
      "n",
      "k",
      "itemsize(x)",
      "stride(x, 0)",
      "aligned(x, 8)",
      "rank(x)",
      "numel_except(x, 1)",
      "0",
      "1",
      "7",
      "-3",
      "4611686018427387904",
      "dim(x, 5)",  // out of range: an error
  };
  std::function<Expr(int)> gen = [&](int depth) -> Expr {
    if (depth == 0 || pick(4) == 0)
      return Expr::parse(leaves[static_cast<std::size_t>(pick(static_cast<int>(leaves.size())))]);
    int op = pick(15);
    if (op == 14) return select(gen(depth - 1), gen(depth - 1), gen(depth - 1));
    static const ExprOp binary[] = {ExprOp::Add,     ExprOp::Sub, ExprOp::Mul, ExprOp::FloorDiv,
                                    ExprOp::CeilDiv, ExprOp::Mod, ExprOp::Min, ExprOp::Max,
                                    ExprOp::Lt,      ExprOp::Le,  ExprOp::Gt,  ExprOp::Ge,
                                    ExprOp::Eq,      ExprOp::Ne};
    return Expr::binary(binary[op], gen(depth - 1), gen(depth - 1));
  };
  auto outcome = [](const std::function<std::int64_t()>& f) {
    try {
      return std::to_string(f());
    } catch (const Error& e) {
      return "error: " + e.message();
    } catch (const std::out_of_range&) {
      return std::string("out of range");
    }
  };
  FlatExprs program;  // one program for all: roots must not disturb each other
  std::vector<std::pair<Expr, std::uint16_t>> added;
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    Expr e = gen(1 + pick(6));
    added.emplace_back(e, program.add(e));
    std::string tree = outcome([&] { return evaluate<std::int64_t>(e, Env{}); });
    std::string flat =
        outcome([&] { return evaluate<std::int64_t>(program, added.back().second, Env{}); });
    ASSERT_EQ(flat, tree) << e.to_string();
    errors += tree.starts_with("error") || tree == "out of range";
  }
  // Every root again, after the program grew.
  for (const auto& [e, root] : added) {
    ASSERT_EQ(outcome([&] { return evaluate<std::int64_t>(program, root, Env{}); }),
              outcome([&] { return evaluate<std::int64_t>(e, Env{}); }))
        << e.to_string();
  }
  EXPECT_GT(errors, 100);  // the corpus reaches the error paths too
  EXPECT_LT(errors, 2900);
}

TEST(Expr, AFlatProgramRefusesMoreNodesThanItsIndicesReach) {
  FlatExprs program;
  Expr sum = Expr::parse("n");
  for (int i = 0; i < 200; ++i) sum = sum + Expr::parse("n");  // 401 nodes
  for (std::size_t i = 0; i + 401 <= FlatExprs::kMaxNodes; i += 401) program.add(sum);
  std::size_t size = program.size();
  expect_error([&] { program.add(sum); }, ErrorKind::Spec, "more than 65535 nodes");
  EXPECT_EQ(program.size(), size);  // nothing of the refused expression stays
}

TEST(Expr, ComparisonsAndSelectParseAndPrintCanonically) {
  for (const char* text : {"itemsize(x)", "stride(x, -1)", "aligned(x, 16)",
                           "select(numel(x) < 256, 1024, 256)", "dim(x, -1) // (16 // itemsize(x))",
                           "(n < 3) == 1", "n + 1 <= 2 * k", "select(select(n, 1, 0), n, k) + 1"}) {
    EXPECT_EQ(Expr::parse(text).to_string(), text);
    EXPECT_EQ(Expr::parse(Expr::parse(text).to_string()), Expr::parse(text));
  }
  EXPECT_EQ(Expr::parse("n<3").to_string(), "n < 3");
  EXPECT_EQ(select(Expr::binary(ExprOp::Lt, Expr::scalar("n"), 3), 1, 2).to_string(),
            "select(n < 3, 1, 2)");
}

TEST(Expr, SameShapeComparesTheRanksAndEverySize) {
  Env env;
  env.shapes["z"] = {2, 3, 5};
  env.shapes["w"] = {2, 5, 3};
  env.shapes["v"] = {2, 3};
  for (auto [text, want] : std::vector<std::pair<std::string, std::int64_t>>{
           {"same_shape(x, z)", 1},
           {"same_shape(x, w)", 0},
           {"same_shape(x, v)", 0},
           {"same_shape(v, x)", 0},
           {"same_shape(y, y)", 1},
           {"same_shape(x, z) * (dim(x, -1) == 5)", 1},
           {"select(same_shape(x, w), 1, 2)", 2}}) {
    Expr e = Expr::parse(text);
    EXPECT_EQ(e.to_string(), text);
    EXPECT_EQ(evaluate<std::int64_t>(e, env), want) << text;
    FlatExprs flat;
    std::uint16_t root = flat.add(e);
    EXPECT_EQ(evaluate<std::int64_t>(flat, root, env), want) << text << " (flat)";
  }
  EXPECT_EQ(Expr::same_shape("x", "z"), Expr::parse("same_shape(x, z)"));
  // Its operands are tensors, each a leaf that names and resolves like rank(t).
  std::vector<std::string> leaves;
  Expr::parse("same_shape(a, b)").for_each_leaf([&](const Expr& l) {
    leaves.push_back(std::string(expr_op_info(l.op()).spelling) + ":" + l.name());
  });
  EXPECT_EQ(leaves, (std::vector<std::string>{"rank:a", "rank:b"}));
  for (const char* bad :
       {"same_shape(x)", "same_shape(x, 1)", "same_shape(x + 1, y)", "same_shape()"}) {
    EXPECT_THROW(Expr::parse(bad), Error) << bad;
  }
}

TEST(Expr, SelectEvaluatesOnlyTheChosenOperand) {
  // The other operand would divide by zero.
  Env env;
  env.scalars["n"] = 0;
  EXPECT_EQ(evaluate<std::int64_t>(Expr::parse("select(n == 0, 7, 100 // n)"), env), 7);
  EXPECT_EQ(Expr::parse("select(1 < 2, n, k)").simplified().to_string(), "n");
  EXPECT_EQ(Expr::parse("select(n, k, k)").simplified().to_string(), "k");
}

TEST(Expr, MalformedComparisonsAndNewFunctionsAreErrors) {
  expect_error([] { Expr::parse("n < 3 < 4"); }, ErrorKind::Spec, "comparisons do not chain");
  expect_error([] { Expr::parse("n = 3"); }, ErrorKind::Spec, "unknown operator '='");
  expect_error([] { Expr::parse("n ! 3"); }, ErrorKind::Spec, "unknown operator '!'");
  expect_error([] { Expr::parse("aligned(x, 3)"); }, ErrorKind::Spec,
               "aligned() takes a power of two from 1 to 4096 bytes, got 3");
  expect_error([] { Expr::parse("aligned(x, 0)"); }, ErrorKind::Spec, "got 0");
  expect_error([] { Expr::parse("aligned(x, 8192)"); }, ErrorKind::Spec, "got 8192");
  expect_error([] { Expr::parse("select(n, 1)"); }, ErrorKind::Spec, "expected ','");
  expect_error([] { Expr::parse("stride(x)"); }, ErrorKind::Spec, "expected ','");
  expect_error([] { Expr::parse("itemsize(1)"); }, ErrorKind::Spec, "expected a name");
}

TEST(Expr, Int64OverflowAndDivisionByZeroAreErrors) {
  expect_error([] { eval("9223372036854775807 + 1"); }, ErrorKind::Launch,
               "expression '9223372036854775807 + 1' overflows int64");
  expect_error([] { eval("4611686018427387904 * 2"); }, ErrorKind::Launch, "overflows int64");
  expect_error([] { eval("-9223372036854775808 - 1"); }, ErrorKind::Launch, "overflows int64");
  expect_error([] { eval("n // 0"); }, ErrorKind::Launch, "expression 'n // 0' divides by zero");
  expect_error([] { eval("cdiv(n, n - 10)"); }, ErrorKind::Launch, "divides by zero");
  expect_error([] { eval("n % 0"); }, ErrorKind::Launch, "divides by zero");
  expect_error([] { eval("-9223372036854775808 // -1"); }, ErrorKind::Launch, "overflows int64");
  EXPECT_EQ(eval("-9223372036854775808 % -1"), 0);
  EXPECT_EQ(eval("-9223372036854775808"), INT64_MIN);
}

TEST(Expr, ParseErrorsNameTheColumn) {
  expect_error([] { Expr::parse("dim(x)"); }, ErrorKind::Spec,
               "invalid expression 'dim(x)' at column 6: expected ','");
  expect_error([] { Expr::parse("a +"); }, ErrorKind::Spec, "unexpected end");
  expect_error([] { Expr::parse("a b"); }, ErrorKind::Spec, "at column 3: unexpected 'b'");
  expect_error([] { Expr::parse("sqrt(a, b)"); }, ErrorKind::Spec, "unknown function 'sqrt'");
  expect_error([] { Expr::parse("-n"); }, ErrorKind::Spec,
               "'-' must be followed by an integer literal");
  expect_error([] { Expr::parse("(a + b"); }, ErrorKind::Spec, "expected ')'");
  expect_error([] { Expr::parse("numel_except(x)"); }, ErrorKind::Spec,
               "numel_except() needs at least one axis");
  expect_error([] { Expr::parse("99999999999999999999"); }, ErrorKind::Spec, "out of int64 range");
  expect_error([] { Expr::parse(""); }, ErrorKind::Spec, "unexpected end");
  expect_error([] { Expr::parse("dim(3, 0)"); }, ErrorKind::Spec, "expected a name");
}

// Spellings from other languages get what to write instead.
TEST(Expr, OtherLanguagesSpellingsGetAHint) {
  expect_error([] { Expr::parse("numel(x) / 1"); }, ErrorKind::Spec,
               "at column 10: unexpected '/' (integer division is '//', which floors; cdiv(a, b) "
               "rounds up)");
  expect_error([] { Expr::parse("cdiv(numel(x) / 2, 3)"); }, ErrorKind::Spec,
               "expected ',', found '/' (integer division is '//'");
  expect_error([] { Expr::parse("n > 1 && n < 4"); }, ErrorKind::Spec,
               "unexpected '&' (there are no logical operators: a requirement list is their "
               "'and'; select(c, a, b) chooses)");
  expect_error([] { Expr::parse("n > 1 || n < 4"); }, ErrorKind::Spec, "no logical operators");
  expect_error([] { Expr::parse("n > 1 ? 1 : 2"); }, ErrorKind::Spec,
               "unexpected '?' (there is no '?:': select(c, a, b) is a if c != 0, else b)");
  EXPECT_EQ(Expr::parse("n // 2").to_string(), "n // 2");  // the spelling that works
}

TEST(Expr, SimplificationFoldsConstantsAndIdentities) {
  auto simp = [](const char* text) { return Expr::parse(text).simplified().to_string(); };
  EXPECT_EQ(simp("2 * 128"), "256");
  EXPECT_EQ(simp("cdiv(1000, 256)"), "4");
  EXPECT_EQ(simp("n * 1"), "n");
  EXPECT_EQ(simp("1 * n"), "n");
  EXPECT_EQ(simp("n + 0"), "n");
  EXPECT_EQ(simp("0 + n"), "n");
  EXPECT_EQ(simp("n - 0"), "n");
  EXPECT_EQ(simp("n * 0"), "0");
  EXPECT_EQ(simp("n // 1"), "n");
  EXPECT_EQ(simp("cdiv(numel(x), 1)"), "numel(x)");
  EXPECT_EQ(simp("n * 2 * 3"), "n * 6");
  EXPECT_EQ(simp("n + 2 + 3"), "n + 5");
  EXPECT_EQ(simp("min(n, n)"), "n");
  EXPECT_EQ(simp("dim(x, 0) * (4 * 4)"), "dim(x, 0) * 16");
  // An overflowing constant stays symbolic so that evaluation reports it.
  EXPECT_EQ(simp("9223372036854775807 + 1"), "9223372036854775807 + 1");
  EXPECT_EQ(simp("n // 0"), "n // 0");
}

TEST(Expr, NumelExceptWithoutAxesIsNumel) {
  EXPECT_EQ(Expr::numel_except("x", {}).to_string(), "numel(x)");
  EXPECT_EQ(eval("numel_except(x, 0, 1, 2)"), 1);
}

TEST(Expr, ResolvedLeavesCarrySlotsAndCompareByStructure) {
  Expr e = Expr::parse("dim(x, 0) + numel(y) * n");
  Expr r = e.resolved([](const Expr& leaf) {
    return leaf.name() == "x" ? 0 : leaf.name() == "y" ? 1 : 7;
  });
  std::vector<int> slots;
  r.for_each_leaf([&](const Expr& leaf) { slots.push_back(leaf.slot()); });
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 7}));
  EXPECT_EQ(r.to_string(), e.to_string());
  EXPECT_FALSE(Expr::parse("a + b") == Expr::parse("b + a"));
  EXPECT_TRUE(Expr::parse("a + b") == Expr::parse("a+b"));
}

// A second integer type: a symbolic value that records the computation, the way c10::SymInt
// does in the PyTorch Meta kernel. It plugs in through ExprArith, as SymInt will.
struct Traced {
  std::string text;
};

}  // namespace

template <>
struct ExprArith<Traced> {
  static Traced constant(std::int64_t v) { return {std::to_string(v)}; }
  static bool truthy(const Traced& v) { return v.text != "0"; }
  static Traced apply(ExprOp op, const Traced& a, const Traced& b, const ExprNode&) {
    static const std::map<ExprOp, std::string> names = {
        {ExprOp::Add, "add"},           {ExprOp::Sub, "sub"},         {ExprOp::Mul, "mul"},
        {ExprOp::FloorDiv, "floordiv"}, {ExprOp::CeilDiv, "ceildiv"}, {ExprOp::Mod, "mod"},
        {ExprOp::Min, "min"},           {ExprOp::Max, "max"}};
    return {names.at(op) + "(" + a.text + ", " + b.text + ")"};
  }
};

namespace {

struct TracedEnv {
  Traced leaf(const ExprNode& e) const {
    if (e.op == ExprOp::Dim) return {"s_" + e.name + std::to_string(e.value)};
    if (e.op == ExprOp::Numel) return {"numel_" + e.name};
    if (e.op == ExprOp::NumelExcept) return {"rows_" + e.name};
    return {"sym_" + e.name};
  }
};

TEST(Expr, EvaluatesWithASymbolicIntegerType) {
  Traced t =
      evaluate<Traced>(Expr::parse("cdiv(dim(x, -1), 16) * numel_except(x, -1) + n"), TracedEnv{});
  EXPECT_EQ(t.text, "add(mul(ceildiv(s_x-1, 16), rows_x), sym_n)");
}

// The primary ExprArith template works for any type with the integer operators.
__extension__ typedef __int128 Int128;
struct WideEnv {
  Int128 leaf(const ExprNode&) const { return Int128(1) << 70; }
};

TEST(Expr, EvaluatesWithAWiderIntegerType) {
  Int128 v =
      evaluate<Int128>(Expr::parse("cdiv(numel(x), 1024) * 4 + min(numel(x), 3)"), WideEnv{});
  EXPECT_TRUE(v == (Int128(1) << 62) + 3);
}

// An integer type with Python's floor division and modulo (as c10::SymInt's are): the primary
// ExprArith template must give exactly the int64 evaluator's values (Note [one evaluator
// semantics]) for every operator and sign.
struct FloorInt {
  std::int64_t v;
  explicit FloorInt(std::int64_t x) : v(x) {}
  friend FloorInt operator+(FloorInt a, FloorInt b) { return FloorInt(a.v + b.v); }
  friend FloorInt operator-(FloorInt a, FloorInt b) { return FloorInt(a.v - b.v); }
  friend FloorInt operator*(FloorInt a, FloorInt b) { return FloorInt(a.v * b.v); }
  friend FloorInt operator/(FloorInt a, FloorInt b) {
    std::int64_t q = a.v / b.v;
    return FloorInt((a.v % b.v != 0 && ((a.v < 0) != (b.v < 0))) ? q - 1 : q);
  }
  friend FloorInt operator%(FloorInt a, FloorInt b) { return a - (a / b) * b; }
  friend bool operator<(FloorInt a, FloorInt b) { return a.v < b.v; }
  friend bool operator<=(FloorInt a, FloorInt b) { return a.v <= b.v; }
  friend bool operator>(FloorInt a, FloorInt b) { return a.v > b.v; }
  friend bool operator>=(FloorInt a, FloorInt b) { return a.v >= b.v; }
  friend bool operator==(FloorInt a, FloorInt b) { return a.v == b.v; }
  friend bool operator!=(FloorInt a, FloorInt b) { return a.v != b.v; }
};

TEST(Expr, ThePrimaryTemplateAgreesWithTheInt64EvaluatorOnEveryOperator) {
  const ExprNode where;
  int checked = 0;
  for (const ExprOpInfo& row : kExprOps) {
    if (row.arity != 2) continue;
    for (std::int64_t a : {-7, -6, -1, 0, 1, 5, 6, 7}) {
      for (std::int64_t b : {-3, -2, -1, 1, 2, 3}) {
        std::int64_t want = ExprArith<std::int64_t>::apply(row.op, a, b, where);
        FloorInt got = ExprArith<FloorInt>::apply(row.op, FloorInt(a), FloorInt(b), where);
        EXPECT_EQ(got.v, want) << row.spelling << "(" << a << ", " << b << ")";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 14 * 48);  // the 14 binary operators of the table, 48 pairs each
}

// Note [operator table]: the printer, the parser and the reserved names all read kExprOps.
TEST(Expr, TheOperatorTableDrivesThePrinterTheParserAndTheReservedNames) {
  for (const ExprOpInfo& row : kExprOps) {
    std::string text;
    switch (row.form) {
      case ExprForm::Infix:
        text = "a " + std::string(row.spelling) + " b";
        break;
      case ExprForm::Call:
        text = std::string(row.spelling) + (row.arity == 3 ? "(a, b, c)" : "(a, b)");
        break;
      case ExprForm::LeafCall:
        text = row.op == ExprOp::Arch || row.op == ExprOp::SmCount
                   ? std::string(row.spelling) + "()"
               : row.op == ExprOp::Dim || row.op == ExprOp::Stride
                   ? std::string(row.spelling) + "(x, 1)"
               : row.op == ExprOp::Aligned     ? "aligned(x, 16)"
               : row.op == ExprOp::NumelExcept ? "numel_except(x, -1)"
                                               : std::string(row.spelling) + "(x)";
        break;
      case ExprForm::Literal:
        text = "42";
        break;
      case ExprForm::Name:
        text = "n";
        break;
    }
    Expr e = Expr::parse(text);
    if (row.op != ExprOp::Tunable) {
      EXPECT_EQ(e.op(), row.op) << text;  // a name parses as Scalar
    }
    EXPECT_EQ(e.to_string(), text);
    bool call = row.form == ExprForm::Call || row.form == ExprForm::LeafCall;
    EXPECT_EQ(is_reserved_name(row.spelling), call) << row.spelling;
    if (call) {
      expect_error([&] { Expr::parse(std::string(row.spelling) + "x(a)"); }, ErrorKind::Spec,
                   "unknown function '" + std::string(row.spelling) +
                       "x' (known: dim, numel, numel_except, itemsize, stride, aligned, arch, "
                       "rank, sm_count, item, cdiv, min, max, select, same_shape)");
    }
  }
}

// Expressions can come from untrusted packages; the parser and every walk over the tree
// recurse, so nesting is bounded (kMaxExprDepth) instead of overflowing the stack.
std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(Expr, NestingUpToTheLimitParses) {
  EXPECT_EQ(kMaxExprDepth, 256);
  EXPECT_EQ(eval(repeated("(", 256) + "7" + repeated(")", 256)), 7);
  EXPECT_EQ(eval(repeated("min(1, ", 256) + "7" + repeated(")", 256)), 1);
  // A chain of 256 operators is a tree 256 levels high; it prints and parses back.
  Expr chain = Expr::parse("n" + repeated(" + n", 256));
  EXPECT_EQ(evaluate<std::int64_t>(chain, Env{}), 2570);
  EXPECT_EQ(Expr::parse(chain.to_string()), chain);
}

TEST(Expr, NestingDeeperThanTheLimitIsAnError) {
  const std::string message = "expression nests deeper than 256 levels";
  expect_error([] { Expr::parse(repeated("(", 257) + "1" + repeated(")", 257)); }, ErrorKind::Spec,
               "at column 257: " + message);
  // Far deeper than any stack could take recursively: rejected at the limit, not crashed on.
  expect_error([] { Expr::parse(repeated("(", 100000) + "1" + repeated(")", 100000)); },
               ErrorKind::Spec, message);
  expect_error([] { Expr::parse(repeated("cdiv(", 300) + "1" + repeated(", 2)", 300)); },
               ErrorKind::Spec, message);
  expect_error([] { Expr::parse("n" + repeated(" + n", 257)); }, ErrorKind::Spec, message);
  expect_error([] { Expr::parse("n" + repeated(" * n", 100000)); }, ErrorKind::Spec, message);
  expect_error(
      [] {
        Expr::parse(repeated("n - (", 200) + "n" + repeated(" + n", 100) + repeated(")", 200));
      },
      ErrorKind::Spec, message);
}

}  // namespace
}  // namespace kernelop
