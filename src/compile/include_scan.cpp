// Transitive #include scanning with content hashing.
#include "compile/include_scan.hpp"

#include "core/file_io.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace kernelop::detail {
namespace {

namespace fs = std::filesystem;

class Scanner {
 public:
  explicit Scanner(const std::vector<std::string>& include_dirs) : include_dirs_(include_dirs) {}

  void scan(const std::string& text, const std::string& dir) {
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      Directive d;
      if (parse_include(line, &d)) visit(d, dir);
    }
  }

  IncludeScan take() { return std::move(result_); }

 private:
  struct Directive {
    bool quoted = false, computed = false;
    std::string name;
  };

  // Recognises `#include "x"`, `#include <x>` and computed `#include MACRO`, by hand: this runs
  // over every line of every header on each cache lookup.
  static bool parse_include(std::string_view line, Directive* d) {
    auto skip = [&](std::size_t i) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      return i;
    };
    std::size_t i = skip(0);
    if (i >= line.size() || line[i] != '#') return false;
    i = skip(i + 1);
    if (line.substr(i, 7) != "include") return false;
    i = skip(i + 7);
    if (i >= line.size()) return false;
    char open = line[i];
    char close = open == '"' ? '"' : open == '<' ? '>' : 0;
    if (!close) {
      d->computed = true;
      return true;
    }
    std::size_t end = line.find(close, i + 1);
    if (end == std::string_view::npos) return false;
    d->quoted = open == '"';
    d->name = std::string(line.substr(i + 1, end - i - 1));
    return true;
  }

  void visit(const Directive& d, const std::string& dir) {
    if (d.computed) {
      result_.has_computed_include = true;
      return;
    }
    bool quoted = d.quoted;
    const std::string& name = d.name;
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
      return;
    }
    std::string canonical = fs::weakly_canonical(found).string();
    if (!visited_.insert(canonical).second) return;
    std::string content;
    if (!read_file(canonical, &content)) {
      result_.files.push_back({spelled, canonical, {}});
      return;
    }
    result_.files.push_back({spelled, canonical, hash_bytes(content)});
    scan(content, fs::path(canonical).parent_path().string());
  }

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
