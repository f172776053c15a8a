// RAII wrapper over an NVRTC program; every failure names the call, the program and the code.
#pragma once

#include <nvrtc.h>

#include <memory>
#include <string>
#include <vector>

namespace kernelop::detail {

class NvrtcProgram {
 public:
  NvrtcProgram(const std::string& source, const std::string& name);

  void add_name_expression(const std::string& expression);
  /// Compiles; returns false on a compilation error (the log says why).
  /// NVRTC_SUCCESS, NVRTC_ERROR_COMPILATION or NVRTC_ERROR_INVALID_OPTION (both with a log);
  /// throws Error(Compile) for any other failure.
  nvrtcResult compile(const std::vector<std::string>& options);
  std::string log() const;
  std::string ptx() const;    ///< empty when the program produced no PTX
  std::string cubin() const;  ///< empty when the program produced no CUBIN (compute_XX)
  std::string lowered_name(const std::string& expression) const;

 private:
  struct Deleter {
    void operator()(_nvrtcProgram* p) const noexcept { nvrtcDestroyProgram(&p); }
  };
  std::unique_ptr<_nvrtcProgram, Deleter> program_;
  std::string name_;
};

/// "13.0"
std::string nvrtc_version();

/// The architectures this NVRTC compiles for, "sm_75, sm_80, ..." (empty if it cannot say).
std::string nvrtc_supported_archs();

/// Throws Error(Compile): "<call>(program=<name>) failed: NVRTC_ERROR_... (<code>)".
void check_nvrtc(nvrtcResult result, const char* call, const std::string& program);

}  // namespace kernelop::detail
