// The JSON spec reader's class, shared by its three parts: spec_json.cpp (typed values, the
// document's top level, sources and compile options), spec_json_read.cpp (the calling
// convention: inputs, outputs, params, extras, geometry) and spec_json_configs.cpp (tunables,
// configs, the foreign compiler and the backward spec). Private to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/error.hpp"
#include "kernelop/spec.hpp"

namespace kernelop::detail {

// Reads an OpDecl out of a parsed document, naming the field path of every error.
class SpecReader {
 public:
  using Json = nlohmann::ordered_json;

  explicit SpecReader(std::string origin) : origin_(std::move(origin)) {}

  OpDecl read(const Json& root, const std::string& base_dir) const;

 private:
  // "ORIGIN: PATH: ..." (Note [raising errors]).
  detail::ErrorStream error(const std::string& path) const;
  static std::string type_name(const Json& j) { return j.type_name(); }
  void expect_keys(const Json& obj, const std::string& path,
                   std::initializer_list<std::string_view> allowed) const;
  void expect_keys(const Json& obj, const std::string& path,
                   const std::vector<std::string_view>& allowed) const;
  static std::string join(const std::string& path, const std::string& key);
  static std::string index(const std::string& path, std::size_t i);

  // Typed values, each refusing anything else with the field's path.
  std::string get_string(const Json& j, const std::string& path) const;
  std::int64_t get_int(const Json& j, const std::string& path) const;
  bool get_bool(const Json& j, const std::string& path) const;
  /// A JSON number as a double; an integer literal a double does not hold exactly (beyond 2^53,
  /// such as 9007199254740993) is refused, never rounded to another value.
  double get_number(const Json& j, const std::string& path) const;
  const Json& get_array(const Json& j, const std::string& path) const;
  std::vector<std::string> get_strings(const Json& j, const std::string& path) const;
  std::vector<std::int64_t> get_ints(const Json& j, const std::string& path) const;
  Expr get_expr(const Json& j, const std::string& path) const;
  std::vector<Expr> get_exprs(const Json& j, const std::string& path) const;
  DType get_dtype(const Json& j, const std::string& path) const;
  // A dtype name, or else the name of a type parameter (checked later by validate()).
  DTypeDecl get_dtype_decl(const Json& j, const std::string& path) const;
  InputRef get_input_ref(const Json& j, const std::string& path) const;
  std::vector<Requirement> get_requirements(const Json& j, const std::string& path) const;

  // The keys of a spec, after `first`: a file's top level has "op", a backward "differentiable"
  // and "from".
  static std::vector<std::string_view> spec_keys(std::initializer_list<std::string_view> first);
  // A spec's fields, in the order of spec_keys: the first error found is the one reported.
  void read_spec(const Json& root, const std::string& base_dir, KernelSpec& s) const;
  void read_source(const Json& root, const std::string& base_dir, KernelSpec& s) const;
  void read_compile_options(const Json& root, KernelSpec& s) const;
  void read_type_params(const Json& root, KernelSpec& s) const;

  // spec_json_read.cpp: the calling convention.
  void read_convention(const Json& root, KernelSpec& s) const;
  // A scalar's default: true/false, an integer or a number (checked against its type later).
  ScalarDefault read_default(const Json& j, const std::string& path) const;
  Input read_input(const Json& j, const std::string& path) const;
  ShapeRel read_shape(const Json& j, const std::string& path) const;
  OutputDecl read_output(const Json& j, const std::string& path) const;
  OutputInit read_output_init(const Json& j, const std::string& path) const;
  // The kernel's parameters in order: names of inputs and outputs, and extras in place.
  void read_params(const Json& arr, KernelSpec& s) const;
  // A parameter or struct field: an input or output name, or an extra.
  ParamField read_param_field(const Json& j, const std::string& path) const;
  Extra read_extra(const Json& j, const std::string& path) const;
  Geometry read_geometry(const Json& j, const std::string& path) const;

  // spec_json_configs.cpp: tunables and configs, the foreign compiler, the backward spec.
  void read_tactics(const Json& root, KernelSpec& s) const;
  // "BLOCK", or {"name": "VEC", "define": true, "type": "bool"}.
  Tunable read_tunable(const Json& j, std::size_t i) const;
  // {"BLOCK": 256, "VEC": 4, "requires": [...]}: a value for every tunable.
  Config read_config(const Json& j, const std::string& p,
                     const std::vector<Tunable>& tunables) const;
  void read_foreign(const Json& root, KernelSpec& s) const;
  BackwardSpec read_backward(const Json& b, const std::string& base_dir) const;
  std::map<std::string, std::string> read_from(const Json& from) const;
  LaunchStep read_launch(const Json& j, const std::string& path, const std::string& base_dir) const;

  std::string origin_;
  std::string prefix_;  // "backward." (and so on) while reading a nested backward spec
};

}  // namespace kernelop::detail
