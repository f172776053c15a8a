// Parameter-type probe generation, decoding and calling-convention verification.
#include "compile/signature.hpp"

#include <array>
#include <sstream>

#include "kernelop/error.hpp"

namespace kernelop::detail {
namespace {

// Type codes shared by the generated classifier and the decoder below.
constexpr int kUnknown = 0, kVoid = 1, kReference = 98;
constexpr int kPointer = 1000, kConstPointer = 1100;

struct BaseType {
  int code;
  std::string_view text;
  std::optional<DType> dtype;
};
constexpr std::array<BaseType, 18> kBases = {{
    {kUnknown, "<unknown type>", std::nullopt},
    {kVoid, "void", std::nullopt},
    {2, "float", DType::Float32},
    {3, "__half", DType::Float16},
    {4, "__nv_bfloat16", DType::BFloat16},
    {5, "double", DType::Float64},
    {6, "__nv_fp8_e4m3", DType::Float8E4M3},
    {7, "__nv_fp8_e5m2", DType::Float8E5M2},
    {8, "signed char", DType::Int8},
    {9, "unsigned char", DType::UInt8},
    {10, "short", DType::Int16},
    {11, "int", DType::Int32},
    {12, "long long", DType::Int64},
    {13, "bool", DType::Bool},
    {14, "unsigned int", std::nullopt},
    {15, "unsigned long long", std::nullopt},
    {16, "char", DType::Int8},
    {17, "unsigned short", std::nullopt},
}};
// Every DType decodes from its own CUDA type (kDTypeTable's); aliases such as "char" come after.
constexpr bool bases_cover_dtypes() {
  for (const DTypeInfo& d : kDTypeTable) {
    bool found = false;
    for (const BaseType& b : kBases) found = found || (b.dtype == d.dtype && b.text == d.cuda_type);
    if (!found) return false;
  }
  return true;
}
static_assert(bases_cover_dtypes(), "kBases must decode every DType from kDTypeTable's CUDA type");

constexpr int kInt = 11, kLongLong = 12, kBool = 13, kUnsigned = 14, kUnsignedLongLong = 15;
constexpr int kFloat = 2, kDouble = 5;

const BaseType* find_base(int code) {
  for (const auto& b : kBases) {
    if (b.code == code) return &b;
  }
  return nullptr;
}

std::string arg_text(const ArgSlot& arg) {
  switch (arg.kind) {
    case ArgSlot::Kind::TensorInput:
      return "tensor input '" + arg.name + "'";
    case ArgSlot::Kind::ScalarInput:
      return "scalar input '" + arg.name + "'";
    case ArgSlot::Kind::ExtraValue:
      return "extra '" + arg.name + "'";
    case ArgSlot::Kind::Output:
      return "output '" + arg.name + "'";
  }
  return arg.name;
}

std::string convention_text(const OpPlan& plan) {
  std::string out = "(";
  for (std::size_t i = 0; i < plan.args.size(); ++i) {
    out += (i ? ", " : "") + plan.c_type(plan.args[i]) + " " + plan.args[i].name;
  }
  return out + ")";
}

class Verifier {
 public:
  Verifier(OpPlan& plan, const std::vector<std::vector<std::int64_t>>& codes)
      : plan_(plan), codes_(codes) {}

  void run() {
    if (plan_.args_from_kernel) {
      adopt_args();
      return;
    }
    for (std::size_t inst = 0; inst < plan_.instances.size(); ++inst) check_arity(inst);
    infer_tensor_dtypes();
    for (std::size_t inst = 0; inst < plan_.instances.size(); ++inst) {
      for (std::size_t i = 0; i < plan_.args.size(); ++i) check_arg(inst, i);
    }
  }

 private:
  detail::ErrorStream fail(std::size_t inst) const {
    detail::ErrorStream s(ErrorKind::Compile);
    s.context(ErrorContext{plan_.op_name, plan_.instances[inst].name_expression, {}, "verify", {}});
    s << "op " << plan_.op_name << ": kernel " << plan_.instances[inst].name_expression << ": ";
    return s;
  }

