// libFuzzer target: any text given to parse_op_json() + derive_plan() gives a plan or an Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "kernelop/error.hpp"
#include "kernelop/plan.hpp"
#include "kernelop/spec_json.hpp"

#ifndef KERNELOP_EXAMPLES_DIR
#error "KERNELOP_EXAMPLES_DIR must name the examples folder (source_file resolves against it)"
#endif

namespace {

// Only kernelop::Error may escape; anything else propagates and crashes the fuzzer.
std::optional<kernelop::OpDecl> parse(std::string_view text) {
  try {
    return kernelop::parse_op_json(text, KERNELOP_EXAMPLES_DIR, "fuzz.json");
  } catch (const kernelop::Error&) {
    return std::nullopt;
  }
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "spec_json_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<kernelop::OpDecl> decl =
      parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!decl) return 0;
  // spec_json.hpp promises parse_op_json(print_op_json(d), d.base_dir) == d.
  std::optional<kernelop::OpDecl> again = parse(kernelop::print_op_json(*decl));
  if (!again) fail("a spec that parsed does not parse after print_op_json()");
  if (!(*again == *decl)) fail("parse_op_json(print_op_json(d)) != d");
  try {
    kernelop::derive_plan(*decl);
  } catch (const kernelop::Error&) {
  }
  return 0;
}
