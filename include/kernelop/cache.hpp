// A persistent, content-addressed store of compiled code, with an in-memory layer on top.
//
// Note [cache safety]: entries are written to a temporary file and renamed into place, so a
// reader never sees a partial entry and concurrent writers of one key are safe (last rename
// wins, both contents are identical). Every read verifies a magic, a format version, the
// length and a checksum; a damaged entry is reported through the warning handler, removed and
// recompiled, never trusted; a payload with a valid checksum is still decoded and checked as if
// hostile by the compile step. The directory is created with mode 0700 and refused when another
// user owns it or it is writable by group or others: loading machine code from a directory
// others can write is a code-injection hole. A directory that cannot be used at all (not
// creatable, not a directory, not writable) is a warning, and the cache is memory-only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "kernelop/error.hpp"

namespace kernelop {

class CompileCache {
 public:
  /// Bump when the entry layout or the meaning of its payload changes (golden tests pin it).
  static constexpr std::uint32_t kFormatVersion = 3;

  /// A cache in `dir`; an empty path gives a memory-only cache. The directory is created and
  /// checked on first use.
  explicit CompileCache(std::filesystem::path dir);

  /// The process-wide cache: $KERNELOP_CACHE_DIR, else $XDG_CACHE_HOME/kernelop, else
  /// ~/.cache/kernelop; memory-only when KERNELOP_DISABLE_CACHE=1.
  static CompileCache& global();
  static std::filesystem::path default_dir();

  const std::filesystem::path& dir() const { return dir_; }

  /// Creates the directory if needed and checks it. False when there is no usable directory
  /// (memory-only, or it cannot be created or written: warned once, then memory-only). Throws
  /// Error(Cache) when the directory is unsafe (another owner, writable by group or others).
  bool prepare();

  /// The payload stored under `key`, or nullptr. Throws Error(Cache) if the directory is unsafe.
  std::shared_ptr<const std::string> load(const std::string& key);
  void store(const std::string& key, std::string payload);

  /// The key of an entry whose identity is `text` (everything its payload depends on): the hex
  /// digest of the text, safe as a file name whatever the text holds.
  static std::string key_of(std::string_view text);

  /// The path of the entry for `key` (whether or not it exists).
  std::filesystem::path entry_path(const std::string& key) const;

  struct Stats {
    std::uint64_t memory_hits = 0, disk_hits = 0, misses = 0, corrupt = 0, stores = 0;
  };
  Stats stats() const;

  /// An exclusive per-entry lock across processes (Note [compile once per host]); released
  /// when destroyed.
  class EntryLock {
   public:
    EntryLock(const EntryLock&) = delete;
    EntryLock& operator=(const EntryLock&) = delete;
    ~EntryLock();

   private:
    friend class CompileCache;
    EntryLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
    int fd_;
    std::filesystem::path path_;
  };
  /// Waits for and takes the lock of `key`'s entry; nullptr when there is no usable directory.
  std::unique_ptr<EntryLock> lock_entry(const std::string& key);

  /// The entry of `key` from the directory only (skipping the memory layer), or nullptr; not
  /// counted as a miss (it is the second look after lock_entry).
  std::shared_ptr<const std::string> load_from_disk(const std::string& key);

 private:
  std::filesystem::path dir_;
  mutable std::mutex mutex_;
  bool dir_checked_ = false, unusable_ = false;
  std::map<std::string, std::shared_ptr<const std::string>> memory_;
  Stats stats_;
};

}  // namespace kernelop
