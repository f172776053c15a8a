// The calling convention checked against the kernel's real parameter types (one test per kind
// of mismatch), and dtype inference from the signature.
#include <gtest/gtest.h>

#include "compile/signature.hpp"
#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

// relu-shaped op over `source`: input x float32, extra numel(x), output y.
OpDecl op(const std::string& source, const std::string& kernel = "k") {
  return testing::relu_like_op(source, kernel, "sig::op");
}

CompiledImage build(const OpDecl& d) {
  CompileOptions o;
  o.archs = {"sm_90"};
  o.use_cache = false;
  return compile(derive_plan(d), o);
}

void expect_mismatch(const OpDecl& d, const std::string& needle) {
  expect_error([&] { build(d); }, ErrorKind::Compile, needle);
}

TEST(Signature, MatchingKernelCompiles) {
  CompiledImage image =
      build(op(R"(extern "C" __global__ void k(const float* x, int n, float* y) {})"));
  EXPECT_EQ(image.lowered_names, std::vector<std::string>{"k"});
}

TEST(Signature, AcceptsRestrictNonConstInputsUnsignedExtrasAndLong) {
  // __restrict__, a non-const pointer for an input the kernel only reads, unsigned extras.
  CompiledImage restrict_unsigned = build(op(
      R"(extern "C" __global__ void k(float* __restrict__ x, unsigned n, float* __restrict__ y) {})"));
  EXPECT_EQ(restrict_unsigned.lowered_names, std::vector<std::string>{"k"});
  EXPECT_EQ(restrict_unsigned.plan.args.at(1).value_type, ScalarType::Int);
  EXPECT_EQ(restrict_unsigned.plan.c_type(restrict_unsigned.plan.args.at(1)), "int");
  OpDecl d = op(R"(extern "C" __global__ void k(const float* x, long n, float* y) {})");
  d.spec.extras = {Numel{"x", true}};
  CompiledImage long_extra = build(d);  // long is 64-bit on LP64
  EXPECT_EQ(long_extra.plan.args.at(1).value_type, ScalarType::Int64);
  EXPECT_EQ(long_extra.plan.c_type(long_extra.plan.args.at(1)), "long long");
  // The plan keeps the calling convention's types; the kernel's compatible spellings pass.
  EXPECT_EQ(restrict_unsigned.plan.c_type(restrict_unsigned.plan.args.at(0)), "const float*");
}

TEST(Signature, WrongArity) {
  expect_mismatch(op(R"(extern "C" __global__ void k(const float* x, float* y) {})"),
                  "kernel k: takes 2 parameter(s) (const float*, float*) but the calling "
                  "convention passes 3 (const float* x, int numel(x), float* y)");
}

TEST(Signature, ValueWhereAPointerIsPassed) {
  expect_mismatch(op(R"(extern "C" __global__ void k(float x, int n, float* y) {})"),
                  "parameter 0 is 'float' but the calling convention passes tensor input 'x' "
                  "as a pointer ('const float*')");
}

TEST(Signature, PointerWhereAValueIsPassed) {
  expect_mismatch(
      op(R"(extern "C" __global__ void k(const float* x, int* n, float* y) {})"),
      "parameter 1 is 'int*' but the calling convention passes extra 'numel(x)' as 'int'");
}

TEST(Signature, WrongElementType) {
  expect_mismatch(
      op("#include <cuda_fp16.h>\nextern \"C\" __global__ void k(const __half* x, int n, float* y) "
         "{}"),
      "parameter 0 is 'const __half*' but the calling convention passes tensor input 'x' as "
      "'const float*' (float32)");
}

TEST(Signature, ConstPointerForAMutatedInput) {
  OpDecl d = op(R"(extern "C" __global__ void k(const float* x, int n) {})");
  d.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float32, true}};
  d.spec.outputs = std::vector<OutputDecl>{};
  d.spec.geometry = Elementwise{{256}, Layout::Flat, std::string("x")};
  expect_mismatch(d,
                  "parameter 0 is 'const float*' but the calling convention passes tensor "
                  "input 'x' as a pointer the kernel writes ('float*'); drop the const");
}

TEST(Signature, ConstPointerForAnOutput) {
  expect_mismatch(op(R"(extern "C" __global__ void k(const float* x, int n, const float* y) {})"),
                  "parameter 2 is 'const float*' but the calling convention passes output 'y' as "
                  "a pointer the kernel writes ('float*')");
}

TEST(Signature, ScalarFloatVersusDouble) {
  OpDecl d = op(R"(extern "C" __global__ void k(const float* x, double a, int n, float* y) {})");
  d.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float32, false},
                                     ScalarInput{"a", ScalarType::Float}};
  expect_mismatch(
      d, "parameter 1 is 'double' but the calling convention passes scalar input 'a' as 'float'");
  d.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float32, false},
                                     ScalarInput{"a", ScalarType::Float64}};
  build(d);  // declared float64: passes
}

