// Note [several launches]: an op with scratch and later launches, from its JSON spec to its
// package and its launch on tests/fake_driver (which records every launch and every memory
// operation): the scratch is allocated on the call's stream, passed to the kernels that name it,
// freed after the last launch, and never returned; the rules refuse what would launch wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_driver/fake_driver.hpp"
#include "kernelop/kernelop.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::fake;
using testing::record_launches_of;

// `expr` throws kernelop::Error of `kind` whose message contains `needle`.
#define EXPECT_THROW_MSG(expr, kind, needle) \
  testing::expect_error([&] { (void)(expr); }, kind, needle)

// A sum in two launches: per-SM partials into scratch, then their total into the output.
const char* kSum = R"json({
  "op": "launches_test::sum",
  "kernel_name": "partials",
  "kernel_source": "__global__ void partials(const float* x, float* part, int n) {}\n",
  "inputs": [{"name": "x", "dtype": "float32"}],
  "outputs": [{"name": "y", "shape": [1], "dtype": "float32"},
              {"name": "part", "shape": ["sm_count()"], "dtype": "float32", "scratch": true,
               "init": {"fill": 0}}],
  "params": ["x", "part", {"expr": "numel(x)"}],
  "geometry": {"custom": {"grid": ["sm_count()", 1, 1], "block": [256, 1, 1]}},
  "then": [{"kernel_name": "total",
            "kernel_source": "__global__ void total(const float* p, float* out, int n) {}\n",
            "from": {"p": "part", "out": "y"},
            "inputs": [{"name": "p"}],
            "outputs": [{"name": "out", "shape": [1]}],
            "params": ["p", "out", {"expr": "numel(p)"}],
            "geometry": {"custom": {"grid": [1, 1, 1], "block": [256, 1, 1]}}}]
})json";

OpDecl sum_decl(const std::string& text = kSum) {
  return parse_op_json(text, ".", "sum.json");
}

CompiledImage compile_sm90(const OpDecl& decl) {
  CompileOptions o;
  o.archs = {"sm_90"};
  return compile(derive_plan(decl), o);
}

// kSum's input and output on the fake driver: 1000 floats in, one out.
TensorView sum_input() {
  return TensorView{reinterpret_cast<void*>(0x100000), DType::Float32, Shape{1000}, {}, 0};
}
TensorView sum_output() {
  return TensorView{reinterpret_cast<void*>(0x200000), DType::Float32, Shape{1}, {}, 0};
}

// kSum with `from` replaced by `with` (once).
std::string edited(std::string_view from, std::string_view with) {
  std::string s = kSum;
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), with);
}

TEST(Launches, JsonRoundTripKeepsScratchAndLaterLaunches) {
  OpDecl decl = sum_decl();
  ASSERT_EQ(decl.spec.then.size(), 1u);
  EXPECT_TRUE((*decl.spec.outputs)[1].scratch);
  EXPECT_EQ(decl.spec.then[0].from.at("p"), "part");
  OpDecl again = parse_op_json(print_op_json(decl), ".", "again.json");
  EXPECT_EQ(again.spec, decl.spec);
}

TEST(Launches, ScratchIsNotInTheSchemaAndTheLaunchIsAnOpOfItsOwn) {
  OpPlan p = derive_plan(sum_decl());
  EXPECT_EQ(p.qualified_schema(), "launches_test::sum(Tensor x) -> Tensor");
  EXPECT_EQ(p.num_results(), 1u);
  EXPECT_EQ(p.outputs.size(), 2u);
  OpDecl launch = launch_decl(p, 0);
  EXPECT_EQ(launch.op_name, "launches_test::sum_launch1");
  OpPlan lp = derive_plan(launch);
  EXPECT_TRUE(derives_launch(p, 0, lp));
  // The launch's dtypes are the op's tensors'.
  EXPECT_EQ(lp.tensors[0].dtype, std::optional<DTypeDecl>(DType::Float32));
  LaunchLink link = link_launch(p, 0, lp);
  EXPECT_EQ(link.tensors, (std::vector<int>{2, 1}));  // p <- part (slot 2), out <- y (slot 1)
  EXPECT_TRUE(link.scalars.empty());
}

