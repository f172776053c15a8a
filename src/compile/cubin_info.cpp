// A bounds-checked walk over the ELF sections of a CUBIN.
#include "compile/cubin_info.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kernelop::detail {
namespace {

struct Section {
  std::uint32_t name, type;
  std::uint64_t offset, size;
  std::uint32_t link, info;
  std::uint64_t entsize;
};

template <class T>
bool read(std::string_view bytes, std::uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

std::string_view c_string(std::string_view bytes, std::uint64_t offset) {
  if (offset >= bytes.size()) return {};
  std::string_view rest = bytes.substr(offset);
  return rest.substr(0, rest.find('\0'));
}

constexpr std::uint8_t kRegCount = 0x2f;   // EIATTR_REGCOUNT {symbol, registers}
constexpr std::uint8_t kFrameSize = 0x11;  // EIATTR_FRAME_SIZE {symbol, bytes}
constexpr std::uint8_t kFormatSval = 0x04;

}  // namespace

std::optional<ResourceUsage> cubin_resource_usage(std::string_view b, std::string_view lowered) {
  if (b.size() < 64 ||
      b.substr(0, 4) !=
          "\x7f"
          "ELF" ||
      b[4] != 2)
    return std::nullopt;
  std::uint64_t shoff = 0;
  std::uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!read(b, 0x28, &shoff) || !read(b, 0x3a, &shentsize) || !read(b, 0x3c, &shnum) ||
      !read(b, 0x3e, &shstrndx) || shentsize < 64 || shstrndx >= shnum) {
    return std::nullopt;
  }
  std::vector<Section> secs(shnum);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    std::uint64_t at = shoff + static_cast<std::uint64_t>(i) * shentsize;
    Section& s = secs[i];
    if (!read(b, at, &s.name) || !read(b, at + 4, &s.type) || !read(b, at + 24, &s.offset) ||
        !read(b, at + 32, &s.size) || !read(b, at + 40, &s.link) || !read(b, at + 44, &s.info) ||
        !read(b, at + 56, &s.entsize)) {
      return std::nullopt;
    }
  }
  auto name_of = [&](const Section& s) { return c_string(b, secs[shstrndx].offset + s.name); };
  // The kernel's symbol index, from the symbol table.
  std::int64_t symbol = -1;
  for (const Section& s : secs) {
    if (s.type != 2 /* SHT_SYMTAB */ || s.link >= shnum || s.entsize < 24) continue;
    for (std::uint64_t off = 0; off + 24 <= s.size; off += s.entsize) {
      std::uint32_t st_name = 0;
      if (!read(b, s.offset + off, &st_name)) break;
      if (c_string(b, secs[s.link].offset + st_name) == lowered)
        symbol = static_cast<std::int64_t>(off / s.entsize);
    }
  }
  if (symbol < 0) return std::nullopt;
  ResourceUsage u;
  bool found = false;
  for (const Section& s : secs) {
    std::string_view name = name_of(s);
    if (name == ".nv.info") {
      for (std::uint64_t off = 0; off + 4 <= s.size;) {
        std::uint8_t format = 0, attr = 0;
        std::uint16_t size = 0;
        if (!read(b, s.offset + off, &format) || !read(b, s.offset + off + 1, &attr) ||
            !read(b, s.offset + off + 2, &size)) {
          break;
        }
        if (format != kFormatSval) {
          off += 4;
          continue;
        }
        std::uint32_t sym = 0, value = 0;
        if (size >= 8 && read(b, s.offset + off + 4, &sym) && read(b, s.offset + off + 8, &value) &&
            sym == static_cast<std::uint64_t>(symbol)) {
          if (attr == kRegCount) {
            u.registers = static_cast<int>(value);
            found = true;
          }
          if (attr == kFrameSize) u.stack_frame = static_cast<int>(value);
        }
        off += 4 + size;
      }
    } else if (name.substr(0, 11) == ".nv.shared." && name.substr(11) == lowered) {
      u.static_shared = static_cast<int>(s.size);
    }
  }
  if (!found) return std::nullopt;
  return u;
}

}  // namespace kernelop::detail
