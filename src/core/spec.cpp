// Names and C types of scalar kinds.
#include "kernelop/spec.hpp"

#include <array>
#include <charconv>

namespace kernelop {
namespace {

struct ScalarInfo {
  ScalarType type;
  std::string_view name, schema, cuda;
};
constexpr std::array<ScalarInfo, 5> kScalars = {{
    {ScalarType::Float, "float", "float", "float"},
    {ScalarType::Float64, "float64", "float", "double"},
    {ScalarType::Int, "int", "int", "int"},
    {ScalarType::Int64, "int64", "int", "long long"},
    {ScalarType::Bool, "bool", "bool", "bool"},
}};

}  // namespace

std::string_view scalar_type_name(ScalarType type) {
  return kScalars[static_cast<std::size_t>(type)].name;
}
std::string_view scalar_schema_type(ScalarType type) {
  return kScalars[static_cast<std::size_t>(type)].schema;
}
std::string_view scalar_cuda_type(ScalarType type) {
  return kScalars[static_cast<std::size_t>(type)].cuda;
}
std::optional<ScalarType> parse_scalar_type(std::string_view name) {
  for (const auto& s : kScalars) {
    if (s.name == name) return s.type;
  }
  return std::nullopt;
}

std::string scalar_default_text(const ScalarDefault& value) {
  return std::visit(Overloaded{
                        [](bool b) { return std::string(b ? "True" : "False"); },
                        [](std::int64_t i) { return std::to_string(i); },
                        [](double d) {
                          std::array<char, 32> buf{};
                          auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), d);
                          std::string text(buf.data(), ec == std::errc() ? end : buf.data());
                          if (text.find_first_of(".en") == std::string::npos) text += ".0";
                          return text;
                        },
                    },
                    value);
}

bool reads_on_host(const KernelSpec& spec) {
  bool reads = !spec.when.empty();
  auto scan = [&](const Extra& e) {
    if (const auto* x = std::get_if<ExtraExpr>(&e))
      x->value.for_each_leaf([&](const Expr& l) { reads = reads || l.op() == ExprOp::Item; });
  };
  for (const Extra& e : spec.extras) scan(e);
  if (spec.params) {
    for (const Param& p : *spec.params) {
      if (const auto* e = std::get_if<Extra>(&p)) scan(*e);
      if (const auto* st = std::get_if<ParamStruct>(&p)) {
        for (const ParamField& f : st->fields) {
          if (const auto* e = std::get_if<Extra>(&f)) scan(*e);
        }
      }
    }
  }
  for (const LaunchStep& step : spec.then) reads = reads || reads_on_host(step.spec);
  return reads;
}

}  // namespace kernelop