TEST(Launches, RulesAreCheckedWithTheFieldNamed) {
  struct Case {
    std::string from, with, message;
  };
  const std::vector<Case> cases = {
      {R"J("inputs": [{"name": "p"}])J", R"J("inputs": [{"name": "q"}])J",
       "op launches_test::sum: then[0].inputs[0]: 'q' is not a tensor of the op (tensors: x, y, "
       "part)"},
      {R"J("outputs": [{"name": "out", "shape": [1]}])J",
       R"J("outputs": [{"name": "x", "shape": [1]}])J",
       "params: does not pass output 'y'; the kernel must receive every output that no later "
       "launch writes"},
      {R"J("from": {"p": "part", "out": "y"})J", R"J("from": {"p": "part", "out": "y", "z": "y"})J",
       "then[0].from.z: 'z' is not an input or output of the launch"},
      {R"J("inputs": [{"name": "p"}])J", R"J("inputs": [{"name": "p", "dtype": "float16"}])J",
       "then[0].inputs[0].dtype: is float16 but the op's 'part' is float32"},
      {R"J("inputs": [{"name": "p"}])J", R"J("inputs": [{"name": "p", "mutated": true}])J",
       "then[0].inputs[0]: 'part' is declared mutated"},
      {R"J("shape": [1], "dtype": "float32"},)J",
       R"J("shape": ["sm_count()"], "dtype": "float32"},)J",
       "outputs[0].shape[0]: 'sm_count()': sm_count() cannot shape an output"},
      {R"J("outputs": [{"name": "y", "shape": [1], "dtype": "float32"},
              {"name": "part")J",
       R"J("outputs": [{"name": "part0", "shape": [1], "dtype": "float32", "scratch": true},
              {"name": "y", "shape": [1], "dtype": "float32"},
              {"name": "part")J",
       "outputs[1]: 'y' follows scratch 'part0'; declare scratch after the outputs the op returns"},
      {R"J("outputs": [{"name": "out", "shape": [1]}])J",
       R"J("outputs": [{"name": "out", "shape": [1], "permute": [0]}])J",
       "then[0].outputs[0].permute: the op declares how it returns its outputs; a launch writes "
       "them as they are"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::string text = edited(c.from, c.with);
    EXPECT_THROW_MSG(derive_plan(sum_decl(text)), ErrorKind::Spec, c.message);
  }
  // The op's kernel need not take scratch that its init sets and a later launch only reads; scratch
  // nothing sets is refused.
  std::string unpassed = edited(R"J("params": ["x", "part", {"expr": "numel(x)"}])J",
                                R"J("params": ["x", {"expr": "numel(x)"}])J");
  EXPECT_NO_THROW(derive_plan(sum_decl(unpassed)));
  const std::string init = R"J("init": {"fill": 0})J";
  std::size_t at = unpassed.find(init);
  ASSERT_NE(at, std::string::npos);
  std::size_t comma = unpassed.rfind(',', at);
  unpassed.erase(comma, at + init.size() - comma);
  EXPECT_THROW_MSG(derive_plan(sum_decl(unpassed)), ErrorKind::Spec,
                   "params: does not pass output 'part'; the kernel must receive every output that "
                   "no later launch writes (or, with later launches, that an init sets)");
  // A launch names each of the op's tensors once (two names would alias what it reads and writes).
  std::string twice =
      edited(R"J("from": {"p": "part", "out": "y"})J", R"J("from": {"p": "part", "out": "part"})J");
  const std::string params = R"J("params": ["x", "part",)J";
  twice.replace(twice.find(params), params.size(), R"J("params": ["x", "part", "y",)J");
  EXPECT_THROW_MSG(
      derive_plan(sum_decl(twice)), ErrorKind::Spec,
      "then[0].outputs[0]: 'out' and 'p' both name the op's 'part'; a launch names each once");
  // A launch reads only what something wrote before it: launch 1 reads 'part', which only launch 2
  // writes.
  std::string order = R"J({"op": "t::order", "kernel_name": "k", "kernel_source": "k",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": [1], "dtype": "float32"},
                {"name": "part", "shape": [4], "dtype": "float32", "scratch": true}],
    "params": ["x", "y"], "geometry": {"custom": {"grid": [1, 1, 1], "block": [32, 1, 1]}},
    "then": [{"kernel_name": "a", "kernel_source": "k", "inputs": [{"name": "part"}],
              "outputs": [{"name": "y", "shape": [1]}], "params": ["part", "y"],
              "geometry": {"custom": {"grid": [1, 1, 1], "block": [32, 1, 1]}}},
             {"kernel_name": "b", "kernel_source": "k", "inputs": [{"name": "x"}],
              "outputs": [{"name": "part", "shape": [4]}], "params": ["x", "part"],
              "geometry": {"custom": {"grid": [1, 1, 1], "block": [32, 1, 1]}}}]})J";
  EXPECT_THROW_MSG(derive_plan(parse_op_json(order, ".", "order.json")), ErrorKind::Spec,
                   "op t::order: then[0].inputs[0]: reads 'part', which nothing writes before this "
                   "launch");
  // Note [host reads]: a launch under a 'when' writes only when its tests hold, and a host read of
  // an output or scratch needs something written before it.
  std::string guarded = order;
  auto edit = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  // Launch b writes part under 'x != 0', then launch c reads it: under the same test, fine;
  // unguarded, refused.
  guarded =
      edit(order,
           R"J("then": [{"kernel_name": "a", "kernel_source": "k", "inputs": [{"name": "part"}],)J",
           R"J("then": [{"kernel_name": "a", "kernel_source": "k", "inputs": [{"name": "x"}],)J");
  guarded = edit(guarded, R"J("params": ["part", "y"])J", R"J("params": ["x", "y"])J");
  const std::string reader = R"J(, {"kernel_name": "c", "kernel_source": "k",
              "inputs": [{"name": "part"}, {"name": "x"}], "outputs": [{"name": "y", "shape": [1]}],
              "params": ["part", "y"], "geometry": {"custom": {"grid": [1], "block": [32]}}WHEN}]})J";
  guarded = edit(guarded, R"J("params": ["x", "part"],)J",
                 R"J("params": ["x", "part"], "when": [{"tensor": "x", "!=": 0}],)J");
  guarded.replace(guarded.rfind("}]}"), 3, "}" + reader);
  auto with_when = [&](const std::string& when) { return edit(guarded, "WHEN", when); };
  EXPECT_NO_THROW(derive_plan(
      parse_op_json(with_when(R"J(, "when": [{"tensor": "x", "!=": 0}])J"), ".", "g.json")));
  EXPECT_THROW_MSG(derive_plan(parse_op_json(with_when(""), ".", "g.json")), ErrorKind::Spec,
                   "op t::order: then[2].inputs[0]: reads 'part', which nothing writes before "
                   "this launch (the op's kernel does not take it, no earlier launch writes it, it "
                   "has no init; it is written only under a 'when' this launch does not test)");
  EXPECT_THROW_MSG(derive_plan(parse_op_json(with_when(R"J(, "when": [{"tensor": "x", "==": 0}])J"),
                                             ".", "g.json")),
                   ErrorKind::Spec, "it is written only under a 'when' this launch does not test");
  // A launch testing (or item()-reading) scratch before anything writes it: refused by its field.
  std::string early = with_when(R"J(, "when": [{"tensor": "x", "!=": 0}])J");
  std::size_t a = early.find(R"J("outputs": [{"name": "y", "shape": [1]}], "params": ["x", "y"])J",
                             early.find(R"J("kernel_name": "a")J"));
  early.replace(a, 62, R"J("outputs": [{"name": "y", "shape": [1]}, {"name": "part", "shape": [4]}],
                   "params": ["x", "y", "part"], "when": [{"tensor": "part", "==": 1}])J");
  EXPECT_THROW_MSG(derive_plan(parse_op_json(early, ".", "e.json")), ErrorKind::Spec,
                   "op t::order: then[0].when[0]: reads 'part' on the host, which nothing writes "
                   "before this launch (no init, no earlier launch writes it, or only under a "
                   "'when' this one does not test)");
  std::string own_test = edit(with_when(""), R"J("params": ["x", "y"])J",
                              R"J("params": ["x", "y"], "when": [{"tensor": "part", "==": 1}])J");
  EXPECT_THROW_MSG(derive_plan(parse_op_json(own_test, ".", "o.json")), ErrorKind::Spec,
                   "op t::order: when[0]: reads 'part' on the host, which nothing writes before "
                   "the op's kernel");
  // A launch's tests name the op's tensors through its `from`: 'flag' of a launch that renames x
  // is x.
  std::string renamed = edit(with_when(R"J(, "when": [{"tensor": "x", "!=": 0}])J"),
                             R"J("inputs": [{"name": "x"}],
              "outputs": [{"name": "part", "shape": [4]}], "params": ["x", "part"], "when": [{"tensor": "x", "!=": 0}],)J",
                             R"J("from": {"flag": "x"}, "inputs": [{"name": "flag"}],
              "outputs": [{"name": "part", "shape": [4]}], "params": ["flag", "part"], "when": [{"tensor": "flag", "!=": 0}],)J");
  EXPECT_NO_THROW(derive_plan(parse_op_json(renamed, ".", "r.json")));
  // An init of a launch's output runs before its tests: the launch may test what it set.
  std::string inited = edit(early, R"J({"name": "part", "shape": [4]}],
                   "params": ["x", "y", "part"])J",
                            R"J({"name": "part", "shape": [4], "init": {"fill": 1}}],
                   "params": ["x", "y", "part"])J");
  EXPECT_NO_THROW(derive_plan(parse_op_json(inited, ".", "i.json")));
  // A launch testing its own output, which an earlier launch wrote: compiled, and its package
  // (whose launches are read as the op's) loads.
  const std::string flagged = R"J({"op": "t::flagged", "kernel_name": "k",
    "kernel_source": "extern \"C\" __global__ void k(const float* x, float* y) {}",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": [1], "dtype": "float32"},
                {"name": "flag", "shape": [1], "dtype": "int32", "scratch": true}],
    "params": ["x", "y"], "geometry": {"custom": {"grid": [1], "block": [32]}},
    "then": [{"kernel_name": "f", "kernel_source": "extern \"C\" __global__ void f(const float* x, int* flag) {}",
              "inputs": [{"name": "x"}], "outputs": [{"name": "flag", "shape": [1]}],
              "params": ["x", "flag"], "geometry": {"custom": {"grid": [1], "block": [32]}}},
             {"kernel_name": "g", "kernel_source": "extern \"C\" __global__ void g(const float* x, float* y, int* flag) {}",
              "inputs": [{"name": "x"}], "outputs": [{"name": "y", "shape": [1]}, {"name": "flag", "shape": [1]}],
              "params": ["x", "y", "flag"], "when": [{"tensor": "flag", "==": 0}],
              "geometry": {"custom": {"grid": [1], "block": [32]}}}]})J";
  CompiledImage flagged_image = compile_sm90(parse_op_json(flagged, ".", "f.json"));
  EXPECT_EQ(parse_package(write_package_bytes(flagged_image), "f.kop").image.then.size(), 2u);

  // The op's own kernel: an item() of its own output, which nothing wrote, is refused; once an
  // init sets it, allowed.
  std::string own = R"J({"op": "t::own", "kernel_name": "k", "kernel_source": "k",
    "inputs": [{"name": "x", "dtype": "int32"}],
    "outputs": [{"name": "y", "shape": [1], "dtype": "int32"INIT}],
    "params": ["x", "y", {"expr": "item(y)"}],
    "geometry": {"custom": {"grid": [1], "block": [32]}}})J";
  EXPECT_THROW_MSG(derive_plan(parse_op_json(edit(own, "INIT", ""), ".", "own.json")),
                   ErrorKind::Spec,
                   "op t::own: params: item(y): reads 'y' on the host, which nothing writes "
                   "before the op's kernel");
  EXPECT_NO_THROW(
      derive_plan(parse_op_json(edit(own, "INIT", R"J(, "init": {"fill": 3})J"), ".", "own.json")));

  // A launch's kernel is chosen by its inputs' dtypes: an output typed by a parameter none of them
  // fixes is refused (float32 partials summed into a T output).
  std::string typed_out = R"J({"op": "t::typed", "kernel_name": "k<T>", "kernel_source": "k",
    "type_params": [{"name": "T", "dtypes": ["float32", "float64"]}],
    "inputs": [{"name": "x", "dtype": "T"}],
    "outputs": [{"name": "y", "shape": [1]},
                {"name": "part", "shape": [4], "dtype": "float32", "scratch": true}],
    "params": ["x", "part"], "geometry": {"custom": {"grid": [1, 1, 1], "block": [32, 1, 1]}},
    "then": [{"kernel_name": "a<T>", "kernel_source": "a", "inputs": [{"name": "part"}],
              "outputs": [{"name": "y", "shape": [1]}], "params": ["part", "y"],
              "geometry": {"custom": {"grid": [1, 1, 1], "block": [32, 1, 1]}}}]})J";
  EXPECT_THROW_MSG(
      derive_plan(parse_op_json(typed_out, ".", "typed.json")), ErrorKind::Spec,
      "op t::typed: then[0].outputs: 'y' is T, which none of the launch's inputs fixes");
  // A launch's own type parameter may stand for the op's dtype when it takes it.
  auto typed = [](const char* dtypes) {
    std::string s = edited(R"J("inputs": [{"name": "p"}])J",
                           std::string(R"J("type_params": [{"name": "T", "dtypes": )J") + dtypes +
                               R"J(}], "inputs": [{"name": "p", "dtype": "T"}])J");
    return s.replace(s.find(R"J("total")J"), 7, R"J("total<T>")J");
  };
  EXPECT_NO_THROW(derive_plan(sum_decl(typed(R"J(["float16", "float32"])J"))));
  EXPECT_THROW_MSG(derive_plan(sum_decl(typed(R"J(["float16"])J"))), ErrorKind::Spec,
                   "then[0].inputs[0].dtype: is T but the op's 'part' is float32");
  // A launch writes the op's outputs and scratch, never its inputs.
  std::string writes_input = edited(R"J("params": ["x", "part", {"expr": "numel(x)"}])J",
                                    R"J("params": ["x", "part", "y", {"expr": "numel(x)"}])J");
  writes_input.replace(writes_input.find(R"J("out": "y")J"), 10, R"J("out": "x")J");
  EXPECT_THROW_MSG(derive_plan(sum_decl(writes_input)), ErrorKind::Spec,
                   "then[0].outputs[0]: 'x' is not an output or scratch of the op (a launch writes "
                   "those; outputs and scratch: y, part)");
  // The launch's own spec is checked as any spec: its kernel's parameters name what it has.
  EXPECT_THROW_MSG(derive_plan(sum_decl(edited(R"J("params": ["p", "out", {"expr": "numel(p)"}])J",
                                               R"J("params": ["p", "out", "x"])J"))),
                   ErrorKind::Spec,
                   "op launches_test::sum_launch1: params[2]: 'x' is not an input");
  // Only scratch, and no input written: the op would produce nothing.
  std::string only_scratch = R"json({"op": "t::s", "kernel_name": "k",
    "kernel_source": "__global__ void k(const float* x, float* s) {}",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "s", "shape": [4], "scratch": true}],
    "geometry": {"elementwise": {"block": [256], "layout": "flat"}}})json";
  EXPECT_THROW_MSG(derive_plan(parse_op_json(only_scratch, ".", "s.json")), ErrorKind::Spec,
                   "outputs: holds only scratch and no input is mutated");
}