  void check_arity(std::size_t inst) {
    const auto& c = codes_[inst];
    auto expected = plan_.args.size();
    auto found = static_cast<std::size_t>(c.at(0));
    if (found == expected) return;
    std::string declared = "(";
    for (std::size_t i = 0; i < found; ++i) {
      declared += (i ? ", " : "") + decode_param(c[i + 1]).text();
    }
    declared += ")";
    KERNELOP_RAISE(fail(inst)) << "takes " << found << " parameter(s) " << declared
                               << " but the calling convention passes " << expected << " "
                               << convention_text(plan_)
                               << " (inputs in declared order, then extras, then outputs)";
  }

  // DType the instance binds a declaration to; nullopt when still unknown.
  std::optional<DType> bound(std::size_t inst, const std::optional<DTypeDecl>& decl) const {
    if (!decl) return std::nullopt;
    if (const auto* d = std::get_if<DType>(&*decl)) return *d;
    const auto& name = std::get<std::string>(*decl);
    for (std::size_t p = 0; p < plan_.type_params.size(); ++p) {
      if (plan_.type_params[p].name == name) return plan_.instances[inst].bindings[p];
    }
    return std::nullopt;
  }

  // No inputs were declared: the kernel's parameters become the argument list of raw launches
  // (pointers -> tensors, values -> scalars), typed from the signature.
  void adopt_args() {
    if (plan_.instances.size() != 1) {
      KERNELOP_RAISE(fail(0)) << "a kernel without declared inputs is instantiated once; declare "
                                 "the inputs to use type_params";
    }
    const auto& c = codes_[0];
    for (std::size_t i = 0; i < static_cast<std::size_t>(c.at(0)); ++i) {
      ParamType p = decode_param(c[i + 1]);
      if (p.pointer) {
        std::optional<DTypeDecl> element;
        if (auto d = p.dtype()) element = *d;
        plan_.adopt_pointer_param(p.is_const, element);
        continue;
      }
      ScalarType type = ScalarType::Int;
      switch (p.base) {
        case kFloat:
          type = ScalarType::Float;
          break;
        case kDouble:
          type = ScalarType::Float64;
          break;
        case kBool:
          type = ScalarType::Bool;
          break;
        case kInt:
        case kUnsigned:
          type = ScalarType::Int;
          break;
        case kLongLong:
        case kUnsignedLongLong:
          type = ScalarType::Int64;
          break;
        default:
          KERNELOP_RAISE(fail(0)) << "parameter " << i << " is '" << p.text()
                                  << "'; kernelop passes pointers, int, unsigned, long long, "
                                     "float, double and bool";
      }
      plan_.adopt_value_param(type);
    }
  }

  void infer_tensor_dtypes() {
    for (std::size_t i = 0; i < plan_.args.size(); ++i) {
      const ArgSlot& arg = plan_.args[i];
      if (arg.kind == ArgSlot::Kind::Output && !plan_.element(arg)) {
        infer_external_output(i);
        continue;
      }
      if (arg.kind != ArgSlot::Kind::TensorInput || plan_.element(arg)) continue;
      std::optional<DType> inferred;
      for (std::size_t inst = 0; inst < plan_.instances.size(); ++inst) {
        ParamType p = decode_param(codes_[inst][i + 1]);
        if (!p.pointer) continue;  // reported by check_arg
        auto d = p.dtype();
        if (!d) {
          KERNELOP_RAISE(fail(inst))
              << "parameter " << i << " is '" << p.text() << "'; cannot infer the dtype of "
              << arg_text(arg) << " from it: declare the input's dtype";
        }
        if (inferred && *inferred != *d) {
          KERNELOP_RAISE(fail(inst))
              << "parameter " << i << " is '" << p.text() << "' here but '"
              << dtype_cuda_type(*inferred) << "*' in another instantiation; declare the dtype "
              << "of " << arg_text(arg) << " (e.g. a type parameter)";
        }
        inferred = d;
      }
      if (inferred) plan_.tensors[static_cast<std::size_t>(arg.index)].dtype = *inferred;
    }
    // Outputs whose dtype follows an input that was just inferred.
    for (const OutputPlan& out : plan_.outputs) {
      auto& dtype = plan_.tensors[static_cast<std::size_t>(out.slot)].dtype;
      if (!dtype && out.dtype_from >= 0)
        dtype = plan_.tensors[static_cast<std::size_t>(out.dtype_from)].dtype;
    }
  }

