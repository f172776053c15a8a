// kernelop._kernelop_jax: the JAX adapter's bindings (kernelop/jax.hpp), imported by
// kernelop.jax. Loads ops into the FFI registry, gives the FFI handlers and the state type as
// capsules, and evaluates an op's output shapes and requirements at trace time with the one shape
// evaluator (Note [one shape evaluator]) over Python values: ints, or JAX's symbolic dimensions
// (jax.export shape polymorphism), whose arithmetic is JAX's own. No torch, no JAX import here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <ostream>
#include <stdexcept>

#include "convert.hpp"
#include "kernelop/jax.hpp"
#include "kernelop/kernelop.hpp"
#include "kernelop/shape_eval.hpp"

namespace nb = nanobind;
using namespace kernelop;

namespace kernelop::python {

// A size at trace time: a Python int, or a JAX symbolic dimension (jax.export).
struct PyDim {
  nb::object v;
  std::optional<std::int64_t> as_int() const {
    if (!nb::isinstance<nb::int_>(v)) return std::nullopt;
    try {
      return nb::cast<std::int64_t>(v);
    } catch (const nb::cast_error&) {
      return std::nullopt;  // beyond int64: the symbolic path (Python's arbitrary ints)
    }
  }
};
inline std::ostream& operator<<(std::ostream& out, const PyDim& d) {
  return out << nb::cast<std::string>(nb::str(d.v));
}

// A comparison of symbolic sizes JAX cannot decide (for every value of the dimensions).
struct Inconclusive : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// JAX's max_dim and min_dim (jax._src.core), given per call by kernelop.jax.
thread_local nb::handle t_max_dim, t_min_dim;

nb::object number_op(PyObject* (*f)(PyObject*, PyObject*), const PyDim& a, const PyDim& b) {
  PyObject* r = f(a.v.ptr(), b.v.ptr());
  if (!r) throw nb::python_error();
  return nb::steal(r);
}

// `a OP b` for sizes at least one of which is symbolic, by JAX's own ordering comparisons, which
// answer only what holds for every value of the dimensions (else they raise: Inconclusive). JAX's
// == answers False when it cannot prove equality: never used; a == b is a >= b and a <= b.
bool compare(ExprOp op, const PyDim& a, const PyDim& b, const ExprNode& where) {
  auto holds = [&](int py_op) {
    PyObject* r = PyObject_RichCompare(a.v.ptr(), b.v.ptr(), py_op);
    int truth = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (truth < 0) {
      PyErr_Clear();
      throw Inconclusive("'" + to_string(where) + "' compares symbolic sizes (" +
                         nb::cast<std::string>(nb::str(a.v)) + " and " +
                         nb::cast<std::string>(nb::str(b.v)) +
                         ") that JAX cannot order for every value of the dimensions");
    }
    return truth == 1;
  };
  switch (op) {
    case ExprOp::Lt:
      return holds(Py_LT);
    case ExprOp::Le:
      return holds(Py_LE);
    case ExprOp::Gt:
      return holds(Py_GT);
    case ExprOp::Ge:
      return holds(Py_GE);
    case ExprOp::Eq:
      return holds(Py_GE) && holds(Py_LE);
    case ExprOp::Ne:
      return !(holds(Py_GE) && holds(Py_LE));
    default:
      KERNELOP_FAIL(Internal) << "compare: not a comparison";
  }
}

}  // namespace kernelop::python

