// A bounds-checked walk over the ELF sections of a CUBIN.
#include "compile/cubin_info.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
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

// Attributes of .nv.info sections: {format, attribute, size or value}, then `size` bytes for
// kFormatSval, nothing for the other formats.
constexpr std::uint8_t kRegCount = 0x2f;    // EIATTR_REGCOUNT {symbol, registers}
constexpr std::uint8_t kFrameSize = 0x11;   // EIATTR_FRAME_SIZE {symbol, bytes}
constexpr std::uint8_t kReqNtid = 0x10;     // EIATTR_REQNTID {x, y, z}
constexpr std::uint8_t kKparamInfo = 0x17;  // EIATTR_KPARAM_INFO {index, ordinal, offset, flags}
// The same record as ptxas also writes it: {index, ordinal, offset, u16 size, u16 flags}.
constexpr std::uint8_t kKparamInfoV2 = 0x45;
constexpr std::uint8_t kFormatSval = 0x04;

// A CUBIN's sections and the symbol index of one kernel.
struct Elf {
  std::string_view bytes;
  std::vector<Section> sections;
  std::uint16_t shstrndx = 0;

  static std::optional<Elf> open(std::string_view b) {
    if (b.size() < 64 ||
        b.substr(0, 4) !=
            "\x7f"
            "ELF" ||
        b[4] != 2)
      return std::nullopt;
    Elf elf{b, {}, 0};
    std::uint64_t shoff = 0;
    std::uint16_t shentsize = 0, shnum = 0;
    if (!read(b, 0x28, &shoff) || !read(b, 0x3a, &shentsize) || !read(b, 0x3c, &shnum) ||
        !read(b, 0x3e, &elf.shstrndx) || shentsize < 64 || elf.shstrndx >= shnum) {
      return std::nullopt;
    }
    elf.sections.resize(shnum);
    for (std::uint16_t i = 0; i < shnum; ++i) {
      std::uint64_t at = shoff + static_cast<std::uint64_t>(i) * shentsize;
      Section& s = elf.sections[i];
      if (!read(b, at, &s.name) || !read(b, at + 4, &s.type) || !read(b, at + 24, &s.offset) ||
          !read(b, at + 32, &s.size) || !read(b, at + 40, &s.link) || !read(b, at + 44, &s.info) ||
          !read(b, at + 56, &s.entsize)) {
        return std::nullopt;
      }
    }
    return elf;
  }

  std::string_view name_of(const Section& s) const {
    return c_string(bytes, sections[shstrndx].offset + s.name);
  }

  // The symbol index of `lowered` in the symbol table, or -1.
  std::int64_t symbol(std::string_view lowered) const {
    std::int64_t found = -1;
    for (const Section& s : sections) {
      if (s.type != 2 /* SHT_SYMTAB */ || s.link >= sections.size() || s.entsize < 24) continue;
      for (std::uint64_t off = 0; off + 24 <= s.size; off += s.entsize) {
        std::uint32_t st_name = 0;
        if (!read(bytes, s.offset + off, &st_name)) break;
        if (c_string(bytes, sections[s.link].offset + st_name) == lowered)
          found = static_cast<std::int64_t>(off / s.entsize);
      }
    }
    return found;
  }

  // Calls `visit(attribute, value offset, value size)` for each sized attribute of section `s`.
  void attributes(
      const Section& s,
      const std::function<void(std::uint8_t, std::uint64_t, std::uint16_t)>& visit) const {
    for (std::uint64_t off = 0; off + 4 <= s.size;) {
      std::uint8_t format = 0, attr = 0;
      std::uint16_t size = 0;
      if (!read(bytes, s.offset + off, &format) || !read(bytes, s.offset + off + 1, &attr) ||
          !read(bytes, s.offset + off + 2, &size)) {
        break;
      }
      if (format != kFormatSval) {
        off += 4;
        continue;
      }
      if (off + 4 + size > s.size) break;
      visit(attr, s.offset + off + 4, size);
      off += 4 + size;
    }
  }
};

}  // namespace

std::optional<ResourceUsage> cubin_resource_usage(std::string_view b, std::string_view lowered) {
  std::optional<Elf> elf = Elf::open(b);
  if (!elf) return std::nullopt;
  std::int64_t symbol = elf->symbol(lowered);
  if (symbol < 0) return std::nullopt;
  ResourceUsage u;
  bool found = false;
  for (const Section& s : elf->sections) {
    std::string_view name = elf->name_of(s);
    if (name == ".nv.info") {
      elf->attributes(s, [&](std::uint8_t attr, std::uint64_t at, std::uint16_t size) {
        std::uint32_t sym = 0, value = 0;
        if (size >= 8 && read(b, at, &sym) && read(b, at + 4, &value) &&
            sym == static_cast<std::uint64_t>(symbol)) {
          if (attr == kRegCount) {
            u.registers = static_cast<int>(value);
            found = true;
          }
          if (attr == kFrameSize) u.stack_frame = static_cast<int>(value);
        }
      });
    } else if (name.substr(0, 11) == ".nv.shared." && name.substr(11) == lowered) {
      u.static_shared = static_cast<int>(s.size);
    }
  }
  if (!found) return std::nullopt;
  return u;
}

std::optional<CubinEntry> cubin_entry(std::string_view b, std::string_view lowered) {
  std::optional<Elf> elf = Elf::open(b);
  if (!elf || elf->symbol(lowered) < 0) return std::nullopt;
  struct Param {
    std::uint32_t ordinal, offset, size;
  };
  std::vector<Param> params;
  CubinEntry entry;
  bool section = false, malformed = false;
  for (const Section& s : elf->sections) {
    std::string_view name = elf->name_of(s);
    if (name.substr(0, 9) != ".nv.info." || name.substr(9) != lowered) continue;
    section = true;
    elf->attributes(s, [&](std::uint8_t attr, std::uint64_t at, std::uint16_t size) {
      if (attr == kKparamInfo || attr == kKparamInfoV2) {
        std::uint16_t ordinal = 0, offset = 0;
        std::uint32_t flags = 0;
        if (size < 12 || !read(b, at + 4, &ordinal) || !read(b, at + 6, &offset) ||
            !read(b, at + 8, &flags)) {
          malformed = true;
          return;
        }
        params.push_back(
            {ordinal, offset, attr == kKparamInfo ? (flags >> 18) & 0x3fff : flags & 0xffff});
      } else if (attr == kReqNtid) {
        std::array<std::uint32_t, 3> v{1, 1, 1};
        for (std::uint64_t i = 0; i < 3 && 4 * (i + 1) <= size; ++i) read(b, at + 4 * i, &v[i]);
        if (size < 4 ||
            std::any_of(v.begin(), v.end(), [](std::uint32_t x) { return x == 0 || x > 1024; })) {
          malformed = true;
          return;
        }
        entry.required_block = std::array<int, 3>{static_cast<int>(v[0]), static_cast<int>(v[1]),
                                                  static_cast<int>(v[2])};
      }
    });
  }
  if (!section || malformed) return std::nullopt;
  std::sort(params.begin(), params.end(),
            [](const Param& x, const Param& y) { return x.ordinal < y.ordinal; });
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    if (p.ordinal != i || p.size == 0 || p.offset < end) return std::nullopt;
    end = std::uint64_t{p.offset} + p.size;
    switch (p.size) {
      case 1:
      case 2:
      case 4:
      case 8:
        entry.param_types.push_back(".b" + std::to_string(p.size * 8));
        break;
      default:
        entry.param_types.push_back(".b8[" + std::to_string(p.size) + "]");
    }
  }
  return entry;
}

}  // namespace kernelop::detail
