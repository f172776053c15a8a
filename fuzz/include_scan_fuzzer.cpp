// libFuzzer target: the include scanner's lexer (Note [include scan]) over any bytes. It must
// never crash, hang or read out of bounds, and what it reports must be well formed: lines within
// the text, header names without a newline or their closing delimiter. The first byte selects
// whether trigraphs are on (C++11/14) or off.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "compile/include_scan.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "include_scan_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  bool trigraphs = data[0] & 1;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  int last_line = 0;
  kernelop::detail::find_includes(
      text, trigraphs, [&](const kernelop::detail::IncludeDirective& d) {
        using Kind = kernelop::detail::IncludeDirective::Kind;
        if (d.line < 1 || d.line > lines) fail("a directive's line is outside the text");
        if (d.line < last_line) fail("directives are reported out of order");
        last_line = d.line;
        if (d.name.size() > text.size()) fail("a header name longer than the text");
        if (d.name.find('\n') != std::string::npos) fail("a header name spans lines");
        if (d.kind == Kind::Quoted && d.name.find('"') != std::string::npos)
          fail("a quoted header name contains its delimiter");
        if (d.kind == Kind::Angle && d.name.find('>') != std::string::npos)
          fail("an angled header name contains its delimiter");
        if (d.kind == Kind::Computed && !d.name.empty()) fail("a computed include has a name");
      });
  return 0;
}