TEST(Launches, CompileAndPackageCarryEveryLaunch) {
  CompiledImage image = compile_sm90(sum_decl());
  ASSERT_EQ(image.then.size(), 1u);
  EXPECT_EQ(image.then[0].plan.op_name, "launches_test::sum_launch1");
  EXPECT_EQ(image.then[0].lowered_names, (std::vector<std::string>{"_Z5totalPKfPfi"}));
  std::string bytes = write_package_bytes(image);
  Package pkg = parse_package(bytes, "sum.kop");
  EXPECT_EQ(pkg.format_version, 5u);
  ASSERT_EQ(pkg.image.then.size(), 1u);
  EXPECT_EQ(pkg.image.then[0].plan.op_name, "launches_test::sum_launch1");
  EXPECT_EQ(pkg.image.then[0].images.at(0).data, image.then[0].images.at(0).data);
  EXPECT_EQ(write_package_bytes(pkg.image), bytes);  // deterministic, and read back whole
  // An image without its launches goes nowhere: not in a package, not to a KernelOp.
  CompiledImage missing = image;
  missing.then.clear();
  EXPECT_THROW_MSG(write_package_bytes(missing), ErrorKind::Spec,
                   "its spec declares 1 later launch(es) and the image holds 0");
  EXPECT_THROW_MSG(KernelOp{missing}, ErrorKind::Spec,
                   "its spec declares 1 later launch(es) and the image holds 0");
  // Nor with another op's launch in its place.
  CompiledImage swapped = image;
  swapped.then[0] = image;
  EXPECT_THROW_MSG(write_package_bytes(swapped), ErrorKind::Spec,
                   "its launch 1 image (launches_test::sum) is not the one its spec derives");
}