namespace kernelop {

template <>
struct ExprArith<python::PyDim> {
  using D = python::PyDim;
  static D constant(std::int64_t value) { return D{nb::int_(value)}; }
  static bool truthy(const D& v) {
    if (auto i = v.as_int()) return *i != 0;
    return python::compare(ExprOp::Ne, v, constant(0), ExprNode{});
  }
  static D apply(ExprOp op, const D& a, const D& b, const ExprNode& where) {
    auto ia = a.as_int(), ib = b.as_int();
    if (ia && ib) return constant(ExprArith<std::int64_t>::apply(op, *ia, *ib, where));
    auto of = [](bool v) { return constant(v ? 1 : 0); };
    switch (op) {
      case ExprOp::Add:
        return D{python::number_op(PyNumber_Add, a, b)};
      case ExprOp::Sub:
        return D{python::number_op(PyNumber_Subtract, a, b)};
      case ExprOp::Mul:
        return D{python::number_op(PyNumber_Multiply, a, b)};
      case ExprOp::FloorDiv:
      case ExprOp::CeilDiv:
      case ExprOp::Mod: {
        if (ib && *ib == 0) (void)ExprArith<std::int64_t>::apply(op, 0, 0, where);  // throws
        if (op == ExprOp::FloorDiv) return D{python::number_op(PyNumber_FloorDivide, a, b)};
        if (op == ExprOp::Mod) return D{python::number_op(PyNumber_Remainder, a, b)};
        D negated = apply(ExprOp::Sub, constant(0), a, where);
        return apply(ExprOp::Sub, constant(0), apply(ExprOp::FloorDiv, negated, b, where), where);
      }
      case ExprOp::Min:
        return D{nb::borrow(python::t_min_dim)(a.v, b.v)};
      case ExprOp::Max:
        return D{nb::borrow(python::t_max_dim)(a.v, b.v)};
      case ExprOp::Lt:
      case ExprOp::Le:
      case ExprOp::Gt:
      case ExprOp::Ge:
      case ExprOp::Eq:
      case ExprOp::Ne:
        return of(python::compare(op, a, b, where));
      case KERNELOP_EXPR_LEAVES:
      case ExprOp::Select:
      case ExprOp::SameShape:
        break;
    }
    KERNELOP_FAIL(Internal) << "ExprArith<PyDim>: not a binary operator";
  }
};

}  // namespace kernelop

