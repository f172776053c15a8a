// OpPlan: everything a validated spec implies, derived once: the schema, output shape and dtype
// rules, launch geometry as expressions, and the kernel's argument list.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernelop/spec.hpp"
#include "kernelop/validate.hpp"

namespace kernelop {

/// A tensor the kernel sees: tensor inputs first (declared order, scalars skipped), then
/// outputs (then, for a kernel with no declared convention, its adopted pointer parameters).
/// Expression leaves naming a tensor resolve to its index in OpPlan::tensors.
struct TensorSlot {
  std::string name;
  bool is_output = false;
  bool mutated = false;
  /// The one home of the tensor's dtype: as declared, or derived (an output's `dtype_from`),
  /// or inferred from the kernel's signature by compile(); unknown (nullopt) until then, and
  /// for an output shaped by a meta function whose dtype the signature cannot tell.
  std::optional<DTypeDecl> dtype;
  /// An input passed as it is, any strides (InputDecl::strided); others must be contiguous.
  bool strided = false;
  /// A mutated input whose new value is one of the op's results (InputDecl::result).
  bool result = false;
  bool operator==(const TensorSlot&) const = default;
};

struct ScalarSlot {
  std::string name;
  ScalarType type = ScalarType::Float;
  bool symint = false;  ///< SymInt in the schema, symbolic in the Meta kernel
  std::optional<ScalarDefault> default_value = std::nullopt;  ///< the schema's default
  bool operator==(const ScalarSlot&) const = default;
};

/// How an output's shape follows from the inputs. Rank-polymorphic relations (like, reduce)
/// stay relations; fixed-rank shapes are expressions.
struct ShapeRule {
  /// External: given at run time by the op's meta function (the override path).
  enum class Kind : std::uint8_t { Like, Reduce, Exprs, External };
  Kind kind = Kind::Like;
  int source = 0;  ///< Like, Reduce: tensor slot of the source input
  /// Reduce: the reduced axes; Like: the edited axes (as declared, possibly negative).
  std::vector<std::int64_t> axes;
  bool keepdim = false;  ///< Reduce
  /// Exprs: resolved expressions, one per dim; Like: the edited axes' sizes, parallel to axes.
  std::vector<Expr> dims;
  bool operator==(const ShapeRule&) const = default;
};

struct OutputPlan {
  int slot = 0;  ///< index in OpPlan::tensors
  ShapeRule shape;
  /// The output takes the dtype of this tensor slot (-1: its own declared dtype). The dtype
  /// itself lives in OpPlan::tensors[slot].
  int dtype_from = -1;
  /// Note [initialised outputs]: filled with this value before the launch, or a copy of the
  /// tensor slot `clone_slot` (-1: none); neither: left uninitialised.
  std::optional<FillInit> fill;
  int clone_slot = -1;
  /// A workspace of the op's launches (OutputDecl::scratch): allocated by the launch, never
  /// returned. Scratch outputs come after the op's results.
  bool scratch = false;
  /// Note [returned views] (OutputDecl::permute): the op returns the output as this permutation
  /// of the tensor its launches write; empty: as written.
  std::vector<int> permute;
  /// OutputDecl::align: the data pointer's required alignment in bytes (0: none), checked at
  /// launch.
  std::int64_t align = 0;
  bool operator==(const OutputPlan&) const = default;
};

/// One kernel argument in calling-convention order. A pointer's element type is its tensor
/// slot's dtype (OpPlan::element); OpPlan::c_type gives the C type the kernel must declare.
struct ArgSlot {
  enum class Kind : std::uint8_t { TensorInput, ScalarInput, ExtraValue, Output };
  Kind kind = Kind::TensorInput;
  std::string name;  ///< tensor/scalar name; for extras the expression text
  int index = 0;     ///< tensor slot, scalar slot, or extra position
  /// Tensors: a pointer to const (inputs the kernel does not write).
  bool is_const = false;
  /// Scalars and extras: the by-value type (extras are Int or Int64).
  ScalarType value_type = ScalarType::Int;
  std::optional<Expr> value;  ///< extras: the resolved expression
  bool is_pointer() const { return kind == Kind::TensorInput || kind == Kind::Output; }
  bool operator==(const ArgSlot&) const = default;
};

/// Bytes an argument occupies as a kernel parameter: 8 for pointers, its by-value type's size
/// otherwise.
int arg_size(const ArgSlot& arg);

/// Consecutive arguments the kernel takes as one by-value struct parameter (ParamStruct):
/// args[first, first + offsets.size()) at these byte offsets within `size` bytes aligned to
/// `align`, laid out as a C compiler would.
struct StructParam {
  int first = 0;
  std::vector<int> offsets;
  int size = 0;
  int align = 1;
  bool operator==(const StructParam&) const = default;
};

/// One parameter of the kernel: an argument, or a struct of `count` consecutive arguments.
struct KernelParam {
  int first = 0;  ///< index in OpPlan::args
  int count = 1;
  int size = 0;  ///< bytes
  int align = 1;
  bool is_struct = false;
};

/// An input of the op's signature: a tensor (index into OpPlan::tensors) or a scalar (index
/// into OpPlan::scalars).
struct DeclaredInput {
  bool is_tensor = true;
  int slot = 0;
  bool operator==(const DeclaredInput&) const = default;
};

/// A requirement on a tensor's rank, with the reason (for the error message at launch).
struct RankRequirement {
  int slot = 0;
  std::int64_t min_rank = 0;
  std::string reason;
  bool operator==(const RankRequirement&) const = default;
};

/// A requirement on the inputs with resolved expressions (see Requirement).
struct RequirementPlan {
  Expr condition;
  std::string text;             ///< as declared, for messages
  bool reads_pointers = false;  ///< uses aligned(): checked at launch, skipped on meta tensors
  bool operator==(const RequirementPlan&) const = default;
};

/// Launch geometry as resolved expressions over input and output shapes.
struct LaunchGeometry {
  std::array<Expr, 3> grid = {1, 1, 1};
  std::array<Expr, 3> block = {1, 1, 1};
  Expr shared_mem = 0;
  std::array<Expr, 3> cluster = {1, 1, 1};  ///< the thread-block cluster (Custom::cluster)
  /// True when some cluster axis may be more than 1 (the launch is a cluster launch).
  bool clustered() const {
    return std::any_of(cluster.begin(), cluster.end(),
                       [](const Expr& c) { return !c.is_const() || c.const_value() != 1; });
  }
  std::string description;  ///< e.g. "Elementwise(block=(16, 16), layout=nd, over=y)"
  bool operator==(const LaunchGeometry&) const = default;
};

/// One instantiation of the kernel: the name expression given to NVRTC and, for dtype-generic
/// kernels, the dtype bound to each type parameter.
struct KernelInstance {
  std::string name_expression;
  std::vector<DType> bindings;  ///< parallel to OpPlan::type_params
  int config = 0;               ///< the config (tactic) it belongs to
  bool operator==(const KernelInstance&) const = default;
};

/// One config (tactic) of the op, resolved: its values, its own requires, the compilation it is
/// part of (configs that differ in a `define` tunable are compiled separately).
struct ConfigPlan {
  std::vector<std::int64_t> values;  ///< parallel to OpPlan::tunables
  std::vector<RequirementPlan> requirements;
  std::string text;  ///< "BLOCK=256, VEC=4" (empty for the implicit config of an untuned op)
  int program = 0;   ///< index in OpPlan::programs
  bool operator==(const ConfigPlan&) const = default;
};

/// Note [instances and configs]: an op has at least one config (an untuned op has one, with no
/// values) and per config one instance per dtype combination: OpPlan::instances is config-major,
/// instance = config * dtype_combinations() + combination, and the first dtype_combinations()
/// instances (config 0's) stand for every config wherever only dtypes matter.
struct OpPlan {
  std::string op_name;   ///< "namespace::name"
  std::string ns, name;  ///< the two parts
  std::string schema;    ///< PyTorch schema without the name: "(Tensor x, float alpha) -> Tensor"
  std::vector<TensorSlot> tensors;
  std::vector<ScalarSlot> scalars;
  int num_tensor_inputs = 0;
  /// The declared inputs in the op's argument order.
  std::vector<DeclaredInput> input_order;
  std::vector<OutputPlan> outputs;
  std::vector<ArgSlot> args;
  /// Arguments the kernel takes packed into struct parameters, in argument order (usually none).
  std::vector<StructParam> structs;
  std::optional<LaunchGeometry> geometry;  ///< absent only when a caller supplies the launch
  /// The convention is incomplete (no inputs, or no outputs with an eager_fn: the caller's
  /// functions supply everything): `args` are adopted from the kernel's own parameters when it
  /// is compiled, and only raw launches are possible.
  bool args_from_kernel = false;
  std::vector<RankRequirement> rank_requirements;
  std::vector<RequirementPlan> requirements;
  std::vector<TypeParam> type_params;
  std::vector<KernelInstance> instances;
  std::vector<Tunable> tunables;
  std::vector<ConfigPlan> configs;  ///< never empty (Note [instances and configs])
  /// The -D defines of each separate compilation (one, empty, unless a tunable is a define; a
  /// Triton kernel has one compilation per config).
  std::vector<std::vector<std::string>> programs = {{}};
  /// The resolved tuning key (empty: every dim of every tensor input), bucketed to powers of 2.
  std::vector<Expr> tuning_key;
  KernelSpec spec;  ///< the validated spec this plan was derived from
  std::string base_dir;
  bool operator==(const OpPlan&) const = default;

