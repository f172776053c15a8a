// The compile cache: atomic writes, verified reads, safe directory, in-memory layer.
#include "kernelop/cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/file_io.hpp"
#include "core/framing.hpp"
#include "core/hash.hpp"
#include "kernelop/error.hpp"
#include "kernelop/numbers.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;

constexpr detail::FrameFormat kEntryFormat{
    {'K', 'O', 'P', 'C', 'A', 'C', 'H', 'E'}, CompileCache::kFormatVersion, "compile cache entry"};

}  // namespace

CompileCache::CompileCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path CompileCache::default_dir() {
  return detail::cache_root();
}

CompileCache& CompileCache::global() {
  static CompileCache cache(
      [] { return env_flag("KERNELOP_DISABLE_CACHE") ? fs::path() : default_dir(); }());
  return cache;
}

bool CompileCache::prepare() {
  {
    std::lock_guard lock(mutex_);
    if (dir_.empty() || unusable_) return false;
    if (dir_checked_) return true;
  }
  // Unusable (cannot be created, not a directory, not writable): a warning and memory only.
  auto give_up = [&](const std::string& why) {
    std::lock_guard lock(mutex_);
    if (!unusable_) {
      warn("compile cache directory '" + detail::shorten(dir_.string(), 300) + "' is unusable (" +
           why + "); compiling without the persistent cache");
    }
    unusable_ = true;
    return false;
  };
  if (std::string why = detail::private_directory(dir_, "compile cache"); !why.empty()) {
    return give_up(why);
  }
  std::lock_guard lock(mutex_);
  dir_checked_ = true;
  return true;
}

std::string CompileCache::key_of(std::string_view text) {
  return detail::hash_bytes(text).hex();
}

fs::path CompileCache::entry_path(const std::string& key) const {
  return dir_ / key.substr(0, 2) / (key + ".kce");
}

std::shared_ptr<const std::string> CompileCache::load(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
  }
  auto payload = load_from_disk(key);
  if (!payload) {
    std::lock_guard lock(mutex_);
    ++stats_.misses;
  }
  return payload;
}

std::shared_ptr<const std::string> CompileCache::load_from_disk(const std::string& key) {
  auto miss = [] { return nullptr; };
  if (!prepare()) return miss();
  fs::path path = entry_path(key);
  std::string file, why;
  switch (detail::try_read_file(path, detail::kMaxBinaryFileBytes, &file, &why)) {
    case detail::ReadStatus::Ok:
      break;
    case detail::ReadStatus::Missing:
      return miss();
    case detail::ReadStatus::Failed:
      warn("cannot read compile cache entry '" + path.string() + "' (" + why + "); recompiling");
      return miss();
  }
  detail::Unframed entry;
  why = detail::unframe(file, kEntryFormat, entry);
  if (!why.empty()) {
    warn("compile cache entry '" + path.string() + "' is damaged (" + why +
         "); ignoring it and recompiling");
    std::error_code ignored;
    fs::remove(path, ignored);
    std::lock_guard lock(mutex_);
    ++stats_.corrupt;
    return nullptr;
  }
  auto payload = std::make_shared<const std::string>(entry.body);
  std::lock_guard lock(mutex_);
  ++stats_.disk_hits;
  memory_[key] = payload;
  return payload;
}

void CompileCache::store(const std::string& key, std::string payload) {
  auto shared = std::make_shared<const std::string>(std::move(payload));
  {
    std::lock_guard lock(mutex_);
    memory_[key] = shared;
    ++stats_.stores;
  }
  if (!prepare()) return;
  fs::path path = entry_path(key);
  if (std::string why = detail::make_directories(path.parent_path(), 0700); !why.empty()) {
    warn("cannot write compile cache entry '" + path.string() + "': " + why);
    return;
  }
  std::string file = detail::frame(kEntryFormat, 0, *shared);
  if (std::string why = detail::write_file_atomically(path, file, 0600); !why.empty()) {
    warn("cannot write compile cache entry '" + path.string() + "': " + why);
  }
}

CompileCache::Stats CompileCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

// Note [compile once per host]: flock() on <entry>.lock serialises the processes (and threads)
// that miss one key; the holder compiles and stores, the others wake up and find the entry. The
// kernel drops a flock when its holder exits or crashes, so nothing can wedge the lock. The
// holder unlinks the lock file before unlocking; a waiter that then holds a lock on an unlinked
// file notices (its descriptor no longer matches the path) and locks the new file instead.
CompileCache::EntryLock::~EntryLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

std::unique_ptr<CompileCache::EntryLock> CompileCache::lock_entry(const std::string& key) {
  if (!prepare()) return nullptr;
  fs::path path = entry_path(key);
  path += ".lock";
  if (!detail::make_directories(path.parent_path(), 0700).empty()) return nullptr;
  int fd = detail::lock_file(path);
  if (fd < 0) return nullptr;  // uncoordinated, still correct: writes are atomic
  return std::unique_ptr<EntryLock>(new EntryLock(fd, path));
}

}  // namespace kernelop
