// Non-owning views of the caller's device buffers and scalar values, as launches take them.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

#include "kernelop/dtype.hpp"
#include "kernelop/error.hpp"

namespace kernelop {

/// Tensors of higher rank are rejected with an error.
inline constexpr int kMaxRank = 16;

/// A shape (or strides) with inline storage: no heap allocation on the launch path.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const std::int64_t> dims) { assign(dims.data(), dims.size()); }

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
  const std::int64_t* begin() const { return dims_.data(); }
  const std::int64_t* end() const { return dims_.data() + rank_; }
  std::span<const std::int64_t> span() const {
    return {dims_.data(), static_cast<std::size_t>(rank_)};
  }
  void push_back(std::int64_t d);
  /// Product of the dims (1 for rank 0); throws Error(Launch) on int64 overflow.
  std::int64_t numel() const;
  std::string to_string() const;  ///< "[2, 3]"
  bool operator==(const Shape& other) const;

 private:
  void assign(const std::int64_t* dims, std::size_t n);
  // Only the first rank_ entries are meaningful; the rest stay uninitialised so that a Shape
  // costs nothing to create on the launch path.
  std::array<std::int64_t, kMaxRank> dims_;
  int rank_ = 0;
};

/// A tensor in device memory: pointer, dtype, shape, optional strides (in elements; empty means
/// contiguous) and the CUDA device it lives on.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;  ///< rank 0: contiguous
  int device = 0;

  /// True when strides are absent or those of a row-major contiguous tensor (size-1 axes may
  /// have any stride).
  bool is_contiguous() const;
  /// The stride of a normalised axis in elements (row-major when `strides` is absent).
  std::int64_t stride(int axis) const;
  /// True unless every element is provably distinct: false for contiguous tensors and for any
  /// permutation of strides that nest (each at least the extent of the smaller ones); true for
  /// expand()ed views (a zero stride) and for layouts whose axes interleave. A kernel must not
  /// write a view for which this is true.
  bool may_overlap() const;
  /// The bytes [first, last) that the view's elements span (empty for no elements): two views
  /// whose spans are disjoint share no element.
  std::pair<std::uintptr_t, std::uintptr_t> byte_span() const;
};

/// A scalar argument: a Python float, int or bool.
struct ScalarArg {
  enum class Kind : std::uint8_t { Float, Int, Bool };
  Kind kind = Kind::Float;
  double f = 0;
  std::int64_t i = 0;
  bool b = false;

  static ScalarArg of_float(double v) { return {Kind::Float, v, 0, false}; }
  static ScalarArg of_int(std::int64_t v) { return {Kind::Int, 0, v, false}; }
  static ScalarArg of_bool(bool v) { return {Kind::Bool, 0, 0, v}; }
};

}  // namespace kernelop