// Little-endian hex of a pointer parameter, as the fake driver records it.
std::string param_hex(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (int b = 0; b < 8; ++b, v >>= 8) {
    out += digits[(v >> 4) & 15];
    out += digits[v & 15];
  }
  return out;
}

std::vector<std::string> lines(const char* text) {
  std::vector<std::string> out;
  std::string s = text;
  for (std::size_t at = 0; at < s.size();) {
    std::size_t end = s.find('\n', at);
    out.push_back(s.substr(at, end - at));
    at = end == std::string::npos ? s.size() : end + 1;
  }
  return out;
}

TEST(Launches, LaunchesInOrderWithScratchAllocatedOnTheStreamAndFreedAfter) {
  if (!fake().ok()) GTEST_SKIP() << "the fake driver is not first on LD_LIBRARY_PATH";
  CompiledImage image = compile_sm90(sum_decl());
  record_launches_of(image);  // both kernels take (pointer, pointer, int)
  KernelOp op(image);
  auto* stream = reinterpret_cast<void*>(0x77);
  std::vector<TensorView> in = {sum_input()};
  std::vector<TensorView> out = {sum_output()};
  EXPECT_EQ(op.output_shapes(in).size(), 1u);
  EXPECT_EQ(op.output_dtypes(in).size(), 1u);
  op.launch(in, {}, out, stream);
  std::vector<std::string> mem = lines(fake().memory_ops());
  std::vector<std::string> launched = lines(fake().launches());
  // 132 SMs on the fake device: 132 floats of scratch, zeroed, then freed after both launches.
  ASSERT_EQ(mem.size(), 3u) << fake().memory_ops();
  std::string alloc = "allocAsync 528 bytes -> 0x";
  ASSERT_EQ(mem[0].rfind(alloc, 0), 0u) << mem[0];
  std::string addr =
      mem[0].substr(alloc.size() - 2, mem[0].find(' ', alloc.size()) - alloc.size() + 2);
  EXPECT_EQ(mem[0], "allocAsync 528 bytes -> " + addr + " stream=119");
  EXPECT_EQ(mem[1].find("memset32 " + addr), 0u) << mem[1];
  EXPECT_EQ(mem[2], "freeAsync " + addr + " stream=119");
  std::string scratch = param_hex(std::stoull(addr, nullptr, 16));
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_EQ(launched[0], "_Z8partialsPKfPfi grid=132,1,1 block=256,1,1 smem=0 stream=119 | " +
                             param_hex(0x100000) + " " + scratch + " e8030000");
  EXPECT_EQ(launched[1], "_Z5totalPKfPfi grid=1,1,1 block=256,1,1 smem=0 stream=119 | " + scratch +
                             " " + param_hex(0x200000) + " 84000000");
  // The allocating path allocates the results alone.
  int allocated = 0;
  auto allocate = [&](std::size_t index, DType dtype, const Shape& shape) {
    EXPECT_EQ(index, 0u);
    EXPECT_EQ(dtype, DType::Float32);
    EXPECT_EQ(shape, Shape{1});
    ++allocated;
    return out[0];
  };
  op.launch_allocating(in, {}, allocate, stream);
  EXPECT_EQ(allocated, 1);
  EXPECT_EQ(lines(fake().launches()).size(), 2u);
  EXPECT_EQ(lines(fake().memory_ops()).size(), 3u);
  // A raw launch would run the first kernel alone: refused.
  std::vector<RawArg> raw = {RawArg::of_tensor(in[0]), RawArg::of_tensor(out[0]),
                             RawArg::of_scalar(ScalarArg::of_int(1000))};
  EXPECT_THROW_MSG(
      op.launch_raw(LaunchDims{}, raw, stream), ErrorKind::Launch,
      "has scratch or later launches, which a raw launch of its first kernel would skip");
  // Scratch shapes may divide by sm_count(); output_shapes reports the results without a device.
  // A caller that passes the scratch as an output is told how many outputs the op has.
  std::vector<TensorView> two = {out[0], out[0]};
  EXPECT_THROW_MSG(op.launch(in, {}, two, stream), ErrorKind::Type, "expected 1 output(s), got 2");
}

