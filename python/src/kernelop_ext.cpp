// The Python extension: registers kernel specs (JSON, produced by kernelop/_spec.py) and packages
// as torch.ops through the C++ adapter; kernelop errors become ValueError / TypeError /
// RuntimeError with the C++ message.
#include <map>

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "fast_entry.hpp"
#include "kernelop/kernelop.hpp"
#include "kernelop/torch.hpp"

namespace nb = nanobind;
using namespace kernelop;

namespace {

CompileOptions options_for(const std::vector<std::string>& archs) {
  CompileOptions o;
  o.archs = archs;
  return o;
}

// The override path: which parts the caller's Python functions supply (see _ops.py).
struct Overrides {
  bool has_meta_fn = false;
  bool has_eager_fn = false;
  int meta_outputs = 0;
  std::string schema;
  std::string caller_key;
  ValidateOptions validate() const { return {has_meta_fn, has_eager_fn, meta_outputs}; }
  torch_ops::RegisterOptions registration() const {
    return {schema, !has_eager_fn, !has_meta_fn, caller_key};
  }
};

// A Python object owned from C++ (Registration::keep_alive): released with the GIL held, or
// leaked when the interpreter is already gone (the registry outlives it at process exit).
std::shared_ptr<void> python_owner(nb::object object) {
  auto* held = new nb::object(std::move(object));
  return std::shared_ptr<void>(held, [](void* p) {
    auto* o = static_cast<nb::object*>(p);
    if (!nb::is_alive()) return;  // interpreter finalized: nothing left to release into
    nb::gil_scoped_acquire gil;
    delete o;
  });
}

// One argument of Kernel.launch: a tensor descriptor tuple built by _ops.py (data_ptr, dtype
// name, shape, strides, device) or a Python bool / int / float.
RawArg raw_arg(nb::handle h, std::size_t i) {
  if (nb::isinstance<nb::bool_>(h)) return RawArg::of_scalar(ScalarArg::of_bool(nb::cast<bool>(h)));
  if (nb::isinstance<nb::int_>(h)) {
    return RawArg::of_scalar(ScalarArg::of_int(nb::cast<std::int64_t>(h)));
  }
  if (nb::isinstance<nb::float_>(h)) {
    return RawArg::of_scalar(ScalarArg::of_float(nb::cast<double>(h)));
  }
  if (nb::isinstance<nb::tuple>(h) && nb::len(h) == 5) {
    auto t = nb::borrow<nb::tuple>(h);
    TensorView v;
    v.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(t[0]));
    auto dtype = parse_dtype(nb::cast<std::string>(t[1]));
    if (!dtype) {
      KERNELOP_FAIL(Type) << "argument " << i << " has dtype " << nb::cast<std::string>(t[1])
                          << ", which kernelop does not support";
    }
    v.dtype = *dtype;
    auto shape = nb::cast<std::vector<std::int64_t>>(t[2]);
    auto strides = nb::cast<std::vector<std::int64_t>>(t[3]);
    v.shape = Shape(std::span<const std::int64_t>(shape));
    v.strides = Shape(std::span<const std::int64_t>(strides));
    v.device = nb::cast<int>(t[4]);
    return RawArg::of_tensor(v);
  }
  KERNELOP_FAIL(Type) << "argument " << i << " is a " << nb::type_name(h.type()).c_str()
                      << "; expected a CUDA tensor, int, float or bool";
}

// Binaries from kernelop/_triton.py: (program, arch, data, ptx, entry, launch_shared,
// scratch_bytes, scratch_align, scratch_param) tuples.
using BinaryTuple =
    std::tuple<int, std::string, nb::bytes, std::string, std::string, int, int, int, int>;
std::vector<KernelBinary> binaries_of(const std::vector<BinaryTuple>& tuples) {
  std::vector<KernelBinary> out;
  for (const auto& [program, arch, data, ptx, entry, shared, bytes, align, param] : tuples) {
    out.push_back(KernelBinary{program, arch, std::string(data.c_str(), data.size()), ptx, entry,
                               shared, bytes, align, param});
  }
  return out;
}

std::array<std::int64_t, 3> dims3(const std::vector<std::int64_t>& d, const char* what) {
  if (d.empty() || d.size() > 3) {
    KERNELOP_FAIL(Type) << what << " has " << d.size() << " dims; expected 1 to 3";
  }
  std::array<std::int64_t, 3> out = {1, 1, 1};
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = d[i];
  return out;
}

}  // namespace

