// libFuzzer target: any bytes given to parse_package() give a Package or a kernelop::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/hash.hpp"
#include "kernelop/error.hpp"
#include "kernelop/package.hpp"

namespace {

// Layout of the fixed header (Note [package format]).
constexpr std::size_t kHeaderSize = 40;
constexpr std::size_t kSizeOffset = 16;
constexpr std::size_t kChecksumOffset = 24;

// Only kernelop::Error may escape parse_package(); anything else propagates and crashes.
std::optional<kernelop::Package> parse(std::string_view bytes) {
  try {
    return kernelop::parse_package(bytes, "fuzz.kop");
  } catch (const kernelop::Error&) {
    return std::nullopt;
  }
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "package_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // As given: exercises the magic, version, size and checksum checks.
  parse(bytes);
  if (size < kHeaderSize) return 0;
  // With the size and checksum repaired, mutations get past the checksum to the section table
  // and the metadata, where the interesting parsing is.
  std::string fixed(bytes);
  std::uint64_t file_size = fixed.size();
  std::memcpy(fixed.data() + kSizeOffset, &file_size, sizeof file_size);
  kernelop::detail::Digest digest =
      kernelop::detail::hash_bytes(std::string_view(fixed).substr(kHeaderSize));
  std::memcpy(fixed.data() + kChecksumOffset, digest.bytes.data(), digest.bytes.size());
  std::optional<kernelop::Package> package = parse(fixed);
  if (!package) return 0;
  // A package that loads must save again, load back, and then save to the same bytes.
  // With its backward chain (format 4), which a package of an op with a backward must carry.
  std::string written = kernelop::write_package_bytes(package->image, package->backward);
  std::optional<kernelop::Package> again = parse(written);
  if (!again) fail("a package that loaded does not load after write_package_bytes()");
  if (kernelop::write_package_bytes(again->image, again->backward) != written) {
    fail("write_package_bytes(parse_package(b)) is not a fixed point");
  }
  return 0;
}
