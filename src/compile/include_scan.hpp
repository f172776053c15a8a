// Finds the files a source includes, transitively, so the compile cache key can cover their
// contents. NVRTC reports no dependencies, so kernelop scans the preprocessor directives itself.
//
// Note [include resolution]: one rule, used by the compile and by the cache key alike. The
// compile gives NVRTC the source's own directory as the program's directory (never the working
// directory) and the include directories as -I, in order; the preprocessor then looks for
// `#include "x"` beside the including file, then in the -I directories, and for `<x>` in the -I
// directories only. The scan resolves every name exactly that way.
//
// Note [include scan]: the lexer follows the preprocessor's translation phases 1-3: line splices
// (backslash-newline, also inside a directive's name), comments (a block comment may sit between
// `#` and `include` and may span lines), digraphs (`%:`), trigraphs when the language standard
// has them (C++11/14: `??=`, and `??/` as a splice), string, character and raw string literals
// (whose contents are never directives), and `__has_include(...)`. It over-approximates: includes
// in inactive #if branches are followed too, which only makes the key more sensitive. Whatever
// cannot be resolved statically -- a computed include (`#include MACRO`), `#include_next`, a
// header that exists but cannot be read -- makes the scan report `bypass`, and the caller
// compiles without the persistent cache, with a warning that names the file and line. Headers
// under the toolkit's include directories (CUDA, CCCL: CUB, Thrust, libcu++) are not scanned:
// they are immutable per toolkit install, and the key covers the toolkit's identity instead. An
// include that resolves to something that is neither a regular file nor a directory (a FIFO,
// /dev/zero) is an error before NVRTC ever opens it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash.hpp"

namespace kernelop::detail {

/// One include-like directive found by the lexer.
struct IncludeDirective {
  enum class Kind { Quoted, Angle, Computed, Next } kind = Kind::Quoted;
  std::string name;  ///< the header name between the quotes or brackets
  int line = 0;      ///< physical line of the directive, 1-based
};

/// Lexes `text` (phases 1-3) and calls `visit` for each #include, #include_next and
/// __has_include / __has_include_next. Never throws on any input.
void find_includes(std::string_view text, bool trigraphs,
                   const std::function<void(const IncludeDirective&)>& visit);

struct IncludedFile {
  std::string spelled;  ///< as written: "my.h" or <cuda_fp16.h>
  std::string path;     ///< resolved path; empty when not found (e.g. an NVRTC built-in header)
  std::string state;    ///< "file" (hashed), "toolkit", "missing" or "directory"
  Digest content;       ///< hash of the file's contents (state "file" only)
};

struct IncludeRules {
  std::string source_dir;                 ///< the top-level source's directory; "" = none
  std::vector<std::string> dirs;          ///< the -I directories in order (absolute)
  std::vector<std::string> toolkit_dirs;  ///< headers under these are not scanned
  bool trigraphs = false;                 ///< the language standard has trigraphs
};

struct IncludeScan {
  std::vector<IncludedFile> files;
  std::string bypass;  ///< why the persistent cache cannot cover the source; "" if it can
};

/// Scans `source` (named `source_name` in messages) and everything it includes. Throws Error(Io)
/// when an include resolves to a file kernelop must never open (a FIFO, a device).
IncludeScan scan_includes(std::string_view source, const std::string& source_name,
                          const IncludeRules& rules);

}  // namespace kernelop::detail
