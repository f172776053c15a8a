// Shape arithmetic and contiguity.
#include "kernelop/tensor.hpp"

#include <algorithm>
#include <array>
#include <sstream>
#include <utility>

namespace kernelop {

void Shape::assign(const std::int64_t* dims, std::size_t n) {
  if (n > static_cast<std::size_t>(kMaxRank)) {
    KERNELOP_FAIL(Launch) << "rank " << n << " exceeds kernelop's maximum of " << kMaxRank;
  }
  for (std::size_t i = 0; i < n; ++i) dims_[i] = dims[i];
  rank_ = static_cast<int>(n);
}

void Shape::push_back(std::int64_t d) {
  if (rank_ >= kMaxRank) {
    KERNELOP_FAIL(Launch) << "rank " << rank_ + 1 << " exceeds kernelop's maximum of " << kMaxRank;
  }
  dims_[static_cast<std::size_t>(rank_++)] = d;
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (__builtin_mul_overflow(n, dims_[static_cast<std::size_t>(i)], &n)) {
      KERNELOP_FAIL(Launch) << "shape " << to_string() << " has more than 2^63 elements";
    }
  }
  return n;
}

std::string Shape::to_string() const {
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < rank_; ++i) out << (i ? ", " : "") << dims_[static_cast<std::size_t>(i)];
  out << "]";
  return out.str();
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[static_cast<std::size_t>(i)] != other.dims_[static_cast<std::size_t>(i)])
      return false;
  }
  return true;
}

bool TensorView::is_contiguous() const {
  if (strides.rank() == 0) return true;
  if (strides.rank() != shape.rank()) return false;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 0) return true;  // an empty tensor has no layout to get wrong
  }
  std::int64_t expected = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool TensorView::may_overlap() const {
  if (strides.rank() == 0 || shape.numel() <= 1) return false;
  std::array<std::pair<std::uint64_t, std::int64_t>, kMaxRank> axes{};  // |stride|, size
  int n = 0;
  for (int i = 0; i < shape.rank() && i < strides.rank(); ++i) {
    if (shape[i] == 1) continue;
    std::int64_t st = strides[i];
    axes[static_cast<std::size_t>(n++)] = {
        st < 0 ? 0 - static_cast<std::uint64_t>(st) : static_cast<std::uint64_t>(st), shape[i]};
  }
  std::sort(axes.begin(), axes.begin() + n);
  // The largest offset reachable with the axes so far, in elements (unsigned: no overflow
  // below 2^64; a product past it is treated as overlap, conservatively).
  std::uint64_t extent = 0;
  for (int i = 0; i < n; ++i) {
    auto [st, size] = axes[static_cast<std::size_t>(i)];
    if (st <= extent) return true;  // zero strides included
    std::uint64_t span = 0;
    if (__builtin_mul_overflow(st, static_cast<std::uint64_t>(size - 1), &span) ||
        __builtin_add_overflow(extent, span, &extent)) {
      return true;
    }
  }
  return false;
}

std::pair<std::uintptr_t, std::uintptr_t> TensorView::byte_span() const {
  auto base = reinterpret_cast<std::uintptr_t>(data);
  if (shape.numel() == 0) return {base, base};
  // Element offsets reached below and above the origin (negative strides reach below).
  std::int64_t low = 0, high = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    std::int64_t reach = stride(d) * (shape[d] - 1);
    (reach < 0 ? low : high) += reach;
  }
  auto item = static_cast<std::int64_t>(dtype_size(dtype));
  return {base + static_cast<std::uintptr_t>(low * item),
          base + static_cast<std::uintptr_t>((high + 1) * item)};
}

std::int64_t TensorView::stride(int axis) const {
  if (strides.rank() == shape.rank() && shape.rank() > 0) return strides[axis];
  std::int64_t s = 1;
  for (int d = shape.rank() - 1; d > axis; --d) s *= shape[d];
  return s;
}

}  // namespace kernelop
