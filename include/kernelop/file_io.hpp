// Reading and writing files as kernelop does (Note [untrusted files] in src/core/file_io.hpp):
// bounded reads of regular files only, atomic writes, directory creation. Every failure is an
// Error(Io) naming the file, the operation and the OS reason, or a returned reason.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kernelop {

/// Size caps for files kernelop reads (one table, one place).
inline constexpr std::uint64_t kMaxTextFileBytes = 64ull << 20;      ///< specs, sources, headers
inline constexpr std::uint64_t kMaxBinaryFileBytes = 1024ull << 20;  ///< packages, cache entries

/// Reads a whole regular file or throws Error(Io): "cannot read <what> '<path>': <why>".
std::string read_file(const std::filesystem::path& path, std::string_view what,
                      std::uint64_t max_bytes = kMaxTextFileBytes);

/// Writes through a temporary file in the same directory and rename() (readers see the old
/// contents or the new, never a part), or throws Error(Io): "cannot write <what> '<path>': <why>".
/// Refuses to replace anything that is not a regular file.
void write_file(const std::filesystem::path& path, std::string_view bytes, std::string_view what,
                mode_t mode = 0644);

/// Creates `dir` and its missing parents with `mode`; "" when it exists as a directory or was
/// created, else why not (a parent that is a file, a name too long, permission denied).
std::string make_directories(const std::filesystem::path& dir, mode_t mode);

}  // namespace kernelop
