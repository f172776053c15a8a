// Error construction and kind names.
#include "kernelop/error.hpp"

#include <utility>

namespace kernelop {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Spec:
      return "SpecError";
    case ErrorKind::Type:
      return "TypeError";
    case ErrorKind::Compile:
      return "CompileError";
    case ErrorKind::Cache:
      return "CacheError";
    case ErrorKind::Launch:
      return "LaunchError";
    case ErrorKind::Io:
      return "IoError";
    case ErrorKind::Format:
      return "FormatError";
    case ErrorKind::Internal:
      return "InternalError";
  }
  return "Error";
}

Error::Error(ErrorKind kind, std::string message, ErrorContext context)
    : kind_(kind), message_(std::move(message)), context_(std::move(context)) {}

}  // namespace kernelop