// LaunchStep::before: a launch before the op's own kernel runs after the inits; the rules keep
// such launches first and refuse one that reads what only the op's kernel writes.
TEST(Launches, ALaunchBeforeTheOpsKernelRunsAfterTheInits) {
  std::string text =
      edited(R"("then": [{"kernel_name")", R"("then": [{"before": true, "kernel_name")");
  OpDecl decl = sum_decl(text);
  ASSERT_TRUE(decl.spec.then[0].before);
  OpDecl again = parse_op_json(print_op_json(decl), ".", "again.json");
  EXPECT_EQ(again.spec, decl.spec);
  EXPECT_NE(print_op_json(decl).find("\"before\": true"), std::string::npos);
  // Two launches before: still first.
  std::string two = text;
  std::string step = two.substr(two.find("{\"before\""));
  step = step.substr(0, step.rfind("}]") + 1);
  two.insert(two.find("{\"before\""), step + ", ");
  EXPECT_EQ(derive_plan(parse_op_json(two, ".", "two.json")).spec.then.size(), 2u);
  // One after the op's kernel, then one before it: refused.
  std::string late = text;
  late.insert(late.find("{\"before\""),
              step.substr(0, 1) + step.substr(step.find("\"kernel_name\"")) + ", ");
  EXPECT_THROW_MSG(derive_plan(parse_op_json(late, ".", "late.json")), ErrorKind::Spec,
                   "then[1].before: a launch before the op's own kernel follows one after it");
  // Before the op's kernel, the scratch it writes holds nothing unless an init sets it.
  std::string unset = text;
  const std::string init = R"("init": {"fill": 0})";
  std::size_t at = unset.find(init);
  std::size_t comma = unset.rfind(',', at);
  unset.erase(comma, at + init.size() - comma);
  EXPECT_THROW_MSG(derive_plan(parse_op_json(unset, ".", "unset.json")), ErrorKind::Spec,
                   "then[0].inputs[0]: reads 'part', which nothing writes before this launch");
  EXPECT_THROW_MSG(
      parse_op_json(edited(R"("then": [{"kernel_name")", R"("then": [{"before": 1, "kernel_name")"),
                    ".", "b.json"),
      ErrorKind::Spec, "then[0].before");
  if (!fake().ok()) return;
  CompiledImage image = compile_sm90(decl);
  record_launches_of(image);
  KernelOp op(image);
  auto* stream = reinterpret_cast<void*>(0x77);
  std::vector<TensorView> in = {sum_input()};
  std::vector<TensorView> out = {sum_output()};
  op.launch(in, {}, out, stream);
  std::vector<std::string> mem = lines(fake().memory_ops());
  std::vector<std::string> launched = lines(fake().launches());
  ASSERT_EQ(mem.size(), 3u) << fake().memory_ops();
  EXPECT_EQ(mem[1].find("memset32 "), 0u) << mem[1];  // the init, once
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_EQ(launched[0].find("_Z5totalPKfPfi "), 0u) << launched[0];  // the launch before, first
  EXPECT_EQ(launched[1].find("_Z8partialsPKfPfi "), 0u) << launched[1];
}

