// Argument checks and packing shared by KernelOp::launch and launch_raw.
#include "runtime/launch_args.hpp"

#include <cstring>

namespace kernelop::detail {

const char* scalar_kind_name(ScalarArg::Kind kind) {
  switch (kind) {
    case ScalarArg::Kind::Float:
      return "float";
    case ScalarArg::Kind::Int:
      return "int";
    case ScalarArg::Kind::Bool:
      return "bool";
  }
  return "?";
}

std::vector<ArgCode> arg_codes(const OpPlan& p) {
  std::vector<ArgCode> out;
  for (const ArgSlot& a : p.args) {
    // Slots index at most kMaxKernelArgs tensors, scalars or extras (checked at construction).
    out.push_back({a.kind, a.value_type, static_cast<std::uint16_t>(a.index)});
  }
  return out;
}

void** PackedArgs::kernel_params(const OpPlan& plan) {
  if (plan.structs.empty()) return params.data();
  auto* bytes = reinterpret_cast<unsigned char*>(struct_bytes.data());
  std::size_t used = 0, out = 0, arg = 0;
  for (const StructParam& st : plan.structs) {
    // Fields are consecutive arguments; the ones before the struct move down in place.
    for (; arg < static_cast<std::size_t>(st.first); ++arg) params[out++] = params[arg];
    auto align = static_cast<std::size_t>(st.align);
    used = (used + align - 1) / align * align;
    KERNELOP_INTERNAL_CHECK(used + static_cast<std::size_t>(st.size) <= sizeof struct_bytes)
        << "(struct parameters of " << used + static_cast<std::size_t>(st.size) << " bytes)";
    unsigned char* base = bytes + used;
    std::memset(base, 0, static_cast<std::size_t>(st.size));
    for (std::size_t f = 0; f < st.offsets.size(); ++f, ++arg) {
      std::memcpy(base + st.offsets[f], &storage[arg],
                  static_cast<std::size_t>(arg_size(plan.args[arg])));
    }
    params[out++] = base;
    used += static_cast<std::size_t>(st.size);
  }
  for (; arg < plan.args.size(); ++arg) params[out++] = params[arg];
  return params.data();
}

void pack_scalar(void* slot, ScalarType type, const ScalarArg& v) {
  double real = v.kind == ScalarArg::Kind::Int ? static_cast<double>(v.i) : v.f;
  switch (type) {
    case ScalarType::Float: {
      auto x = static_cast<float>(real);
      std::memcpy(slot, &x, sizeof x);
      return;
    }
    case ScalarType::Float64:
      std::memcpy(slot, &real, sizeof real);
      return;
    case ScalarType::Int: {
      auto x = static_cast<std::int32_t>(v.i);
      std::memcpy(slot, &x, sizeof x);
      return;
    }
    case ScalarType::Int64:
      std::memcpy(slot, &v.i, sizeof v.i);
      return;
    case ScalarType::Bool: {
      bool x = v.b;
      std::memcpy(slot, &x, sizeof x);
      return;
    }
  }
}

void pack_pointer(void* slot, const void* data) {
  auto ptr = reinterpret_cast<std::uintptr_t>(data);
  static_assert(sizeof ptr == 8, "device pointers are 64-bit");
  std::memcpy(slot, &ptr, sizeof ptr);
}

void fail_device(std::string_view op, const std::string& who, int device, const std::string& first,
                 int first_device) {
  KERNELOP_FAIL(Launch) << "op " << op << ": " << who << " is on device " << device << " but "
                        << first << " is on device " << first_device
                        << "; all tensors must be on one device";
}

void fail_tensor(std::string_view op, const std::string& who, const TensorView& t) {
  if (t.strides.rank() != 0 && t.strides.rank() != t.shape.rank()) {
    KERNELOP_FAIL(Launch) << "op " << op << ": " << who << " has " << t.strides.rank()
                          << " strides for a shape of rank " << t.shape.rank();
  }
  if (!t.is_contiguous()) {
    KERNELOP_FAIL(Launch) << "op " << op << ": " << who << " is not contiguous (shape "
                          << t.shape.to_string() << ", strides " << t.strides.to_string()
                          << "); this input is not declared strided, so the kernel takes "
                             "contiguous memory";
  }
  KERNELOP_FAIL(Launch) << "op " << op << ": " << who << " has a null data pointer";
}

void fail_int32(std::string_view op, const std::string& who, std::int64_t value,
                std::string_view hint) {
  KERNELOP_FAIL(Launch) << "op " << op << ": " << who << " = " << value
                        << " does not fit the kernel's 32-bit int" << hint;
}

}  // namespace kernelop::detail
