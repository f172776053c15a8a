// The compile cache: atomic writes, verified reads, safe directory, in-memory layer.
#include "kernelop/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/file_io.hpp"
#include "core/hash.hpp"
#include "kernelop/error.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'O', 'P', 'C', 'A', 'C', 'H', 'E'};
constexpr std::size_t kHeaderSize = 8 + 4 + 4 + 8 + 16;

std::mutex& warning_mutex() {
  static std::mutex m;
  return m;
}
std::function<void(std::string_view)>& warning_handler() {
  static std::function<void(std::string_view)> handler = [](std::string_view message) {
    std::cerr << "kernelop: warning: " << message << "\n";
  };
  return handler;
}

std::string errno_text() {
  return std::strerror(errno);
}

// Creates `dir` and missing parents with mode 0700.
void make_private_dirs(const fs::path& dir) {
  if (dir.empty() || fs::exists(dir)) return;
  make_private_dirs(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    KERNELOP_FAIL(Cache) << "cannot create compile cache directory '" << dir.string()
                         << "': " << errno_text();
  }
}

}  // namespace

void set_warning_handler(std::function<void(std::string_view)> handler) {
  std::lock_guard lock(warning_mutex());
  warning_handler() = std::move(handler);
}

void warn(std::string_view message) {
  std::lock_guard lock(warning_mutex());
  if (warning_handler()) warning_handler()(message);
}

CompileCache::CompileCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path CompileCache::default_dir() {
  if (const char* env = std::getenv("KERNELOP_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return fs::path(xdg) / "kernelop";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "kernelop";
  }
  return fs::temp_directory_path() / ("kernelop-" + std::to_string(::geteuid()));
}

CompileCache& CompileCache::global() {
  static CompileCache cache([] {
    const char* off = std::getenv("KERNELOP_DISABLE_CACHE");
    return (off && std::string_view(off) == "1") ? fs::path() : default_dir();
  }());
  return cache;
}

void CompileCache::prepare() {
  {
    std::lock_guard lock(mutex_);
    if (dir_checked_ || dir_.empty()) return;
  }
  make_private_dirs(dir_);
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0) {
    KERNELOP_FAIL(Cache) << "compile cache directory '" << dir_.string()
                         << "' is not accessible: " << errno_text();
  }
  if (!S_ISDIR(st.st_mode)) {
    KERNELOP_FAIL(Cache) << "compile cache path '" << dir_.string() << "' is not a directory";
  }
  if (st.st_uid != ::geteuid()) {
    KERNELOP_FAIL(Cache) << "compile cache directory '" << dir_.string() << "' is owned by uid "
                         << st.st_uid << ", not by this user (uid " << ::geteuid()
                         << "); kernelop refuses to load machine code others control. Set "
                            "KERNELOP_CACHE_DIR to a directory of your own";
  }
  if ((st.st_mode & 022) != 0) {
    std::ostringstream mode;
    mode << std::oct << (st.st_mode & 0777);
    KERNELOP_FAIL(Cache) << "compile cache directory '" << dir_.string()
                         << "' is writable by group or others (mode 0" << mode.str()
                         << "); kernelop refuses to load machine code others can replace. Run "
                            "'chmod 700 "
                         << dir_.string() << "' or set KERNELOP_CACHE_DIR";
  }
  std::lock_guard lock(mutex_);
  dir_checked_ = true;
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
  prepare();
  if (dir_.empty()) {
    std::lock_guard lock(mutex_);
    ++stats_.misses;
    return nullptr;
  }
  fs::path path = entry_path(key);
  std::string file;
  if (!detail::read_file(path, &file)) {
    std::lock_guard lock(mutex_);
    ++stats_.misses;
    return nullptr;
  }
  std::string why;
  if (file.size() < kHeaderSize || std::memcmp(file.data(), kMagic, 8) != 0) {
    why = "bad header";
  } else if (detail::get_le<std::uint32_t>(file, 8) != kFormatVersion) {
    why = "format version " + std::to_string(detail::get_le<std::uint32_t>(file, 8)) +
          ", expected " + std::to_string(kFormatVersion);
  } else if (detail::get_le<std::uint64_t>(file, 16) != file.size() - kHeaderSize) {
    why = "truncated: " + std::to_string(file.size() - kHeaderSize) + " of " +
          std::to_string(detail::get_le<std::uint64_t>(file, 16)) + " payload bytes";
  } else {
    detail::Digest stored;
    std::memcpy(stored.bytes.data(), file.data() + 24, 16);
    if (!(detail::hash_bytes(std::string_view(file).substr(kHeaderSize)) == stored)) {
      why = "checksum mismatch";
    }
  }
  if (!why.empty()) {
    warn("compile cache entry '" + path.string() + "' is damaged (" + why +
         "); ignoring it and recompiling");
    std::error_code ignored;
    fs::remove(path, ignored);
    std::lock_guard lock(mutex_);
    ++stats_.corrupt;
    ++stats_.misses;
    return nullptr;
  }
  auto payload = std::make_shared<const std::string>(file.substr(kHeaderSize));
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
  prepare();
  if (dir_.empty()) return;
  fs::path path = entry_path(key);
  make_private_dirs(path.parent_path());
  std::string file;
  file.reserve(kHeaderSize + shared->size());
  file.append(kMagic, 8);
  detail::put_le<std::uint32_t>(file, kFormatVersion);
  detail::put_le<std::uint32_t>(file, 0);
  detail::put_le<std::uint64_t>(file, shared->size());
  file.append(reinterpret_cast<const char*>(detail::hash_bytes(*shared).bytes.data()), 16);
  file.append(*shared);
  if (std::string why = detail::write_file_atomically(path, file, 0600); !why.empty()) {
    warn("cannot write compile cache entry '" + path.string() + "': " + why);
  }
}

CompileCache::Stats CompileCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CompileCache::clear_memory() {
  std::lock_guard lock(mutex_);
  memory_.clear();
}

}  // namespace kernelop
