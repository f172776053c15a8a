// Bounded reads of regular files, atomic writes, directories and path spelling (Note [untrusted
// files] in file_io.hpp).
#include "core/file_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "kernelop/error.hpp"

namespace kernelop::detail {

namespace fs = std::filesystem;

namespace {

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// Closes a file descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string_view file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

ReadStatus try_read_file(const fs::path& path, std::uint64_t max_bytes, std::string* out,
                         std::string* why) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) {
    int err = errno;
    *why = std::strerror(err);
    return err == ENOENT ? ReadStatus::Missing : ReadStatus::Failed;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    *why = std::strerror(errno);
    return ReadStatus::Failed;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "not a regular file (it is " + std::string(file_type_name(st.st_mode)) + ")";
    return ReadStatus::Failed;
  }
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    *why = "larger than the " + mib(max_bytes) + " limit (" + std::to_string(size) + " bytes)";
    return ReadStatus::Failed;
  }
  // One byte more than fstat said, so that EOF is seen without growing; read on if the file grew
  // since, but never past the cap.
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(size) + 1);
  std::size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      if (bytes.size() > max_bytes) {
        *why = "larger than the " + mib(max_bytes) + " limit (it grew while being read)";
        return ReadStatus::Failed;
      }
      bytes.resize(bytes.size() + 65536);
    }
    ssize_t n = ::read(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::strerror(errno);
      return ReadStatus::Failed;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  *out = std::move(bytes);
  return ReadStatus::Ok;
}

std::string write_file_atomically(const fs::path& path, std::string_view bytes, mode_t mode) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return "it exists and is " + std::string(file_type_name(st.st_mode)) +
           ", not a regular file; refusing to replace it";
  }
  std::string tmp = path.string() + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return std::strerror(errno);
  std::size_t written = 0;
  int err = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  if (!err && ::fchmod(fd, mode) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return std::strerror(err);
  }
  return {};
}

fs::path cache_root() {
  if (const char* env = std::getenv("KERNELOP_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return fs::path(xdg) / "kernelop";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "kernelop";
  }
  return fs::temp_directory_path() / ("kernelop-" + std::to_string(::geteuid()));
}

std::string private_directory(const fs::path& dir, std::string_view what) {
  if (std::string why = make_directories(dir, 0700); !why.empty()) return why;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  // Unsafe (others control it): an error, never a silent fallback.
  std::string_view trusted = what == "compile cache" ? "machine code" : "tuning decisions";
  if (st.st_uid != ::geteuid()) {
    KERNELOP_FAIL(Cache) << what << " directory '" << dir.string() << "' is owned by uid "
                         << st.st_uid << ", not by this user (uid " << ::geteuid()
                         << "); kernelop refuses to load " << trusted
                         << " others control. Use a directory of your own (KERNELOP_CACHE_DIR"
                         << (what == "compile cache" ? "" : ", or LoadOptions::tuning_dir") << ")";
  }
  if ((st.st_mode & 022) != 0) {
    std::ostringstream mode;
    mode << std::oct << (st.st_mode & 0777);
    KERNELOP_FAIL(Cache) << what << " directory '" << dir.string()
                         << "' is writable by group or others (mode 0" << mode.str()
                         << "); kernelop refuses to load " << trusted
                         << " others can replace. Run 'chmod 700 " << dir.string()
                         << "' or use another directory (KERNELOP_CACHE_DIR"
                         << (what == "compile cache" ? "" : ", or LoadOptions::tuning_dir") << ")";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return std::strerror(errno);
  return "";
}

int lock_file(const fs::path& path) {
  for (;;) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -1;
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    struct stat held {
    }, named{};
    if (rc == 0 && ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      return fd;
    }
    ::close(fd);
    if (rc != 0) return -1;
  }
}

std::string normalized_path(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  fs::path canonical = fs::weakly_canonical(absolute, ec);
  if (ec) canonical = absolute.lexically_normal();
  std::string s = canonical.string();
  // weakly_canonical keeps a trailing separator of a directory spelled "dir/".
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace kernelop::detail

namespace kernelop {

namespace fs = std::filesystem;
using detail::file_type_name;
using detail::ReadStatus;
using detail::shorten;
using detail::try_read_file;
using detail::write_file_atomically;

std::string read_file(const fs::path& path, std::string_view what, std::uint64_t max_bytes) {
  std::string out, why;
  if (try_read_file(path, max_bytes, &out, &why) != ReadStatus::Ok) {
    KERNELOP_FAIL(Io) << "cannot read " << what << " '" << shorten(path.string(), 300)
                      << "': " << why;
  }
  return out;
}

void write_file(const fs::path& path, std::string_view bytes, std::string_view what, mode_t mode) {
  if (std::string why = write_file_atomically(path, bytes, mode); !why.empty()) {
    KERNELOP_FAIL(Io) << "cannot write " << what << " '" << shorten(path.string(), 300)
                      << "': " << why;
  }
}

std::string make_directories(const fs::path& dir, mode_t mode) {
  if (dir.empty()) return {};
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return "'" + shorten(dir.string(), 300) + "' exists and is " +
           std::string(file_type_name(st.st_mode)) + ", not a directory";
  }
  if (errno != ENOENT) return "'" + shorten(dir.string(), 300) + "': " + std::strerror(errno);
  fs::path parent = dir.parent_path();
  if (!parent.empty() && parent != dir) {
    if (std::string why = make_directories(parent, mode); !why.empty()) return why;
  }
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    return "cannot create '" + shorten(dir.string(), 300) + "': " + std::strerror(errno);
  }
  return {};
}

}  // namespace kernelop
