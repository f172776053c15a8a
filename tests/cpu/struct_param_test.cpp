// Struct parameters (a CuTe DSL kernel's tensors): the spec's form, the layout the plan derives,
// the check against the PTX's .param arrays, and the bytes a launch packs.
#include <gtest/gtest.h>

#include <cstring>

#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/spec_json.hpp"
#include "runtime/launch_args.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;

// A CuTe-DSL-shaped op: each 2-D tensor is {pointer, dim 0, dim 1, row stride as int64}.
constexpr const char* kAdd = R"J({
  "op": "kop_struct::add",
  "kernel_name": "add",
  "kernel_source": "def add(): pass",
  "cutedsl": {"version": "4.8.1"},
  "inputs": [{"name": "a", "dtype": "float32"}, {"name": "b", "dtype": "float32"}, {"name": "n", "scalar": "int"}],
  "outputs": [{"name": "c", "shape": {"same_as": "a"}}],
  "params": [
    {"struct": ["a", {"expr": "dim(a, 0)"}, {"expr": "dim(a, 1)"}, {"expr": "stride(a, 0)", "int64": true}]},
    {"struct": ["b", {"expr": "dim(b, 0)"}]},
    "n",
    {"struct": [{"expr": "numel(c)"}, "c"]}
  ],
  "geometry": {"custom": {"grid": ["cdiv(numel(a), 256)"], "block": [256]}}
})J";

OpDecl add_decl(std::string_view text = kAdd) {
  return parse_op_json(text, "", "add.json");
}

TEST(StructParam, JsonRoundTripsAndThePlanLaysOutEachStructAsC) {
  OpDecl d = add_decl();
  ASSERT_TRUE(d.spec.foreign.has_value());
  EXPECT_EQ(d.spec.foreign->compiler, ForeignKernel::Compiler::CuteDsl);
  EXPECT_EQ(parse_op_json(print_op_json(d), "", "again.json"), d);
  EXPECT_NE(print_op_json(d).find("\"cutedsl\""), std::string::npos);

  OpPlan p = derive_plan(d);
  ASSERT_EQ(p.args.size(), 9u);
  ASSERT_EQ(p.structs.size(), 3u);
  // {ptr, int, int, int64}: 0, 8, 12, 16 -> 24 bytes aligned to 8
  EXPECT_EQ(p.structs[0], (StructParam{0, {0, 8, 12, 16}, 24, 8}));
  // {ptr, int}: padded to 16
  EXPECT_EQ(p.structs[1], (StructParam{4, {0, 8}, 16, 8}));
  // {int, ptr}: the pointer at 8
  EXPECT_EQ(p.structs[2], (StructParam{7, {0, 8}, 16, 8}));
  std::vector<KernelParam> k = p.kernel_params();
  ASSERT_EQ(k.size(), 4u);
  EXPECT_TRUE(k[0].is_struct);
  EXPECT_FALSE(k[2].is_struct);
  EXPECT_EQ(k[2].first, 6);
  EXPECT_EQ(k[2].size, 4);
  EXPECT_EQ(k[3].first, 7);
  EXPECT_EQ(k[3].count, 2);
}

TEST(StructParam, SmallFieldsPackTightly) {
  OpDecl d = add_decl();
  std::get<ScalarInput>((*d.spec.inputs)[2]).type = ScalarType::Bool;
  (*d.spec.params)[2] = ParamStruct{{ParamName{"n"}, Extra{Numel{"a"}}, ParamName{"n"}}};
  EXPECT_EQ(derive_plan(d).structs[2], (StructParam{6, {0, 4, 8}, 12, 4}));  // an input, twice
  (*d.spec.params)[2] = ParamStruct{{ParamName{"n"}, Extra{Numel{"a"}}}};
  OpPlan p = derive_plan(d);
  // {bool, int}: the int at 4, 8 bytes aligned to 4
  EXPECT_EQ(p.structs[2], (StructParam{6, {0, 4}, 8, 4}));
}

TEST(StructParam, ValidationNamesTheField) {
  auto with_params = [](std::string_view params) {
    std::string text = kAdd;
    std::size_t begin = text.find("\"params\"");
    std::size_t end = text.find("\"geometry\"");
    text.replace(begin, end - begin, "\"params\": " + std::string(params) + ",\n  ");
    return text;
  };
  expect_error([&] { add_decl(with_params(R"J([{"struct": []}, "c"])J")); }, ErrorKind::Spec,
               "params[0].struct: has no fields");
  expect_error([&] { derive_plan(add_decl(with_params(R"J([{"struct": ["a", "zz"]}, "c"])J"))); },
               ErrorKind::Spec, "params[0].struct[1]: 'zz' is not an input or output");
  {  // one buffer through two parameters (a kernel that reads and writes it in place)
    OpPlan twice = derive_plan(add_decl(with_params(R"J([{"struct": ["c"]}, "c"])J")));
    ASSERT_EQ(twice.args.size(), 2u);
    EXPECT_EQ(twice.args[0].kind, ArgSlot::Kind::Output);
    EXPECT_EQ(twice.args[1].kind, ArgSlot::Kind::Output);
    EXPECT_EQ(twice.args[0].index, twice.args[1].index);
  }
  expect_error([&] { derive_plan(add_decl(with_params(R"J([{"struct": ["a"]}])J"))); },
               ErrorKind::Spec, "does not pass output 'c'");
  expect_error(
      [&] {
        derive_plan(add_decl(with_params(R"J([{"struct": ["a", {"expr": "dim(q, 0)"}]}, "c"])J")));
      },
      ErrorKind::Spec, "params[0].struct[1]");
  expect_error([&] { add_decl(with_params(R"J([{"struct": ["a"], "x": 1}, "c"])J")); },
               ErrorKind::Spec, "params[0].x: unknown field");
  std::string both = kAdd;
  both.insert(both.find("\"inputs\""), R"J("triton": {"version": "3.6.0"}, )J");
  expect_error([&] { add_decl(both); }, ErrorKind::Spec,
               "cutedsl: cannot be combined with 'triton'");
}

