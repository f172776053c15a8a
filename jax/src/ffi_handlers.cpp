// The XLA FFI handlers of every kernelop op (kernelop/jax.hpp).
//
// Note [jax ffi target]: one generic target, in two variants, serves every op.
//  - Instantiate (once per compiled call site and device): finds the op named by the call's
//    `kernelop_op` attribute in this process's registry, checks `kernelop_fingerprint`, the
//    identity of the build the call was traced with (a hash of its spec and machine code), and
//    loads the op's kernels on the device (so that execute only launches). A computation traced
//    with one build never runs another build's kernels: an exported computation runs in a process
//    that loaded the same package first (kernelop.jax.op), and says so otherwise.
//  - Execute: the op's inputs and results as XLA buffers (row-major, as JAX passes them), its
//    scalar inputs as attributes of their own names (int64, float64; a bool as an
//    int64 0 or 1), the stream from PlatformStream; KernelOp::launch checks every argument as for
//    any other caller and its errors come back as the FFI error, naming the op. No Python runs per
//    call.
// The command-buffer compatible variant (XLA may capture it in a CUDA graph) is used for ops
// that neither allocate per call (scratch outputs, a Triton kernel's global scratch) nor read
// tensor values on the host; the other variant serves those. A JAX op never tunes: it runs its
// package's tuning table where one covers the device, a tactic pinned with KERNELOP_TACTIC, or
// else the first eligible tactic (timing would synchronise inside a traced computation).
#include <cuda.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "core/hash.hpp"
#include "kernelop/jax.hpp"
#include "kernelop/spec_json.hpp"
#include "kernelop/tuning.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace kernelop::jax {
namespace {

struct OpState {
  static ffi::TypeId id;  // registered with JAX as state_type_name() (kernelop.jax)
  std::shared_ptr<const JaxOp> op;
};
ffi::TypeId OpState::id = {};

// XLA's element type of each kernelop dtype, in kDTypeTable's order (checked below).
constexpr std::array<std::pair<DType, ffi::DataType>, kAllDTypes.size()> kXlaTypes = {{
    {DType::Float32, ffi::DataType::F32},
    {DType::Float16, ffi::DataType::F16},
    {DType::BFloat16, ffi::DataType::BF16},
    {DType::Float64, ffi::DataType::F64},
    {DType::Float8E4M3, ffi::DataType::F8E4M3FN},
    {DType::Float8E5M2, ffi::DataType::F8E5M2},
    {DType::Int8, ffi::DataType::S8},
    {DType::UInt8, ffi::DataType::U8},
    {DType::Int16, ffi::DataType::S16},
    {DType::Int32, ffi::DataType::S32},
    {DType::Int64, ffi::DataType::S64},
    {DType::Bool, ffi::DataType::PRED},
}};
constexpr bool xla_types_follow_the_table() {
  for (std::size_t i = 0; i < kXlaTypes.size(); ++i) {
    if (kXlaTypes[i].first != kDTypeTable[i].dtype) return false;
  }
  return true;
}
static_assert(xla_types_follow_the_table());

std::optional<DType> dtype_of(ffi::DataType t) {
  for (const auto& [dtype, xla] : kXlaTypes) {
    if (xla == t) return dtype;
  }
  return std::nullopt;
}

std::shared_mutex& registry_mutex() {
  static std::shared_mutex m;
  return m;
}
std::unordered_map<std::string, std::shared_ptr<const JaxOp>>& registry() {
  static std::unordered_map<std::string, std::shared_ptr<const JaxOp>> r;
  return r;
}

// A build's identity: its whole spec (outputs, requirements, initialisation: what op_fingerprint,
// the tuning tables' identity, leaves out) with op_fingerprint (the derived launch and the machine
// code), and its later launches' identities.
std::string build_identity(const CompiledImage& image) {
  detail::Hasher h;
  h.field("kernelop.jax.build").field(op_fingerprint(image));
  h.field(
      print_op_json(OpDecl{image.plan.op_name, image.plan.spec, ""}, JsonWriteOptions{-1, true}));
  for (const CompiledImage& later : image.then) h.field(build_identity(later));
  return h.digest().hex();
}

std::string allocation_reason(const CompiledImage& image) {
  const OpPlan& p = image.plan;
  for (const OutputPlan& o : p.outputs) {
    if (o.scratch) {
      return "it allocates scratch '" + p.tensors[static_cast<std::size_t>(o.slot)].name +
             "' per call";
    }
  }
  for (const ArchImage& a : image.images) {
    if (a.scratch_bytes != 0) return "its kernel allocates global scratch memory per call";
  }
  if (reads_on_host(p.spec)) return "it reads a tensor's value on the host";
  for (const CompiledImage& later : image.then) {
    if (std::string why = allocation_reason(later); !why.empty()) return why;
  }
  return "";
}

ffi::Error failed(ffi::ErrorCode code, std::string message) {
  return ffi::Error(code, std::move(message));
}

ffi::ErrorOr<std::unique_ptr<OpState>> instantiate(std::int32_t device, ffi::Dictionary attrs) {
  auto name = attrs.get<std::string_view>("kernelop_op");
  auto fingerprint = attrs.get<std::string_view>("kernelop_fingerprint");
  if (name.has_error() || fingerprint.has_error()) {
    return ffi::Unexpected(failed(ffi::ErrorCode::kInvalidArgument,
                                  "kernelop: the custom call has no kernelop_op and "
                                  "kernelop_fingerprint attributes (it was not made by "
                                  "kernelop.jax)"));
  }
  std::shared_ptr<const JaxOp> op = find_op(*name);
  if (!op) {
    return ffi::Unexpected(failed(
        ffi::ErrorCode::kNotFound,
        "kernelop: op " + std::string(*name) +
            " is not loaded in this process: call kernelop.jax.op(...) with its package or spec "
            "before running a computation that calls it (an exported one too)"));
  }
  if (op->fingerprint != *fingerprint) {
    return ffi::Unexpected(
        failed(ffi::ErrorCode::kFailedPrecondition,
               "kernelop: op " + std::string(*name) + " was traced with another build of it (" +
                   std::string(fingerprint->substr(0, 16)) + "...) than the one loaded here (" +
                   op->fingerprint.substr(0, 16) + "...): load the package the computation was " +
                   "traced or exported with"));
  }
  // Loaded now, outside any capture: execute only launches (XLA may record it in a command buffer).
  try {
    op->op.load(device);
  } catch (const Error& e) {
    return ffi::Unexpected(failed(ffi::ErrorCode::kInternal, e.what()));
  }
  return std::make_unique<OpState>(OpState{std::move(op)});
}

// Per thread, reused call after call: no allocation on the launch path once warm.
struct Scratch {
  std::vector<TensorView> inputs, outputs;
  std::vector<ScalarArg> scalars;
};

ffi::Error execute(CUstream stream, std::int32_t device, OpState* state, ffi::RemainingArgs args,
                   ffi::RemainingRets rets, ffi::Dictionary attrs) {
  const KernelOp& op = state->op->op;
  const OpPlan& plan = op.plan();
  thread_local Scratch s;
  auto view = [&](const ffi::AnyBuffer& b, TensorView& t, const char* what,
                  std::size_t index) -> std::string {
    std::optional<DType> dtype = dtype_of(b.element_type());
    if (!dtype) {
      return "op " + plan.op_name + ": " + what + " " + std::to_string(index) +
             " has an element type kernelop does not take (XLA type " +
             std::to_string(static_cast<int>(b.element_type())) + ")";
    }
    auto dims = b.dimensions();
    t.data = b.untyped_data();
    t.dtype = *dtype;
    t.shape = Shape(std::span<const std::int64_t>(dims.size() ? &dims[0] : nullptr, dims.size()));
    t.strides = Shape();
    t.device = device;
    return "";
  };
  try {
    const std::size_t n_tensors = static_cast<std::size_t>(plan.num_tensor_inputs);
    const std::size_t n_results = plan.num_results();
    if (args.size() != n_tensors || rets.size() < n_results) {
      return failed(ffi::ErrorCode::kInvalidArgument,
                    "op " + plan.op_name + ": the custom call passes " +
                        std::to_string(args.size()) + " array(s) and " +
                        std::to_string(rets.size()) + " result(s); the op takes " +
                        std::to_string(n_tensors) + " and returns " + std::to_string(n_results));
    }
    s.inputs.resize(n_tensors);
    for (std::size_t i = 0; i < n_tensors; ++i) {
      auto b = args.get<ffi::AnyBuffer>(i);
      if (b.has_error()) return b.error();
      if (std::string why = view(*b, s.inputs[i], "input", i); !why.empty())
        return failed(ffi::ErrorCode::kInvalidArgument, why);
    }
    // The results after the op's own are the written inputs, aliased to them: nothing to pass.
    s.outputs.resize(n_results);
    for (std::size_t i = 0; i < n_results; ++i) {
      auto b = rets.get<ffi::AnyBuffer>(i);
      if (b.has_error()) return b.error();
      if (std::string why = view(**b, s.outputs[i], "result", i); !why.empty())
        return failed(ffi::ErrorCode::kInvalidArgument, why);
    }
    s.scalars.resize(plan.scalars.size());
    for (std::size_t i = 0; i < plan.scalars.size(); ++i) {
      const ScalarSlot& slot = plan.scalars[i];
      switch (slot.type) {
        case ScalarType::Float:
        case ScalarType::Float64: {
          auto v = attrs.get<double>(slot.name);
          if (v.has_error()) return v.error();
          s.scalars[i] = ScalarArg::of_float(*v);
          break;
        }
        case ScalarType::Int:
        case ScalarType::Int64: {
          auto v = attrs.get<std::int64_t>(slot.name);
          if (v.has_error()) return v.error();
          s.scalars[i] = ScalarArg::of_int(*v);
          break;
        }
        case ScalarType::Bool: {  // an int64 attribute: 0 or 1 (kernelop.jax passes it so)
          auto v = attrs.get<std::int64_t>(slot.name);
          if (v.has_error()) return v.error();
          s.scalars[i] = ScalarArg::of_bool(*v != 0);
          break;
        }
      }
    }
    op.launch(s.inputs, s.scalars, s.outputs, stream);
  } catch (const Error& e) {
    return failed(e.kind() == ErrorKind::Launch ? ffi::ErrorCode::kInvalidArgument
                                                : ffi::ErrorCode::kInternal,
                  e.what());
  } catch (const std::exception& e) {
    return failed(ffi::ErrorCode::kInternal, "op " + plan.op_name + ": " + e.what());
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    kernelop_jax_instantiate, instantiate,
    ffi::Ffi::BindInstantiate().Ctx<ffi::DeviceOrdinal>().Attrs<ffi::Dictionary>());

#define KERNELOP_JAX_EXECUTE_BINDING        \
  ffi::Ffi::Bind()                          \
      .Ctx<ffi::PlatformStream<CUstream>>() \
      .Ctx<ffi::DeviceOrdinal>()            \
      .Ctx<ffi::State<OpState>>()           \
      .RemainingArgs()                      \
      .RemainingRets()                      \
      .Attrs<ffi::Dictionary>()

XLA_FFI_DEFINE_HANDLER_SYMBOL(kernelop_jax_execute, execute, KERNELOP_JAX_EXECUTE_BINDING,
                              {ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(kernelop_jax_execute_alloc, execute, KERNELOP_JAX_EXECUTE_BINDING);
#undef KERNELOP_JAX_EXECUTE_BINDING

std::string_view ffi_api_version() {
#define KERNELOP_STR2(x) #x
#define KERNELOP_STR(x) KERNELOP_STR2(x)
  static const std::string v = KERNELOP_STR(XLA_FFI_API_MAJOR) "." KERNELOP_STR(XLA_FFI_API_MINOR);
#undef KERNELOP_STR
#undef KERNELOP_STR2
  return v;
}

std::string target_name(bool allocates) {
  std::string v(ffi_api_version());
  std::replace(v.begin(), v.end(), '.', '_');
  return "kernelop_v1_ffi" + v + (allocates ? "_alloc" : "");
}

std::shared_ptr<const JaxOp> register_op(CompiledImage image) {
  std::string name = image.plan.op_name;
  std::string print = build_identity(image);
  {
    std::shared_lock lock(registry_mutex());
    if (auto it = registry().find(name); it != registry().end()) {
      if (it->second->fingerprint == print) return it->second;
      KERNELOP_FAIL(Spec) << "op " << name << " is already loaded for JAX from another build ("
                          << it->second->fingerprint.substr(0, 16) << "..., this one "
                          << print.substr(0, 16) << "...): use another op name";
    }
  }
  std::string allocates = allocation_reason(image);
  LoadOptions options;
  options.tune = false;
  auto op = std::make_shared<JaxOp>(JaxOp{KernelOp(std::move(image), options), print, allocates});
  std::unique_lock lock(registry_mutex());
  auto [it, added] = registry().emplace(name, op);
  if (!added && it->second->fingerprint != print) {
    KERNELOP_FAIL(Spec) << "op " << name << " is already loaded for JAX from another build";
  }
  return it->second;
}

std::shared_ptr<const JaxOp> find_op(std::string_view name) {
  std::shared_lock lock(registry_mutex());
  auto it = registry().find(std::string(name));
  return it == registry().end() ? nullptr : it->second;
}

void* instantiate_handler() {
  return reinterpret_cast<void*>(&kernelop_jax_instantiate);
}
void* execute_handler(bool allocates) {
  return reinterpret_cast<void*>(allocates ? &kernelop_jax_execute_alloc : &kernelop_jax_execute);
}
void* state_type_id() {
  return &OpState::id;
}
void* state_type_info() {
  static XLA_FFI_TypeInfo info = {XLA_FFI_TypeInfo_STRUCT_SIZE, nullptr,
                                  [](void* state) { delete static_cast<OpState*>(state); }};
  return &info;
}
std::string_view state_type_name() {
  return "kernelop.jax.OpState.v1";
}

}  // namespace kernelop::jax
