// JSON spec files <-> OpDecl, strict: unknown keys and wrong types are errors naming the field.
#include "kernelop/spec_json.hpp"

#include "core/file_io.hpp"
#include "core/json_util.hpp"
#include "core/validator.hpp"
#include "core/words.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace kernelop {
namespace {

using Json = nlohmann::ordered_json;

// Reads an OpDecl out of a parsed document, naming the field path of every error.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  // "ORIGIN: PATH: ..." (Note [raising errors]).
  detail::ErrorStream error(const std::string& path) const {
    detail::ErrorStream e(ErrorKind::Spec);
    std::string full =
        path.empty() ? prefix_.substr(0, prefix_.empty() ? 0 : prefix_.size() - 1) : prefix_ + path;
    e << origin_ << ": " << (full.empty() ? "" : full + ": ");
    return e;
  }

  static std::string type_name(const Json& j) { return j.type_name(); }

  void expect_keys(const Json& obj, const std::string& path,
                   std::initializer_list<std::string_view> allowed) const {
    expect_keys(obj, path, std::vector<std::string_view>(allowed));
  }
  void expect_keys(const Json& obj, const std::string& path,
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

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  std::string get_string(const Json& j, const std::string& path) const {
    if (!j.is_string()) KERNELOP_RAISE(error(path)) << "expected a string, found " << type_name(j);
    return j.get<std::string>();
  }
  std::int64_t get_int(const Json& j, const std::string& path) const {
    if (!j.is_number_integer())
      KERNELOP_RAISE(error(path)) << "expected an integer, found " << type_name(j);
    if (j.is_number_unsigned() && j.get<std::uint64_t>() > INT64_MAX)
      KERNELOP_RAISE(error(path)) << "out of range";
    return j.get<std::int64_t>();
  }
  bool get_bool(const Json& j, const std::string& path) const {
    if (!j.is_boolean())
      KERNELOP_RAISE(error(path)) << "expected true or false, found " << type_name(j);
    return j.get<bool>();
  }
  const Json& get_array(const Json& j, const std::string& path) const {
    if (!j.is_array()) KERNELOP_RAISE(error(path)) << "expected an array, found " << type_name(j);
    return j;
  }
  std::vector<std::string> get_strings(const Json& j, const std::string& path) const {
    std::vector<std::string> out;
    if (j.is_string()) return {j.get<std::string>()};
    const Json& arr = get_array(j, path);
    for (std::size_t i = 0; i < arr.size(); ++i) out.push_back(get_string(arr[i], index(path, i)));
    return out;
  }
  std::vector<std::int64_t> get_ints(const Json& j, const std::string& path) const {
    std::vector<std::int64_t> out;
    const Json& arr = get_array(j, path);
    for (std::size_t i = 0; i < arr.size(); ++i) out.push_back(get_int(arr[i], index(path, i)));
    return out;
  }
  Expr get_expr(const Json& j, const std::string& path) const {
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
  std::vector<Expr> get_exprs(const Json& j, const std::string& path) const {
    std::vector<Expr> out;
    const Json& arr = get_array(j, path);
    for (std::size_t i = 0; i < arr.size(); ++i) out.push_back(get_expr(arr[i], index(path, i)));
    return out;
  }
  DType get_dtype(const Json& j, const std::string& path) const {
    std::string name = get_string(j, path);
    if (auto d = parse_dtype(name)) return *d;
    KERNELOP_RAISE(error(path)) << "'" << name << "' is not a dtype (dtypes: "
                                << detail::join(kAllDTypes, dtype_name) << ")";
  }
  // A dtype name, or else the name of a type parameter (checked later by validate()).
  DTypeDecl get_dtype_decl(const Json& j, const std::string& path) const {
    std::string name = get_string(j, path);
    if (auto d = parse_dtype(name)) return *d;
    return name;
  }
  InputRef get_input_ref(const Json& j, const std::string& path) const {
    if (j.is_number_integer()) return get_int(j, path);
    if (j.is_string()) return j.get<std::string>();
    KERNELOP_FAIL(Type) << origin_ << ": " << prefix_ + path
                        << ": expected a tensor input's name or its index among the tensor "
                           "inputs, found "
                        << type_name(j);
  }

  // A scalar's default: true/false, an integer or a number (checked against its type later).
  ScalarDefault read_default(const Json& j, const std::string& path) const {
    if (j.is_boolean()) return j.get<bool>();
    if (j.is_number_integer()) return get_int(j, path);
    if (j.is_number_float()) return j.get<double>();
    KERNELOP_RAISE(error(path)) << "expected true, false or a number, found " << type_name(j);
  }

  Input read_input(const Json& j, const std::string& path) const {
    if (j.is_object() && j.contains("scalar")) {
      expect_keys(j, path, {"name", "scalar", "symint", "default"});
      ScalarInput s;
      s.name = get_string(j.value("name", Json()), join(path, "name"));
      std::string type = get_string(j["scalar"], join(path, "scalar"));
      auto t = parse_scalar_type(type);
      if (!t) {
        KERNELOP_RAISE(error(join(path, "scalar")))
            << "'" << type
            << "' is not a scalar type; expected float, int or bool (or the 64-bit "
               "float64, int64)";
      }
      s.type = *t;
      if (j.contains("symint")) s.symint = get_bool(j["symint"], join(path, "symint"));
      if (j.contains("default"))
        s.default_value = read_default(j["default"], join(path, "default"));
      return s;
    }
    expect_keys(j, path, {"name", "dtype", "mutated", "strided", "scalar"});
    InputDecl t;
    t.name = get_string(j.value("name", Json()), join(path, "name"));
    if (j.contains("dtype")) t.dtype = get_dtype_decl(j["dtype"], join(path, "dtype"));
    if (j.contains("mutated")) t.mutated = get_bool(j["mutated"], join(path, "mutated"));
    if (j.contains("strided")) t.strided = get_bool(j["strided"], join(path, "strided"));
    return t;
  }

  ShapeRel read_shape(const Json& j, const std::string& path) const {
    if (j.is_array()) return ShapeExprs{get_exprs(j, path)};
    if (j.is_object() && j.contains("same_as")) {
      expect_keys(j, path, {"same_as", "dims"});
      SameAs same{get_input_ref(j["same_as"], join(path, "same_as")), {}};
      if (j.contains("dims")) {
        // {"-1": "dim(x, -1) // 2"}: axis -> size expression
        std::string p = join(path, "dims");
        if (!j["dims"].is_object()) {
          KERNELOP_RAISE(error(p)) << "expected an object of axis: expression, e.g. {\"-1\": "
                                      "\"dim(x, -1) // 2\"}, found "
                                   << type_name(j["dims"]);
        }
        for (const auto& item : j["dims"].items()) {
          std::string key_path = join(p, item.key());
          std::int64_t axis = 0;
          try {
            std::size_t used = 0;
            axis = std::stoll(item.key(), &used);
            if (used != item.key().size()) throw std::invalid_argument("trailing");
          } catch (const std::logic_error&) {
            KERNELOP_RAISE(error(key_path)) << "'" << detail::shorten(item.key())
                                            << "' is not an axis; expected an integer like \"-1\"";
          }
          same.edits.push_back(AxisEdit{axis, get_expr(item.value(), key_path)});
        }
      }
      return same;
    }
    if (j.is_object() && j.contains("reduce_dims")) {
      expect_keys(j, path, {"reduce_dims"});
      std::string p = join(path, "reduce_dims");
      const Json& r = j["reduce_dims"];
      expect_keys(r, p, {"input", "dims", "keepdim"});
      ReduceDims rd;
      rd.input = r.contains("input") ? get_input_ref(r["input"], join(p, "input"))
                                     : InputRef{std::int64_t{0}};
      if (!r.contains("dims"))
        KERNELOP_RAISE(error(join(p, "dims"))) << "missing; expected the axes to reduce";
      rd.dims = get_ints(r["dims"], join(p, "dims"));
      if (r.contains("keepdim")) rd.keepdim = get_bool(r["keepdim"], join(p, "keepdim"));
      return rd;
    }
    KERNELOP_RAISE(error(path))
        << "expected {\"same_as\": ...}, {\"reduce_dims\": {...}} or a list of expressions, "
           "found "
        << j.dump();
  }

  OutputDecl read_output(const Json& j, const std::string& path) const {
    expect_keys(j, path, {"name", "shape", "dtype_from", "dtype"});
    OutputDecl o;
    o.name = get_string(j.value("name", Json()), join(path, "name"));
    if (!j.contains("shape")) KERNELOP_RAISE(error(join(path, "shape"))) << "missing";
    o.shape = read_shape(j["shape"], join(path, "shape"));
    if (j.contains("dtype_from"))
      o.dtype_from = get_string(j["dtype_from"], join(path, "dtype_from"));
    if (j.contains("dtype")) o.dtype = get_dtype_decl(j["dtype"], join(path, "dtype"));
    return o;
  }

  // A parameter or struct field: an input or output name, or an extra.
  ParamField read_param_field(const Json& j, const std::string& path) const {
    if (j.is_string()) return ParamName{j.get<std::string>()};
    if (j.is_object()) return read_extra(j, path);
    KERNELOP_RAISE(error(path)) << "expected an input or output name, an extra such as "
                                   "{\"expr\": ...} or a {\"struct\": [...]}, found "
                                << type_name(j);
  }

  Extra read_extra(const Json& j, const std::string& path) const {
    bool int64 = false;
    if (j.is_object() && j.contains("int64")) int64 = get_bool(j["int64"], join(path, "int64"));
    if (j.is_object() && j.contains("numel")) {
      expect_keys(j, path, {"numel", "int64"});
      return Numel{get_string(j["numel"], join(path, "numel")), int64};
    }
    if (j.is_object() && j.contains("dim_size")) {
      expect_keys(j, path, {"dim_size", "axis", "int64"});
      if (!j.contains("axis")) KERNELOP_RAISE(error(join(path, "axis"))) << "missing";
      return DimSize{get_string(j["dim_size"], join(path, "dim_size")),
                     get_int(j["axis"], join(path, "axis")), int64};
    }
    if (j.is_object() && j.contains("expr")) {
      expect_keys(j, path, {"expr", "int64"});
      return ExtraExpr{get_expr(j["expr"], join(path, "expr")), int64};
    }
    KERNELOP_RAISE(error(path)) << "expected {\"numel\": ...}, {\"dim_size\": ..., \"axis\": ...} "
                                   "or {\"expr\": ...}, found "
                                << j.dump();
  }

  Geometry read_geometry(const Json& j, const std::string& path) const {
    if (j.is_object() && j.size() == 1 && j.contains("elementwise")) {
      std::string p = join(path, "elementwise");
      const Json& e = j["elementwise"];
      expect_keys(e, p, {"block", "layout", "over"});
      Elementwise g;
      if (e.contains("block")) g.block = get_ints(e["block"], join(p, "block"));
      if (e.contains("layout")) {
        std::string layout = get_string(e["layout"], join(p, "layout"));
        if (layout == "flat") {
          g.layout = Layout::Flat;
        } else if (layout == "nd") {
          g.layout = Layout::Nd;
        } else {
          KERNELOP_RAISE(error(join(p, "layout")))
              << "'" << layout << "' is not a layout; expected 'flat' or 'nd'";
        }
      }
      if (e.contains("over")) g.over = get_string(e["over"], join(p, "over"));
      return g;
    }
    if (j.is_object() && j.size() == 1 && j.contains("reduction")) {
      std::string p = join(path, "reduction");
      const Json& r = j["reduction"];
      expect_keys(r, p, {"reduce_dims", "block_size", "shared_mem"});
      Reduction g;
      if (!r.contains("reduce_dims")) KERNELOP_RAISE(error(join(p, "reduce_dims"))) << "missing";
      g.reduce_dims = get_ints(r["reduce_dims"], join(p, "reduce_dims"));
      if (r.contains("block_size")) g.block_size = get_int(r["block_size"], join(p, "block_size"));
      if (r.contains("shared_mem")) g.shared_mem = get_expr(r["shared_mem"], join(p, "shared_mem"));
      return g;
    }
    if (j.is_object() && j.size() == 1 && j.contains("custom")) {
      std::string p = join(path, "custom");
      const Json& c = j["custom"];
      expect_keys(c, p, {"grid", "block", "shared_mem"});
      Custom g;
      if (!c.contains("grid")) KERNELOP_RAISE(error(join(p, "grid"))) << "missing";
      if (!c.contains("block")) KERNELOP_RAISE(error(join(p, "block"))) << "missing";
      g.grid = get_exprs(c["grid"], join(p, "grid"));
      g.block = get_exprs(c["block"], join(p, "block"));
      if (c.contains("shared_mem")) g.shared_mem = get_expr(c["shared_mem"], join(p, "shared_mem"));
      return g;
    }
    KERNELOP_FAIL(Type) << origin_ << ": " << prefix_ + path
                        << ": expected exactly one of {\"elementwise\": ...}, "
                           "{\"reduction\": ...}, {\"custom\": ...}, found "
                        << j.dump();
  }

  OpDecl read(const Json& root, const std::string& base_dir) const {
    expect_keys(root, "", spec_keys({"op"}));
    OpDecl decl;
    decl.base_dir = base_dir;
    if (!root.contains("op"))
      KERNELOP_RAISE(error("op")) << "missing; expected \"namespace::name\"";
    decl.op_name = get_string(root["op"], "op");
    read_spec(root, base_dir, decl.spec);
    return decl;
  }

  // The keys of a spec, after `first`: a file's top level has "op", a backward "differentiable"
  // and "from".
  static std::vector<std::string_view> spec_keys(std::initializer_list<std::string_view> first) {
    std::vector<std::string_view> keys(first);
    for (std::string_view k :
         {"kernel_name",   "kernel_source", "source_file", "inputs",        "outputs",
          "extras",        "params",        "geometry",    "include_paths", "compile_std",
          "arch_override", "defines",       "fast_math",   "line_info",     "type_params",
          "requires",      "tunables",      "configs",     "tuning_key",    "triton",
          "cutedsl",       "backward"}) {
      keys.push_back(k);
    }
    return keys;
  }

  void read_spec(const Json& root, const std::string& base_dir, KernelSpec& s) const {
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
    if (root.contains("inputs")) {
      const Json& arr = get_array(root["inputs"], "inputs");
      s.inputs.emplace();
      for (std::size_t i = 0; i < arr.size(); ++i)
        s.inputs->push_back(read_input(arr[i], index("inputs", i)));
    }
    if (root.contains("outputs")) {
      const Json& arr = get_array(root["outputs"], "outputs");
      s.outputs.emplace();
      for (std::size_t i = 0; i < arr.size(); ++i)
        s.outputs->push_back(read_output(arr[i], index("outputs", i)));
    }
    if (root.contains("params")) {
      // The kernel's parameters in order: names of inputs and outputs, and extras in place.
      const Json& arr = get_array(root["params"], "params");
      s.params.emplace();
      for (std::size_t i = 0; i < arr.size(); ++i) {
        std::string p = index("params", i);
        if (arr[i].is_object() && arr[i].contains("struct")) {
          expect_keys(arr[i], p, {"struct"});
          std::string sp = join(p, "struct");
          const Json& fields = get_array(arr[i]["struct"], sp);
          if (fields.empty()) KERNELOP_RAISE(error(sp)) << "has no fields";
          ParamStruct st;
          for (std::size_t f = 0; f < fields.size(); ++f)
            st.fields.push_back(read_param_field(fields[f], index(sp, f)));
          s.params->push_back(std::move(st));
        } else {
          ParamField field = read_param_field(arr[i], p);
          if (auto* name = std::get_if<ParamName>(&field)) {
            s.params->emplace_back(std::in_place_type<ParamName>, std::move(*name));
          } else {
            s.params->emplace_back(std::in_place_type<Extra>, std::get<Extra>(std::move(field)));
          }
        }
      }
    }
    if (root.contains("extras")) {
      const Json& arr = get_array(root["extras"], "extras");
      for (std::size_t i = 0; i < arr.size(); ++i)
        s.extras.push_back(read_extra(arr[i], index("extras", i)));
    }
    if (root.contains("geometry")) s.geometry = read_geometry(root["geometry"], "geometry");
    if (root.contains("include_paths"))
      s.include_paths = get_strings(root["include_paths"], "include_paths");
    if (root.contains("compile_std"))
      s.compile_std = get_string(root["compile_std"], "compile_std");
    if (root.contains("arch_override"))
      s.arch_override = get_strings(root["arch_override"], "arch_override");
    if (root.contains("defines")) s.defines = get_strings(root["defines"], "defines");
    if (root.contains("fast_math")) s.fast_math = get_bool(root["fast_math"], "fast_math");
    if (root.contains("line_info")) s.line_info = get_bool(root["line_info"], "line_info");
    if (root.contains("type_params")) {
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
    if (root.contains("requires")) s.requirements = get_requirements(root["requires"], "requires");
    if (root.contains("tunables")) {
      const Json& arr = get_array(root["tunables"], "tunables");
      for (std::size_t i = 0; i < arr.size(); ++i) s.tunables.push_back(read_tunable(arr[i], i));
    }
    if (root.contains("configs")) {
      const Json& arr = get_array(root["configs"], "configs");
      if (arr.size() > detail::kMaxConfigs)
        detail::check_config_count(arr.size(), error("configs"));
      for (std::size_t i = 0; i < arr.size(); ++i)
        s.configs.push_back(read_config(arr[i], index("configs", i), s.tunables));
    }
    if (root.contains("tuning_key")) s.tuning_key = get_exprs(root["tuning_key"], "tuning_key");
    for (const ForeignCompilerInfo& row : kForeignCompilers) {
      ForeignKernel f{row.compiler, ""};
      std::string key(f.key());
      if (!root.contains(key)) continue;
      if (s.foreign) {
        KERNELOP_RAISE(error(key))
            << "cannot be combined with '" << s.foreign->key() << "': a kernel has one compiler";
      }
      const Json& t = root[key];
      if (!t.is_object()) {
        KERNELOP_RAISE(error(key)) << "expected {\"version\": \"...\"}, found " << type_name(t);
      }
      expect_keys(t, key, {"version"});
      if (!t.contains("version")) KERNELOP_RAISE(error(key + ".version")) << "missing";
      f.version = get_string(t["version"], key + ".version");
      s.foreign = std::move(f);
    }
    if (root.contains("backward")) {
      const Json& b = root["backward"];
      if (!b.is_object()) {
        KERNELOP_RAISE(error("backward"))
            << "expected a spec with \"differentiable\": [...], found " << type_name(b);
      }
      Reader inner(*this);
      inner.prefix_ = prefix_ + "backward.";
      inner.expect_keys(b, "", spec_keys({"differentiable", "from"}));
      BackwardSpec backward;
      if (!b.contains("differentiable")) {
        KERNELOP_RAISE(inner.error("differentiable"))
            << "missing; expected the names of the tensor inputs that get gradients";
      }
      backward.differentiable = inner.get_strings(b["differentiable"], "differentiable");
      if (b.contains("from")) {
        const Json& from = b["from"];
        if (!from.is_object()) {
          KERNELOP_RAISE(inner.error("from"))
              << "expected {\"input\": \"what it receives\"}, found " << type_name(from);
        }
        for (const auto& item : from.items())
          backward.from[item.key()] = inner.get_string(item.value(), join("from", item.key()));
      }
      inner.read_spec(b, base_dir, backward.spec);
      s.backward.push_back(std::move(backward));
    }
  }

 private:
  std::vector<Requirement> get_requirements(const Json& j, const std::string& path) const {
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

  // "BLOCK", or {"name": "VEC", "define": true, "type": "bool"}.
  Tunable read_tunable(const Json& j, std::size_t i) const {
    std::string p = index("tunables", i);
    Tunable t;
    if (j.is_string()) {
      t.name = j.get<std::string>();
      return t;
    }
    if (!j.is_object()) {
      KERNELOP_RAISE(error(p)) << "expected a name or {\"name\": ..., \"define\": ..., "
                                  "\"type\": \"int\" | \"bool\"}, found "
                               << type_name(j);
    }
    expect_keys(j, p, {"name", "define", "type"});
    if (!j.contains("name")) KERNELOP_RAISE(error(join(p, "name"))) << "missing";
    t.name = get_string(j["name"], join(p, "name"));
    if (j.contains("define")) t.define = get_bool(j["define"], join(p, "define"));
    if (j.contains("type")) {
      std::string type = get_string(j["type"], join(p, "type"));
      if (type != "int" && type != "bool") {
        KERNELOP_RAISE(error(join(p, "type"))) << "'" << type << "'; expected \"int\" or \"bool\"";
      }
      t.boolean = type == "bool";
    }
    return t;
  }

  // {"BLOCK": 256, "VEC": 4, "requires": [...]}: a value for every tunable.
  Config read_config(const Json& j, const std::string& p,
                     const std::vector<Tunable>& tunables) const {
    if (!j.is_object()) {
      KERNELOP_RAISE(error(p)) << "expected an object binding every tunable, found "
                               << type_name(j);
    }
    Config c;
    for (const auto& item : j.items()) {
      const std::string& key = item.key();
      if (key == "requires") continue;
      bool known = std::any_of(tunables.begin(), tunables.end(),
                               [&](const Tunable& t) { return t.name == key; });
      if (!known) {
        KERNELOP_RAISE(error(join(p, key)))
            << "is not a tunable (tunables: "
            << (tunables.empty() ? "none"
                                 : detail::join(tunables, [](const Tunable& t) { return t.name; }))
            << ")";
      }
    }
    for (const Tunable& t : tunables) {
      std::string vp = join(p, t.name);
      if (!j.contains(t.name))
        KERNELOP_RAISE(error(vp)) << "missing; every config binds every tunable";
      const Json& v = j[t.name];
      if (t.boolean) {
        c.values.push_back(get_bool(v, vp) ? 1 : 0);
      } else {
        c.values.push_back(get_int(v, vp));
      }
    }
    if (j.contains("requires"))
      c.requirements = get_requirements(j["requires"], join(p, "requires"));
    return c;
  }

  std::string origin_;
  std::string prefix_;  // "backward." (and so on) while reading a nested backward spec
};

}  // namespace

OpDecl parse_op_json(std::string_view text, const std::string& base_dir, std::string_view origin) {
  std::string why;
  std::optional<Json> root = detail::parse_json_strict<Json>(text, &why);
  if (!root) {
    // A duplicate key is named as a field; anything else is "not valid JSON".
    if (why.rfind("field '", 0) == 0) KERNELOP_FAIL(Spec) << origin << ": " << why;
    KERNELOP_FAIL(Spec) << origin << ": not valid JSON: " << why;
  }
  OpDecl decl = Reader(std::string(origin)).read(*root, base_dir);
  return decl;
}

OpDecl load_op_file(const std::filesystem::path& path) {
  std::string text = detail::read_file(path, "spec file");
  std::string base = path.parent_path().string();
  if (base.empty()) base = ".";
  return parse_op_json(text, base, path.string());
}

}  // namespace kernelop
