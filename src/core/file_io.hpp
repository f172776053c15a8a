// Every file kernelop reads or writes goes through here: bounded reads of regular files only,
// atomic writes, directory creation, path normalisation, and little-endian fields. Shared by the
// compile cache, packages, spec files, sources and headers.
//
// Note [untrusted files]: whatever kernelop reads from disk may be hostile or simply wrong (a
// FIFO, /dev/zero, a symlink loop, a 5000-character name, a file the user cannot read). Reads
// open with O_NONBLOCK (a FIFO never blocks the open), refuse anything that is not a regular
// file, and stop at a size cap; every OS failure becomes an Error(Io) that names the file, the
// operation and the OS reason. No std::filesystem call that can throw is used on a user path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/words.hpp"
#include "kernelop/file_io.hpp"

namespace kernelop::detail {

// The public part (kernelop/file_io.hpp), under the names kernelop's own code uses.
using kernelop::kMaxBinaryFileBytes;
using kernelop::kMaxTextFileBytes;
using kernelop::make_directories;
using kernelop::read_file;
using kernelop::write_file;

/// What happened to a read.
enum class ReadStatus {
  Ok,
  Missing,  ///< the path (or a directory on it) does not exist
  Failed,   ///< anything else; `why` says what, in words
};

/// Reads the whole regular file at `path`, at most `max_bytes`. On failure `*why` is set to the
/// reason ("Permission denied", "not a regular file (it is a FIFO)", "larger than the 64 MiB
/// limit (...)").
ReadStatus try_read_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                         std::string* out, std::string* why);

/// Writes through a temporary file in the same directory and rename(), so that readers see the
/// old contents or the new, never a part, and concurrent writers of one path are safe. Returns
/// an empty string on success, else why it failed. Refuses to replace anything that is not a
/// regular file (/dev/null, a FIFO, a directory), and leaves no temporary file behind.
std::string write_file_atomically(const std::filesystem::path& path, std::string_view bytes,
                                  mode_t mode);

/// The root of kernelop's per-user caches: $KERNELOP_CACHE_DIR, else $XDG_CACHE_HOME/kernelop,
/// else ~/.cache/kernelop, else a per-user folder in the temporary directory. The compile cache
/// lives there and tuning tables in its tuning/ folder.
std::filesystem::path cache_root();

/// Note [private directories]: a directory kernelop loads machine code or tuning decisions from
/// must be its user's own. Creates `dir` (mode 0700) if needed; returns "" when it is usable,
/// else why it is unusable (cannot be created, not a directory, not writable: the caller warns
/// and goes on without it). Throws Error(Cache) when it is unsafe (another owner, writable by
/// group or others), naming `what` ("compile cache", "tuning table") and how to fix it.
std::string private_directory(const std::filesystem::path& dir, std::string_view what);

/// Opens (creating, 0600) and exclusively flock()s the lock file `path`, waiting for another
/// holder; the descriptor (close it to release), or -1 when it cannot be locked. A lock file
/// replaced while waiting is opened again, so two holders never lock different files.
int lock_file(const std::filesystem::path& path);

/// The file type of `st_mode` in words, for messages: "a FIFO", "a directory", ...
std::string_view file_type_name(mode_t mode);

/// An absolute, normalised spelling of `path` (symlinks resolved where the path exists), so that
/// "t.json", "./t.json" and "$PWD/t.json" name the same thing. Never throws; falls back to the
/// lexically normalised absolute path.
std::string normalized_path(const std::filesystem::path& path);

}  // namespace kernelop::detail
