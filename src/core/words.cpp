// Name lists for messages: the __global__ functions of a source, and the closest of a list.
#include "core/words.hpp"

#include <algorithm>
#include <utility>

namespace kernelop::detail {

std::vector<std::string> global_function_names(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t at = find_word(text, "__global__"); at != std::string_view::npos;
       at = find_word(text, "__global__", at + 1)) {
    std::size_t p = at + 10;
    std::string last;  // the latest identifier seen
    while (p < text.size()) {
      char c = text[p];
      if (is_ident_start(c)) {
        std::size_t end = p;
        while (end < text.size() && is_ident_char(text[end])) ++end;
        last.assign(text.substr(p, end - p));
        p = end;
        continue;
      }
      if (c == '(') {
        if (last == "__launch_bounds__" || last == "__attribute__" || last == "__declspec" ||
            last == "alignas" || last == "__cluster_dims__" || last == "__maxnreg__") {
          int depth = 0;  // skip the attribute's parentheses
          for (; p < text.size(); ++p) {
            if (text[p] == '(') ++depth;
            if (text[p] == ')' && --depth == 0) break;
          }
          ++p;
          last.clear();
          continue;
        }
        if (!last.empty() && std::find(out.begin(), out.end(), last) == out.end()) {
          out.push_back(last);
        }
        break;
      }
      if (c == ';' || c == '{' || c == '}') break;  // not a function declaration
      ++p;
    }
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_names(std::string_view wanted, const std::vector<std::string>& names,
                          std::size_t max) {
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // distance, index
  // Names are cut for the distance too: a hostile 10 MB name costs no more than a short one.
  std::string_view w = wanted.substr(0, 200);
  for (std::size_t i = 0; i < names.size(); ++i) {
    ranked.emplace_back(edit_distance(w, std::string_view(names[i]).substr(0, 200)), i);
  }
  std::stable_sort(ranked.begin(), ranked.end());
  std::string out;
  for (std::size_t k = 0; k < ranked.size() && k < max; ++k) {
    out += (k ? ", '" : "'") + shorten(names[ranked[k].second], 80) + "'";
  }
  return out;
}

}  // namespace kernelop::detail
