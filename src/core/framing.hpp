// The binary framing shared by kernelop's files: .kop packages and compile cache entries.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/hash.hpp"

namespace kernelop::detail {

// Note [binary framing]: every binary file kernelop writes is
//   magic[8] | format version u32 LE | tag u32 LE | file size u64 LE | XXH3-128(body)[16] | body
// The tag is the format's own (a package's section count; 0 in a cache entry). A reader checks,
// in order, the magic, the version, that the size is the file's, and the checksum, before it
// looks at a byte of the body: a damaged, truncated or foreign file is named, never parsed.
inline constexpr std::size_t kFrameHeaderSize = 40;

static_assert(std::endian::native == std::endian::little,
              "kernelop's binary files are little-endian; so is every host it supports");

/// Appends / reads a fixed-size little-endian field (the caller checks `offset` is in range).
template <class T>
void put_le(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}
template <class T>
T get_le(std::string_view in, std::size_t offset) {
  T value;
  std::memcpy(&value, in.data() + offset, sizeof(T));
  return value;
}

struct FrameFormat {
  std::array<char, 8> magic;
  std::uint32_t version;     ///< the newest version: what unframe reads up to
  std::string_view kind;     ///< for messages: "package", "compile cache entry"
  std::uint32_t oldest = 0;  ///< the oldest version still read (0: `version` only)
};

struct Unframed {
  std::uint32_t version = 0;
  std::uint32_t tag = 0;
  std::string_view body;  ///< a view into the framed bytes
  Digest checksum;        ///< of the body
};

/// The framed file of `body`, of format version `version` (0: format.version).
std::string frame(const FrameFormat& format, std::uint32_t tag, std::string_view body,
                  std::uint32_t version = 0);

/// Checks the frame of `bytes`; returns "" and fills `out`, or what is wrong with it:
/// "not a kernelop package (bad magic; 3 bytes)", "format version 2 is not supported (this
/// kernelop reads 1)", "truncated or padded: the header says 96 bytes, the file has 95",
/// "checksum mismatch: the file is damaged".
std::string unframe(std::string_view bytes, const FrameFormat& format, Unframed& out);

}  // namespace kernelop::detail
