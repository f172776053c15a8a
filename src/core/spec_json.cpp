// JSON spec files <-> OpDecl, strict: unknown keys and wrong types are errors naming the field.
// This part: the entry points, typed values, the document's top level, the kernel's source and
// compile options; spec_json_read.cpp and spec_json_configs.cpp read the rest of a spec.
#include "kernelop/spec_json.hpp"

#include "core/file_io.hpp"
#include "core/json_util.hpp"
#include "core/spec_json_reader.hpp"
#include "core/words.hpp"

#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kernelop {
namespace detail {

detail::ErrorStream SpecReader::error(const std::string& path) const {
  detail::ErrorStream e(ErrorKind::Spec);
  std::string full =
      path.empty() ? prefix_.substr(0, prefix_.empty() ? 0 : prefix_.size() - 1) : prefix_ + path;
  e << origin_ << ": " << (full.empty() ? "" : full + ": ");
  return e;
}

void SpecReader::expect_keys(const Json& obj, const std::string& path,
                             std::initializer_list<std::string_view> allowed) const {
  expect_keys(obj, path, std::vector<std::string_view>(allowed));
}

void SpecReader::expect_keys(const Json& obj, const std::string& path,
                             const std::vector<std::string_view>& allowed) const {
  if (!obj.is_object())
    KERNELOP_RAISE(error(path)) << "expected an object, found " << type_name(obj);
  for (const auto& item : obj.items()) {
    bool known = false;
    for (auto a : allowed) known = known || a == item.key();
    if (!known) {
      KERNELOP_RAISE(error(join(path, item.key())))
          << "unknown field (known fields: " << detail::join(allowed) << ")";
    }
  }
}

std::string SpecReader::join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string SpecReader::index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string SpecReader::get_string(const Json& j, const std::string& path) const {
  if (!j.is_string()) KERNELOP_RAISE(error(path)) << "expected a string, found " << type_name(j);
  return j.get<std::string>();
}

std::int64_t SpecReader::get_int(const Json& j, const std::string& path) const {
  if (!j.is_number_integer())
    KERNELOP_RAISE(error(path)) << "expected an integer, found " << type_name(j);
  if (j.is_number_unsigned() && j.get<std::uint64_t>() > INT64_MAX)
    KERNELOP_RAISE(error(path)) << "out of range";
  return j.get<std::int64_t>();
}

double SpecReader::get_number(const Json& j, const std::string& path) const {
  if (!j.is_number()) KERNELOP_RAISE(error(path)) << "expected a number, found " << type_name(j);
  auto d = j.get<double>();
  bool exact =
      j.is_number_float() ||
      (j.is_number_unsigned()
           ? d < 18446744073709551616.0 && static_cast<std::uint64_t>(d) == j.get<std::uint64_t>()
           : d < 9223372036854775808.0 && static_cast<std::int64_t>(d) == j.get<std::int64_t>());
  if (!exact) {
    KERNELOP_RAISE(error(path)) << "expected a number a double holds exactly (an integer within "
                                   "+-2^53, or any other), found "
                                << j.dump() << ", which a double would round to " << std::fixed
                                << std::setprecision(0) << d;
  }
  return d;
}

bool SpecReader::get_bool(const Json& j, const std::string& path) const {
  if (!j.is_boolean())
    KERNELOP_RAISE(error(path)) << "expected true or false, found " << type_name(j);
  return j.get<bool>();
}

const SpecReader::Json& SpecReader::get_array(const Json& j, const std::string& path) const {
  if (!j.is_array()) KERNELOP_RAISE(error(path)) << "expected an array, found " << type_name(j);
  return j;
}

std::vector<std::string> SpecReader::get_strings(const Json& j, const std::string& path) const {
  std::vector<std::string> out;
  if (j.is_string()) return {j.get<std::string>()};
  const Json& arr = get_array(j, path);
  for (std::size_t i = 0; i < arr.size(); ++i) out.push_back(get_string(arr[i], index(path, i)));
  return out;
}

std::vector<std::int64_t> SpecReader::get_ints(const Json& j, const std::string& path) const {
  std::vector<std::int64_t> out;
  const Json& arr = get_array(j, path);
  for (std::size_t i = 0; i < arr.size(); ++i) out.push_back(get_int(arr[i], index(path, i)));
  return out;
}

Expr SpecReader::get_expr(const Json& j, const std::string& path) const {
  if (j.is_number_integer()) return Expr(get_int(j, path));
  if (!j.is_string()) {
    KERNELOP_RAISE(error(path)) << "expected an expression (string or integer), found "
                                << type_name(j);
  }
  try {
    return Expr::parse(j.get<std::string>());
  } catch (const Error& e) {
    KERNELOP_RAISE(error(path)) << e.message();
  }
}

std::vector<Expr> SpecReader::get_exprs(const Json& j, const std::string& path) const {
  std::vector<Expr> out;
  const Json& arr = get_array(j, path);
  for (std::size_t i = 0; i < arr.size(); ++i) out.push_back(get_expr(arr[i], index(path, i)));
  return out;
}

DType SpecReader::get_dtype(const Json& j, const std::string& path) const {
  std::string name = get_string(j, path);
  if (auto d = parse_dtype(name)) return *d;
  KERNELOP_RAISE(error(path)) << "'" << name << "' is not a dtype (dtypes: "
                              << detail::join(kAllDTypes, dtype_name) << ")";
}

DTypeDecl SpecReader::get_dtype_decl(const Json& j, const std::string& path) const {
  std::string name = get_string(j, path);
  if (auto d = parse_dtype(name)) return *d;
  return name;
}

InputRef SpecReader::get_input_ref(const Json& j, const std::string& path) const {
  if (j.is_number_integer()) return get_int(j, path);
  if (j.is_string()) return j.get<std::string>();
  KERNELOP_FAIL(Type) << origin_ << ": " << prefix_ + path
                      << ": expected a tensor input's name or its index among the tensor "
                         "inputs, found "
                      << type_name(j);
}

std::vector<Requirement> SpecReader::get_requirements(const Json& j,
                                                      const std::string& path) const {
  const Json& arr = get_array(j, path);
  std::vector<Requirement> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    std::string p = index(path, i);
    std::string text = get_string(arr[i], p);
    try {
      out.push_back(Requirement::parse(text));
    } catch (const Error& e) {
      KERNELOP_RAISE(error(p)) << e.message();
    }
  }
  return out;
}

