// Identifier-aware text matching for names and template arguments, without std::regex: the
// texts can come from untrusted packages, and libstdc++'s regex recurses once per character.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/error.hpp"

namespace kernelop::detail {

/// [A-Za-z_]: a character that may start an identifier.
inline bool is_ident_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
/// [A-Za-z0-9_]: a character of an identifier.
inline bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}
/// The characters of regex's \s.
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/// What `name` is under the renames of a `from` map (a backward's or a later launch's: its name ->
/// the op's): its entry, else the name itself. The one lookup both use.
inline std::string_view renamed(const std::map<std::string, std::string>& from,
                                const std::string& name) {
  auto it = from.find(name);
  return it == from.end() ? std::string_view(name) : std::string_view(it->second);
}

/// An ASCII C identifier ([A-Za-z_][A-Za-z0-9_]*), independent of the locale: the one
/// identifier rule for op, input and parameter names and for expression leaves.
inline bool is_identifier(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s) {
    if (!is_ident_char(c)) return false;
  }
  return true;
}

// Matches what the regex \s*ID(::ID)*\s*(<.*>)?\s* (ID = [A-Za-z_][A-Za-z0-9_]*) matches, in
// linear time and constant stack. As in the regex, '.' is anything but a line break.
inline bool is_kernel_name(std::string_view s) {
  std::size_t i = 0;
  auto skip_space = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
  };
  auto identifier = [&] {
    if (i >= s.size() || !is_ident_start(s[i])) return false;
    while (i < s.size() && is_ident_char(s[i])) ++i;
    return true;
  };
  skip_space();
  if (!identifier()) return false;
  while (s.substr(i, 2) == "::") {
    i += 2;
    if (!identifier()) return false;
  }
  skip_space();
  if (i < s.size() && s[i] == '<') {
    std::size_t gt = s.rfind('>');  // only the last '>' can leave nothing but space after it
    if (gt == std::string_view::npos || gt <= i) return false;
    if (s.substr(i, gt - i).find_first_of("\r\n") != std::string_view::npos) return false;
    i = gt + 1;
  }
  skip_space();
  return i == s.size();
}

// Matches what the regex [A-Za-z_][A-Za-z0-9_]*(=.*)? matches ('.': anything but a line break).
inline bool is_define(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  std::size_t i = 1;
  while (i < s.size() && is_ident_char(s[i])) ++i;
  if (i == s.size()) return true;
  return s[i] == '=' && s.find_first_of("\r\n", i) == std::string_view::npos;
}

/// The items' texts separated by ", " (or `separator`): join(dtypes, dtype_name).
template <class Range, class Text>
std::string join(const Range& items, Text text, std::string_view separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    out += std::string_view(text(item));
    first = false;
  }
  return out;
}
template <class Range>
std::string join(const Range& items, std::string_view separator = ", ") {
  return join(
      items, [](const auto& item) -> std::string_view { return item; }, separator);
}

/// "[1, -2]": a list of integers as specs and messages print it.
template <class Ints>
std::string int_list_text(const Ints& ints) {
  return "[" + join(ints, [](auto v) { return std::to_string(v); }) + "]";
}

/// The first position at or after `from` where the identifier `word` occurs in `text` as a
/// whole word (a maximal run of identifier characters); npos when there is none. Linear time.
inline std::size_t find_word(std::string_view text, std::string_view word, std::size_t from = 0) {
  std::size_t p = from;
  while (p < text.size()) {
    if (!is_ident_char(text[p])) {
      ++p;
      continue;
    }
    std::size_t end = p;
    while (end < text.size() && is_ident_char(text[end])) ++end;
    bool whole = p == 0 || !is_ident_char(text[p - 1]);
    if (whole && text.substr(p, end - p) == word) return p;
    p = end;
  }
  return std::string_view::npos;
}

/// `text` cut to about `max` characters around `column` (0-based), for messages that point at
/// a position: "[...]dim(x, 0) +* 1[...]".
inline std::string excerpt(std::string_view text, std::size_t column, std::size_t max = 80) {
  if (text.size() <= max) return std::string(text);
  std::size_t half = max / 2;
  std::size_t from = column > half ? column - half : 0;
  if (from + max > text.size()) from = text.size() - max;
  return (from > 0 ? "[...]" : "") + std::string(text.substr(from, max)) +
         (from + max < text.size() ? "[...]" : "");
}

/// The names of the `__global__` functions declared in CUDA source `text`, in order, each once:
/// the identifier before the first '(' after the keyword that is not an attribute
/// (`__launch_bounds__(...)`, `__attribute__((...))`). Comments are not skipped: a name in one is
/// only a suggestion.
std::vector<std::string> global_function_names(std::string_view text);

/// The Levenshtein distance between `a` and `b` (for "did you mean" lists).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// Up to `max` of `names` closest to `wanted` (edit distance, then order), as "'a', 'b'".
std::string closest_names(std::string_view wanted, const std::vector<std::string>& names,
                          std::size_t max = 5);

}  // namespace kernelop::detail