TEST(Launches, ScratchAloneIsFormat5AndItsBytesAreCheckedForOverflow) {
  std::string text = R"J({"op": "launches_test::ws", "kernel_name": "ws",
    "kernel_source": "__global__ void ws(const float* x, long long n, float* y, float* w) {}",
    "inputs": [{"name": "x", "dtype": "float32"}, {"name": "n", "scalar": "int64"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}},
                {"name": "w", "shape": ["n", "cdiv(dim(x, 0), sm_count())"], "dtype": "float32",
                 "scratch": true}],
    "params": ["x", "n", "y", "w"],
    "geometry": {"custom": {"grid": [1, 1, 1], "block": [32, 1, 1]}}})J";
  CompiledImage image = compile_sm90(parse_op_json(text, ".", "ws.json"));
  EXPECT_EQ(parse_package(write_package_bytes(image), "ws.kop").format_version, 5u);
  KernelOp op(image);
  std::vector<TensorView> in = {
      TensorView{reinterpret_cast<void*>(0x100000), DType::Float32, Shape{1000}, {}, 0}};
  std::vector<ScalarArg> n = {ScalarArg::of_int(3)};
  EXPECT_EQ(op.output_shapes(in, n), (std::vector<Shape>{Shape{1000}}));
  if (!fake().ok()) GTEST_SKIP() << "the fake driver is not first on LD_LIBRARY_PATH";
  record_launches_of(image);
  std::vector<TensorView> out = {
      TensorView{reinterpret_cast<void*>(0x200000), DType::Float32, Shape{1000}, {}, 0}};
  op.launch(in, n, out, nullptr);
  EXPECT_EQ(lines(fake().memory_ops())[0].rfind("allocAsync 96 bytes", 0),
            0u);  // 3 x cdiv(1000, 132)
  std::vector<ScalarArg> huge = {ScalarArg::of_int((std::int64_t{1} << 59) + 1)};
  EXPECT_THROW_MSG(op.launch(in, huge, out, nullptr), ErrorKind::Launch,
                   "does not fit 64 bits of bytes");
}

