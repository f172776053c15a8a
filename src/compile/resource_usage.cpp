// Parsing of ptxas' verbose output.
#include "compile/resource_usage.hpp"

#include <regex>
#include <sstream>

namespace kernelop::detail {

std::optional<ResourceUsage> parse_resource_usage(const std::string& log,
                                                  const std::string& lowered_name,
                                                  const std::string& arch) {
  static const std::regex kCompiling(
      R"(ptxas info\s*: Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex kProperties(R"(ptxas info\s*: Function properties for (\S+))");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  static const std::regex kCmem(R"((\d+) bytes cmem\[0\])");
  std::istringstream lines(log);
  std::string line, current, current_arch;
  ResourceUsage usage;
  bool used = false;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kCompiling)) {
      current = m[1].str();
      current_arch = m[2].str();
      continue;
    }
    if (std::regex_search(line, m, kProperties)) {
      current = m[1].str();
      continue;
    }
    if (current != lowered_name || current_arch != arch) continue;
    if (std::regex_search(line, m, kFrame)) {
      usage.stack_frame = std::stoi(m[1].str());
      usage.spill_stores = std::stoi(m[2].str());
      usage.spill_loads = std::stoi(m[3].str());
    }
    if (std::regex_search(line, m, kUsed)) {
      usage.registers = std::stoi(m[1].str());
      used = true;
    }
    if (std::regex_search(line, m, kSmem)) usage.static_shared = std::stoi(m[1].str());
    if (std::regex_search(line, m, kCmem)) usage.const_bytes = std::stoi(m[1].str());
  }
  if (!used) return std::nullopt;
  return usage;
}

std::string strip_ptxas_report(const std::string& log) {
  std::istringstream lines(log);
  std::string line, out;
  while (std::getline(lines, line)) {
    if (line.rfind("ptxas info", 0) == 0 || line.rfind("ptxas         .", 0) == 0) continue;
    out += line + "\n";
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace kernelop::detail
