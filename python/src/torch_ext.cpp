// The PyTorch Python extension, kernelop._kernelop_torch: registers kernel specs (JSON, made by
// kernelop/_spec.py), binaries and packages as torch.ops through the C++ adapter, on top of the
// engine-neutral core extension (core_ext.cpp, which it does not import: values cross as Python
// objects). kernelop errors become ValueError / TypeError / RuntimeError (error_class).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.hpp"
#include "fast_entry.hpp"
#include "kernelop/kernelop.hpp"
#include "kernelop/torch.hpp"

namespace nb = nanobind;
using namespace kernelop;
using python::Overrides;

namespace {

torch_ops::RegisterOptions registration_of(const Overrides& o) {
  return {o.schema, !o.has_eager_fn, !o.has_meta_fn, o.caller_key};
}

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

// An op and its backward chain compiled from a plan (Note [backward chain]).
torch_ops::Registration register_compiled(const OpPlan& plan, const CompileOptions& options,
                                          const torch_ops::RegisterOptions& registration) {
  CompiledImage image = compile(plan, options);
  std::vector<KernelOp> chain;
  for (CompiledImage& b : compile_backward(image.plan, options)) chain.emplace_back(std::move(b));
  return torch_ops::register_with_backward(KernelOp(std::move(image)), std::move(chain),
                                           registration);
}

// Note [first-use growth]: a Python miss handler, called with the GIL held as
// handler(shapes, scalars, refusal) -> True (the registration grew) or a str (why not; None or
// False: nothing to say). Its exceptions are said as the note (the call's refusal is the error).
torch_ops::MissHandler python_miss_handler(nb::object handler) {
  std::shared_ptr<void> owned = python_owner(std::move(handler));
  return [owned](const torch_ops::Miss& miss) -> torch_ops::MissOutcome {
    if (!nb::is_alive()) return {};
    nb::gil_scoped_acquire gil;
    try {
      nb::list shapes, scalars;
      for (const Shape& s : miss.shapes) {
        nb::list dims;
        for (std::int64_t d : s) dims.append(d);
        shapes.append(nb::tuple(dims));
      }
      for (const ScalarArg& a : miss.scalars) {
        switch (a.kind) {
          case ScalarArg::Kind::Float:
            scalars.append(nb::float_(a.f));
            break;
          case ScalarArg::Kind::Int:
            scalars.append(nb::int_(a.i));
            break;
          case ScalarArg::Kind::Bool:
            scalars.append(nb::bool_(a.b));
            break;
        }
      }
      nb::object result = (*static_cast<nb::object*>(owned.get()))(shapes, scalars, miss.refusal);
      if (nb::isinstance<nb::bool_>(result)) return {nb::cast<bool>(result), {}};
      if (nb::isinstance<nb::str>(result)) return {false, nb::cast<std::string>(result)};
      return {};
    } catch (nb::python_error& e) {
      return {false, "the miss handler raised " + std::string(e.what())};
    }
  };
}

// set_removal_guard: an unregistration frees the op's schema and kernels holding the GIL, as
// PyTorch's Python entry reads them (Note [registration lifetime]). Not at interpreter exit.
void under_the_gil(void (*body)(void*), void* context) {
  // Not at exit either: a thread taking the GIL while the interpreter finalizes hangs or ends.
#if PY_VERSION_HEX >= 0x030D0000
  bool finalizing = Py_IsFinalizing();
#else
  bool finalizing = _Py_IsFinalizing();
#endif
  if (!nb::is_alive() || finalizing) return body(context);
  nb::gil_scoped_acquire gil;
  body(context);
}

}  // namespace

