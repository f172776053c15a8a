// DType names, sizes and CUDA types.
#include "kernelop/dtype.hpp"

#include <string>

namespace kernelop {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  std::string_view cuda_type;
};

constexpr std::array<DTypeInfo, kAllDTypes.size()> kInfo = {{
    {DType::Float32, "float32", 4, "float"},
    {DType::Float16, "float16", 2, "__half"},
    {DType::BFloat16, "bfloat16", 2, "__nv_bfloat16"},
    {DType::Float64, "float64", 8, "double"},
    {DType::Float8E4M3, "float8_e4m3fn", 1, "__nv_fp8_e4m3"},
    {DType::Float8E5M2, "float8_e5m2", 1, "__nv_fp8_e5m2"},
    {DType::Int8, "int8", 1, "signed char"},
    {DType::UInt8, "uint8", 1, "unsigned char"},
    {DType::Int16, "int16", 2, "short"},
    {DType::Int32, "int32", 4, "int"},
    {DType::Int64, "int64", 8, "long long"},
    {DType::Bool, "bool", 1, "bool"},
}};

// The table is indexed by DType: each row must sit at its own enumerator's position.
constexpr bool info_matches_enum() {
  for (std::size_t i = 0; i < kInfo.size(); ++i) {
    if (static_cast<std::size_t>(kInfo[i].dtype) != i || kAllDTypes[i] != kInfo[i].dtype)
      return false;
  }
  return true;
}
static_assert(info_matches_enum(), "kInfo and kAllDTypes must list every DType in enum order");
static_assert(static_cast<std::size_t>(DType::Bool) + 1 == kAllDTypes.size(),
              "a DType was added: add it to kAllDTypes and kInfo");

const DTypeInfo& info(DType dtype) {
  return kInfo[static_cast<std::size_t>(dtype)];
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  return info(dtype).name;
}
std::size_t dtype_size(DType dtype) {
  return info(dtype).size;
}
std::string_view dtype_cuda_type(DType dtype) {
  return info(dtype).cuda_type;
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const auto& entry : kInfo) {
    if (entry.name == name) return entry.dtype;
  }
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr std::array<Alias, 7> kAliases = {{{"float", DType::Float32},
                                                     {"half", DType::Float16},
                                                     {"double", DType::Float64},
                                                     {"int", DType::Int32},
                                                     {"long", DType::Int64},
                                                     {"short", DType::Int16},
                                                     {"float8_e4m3", DType::Float8E4M3}}};
  for (const auto& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  return std::nullopt;
}

}  // namespace kernelop
