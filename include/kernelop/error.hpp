// The one error model of kernelop: an error kind plus a message and the context it arose in.
#pragma once

#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

namespace kernelop {

/// What went wrong, coarsely. Each kind maps to one Python exception type:
/// (error_class below).
enum class ErrorKind {
  Spec,      ///< the kernel spec is invalid (detected before anything is compiled or registered)
  Type,      ///< an argument has the wrong type (e.g. a shape relation indexed by a float)
  Compile,   ///< NVRTC failed, or the kernel's signature does not match the calling convention
  Cache,     ///< the compile cache is unusable (e.g. its directory is writable by others)
  Launch,    ///< a launch-time check or a driver call failed
  Io,        ///< a file could not be read or written
  Format,    ///< a package (or other binary input) is malformed, damaged or of another version
  Internal,  ///< a bug in kernelop
};

std::string_view error_kind_name(ErrorKind kind);

/// The class of exception a kind raises in Python and PyTorch (the one mapping; both the Python
/// extensions and the torch adapter use it).
enum class ErrorClass {
  Value,    ///< ValueError: the spec, or a value derived from it, is wrong
  Type,     ///< TypeError: an argument has the wrong type
  Runtime,  ///< RuntimeError: compiling, caching, loading, launching or kernelop itself failed
};
ErrorClass error_class(ErrorKind kind);

/// Where an error arose. Empty fields are unknown or irrelevant.
struct ErrorContext {
  std::string op;      ///< "namespace::name"
  std::string kernel;  ///< the kernel's name in the source
  std::string arch;    ///< e.g. "sm_90"
  std::string stage;   ///< "validate", "derive", "compile", "cache", ...
  std::string log;     ///< full compiler log, when there is one
};

/// ErrorContext::stage of a call that broke one of its op's requirements (a size outside the
/// ones it was compiled for, among others): Note [first-use growth] in kernelop/torch.hpp.
inline constexpr std::string_view kRequirementStage = "requirement";

/// The exception thrown by every kernelop API. what() is the complete, human-readable message.
class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message, ErrorContext context = {});

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }
  const ErrorContext& context() const noexcept { return context_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ErrorKind kind_;
  std::string message_;
  ErrorContext context_;
};

/// Where warnings go (default: stderr, prefixed "kernelop: warning: "); nullptr drops them.
/// Warnings report what kernelop did instead of failing: an uncached build, a damaged cache entry.
void set_warning_handler(std::function<void(std::string_view)> handler);
void warn(std::string_view message);

namespace detail {

/// `text` cut to about `max` characters for a message, keeping its start and end and saying how
/// long it was: every user string a message quotes goes through it. Characters are UTF-8 code
/// points: a cut never splits one, and the length said is in characters.
inline std::string shorten(std::string_view text, std::size_t max = 120) {
  auto starts = [](char c) { return (static_cast<unsigned char>(c) & 0xC0u) != 0x80u; };
  std::size_t chars = 0;
  for (char c : text) chars += starts(c) ? 1 : 0;
  // Text that is not UTF-8 (runs of continuation bytes) is cut by bytes too: at most 4 a char.
  if ((chars <= max && text.size() <= 4 * max) || max < 10) return std::string(text);
  std::size_t head = (max - 5) * 2 / 3, tail = max - 5 - head;
  // Byte offsets of the head's end and the tail's start, on character boundaries.
  std::size_t head_end = 0, seen = 0;
  while (head_end < text.size() && head_end < 4 * head &&
         (seen < head || !starts(text[head_end]))) {
    if (starts(text[head_end])) ++seen;
    ++head_end;
  }
  std::size_t tail_start = text.size();
  for (seen = 0; tail_start > head_end && seen < tail && text.size() - tail_start < 4 * tail;) {
    --tail_start;
    if (starts(text[tail_start])) ++seen;
  }
  return std::string(text.substr(0, head_end)) + "[...]" + std::string(text.substr(tail_start)) +
         " (" + std::to_string(chars) + " characters)";
}

// Builds an Error with operator<<; see KERNELOP_FAIL.
class ErrorStream {
 public:
  explicit ErrorStream(ErrorKind kind) : kind_(kind) {}
  template <class T>
  ErrorStream& operator<<(const T& value) {
    out_ << value;
    return *this;
  }
  ErrorStream& context(ErrorContext context) {
    context_ = std::move(context);
    return *this;
  }
  Error build() const { return Error(kind_, out_.str(), context_); }

 private:
  ErrorKind kind_;
  std::ostringstream out_;
  ErrorContext context_;
};

struct ErrorThrower {
  // operator& binds looser than <<, so the whole message is streamed before this runs.
  [[noreturn]] void operator&(const ErrorStream& stream) const { throw stream.build(); }
};

}  // namespace detail
}  // namespace kernelop

// Note [raising errors]: one builder, detail::ErrorStream, behind every way kernelop raises:
//   KERNELOP_FAIL(Kind) << ...             throw unconditionally;
//   KERNELOP_CHECK(cond, Kind) << ...      throw when cond is false;
//   KERNELOP_INTERNAL_CHECK(cond) << ...   an invariant of kernelop itself ("cannot happen"):
//                                          Error(Internal), naming the condition, file and line;
//   KERNELOP_RAISE(stream) << ...          throw a prefixed stream a helper started (the field
//                                          path of a spec error, the op of a signature error).
// The message is streamed, and so built, only when the error is thrown. The PyTorch adapter
// raises c10 errors (TORCH_CHECK) where PyTorch's own error types must reach its callers.

/// Throws kernelop::Error of the given kind: `KERNELOP_FAIL(Spec) << "op " << name << ": ...";`
#define KERNELOP_FAIL(kind) \
  ::kernelop::detail::ErrorThrower() & ::kernelop::detail::ErrorStream(::kernelop::ErrorKind::kind)

/// Throws kernelop::Error of the given kind when `cond` is false.
#define KERNELOP_CHECK(cond, kind) \
  if (cond) {                      \
  } else                           \
    KERNELOP_FAIL(kind)

/// Throws Error(Internal) when an invariant kernelop guarantees does not hold.
#define KERNELOP_INTERNAL_CHECK(cond)                                                         \
  if (cond) {                                                                                 \
  } else                                                                                      \
    KERNELOP_FAIL(Internal) << "internal error (a bug in kernelop): '" #cond "' is false at " \
                            << __FILE__ << ":" << __LINE__ << " "

/// Throws a stream that a helper began (`KERNELOP_RAISE(fail_at(path)) << "is empty"`).
#define KERNELOP_RAISE(stream) ::kernelop::detail::ErrorThrower() & (stream)