  // An output shaped by the meta function takes the pointer's dtype when every instance agrees;
  // else it stays open and the meta function's dtype is used as is.
  void infer_external_output(std::size_t i) {
    const ArgSlot& arg = plan_.args[i];
    const OutputPlan* out = nullptr;
    for (const OutputPlan& o : plan_.outputs) {
      if (o.slot == arg.index && o.shape.kind == ShapeRule::Kind::External) out = &o;
    }
    if (!out) return;
    std::optional<DType> inferred;
    for (std::size_t inst = 0; inst < plan_.instances.size(); ++inst) {
      ParamType p = decode_param(codes_[inst][i + 1]);
      auto d = p.pointer ? p.dtype() : std::nullopt;
      if (!d || (inferred && *inferred != *d)) return;
      inferred = d;
    }
    if (inferred) plan_.tensors[static_cast<std::size_t>(out->slot)].dtype = *inferred;
  }

  void check_arg(std::size_t inst, std::size_t i) {
    const ArgSlot& arg = plan_.args[i];
    ParamType p = decode_param(codes_[inst][i + 1]);
    auto mismatch = [&]() -> detail::ErrorStream {
      detail::ErrorStream s = fail(inst);
      s << "parameter " << i << " is '" << p.text() << "' but the calling convention passes "
        << arg_text(arg) << " as ";
      return s;
    };
    if (arg.is_pointer()) {
      std::optional<DType> want = bound(inst, plan_.element(arg));
      std::string want_text =
          (arg.is_const ? "const " : "") + std::string(want ? dtype_cuda_type(*want) : "?") + "*";
      if (!p.pointer) {
        KERNELOP_RAISE(mismatch()) << "a pointer ('" << want_text << "')";
      }
      if (p.is_const && !arg.is_const) {
        KERNELOP_RAISE(mismatch())
            << "a pointer the kernel writes ('" << want_text << "'); drop the const"
            << (arg.kind == ArgSlot::Kind::TensorInput ? " or declare the input not mutated" : "");
      }
      if (want && p.dtype() != want) {
        KERNELOP_RAISE(mismatch()) << "'" << want_text << "' (" << dtype_name(*want) << ")";
      }
      return;
    }
    int expected = kUnknown;
    bool ok = false;
    switch (arg.value_type) {
      case ScalarType::Float:
        expected = kFloat;
        ok = p.base == kFloat;
        break;
      case ScalarType::Float64:
        expected = kDouble;
        ok = p.base == kDouble;
        break;
      case ScalarType::Bool:
        expected = kBool;
        ok = p.base == kBool;
        break;
      case ScalarType::Int:
        expected = kInt;
        ok = p.base == kInt || (arg.kind == ArgSlot::Kind::ExtraValue && p.base == kUnsigned);
        break;
      case ScalarType::Int64:
        expected = kLongLong;
        ok = p.base == kLongLong ||
             (arg.kind == ArgSlot::Kind::ExtraValue && p.base == kUnsignedLongLong);
        break;
    }
    ok = ok && !p.pointer;
    if (ok) return;
    auto s = mismatch();
    s << "'" << find_base(expected)->text << "'";
    if (arg.kind == ArgSlot::Kind::ExtraValue && !p.pointer &&
        (p.base == kLongLong || p.base == kUnsignedLongLong) && expected == kInt) {
      s << " (32-bit); declare the extra int64 or take an int";
    } else if (arg.kind == ArgSlot::Kind::ExtraValue && !p.pointer &&
               (p.base == kInt || p.base == kUnsigned) && expected == kLongLong) {
      s << " (declared int64); take a long long";
    }
    KERNELOP_RAISE(s);
  }

