// Content hashing (XXH3-128) for cache keys and integrity checks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kernelop::detail {

/// A 128-bit content hash, printed as 32 lowercase hex digits.
struct Digest {
  std::array<std::uint8_t, 16> bytes{};
  std::string hex() const;
  bool operator==(const Digest&) const = default;
};

Digest hash_bytes(std::string_view data);

/// Streaming hasher. `field()` prefixes each value with its length, so that concatenations of
/// different fields never collide ("ab" + "c" != "a" + "bc").
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& field(std::string_view data);
  Hasher& field(std::int64_t value);
  Digest digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kernelop::detail
