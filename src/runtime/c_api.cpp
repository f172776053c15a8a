// The C ABI over KernelOp: every exception is caught and turned into a status plus a
// thread-local message.
#include "kernelop/c_api.h"

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"

struct kop_op {
  kernelop::KernelOp op;
  std::string schema;
  std::vector<kernelop::CompiledImage> backward;  // the package's backward chain
};

// The C ABI's numbers are the C++ enumerators' (Note in c_api.h: "numbered as kernelop::DType").
static_assert(KOP_MAX_RANK == kernelop::kMaxRank, "KOP_MAX_RANK must equal kernelop::kMaxRank");
static_assert(KOP_FLOAT32 == static_cast<int>(kernelop::DType::Float32) &&
                  KOP_FLOAT16 == static_cast<int>(kernelop::DType::Float16) &&
                  KOP_BFLOAT16 == static_cast<int>(kernelop::DType::BFloat16) &&
                  KOP_FLOAT64 == static_cast<int>(kernelop::DType::Float64) &&
                  KOP_FLOAT8_E4M3FN == static_cast<int>(kernelop::DType::Float8E4M3) &&
                  KOP_FLOAT8_E5M2 == static_cast<int>(kernelop::DType::Float8E5M2) &&
                  KOP_INT8 == static_cast<int>(kernelop::DType::Int8) &&
                  KOP_UINT8 == static_cast<int>(kernelop::DType::UInt8) &&
                  KOP_INT16 == static_cast<int>(kernelop::DType::Int16) &&
                  KOP_INT32 == static_cast<int>(kernelop::DType::Int32) &&
                  KOP_INT64 == static_cast<int>(kernelop::DType::Int64) &&
                  KOP_BOOL == static_cast<int>(kernelop::DType::Bool),
              "kop_dtype must number the element types as kernelop::DType does");
static_assert(KOP_BOOL + 1 == static_cast<int>(kernelop::kAllDTypes.size()),
              "a DType was added: add it to kop_dtype");

