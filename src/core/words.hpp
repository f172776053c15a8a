// Identifier-aware text matching for names and template arguments, without std::regex: the
// texts can come from untrusted packages, and libstdc++'s regex recurses once per character.
#pragma once

#include <string_view>

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

}  // namespace kernelop::detail