OpDecl SpecReader::read(const Json& root, const std::string& base_dir) const {
  expect_keys(root, "", spec_keys({"op"}));
  OpDecl decl;
  decl.base_dir = base_dir;
  if (!root.contains("op")) KERNELOP_RAISE(error("op")) << "missing; expected \"namespace::name\"";
  decl.op_name = get_string(root["op"], "op");
  read_spec(root, base_dir, decl.spec);
  return decl;
}

std::vector<std::string_view> SpecReader::spec_keys(std::initializer_list<std::string_view> first) {
  std::vector<std::string_view> keys(first);
  for (std::string_view k :
       {"kernel_name", "kernel_source", "source_file", "inputs", "outputs", "extras", "params",
        "geometry", "include_paths", "compile_std", "arch_override", "defines", "fast_math",
        "line_info", "type_params", "requires", "tunables", "configs", "tuning_key"}) {
    keys.push_back(k);
  }
  for (const ForeignCompilerInfo& f : kForeignCompilers) keys.push_back(f.key);
  for (std::string_view k : {"backward", "then", "when"}) keys.push_back(k);
  return keys;
}

void SpecReader::read_spec(const Json& root, const std::string& base_dir, KernelSpec& s) const {
  read_source(root, base_dir, s);
  read_convention(root, s);
  read_compile_options(root, s);
  read_type_params(root, s);
  if (root.contains("requires")) s.requirements = get_requirements(root["requires"], "requires");
  read_tactics(root, s);
  read_foreign(root, s);
  if (root.contains("backward")) s.backward.push_back(read_backward(root["backward"], base_dir));
  if (root.contains("then")) {
    const Json& arr = get_array(root["then"], "then");
    for (std::size_t i = 0; i < arr.size(); ++i)
      s.then.push_back(read_launch(arr[i], index("then", i), base_dir));
  }
  if (root.contains("when")) {
    const Json& arr = get_array(root["when"], "when");
    for (std::size_t i = 0; i < arr.size(); ++i) {
      std::string p = index("when", i);
      expect_keys(arr[i], p, {"tensor", "==", "!="});
      HostTest t;
      t.tensor = get_string(arr[i].value("tensor", Json()), join(p, "tensor"));
      t.equal = arr[i].contains("==");
      if (t.equal == arr[i].contains("!=")) {
        KERNELOP_RAISE(error(p)) << "expected {\"tensor\": name, \"==\": number} or "
                                    "{\"tensor\": name, \"!=\": number}: exactly one test";
      }
      t.value = get_number(arr[i][t.equal ? "==" : "!="], join(p, t.equal ? "==" : "!="));
      s.when.push_back(std::move(t));
    }
  }
}

