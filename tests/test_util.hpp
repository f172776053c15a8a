// Helpers shared by the CPU tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kernelop/error.hpp"
#include "kernelop/spec_json.hpp"

namespace kernelop::testing {

inline std::filesystem::path source_dir() {
  return KERNELOP_SOURCE_DIR;
}
inline std::filesystem::path examples_dir() {
  return source_dir() / "examples";
}

/// Loads examples/<name>.json.
inline OpDecl example(const std::string& name) {
  return load_op_file(examples_dir() / (name + ".json"));
}

/// Runs `fn`, expecting kernelop::Error of `kind` whose message contains `needle`.
template <class Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::string& needle) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(error_kind_name(e.kind()), error_kind_name(kind)) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
    return;
  }
  ADD_FAILURE() << "expected an error containing: " << needle;
}

}  // namespace kernelop::testing
