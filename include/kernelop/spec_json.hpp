// The JSON form of a kernel spec (docs/spec-format.md): parse, print, load from a file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "kernelop/spec.hpp"

namespace kernelop {

/// Parses a spec document. Relative paths (source_file, include_paths) resolve against
/// `base_dir`; `origin` names the document in error messages (usually its file path).
/// Throws Error(Spec) naming the field path on any malformed or unknown field.
OpDecl parse_op_json(std::string_view text, const std::string& base_dir,
                     std::string_view origin = "<json>");

/// Reads and parses a spec file; its folder is the base directory.
OpDecl load_op_file(const std::filesystem::path& path);

struct JsonWriteOptions {
  int indent = 2;
  /// Write the source text inline even when the spec refers to a source file.
  bool inline_source = false;
};

/// Prints a spec document; parse_op_json(print_op_json(d), d.base_dir) == d.
std::string print_op_json(const OpDecl& decl, const JsonWriteOptions& options = {});

}  // namespace kernelop
