// The PyTorch adapter from C++: registration (schema, idempotence, conflicts, nothing left on
// failure), Meta kernels (shapes and dtypes without a GPU), clear errors, and eager CUDA calls
// checked against ATen (skipped, and reported so, without a GPU).
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/library.h>
#include <torch/torch.h>

#include "kernelop/kernelop.hpp"
#include "kernelop/torch.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;

fs::path examples() {
  return fs::path(KERNELOP_SOURCE_DIR) / "examples";
}

torch_ops::Registration reg(const std::string& name) {
  CompileOptions o;
  o.archs = {"sm_80", "sm_90", "compute_90"};
  return torch_ops::register_op(compile_op(examples() / (name + ".json"), o));
}

c10::OperatorHandle handle(const std::string& op) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), "");
}

std::vector<c10::IValue> call(const std::string& op, std::vector<c10::IValue> args) {
  torch::jit::Stack stack(args.begin(), args.end());
  handle(op).callBoxed(&stack);
  return stack;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST(TorchRegistration, SchemaIsTheDerivedOne) {
  reg("relu");
  reg("scale");
  reg("sin_cos");
  reg("cache_scatter");
  auto text = [](const std::string& op) {
    std::ostringstream s;
    s << handle(op).schema();
    return s.str();
  };
  EXPECT_EQ(text("kernelop_examples::relu"), "kernelop_examples::relu(Tensor x) -> Tensor");
  EXPECT_EQ(text("kernelop_examples::scale"),
            "kernelop_examples::scale(Tensor x, float alpha) -> Tensor");
  EXPECT_EQ(text("kernelop_examples::sin_cos"),
            "kernelop_examples::sin_cos(Tensor x) -> (Tensor, Tensor)");
  EXPECT_EQ(
      text("kernelop_examples::cache_scatter"),
      "kernelop_examples::cache_scatter(Tensor(a!) cache, Tensor index, Tensor values) -> ()");
}

TEST(TorchRegistration, IdenticalAgainIsANoOpDifferentIsAnError) {
  auto a = reg("relu");
  auto b = reg("relu");
  EXPECT_EQ(&a.op(), &b.op()) << "the second registration returns the first";
  // A different spec under the same name.
  OpDecl other = load_op_file(examples() / "sigmoid.json");
  other.op_name = "kernelop_examples::relu";
  CompileOptions o;
  o.archs = {"sm_90"};
  try {
    torch_ops::register_op(compile_op(other, o));
    FAIL() << "expected a conflict";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Spec);
    EXPECT_NE(std::string(e.what()).find(
                  "op kernelop_examples::relu is already registered by kernelop as "
                  "'kernelop_examples::relu(Tensor x) -> Tensor' with a different spec"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(&reg("relu").op(), &a.op()) << "the first registration is untouched";
}

TORCH_LIBRARY_FRAGMENT(kernelop_taken, m) {
  m.def("relu(Tensor x, int n) -> Tensor");
}

TEST(TorchRegistration, FailureLeavesNothingRegisteredAndARetryWorks) {
  OpDecl decl = load_op_file(examples() / "relu.json");
  decl.op_name = "kernelop_taken::relu";  // already defined above, with another schema
  CompileOptions o;
  o.archs = {"sm_90"};
  try {
    torch_ops::register_op(compile_op(decl, o));
    FAIL() << "expected PyTorch to refuse";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "op kernelop_taken::relu: PyTorch refused the registration (already "
                  "defined as 'kernelop_taken::relu(Tensor x, int n) -> Tensor')"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(torch_ops::is_registered("kernelop_taken::relu"));
  decl.op_name = "kernelop_taken::relu2";
  EXPECT_NO_THROW(torch_ops::register_op(compile_op(decl, o)));
  EXPECT_TRUE(torch_ops::is_registered("kernelop_taken::relu2"));
}

KernelOp compiled_op(OpDecl decl, const ValidateOptions& overrides = {}) {
  CompileOptions o;
  o.archs = {"sm_90"};
  return KernelOp(compile(derive_plan(decl, overrides), o));
}

bool has_kernel(const std::string& op, c10::DispatchKey key) {
  return handle(op).hasKernelForDispatchKey(key);
}

TEST(TorchOverride, AGivenSchemaIsUsedAndCheckedAgainstThePlan) {
  OpDecl decl = load_op_file(examples() / "scale.json");
  decl.op_name = "kernelop_ov::scale";
  torch_ops::RegisterOptions options;
  options.schema = "(Tensor input, float factor=2.5) -> Tensor";
  torch_ops::register_op(compiled_op(decl), options);
  std::ostringstream s;
  s << handle("kernelop_ov::scale").schema();
  EXPECT_EQ(s.str(), "kernelop_ov::scale(Tensor input, float factor=2.5) -> Tensor");

  auto refused = [&](const std::string& schema, const std::string& needle) {
    OpDecl d = decl;
    d.op_name = "kernelop_ov::scale_bad";
    torch_ops::RegisterOptions o;
    o.schema = schema;
    try {
      torch_ops::register_op(compiled_op(d), o);
      ADD_FAILURE() << "expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Spec);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(torch_ops::is_registered("kernelop_ov::scale_bad"));
  };
  refused("(Tensor x, int alpha) -> Tensor",
          "argument 1 ('alpha') is 'int' where the spec has float scalar 'alpha'");
  refused("(Tensor(a!) x, float alpha) -> Tensor",
          "argument 0 ('x') is 'Tensor(a!)' where the spec has tensor input 'x'");
  refused("(Tensor x, float alpha) -> (Tensor, Tensor)", "it returns 2 value(s), the spec 1");
  refused("(Tensor x, float alpha) -> Tensor(a)", "kernelop's kernels return new Tensors");
  refused("Tensor x -> Tensor", "must start with the argument list");
  refused("(Tensor x, float alpha -> Tensor", "is not a valid PyTorch schema");
}

TEST(TorchOverride, TheCallersKernelsAreLeftOutAndUnregisterRemovesAll) {
  OpDecl decl = load_op_file(examples() / "relu.json");
  decl.op_name = "kernelop_ov::relu_meta_only";
  torch_ops::RegisterOptions options;
  options.meta_kernel = false;
  torch_ops::register_op(compiled_op(decl), options);
  EXPECT_TRUE(has_kernel("kernelop_ov::relu_meta_only", c10::DispatchKey::CUDA));
  EXPECT_FALSE(has_kernel("kernelop_ov::relu_meta_only", c10::DispatchKey::Meta));
  torch_ops::unregister_op("kernelop_ov::relu_meta_only");
  EXPECT_FALSE(torch_ops::is_registered("kernelop_ov::relu_meta_only"));
  EXPECT_FALSE(c10::Dispatcher::singleton().findSchema({"kernelop_ov::relu_meta_only", ""}));

  // Outputs shaped by a meta function: kernelop cannot be the Meta kernel.
  OpDecl repeat2 = load_op_file(examples() / "repeat2.json");
  repeat2.op_name = "kernelop_ov::repeat2";
  repeat2.spec.outputs.reset();
  repeat2.spec.extras = {DimSize{"x", 1, false}, Numel{"out0", false}};
  KernelOp external = compiled_op(repeat2, ValidateOptions{true, false, 1});
  try {
    torch_ops::register_op(std::move(external));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its output shapes come from a meta_fn"),
              std::string::npos)
        << e.what();
  }
  // Without inputs, only the caller's functions can be kernels, and the schema is theirs.
  OpDecl bare;
  bare.op_name = "kernelop_ov::bare";
  bare.spec.kernel_name = "relu";
  bare.spec.kernel_source = decl.spec.kernel_source;
  torch_ops::RegisterOptions none;
  none.cuda_kernel = none.meta_kernel = false;
  try {
    torch_ops::register_op(compiled_op(bare, ValidateOptions{true, true, 0}), none);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no schema; the spec declares no inputs"),
              std::string::npos)
        << e.what();
  }
  none.schema = "(Tensor x) -> Tensor";
  auto r = torch_ops::register_op(compiled_op(bare, ValidateOptions{true, true, 0}), none);
  EXPECT_EQ(r.schema(), "kernelop_ov::bare(Tensor x) -> Tensor");
  EXPECT_FALSE(has_kernel("kernelop_ov::bare", c10::DispatchKey::CUDA));
  EXPECT_EQ(&torch_ops::find_registration("kernelop_ov::bare").op(), &r.op());
}

at::Tensor meta(std::vector<int64_t> shape, at::ScalarType dtype = at::kFloat) {
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(c10::kMeta));
}

TEST(TorchMeta, OutputShapesAndDtypesWithoutAGpu) {
  for (const char* n :
       {"relu", "rowsum", "rowsum_keepdim", "repeat2", "sin_cos", "bias_add_2d", "relu_generic"})
    reg(n);
  auto shape = [](const c10::IValue& v) { return v.toTensor().sizes().vec(); };
  EXPECT_EQ(shape(call("kernelop_examples::relu", {meta({4, 6})})[0]),
            (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(shape(call("kernelop_examples::rowsum", {meta({4, 6})})[0]), (std::vector<int64_t>{4}));
  EXPECT_EQ(shape(call("kernelop_examples::rowsum_keepdim", {meta({3, 4, 6})})[0]),
            (std::vector<int64_t>{3, 4, 1}));
  EXPECT_EQ(shape(call("kernelop_examples::repeat2", {meta({4, 6})})[0]),
            (std::vector<int64_t>{4, 12}));
  auto two = call("kernelop_examples::sin_cos", {meta({5})});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(shape(two[1]), (std::vector<int64_t>{5}));
  auto half = call("kernelop_examples::relu_generic", {meta({7}, at::kHalf)});
  EXPECT_EQ(half[0].toTensor().scalar_type(), at::kHalf);
  EXPECT_TRUE(half[0].toTensor().is_meta());
}

// Note [one shape evaluator]: a launch's checks (KernelOp::output_shapes, no GPU needed) and the
// Meta kernel refuse the same inputs with the same message.
// Note [first-use growth] from C++: the miss handler sees the sizes of a call that broke a
// requirement and grows the registration with an op that takes them; the call is retried once and
// later calls use the grown op; a handler that declines leaves the refusal, with its note.
TEST(TorchGrowth, AMissHandlerGrowsTheRegistrationAndTheCallIsRetried) {
  auto relu_requiring = [](const std::string& requirement) {
    OpDecl d = load_op_file(examples() / "relu.json");
    d.op_name = "kernelop_grow::relu";
    d.spec.requirements = {Requirement::parse(requirement)};
    return compiled_op(d);
  };
  auto shape = [](const c10::IValue& v) { return v.toTensor().sizes().vec(); };
  torch_ops::Registration r = torch_ops::register_op(relu_requiring("dim(x, 0) == 4"));
  std::vector<std::vector<std::int64_t>> seen;
  std::string refusal;
  r.on_miss([&](const torch_ops::Miss& m) -> torch_ops::MissOutcome {
    seen.emplace_back(m.shapes[0].begin(), m.shapes[0].end());
    refusal = m.refusal;
    if (m.shapes[0][0] == 8) {
      r.grow(relu_requiring("(dim(x, 0) == 4) + (dim(x, 0) == 8) != 0"));
      return {true, {}};
    }
    return {false, "no op for " + std::to_string(m.shapes[0][0]) + " rows"};
  });
  EXPECT_TRUE(r.has_miss_handler());
  EXPECT_EQ(shape(call("kernelop_grow::relu", {meta({8, 3})})[0]), (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(r.generations(), 2u);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<std::int64_t>{8, 3}));
  EXPECT_EQ(refusal, "the inputs break the requirement 'dim(x, 0) == 4': 8 == 4 is false");
  EXPECT_EQ(shape(call("kernelop_grow::relu", {meta({8, 5})})[0]), (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(seen.size(), 1u) << "a size the grown op takes asks nothing";
  EXPECT_EQ(
      error_of([] {
        call("kernelop_grow::relu", {meta({5, 3})});
      }),
      "op kernelop_grow::relu: the inputs break the requirement '(dim(x, 0) == 4) + (dim(x, 0) "
      "== 8) != 0': 0 != 0 is false; no op for 5 rows");
  EXPECT_EQ(seen.size(), 2u);
  // Growing by another op is refused, and changes nothing.
  OpDecl add = load_op_file(examples() / "add.json");
  add.op_name = "kernelop_grow::relu";
  try {
    r.grow(compiled_op(add));
    ADD_FAILURE() << "grew by another op";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a registration grows only by the same op with more "
                                         "tactics, and the op given differs: its schema is"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(r.generations(), 2u);
  EXPECT_THROW(r.on_miss([](const torch_ops::Miss&) { return torch_ops::MissOutcome{}; }), Error);
  torch_ops::unregister_op("kernelop_grow::relu");  // the handler goes with the registration
  EXPECT_FALSE(r.has_miss_handler());
}

TEST(TorchMeta, TheLaunchAndTheMetaKernelAgree) {
  struct Case {
    std::string op, shape, needle;
    std::vector<std::int64_t> x;
  };
  std::vector<Case> cases = {
      {"drift::negative",
       R"j(["dim(x, 0) - 5"])j",
       "output 'y' dim 0 = 'dim(x, 0) - 5' evaluates to a negative size",
       {3}},
      {"drift::axis_range",
       R"j(["numel_except(x, 3)"])j",
       "input 'x' has rank 2 (shape [4, 2]) but output 'y' shape needs rank >= 4",
       {4, 2}},
      {"drift::axis_twice",
       R"j(["numel_except(x, 0, -2)"])j",
       "'numel_except(x, 0, -2)': axis -2 is listed twice for x",
       {4, 2}},
      {"drift::dim_range",
       R"j(["dim(x, -3)"])j",
       "input 'x' has rank 2 (shape [4, 2]) but output 'y' shape needs rank >= 3",
       {4, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    OpDecl d = parse_op_json(R"({"op": ")" + c.op + R"(", "kernel_name": "k",
      "kernel_source": "extern \"C\" __global__ void k(const float* x, float* y) {}",
      "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": )" +
                                 c.shape + R"(, "dtype": "float32"}],
      "geometry": {"custom": {"grid": [1], "block": [1]}}})",
                             "", "drift");
    CompileOptions o;
    o.archs = {"compute_90"};
    KernelOp op = compile_op(d, o);
    torch_ops::register_op(KernelOp(op.image()));
    TensorView x{nullptr, DType::Float32, Shape(std::span<const std::int64_t>(c.x)), {}, 0};
    std::string launch;
    try {
      op.output_shapes(std::span<const TensorView>(&x, 1), {});
    } catch (const Error& e) {
      launch = e.what();
    }
    std::string traced = error_of([&] { call(c.op, {meta(c.x)}); });
    EXPECT_NE(launch.find(c.needle), std::string::npos) << launch;
    EXPECT_NE(traced.find(c.needle), std::string::npos) << traced;
  }
}

TEST(TorchMeta, AnInPlaceInputThatIsNotContiguousIsRefusedOnMetaTensorsToo) {
  reg("cache_scatter");
  // cache [rows, width] written in place, given transposed (not contiguous).
  at::Tensor cache = at::empty({8, 4}, at::TensorOptions().device(c10::kMeta)).t();
  at::Tensor values = at::empty({2, 8}, at::TensorOptions().device(c10::kMeta));
  at::Tensor index = at::empty({2}, at::TensorOptions().dtype(at::kLong).device(c10::kMeta));
  std::string traced = error_of([&] {
    call("kernelop_examples::cache_scatter", {cache, index, values});
  });
  EXPECT_NE(traced.find("input 'cache' is written in place and must be contiguous"),
            std::string::npos)
      << traced;
}

TEST(TorchMeta, ClearErrors) {
  reg("relu_generic");
  reg("bias_add_2d");
  reg("relu");
  EXPECT_NE(error_of([] { call("kernelop_examples::relu_generic", {meta({7}, at::kDouble)}); })
                .find("op kernelop_examples::relu_generic: input 'x' must be float32, float16, "
                      "bfloat16, got float64"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              call("kernelop_examples::bias_add_2d", {meta({16}), meta({16})});
            }).find("input 'x' has rank 1 (shape [16]) but extra 0 'dim(x, -2)' needs rank >= 2"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        call("kernelop_examples::relu", {at::ones({3})});
      }).find("op kernelop_examples::relu: got CPU tensors; kernelop ops run on CUDA tensors"),
      std::string::npos);
  // Kernelop's error kinds become the matching torch errors (TypeError in Python).
  EXPECT_THROW(call("kernelop_examples::relu_generic", {meta({7}, at::kDouble)}), c10::TypeError);
}

class TorchCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(TorchCuda, EagerCallsMatchATen) {
  for (const char* n : {"relu", "softmax", "rowsum", "scale", "sin_cos", "repeat2", "relu_generic",
                        "cache_scatter"}) {
    reg(n);
  }
  auto opts = at::TensorOptions().device(at::kCUDA);
  at::Tensor x = at::randn({37, 1001}, opts);
  EXPECT_TRUE(at::equal(call("kernelop_examples::relu", {x})[0].toTensor(), at::relu(x)));
  EXPECT_TRUE(at::allclose(call("kernelop_examples::softmax", {x})[0].toTensor(),
                           at::softmax(x, -1), 1e-5, 1e-6));
  EXPECT_TRUE(
      at::allclose(call("kernelop_examples::rowsum", {x})[0].toTensor(), x.sum(-1), 1e-4, 1e-4));
  EXPECT_TRUE(at::allclose(call("kernelop_examples::scale", {x, 2.5})[0].toTensor(), x * 2.5));
  auto sc = call("kernelop_examples::sin_cos", {x});
  EXPECT_TRUE(at::allclose(sc[0].toTensor(), x.sin(), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(sc[1].toTensor(), x.cos(), 1e-5, 1e-6));
  EXPECT_TRUE(at::equal(call("kernelop_examples::repeat2", {x})[0].toTensor(), at::cat({x, x}, 1)));
  for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    at::Tensor h = at::randn({4099}, opts.dtype(dtype));
    EXPECT_TRUE(at::equal(call("kernelop_examples::relu_generic", {h})[0].toTensor(), at::relu(h)));
  }
  // Non-contiguous inputs are made contiguous; in-place writes land in the caller's tensor.
  at::Tensor t = at::randn({64, 32}, opts).t();
  EXPECT_TRUE(at::equal(call("kernelop_examples::relu", {t})[0].toTensor(), at::relu(t)));
  at::Tensor cache = at::zeros({16, 8}, opts), values = at::randn({3, 8}, opts);
  at::Tensor index = at::tensor({5, 0, 9}, opts.dtype(at::kLong));
  call("kernelop_examples::cache_scatter", {cache, index, values});
  EXPECT_TRUE(at::equal(cache.index_select(0, index), values));
  // Zero-size inputs give zero-size outputs.
  EXPECT_EQ(call("kernelop_examples::relu", {at::empty({0, 3}, opts)})[0].toTensor().numel(), 0);
}

TEST_F(TorchCuda, LaunchesOnTheCurrentStream) {
  reg("relu");
  auto opts = at::TensorOptions().device(at::kCUDA);
  at::Tensor x = at::randn({1 << 20}, opts);
  c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
  c10::Stream side = impl.getStreamFromGlobalPool(x.device());
  c10::Stream before = impl.exchangeStream(side);
  at::Tensor y = call("kernelop_examples::relu", {x})[0].toTensor();
  impl.exchangeStream(before);
  impl.synchronizeStream(side);
  EXPECT_TRUE(at::equal(y, at::relu(x)));
}

}  // namespace
}  // namespace kernelop