  OpPlan& plan_;
  const std::vector<std::vector<std::int64_t>>& codes_;
};

}  // namespace

std::string signature_probe_source() {
  std::ostringstream s;
  s << "\n// ---- kernelop: calling-convention probe (generated) ----\n"
       "struct __half; struct __nv_bfloat16; struct __nv_fp8_e4m3; struct __nv_fp8_e5m2;\n"
       "namespace __kop_sig {\n"
       "template <class T> struct base { enum : long long { code = "
    << kUnknown << " }; };\n"
    << "template <class T> struct base<const T> : base<T> {};\n"
       "template <class T> struct base<volatile T> : base<T> {};\n"
       "template <class T> struct base<const volatile T> : base<T> {};\n";
  auto spec = [&](std::string_view type, std::string_view code) {
    s << "template <> struct base<" << type << "> { enum : long long { code = " << code
      << " }; };\n";
  };
  for (const auto& b : kBases) {
    if (b.code == kUnknown) continue;
    std::string type(b.text);
    if (type == "__half" || type == "__nv_bfloat16" || type.rfind("__nv_fp8", 0) == 0) {
      type.insert(0, "::");
    }
    spec(type, std::to_string(b.code));
  }
  // `long` is int64 on LP64 and int32 elsewhere.
  spec("long",
       "(sizeof(long) == 8 ? " + std::to_string(kLongLong) + " : " + std::to_string(kInt) + ")");
  spec("unsigned long", "(sizeof(long) == 8 ? " + std::to_string(kUnsignedLongLong) + " : " +
                            std::to_string(kUnsigned) + ")");
  s << "template <class T> struct param { enum : long long { code = base<T>::code }; };\n"
       "template <class T> struct param<T*> { enum : long long { code = "
    << kPointer << " + base<T>::code }; };\n"
    << "template <class T> struct param<const T*> { enum : long long { code = " << kConstPointer
    << " + base<T>::code }; };\n"
    << "template <class T> struct param<const volatile T*> : param<const T*> {};\n"
       "template <class T> struct param<T&> { enum : long long { code = "
    << kReference << " }; };\n"
    << "template <long long... C> struct codes {};\n"
       "template <class F> struct sig;\n"
       "template <class... A> struct sig<void (*)(A...)> {\n"
       "  using type = codes<sizeof...(A), param<A>::code...>;\n"
       "};\n"
       // noexcept is part of a function's type from C++17 on; before, this would redefine sig.
       "#if __cplusplus >= 201703L\n"
       "template <class... A> struct sig<void (*)(A...) noexcept> : sig<void (*)(A...)> {};\n"
       "#endif\n"
       "template <class T> __device__ int probe = 0;\n"
       "}  // namespace __kop_sig\n";
  return s.str();
}

std::string signature_probe_expression(const std::string& kernel_expression) {
  return "&__kop_sig::probe<__kop_sig::sig<decltype(&" + kernel_expression + ")>::type>";
}

std::vector<std::int64_t> parse_signature_codes(const std::string& lowered_name) {
  // Itanium mangling of a long long template argument: L x <number> E, negatives as n<number>.
  std::vector<std::int64_t> codes;
  for (std::size_t at = lowered_name.find("Lx"); at != std::string::npos;
       at = lowered_name.find("Lx", at + 2)) {
    std::size_t p = at + 2;
    bool negative = p < lowered_name.size() && lowered_name[p] == 'n';
    if (negative) ++p;
    std::size_t digits = p;
    while (digits < lowered_name.size() && lowered_name[digits] >= '0' &&
           lowered_name[digits] <= '9')
      ++digits;
    if (digits == p || digits - p > 18 || digits >= lowered_name.size() ||
        lowered_name[digits] != 'E')
      continue;
    std::int64_t v = std::stoll(lowered_name.substr(p, digits - p));
    codes.push_back(negative ? -v : v);
  }
  if (codes.empty() || codes[0] < 0 || static_cast<std::size_t>(codes[0]) + 1 != codes.size()) {
    KERNELOP_FAIL(Internal) << "cannot decode the signature probe '" << lowered_name << "'";
  }
  return codes;
}

ParamType decode_param(std::int64_t code) {
  ParamType p;
  if (code >= kConstPointer) {
    p.pointer = p.is_const = true;
    p.base = static_cast<int>(code - kConstPointer);
  } else if (code >= kPointer) {
    p.pointer = true;
    p.base = static_cast<int>(code - kPointer);
  } else {
    p.base = static_cast<int>(code);
  }
  return p;
}

std::string ParamType::text() const {
  const BaseType* b = find_base(base);
  std::string t = base == kReference ? "<reference>" : b ? std::string(b->text) : "<unknown type>";
  if (!pointer) return t;
  return (is_const ? "const " : "") + t + "*";
}

std::optional<DType> ParamType::dtype() const {
  const BaseType* b = find_base(base);
  return b ? b->dtype : std::nullopt;
}

CompletedPlan verify_signature(const OpPlan& plan,
                               const std::vector<std::vector<std::int64_t>>& codes) {
  OpPlan completed = plan;
  Verifier(completed, codes).run();
  return complete_plan(std::move(completed));
}

}  // namespace kernelop::detail
