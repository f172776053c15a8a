// dtype encoding and tolerant comparison for host tensors.
#include "kernelop/host_tensor.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace kernelop {

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t exp = (x >> 23) & 0xffu;
  std::uint32_t mant = x & 0x7fffffu;
  if (exp == 255) return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {                                                    // subnormal or zero
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    std::uint32_t half = mant >> shift;
    std::uint32_t rest = mant & ((1u << shift) - 1);
    std::uint32_t mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
  std::uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half;  // may carry into the exponent: correct
  return static_cast<std::uint16_t>(half);
}

float bfloat16_to_float(std::uint16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_bfloat16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
    return static_cast<std::uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<std::uint16_t>(x >> 16);
}

namespace {

template <class T>
void put(std::string& out, std::size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const std::string& in, std::size_t i) {
  T v;
  std::memcpy(&v, in.data() + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

std::string HostTensor::encode() const {
  std::string out(bytes(), '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    switch (dtype) {
      case DType::Float32:
        put<float>(out, i, static_cast<float>(v));
        break;
      case DType::Float64:
        put<double>(out, i, v);
        break;
      case DType::Float16:
        put<std::uint16_t>(out, i, float_to_half(static_cast<float>(v)));
        break;
      case DType::BFloat16:
        put<std::uint16_t>(out, i, float_to_bfloat16(static_cast<float>(v)));
        break;
      case DType::Int8:
        put<std::int8_t>(out, i, static_cast<std::int8_t>(v));
        break;
      case DType::UInt8:
        put<std::uint8_t>(out, i, static_cast<std::uint8_t>(v));
        break;
      case DType::Int16:
        put<std::int16_t>(out, i, static_cast<std::int16_t>(v));
        break;
      case DType::Int32:
        put<std::int32_t>(out, i, static_cast<std::int32_t>(v));
        break;
      case DType::Int64:
        put<std::int64_t>(out, i, static_cast<std::int64_t>(v));
        break;
      case DType::Bool:
        put<std::uint8_t>(out, i, v != 0 ? 1 : 0);
        break;
      case DType::Float8E4M3:
      case DType::Float8E5M2:
        throw std::runtime_error("float8 host tensors are not supported");
    }
  }
  return out;
}

void HostTensor::decode(const std::string& in) {
  values.assign(static_cast<std::size_t>(numel()), 0.0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::Float32:
        values[i] = get<float>(in, i);
        break;
      case DType::Float64:
        values[i] = get<double>(in, i);
        break;
      case DType::Float16:
        values[i] = half_to_float(get<std::uint16_t>(in, i));
        break;
      case DType::BFloat16:
        values[i] = bfloat16_to_float(get<std::uint16_t>(in, i));
        break;
      case DType::Int8:
        values[i] = get<std::int8_t>(in, i);
        break;
      case DType::UInt8:
        values[i] = get<std::uint8_t>(in, i);
        break;
      case DType::Int16:
        values[i] = get<std::int16_t>(in, i);
        break;
      case DType::Int32:
        values[i] = get<std::int32_t>(in, i);
        break;
      case DType::Int64:
        values[i] = static_cast<double>(get<std::int64_t>(in, i));
        break;
      case DType::Bool:
        values[i] = get<std::uint8_t>(in, i);
        break;
      case DType::Float8E4M3:
      case DType::Float8E5M2:
        throw std::runtime_error("float8 host tensors are not supported");
    }
  }
}

void HostTensor::round_to_dtype() {
  decode(encode());
}

void fill_uniform(HostTensor& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& v : t.values) v = dist(rng);
  t.round_to_dtype();
}

Comparison compare(const HostTensor& got, const HostTensor& want, double extra_atol) {
  double atol = 1e-5, rtol = 1e-5;
  if (want.dtype == DType::Float16) {
    atol = 1e-3, rtol = 1e-3;
  } else if (want.dtype == DType::BFloat16) {
    atol = 1e-2, rtol = 8e-3;
  } else if (want.dtype == DType::Float64) {
    atol = 1e-12, rtol = 1e-12;
  }
  atol += extra_atol;
  Comparison c;
  for (std::size_t i = 0; i < want.values.size(); ++i) {
    double a = got.values[i], b = want.values[i];
    double err = std::abs(a - b);
    double score = std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::infinity()
                                                  : err / (atol + rtol * std::abs(b));
    if (score > c.worst || c.worst_index < 0) {
      c.worst = score;
      c.worst_index = static_cast<std::int64_t>(i);
    }
    if (!std::isnan(err)) c.max_abs_error = std::max(c.max_abs_error, err);
  }
  return c;
}

void default_inputs(std::vector<HostTensor>& inputs, std::mt19937_64& rng) {
  for (HostTensor& t : inputs) fill_uniform(t, rng, -2.0, 2.0);
}

}  // namespace kernelop
