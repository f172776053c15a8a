// Transitive #include scanning with content hashing.
#include "compile/include_scan.hpp"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace kernelop::detail {
namespace {

namespace fs = std::filesystem;

bool read_file(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

class Scanner {
 public:
  explicit Scanner(const std::vector<std::string>& include_dirs) : include_dirs_(include_dirs) {}

  void scan(const std::string& text, const std::string& dir) {
    static const std::regex kInclude(R"(^[ \t]*#[ \t]*include[ \t]*(?:([<"])([^>"]+)[>"]|(.*)))");
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("include") == std::string::npos) continue;
      std::smatch m;
      if (!std::regex_search(line, m, kInclude)) continue;
      if (!m[1].matched) {
        result_.has_computed_include = true;
        continue;
      }
      bool quoted = m[1].str() == "\"";
      std::string name = m[2].str();
      std::string spelled = quoted ? "\"" + name + "\"" : "<" + name + ">";
      fs::path found;
      if (quoted && fs::is_regular_file(fs::path(dir) / name)) found = fs::path(dir) / name;
      for (std::size_t i = 0; found.empty() && i < include_dirs_.size(); ++i) {
        if (fs::is_regular_file(fs::path(include_dirs_[i]) / name)) {
          found = fs::path(include_dirs_[i]) / name;
        }
      }
      if (found.empty()) {
        if (unresolved_.insert(spelled).second) result_.files.push_back({spelled, {}, {}});
        continue;
      }
      std::string canonical = fs::weakly_canonical(found).string();
      if (!visited_.insert(canonical).second) continue;
      std::string content;
      if (!read_file(canonical, &content)) {
        result_.files.push_back({spelled, canonical, {}});
        continue;
      }
      result_.files.push_back({spelled, canonical, hash_bytes(content)});
      scan(content, fs::path(canonical).parent_path().string());
    }
  }

  IncludeScan take() { return std::move(result_); }

 private:
  const std::vector<std::string>& include_dirs_;
  std::set<std::string> visited_, unresolved_;
  IncludeScan result_;
};

}  // namespace

IncludeScan scan_includes(const std::string& source, const std::string& source_dir,
                          const std::vector<std::string>& include_dirs) {
  Scanner scanner(include_dirs);
  scanner.scan(source, source_dir);
  return scanner.take();
}

}  // namespace kernelop::detail