void SpecReader::read_source(const Json& root, const std::string& base_dir, KernelSpec& s) const {
  if (!root.contains("kernel_name")) KERNELOP_RAISE(error("kernel_name")) << "missing";
  s.kernel_name = get_string(root["kernel_name"], "kernel_name");
  bool inline_src = root.contains("kernel_source"), file_src = root.contains("source_file");
  if (inline_src == file_src) {
    KERNELOP_RAISE(error(""))
        << "expected exactly one of kernel_source (inline text) and source_file (a path)";
  }
  if (inline_src) {
    s.kernel_source = get_string(root["kernel_source"], "kernel_source");
  } else {
    s.source_file = get_string(root["source_file"], "source_file");
    std::filesystem::path p = std::filesystem::path(base_dir) / *s.source_file;
    std::string why;
    if (detail::try_read_file(p, detail::kMaxTextFileBytes, &s.kernel_source, &why) !=
        detail::ReadStatus::Ok) {
      KERNELOP_RAISE(error("source_file"))
          << "cannot read '" << detail::shorten(p.string(), 300) << "': " << why;
    }
  }
}

void SpecReader::read_compile_options(const Json& root, KernelSpec& s) const {
  if (root.contains("include_paths"))
    s.include_paths = get_strings(root["include_paths"], "include_paths");
  if (root.contains("compile_std")) s.compile_std = get_string(root["compile_std"], "compile_std");
  if (root.contains("arch_override"))
    s.arch_override = get_strings(root["arch_override"], "arch_override");
  if (root.contains("defines")) s.defines = get_strings(root["defines"], "defines");
  if (root.contains("fast_math")) s.fast_math = get_bool(root["fast_math"], "fast_math");
  if (root.contains("line_info")) s.line_info = get_bool(root["line_info"], "line_info");
}

void SpecReader::read_type_params(const Json& root, KernelSpec& s) const {
  if (!root.contains("type_params")) return;
  const Json& arr = get_array(root["type_params"], "type_params");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    std::string p = index("type_params", i);
    expect_keys(arr[i], p, {"name", "dtypes"});
    TypeParam tp;
    tp.name = get_string(arr[i].value("name", Json()), join(p, "name"));
    if (!arr[i].contains("dtypes")) KERNELOP_RAISE(error(join(p, "dtypes"))) << "missing";
    const Json& ds = get_array(arr[i]["dtypes"], join(p, "dtypes"));
    for (std::size_t k = 0; k < ds.size(); ++k)
      tp.dtypes.push_back(get_dtype(ds[k], index(join(p, "dtypes"), k)));
    s.type_params.push_back(std::move(tp));
  }
}

}  // namespace detail

OpDecl parse_op_json(std::string_view text, const std::string& base_dir, std::string_view origin) {
  using Json = detail::SpecReader::Json;
  std::string why;
  std::optional<Json> root = detail::parse_json_strict<Json>(text, &why);
  if (!root) {
    // A duplicate key is named as a field; anything else is "not valid JSON".
    if (why.rfind("field '", 0) == 0) KERNELOP_FAIL(Spec) << origin << ": " << why;
    KERNELOP_FAIL(Spec) << origin << ": not valid JSON: " << why;
  }
  OpDecl decl = detail::SpecReader(std::string(origin)).read(*root, base_dir);
  return decl;
}

OpDecl load_op_file(const std::filesystem::path& path) {
  std::string text = detail::read_file(path, "spec file");
  std::string base = path.parent_path().string();
  if (base.empty()) base = ".";
  return parse_op_json(text, base, path.string());
}

}  // namespace kernelop
