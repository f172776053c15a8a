// DType names, sizes and CUDA types.
#include "kernelop/dtype.hpp"

#include <string>

namespace kernelop {
namespace {

// The table is indexed by DType: each row must sit at its own enumerator's position.
constexpr bool info_matches_enum() {
  for (std::size_t i = 0; i < kDTypeTable.size(); ++i) {
    if (static_cast<std::size_t>(kDTypeTable[i].dtype) != i ||
        kAllDTypes[i] != kDTypeTable[i].dtype)
      return false;
  }
  return true;
}
static_assert(info_matches_enum(),
              "kDTypeTable and kAllDTypes must list every DType in enum order");
static_assert(static_cast<std::size_t>(DType::Bool) + 1 == kAllDTypes.size(),
              "a DType was added: add it to kAllDTypes and kDTypeTable");

const DTypeInfo& info(DType dtype) {
  return kDTypeTable[static_cast<std::size_t>(dtype)];
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

std::string_view dtype_cuda_header(DType dtype) {
  return info(dtype).cuda_header;
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const auto& entry : kDTypeTable) {
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
