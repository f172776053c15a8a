// Validation of tunables, configs (tactics) and the tuning key.
#include <map>

#include "core/validator.hpp"

namespace kernelop::detail {

// Names first: expressions checked before the configs may use them.
void Validator::check_tunables() {
  std::set<std::string> type_params;
  for (const auto& tp : spec_.type_params) type_params.insert(tp.name);
  for (std::size_t i = 0; i < spec_.tunables.size(); ++i) {
    const Tunable& t = spec_.tunables[i];
    std::string path = "tunables[" + std::to_string(i) + "].name";
    check_name(t.name, path);  // "requires" (a config's own key) is a reserved name
    if (!tunables_.insert(t.name).second) {
      KERNELOP_RAISE(fail_at(path)) << "duplicate tunable '" << detail::shorten(t.name) << "'";
    }
    if (type_params.count(t.name)) {
      KERNELOP_RAISE(fail_at(path))
          << "'" << detail::shorten(t.name) << "' is also a type parameter's name";
    }
    for (const Input& input : spec_.inputs.value_or(std::vector<Input>{})) {
      if (std::visit([](const auto& d) { return d.name; }, input) == t.name) {
        KERNELOP_RAISE(fail_at(path))
            << "'" << detail::shorten(t.name) << "' is also an input's name";
      }
    }
    for (const OutputDecl& out : spec_.outputs.value_or(std::vector<OutputDecl>{})) {
      if (out.name == t.name) {
        KERNELOP_RAISE(fail_at(path))
            << "'" << detail::shorten(t.name) << "' is also an output's name";
      }
    }
  }
  if (spec_.tunables.empty() != spec_.configs.empty()) {
    KERNELOP_RAISE(fail_at(spec_.configs.empty() ? "configs" : "tunables"))
        << (spec_.configs.empty()
                ? "is empty, but tunables are declared; expected at least one config binding them"
                : "is empty, but configs are given; declare the tunables they bind");
  }
}

void Validator::check_configs() {
  if (spec_.tuning_key && spec_.configs.empty()) {
    KERNELOP_RAISE(fail_at("tuning_key")) << "is given but the op declares no configs to tune";
  }
  if (spec_.configs.empty()) return;
  if (!spec_.outputs || !spec_.geometry || options_.has_eager_fn || options_.has_meta_fn) {
    KERNELOP_RAISE(fail_at("configs"))
        << "need a launch kernelop makes itself: declared outputs and geometry, and no "
           "meta_fn/eager_fn override";
  }
  if (spec_.configs.size() > kMaxConfigs)
    check_config_count(spec_.configs.size(), fail_at("configs"));
  std::size_t combos = 1;
  for (const auto& tp : spec_.type_params) combos *= tp.dtypes.size();
  if (combos * spec_.configs.size() > kMaxInstances) {
    KERNELOP_RAISE(fail_at("configs"))
        << spec_.configs.size() << " configs x " << combos << " dtype combinations ask for more "
        << "than " << kMaxInstances << " kernel instantiations";
  }
  std::map<std::vector<std::int64_t>, std::size_t> seen;
  for (std::size_t c = 0; c < spec_.configs.size(); ++c) {
    check_config(c);
    auto [it, fresh] = seen.emplace(spec_.configs[c].values, c);
    if (!fresh) {
      KERNELOP_RAISE(fail_at("configs[" + std::to_string(c) + "]"))
          << "binds the same values as configs[" << it->second << "]";
    }
  }
  // A tunable that changes nothing would time the same kernel twice.
  auto lt = spec_.kernel_name.find('<');
  std::string_view args =
      lt == std::string::npos ? std::string_view() : std::string_view(spec_.kernel_name).substr(lt);
  for (std::size_t i = 0; i < spec_.tunables.size(); ++i) {
    const Tunable& t = spec_.tunables[i];
    // A Triton kernel's tunables are its constexprs and compile options: each config is its own
    // compilation, so every tunable changes the machine code.
    if (spec_.foreign || t.define || used_tunables_.count(t.name) ||
        detail::find_word(args, t.name) != std::string_view::npos)
      continue;
    KERNELOP_RAISE(fail_at("tunables[" + std::to_string(i) + "]"))
        << "'" << t.name << "' is used nowhere; expected it in kernel_name's template arguments "
        << "(e.g. '" << spec_.kernel_name.substr(0, lt) << "<" << t.name
        << ">'), in a launch expression (geometry, extras), or as a define (\"define\": true)";
  }
  if (spec_.tuning_key) {
    if (spec_.tuning_key->empty() || spec_.tuning_key->size() > kMaxTuningKey) {
      KERNELOP_RAISE(fail_at("tuning_key"))
          << "has " << spec_.tuning_key->size() << " entries; expected 1 to " << kMaxTuningKey
          << " (leave it out to key on every input dim)";
    }
    for (std::size_t k = 0; k < spec_.tuning_key->size(); ++k) {
      check_expr((*spec_.tuning_key)[k], "tuning_key[" + std::to_string(k) + "]", ExprUse::Shape);
    }
  }
}

void Validator::check_config(std::size_t index) {
  const Config& c = spec_.configs[index];
  std::string path = "configs[" + std::to_string(index) + "]";
  if (c.values.size() != spec_.tunables.size()) {
    KERNELOP_RAISE(fail_at(path)) << "binds " << c.values.size() << " value(s) for "
                                  << spec_.tunables.size() << " tunable(s)";
  }
  for (std::size_t t = 0; t < c.values.size(); ++t) {
    if (spec_.tunables[t].boolean && c.values[t] != 0 && c.values[t] != 1) {
      KERNELOP_RAISE(fail_at(path + "." + spec_.tunables[t].name))
          << "is " << c.values[t] << "; the tunable is a bool (false or true)";
    }
  }
  for (std::size_t r = 0; r < c.requirements.size(); ++r) {
    std::string rp = path + ".requires[" + std::to_string(r) + "]";
    check_expr(c.requirements[r].condition, rp, ExprUse::Config);
  }
}

}  // namespace kernelop::detail