TEST(Launches, LoadLoadsEveryLaunchsKernel) {
  if (!fake().ok()) GTEST_SKIP() << "the fake driver is not first on LD_LIBRARY_PATH";
  auto count = [](const std::string& name) {
    std::string all = fake().functions();
    std::size_t n = 0;
    for (std::size_t at = all.find(name); at != std::string::npos; at = all.find(name, at + 1)) ++n;
    return n;
  };
  std::size_t before = count("_Z5totalPKfPfi\n");
  KernelOp op(compile_sm90(sum_decl()));
  EXPECT_EQ(op.load(0).device_arch, "sm_90");
  EXPECT_EQ(count("_Z5totalPKfPfi\n"), before + 1);  // the later launch's, before any call
}

TEST(Launches, ALaterLaunchThatDisagreesIsRefusedAndTheScratchStillFreed) {
  if (!fake().ok()) GTEST_SKIP() << "the fake driver is not first on LD_LIBRARY_PATH";
  // The later launch says its output has 2 elements; the op's has 1.
  CompiledImage image =
      compile_sm90(sum_decl(edited(R"J("outputs": [{"name": "out", "shape": [1]}])J",
                                   R"J("outputs": [{"name": "out", "shape": [2]}])J")));
  record_launches_of(image);
  KernelOp op(image);
  std::vector<TensorView> in = {sum_input()};
  std::vector<TensorView> out = {sum_output()};
  EXPECT_THROW_MSG(op.launch(in, {}, out, nullptr), ErrorKind::Launch,
                   "op launches_test::sum_launch1: output 'out' has shape [1] but the op produces "
                   "[2]");
  std::vector<std::string> mem = lines(fake().memory_ops());
  ASSERT_EQ(mem.size(), 3u);
  EXPECT_EQ(mem[2].rfind("freeAsync ", 0), 0u) << mem[2];
  EXPECT_EQ(lines(fake().launches()).size(), 1u);  // the op's own kernel ran; the other did not
}

}  // namespace
}  // namespace kernelop
