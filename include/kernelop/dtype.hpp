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

/// PyTorch's name without the "torch." prefix: "float32", "bfloat16", "float8_e4m3fn", ...
std::string_view dtype_name(DType dtype);

/// Parses a canonical name or one of PyTorch's aliases ("float", "half", "double", "int",
/// "long", "torch.float32", ...). Returns nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

std::size_t dtype_size(DType dtype);

/// The CUDA C++ element type a kernel uses for this dtype: "float", "__half", "__nv_bfloat16".
std::string_view dtype_cuda_type(DType dtype);

}  // namespace kernelop
