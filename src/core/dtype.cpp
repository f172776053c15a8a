// DType names, sizes and CUDA types.
#include "kernelop/dtype.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "kernelop/host_tensor.hpp"

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
bool dtype_is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16 ||
         dtype == DType::Float64 || dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2;
}

std::optional<std::uint64_t> fill_bits(DType dtype, double value) {
  auto bits_of = [](auto v) {
    std::uint64_t out = 0;
    std::memcpy(&out, &v, sizeof v);
    return out;
  };
  // An integer value within [lo, hi], as the dtype's two's complement bytes (`mask`: its width).
  auto integer = [&](double lo, double hi,
                     std::uint64_t mask = ~std::uint64_t{0}) -> std::optional<std::uint64_t> {
    if (!(value >= lo && value <= hi) || std::trunc(value) != value) return std::nullopt;
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(value)) & mask;
  };
  // A finite value beyond a float dtype's largest is refused, as PyTorch's checked conversion of a
  // fill value does (c10::overflows): never an infinity nobody wrote.
  auto beyond = [&](double max) { return std::isfinite(value) && std::fabs(value) > max; };
  switch (dtype) {
    case DType::Float32:
      if (beyond(3.4028234663852886e38)) return std::nullopt;
      return bits_of(static_cast<float>(value));
    case DType::Float64:
      return bits_of(value);
    case DType::Float16:
      if (beyond(65504.0)) return std::nullopt;
      return float_to_half(static_cast<float>(value));
    case DType::BFloat16:
      if (beyond(3.3895313892515355e38)) return std::nullopt;
      return float_to_bfloat16(static_cast<float>(value));
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return value == 0 && !std::signbit(value) ? std::optional<std::uint64_t>(0) : std::nullopt;
    case DType::Int8:
      return integer(-128, 127, 0xffu);
    case DType::UInt8:
      return integer(0, 255);
    case DType::Int16:
      return integer(-32768, 32767, 0xffffu);
    case DType::Int32:
      return integer(-2147483648.0, 2147483647.0, 0xffffffffu);
    case DType::Int64:
      // [-2^63, 2^63): the double given is the value (one past the top is 2^63 itself).
      return value == 9223372036854775808.0
                 ? std::nullopt
                 : integer(-9223372036854775808.0, 9223372036854775808.0);
    case DType::Bool:
      return value == 0 || value == 1 ? std::optional<std::uint64_t>(value == 1 ? 1 : 0)
                                      : std::nullopt;
  }
  return std::nullopt;
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