namespace kernelop::python {
namespace {

using kernelop::jax::find_op;
using kernelop::jax::JaxOp;
using kernelop::jax::target_name;

// A traced call's inputs, for the one shape evaluator: JAX arrays are row-major and dense.
struct TraceSizes {
  const OpPlan& plan;
  const std::vector<std::vector<PyDim>>& shapes;
  const std::vector<DType>& dtypes;
  const std::vector<ScalarArg>& scalars;
  std::int64_t rank(int slot) const {
    return static_cast<std::int64_t>(shapes[static_cast<std::size_t>(slot)].size());
  }
  PyDim size(int slot, std::int64_t a) const {
    return shapes[static_cast<std::size_t>(slot)][static_cast<std::size_t>(a)];
  }
  PyDim numel(int slot) const {
    PyDim p = ExprArith<PyDim>::constant(1);
    for (std::int64_t d = 0; d < rank(slot); ++d)
      p = ExprArith<PyDim>::apply(ExprOp::Mul, p, size(slot, d), ExprNode{});
    return p;
  }
  PyDim scalar(int slot) const {
    const ScalarArg& a = scalars[static_cast<std::size_t>(slot)];
    return ExprArith<PyDim>::constant(a.kind == ScalarArg::Kind::Bool ? (a.b ? 1 : 0) : a.i);
  }
  PyDim itemsize(int slot) const {
    return ExprArith<PyDim>::constant(
        static_cast<std::int64_t>(dtype_size(dtypes[static_cast<std::size_t>(slot)])));
  }
  PyDim stride(int slot, std::int64_t a) const {
    PyDim p = ExprArith<PyDim>::constant(1);
    for (std::int64_t d = a + 1; d < rank(slot); ++d)
      p = ExprArith<PyDim>::apply(ExprOp::Mul, p, size(slot, d), ExprNode{});
    return p;
  }
  bool aligned(int /*slot*/, std::int64_t /*bytes*/) const {
    KERNELOP_FAIL(Internal) << "aligned() read at trace time";  // requirements skip it
  }
  bool negative(const PyDim& v) const {
    if (auto i = v.as_int()) return *i < 0;
    try {
      return compare(ExprOp::Lt, v, ExprArith<PyDim>::constant(0), ExprNode{});
    } catch (const Inconclusive&) {
      return false;  // checked by the launch, with the sizes
    }
  }
  std::string shape_text(int slot) const {
    std::ostringstream out;
    out << "[";
    for (std::int64_t d = 0; d < rank(slot); ++d) out << (d ? ", " : "") << size(slot, d);
    out << "]";
    return out.str();
  }
};

// Whether the spec declares the op elementwise over flat memory (an Elementwise geometry of flat
// layout, every result shaped as an input): a leading batch dimension is then more elements of the
// same kind, and jax.vmap may call the op once on the batched arrays (broadcast_all). Any other op
// is called once per batch element (sequential): no spec says what a batch dimension means to it.
bool flat_elementwise(const OpPlan& p) {
  const auto* e = p.spec.geometry ? std::get_if<Elementwise>(&*p.spec.geometry) : nullptr;
  if (!e || e->layout != Layout::Flat || p.num_results() != p.outputs.size()) return false;
  return std::all_of(p.outputs.begin(), p.outputs.end(), [](const OutputPlan& o) {
    return o.shape.kind == ShapeRule::Kind::Like && o.shape.axes.empty() && o.permute.empty();
  });
}

// The op's signature and what kernelop.jax needs to call it.
nb::dict info_of(const JaxOp& j) {
  const OpPlan& p = j.op.plan();
  nb::dict d;
  d["op"] = p.op_name;
  d["schema"] = p.qualified_schema();
  d["fingerprint"] = j.fingerprint;
  d["target"] = target_name(!j.allocates.empty());
  d["allocates"] = j.allocates;
  nb::list inputs;
  for (const DeclaredInput& in : p.input_order) {
    nb::dict i;
    if (in.is_tensor) {
      const TensorSlot& t = p.tensors[static_cast<std::size_t>(in.slot)];
      i["name"] = t.name;
      i["tensor"] = true;
      i["slot"] = in.slot;
      i["mutated"] = t.mutated;
    } else {
      const ScalarSlot& s = p.scalars[static_cast<std::size_t>(in.slot)];
      i["name"] = s.name;
      i["tensor"] = false;
      i["slot"] = in.slot;
      i["type"] = std::string(scalar_type_name(s.type));
      if (s.default_value) {
        std::visit([&](const auto& v) { i["default"] = v; }, *s.default_value);
      }
    }
    inputs.append(i);
  }
  d["inputs"] = inputs;
  nb::list outputs;
  for (std::size_t o = 0; o < p.num_results(); ++o) {
    nb::dict out;
    out["name"] = p.tensors[static_cast<std::size_t>(p.outputs[o].slot)].name;
    out["permute"] = p.outputs[o].permute;
    outputs.append(out);
  }
  d["outputs"] = outputs;
  d["tactics"] = j.op.num_tactics();
  d["vmap_method"] = flat_elementwise(p) ? "broadcast_all" : "sequential";
  return d;
}

// Output shapes and dtypes of a traced call; its input checks as far as the sizes are known
// (requirements JAX cannot decide on symbolic sizes are checked by the launch).
nb::list trace(const std::string& name, const std::vector<std::vector<nb::object>>& shape_objs,
               const std::vector<std::string>& dtype_texts, const nb::list& scalar_objs,
               nb::handle max_dim, nb::handle min_dim) {
  std::shared_ptr<const JaxOp> j = find_op(name);
  if (!j) KERNELOP_FAIL(Spec) << "op " << name << " is not loaded for JAX";
  const KernelOp& op = j->op;
  const OpPlan& p = op.plan();
  if (shape_objs.size() != static_cast<std::size_t>(p.num_tensor_inputs) ||
      dtype_texts.size() != shape_objs.size() || scalar_objs.size() != p.scalars.size()) {
    KERNELOP_FAIL(Internal) << "op " << name << ": trace() got the wrong number of arguments";
  }
  std::vector<DType> dtypes;
  std::vector<TensorView> views(shape_objs.size());
  std::vector<std::vector<PyDim>> shapes;
  bool concrete = true;
  for (std::size_t i = 0; i < shape_objs.size(); ++i) {
    std::optional<DType> d = parse_dtype(dtype_texts[i]);
    if (!d || dtype_name(*d) != dtype_texts[i]) {  // JAX's names are kernelop's: no aliases
      KERNELOP_FAIL(Type) << "op " << name << ": input '" << p.tensors[i].name
                          << "' is an array of " << dtype_texts[i]
                          << ", a dtype kernelop does not take";
    }
    dtypes.push_back(*d);
    views[i].dtype = *d;
    shapes.emplace_back();
    for (const nb::object& o : shape_objs[i]) {
      PyDim dim{o};
      if (auto v = dim.as_int()) {
        views[i].shape.push_back(*v);
      } else {
        concrete = false;
      }
      shapes.back().push_back(std::move(dim));
    }
  }
  std::vector<ScalarArg> scalars;
  for (std::size_t s = 0; s < p.scalars.size(); ++s) {
    nb::handle h = scalar_objs[s];
    switch (p.scalars[s].type) {
      case ScalarType::Float:
      case ScalarType::Float64:
        scalars.push_back(ScalarArg::of_float(nb::cast<double>(h)));
        break;
      case ScalarType::Int:
      case ScalarType::Int64:
        scalars.push_back(ScalarArg::of_int(nb::cast<std::int64_t>(h)));
        break;
      case ScalarType::Bool:
        scalars.push_back(ScalarArg::of_bool(nb::cast<bool>(h)));
        break;
    }
  }
  std::vector<DType> out_dtypes = op.output_dtypes(views);
  nb::list out;
  if (concrete) {
    // Every size known: the launch's own checks and shapes (data pointers aside).
    std::vector<Shape> result = op.output_shapes(views, scalars);
    for (std::size_t o = 0; o < p.num_results(); ++o) {
      nb::list dims;
      for (std::int64_t v : result[o]) dims.append(v);
      out.append(nb::make_tuple(nb::tuple(dims), std::string(dtype_name(out_dtypes[o]))));
    }
    return out;
  }
  op.check_arguments(views, scalars);
  t_max_dim = max_dim;
  t_min_dim = min_dim;
  TraceSizes sizes{p, shapes, dtypes, scalars};
  check_ranks(p, sizes, false);
  SizeEnv<PyDim, TraceSizes> env{p, sizes};
  for (const RequirementPlan& r : p.requirements) {
    if (r.reads_pointers) continue;  // the launch checks data pointers
    try {
      const Expr& c = r.condition;
      if (is_comparison(c.op())) {
        PyDim a = env.eval_requirement(c.lhs(), r.text), b = env.eval_requirement(c.rhs(), r.text);
        if (!ExprArith<PyDim>::truthy(ExprArith<PyDim>::apply(c.op(), a, b, c.node()))) {
          KERNELOP_FAIL(Launch) << "op " << p.op_name << ": " << broken_requirement_text(r, &a, &b);
        }
      } else if (!ExprArith<PyDim>::truthy(env.eval_requirement(c, r.text))) {
        KERNELOP_FAIL(Launch) << "op " << p.op_name << ": "
                              << broken_requirement_text<PyDim>(r, nullptr, nullptr);
      }
    } catch (const Inconclusive&) {
      // Undecided for symbolic sizes: the launch checks it with the call's sizes.
    }
  }
  for (std::size_t o = 0; o < p.num_results(); ++o) {
    std::vector<PyDim> dims;
    try {
      output_dims<PyDim>(p, p.outputs[o], sizes, dims);
    } catch (const Inconclusive& e) {
      KERNELOP_FAIL(Launch) << "op " << p.op_name << ": the shape of output '"
                            << p.tensors[static_cast<std::size_t>(p.outputs[o].slot)].name
                            << "' cannot be computed for symbolic sizes: " << e.what();
    }
    nb::list l;
    for (const PyDim& d : dims) l.append(d.v);
    out.append(nb::make_tuple(nb::tuple(l), std::string(dtype_name(out_dtypes[o]))));
  }
  return out;
}

nb::dict link_of(const BackwardLink& link) {
  nb::dict d;
  nb::list sources;
  for (const BackwardLink::Source& src : link.sources) {
    const char* kind = src.kind == BackwardLink::Source::Kind::ForwardInput    ? "input"
                       : src.kind == BackwardLink::Source::Kind::ForwardOutput ? "output"
                       : src.kind == BackwardLink::Source::Kind::Grad          ? "grad"
                                                                               : "result_grad";
    sources.append(nb::make_tuple(kind, src.index));
  }
  d["sources"] = sources;
  d["differentiable"] = link.differentiable;
  d["grad_of"] = link.grad_of;
  return d;
}

// Registers an op and its backward chain (Note [backward chain]); the op's signature with, when it
// has a backward, the backward's (recursively) and the link between them (what the backward reads,
// which gradients it returns).
nb::dict load_chain(CompiledImage image, std::vector<CompiledImage> backward) {
  std::vector<std::shared_ptr<const JaxOp>> ops;
  ops.push_back(kernelop::jax::register_op(std::move(image)));
  for (CompiledImage& b : backward) ops.push_back(kernelop::jax::register_op(std::move(b)));
  nb::dict info = info_of(*ops.back());
  for (std::size_t i = ops.size() - 1; i-- > 0;) {
    nb::dict outer = info_of(*ops[i]);
    outer["backward"] = info;
    outer["link"] = link_of(link_backward(ops[i]->op.plan(), ops[i + 1]->op.plan()));
    info = outer;
  }
  return info;
}

nb::object capsule(void* p) {
  return nb::capsule(p);
}

}  // namespace
}  // namespace kernelop::python

