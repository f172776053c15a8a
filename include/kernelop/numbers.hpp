// Numbers and flags from users (command-line values, environment variables, tactic ids): each
// text parses whole or is refused (Note [numbers from users]). The one place that reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kernelop {

/// Note [numbers from users]: "12abc", "1e3" (as an int), " 7", "0x10", "" and out-of-range
/// values are refused, never read as their prefix or wrapped. Ints are decimal with an optional
/// '-'; floats are decimal or scientific (and inf/nan); bools are exactly "true", "false", "1"
/// or "0".
std::optional<std::int64_t> parse_int64(std::string_view text);
std::optional<double> parse_double(std::string_view text);
std::optional<bool> parse_bool(std::string_view text);

/// An on/off environment variable: unset or empty is `fallback`, "1" on, "0" off; any other
/// value is an Error(Spec) naming the variable and its value.
bool env_flag(const char* name, bool fallback = false);

}  // namespace kernelop
