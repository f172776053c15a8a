// JSON helpers shared by spec files, packages and the compile cache: one strict parser (depth
// limit, no duplicate keys) and one encoding of resource usage with range checks on every read.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/image.hpp"

namespace kernelop::detail {

using Json = nlohmann::json;

/// The deepest nesting of arrays and objects accepted (recursion in the parser and the readers).
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text` strictly into J (nlohmann::json or ordered_json): nesting deeper than
/// kMaxJsonDepth and a key given twice in one object are errors, like malformed JSON. nullopt
/// with `*why` ("nests deeper than 64 levels", "field 'x' is given twice", or the parser's
/// message) on failure.
template <class J>
std::optional<J> parse_json_strict(std::string_view text, std::string* why) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  bool too_deep = false;
  typename J::parser_callback_t check = [&](int depth, typename J::parse_event_t event, J& parsed) {
    using E = typename J::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= kMaxJsonDepth)
      too_deep = true;
    if (too_deep) return false;  // drops the value, so nothing deeper is built
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() &&
        !keys.back().insert(parsed.template get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.template get<std::string>();
    }
    return true;
  };
  J root;
  try {
    root = J::parse(text.begin(), text.end(), check);
  } catch (const typename J::exception& e) {
    // parse_error, and out_of_range for numbers beyond double ("1e999").
    *why = e.what();
    return std::nullopt;
  }
  if (too_deep) {
    *why = "nests deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return std::nullopt;
  }
  if (!duplicate.empty()) {
    *why = "field '" + duplicate + "' is given twice";
    return std::nullopt;
  }
  return root;
}

/// [[registers, stack, spill stores, spill loads, static shared, const bytes], ...]
Json usage_to_json(const std::vector<ResourceUsage>& usage);
/// The inverse; nullopt with `*why` unless every entry is six integers in [-1, INT_MAX].
std::optional<std::vector<ResourceUsage>> usage_from_json(const Json& j, std::string* why);

}  // namespace kernelop::detail
