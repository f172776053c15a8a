// Parsing of ptxas' verbose output.
#include "compile/resource_usage.hpp"

#include <sstream>

namespace kernelop::detail {

namespace {

// The unsigned number ending just before `pos` (spaces skipped); -1 when there is none.
int number_before(const std::string& line, std::size_t pos) {
  while (pos > 0 && line[pos - 1] == ' ') --pos;
  std::size_t start = pos;
  while (start > 0 && line[start - 1] >= '0' && line[start - 1] <= '9') --start;
  if (start == pos || pos - start > 9) return -1;
  return std::stoi(line.substr(start, pos - start));
}

// The number that ends right before `phrase` in `line`, or -1.
int number_before_phrase(const std::string& line, std::string_view phrase) {
  std::size_t at = line.find(phrase);
  return at == std::string::npos ? -1 : number_before(line, at);
}

// The text between `open` and the next `close` after `from`; empty when absent.
std::string between(const std::string& line, std::string_view open, char close, std::size_t* from) {
  std::size_t a = line.find(open, *from);
  if (a == std::string::npos) return {};
  a += open.size();
  std::size_t b = line.find(close, a);
  if (b == std::string::npos) return {};
  *from = b + 1;
  return line.substr(a, b - a);
}

}  // namespace

std::optional<ResourceUsage> parse_resource_usage(const std::string& log,
                                                  const std::string& lowered_name,
                                                  const std::string& arch) {
  // ptxas info    : Compiling entry function 'NAME' for 'sm_90'
  // ptxas info    : Function properties for NAME
  // ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
  // ptxas info    : Used 40 registers, used 0 barriers, 1024 bytes smem, 368 bytes cmem[0]
  std::istringstream lines(log);
  std::string line, current, current_arch;
  ResourceUsage usage;
  bool used = false;
  while (std::getline(lines, line)) {
    if (line.rfind("ptxas", 0) != 0) continue;
    std::size_t from = 0;
    if (line.find("Compiling entry function '") != std::string::npos) {
      current = between(line, "Compiling entry function '", '\'', &from);
      current_arch = between(line, " for '", '\'', &from);
      continue;
    }
    if (std::size_t at = line.find("Function properties for "); at != std::string::npos) {
      current = line.substr(at + 24);
      current = current.substr(0, current.find_first_of(" \t\r"));
      continue;
    }
    if (current != lowered_name || current_arch != arch) continue;
    if (int v = number_before_phrase(line, "bytes stack frame"); v >= 0) usage.stack_frame = v;
    if (int v = number_before_phrase(line, "bytes spill stores"); v >= 0) usage.spill_stores = v;
    if (int v = number_before_phrase(line, "bytes spill loads"); v >= 0) usage.spill_loads = v;
    if (int v = number_before_phrase(line, " registers");
        v >= 0 && line.find("Used ") != std::string::npos) {
      usage.registers = v;
      used = true;
    }
    if (int v = number_before_phrase(line, "bytes smem"); v >= 0) usage.static_shared = v;
    if (int v = number_before_phrase(line, "bytes cmem[0]"); v >= 0) usage.const_bytes = v;
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