// Note [registration and the GIL]: registering and unregistering run without the GIL. Both may
// wait (Note [registration lifetime]): an unregistration for the calls in flight, a registration
// for an unregistration of the same name, and those calls may need the GIL to finish (a meta_fn,
// an eager_fn, the fast entry returning its results).
NB_MODULE(_kernelop, m) {
  if (!python::init_fast_entry()) throw nb::python_error();
  // Registrations live for the process (Note [torch registration]), and a script may keep a
  // kernelop.Kernel (which holds one) in a module global. CPython's finalisation frees this
  // extension's module before it clears __main__, so nanobind would report such an object, still
  // alive and correctly owned, as "leaked" at every exit. Its leak report is off; reference
  // counting in these bindings is tested by tests/python/test_hostile.py instead.
  nb::set_leak_warnings(false);
  m.doc() = "kernelop's C++ core: spec -> NVRTC -> torch.ops registration";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = e.kind() == ErrorKind::Spec   ? PyExc_ValueError
                       : e.kind() == ErrorKind::Type ? PyExc_TypeError
                                                     : PyExc_RuntimeError;
      PyErr_SetString(type, e.what());
    }
  });
  nb::class_<Overrides>(m, "Overrides")
      .def(nb::init<>())
      .def_rw("has_meta_fn", &Overrides::has_meta_fn)
      .def_rw("has_eager_fn", &Overrides::has_eager_fn)
      .def_rw("meta_outputs", &Overrides::meta_outputs)
      .def_rw("schema", &Overrides::schema)
      .def_rw("caller_key", &Overrides::caller_key);
  m.def(
      "register_spec",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs, const Overrides& o) {
        OpPlan plan = derive_plan(parse_op_json(spec_json, base_dir, "spec"), o.validate());
        CompileOptions options = options_for(archs);
        return torch_ops::register_with_backward(
            KernelOp(compile(plan, options)), o.registration(),
            [&](OpPlan backward) { return KernelOp(compile(backward, options)); });
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"), nb::arg("overrides"),
      nb::call_guard<nb::gil_scoped_release>(),
      "Validates, compiles (through the cache) and registers a spec; returns the Registration.");
  m.def(
      "check_spec",
      [](const std::string& spec_json, const std::string& base_dir, const Overrides& o) {
        return derive_plan(parse_op_json(spec_json, base_dir, "spec"), o.validate())
            .qualified_schema();
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("overrides"),
      "Validates a spec and returns its derived schema; registers nothing.");
  m.def(
      "shorten",
      [](const std::string& text, std::size_t max) { return detail::shorten(text, max); },
      nb::arg("text"), nb::arg("max") = 120,
      "A user string cut for a message (the one rule of kernelop's messages, error.hpp).");
  // Without the GIL: it waits for the op's calls in flight, which may need it (a meta_fn).
  m.def("unregister", &torch_ops::unregister_op, nb::arg("op_name"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Removes an op kernelop registered (the override path's rollback); waits for its calls "
        "in flight.");
  m.def(
      "build_package",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs, const std::string& path) {
        OpPlan plan = derive_plan(parse_op_json(spec_json, base_dir, "spec"));
        CompileOptions options = options_for(archs);
        CompiledImage image = compile(plan, options);
        write_package(image, path, compile_backward(image.plan, options));
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"), nb::arg("path"));
  m.def(
      "register_spec_file",
      [](const std::string& path, const std::vector<std::string>& archs) {
        OpPlan plan = derive_plan(load_op_file(path));
        CompileOptions options = options_for(archs);
        return torch_ops::register_with_backward(
                   KernelOp(compile(plan, options)), {},
                   [&](OpPlan backward) { return KernelOp(compile(backward, options)); })
            .schema();
      },
      nb::arg("path"), nb::arg("archs"), nb::call_guard<nb::gil_scoped_release>(),
      "Registers the op of a JSON spec file (read as kernelop reads every file: regular files "
      "only, size-capped); returns the schema.");
  m.def(
      "build_package_file",
      [](const std::string& path, const std::vector<std::string>& archs, const std::string& out) {
        CompileOptions options = options_for(archs);
        CompiledImage image = compile(derive_plan(load_op_file(path)), options);
        write_package(image, out, compile_backward(image.plan, options));
      },
      nb::arg("path"), nb::arg("archs"), nb::arg("out"));
  m.def(
      "load_package",
      [](const std::string& path) {
        // The op with its backward chain, each from the package's own images.
        Package pkg = load_package(path);
        std::vector<CompiledImage> chain = std::move(pkg.backward);
        return torch_ops::register_with_backward(
                   KernelOp(std::move(pkg.image)), {},
                   [&](const OpPlan& backward) {
                     for (CompiledImage& image : chain) {
                       if (image.plan.op_name == backward.op_name) return KernelOp(image);
                     }
                     KERNELOP_FAIL(Internal) << "(the package holds no " << backward.op_name << ")";
                   })
            .schema();
      },
      nb::arg("path"), nb::call_guard<nb::gil_scoped_release>(),
      "Registers the op of a .kop package (no NVRTC, no source); returns the schema.");
  m.def(
      "register_ptx",
      [](const std::string& spec_json, const std::string& base_dir, const std::string& ptx,
         const std::string& entry, const Overrides& o) {
        OpPlan plan = derive_plan(parse_op_json(spec_json, base_dir, "spec"), o.validate());
        return torch_ops::register_op(KernelOp(image_from_ptx(std::move(plan), ptx, entry)),
                                      o.registration());
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("ptx"), nb::arg("entry"),
      nb::arg("overrides"), nb::call_guard<nb::gil_scoped_release>(),
      "Registers a spec whose kernel is pre-compiled PTX (no NVRTC); returns the Registration.");
  m.def(
      "register_binaries",
      [](const std::string& spec_json, const std::vector<BinaryTuple>& binaries,
         const Overrides& o) {
        OpPlan plan = derive_plan(parse_op_json(spec_json, "", "spec"), o.validate());
        std::vector<KernelBinary> owned = binaries_of(binaries);  // read with the GIL held
        nb::gil_scoped_release release;
        return torch_ops::register_op(KernelOp(image_from_binaries(std::move(plan), owned)),
                                      o.registration());
      },
      nb::arg("spec_json"), nb::arg("binaries"), nb::arg("overrides"),
      "Registers a spec whose kernel another compiler built (Triton): binaries are (program, "
      "arch, data, ptx, entry, launch_shared, scratch_bytes, scratch_align, scratch_param) "
      "tuples; returns the Registration.");
  m.def(
      "build_package_binaries",
      [](const std::string& spec_json, const std::vector<BinaryTuple>& binaries,
         const std::string& path) {
        write_package(image_from_binaries(derive_plan(parse_op_json(spec_json, "", "spec")),
                                          binaries_of(binaries)),
                      path);
      },
      nb::arg("spec_json"), nb::arg("binaries"), nb::arg("path"),
      "Writes the .kop package of a spec with its binaries (see register_binaries).");
  m.def(
      "check_binaries",
      [](const std::string& spec_json, const std::vector<BinaryTuple>& binaries) {
        image_from_binaries(derive_plan(parse_op_json(spec_json, "", "spec")),
                            binaries_of(binaries));
      },
      nb::arg("spec_json"), nb::arg("binaries"),
      "Checks binaries against a spec as register_binaries does; registers nothing.");
  m.def(
      "cache_load",
      [](const std::string& identity) -> std::optional<nb::bytes> {
        auto payload = CompileCache::global().load(CompileCache::key_of(identity));
        if (!payload) return std::nullopt;
        return nb::bytes(payload->data(), payload->size());
      },
      nb::arg("identity"),
      "The compile cache's entry for `identity` (the text of everything it depends on), or "
      "None; a damaged entry is reported and dropped, never returned.");
  m.def(
      "cache_store",
      [](const std::string& identity, const nb::bytes& payload) {
        CompileCache::global().store(CompileCache::key_of(identity),
                                     std::string(payload.c_str(), payload.size()));
      },
      nb::arg("identity"), nb::arg("payload"));
  m.def(
      "canonical_expr", [](const std::string& text) { return Expr::parse(text).to_string(); },
      nb::arg("text"), "The canonical text of an expression (Note [expression text]).");
  m.def(
      "eval_expr",
      [](const std::string& text, const std::map<std::string, std::int64_t>& leaves) {
        // kernelop's one evaluator (64-bit, checked), each leaf's value given by its text.
        Expr e = Expr::parse(text);
        std::map<const ExprNode*, std::int64_t> values;
        e.for_each_leaf([&](const Expr& leaf) {
          auto it = leaves.find(leaf.to_string());
          if (it == leaves.end()) {
            KERNELOP_FAIL(Spec) << "eval_expr: no value for '" << leaf.to_string() << "'";
          }
          values[&leaf.node()] = it->second;
        });
        struct Env {
          const std::map<const ExprNode*, std::int64_t>& values;
          std::int64_t leaf(const ExprNode& n) const { return values.at(&n); }
        };
        return evaluate<std::int64_t>(e.node(), Env{values});
      },
      nb::arg("text"), nb::arg("leaves"),
      "Evaluates an expression with the given value of each leaf (by its text), as a launch does.");
  m.def("is_registered", &torch_ops::is_registered, nb::arg("op_name"));
  m.def(
      "fast_entry",
      [](const std::string& op_name, nb::handle fallback) {
        PyObject* entry = python::make_fast_entry(op_name, fallback.ptr());
        if (entry == nullptr) throw nb::python_error();
        return nb::steal(entry);
      },
      nb::arg("op_name"), nb::arg("fallback"),
      "The fast Python entry of a registered op (Note [fast Python entry]), passing what it does "
      "not take to `fallback`; None when the op's schema has types it does not convert.");
  m.def(
      "is_fast_entry", [](nb::handle o) { return python::is_fast_entry(o.ptr()); }, nb::arg("obj"));
  m.def("registration_id", &torch_ops::registration_id, nb::arg("op_name"),
        "The identity of the op's current registration through kernelop; 0 when there is none.");
  nb::class_<torch_ops::Registration>(m, "Registration")
      .def_prop_ro("schema", &torch_ops::Registration::schema)
      .def_prop_ro("created", &torch_ops::Registration::created)
      .def(
          "keep_alive",
          [](const torch_ops::Registration& r, nb::object owner) {
            r.keep_alive(python_owner(std::move(owner)));
          },
          nb::arg("owner"),
          "Ties a Python object (the caller's torch.library.Library) to the registration.")
      .def_prop_ro("parameters",
                   [](const torch_ops::Registration& r) {
                     std::vector<std::string> out;
                     for (const ArgSlot& a : r.plan().args)
                       out.push_back(r.plan().c_type(a) + " " + a.name);
                     return out;
                   })
      .def(
          "launch",
          [](const torch_ops::Registration& r, const std::vector<std::int64_t>& grid,
             const std::vector<std::int64_t>& block, const nb::list& args, std::int64_t shared_mem,
             std::optional<std::uintptr_t> stream, int device) {
            std::vector<RawArg> raw;
            for (std::size_t i = 0; i < nb::len(args); ++i) raw.push_back(raw_arg(args[i], i));
            LaunchDims dims{dims3(grid, "grid"), dims3(block, "block"), shared_mem};
            void* s = stream ? reinterpret_cast<void*>(*stream) : torch_ops::current_stream(device);
            nb::gil_scoped_release release;
            r.op().launch_raw(dims, raw, s, device);
          },
          nb::arg("grid"), nb::arg("block"), nb::arg("args"), nb::arg("shared_mem"),
          nb::arg("stream").none(), nb::arg("device"),
          "Raw launch on `device` (see KernelOp::launch_raw); stream None: PyTorch's current one.")
      .def_prop_ro("declarative",
                   [](const torch_ops::Registration& r) { return r.plan().is_declarative(); })
      .def_prop_ro("tactics",
                   [](const torch_ops::Registration& r) {
                     std::vector<std::string> out;
                     for (int t = 0; t < r.op().num_tactics(); ++t)
                       out.push_back(r.op().tactic_text(t));
                     return out;
                   })
      .def(
          "pin_tactic",
          [](const torch_ops::Registration& r, std::int64_t t) { r.op().pin_tactic(t); },
          nb::arg("tactic"))
      .def_prop_ro("pinned_tactic",
                   [](const torch_ops::Registration& r) { return r.op().pinned_tactic(); })
      .def_prop_ro("last_tactic",
                   [](const torch_ops::Registration& r) { return r.op().last_tactic(); })
      .def("tuning_stats",
           [](const torch_ops::Registration& r) {
             TuningStats s = r.op().tuning_stats();
             nb::dict d;
             d["timed_runs"] = s.timed_runs;
             d["tunings"] = s.tunings;
             d["table_hits"] = s.table_hits;
             d["defaults"] = s.defaults;
             d["pinned"] = s.pinned;
             d["single"] = s.single;
             return d;
           })
      .def("tuning_tables_json",
           [](const torch_ops::Registration& r) {
             return tuning_tables_json(r.op().tuning_tables());
           })
      .def(
          "add_tuning_tables_json",
          [](const torch_ops::Registration& r, const std::string& text) {
            for (const TuningTable& t : parse_tuning_tables(text, "tuning table"))
              r.op().add_tuning_table(t);
          },
          nb::arg("text"));
  m.def("find_registration", &torch_ops::find_registration, nb::arg("op_name"));
}
