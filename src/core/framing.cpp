#include "core/framing.hpp"

#include <cstring>

#include "core/file_io.hpp"

namespace kernelop::detail {

std::string frame(const FrameFormat& format, std::uint32_t tag, std::string_view body,
                  std::uint32_t version) {
  std::string out;
  out.reserve(kFrameHeaderSize + body.size());
  out.append(format.magic.data(), format.magic.size());
  put_le<std::uint32_t>(out, version ? version : format.version);
  put_le<std::uint32_t>(out, tag);
  put_le<std::uint64_t>(out, kFrameHeaderSize + body.size());
  Digest digest = hash_bytes(body);
  out.append(reinterpret_cast<const char*>(digest.bytes.data()), digest.bytes.size());
  out.append(body);
  return out;
}

std::string unframe(std::string_view bytes, const FrameFormat& format, Unframed& out) {
  if (bytes.size() < kFrameHeaderSize ||
      std::memcmp(bytes.data(), format.magic.data(), format.magic.size()) != 0) {
    return "not a kernelop " + std::string(format.kind) + " (bad magic; " +
           std::to_string(bytes.size()) + " bytes)";
  }
  auto version = get_le<std::uint32_t>(bytes, 8);
  std::uint32_t oldest = format.oldest ? format.oldest : format.version;
  if (version < oldest || version > format.version) {
    return "format version " + std::to_string(version) + " is not supported (this kernelop reads " +
           (oldest == format.version ? "" : std::to_string(oldest) + " to ") +
           std::to_string(format.version) + ")";
  }
  out.version = version;
  if (auto size = get_le<std::uint64_t>(bytes, 16); size != bytes.size()) {
    return "truncated or padded: the header says " + std::to_string(size) +
           " bytes, the file has " + std::to_string(bytes.size());
  }
  Digest stored;
  std::memcpy(stored.bytes.data(), bytes.data() + 24, stored.bytes.size());
  out.body = bytes.substr(kFrameHeaderSize);
  out.checksum = hash_bytes(out.body);
  if (!(out.checksum == stored)) return "checksum mismatch: the file is damaged";
  out.tag = get_le<std::uint32_t>(bytes, 12);
  return "";
}

}  // namespace kernelop::detail