NB_MODULE(_kernelop_jax, m) {
  using namespace kernelop::python;
  register_error_translator();
  m.def(
      "load_package",
      [](const std::string& path) {
        Package pkg = load_package(path);
        return load_chain(std::move(pkg.image), std::move(pkg.backward));
      },
      nb::arg("path"),
      "Loads a .kop package (and its backward chain) into this process's FFI registry; returns the "
      "op's signature.");
  m.def(
      "load_spec",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs) {
        CompileOptions options = options_for(archs);
        CompiledImage image =
            compile(derive_plan(parse_op_json(spec_json, base_dir, "spec")), options);
        std::vector<CompiledImage> backward = compile_backward(image.plan, options);
        return load_chain(std::move(image), std::move(backward));
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"),
      "Compiles a spec and its backward chain (NVRTC) into this process's FFI registry; returns "
      "the "
      "op's signature.");
  m.def("trace", &trace, nb::arg("op"), nb::arg("shapes"), nb::arg("dtypes"), nb::arg("scalars"),
        nb::arg("max_dim"), nb::arg("min_dim"),
        "[(shape, dtype)] of the op's results for inputs of these shapes (ints or JAX symbolic "
        "dimensions) and dtypes, with the op's checks as far as the sizes tell.");
  m.def(
      "targets",
      [] {
        nb::dict d;
        for (bool allocates : {false, true}) {
          nb::dict stages;
          stages["instantiate"] = capsule(kernelop::jax::instantiate_handler());
          stages["execute"] = capsule(kernelop::jax::execute_handler(allocates));
          d[nb::str(kernelop::jax::target_name(allocates).c_str())] = stages;
        }
        return d;
      },
      "The FFI targets: name -> {'instantiate': capsule, 'execute': capsule}.");
  m.def(
      "state_type",
      [] {
        nb::dict reg;
        reg["type_id"] = capsule(kernelop::jax::state_type_id());
        reg["type_info"] = capsule(kernelop::jax::state_type_info());
        return nb::make_tuple(std::string(kernelop::jax::state_type_name()), reg);
      },
      "(name, {'type_id': capsule}) of the handlers' state, for jax.ffi.register_ffi_type.");
  m.attr("FFI_API_VERSION") = std::string(kernelop::jax::ffi_api_version());
}
