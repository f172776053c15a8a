// NVRTC program lifetime and result retrieval.
#include "compile/nvrtc_program.hpp"

#include "kernelop/error.hpp"

namespace kernelop::detail {

void check_nvrtc(nvrtcResult result, const char* call, const std::string& program) {
  if (result == NVRTC_SUCCESS) return;
  KERNELOP_FAIL(Compile) << call << "(program=" << program
                         << ") failed: " << nvrtcGetErrorString(result) << " ("
                         << static_cast<int>(result) << ")";
}

NvrtcProgram::NvrtcProgram(const std::string& source, const std::string& name) : name_(name) {
  nvrtcProgram p = nullptr;
  check_nvrtc(nvrtcCreateProgram(&p, source.c_str(), name.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram", name_);
  program_.reset(p);
}

void NvrtcProgram::add_name_expression(const std::string& expression) {
  check_nvrtc(nvrtcAddNameExpression(program_.get(), expression.c_str()), "nvrtcAddNameExpression",
              name_);
}

nvrtcResult NvrtcProgram::compile(const std::vector<std::string>& options) {
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const auto& o : options) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(program_.get(), static_cast<int>(argv.size()), argv.data());
  if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) return r;
  check_nvrtc(r, "nvrtcCompileProgram", name_);
  return r;
}

std::string NvrtcProgram::log() const {
  std::size_t size = 0;
  check_nvrtc(nvrtcGetProgramLogSize(program_.get(), &size), "nvrtcGetProgramLogSize", name_);
  std::string log(size, '\0');
  check_nvrtc(nvrtcGetProgramLog(program_.get(), log.data()), "nvrtcGetProgramLog", name_);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  // NVRTC separates ptxas' messages from the front end's with a NUL: keep both.
  for (char& c : log) c = c == '\0' ? '\n' : c;
  return log;
}

std::string NvrtcProgram::ptx() const {
  std::size_t size = 0;
  if (nvrtcGetPTXSize(program_.get(), &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string ptx(size, '\0');
  check_nvrtc(nvrtcGetPTX(program_.get(), ptx.data()), "nvrtcGetPTX", name_);
  ptx.resize(size - 1);  // drop the terminating NUL
  return ptx;
}

std::string NvrtcProgram::cubin() const {
  std::size_t size = 0;
  if (nvrtcGetCUBINSize(program_.get(), &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string cubin(size, '\0');
  check_nvrtc(nvrtcGetCUBIN(program_.get(), cubin.data()), "nvrtcGetCUBIN", name_);
  return cubin;
}

std::string NvrtcProgram::lowered_name(const std::string& expression) const {
  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(program_.get(), expression.c_str(), &lowered),
              "nvrtcGetLoweredName", name_);
  return lowered;
}

std::string nvrtc_supported_archs() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(static_cast<std::size_t>(n));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::string out;
  for (int a : archs) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return out;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion", "-");
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace kernelop::detail