// The PTX a CuTe DSL kernel of this op has: three .b8 arrays and an int.
std::string add_ptx(int first_bytes = 24, int first_align = 8) {
  return ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry add(\n"
         "\t.param .align " +
         std::to_string(first_align) + " .b8 add_param_0[" + std::to_string(first_bytes) +
         "],\n"
         "\t.param .align 8 .b8 add_param_1[16],\n"
         "\t.param .u32 add_param_2,\n"
         "\t.param .align 8 .b8 add_param_3[16]\n)\n{\n\tret;\n}\n";
}

TEST(StructParam, PtxArraysAreCheckedBySizeAndAlignment) {
  CompiledImage image = image_from_ptx(derive_plan(add_decl()), add_ptx(), "add");
  EXPECT_EQ(image.images.at(0).arch, "compute_80");
  expect_error([&] { image_from_ptx(derive_plan(add_decl()), add_ptx(32), "add"); },
               ErrorKind::Compile,
               "parameter 0 is '.b8[32] .align 8' but the calling convention passes a struct of "
               "24 bytes aligned to 8 (fields from 'a')");
  expect_error([&] { image_from_ptx(derive_plan(add_decl()), add_ptx(24, 4), "add"); },
               ErrorKind::Compile, "parameter 0 is '.b8[24] .align 4'");
  // A struct where the convention passes a plain value, and the other way round.
  std::string ptx = add_ptx();
  std::string u32 = ".param .u32 add_param_2";
  ptx.replace(ptx.find(u32), u32.size(), ".param .align 4 .b8 add_param_2[4]");
  expect_error([&] { image_from_ptx(derive_plan(add_decl()), ptx, "add"); }, ErrorKind::Compile,
               "parameter 2 is '.b8[4] .align 4' but the calling convention passes 'n' as int");
}

TEST(StructParam, PackagesAsFormat3AndReadsBack) {
  CompiledImage image = image_from_ptx(derive_plan(add_decl()), add_ptx(), "add");
  std::string bytes = write_package_bytes(image);
  EXPECT_EQ(bytes[8], 3) << "struct parameters and CuTe DSL kernels are format 3";
  Package back = parse_package(bytes, "add.kop");
  EXPECT_EQ(back.format_version, 3u);
  EXPECT_EQ(back.image.plan.structs, image.plan.structs);
  EXPECT_EQ(back.image.plan.spec, image.plan.spec);
}

TEST(StructParam, NvrtcRefusesThem) {
  OpDecl d = add_decl();
  d.spec.foreign.reset();
  d.spec.kernel_source = "extern \"C\" __global__ void add() {}";
  expect_error([&] { compile(derive_plan(d)); }, ErrorKind::Spec,
               "parameter 0 is a struct of fields, which kernelop verifies only against PTX");
}

TEST(StructParam, LaunchPacksEachStructsBytes) {
  OpPlan p = derive_plan(add_decl());
  detail::PackedArgs packed;
  float a = 0, b = 0, c = 0;
  std::int64_t values[] = {0, 7, 9, 1LL << 40, 0, 5, -3, 77, 0};
  for (std::size_t i = 0; i < p.args.size(); ++i) {
    void* slot = packed.slot(i);
    const ArgSlot& arg = p.args[i];
    if (arg.is_pointer()) {
      detail::pack_pointer(slot, arg.name == "a" ? &a : arg.name == "b" ? &b : &c);
    } else {
      std::memset(slot, 0xee, 8);  // the bytes past a 4-byte value must not leak into a struct
      detail::pack_scalar(slot, arg.value_type, ScalarArg::of_int(values[i]));
    }
  }
  void** params = packed.kernel_params(p);
  auto read = [](const void* base, int offset, auto value) {
    std::memcpy(&value, static_cast<const char*>(base) + offset, sizeof value);
    return value;
  };
  EXPECT_EQ(read(params[0], 0, static_cast<void*>(nullptr)), static_cast<void*>(&a));
  EXPECT_EQ(read(params[0], 8, std::int32_t{}), 7);
  EXPECT_EQ(read(params[0], 12, std::int32_t{}), 9);
  EXPECT_EQ(read(params[0], 16, std::int64_t{}), 1LL << 40);
  EXPECT_EQ(read(params[1], 0, static_cast<void*>(nullptr)), static_cast<void*>(&b));
  EXPECT_EQ(read(params[1], 8, std::int32_t{}), 5);
  EXPECT_EQ(read(params[1], 12, std::int32_t{}), 0);  // padding is zero
  EXPECT_EQ(read(params[2], 0, std::int32_t{}), -3);
  EXPECT_EQ(read(params[3], 0, std::int32_t{}), 77);
  EXPECT_EQ(read(params[3], 4, std::int32_t{}), 0);
  EXPECT_EQ(read(params[3], 8, static_cast<void*>(nullptr)), static_cast<void*>(&c));
  // Each struct is aligned to its alignment.
  for (int i : {0, 1, 3}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(params[i]) % 8, 0u);
}

}  // namespace
}  // namespace kernelop