TEST(Signature, ScalarIntVersusInt64AndBool) {
  OpDecl d = op(R"(extern "C" __global__ void k(const float* x, long long a, int n, float* y) {})");
  d.spec.inputs =
      std::vector<Input>{InputDecl{"x", DType::Float32, false}, ScalarInput{"a", ScalarType::Int}};
  expect_mismatch(
      d, "parameter 1 is 'long long' but the calling convention passes scalar input 'a' as 'int'");
  d.spec.inputs =
      std::vector<Input>{InputDecl{"x", DType::Float32, false}, ScalarInput{"a", ScalarType::Bool}};
  expect_mismatch(
      d, "parameter 1 is 'long long' but the calling convention passes scalar input 'a' as 'bool'");
  // A scalar int is signed: unsigned is only accepted for extras.
  d.spec.kernel_source =
      R"(extern "C" __global__ void k(const float* x, unsigned a, int n, float* y) {})";
  d.spec.inputs =
      std::vector<Input>{InputDecl{"x", DType::Float32, false}, ScalarInput{"a", ScalarType::Int}};
  expect_mismatch(d, "parameter 1 is 'unsigned int'");
}

TEST(Signature, ExtraWidthMismatchesSayHowToFix) {
  expect_mismatch(op(R"(extern "C" __global__ void k(const float* x, long long n, float* y) {})"),
                  "parameter 1 is 'long long' but the calling convention passes extra 'numel(x)' "
                  "as 'int' (32-bit); declare the extra int64 or take an int");
  OpDecl d = op(R"(extern "C" __global__ void k(const float* x, int n, float* y) {})");
  d.spec.extras = {Numel{"x", true}};
  expect_mismatch(d,
                  "parameter 1 is 'int' but the calling convention passes extra 'numel(x)' as "
                  "'long long' (declared int64); take a long long");
}

TEST(Signature, KernelNotFoundIsNamed) {
  expect_mismatch(
      op(R"(extern "C" __global__ void relu(const float* x, int n, float* y) {})", "rleu"),
      "kernel 'rleu' is not a __global__ function of kernel.cu that NVRTC can take the "
      "address of");
}

TEST(Signature, TemplateInstanceWithTheWrongElementType) {
  OpDecl d =
      op("#include <cuda_fp16.h>\n"
         "template <class T> __global__ void k(const float* x, int n, T* y) {}",
         "k<T>");
  d.spec.type_params = {TypeParam{"T", {DType::Float32, DType::Float16}}};
  d.spec.inputs = std::vector<Input>{InputDecl{"x", std::string("T"), false}};
  expect_mismatch(d,
                  "kernel k<__half>: parameter 0 is 'const float*' but the calling convention "
                  "passes tensor input 'x' as 'const __half*' (float16)");
}

TEST(Signature, InfersOmittedDtypesFromTheSignature) {
  OpDecl d =
      op("#include <cuda_bf16.h>\n"
         "extern \"C\" __global__ void k(const __nv_bfloat16* x, const long long* i, int n, "
         "__nv_bfloat16* y) {}");
  d.spec.inputs =
      std::vector<Input>{InputDecl{"x", std::nullopt, false}, InputDecl{"i", std::nullopt, false}};
  OpPlan before = derive_plan(d);
  EXPECT_FALSE(before.tensors[0].dtype.has_value());
  EXPECT_EQ(before.c_type(before.args[0]), "const ?*");
  CompiledImage image = build(d);
  EXPECT_EQ(image.plan.tensors[0].dtype, DTypeDecl(DType::BFloat16));
  EXPECT_EQ(image.plan.tensors[1].dtype, DTypeDecl(DType::Int64));
  EXPECT_EQ(image.plan.tensors[2].dtype, DTypeDecl(DType::BFloat16));  // output y follows x
  EXPECT_EQ(image.plan.c_type(image.plan.args[0]), "const __nv_bfloat16*");
  EXPECT_EQ(image.plan.c_type(image.plan.args[3]), "__nv_bfloat16*");
}

TEST(Signature, InferenceFailsForVoidPointers) {
  OpDecl d = op(R"(extern "C" __global__ void k(const void* x, int n, float* y) {})");
  d.spec.inputs = std::vector<Input>{InputDecl{"x", std::nullopt, false}};
  expect_mismatch(d,
                  "parameter 0 is 'const void*'; cannot infer the dtype of tensor input 'x' "
                  "from it: declare the input's dtype");
}

TEST(Signature, InferredOutputIsCheckedToo) {
  // x is inferred as float16, so y (dtype from x) must be __half* as well.
  OpDecl d =
      op("#include <cuda_fp16.h>\nextern \"C\" __global__ void k(const __half* x, int n, float* y) "
         "{}");
  d.spec.inputs = std::vector<Input>{InputDecl{"x", std::nullopt, false}};
  expect_mismatch(d,
                  "parameter 2 is 'float*' but the calling convention passes output 'y' as "
                  "'__half*' (float16)");
}

TEST(Signature, DecodesProbeNames) {
  EXPECT_EQ(
      detail::parse_signature_codes("_ZN9__kop_sig5probeINS_5codesIJLx3ELx1102ELxn5ELx11EEEEEE"),
      (std::vector<std::int64_t>{3, 1102, -5, 11}));
  expect_error([] { detail::parse_signature_codes("_Z3foov"); }, ErrorKind::Internal,
               "cannot decode the signature probe");
  EXPECT_EQ(detail::decode_param(1102).text(), "const float*");
  EXPECT_EQ(detail::decode_param(1011).text(), "int*");
  EXPECT_EQ(detail::decode_param(12).text(), "long long");
  EXPECT_EQ(detail::decode_param(1000).text(), "<unknown type>*");
  EXPECT_EQ(detail::decode_param(1016).dtype(), DType::Int8);  // plain char* counts as int8
}

}  // namespace
}  // namespace kernelop