// Note [registration and the GIL]: registering and unregistering run without the GIL. Both may
// wait (Note [registration lifetime]): an unregistration for the calls in flight, a registration
// for an unregistration of the same name, and those calls may need the GIL to finish (a meta_fn,
// an eager_fn, the fast entry returning its results).
NB_MODULE(_kernelop_torch, m) {
  if (!python::init_fast_entry()) throw nb::python_error();
  torch_ops::set_removal_guard(&under_the_gil);
  // Note [nanobind leak warnings]: registrations live for the process (Note [torch
  // registration]), and a script may keep a kernelop.Kernel (which holds one) in a module global.
  // CPython's finalisation frees this extension's module before it clears __main__, so nanobind
  // would report such an object, still alive and correctly owned, as "leaked" at every exit. Its
  // leak report is off; reference counting in these bindings is tested by
  // tests/python/test_hostile.py instead.
  nb::set_leak_warnings(false);
  m.doc() = "kernelop's PyTorch adapter: specs, binaries and packages -> torch.ops";
  python::register_error_translator();
  m.def(
      "register_spec",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs, nb::handle overrides) {
        Overrides o = python::overrides_of(overrides);
        nb::gil_scoped_release release;
        OpPlan plan = derive_plan(parse_op_json(spec_json, base_dir, "spec"), o.validate());
        return register_compiled(plan, python::options_for(archs), registration_of(o));
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"), nb::arg("overrides"),
      "Validates, compiles (through the cache) and registers a spec; returns the Registration.");
  // Without the GIL: it waits for the op's calls in flight, which may need it (a meta_fn).
  m.def("unregister", &torch_ops::unregister_op, nb::arg("op_name"),
        nb::call_guard<nb::gil_scoped_release>(),
        "Removes an op kernelop registered (the override path's rollback); waits for its calls "
        "in flight.");
  m.def(
      "register_spec_file",
      [](const std::string& path, const std::vector<std::string>& archs) {
        return register_compiled(derive_plan(load_op_file(path)), python::options_for(archs), {})
            .schema();
      },
      nb::arg("path"), nb::arg("archs"), nb::call_guard<nb::gil_scoped_release>(),
      "Registers the op of a JSON spec file (read as kernelop reads every file: regular files "
      "only, size-capped); returns the schema.");
  m.def(
      "load_package",
      [](const std::string& path) {
        // The op with its backward chain, each from the package's own images.
        Package pkg = load_package(path);
        std::vector<KernelOp> chain;
        for (CompiledImage& b : pkg.backward) chain.emplace_back(std::move(b));
        return torch_ops::register_with_backward(KernelOp(std::move(pkg.image)), std::move(chain))
            .schema();
      },
      nb::arg("path"), nb::call_guard<nb::gil_scoped_release>(),
      "Registers the op of a .kop package (no NVRTC, no source); returns the schema.");
  m.def(
      "register_ptx",
      [](const std::string& spec_json, const std::string& base_dir, const std::string& ptx,
         const std::string& entry, nb::handle overrides) {
        Overrides o = python::overrides_of(overrides);
        nb::gil_scoped_release release;
        OpPlan plan = derive_plan(parse_op_json(spec_json, base_dir, "spec"), o.validate());
        return torch_ops::register_op(KernelOp(image_from_ptx(std::move(plan), ptx, entry)),
                                      registration_of(o));
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("ptx"), nb::arg("entry"),
      nb::arg("overrides"),
      "Registers a spec whose kernel is pre-compiled PTX (no NVRTC); returns the Registration.");
  m.def(
      "register_binaries",
      [](const std::string& spec_json, nb::handle binaries, nb::handle overrides,
         nb::handle backward, const std::vector<std::string>& archs) {
        Overrides o = python::overrides_of(overrides);
        OpPlan plan = derive_plan(parse_op_json(spec_json, "", "spec"), o.validate());
        python::ImagesFromBinaries images =
            python::images_from_binaries(std::move(plan), binaries, backward, archs);
        nb::gil_scoped_release release;
        std::vector<KernelOp> chain;
        for (CompiledImage& b : images.backward) chain.emplace_back(std::move(b));
        return torch_ops::register_with_backward(KernelOp(std::move(images.image)),
                                                 std::move(chain), registration_of(o));
      },
      nb::arg("spec_json"), nb::arg("binaries"), nb::arg("overrides"),
      nb::arg("backward") = nb::list(), nb::arg("archs") = std::vector<std::string>{},
      "Registers a spec whose kernel another compiler built (Triton, CuTe DSL): binaries are "
      "KernelBinary objects (kernelop._kernelop.KERNEL_BINARY_FIELDS); `backward` the chain's, one "
      "list per link (Note [backward chain]; empty for a CUDA C++ link, compiled for archs); "
      "returns the Registration.");
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
      .def(
          "on_miss",
          [](const torch_ops::Registration& r, nb::object handler) {
            if (PyCallable_Check(handler.ptr()) == 0) {
              throw nb::type_error("on_miss: the handler must be callable");
            }
            r.on_miss(python_miss_handler(std::move(handler)));
          },
          nb::arg("handler"),
          "Note [first-use growth]: handler(shapes, scalars, refusal) -> True when it grew the "
          "registration for a call that broke a requirement, else a str saying why not, or None.")
      .def(
          "grow",
          [](const torch_ops::Registration& r, const std::string& spec_json, nb::handle binaries,
             nb::handle backward, const std::vector<std::string>& archs) {
            OpPlan plan = derive_plan(parse_op_json(spec_json, "", "spec"), {});
            python::ImagesFromBinaries images =
                python::images_from_binaries(std::move(plan), binaries, backward, archs);
            nb::gil_scoped_release release;
            r.grow(KernelOp(std::move(images.image)));
          },
          nb::arg("spec_json"), nb::arg("binaries"), nb::arg("backward") = nb::list(),
          nb::arg("archs") = std::vector<std::string>{},
          "Note [first-use growth]: the registration's op from now on, made from a spec and its "
          "binaries as register_binaries makes it: the same op with more tactics.")
      .def_prop_ro("generations", &torch_ops::Registration::generations)
      .def_prop_ro("has_miss_handler", &torch_ops::Registration::has_miss_handler)
      .def_prop_ro("current", &torch_ops::Registration::current,
                   "False once the op was unregistered (it may since have been registered again).")
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
            for (std::size_t i = 0; i < nb::len(args); ++i)
              raw.push_back(python::raw_arg(args[i], i));
            LaunchDims dims{python::dims3(grid, "grid"), python::dims3(block, "block"), shared_mem};
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
                     out.reserve(static_cast<std::size_t>(r.op().num_tactics()));
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
