// The Python extension: registers kernel specs (JSON, produced by kernelop/_spec.py) and packages
// as torch.ops through the C++ adapter; kernelop errors become ValueError / TypeError /
// RuntimeError with the C++ message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

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

}  // namespace

NB_MODULE(_kernelop, m) {
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
  m.def(
      "register_spec",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs) {
        OpDecl decl = parse_op_json(spec_json, base_dir, "spec");
        return torch_ops::register_op(compile_op(decl, options_for(archs))).schema();
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"),
      "Validates, compiles (through the cache) and registers a spec; returns the schema.");
  m.def(
      "check_spec",
      [](const std::string& spec_json, const std::string& base_dir) {
        return derive_plan(parse_op_json(spec_json, base_dir, "spec")).qualified_schema();
      },
      nb::arg("spec_json"), nb::arg("base_dir"),
      "Validates a spec and returns its schema; registers nothing.");
  m.def(
      "build_package",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs, const std::string& path) {
        write_package(
            compile(derive_plan(parse_op_json(spec_json, base_dir, "spec")), options_for(archs)),
            path);
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"), nb::arg("path"));
  m.def(
      "load_package",
      [](const std::string& path) {
        return torch_ops::register_op(KernelOp::from_package(path)).schema();
      },
      nb::arg("path"),
      "Registers the op of a .kop package (no NVRTC, no source); returns the schema.");
  m.def(
      "register_ptx",
      [](const std::string& spec_json, const std::string& base_dir, const std::string& ptx,
         const std::string& entry) {
        OpPlan plan = derive_plan(parse_op_json(spec_json, base_dir, "spec"));
        return torch_ops::register_op(KernelOp(image_from_ptx(std::move(plan), ptx, entry)))
            .schema();
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("ptx"), nb::arg("entry"),
      "Registers a spec whose kernel is pre-compiled PTX (no NVRTC); returns the schema.");
  m.def("is_registered", &torch_ops::is_registered, nb::arg("op_name"));
}
