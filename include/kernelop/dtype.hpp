// Element types of tensors, with their names (PyTorch's) and the CUDA C++ types kernels use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kernelop {

enum class DType : std::uint8_t {
  Float32,
  Float16,
  BFloat16,
  Float64,
  Float8E4M3,  ///< torch.float8_e4m3fn, CUDA __nv_fp8_e4m3
  Float8E5M2,  ///< torch.float8_e5m2, CUDA __nv_fp8_e5m2
  Int8,
  UInt8,
  Int16,
  Int32,
  Int64,
  Bool,
};

inline constexpr std::array<DType, 12> kAllDTypes = {
    DType::Float32,    DType::Float16,    DType::BFloat16, DType::Float64,
    DType::Float8E4M3, DType::Float8E5M2, DType::Int8,     DType::UInt8,
    DType::Int16,      DType::Int32,      DType::Int64,    DType::Bool};

/// One row per DType, in enum order (dtype.cpp checks it): the one table of names, sizes and CUDA
/// types; other tables of dtypes (the signature decoder's, torch's) are tied to it.
struct DTypeInfo {
  DType dtype;
  std::string_view name;       ///< PyTorch's, without "torch."
  std::size_t size;            ///< bytes
  std::string_view cuda_type;  ///< the CUDA C++ element type
  /// The toolkit header that declares cuda_type ("" for C++'s own types): NVRTC pre-includes it
  /// for the dtypes a type parameter is instantiated with, which the kernel's source may not name.
  std::string_view cuda_header;
};
inline constexpr std::array<DTypeInfo, kAllDTypes.size()> kDTypeTable = {{
    {DType::Float32, "float32", 4, "float", ""},
    {DType::Float16, "float16", 2, "__half", "cuda_fp16.h"},
    {DType::BFloat16, "bfloat16", 2, "__nv_bfloat16", "cuda_bf16.h"},
    {DType::Float64, "float64", 8, "double", ""},
    {DType::Float8E4M3, "float8_e4m3fn", 1, "__nv_fp8_e4m3", "cuda_fp8.h"},
    {DType::Float8E5M2, "float8_e5m2", 1, "__nv_fp8_e5m2", "cuda_fp8.h"},
    {DType::Int8, "int8", 1, "signed char", ""},
    {DType::UInt8, "uint8", 1, "unsigned char", ""},
    {DType::Int16, "int16", 2, "short", ""},
    {DType::Int32, "int32", 4, "int", ""},
    {DType::Int64, "int64", 8, "long long", ""},
    {DType::Bool, "bool", 1, "bool", ""},
}};

/// PyTorch's name without the "torch." prefix: "float32", "bfloat16", "float8_e4m3fn", ...
std::string_view dtype_name(DType dtype);

/// Parses a canonical name or one of PyTorch's aliases ("float", "half", "double", "int",
/// "long", "torch.float32", ...). Returns nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

std::size_t dtype_size(DType dtype);

/// Whether the dtype is a floating-point one (float8 included); else integer or bool.
bool dtype_is_floating(DType dtype);

/// The device bytes of one `dtype` element holding `value` (an initialised output's fill, Note
/// [initialised outputs]), in the low dtype_size() bytes: floating-point values rounded to
/// nearest even as PyTorch stores them (+-inf and NaN kept); nullopt where the dtype cannot hold
/// the value (a finite value beyond a float dtype's largest, as PyTorch's checked conversion;
/// integers and bool: a fraction or out of range; float8: any value but 0).
std::optional<std::uint64_t> fill_bits(DType dtype, double value);

/// The CUDA C++ element type a kernel uses for this dtype: "float", "__half", "__nv_bfloat16".
std::string_view dtype_cuda_type(DType dtype);

/// The toolkit header that declares dtype_cuda_type(dtype), or "" (see DTypeInfo::cuda_header).
std::string_view dtype_cuda_header(DType dtype);

}  // namespace kernelop
