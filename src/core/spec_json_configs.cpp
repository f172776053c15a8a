// The JSON spec reader, the rest of a spec: tunables, configs and the tuning key, the foreign
// compiler (Triton, CuTe DSL) and the nested backward spec.
#include <algorithm>
#include <string>

#include "core/spec_json_reader.hpp"
#include "core/validator.hpp"
#include "core/words.hpp"

namespace kernelop::detail {

void SpecReader::read_tactics(const Json& root, KernelSpec& s) const {
  if (root.contains("tunables")) {
    const Json& arr = get_array(root["tunables"], "tunables");
    for (std::size_t i = 0; i < arr.size(); ++i) s.tunables.push_back(read_tunable(arr[i], i));
  }
  if (root.contains("configs")) {
    const Json& arr = get_array(root["configs"], "configs");
    if (arr.size() > detail::kMaxConfigs) detail::check_config_count(arr.size(), error("configs"));
    for (std::size_t i = 0; i < arr.size(); ++i)
      s.configs.push_back(read_config(arr[i], index("configs", i), s.tunables));
  }
  if (root.contains("tuning_key")) s.tuning_key = get_exprs(root["tuning_key"], "tuning_key");
}

Tunable SpecReader::read_tunable(const Json& j, std::size_t i) const {
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

Config SpecReader::read_config(const Json& j, const std::string& p,
                               const std::vector<Tunable>& tunables) const {
  if (!j.is_object()) {
    KERNELOP_RAISE(error(p)) << "expected an object binding every tunable, found " << type_name(j);
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
  if (j.contains("requires")) c.requirements = get_requirements(j["requires"], join(p, "requires"));
  return c;
}

void SpecReader::read_foreign(const Json& root, KernelSpec& s) const {
  for (const ForeignCompilerInfo& row : kForeignCompilers) {
    ForeignKernel f{row.compiler, ""};
    std::string key(f.key());
    if (!root.contains(key)) continue;
    if (s.foreign) {
      KERNELOP_RAISE(error(key)) << "cannot be combined with '" << s.foreign->key()
                                 << "': a kernel has one compiler";
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
}

BackwardSpec SpecReader::read_backward(const Json& b, const std::string& base_dir) const {
  if (!b.is_object()) {
    KERNELOP_RAISE(error("backward"))
        << "expected a spec with \"differentiable\": [...], found " << type_name(b);
  }
  SpecReader inner(*this);
  inner.prefix_ = prefix_ + "backward.";
  inner.expect_keys(b, "", spec_keys({"differentiable", "from"}));
  BackwardSpec backward;
  if (!b.contains("differentiable")) {
    KERNELOP_RAISE(inner.error("differentiable"))
        << "missing; expected the names of the tensor inputs that get gradients";
  }
  backward.differentiable = inner.get_strings(b["differentiable"], "differentiable");
  if (b.contains("from")) backward.from = inner.read_from(b["from"]);
  inner.read_spec(b, base_dir, backward.spec);
  return backward;
}

LaunchStep SpecReader::read_launch(const Json& j, const std::string& path,
                                   const std::string& base_dir) const {
  if (!j.is_object()) {
    KERNELOP_RAISE(error(path)) << "expected a spec without \"op\" (a kernel launched after the "
                                   "op's), found "
                                << type_name(j);
  }
  SpecReader inner(*this);
  inner.prefix_ = prefix_ + path + ".";
  inner.expect_keys(j, "", spec_keys({"from", "before"}));
  LaunchStep step;
  if (j.contains("from")) step.from = inner.read_from(j["from"]);
  if (j.contains("before")) step.before = inner.get_bool(j["before"], "before");
  inner.read_spec(j, base_dir, step.spec);
  return step;
}

std::map<std::string, std::string> SpecReader::read_from(const Json& from) const {
  if (!from.is_object()) {
    KERNELOP_RAISE(error("from")) << "expected {\"input\": \"what it receives\"}, found "
                                  << type_name(from);
  }
  std::map<std::string, std::string> out;
  for (const auto& item : from.items())
    out[item.key()] = get_string(item.value(), join("from", item.key()));
  return out;
}

}  // namespace kernelop::detail
