// Whole-file reads, atomic writes and little-endian fields: shared by the compile cache, packages
// and spec files.
#pragma once

#include <sys/types.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace kernelop::detail {

/// Reads a whole regular file into *out; false when it cannot be read or is a directory.
bool read_file(const std::filesystem::path& path, std::string* out);

/// Writes through a temporary file in the same directory and rename(), so that readers see the
/// old contents or the new, never a part, and concurrent writers of one path are safe. Returns
/// an empty string on success, else why it failed (strerror).
std::string write_file_atomically(const std::filesystem::path& path, std::string_view bytes,
                                  mode_t mode);

/// Appends / reads a fixed-size field in host byte order (little-endian on every supported host).
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

}  // namespace kernelop::detail
