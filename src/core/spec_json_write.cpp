// OpDecl -> JSON: the canonical form of a spec (what `kernelop check --json`, packages and the
// compile cache's key print). Its reader, strict about every field, is spec_json.cpp.
#include <cmath>
#include <nlohmann/json.hpp>

#include "kernelop/spec_json.hpp"

namespace kernelop {
namespace {

using Json = nlohmann::ordered_json;

Json expr_json(const Expr& e) {
  if (e.is_const()) return e.const_value();
  return e.to_string();
}

Json dtype_json(const DTypeDecl& d) {
  return std::visit(Overloaded{[](DType dt) { return Json(std::string(dtype_name(dt))); },
                               [](const std::string& param) { return Json(param); }},
                    d);
}

Json input_ref_json(const InputRef& r) {
  return std::visit(Overloaded{[](std::int64_t i) { return Json(i); },
                               [](const std::string& name) { return Json(name); }},
                    r);
}

Json extra_json(const Extra& extra) {
  Json j = Json::object();
  bool int64 = std::visit(Overloaded{
                              [&](const Numel& x) {
                                j["numel"] = x.input;
                                return x.int64;
                              },
                              [&](const DimSize& x) {
                                j["dim_size"] = x.input;
                                j["axis"] = x.axis;
                                return x.int64;
                              },
                              [&](const ExtraExpr& x) {
                                j["expr"] = expr_json(x.value);
                                return x.int64;
                              },
                              [&](const ExtraFloat& x) {
                                j["float"] = x.value;
                                return false;
                              },
                          },
                          extra);
  if (int64) j["int64"] = true;
  return j;
}

Json write_spec(const KernelSpec& s, const JsonWriteOptions& options, Json root) {
  root["kernel_name"] = s.kernel_name;
  if (s.source_file && !options.inline_source) {
    root["source_file"] = *s.source_file;
  } else {
    root["kernel_source"] = s.kernel_source;
  }
  if (s.inputs) {
    Json arr = Json::array();
    for (const Input& input : *s.inputs) {
      Json j = Json::object();
      std::visit(Overloaded{
                     [&](const InputDecl& t) {
                       j["name"] = t.name;
                       if (t.dtype) j["dtype"] = dtype_json(*t.dtype);
                       if (t.mutated) j["mutated"] = true;
                       if (t.strided) j["strided"] = true;
                       if (t.result) j["result"] = true;
                     },
                     [&](const ScalarInput& sc) {
                       j["name"] = sc.name;
                       j["scalar"] = std::string(scalar_type_name(sc.type));
                       if (sc.symint) j["symint"] = true;
                       if (sc.default_value) {
                         std::visit([&](auto v) { j["default"] = v; }, *sc.default_value);
                       }
                     },
                 },
                 input);
      arr.push_back(std::move(j));
    }
    root["inputs"] = std::move(arr);
  }
  if (s.outputs) {
    Json arr = Json::array();
    for (const OutputDecl& o : *s.outputs) {
      Json j = Json::object();
      j["name"] = o.name;
      std::visit(Overloaded{
                     [&](const SameAs& same) {
                       j["shape"] = Json{{"same_as", input_ref_json(same.input)}};
                       if (!same.edits.empty()) {
                         Json dims = Json::object();
                         for (const AxisEdit& e : same.edits)
                           dims[std::to_string(e.axis)] = expr_json(e.size);
                         j["shape"]["dims"] = std::move(dims);
                       }
                     },
                     [&](const ReduceDims& r) {
                       Json rd = Json::object();
                       rd["input"] = input_ref_json(r.input);
                       rd["dims"] = r.dims;
                       if (r.keepdim) rd["keepdim"] = true;
                       j["shape"] = Json{{"reduce_dims", std::move(rd)}};
                     },
                     [&](const ShapeExprs& exprs) {
                       Json dims = Json::array();
                       for (const Expr& e : exprs.dims) dims.push_back(expr_json(e));
                       j["shape"] = std::move(dims);
                     },
                 },
                 o.shape);
      if (o.dtype_from) j["dtype_from"] = *o.dtype_from;
      if (o.dtype) j["dtype"] = dtype_json(*o.dtype);
      if (o.scratch) j["scratch"] = true;
      if (o.align != 0) j["align"] = o.align;
      if (!o.permute.empty()) j["permute"] = o.permute;
      if (o.init) {
        std::visit(Overloaded{
                       [&](const FillInit& f) {
                         // JSON has no infinities or NaN: those are written as read.
                         if (std::isnan(f.value)) {
                           j["init"] = Json{{"fill", "nan"}};
                         } else if (std::isinf(f.value)) {
                           j["init"] = Json{{"fill", f.value > 0 ? "inf" : "-inf"}};
                         } else {
                           j["init"] = Json{{"fill", f.value}};
                         }
                       },
                       [&](const CloneInit& c) {
                         j["init"] = Json{{"clone", c.input}};
                       },
                   },
                   *o.init);
      }
      arr.push_back(std::move(j));
    }
    root["outputs"] = std::move(arr);
  }
  if (!s.extras.empty()) {
    Json arr = Json::array();
    for (const Extra& extra : s.extras) arr.push_back(extra_json(extra));
    root["extras"] = std::move(arr);
  }
  if (s.params) {
    Json arr = Json::array();
    for (const Param& param : *s.params) {
      auto field = Overloaded{[](const ParamName& n) { return Json(n.name); },
                              [](const Extra& e) { return extra_json(e); }};
      std::visit(Overloaded{[&](const ParamStruct& st) {
                              Json fields = Json::array();
                              for (const ParamField& f : st.fields)
                                fields.push_back(std::visit(field, f));
                              arr.push_back(Json{{"struct", std::move(fields)}});
                            },
                            [&](const auto& p) { arr.push_back(field(p)); }},
                 param);
    }
    root["params"] = std::move(arr);
  }
  if (s.geometry) {
    Json g = Json::object();
    std::visit(Overloaded{
                   [&](const Elementwise& e) {
                     Json j = Json::object();
                     j["block"] = e.block;
                     j["layout"] = e.layout == Layout::Flat ? "flat" : "nd";
                     if (e.over) j["over"] = *e.over;
                     g["elementwise"] = std::move(j);
                   },
                   [&](const Reduction& r) {
                     Json j = Json::object();
                     j["reduce_dims"] = r.reduce_dims;
                     j["block_size"] = r.block_size;
                     if (r.shared_mem) j["shared_mem"] = expr_json(*r.shared_mem);
                     g["reduction"] = std::move(j);
                   },
                   [&](const Custom& c) {
                     Json j = Json::object();
                     Json grid = Json::array(), block = Json::array();
                     for (const Expr& x : c.grid) grid.push_back(expr_json(x));
                     for (const Expr& x : c.block) block.push_back(expr_json(x));
                     j["grid"] = std::move(grid);
                     j["block"] = std::move(block);
                     j["shared_mem"] = expr_json(c.shared_mem);
                     if (!c.cluster.empty()) {
                       Json cluster = Json::array();
                       for (const Expr& x : c.cluster) cluster.push_back(expr_json(x));
                       j["cluster"] = std::move(cluster);
                     }
                     g["custom"] = std::move(j);
                   },
               },
               *s.geometry);
    root["geometry"] = std::move(g);
  }
  if (!s.include_paths.empty()) root["include_paths"] = s.include_paths;
  if (s.compile_std != "c++17") root["compile_std"] = s.compile_std;
  if (!s.arch_override.empty()) root["arch_override"] = s.arch_override;
  if (!s.defines.empty()) root["defines"] = s.defines;
  if (s.fast_math) root["fast_math"] = true;
  if (s.line_info) root["line_info"] = true;
  if (!s.type_params.empty()) {
    Json arr = Json::array();
    for (const TypeParam& tp : s.type_params) {
      Json dtypes = Json::array();
      for (DType d : tp.dtypes) dtypes.push_back(std::string(dtype_name(d)));
      arr.push_back(Json{{"name", tp.name}, {"dtypes", std::move(dtypes)}});
    }
    root["type_params"] = std::move(arr);
  }
  if (!s.requirements.empty()) {
    Json arr = Json::array();
    for (const Requirement& r : s.requirements) arr.push_back(r.to_string());
    root["requires"] = std::move(arr);
  }
  if (!s.tunables.empty()) {
    Json arr = Json::array();
    for (const Tunable& t : s.tunables) {
      if (!t.define && !t.boolean) {
        arr.push_back(t.name);
        continue;
      }
      Json j{{"name", t.name}};
      if (t.define) j["define"] = true;
      if (t.boolean) j["type"] = "bool";
      arr.push_back(std::move(j));
    }
    root["tunables"] = std::move(arr);
  }
  if (!s.configs.empty()) {
    Json arr = Json::array();
    for (const Config& c : s.configs) {
      Json j = Json::object();
      for (std::size_t t = 0; t < c.values.size() && t < s.tunables.size(); ++t) {
        if (s.tunables[t].boolean) {
          j[s.tunables[t].name] = c.values[t] != 0;
        } else {
          j[s.tunables[t].name] = c.values[t];
        }
      }
      if (!c.requirements.empty()) {
        Json reqs = Json::array();
        for (const Requirement& r : c.requirements) reqs.push_back(r.to_string());
        j["requires"] = std::move(reqs);
      }
      arr.push_back(std::move(j));
    }
    root["configs"] = std::move(arr);
  }
  if (s.tuning_key) {
    Json arr = Json::array();
    for (const Expr& e : *s.tuning_key) arr.push_back(expr_json(e));
    root["tuning_key"] = std::move(arr);
  }
  if (s.foreign) root[std::string(s.foreign->key())] = Json{{"version", s.foreign->version}};
  for (const BackwardSpec& b : s.backward) {
    Json head{{"differentiable", b.differentiable}};
    if (!b.from.empty()) head["from"] = b.from;
    root["backward"] = write_spec(b.spec, options, std::move(head));
  }
  if (!s.when.empty()) {
    Json arr = Json::array();
    for (const HostTest& t : s.when)
      arr.push_back(Json{{"tensor", t.tensor}, {t.equal ? "==" : "!=", t.value}});
    root["when"] = std::move(arr);
  }
  if (!s.then.empty()) {
    Json arr = Json::array();
    for (const LaunchStep& step : s.then) {
      Json head = Json::object();
      if (!step.from.empty()) head["from"] = step.from;
      if (step.before) head["before"] = true;
      arr.push_back(write_spec(step.spec, options, std::move(head)));
    }
    root["then"] = std::move(arr);
  }
  return root;
}

Json write(const OpDecl& decl, const JsonWriteOptions& options) {
  return write_spec(decl.spec, options, Json{{"op", decl.op_name}});
}

}  // namespace

std::string print_op_json(const OpDecl& decl, const JsonWriteOptions& options) {
  try {
    return write(decl, options).dump(options.indent) + "\n";
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8
    KERNELOP_FAIL(Spec) << "op " << decl.op_name << ": cannot print the spec as JSON: " << e.what();
  }
}

}  // namespace kernelop
