// kernelop's shim for the host standard library names vLLM's device code uses, which NVRTC
// does not provide: the fixed-width integers (<cstdint>), two <type_traits> helpers and the
// <cmath> constants that the gelu variants name. Everything comes from CCCL's cuda::std.
#pragma once

#ifdef __CUDACC_RTC__  // NVRTC; nvcc has the host standard library itself
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

using cuda::std::int64_t;
using cuda::std::uint32_t;

namespace std {
using cuda::std::enable_if_t;
using cuda::std::is_pod_v;
}  // namespace std
#else
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>
#endif

#ifndef M_SQRT1_2
#define M_SQRT1_2 0.70710678118654752440
#define M_SQRT2 1.41421356237309504880
#define M_2_SQRTPI 1.12837916709551257390
#endif
