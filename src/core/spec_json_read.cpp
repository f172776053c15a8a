// The JSON spec reader, the calling convention: inputs (tensors and scalars), outputs and their
// shapes, the kernel's params and extras, and the launch geometry.
#include <cmath>
#include <limits>
#include <string>

#include "core/spec_json_reader.hpp"
#include "core/words.hpp"

namespace kernelop::detail {

void SpecReader::read_convention(const Json& root, KernelSpec& s) const {
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
  if (root.contains("params")) read_params(get_array(root["params"], "params"), s);
  if (root.contains("extras")) {
    const Json& arr = get_array(root["extras"], "extras");
    for (std::size_t i = 0; i < arr.size(); ++i)
      s.extras.push_back(read_extra(arr[i], index("extras", i)));
  }
  if (root.contains("geometry")) s.geometry = read_geometry(root["geometry"], "geometry");
}

ScalarDefault SpecReader::read_default(const Json& j, const std::string& path) const {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return get_int(j, path);
  if (j.is_number_float()) return j.get<double>();
  KERNELOP_RAISE(error(path)) << "expected true, false or a number, found " << type_name(j);
}

Input SpecReader::read_input(const Json& j, const std::string& path) const {
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
    if (j.contains("default")) s.default_value = read_default(j["default"], join(path, "default"));
    return s;
  }
  expect_keys(j, path, {"name", "dtype", "mutated", "strided", "result", "scalar"});
  InputDecl t;
  t.name = get_string(j.value("name", Json()), join(path, "name"));
  if (j.contains("dtype")) t.dtype = get_dtype_decl(j["dtype"], join(path, "dtype"));
  if (j.contains("mutated")) t.mutated = get_bool(j["mutated"], join(path, "mutated"));
  if (j.contains("strided")) t.strided = get_bool(j["strided"], join(path, "strided"));
  if (j.contains("result")) t.result = get_bool(j["result"], join(path, "result"));
  return t;
}

ShapeRel SpecReader::read_shape(const Json& j, const std::string& path) const {
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

OutputDecl SpecReader::read_output(const Json& j, const std::string& path) const {
  expect_keys(j, path,
              {"name", "shape", "dtype_from", "dtype", "init", "scratch", "permute", "align"});
  OutputDecl o;
  o.name = get_string(j.value("name", Json()), join(path, "name"));
  if (!j.contains("shape")) KERNELOP_RAISE(error(join(path, "shape"))) << "missing";
  o.shape = read_shape(j["shape"], join(path, "shape"));
  if (j.contains("dtype_from"))
    o.dtype_from = get_string(j["dtype_from"], join(path, "dtype_from"));
  if (j.contains("dtype")) o.dtype = get_dtype_decl(j["dtype"], join(path, "dtype"));
  if (j.contains("init")) o.init = read_output_init(j["init"], join(path, "init"));
  if (j.contains("scratch")) o.scratch = get_bool(j["scratch"], join(path, "scratch"));
  if (j.contains("align")) {
    o.align = get_int(j["align"], join(path, "align"));
    if (!valid_output_alignment(o.align)) {
      KERNELOP_RAISE(error(join(path, "align")))
          << "expected a power of two from 1 to 256 (bytes: what every buffer kernelop allocates "
             "has), found "
          << j["align"].dump();
    }
  }
  if (j.contains("permute")) {
    o.permute = get_ints(j["permute"], join(path, "permute"));
    if (o.permute.empty()) {
      KERNELOP_RAISE(error(join(path, "permute")))
          << "is empty; expected a permutation of the output's dims (leave it out to return the "
             "output as its launches write it)";
    }
  }
  return o;
}

// {"fill": number | "inf" | "-inf" | "nan"} or {"clone": input name} (Note [initialised outputs]).
OutputInit SpecReader::read_output_init(const Json& j, const std::string& path) const {
  if (j.is_object() && j.contains("fill")) {
    expect_keys(j, path, {"fill"});
    const Json& v = j["fill"];
    if (v.is_number()) return FillInit{get_number(v, join(path, "fill"))};  // JSON refuses 1e400
    if (v.is_boolean()) return FillInit{v.get<bool>() ? 1.0 : 0.0};
    if (v.is_string()) {
      const std::string& text = v.get_ref<const std::string&>();
      if (text == "inf") return FillInit{std::numeric_limits<double>::infinity()};
      if (text == "-inf") return FillInit{-std::numeric_limits<double>::infinity()};
      if (text == "nan") return FillInit{std::numeric_limits<double>::quiet_NaN()};
    }
    KERNELOP_RAISE(error(join(path, "fill")))
        << "expected a number, true, false, \"inf\", \"-inf\" or \"nan\", found " << v.dump();
  }
  if (j.is_object() && j.contains("clone")) {
    expect_keys(j, path, {"clone"});
    return CloneInit{get_string(j["clone"], join(path, "clone"))};
  }
  KERNELOP_RAISE(error(path)) << "expected {\"fill\": value} or {\"clone\": \"input\"}, found "
                              << j.dump();
}

void SpecReader::read_params(const Json& arr, KernelSpec& s) const {
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

ParamField SpecReader::read_param_field(const Json& j, const std::string& path) const {
  if (j.is_string()) return ParamName{j.get<std::string>()};
  if (j.is_object()) return read_extra(j, path);
  KERNELOP_RAISE(error(path)) << "expected an input or output name, an extra such as "
                                 "{\"expr\": ...} or a {\"struct\": [...]}, found "
                              << type_name(j);
}

Extra SpecReader::read_extra(const Json& j, const std::string& path) const {
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
  if (j.is_object() && j.contains("float")) {
    expect_keys(j, path, {"float"});
    const Json& v = j["float"];
    if (!v.is_number()) {
      KERNELOP_RAISE(error(join(path, "float"))) << "expected a number, found " << type_name(v);
    }
    double d = v.get<double>();
    if (!(std::fabs(d) <= static_cast<double>(std::numeric_limits<float>::max()))) {
      KERNELOP_RAISE(error(join(path, "float")))
          << "expected a finite 32-bit float, found " << v.dump();
    }
    return ExtraFloat{d};
  }
  KERNELOP_RAISE(error(path)) << "expected {\"numel\": ...}, {\"dim_size\": ..., \"axis\": ...}, "
                                 "{\"expr\": ...} or {\"float\": ...}, found "
                              << j.dump();
}

Geometry SpecReader::read_geometry(const Json& j, const std::string& path) const {
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
    expect_keys(c, p, {"grid", "block", "shared_mem", "cluster"});
    Custom g;
    if (!c.contains("grid")) KERNELOP_RAISE(error(join(p, "grid"))) << "missing";
    if (!c.contains("block")) KERNELOP_RAISE(error(join(p, "block"))) << "missing";
    g.grid = get_exprs(c["grid"], join(p, "grid"));
    g.block = get_exprs(c["block"], join(p, "block"));
    if (c.contains("shared_mem")) g.shared_mem = get_expr(c["shared_mem"], join(p, "shared_mem"));
    if (c.contains("cluster")) {
      g.cluster = get_exprs(c["cluster"], join(p, "cluster"));
      if (g.cluster.empty())
        KERNELOP_RAISE(error(join(p, "cluster"))) << "is empty; expected 1 to 3";
    }
    return g;
  }
  KERNELOP_FAIL(Type) << origin_ << ": " << prefix_ + path
                      << ": expected exactly one of {\"elementwise\": ...}, "
                         "{\"reduction\": ...}, {\"custom\": ...}, found "
                      << j.dump();
}

}  // namespace kernelop::detail
