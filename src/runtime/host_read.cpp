// Note [host reads] at launch (spec.hpp): a one-element tensor read on the host, after the work
// queued on the call's stream so far: an item() argument, or a launch's `when` tests.
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "kernelop/host_tensor.hpp"
#include "runtime/device_module.hpp"
#include "runtime/launch_checks.hpp"

namespace kernelop::detail {

namespace {

// The bytes of the tensor's one element, after the stream's queued work.
std::string read_element(const OpPlan& p, const DeviceModule& m, void* stream, int slot,
                         const TensorView& v) {
  const std::string& name = p.tensors[static_cast<std::size_t>(slot)].name;
  const Driver& d = *m.driver;
  auto s = static_cast<CUstream>(stream);
  ScopedContext scope(d, m.context);  // the stream's context, for the capture query too
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  check_cuda(d.cuStreamIsCapturing(s, &capture), "cuStreamIsCapturing", name);
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
        << "reads the value of '" << name
        << "' on the host at launch (a host sync, as its library's .item() / torch.equal), "
           "which a CUDA graph cannot capture; run it outside the graph";
  }
  if (v.shape.numel() != 1) {
    KERNELOP_RAISE(op_error(p, ErrorKind::Launch))
        << "reads the value of '" << name << "' on the host, which needs one element; it has "
        << v.shape.numel() << " (shape " << v.shape.to_string() << ")";
  }
  std::string bytes(dtype_size(v.dtype), '\0');
  check_cuda(
      d.cuMemcpyDtoHAsync(bytes.data(), reinterpret_cast<CUdeviceptr>(v.data), bytes.size(), s),
      "cuMemcpyDtoHAsync", name);
  check_cuda(d.cuStreamSynchronize(s), "cuStreamSynchronize", name);
  return bytes;
}

}  // namespace

double HostReader::value(int slot, const TensorView& v) const {
  if (v.dtype == DType::Float8E4M3 || v.dtype == DType::Float8E5M2) {
    KERNELOP_RAISE(op_error(plan, ErrorKind::Type))
        << "tests the value of '" << plan.tensors[static_cast<std::size_t>(slot)].name << "', a "
        << dtype_name(v.dtype) << " tensor; kernelop reads float8 values not at all";
  }
  HostTensor t(Shape{}, v.dtype);
  t.decode(read_element(plan, module, stream, slot, v));
  return t.values[0];
}

namespace {

// The value of a one-element integer or bool tensor from its bytes; nullopt for a floating dtype.
std::optional<std::int64_t> as_integer(DType dtype, const std::string& bytes) {
  auto get = [&]<class T>(T) {
    T x;
    std::memcpy(&x, bytes.data(), sizeof x);
    return static_cast<std::int64_t>(x);
  };
  switch (dtype) {
    case DType::Int8:
      return get(std::int8_t{});
    case DType::UInt8:
    case DType::Bool:
      return get(std::uint8_t{});
    case DType::Int16:
      return get(std::int16_t{});
    case DType::Int32:
      return get(std::int32_t{});
    case DType::Int64:
      return get(std::int64_t{});
    case DType::Float32:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float64:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::int64_t HostReader::integer(int slot, const TensorView& v) const {
  if (!dtype_is_floating(v.dtype)) {
    if (auto i = as_integer(v.dtype, read_element(plan, module, stream, slot, v))) return *i;
  }
  KERNELOP_RAISE(op_error(plan, ErrorKind::Type))
      << "item(" << plan.tensors[static_cast<std::size_t>(slot)].name
      << ") passes an integer to the kernel, and the tensor is " << dtype_name(v.dtype)
      << "; kernelop reads integer and bool tensors only";
}

bool HostReader::holds(const std::vector<HostTest>& when,
                       std::span<const TensorView* const> views) const {
  for (const HostTest& t : when) {
    int slot = plan.tensor_slot(t.tensor);
    const TensorView* v = views[static_cast<std::size_t>(slot)];
    KERNELOP_INTERNAL_CHECK(v != nullptr) << "(tensor '" << t.tensor << "' tested before known)";
    // torch.equal: NaN equals nothing; an integer is compared exactly.
    // (fill_bits: the value as an int64 holds it exactly, or nullopt: 2^53 + 1 != 2^53.)
    auto bits = fill_bits(DType::Int64, t.value);
    bool equal = dtype_is_floating(v->dtype)
                     ? value(slot, *v) == t.value
                     : bits && static_cast<std::int64_t>(*bits) == integer(slot, *v);
    if (equal != t.equal) return false;
  }
  return true;
}

}  // namespace kernelop::detail