namespace {

thread_local std::string last_error;
thread_local kop_status last_status = KOP_OK;

kop_status record(kop_status status, std::string message) {
  last_status = status;
  last_error = std::move(message);
  return status;
}

kop_status status_of(kernelop::ErrorKind kind) {
  switch (kind) {
    case kernelop::ErrorKind::Spec:
      return KOP_ERROR_SPEC;
    case kernelop::ErrorKind::Type:
      return KOP_ERROR_TYPE;
    case kernelop::ErrorKind::Compile:
      return KOP_ERROR_COMPILE;
    case kernelop::ErrorKind::Cache:
      return KOP_ERROR_CACHE;
    case kernelop::ErrorKind::Launch:
      return KOP_ERROR_LAUNCH;
    case kernelop::ErrorKind::Io:
      return KOP_ERROR_IO;
    case kernelop::ErrorKind::Format:
      return KOP_ERROR_FORMAT;
    case kernelop::ErrorKind::Internal:
      return KOP_ERROR_INTERNAL;
  }
  return KOP_ERROR_INTERNAL;
}

// Runs fn, translating every exception; nothing escapes into C.
template <class Fn>
kop_status guarded(Fn&& fn) noexcept {
  try {
    fn();
    last_status = KOP_OK;
    last_error.clear();
    return KOP_OK;
  } catch (const kernelop::Error& e) {
    return record(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return record(KOP_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return record(KOP_ERROR_INTERNAL, e.what());
  } catch (...) {
    return record(KOP_ERROR_INTERNAL, "unknown error");
  }
}

kop_status bad_argument(const std::string& what) {
  return record(KOP_ERROR_ARGUMENT, what);
}

kernelop::TensorView view_of(const kop_tensor& t, const char* role, int32_t index) {
  if (t.dtype < 0 || t.dtype >= static_cast<int32_t>(kernelop::kAllDTypes.size())) {
    KERNELOP_FAIL(Type) << role << " " << index << " has dtype code " << t.dtype
                        << ", not a kop_dtype";
  }
  if (t.rank < 0 || t.rank > KOP_MAX_RANK || (t.rank > 0 && !t.shape)) {
    KERNELOP_FAIL(Type) << role << " " << index << " has rank " << t.rank << " (0.." << KOP_MAX_RANK
                        << ", with a shape array)";
  }
  kernelop::TensorView v;
  v.data = t.data;
  v.dtype = static_cast<kernelop::DType>(t.dtype);
  v.device = t.device;
  v.shape = kernelop::Shape(std::span<const int64_t>(t.shape, static_cast<std::size_t>(t.rank)));
  if (t.strides) {
    v.strides =
        kernelop::Shape(std::span<const int64_t>(t.strides, static_cast<std::size_t>(t.rank)));
  }
  return v;
}

// Fixed-capacity conversions (no heap on the launch path).
struct Views {
  std::array<kernelop::TensorView, kernelop::kMaxKernelArgs> tensors;
  std::array<kernelop::ScalarArg, kernelop::kMaxKernelArgs> scalars;
};

void convert(const kop_tensor* in, int32_t n, const char* role, kernelop::TensorView* out) {
  for (int32_t i = 0; i < n; ++i) out[i] = view_of(in[i], role, i);
}

void convert_scalars(const kop_scalar* in, int32_t n, kernelop::ScalarArg* out) {
  for (int32_t i = 0; i < n; ++i) {
    switch (in[i].kind) {
      case KOP_SCALAR_FLOAT:
        out[i] = kernelop::ScalarArg::of_float(in[i].f);
        break;
      case KOP_SCALAR_INT:
        out[i] = kernelop::ScalarArg::of_int(in[i].i);
        break;
      case KOP_SCALAR_BOOL:
        out[i] = kernelop::ScalarArg::of_bool(in[i].i != 0);
        break;
      default:
        KERNELOP_FAIL(Type) << "scalar " << i << " has kind " << in[i].kind
                            << ", not a kop_scalar_kind";
    }
  }
}

bool counts_ok(int32_t n, const void* p) {
  return n >= 0 && n <= kernelop::kMaxKernelArgs && (n == 0 || p != nullptr);
}

}  // namespace

extern "C" {

kop_status kop_load_package(const char* path, kop_op** out) {
  if (!path || !out) return bad_argument("kop_load_package: path and out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    auto pkg = kernelop::load_package(path);
    kernelop::KernelOp op(std::move(pkg.image));
    std::string schema = op.plan().qualified_schema();
    *out = new kop_op{std::move(op), std::move(schema), std::move(pkg.backward)};
  });
}

kop_status kop_load_package_memory(const void* data, size_t size, kop_op** out) {
  if (!data || !out) return bad_argument("kop_load_package_memory: data and out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    auto pkg = kernelop::parse_package(std::string_view(static_cast<const char*>(data), size));
    kernelop::KernelOp op(std::move(pkg.image));
    std::string schema = op.plan().qualified_schema();
    *out = new kop_op{std::move(op), std::move(schema), std::move(pkg.backward)};
  });
}

kop_status kop_op_backward(const kop_op* op, kop_op** out) {
  if (!op || !out) return bad_argument("kop_op_backward: op and out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    if (op->backward.empty()) {
      KERNELOP_FAIL(Spec) << "op " << op->op.plan().op_name << " has no backward"
                          << (op->op.plan().spec.backward.empty() ? " (its spec declares none)"
                                                                  : "");
    }
    kernelop::KernelOp backward(op->backward.front());
    std::string schema = backward.plan().qualified_schema();
    *out = new kop_op{
        std::move(backward), std::move(schema),
        std::vector<kernelop::CompiledImage>(op->backward.begin() + 1, op->backward.end())};
  });
}

void kop_op_destroy(kop_op* op) {
  delete op;
}

const char* kop_op_name(const kop_op* op) {
  return op ? op->op.plan().op_name.c_str() : "";
}
const char* kop_op_schema(const kop_op* op) {
  return op ? op->schema.c_str() : "";
}
int32_t kop_op_num_inputs(const kop_op* op) {
  return op ? op->op.plan().num_tensor_inputs : -1;
}
int32_t kop_op_num_scalars(const kop_op* op) {
  return op ? static_cast<int32_t>(op->op.plan().scalars.size()) : -1;
}
int32_t kop_op_num_outputs(const kop_op* op) {
  return op ? static_cast<int32_t>(op->op.plan().num_results()) : -1;
}

int32_t kop_op_num_tactics(const kop_op* op) {
  return op ? op->op.num_tactics() : -1;
}

const char* kop_op_tactic_name(const kop_op* op, int32_t tactic) {
  if (!op || tactic < 0 || tactic >= op->op.num_tactics()) return nullptr;
  return op->op.tactic_text(tactic).c_str();
}

kop_status kop_op_pin_tactic(kop_op* op, int32_t tactic) {
  if (!op) return bad_argument("kop_op_pin_tactic: op must not be NULL");
  return guarded([&] { op->op.pin_tactic(tactic); });
}

int32_t kop_op_pinned_tactic(const kop_op* op) {
  return op ? op->op.pinned_tactic() : -1;
}

int32_t kop_op_last_tactic(const kop_op* op) {
  return op ? op->op.last_tactic() : -1;
}

kop_status kop_op_tuning_stats(const kop_op* op, uint64_t* timed_runs, uint64_t* tunings,
                               uint64_t* table_hits) {
  if (!op || !timed_runs || !tunings || !table_hits) {
    return bad_argument("kop_op_tuning_stats: op and the three outputs must not be NULL");
  }
  return guarded([&] {
    kernelop::TuningStats s = op->op.tuning_stats();
    *timed_runs = s.timed_runs;
    *tunings = s.tunings;
    *table_hits = s.table_hits;
  });
}

