// The engine-neutral Python extension, kernelop._kernelop: specs, plans, compile, packages, the
// compile cache, expressions and raw launches on device pointers + streams. It links no engine:
// `import kernelop._kernelop` works without torch (the torch extension, torch_ext.cpp, and later
// JAX's, build on it). kernelop errors become ValueError / TypeError / RuntimeError (error_class).
#include <map>

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.hpp"
#include "kernelop/kernelop.hpp"

namespace nb = nanobind;
using namespace kernelop;
using python::Overrides;

namespace {

OpPlan plan_of(const std::string& spec_json, const std::string& base_dir,
               const ValidateOptions& options = {}) {
  return derive_plan(parse_op_json(spec_json, base_dir, "spec"), options);
}

void write_with_backward(const CompiledImage& image, const CompileOptions& options,
                         const std::string& path) {
  write_package(image, path, compile_backward(image.plan, options));
}

void bind_op(nb::module_& m) {
  nb::class_<KernelOp>(m, "Op",
                       "A compiled op on no engine: launches on device pointers and a stream.")
      .def_static(
          "compile",
          [](const std::string& spec_json, const std::string& base_dir,
             const std::vector<std::string>& archs) {
            return KernelOp(compile(plan_of(spec_json, base_dir), python::options_for(archs)));
          },
          nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"),
          nb::call_guard<nb::gil_scoped_release>())
      .def_static(
          "from_package", [](const std::string& path) { return KernelOp::from_package(path); },
          nb::arg("path"), nb::call_guard<nb::gil_scoped_release>())
      .def_static(
          "from_binaries",
          [](const std::string& spec_json, nb::handle binaries) {
            OpPlan plan = plan_of(spec_json, "");
            std::vector<KernelBinary> owned = python::binaries_of(binaries);
            nb::gil_scoped_release release;
            return KernelOp(image_with_launches(std::move(plan), std::move(owned)));
          },
          nb::arg("spec_json"), nb::arg("binaries"))
      .def_prop_ro("schema", [](const KernelOp& op) { return op.plan().qualified_schema(); })
      .def_prop_ro("op_name", [](const KernelOp& op) { return op.plan().op_name; })
      .def_prop_ro("parameters",
                   [](const KernelOp& op) {
                     std::vector<std::string> out;
                     for (const ArgSlot& a : op.plan().args)
                       out.push_back(op.plan().c_type(a) + " " + a.name);
                     return out;
                   })
      .def_prop_ro("tactics",
                   [](const KernelOp& op) {
                     std::vector<std::string> out;
                     out.reserve(static_cast<std::size_t>(op.num_tactics()));
                     for (int t = 0; t < op.num_tactics(); ++t) out.push_back(op.tactic_text(t));
                     return out;
                   })
      .def(
          "pin_tactic", [](const KernelOp& op, std::int64_t t) { op.pin_tactic(t); },
          nb::arg("tactic"))
      .def_prop_ro("pinned_tactic", &KernelOp::pinned_tactic)
      .def_prop_ro("last_tactic", &KernelOp::last_tactic)
      .def(
          "launch",
          [](const KernelOp& op, const std::vector<std::int64_t>& grid,
             const std::vector<std::int64_t>& block, const nb::list& args, std::int64_t shared_mem,
             std::uintptr_t stream, int device) {
            std::vector<RawArg> raw;
            for (std::size_t i = 0; i < nb::len(args); ++i)
              raw.push_back(python::raw_arg(args[i], i));
            LaunchDims dims{python::dims3(grid, "grid"), python::dims3(block, "block"), shared_mem};
            nb::gil_scoped_release release;
            op.launch_raw(dims, raw, reinterpret_cast<void*>(stream), device);
          },
          nb::arg("grid"), nb::arg("block"), nb::arg("args"), nb::arg("shared_mem"),
          nb::arg("stream"), nb::arg("device"),
          "Raw launch on `device` and `stream` (a CUstream as an int; see KernelOp::launch_raw).");
}

void bind_specs(nb::module_& m) {
  nb::class_<Overrides>(m, "Overrides")
      .def(nb::init<>())
      .def_rw("has_meta_fn", &Overrides::has_meta_fn)
      .def_rw("has_eager_fn", &Overrides::has_eager_fn)
      .def_rw("meta_outputs", &Overrides::meta_outputs)
      .def_rw("schema", &Overrides::schema)
      .def_rw("caller_key", &Overrides::caller_key);
  m.def(
      "check_spec",
      [](const std::string& spec_json, const std::string& base_dir, nb::handle overrides) {
        return plan_of(spec_json, base_dir, python::overrides_of(overrides).validate())
            .qualified_schema();
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("overrides"),
      "Validates a spec and returns its derived schema; registers nothing.");
  m.def(
      "build_package",
      [](const std::string& spec_json, const std::string& base_dir,
         const std::vector<std::string>& archs, const std::string& path) {
        CompileOptions options = python::options_for(archs);
        write_with_backward(compile(plan_of(spec_json, base_dir), options), options, path);
      },
      nb::arg("spec_json"), nb::arg("base_dir"), nb::arg("archs"), nb::arg("path"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "build_package_file",
      [](const std::string& path, const std::vector<std::string>& archs, const std::string& out) {
        CompileOptions options = python::options_for(archs);
        write_with_backward(compile(derive_plan(load_op_file(path)), options), options, out);
      },
      nb::arg("path"), nb::arg("archs"), nb::arg("out"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "build_package_binaries",
      [](const std::string& spec_json, nb::handle binaries, const std::string& path,
         nb::handle backward, const std::vector<std::string>& archs) {
        python::ImagesFromBinaries images =
            python::images_from_binaries(plan_of(spec_json, ""), binaries, backward, archs);
        nb::gil_scoped_release release;
        write_package(images.image, path, images.backward);
      },
      nb::arg("spec_json"), nb::arg("binaries"), nb::arg("path"), nb::arg("backward") = nb::list(),
      nb::arg("archs") = std::vector<std::string>{},
      "Writes the .kop package of a spec with its binaries (KernelBinary objects) and, for a spec "
      "with a backward, its chain's (one list per link; empty for a CUDA C++ link, compiled for "
      "archs).");
  m.def(
      "check_binaries",
      [](const std::string& spec_json, nb::handle binaries, nb::handle backward,
         const std::vector<std::string>& archs) {
        python::images_from_binaries(plan_of(spec_json, ""), binaries, backward, archs);
      },
      nb::arg("spec_json"), nb::arg("binaries"), nb::arg("backward") = nb::list(),
      nb::arg("archs") = std::vector<std::string>{},
      "Checks binaries (and the backward chain's) against a spec as registering them does; "
      "registers nothing.");
  m.attr("KERNEL_BINARY_FIELDS") = python::kernel_binary_fields();
}

void bind_values(nb::module_& m) {
  m.def(
      "shorten",
      [](const std::string& text, std::size_t max) { return detail::shorten(text, max); },
      nb::arg("text"), nb::arg("max") = 120,
      "A user string cut for a message (the one rule of kernelop's messages, error.hpp).");
  m.def(
      "dtype_names",
      [] {
        std::vector<std::string> out;
        out.reserve(kDTypeTable.size());
        for (const DTypeInfo& d : kDTypeTable) out.emplace_back(d.name);
        return out;
      },
      "kernelop's dtype names, in its DType order (the one table, dtype.hpp).");
  m.def(
      "package_images",
      [](const std::string& path) {
        Package pkg = load_package(path);
        nb::list out;
        for (const ArchImage& a : pkg.image.images) {
          std::vector<int> members = pkg.image.plan.instances_of(a.program);
          nb::dict d;
          d["arch"] = a.arch;
          d["program"] = a.program;
          d["entry"] = members.empty()
                           ? std::string()
                           : pkg.image.lowered_names[static_cast<std::size_t>(members.front())];
          d["data"] = nb::bytes(a.data.data(), a.data.size());
          out.append(d);
        }
        return out;
      },
      nb::arg("path"),
      "The machine code a .kop package holds, verified: per image a dict of its arch ('sm_90', "
      "'compute_80', 'tileir'), program (the tactics' compilation), entry (the kernel's symbol) "
      "and data (CUBIN bytes, PTX text or Tile IR bytecode), e.g. to launch it with another API "
      "or disassemble it.");
  m.def(
      "cubin_required_block",
      [](const nb::bytes& cubin, const std::string& entry) {
        return cubin_required_block(std::string_view(cubin.c_str(), cubin.size()), entry);
      },
      nb::arg("cubin"), nb::arg("entry"),
      "The block [x, y, z] the CUBIN's kernel `entry` must be launched with (its .reqntid), or "
      "None when it states none or holds no such kernel.");
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
  m.def("cuda_available", &cuda_available);
  m.attr("__version__") = std::string(version());
  // The torch this build's _kernelop_torch links (checked before it is imported: kernelop._ops).
  m.attr("built_with_torch") = KERNELOP_BUILT_WITH_TORCH;
}

}  // namespace

NB_MODULE(_kernelop, m) {
  // See Note [nanobind leak warnings] in torch_ext.cpp: objects of this module (an Op in a
  // module global) are correctly owned past its finalisation.
  nb::set_leak_warnings(false);
  m.doc() = "kernelop's engine-neutral core: spec -> plan -> compile -> package -> raw launch";
  python::register_error_translator();
  bind_specs(m);
  bind_values(m);
  bind_op(m);
}