  /// "ns::name(Tensor x, float alpha) -> Tensor"
  std::string qualified_schema() const { return op_name + schema; }
  int tensor_slot(std::string_view name) const;  ///< -1 when absent
  int scalar_slot(std::string_view name) const;  ///< -1 when absent
  bool has_external_outputs() const;
  /// The outputs a call returns (and a caller allocates): `outputs` but the scratch at its end.
  std::size_t num_results() const {
    return static_cast<std::size_t>(std::count_if(outputs.begin(), outputs.end(),
                                                  [](const OutputPlan& o) { return !o.scratch; }));
  }
  /// A pointer argument's element type (its tensor slot's dtype); nullopt for values.
  const std::optional<DTypeDecl>& element(const ArgSlot& arg) const;
  /// "const float*", "T*", "int", "long long", "?*" when the element type is not yet known.
  std::string c_type(const ArgSlot& arg) const;
  /// A kernel with no declared convention (args_from_kernel): appends its next parameter,
  /// a pointer with its own tensor slot or a value, as an argument of raw launches.
  void adopt_pointer_param(bool is_const, std::optional<DTypeDecl> element);
  void adopt_value_param(ScalarType type);
  /// The kernel's parameters in order: `args`, each struct's fields counted as one.
  std::vector<KernelParam> kernel_params() const;
  /// Instances per config: the number of dtype combinations.
  int dtype_combinations() const {
    return static_cast<int>(instances.size() / (configs.empty() ? 1 : configs.size()));
  }
  /// The instances compiled by program `program`, in instance order.
  std::vector<int> instances_of(int program) const;
  /// The op has configs to choose between (a tuned op).
  bool is_tuned() const { return !tunables.empty(); }
  /// Everything is declared: KernelOp::launch() works and the op can go in a package.
  bool is_declarative() const { return geometry && !args_from_kernel && !has_external_outputs(); }
};

/// Note [plan stages]: a plan is made in two stages, each a value no later stage writes back
/// into. derive_plan() gives an OpPlan from the spec alone. The stage that reads the kernel
/// itself (the signature verifier of compile(), the PTX reader of image_from_ptx and
/// image_from_binaries, the package reader) completes it: tensor dtypes the spec leaves to the
/// kernel's signature, and the argument list of a kernel that declares no inputs. A CompiledImage
/// holds the completed plan, of its own type, made only by complete_plan().
class CompletedPlan : public OpPlan {
 public:
  CompletedPlan() = default;  ///< the plan of an empty image