const char* kop_op_input_name(const kop_op* op, int32_t index) {
  if (!op || index < 0 || index >= op->op.plan().num_tensor_inputs) return nullptr;
  return op->op.plan().tensors[static_cast<std::size_t>(index)].name.c_str();
}

const char* kop_op_output_name(const kop_op* op, int32_t index) {
  if (!op || index < 0 || index >= kop_op_num_outputs(op)) return nullptr;
  const auto& plan = op->op.plan();
  return plan.tensors[static_cast<std::size_t>(plan.outputs[static_cast<std::size_t>(index)].slot)]
      .name.c_str();
}

int32_t kop_op_output_permute(const kop_op* op, int32_t index, int32_t* perm, int32_t capacity) {
  if (!op || index < 0 || index >= kop_op_num_outputs(op)) {
    bad_argument("kop_op_output_permute: op must not be NULL and index must name an output");
    return -1;
  }
  const auto& permute = op->op.plan().outputs[static_cast<std::size_t>(index)].permute;
  const auto n = static_cast<int32_t>(permute.size());
  if (n > 0 && (!perm || capacity < n)) {
    bad_argument("kop_op_output_permute: output " + std::to_string(index) +
                 " is returned as a permutation of " + std::to_string(n) +
                 " dims; perm must hold " + std::to_string(n) + ", got capacity " +
                 std::to_string(capacity));
    return -1;
  }
  std::copy(permute.begin(), permute.end(), perm);
  return n;
}

kop_status kop_op_output_shapes(const kop_op* op, const kop_tensor* inputs, int32_t num_inputs,
                                const kop_scalar* scalars, int32_t num_scalars, int32_t* ranks,
                                int64_t* shapes, int32_t* dtypes) {
  if (!op) return bad_argument("kop_op_output_shapes: op must not be NULL");
  if (!counts_ok(num_inputs, inputs) || !counts_ok(num_scalars, scalars)) {
    return bad_argument("kop_op_output_shapes: bad input or scalar count/pointer");
  }
  if (kop_op_num_outputs(op) > 0 && (!ranks || !shapes || !dtypes)) {
    return bad_argument("kop_op_output_shapes: ranks, shapes and dtypes must not be NULL");
  }
  return guarded([&] {
    Views v;
    convert(inputs, num_inputs, "input", v.tensors.data());
    convert_scalars(scalars, num_scalars, v.scalars.data());
    std::span<const kernelop::TensorView> in(v.tensors.data(),
                                             static_cast<std::size_t>(num_inputs));
    auto out_shapes =
        op->op.output_shapes(in, {v.scalars.data(), static_cast<std::size_t>(num_scalars)});
    auto out_dtypes = op->op.output_dtypes(in);
    for (std::size_t o = 0; o < out_shapes.size(); ++o) {
      ranks[o] = out_shapes[o].rank();
      dtypes[o] = static_cast<int32_t>(out_dtypes[o]);
      for (int d = 0; d < out_shapes[o].rank(); ++d)
        shapes[o * KOP_MAX_RANK + static_cast<std::size_t>(d)] = out_shapes[o][d];
    }
  });
}

kop_status kop_op_launch(const kop_op* op, const kop_tensor* inputs, int32_t num_inputs,
                         const kop_scalar* scalars, int32_t num_scalars, const kop_tensor* outputs,
                         int32_t num_outputs, void* stream) {
  if (!op) return bad_argument("kop_op_launch: op must not be NULL");
  if (!counts_ok(num_inputs, inputs) || !counts_ok(num_scalars, scalars) ||
      !counts_ok(num_outputs, outputs)) {
    return bad_argument("kop_op_launch: bad input, scalar or output count/pointer");
  }
  return guarded([&] {
    Views v;
    std::array<kernelop::TensorView, kernelop::kMaxKernelArgs> outs;
    convert(inputs, num_inputs, "input", v.tensors.data());
    convert(outputs, num_outputs, "output", outs.data());
    convert_scalars(scalars, num_scalars, v.scalars.data());
    op->op.launch({v.tensors.data(), static_cast<std::size_t>(num_inputs)},
                  {v.scalars.data(), static_cast<std::size_t>(num_scalars)},
                  {outs.data(), static_cast<std::size_t>(num_outputs)}, stream);
  });
}

const char* kop_last_error(void) {
  return last_error.c_str();
}
kop_status kop_last_status(void) {
  return last_status;
}
int32_t kop_abi_version(void) {
  return KOP_ABI_VERSION;
}

}  // extern "C"
