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

/// A relu-shaped op over `source`: input x float32, extra numel(x), output y like x, flat launch.
inline OpDecl relu_like_op(const std::string& source, const std::string& kernel = "k",
                           const std::string& op_name = "test::op") {
  OpDecl d;
  d.op_name = op_name;
  d.spec.kernel_source = source;
  d.spec.kernel_name = kernel;
  d.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float32, false}};
  d.spec.outputs =
      std::vector<OutputDecl>{OutputDecl{"y", SameAs{std::string("x"), {}}, {}, {}, {}}};
  d.spec.extras = {Numel{"x", false}};
  d.spec.geometry = Elementwise{};
  return d;
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
