// Numbers and flags from users, parsed whole (Note [numbers from users]).
#include "kernelop/numbers.hpp"

#include <charconv>
#include <cstdlib>
#include <string>

#include "core/words.hpp"
#include "kernelop/error.hpp"

namespace kernelop {

std::optional<std::int64_t> parse_int64(std::string_view text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return std::nullopt;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  std::string_view text(v);
  if (text == "1") return true;
  if (text == "0") return false;
  KERNELOP_FAIL(Spec) << "environment variable " << name << "='" << detail::shorten(text, 60)
                      << "': expected 1 (on) or 0 (off)";
}

}  // namespace kernelop