 private:
  explicit CompletedPlan(OpPlan plan) : OpPlan(std::move(plan)) {}
  friend CompletedPlan complete_plan(OpPlan plan);
};

/// `plan`, completed by the caller (the stage that read the kernel, see Note [plan stages]), as
/// the image's plan.
CompletedPlan complete_plan(OpPlan plan);

/// Where each input of an op's backward comes from, and which gradient each of its outputs is
/// (Note [backward]): what autograd saves, passes and returns.
struct BackwardLink {
  struct Source {
    /// ResultGrad: the gradient of the value the forward left in a written input that is one of
    /// its results (InputDecl::result), read as grad_<input>_out.
    enum class Kind : std::uint8_t { ForwardInput, ForwardOutput, Grad, ResultGrad };
    Kind kind = Kind::ForwardInput;
    /// ForwardInput, ResultGrad: the input's input_order position; ForwardOutput, Grad: the
    /// output index
    int index = 0;
    bool operator==(const Source&) const = default;
  };
  std::vector<Source> sources;      ///< per backward input, in its input_order
  std::vector<int> differentiable;  ///< the forward's input_order positions that get gradients
  std::vector<int> grad_of;         ///< per backward output: its index in `differentiable`
  bool operator==(const BackwardLink&) const = default;
};

/// The declaration of `forward`'s backward op ("<op>_backward"): its spec, with the dtypes and
/// type parameters it leaves out taken from the forward. `forward` must have a backward.
OpDecl backward_decl(const OpPlan& forward);

/// Whether `candidate` is the backward `forward` derives: backward_decl(forward)'s op and spec.
bool derives_backward(const OpPlan& forward, const OpPlan& candidate);

/// Note [backward chain]: an op's backward may declare a backward of its own, and so on. Every
/// caller (compile, registration, packages, the CLI, the Python extensions) walks the chain with
/// derive_chain: each link is derived from the *completed* plan before it (the one compiling
/// produced, whose inferred dtypes the backward inherits), so the walk is given `complete`, which
/// takes a link's derived plan and returns the completed plan the next link is derived from
/// (compile: the compiled image's plan; a caller that compiles nothing: the plan itself). The
/// returned reference must stay valid until `complete` is called again.
void derive_chain(const OpPlan& forward, const std::function<const OpPlan&(OpPlan)>& complete);

/// The link between a forward plan and its backward's plan (both derived, hence valid).
BackwardLink link_backward(const OpPlan& forward, const OpPlan& backward);

/// Validates the declaration (see validate.hpp) and derives its plan. Throws Error(Spec) or
/// Error(Type) naming the field. `overrides` tells which parts the caller supplies itself.
OpPlan derive_plan(const OpDecl& decl, const ValidateOptions& overrides = {});

/// Where each tensor and scalar of one of an op's later launches comes from (Note [several
/// launches], spec.hpp): the op's tensor slot per launch tensor slot, its scalar slot per launch
/// scalar slot.
struct LaunchLink {
  std::vector<int> tensors;
  std::vector<int> scalars;
  bool operator==(const LaunchLink&) const = default;
};

/// The declaration of the op's launch `k + 1` ("<op>_launch<k+1>", from spec.then[k]), its
/// undeclared dtypes and type parameters taken from the op. Derive it from the completed plan.
OpDecl launch_decl(const OpPlan& op, std::size_t k);
/// The plan of the op's launch k: derive_plan(launch_decl(op, k)), but for the launch's host reads
/// of the op's tensors, which the op's own check checks against what runs before the launch.
OpPlan derive_launch_plan(const OpPlan& op, std::size_t k);

/// Whether `candidate` is the plan of `op`'s launch k + 1: launch_decl(op, k)'s op and spec.
bool derives_launch(const OpPlan& op, std::size_t k, const OpPlan& candidate);

/// The link between an op's plan and the plan of its launch `k + 1` (both valid).
LaunchLink link_launch(const OpPlan& op, std::size_t k, const OpPlan& launch);

namespace detail {
/// The rules of a backward (Note [backward]), including its own spec's; derive_plan calls it.
void check_backward(const OpPlan& forward, const ValidateOptions& options);
/// The rules of an op's later launches (Note [several launches]), each checked as a spec too.
void check_launches(const OpPlan& op, const ValidateOptions& options);
/// Whether one of the spec's later launches writes `output`.
bool written_later(const KernelSpec& spec, std::string_view output);
/// The tensor slots the op's kernel arguments read with item() (Note [host reads]), in argument
/// order, repeats kept.
std::vector<int> item_slots(const OpPlan& plan);
}  // namespace detail

/// Human-readable text of a dtype declaration: "float32" or a type parameter's name.
std::string dtype_decl_text(const DTypeDecl& dtype);

/// Text of a shape rule: "like(x)", "reduce(x, dims=[-1], keepdim=false)", "[dim(x, 0), 4]".
std::string shape_rule_text(const OpPlan& plan, const ShapeRule& rule);

}  // namespace kernelop
