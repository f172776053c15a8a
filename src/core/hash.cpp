// XXH3-128 through xxHash's inline (header-only) build.
#include "core/hash.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kernelop::detail {

struct Hasher::State {
  XXH3_state_t xxh;
};

namespace {
Digest to_digest(XXH128_hash_t h) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  Digest d;
  for (std::size_t i = 0; i < d.bytes.size(); ++i) d.bytes[i] = canonical.digest[i];
  return d;
}
}  // namespace

std::string Digest::hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (auto b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

Digest hash_bytes(std::string_view data) {
  return to_digest(XXH3_128bits(data.data(), data.size()));
}

Hasher::Hasher() : state_(std::make_unique<State>()) {
  XXH3_128bits_reset(&state_->xxh);
}
Hasher::~Hasher() = default;

Hasher& Hasher::field(std::string_view data) {
  auto n = static_cast<std::uint64_t>(data.size());
  XXH3_128bits_update(&state_->xxh, &n, sizeof n);
  XXH3_128bits_update(&state_->xxh, data.data(), data.size());
  return *this;
}

Hasher& Hasher::field(std::int64_t value) {
  XXH3_128bits_update(&state_->xxh, &value, sizeof value);
  return *this;
}

Digest Hasher::digest() const {
  return to_digest(XXH3_128bits_digest(&state_->xxh));
}

}  // namespace kernelop::detail
