// Error construction and kind names; the warning channel.
#include "kernelop/error.hpp"

#include <iostream>
#include <mutex>
#include <utility>

namespace kernelop {
namespace {

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

}  // namespace

void set_warning_handler(std::function<void(std::string_view)> handler) {
  std::lock_guard lock(warning_mutex());
  warning_handler() = std::move(handler);
}

void warn(std::string_view message) {
  std::lock_guard lock(warning_mutex());
  if (warning_handler()) warning_handler()(message);
}

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

ErrorClass error_class(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Spec:
      return ErrorClass::Value;
    case ErrorKind::Type:
      return ErrorClass::Type;
    case ErrorKind::Compile:
    case ErrorKind::Cache:
    case ErrorKind::Launch:
    case ErrorKind::Io:
    case ErrorKind::Format:
    case ErrorKind::Internal:
      return ErrorClass::Runtime;
  }
  return ErrorClass::Runtime;
}

Error::Error(ErrorKind kind, std::string message, ErrorContext context)
    : kind_(kind), message_(std::move(message)), context_(std::move(context)) {}

}  // namespace kernelop
