// The kernel spec: a declarative description of a kernel's inputs, outputs, extra arguments
// and launch geometry, with the names and semantics of torch_tensorrt.kernels plus kernelop's
// additions (expression shapes and geometry, explicit dtypes, 64-bit extras, mutated inputs,
// dtype-generic kernels).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kernelop/dtype.hpp"
#include "kernelop/expr.hpp"

namespace kernelop {

/// Exhaustive variant dispatch: `std::visit(Overloaded{[&](const A&) {...}, [&](const B&) {...}},
/// v)` fails to compile when an alternative of `v` has no handler, so adding a kind to a spec
/// variant shows every place that must learn it.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

/// For the last branch of an `if constexpr` chain over a variant's alternatives:
/// `else static_assert(kUnhandled<T>, "...")` makes the chain exhaustive.
template <class>
inline constexpr bool kUnhandled = false;

/// A tensor's element type as declared: a concrete dtype, or the name of a type parameter of a
/// dtype-generic kernel ("T"), bound per instantiation.
using DTypeDecl = std::variant<DType, std::string>;

/// A tensor input; the kernel receives `const T*` (or `T*` when it writes the tensor).
struct InputDecl {
  std::string name;
  /// Checked against every call; when absent it is inferred from the kernel's signature.
  std::optional<DTypeDecl> dtype;
  /// The kernel writes this tensor in place (schema `Tensor(a!)`), e.g. a cache scatter.
  bool mutated = false;
  /// The kernel takes the tensor as it is, any strides (a view), and reads them from extras
  /// (`stride(x, -2)`); `requires` states what it needs (`stride(x, -1) == 1`). Otherwise the
  /// tensor must be contiguous (PyTorch copies a non-contiguous input the kernel only reads).
  bool strided = false;
  /// With `mutated`: the value the op leaves in the tensor is one of its results (Liger's RoPE
  /// rotates q and k in place), as an in-place op's self: autograd differentiates it through the
  /// op's backward, which reads its gradient as `grad_<name>_out` (Note [written results]). Without
  /// it, a written input's new value has no gradient (Note [written inputs with a backward]).
  bool result = false;
  bool operator==(const InputDecl&) const = default;
};

/// Scalar kinds as the kernel receives them by value.
enum class ScalarType : std::uint8_t {
  Float,    ///< Python float -> `float`
  Float64,  ///< -> `double` (opt-in)
  Int,      ///< Python int -> `int` (32-bit; a value that does not fit is an error)
  Int64,    ///< -> `long long` (opt-in)
  Bool,     ///< Python bool -> `bool`
};
std::string_view scalar_type_name(ScalarType type);  // "float", "float64", ...
std::optional<ScalarType> parse_scalar_type(std::string_view name);
std::string_view scalar_schema_type(ScalarType type);  // "float" | "int" | "bool"
std::string_view scalar_cuda_type(ScalarType type);    // "float", "double", "int", ...

/// A scalar input's default value in the schema (`float b=0.2`): a bool for bool scalars, an
/// integer for int scalars, a number for float scalars.
using ScalarDefault = std::variant<bool, std::int64_t, double>;

/// A scalar input, passed by value at its declared position.
struct ScalarInput {
  std::string name;
  ScalarType type = ScalarType::Float;
  /// An integer that carries a size (a token count): `SymInt` in the schema, and symbolic in
  /// the Meta kernel, so tracing with dynamic sizes does not specialise it.
  bool symint = false;
  /// The value a caller may omit (JSON "default"); inputs after one need one too.
  std::optional<ScalarDefault> default_value = std::nullopt;
  bool operator==(const ScalarInput&) const = default;
};

/// The schema's text of a default: "True", "2", "0.2" (shortest text that reads back exactly).
std::string scalar_default_text(const ScalarDefault& value);

using Input = std::variant<InputDecl, ScalarInput>;

/// Refers to a tensor input by its position among the tensor inputs (scalars skipped) or, the
/// preferred form, by its name.
using InputRef = std::variant<std::int64_t, std::string>;

/// One axis of a shape replaced by an expression: `{-1, dim(x, -1) // 2}`.
struct AxisEdit {
  std::int64_t axis = 0;  ///< negative counts from the end of the source's rank
  Expr size;
  bool operator==(const AxisEdit&) const = default;
};

/// The output has the shape of a tensor input, of any rank, with the listed axes replaced by
/// expressions (kernelop addition: "like x, with axis -1 = dim(x, -1) // 2").
struct SameAs {
  InputRef input = std::int64_t{0};
  std::vector<AxisEdit> edits = {};
  bool operator==(const SameAs&) const = default;
};

/// The output has the shape of a tensor input with `dims` removed (or kept as 1 with keepdim).
struct ReduceDims {
  InputRef input = std::int64_t{0};
  std::vector<std::int64_t> dims;
  bool keepdim = false;
  bool operator==(const ReduceDims&) const = default;
};

/// The output's shape is a list of expressions over the inputs, e.g. [dim(x, 0), dim(x, 1) * 2].
struct ShapeExprs {
  std::vector<Expr> dims;
  bool operator==(const ShapeExprs&) const = default;
};

using ShapeRel = std::variant<SameAs, ReduceDims, ShapeExprs>;

/// Note [initialised outputs]: kernelop allocates outputs uninitialised; a kernel that writes
/// part of an output, or accumulates into it, declares what it holds before the launch. kernelop
/// writes it on the launch's stream, before the kernel, on every path (C++, torch, packages, the
/// C ABI, CUDA graphs); an empty grid still leaves the output initialised.
/// Every element set to `value` (a recorded torch.zeros_like / full / fill_), converted to the
/// output's dtype as PyTorch would; an integer or bool output needs a value it holds exactly.
struct FillInit {
  double value = 0;                           ///< may be +-inf or NaN for a floating-point output
  bool operator==(const FillInit& o) const {  // by bits: NaN equals itself here
    return std::bit_cast<std::uint64_t>(value) == std::bit_cast<std::uint64_t>(o.value);
  }
};
/// A copy of a tensor input (a recorded x.clone()): the output is `same_as` that input, with its
/// dtype, and the input is contiguous (not `strided`).
struct CloneInit {
  std::string input;
  bool operator==(const CloneInit&) const = default;
};
using OutputInit = std::variant<FillInit, CloneInit>;

struct OutputDecl {
  std::string name;
  ShapeRel shape;
  /// The output's dtype is that of this tensor input; else `dtype`; else that of the shape
  /// relation's source input (the first tensor input for expression shapes).
  std::optional<std::string> dtype_from;
  std::optional<DTypeDecl> dtype;
  std::optional<OutputInit> init;  ///< Note [initialised outputs]; none: uninitialised
  /// Note [several launches]: a workspace of the op's launches, allocated by kernelop for the
  /// call (stream-ordered) and never returned; not in the schema. Declared after the outputs.
  bool scratch = false;
  /// Note [returned views]: the op returns this output as `output.permute(permute)`, a view in
  /// which dim k is dim permute[k] of the tensor its launches write (contiguous, of the declared
  /// shape); empty: as written. Liger's RoPE writes (batch, seq, heads, dim) and returns
  /// (batch, heads, seq, dim): "permute": [0, 2, 1, 3].
  std::vector<std::int64_t> permute{};
  /// The byte alignment of the output's data pointer the kernel was compiled assuming (a DSL's
  /// assumption: CuTe DSL's assumed_align, cuTile's base_addr_divisible_by); 0: none. kernelop's
  /// own allocations (PyTorch's) always have it; a caller's output buffer (the C ABI) is checked
  /// before each launch. JSON "align", a power of two from 1 to 256.
  std::int64_t align = 0;
  bool operator==(const OutputDecl&) const = default;
};

/// Extras are passed after the inputs and before the outputs, as `int` unless `int64`.
struct Numel {
  std::string input;
  bool int64 = false;
  bool operator==(const Numel&) const = default;
};
struct DimSize {
  std::string input;
  std::int64_t axis = 0;
  bool int64 = false;
  bool operator==(const DimSize&) const = default;
};
struct ExtraExpr {
  Expr value;
  bool int64 = false;
  bool operator==(const ExtraExpr&) const = default;
};
/// A float constant passed as a 32-bit float (a literal a library's host code passes, such as
/// Liger's `offset=0.0`).
struct ExtraFloat {
  double value = 0;
  bool operator==(const ExtraFloat&) const = default;
};
using Extra = std::variant<Numel, DimSize, ExtraExpr, ExtraFloat>;

/// A kernel parameter that receives the input (tensor or scalar) or output of this name.
struct ParamName {
  std::string name;
  bool operator==(const ParamName&) const = default;
};
/// A field of a struct parameter: a named input or output, or an extra value.
using ParamField = std::variant<ParamName, Extra>;
/// One by-value struct parameter (kernelop addition): a CuTe DSL kernel takes each tensor so, its
/// pointer followed by its dynamic shape and stride values. The fields are laid out as a C
/// compiler lays out a struct of them: each at a multiple of its size, the whole aligned to its
/// largest field and padded to a multiple of it.
struct ParamStruct {
  std::vector<ParamField> fields;
  bool operator==(const ParamStruct&) const = default;
};
/// One kernel parameter in the kernel's own order: a named input or output, an extra value, or a
/// struct of those.
using Param = std::variant<ParamName, Extra, ParamStruct>;

enum class Layout : std::uint8_t { Flat, Nd };

/// One thread per element of `over` (default: output 0). Flat: a 1-D launch over its numel.
/// Nd: the trailing len(block) axes are block-parallelised (block[0] -> innermost axis and grid
/// x); the product of the leading axes is folded into grid z.
struct Elementwise {
  std::vector<std::int64_t> block = {256};
  Layout layout = Layout::Flat;
  std::optional<std::string> over;  ///< kernelop addition: any tensor input or output by name
  bool operator==(const Elementwise&) const = default;
};

/// grid.x = product of the non-reduced dims of the first tensor input; block.x = block_size.
struct Reduction {
  std::vector<std::int64_t> reduce_dims;
  std::int64_t block_size = 256;
  std::optional<Expr> shared_mem;  ///< kernelop addition: dynamic shared memory in bytes
  bool operator==(const Reduction&) const = default;
};

/// Declarative launch geometry: up to 3 grid and block expressions plus dynamic shared memory.
/// Missing trailing dimensions are 1.
struct Custom {
  std::vector<Expr> grid;
  std::vector<Expr> block;
  Expr shared_mem = 0;
  /// kernelop addition: the thread-block cluster, up to 3 expressions (missing ones are 1; empty:
  /// no cluster). Each grid axis is a multiple of its cluster axis; sm_90 or later.
  std::vector<Expr> cluster;
  bool operator==(const Custom&) const = default;
};

using Geometry = std::variant<Elementwise, Reduction, Custom>;

/// A condition the inputs must satisfy for the kernel to be safe (kernelop addition): an
/// expression that must be nonzero, typically a comparison such as `dim(bias, 0) == dim(x, -1)`,
/// or `aligned(x, 16)`. Checked before every launch and a guard under tracing; a condition on
/// data pointers (aligned) is checked at launch only, since meta tensors have none.
struct Requirement {
  Expr condition;
  /// Expr::parse; throws Error(Spec) naming the column.
  static Requirement parse(std::string_view text) { return {Expr::parse(text)}; }
  std::string to_string() const { return condition.to_string(); }
  bool operator==(const Requirement&) const = default;
};

/// A template type parameter of a dtype-generic kernel: the kernel is instantiated once per
/// combination of the parameters' dtypes (their cartesian product).
struct TypeParam {
  std::string name;
  std::vector<DType> dtypes;
  bool operator==(const TypeParam&) const = default;
};

/// A tunable parameter (the reference's config keys): an integer (or bool) every config binds.
/// Its name can appear in kernel_name's template arguments (`softmax<T, BLOCK>`), in launch
/// expressions (geometry, extras, shared memory) and configs' requires; with `define`, each
/// config's compilation also gets `-DNAME=value`.
struct Tunable {
  std::string name;
  bool define = false;
  bool boolean = false;  ///< values are false/true (written so in template arguments)
  bool operator==(const Tunable&) const = default;
};

/// One config (a tactic; its id is its index): a value per tunable, in KernelSpec::tunables'
/// order, and the conditions under which it may run. A config whose requires fail for a call's
/// inputs is ineligible for that call and never launched on it.
struct Config {
  std::vector<std::int64_t> values;
  std::vector<Requirement> requirements;  ///< JSON "requires"
  bool operator==(const Config&) const = default;
};

/// A kernel another compiler made, recorded by kernelop's Python package from the launch the user
/// wrote: Triton (a @triton.jit function, compiled per config with triton.compile), the CuTe DSL
/// (a @cute.jit host function launching a @cute.kernel, compiled with cute.compile) or cuTile (a
/// @ct.kernel launched with ct.launch, exported to CUBINs with export_kernel, without PTX).
/// kernel_source is the Python source, kernel_name the kernel's name, and the machine code comes
/// with the image (image_from_binaries), never from NVRTC. Each config is its own compilation.
struct ForeignKernel {
  enum class Compiler : std::uint8_t { Triton, CuteDsl, Cutile };
  Compiler compiler = Compiler::Triton;
  std::string version;  ///< the compiler's version, "3.6.0"
  /// This compiler's row of kForeignCompilers.
  const struct ForeignCompilerInfo& info() const;
  /// "triton" / "cutedsl" / "cutile": the spec's JSON key.
  std::string_view key() const;
  /// "Triton" / "CuTe DSL" / "cuTile": for messages.
  std::string_view display() const;
  /// "triton.compile" / "cute.compile".
  std::string_view compile_fn() const;
  bool operator==(const ForeignKernel&) const = default;
};

/// Note [kernel sources]: where a kernel's machine code comes from. CUDA C++ is compiled by
/// NVRTC (compile()), pre-compiled PTX is taken as it is (image_from_ptx), and each foreign
/// compiler, one row of this table, is run by kernelop's Python package (one module per DSL,
/// registered in kernelop/_dsls.py), whose binaries image_from_binaries checks and holds. The
/// spec reader, the validator, the package writer and reader and every message read this table;
/// a new DSL is one row here and one in Python.
struct ForeignCompilerInfo {
  ForeignKernel::Compiler compiler;
  std::string_view key;          ///< the spec's JSON key and the Python module: "triton"
  std::string_view display;      ///< for messages: "Triton"
  std::string_view compile_fn;   ///< what compiles one config for one arch: "triton.compile"
  std::uint32_t package_format;  ///< the oldest package format that can hold its images
};
inline constexpr std::array<ForeignCompilerInfo, 3> kForeignCompilers = {{
    {ForeignKernel::Compiler::Triton, "triton", "Triton", "triton.compile", 2},
    {ForeignKernel::Compiler::CuteDsl, "cutedsl", "CuTe DSL", "cute.compile", 3},
    {ForeignKernel::Compiler::Cutile, "cutile", "cuTile", "cuda.tile.compilation.export_kernel", 6},
}};
namespace detail {
constexpr bool foreign_compilers_in_enum_order() {
  for (std::size_t i = 0; i < kForeignCompilers.size(); ++i) {
    if (static_cast<std::size_t>(kForeignCompilers[i].compiler) != i) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::foreign_compilers_in_enum_order(),
              "kForeignCompilers needs one row per ForeignKernel::Compiler, in order");

inline const ForeignCompilerInfo& ForeignKernel::info() const {
  return kForeignCompilers[static_cast<std::size_t>(compiler)];
}
inline std::string_view ForeignKernel::key() const {
  return info().key;
}
inline std::string_view ForeignKernel::display() const {
  return info().display;
}
inline std::string_view ForeignKernel::compile_fn() const {
  return info().compile_fn;
}

/// Note [host reads]: a launch may depend on the values of one-element tensors, read on the host
/// when the launch is reached (after the op's earlier launches, a stream synchronisation), as
/// library host code does (Liger's cross entropy: `n = mask.sum().item()` passed to its kernel,
/// `if torch.equal(grad_output, torch.tensor(1.0)): pass` to skip a scaling). A kernel argument
/// reads a value as `item(t)` (an integer tensor's), a launch runs only when its `when` tests hold.
/// Such an op cannot be captured in a CUDA graph (refused, naming the op, under capture); the
/// recorder makes one only when asked (`ko.triton(..., host_sync=True)`).
struct HostTest {
  std::string tensor;  ///< a one-element tensor input or output of the launch
  double value = 0;    ///< a finite number
  bool equal = true;   ///< holds when the tensor's value == value (torch.equal); false: !=
  bool operator==(const HostTest&) const = default;
};

struct BackwardSpec;
struct LaunchStep;

struct KernelSpec {
  /// CUDA C++ source text (the Python source when `foreign` is set). When it was read
  /// from a file, `source_file` keeps that path (relative to the spec file) so the spec's JSON form
  /// can refer to it again.
  std::string kernel_source;
  std::optional<std::string> source_file;
  /// The __global__ function; for templated kernels the instantiation, e.g. "relu<T>" (with a
  /// type parameter) or "rowsum<256>".
  std::string kernel_name;
  std::optional<std::vector<Input>> inputs;
  std::optional<std::vector<OutputDecl>> outputs;
  std::vector<Extra> extras;
  /// The kernel's parameters in its own order (kernelop addition): every output once, inputs
  /// and scalars at most once, extras wherever the kernel has them (then `extras` stays empty).
  /// Absent: the default convention, inputs as declared, then `extras`, then outputs.
  std::optional<std::vector<Param>> params;
  std::optional<Geometry> geometry;
  std::vector<std::string> include_paths;  ///< relative paths are relative to the spec file
  std::string compile_std = "c++17";
  /// Architectures to build ("sm_90" -> CUBIN, "compute_90" -> PTX); empty: the default list.
  std::vector<std::string> arch_override;
  std::vector<std::string> defines;  ///< "NAME" or "NAME=VALUE"
  bool fast_math = false;
  bool line_info = false;
  std::vector<TypeParam> type_params;
  std::vector<Requirement> requirements;  ///< JSON "requires"
  /// Tunable parameters and the configs binding them (kernelop's tactics; see docs/tactics.md).
  std::vector<Tunable> tunables;
  std::vector<Config> configs;
  /// The input sizes the fastest config depends on, each bucketed to a power of two (absent:
  /// every dim of every tensor input).
  std::optional<std::vector<Expr>> tuning_key;
  /// Set for a kernel another compiler made (see ForeignKernel); JSON "triton", "cutedsl" or
  /// "cutile".
  std::optional<ForeignKernel> foreign;
  /// The op's backward (kernelop addition; see BackwardSpec): empty, or one element.
  std::vector<BackwardSpec> backward;
  /// Kernels launched after this one, in order (Note [several launches]).
  std::vector<LaunchStep> then;
  /// The kernel launches only when every test holds (Note [host reads]); JSON
  /// "when": [{"tensor": "g", "==": 1.0}, {"tensor": "h", "!=": 0}].
  std::vector<HostTest> when;
  bool operator==(const KernelSpec&) const = default;
};

/// Note [several launches]: an op may launch more kernels after its own, in order, on the
/// caller's stream: each a spec of its own (kernel, geometry, configs) whose tensors and scalars
/// are the op's, named after them; `from` renames ({"x": "partials"} makes its tensor x the op's
/// `partials`). A launch reads the op's inputs, outputs and scratch, and writes (as its outputs)
/// the op's outputs and scratch. Its undeclared dtypes are the op's. Each is compiled and checked
/// as an op of its own, `<op>_launch<k>` (k from 1; the op's own kernel is launch 0), and goes
/// into packages with the op. Scratch outputs (OutputDecl::scratch) are what the launches pass
/// between them: kernelop allocates them for the call, on the call's stream, and frees them after
/// the last launch. JSON: "then": [{"from"?: {...}, ...a spec without "op"...}, ...].
struct LaunchStep {
  std::map<std::string, std::string> from;  ///< launch tensor or scalar name -> the op's
  /// Runs before the op's own kernel (after the inits): host glue a library computes before its
  /// first kernel (Liger's cross entropy backward scales the incoming gradient). Such launches
  /// come first in `then`. JSON: "before": true.
  bool before = false;
  KernelSpec spec;
  bool operator==(const LaunchStep&) const = default;
};

/// Note [backward]: a spec's backward is a second kernel, itself any spec, that computes the
/// gradients of the `differentiable` tensor inputs. Its inputs are named after what they receive:
/// a forward input (tensor or scalar), a forward output, or `grad_<output>` (the gradient flowing
/// into that output); its outputs are `grad_<input>`, one per differentiable input. What it reads
/// is what autograd saves; an output whose gradient it does not read is not differentiable (its
/// result does not require grad). `from` renames: {"g": "grad_y"} makes input g receive grad_y,
/// for a double backward that reads an input of the same name as one of its outputs. Undeclared
/// dtypes and type parameters follow the forward's. It is registered as its own op,
/// `<op>_backward`, and may declare its own backward (double backward).
/// JSON: "backward": {"differentiable": [...], "from"?: {...}, ...a spec without "op"...}.
struct BackwardSpec {
  std::vector<std::string> differentiable;
  std::map<std::string, std::string> from;  ///< backward input name -> what it receives
  KernelSpec spec;
  bool operator==(const BackwardSpec&) const = default;
};

/// Whether a launch of the spec reads tensors' values on the host (Note [host reads]): a `when`, or
/// an argument reading item(), in it or a later launch. Such an op cannot be captured in a graph.
bool reads_on_host(const KernelSpec& spec);

/// A named operator: "namespace::name" plus its spec. What a JSON spec file holds.
struct OpDecl {
  std::string op_name;
  KernelSpec spec;
  /// Directory relative paths in the spec resolve against (the spec file's folder).
  std::string base_dir;
  bool operator==(const OpDecl&) const = default;
};

}  // namespace kernelop
