// Transitive #include scanning with content hashing (Notes [include resolution], [include scan]).
#include "compile/include_scan.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "core/file_io.hpp"
#include "kernelop/error.hpp"

namespace kernelop::detail {
namespace {

constexpr int kEnd = -1;

bool is_ident_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}
bool is_ident_char(int c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(int c) {
  return c >= '0' && c <= '9';
}
bool is_horizontal_space(int c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

// A cursor over the physical text that yields the characters of translation phase 2: trigraphs
// replaced (when enabled) and line splices removed. `line` counts physical lines.
class Cursor {
 public:
  Cursor(std::string_view text, bool trigraphs) : t_(text), trigraphs_(trigraphs) {}

  int peek() {
    skip_splices();
    if (pos_ >= t_.size()) return kEnd;
    if (int c = trigraph_at(pos_)) return c;
    return static_cast<unsigned char>(t_[pos_]);
  }
  void next() {
    skip_splices();
    if (pos_ >= t_.size()) return;
    if (trigraph_at(pos_)) {
      pos_ += 3;
      return;
    }
    if (t_[pos_] == '\n') ++line_;
    ++pos_;
  }
  // The character after the current one (for two-character tokens: "/*", "//", "%:").
  int peek_second() {
    Cursor copy = *this;
    copy.next();
    return copy.peek();
  }
  int line() const { return line_; }

  // Raw string bodies see the physical text (phase 2 is reverted inside them): skips to the
  // end of `)delim"`, or to the end of the text.
  void skip_raw_string_body(const std::string& delimiter) {
    std::string close = ")" + delimiter + "\"";
    std::size_t end = t_.find(close, pos_);
    std::size_t stop = end == std::string_view::npos ? t_.size() : end + close.size();
    for (; pos_ < stop; ++pos_) line_ += t_[pos_] == '\n';
  }

 private:
  int trigraph_at(std::size_t p) const {
    if (!trigraphs_ || p + 2 >= t_.size() || t_[p] != '?' || t_[p + 1] != '?') return 0;
    switch (t_[p + 2]) {
      case '=':
        return '#';
      case '/':
        return '\\';
      case '\'':
        return '^';
      case '(':
        return '[';
      case ')':
        return ']';
      case '!':
        return '|';
      case '<':
        return '{';
      case '>':
        return '}';
      case '-':
        return '~';
      default:
        return 0;
    }
  }
  // A backslash (or ??/) immediately followed by a newline (or CR LF). EDG, like the standard,
  // does not splice a backslash followed by spaces.
  void skip_splices() {
    for (;;) {
      std::size_t p = pos_;
      if (p < t_.size() && t_[p] == '\\') {
        ++p;
      } else if (trigraph_at(p) == '\\') {
        p += 3;
      } else {
        return;
      }
      if (p < t_.size() && t_[p] == '\r') ++p;
      if (p >= t_.size() || t_[p] != '\n') return;
      pos_ = p + 1;
      ++line_;
    }
  }

  std::string_view t_;
  bool trigraphs_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

class Lexer {
 public:
  Lexer(std::string_view text, bool trigraphs,
        const std::function<void(const IncludeDirective&)>& visit)
      : c_(text, trigraphs), visit_(visit) {}

  void run() {
    bool line_start = true;
    for (int c = c_.peek(); c != kEnd; c = c_.peek()) {
      if (c == '\n') {
        c_.next();
        line_start = true;
      } else if (is_horizontal_space(c)) {
        c_.next();
      } else if (c == '/' && (c_.peek_second() == '*' || c_.peek_second() == '/')) {
        // A newline inside a block comment starts a line: EDG takes a '#' after "*/" on a
        // later line as a directive, so the scan does too.
        if (skip_comment()) line_start = true;
      } else if (line_start && (c == '#' || (c == '%' && c_.peek_second() == ':'))) {
        c_.next();
        if (c == '%') c_.next();
        directive();
        line_start = false;
      } else {
        line_start = false;
        token(c);
      }
    }
  }

 private:
  // Skips a comment at the cursor; true when it contained a newline.
  bool skip_comment() {
    c_.next();
    if (c_.peek() == '/') {
      while (c_.peek() != kEnd && c_.peek() != '\n') c_.next();
      return false;
    }
    c_.next();  // '*'
    bool newline = false;
    for (int c = c_.peek(); c != kEnd; c = c_.peek()) {
      c_.next();
      if (c == '\n') newline = true;
      if (c == '*' && c_.peek() == '/') {
        c_.next();
        break;
      }
    }
    return newline;
  }

  // Skips spaces and comments within a directive (a block comment may span lines there).
  void skip_directive_space() {
    for (int c = c_.peek(); c != kEnd; c = c_.peek()) {
      if (is_horizontal_space(c)) {
        c_.next();
      } else if (c == '/' && (c_.peek_second() == '*' || c_.peek_second() == '/')) {
        skip_comment();
      } else {
        return;
      }
    }
  }

  std::string identifier() {
    std::string s;
    while (is_ident_char(c_.peek())) {
      s.push_back(static_cast<char>(c_.peek()));
      c_.next();
    }
    return s;
  }

  void directive() {
    skip_directive_space();
    int line = c_.line();
    std::string name = identifier();
    if (name == "include" || name == "include_next") {
      skip_directive_space();
      header_name(line, name == "include_next");
    }
    // Anything else (#if with __has_include, #define, ...) is lexed as ordinary tokens.
  }

  // Reads "name" or <name> at the cursor; anything else is a computed include.
  void header_name(int line, bool next) {
    IncludeDirective d;
    d.line = line;
    int open = c_.peek();
    int close = open == '"' ? '"' : open == '<' ? '>' : 0;
    if (!close) {
      d.kind = IncludeDirective::Kind::Computed;
      visit_(d);
      return;
    }
    c_.next();
    for (int c = c_.peek(); c != close; c = c_.peek()) {
      if (c == kEnd || c == '\n') return;  // unterminated: the preprocessor rejects it
      d.name.push_back(static_cast<char>(c));
      c_.next();
    }
    c_.next();
    d.kind = next          ? IncludeDirective::Kind::Next
             : open == '"' ? IncludeDirective::Kind::Quoted
                           : IncludeDirective::Kind::Angle;
    visit_(d);
  }

  void token(int c) {
    if (c == '"' || c == '\'') {
      quoted_literal(c);
    } else if (is_ident_start(c)) {
      int line = c_.line();
      std::string id = identifier();
      if (c_.peek() == '"' &&
          (id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR")) {
        raw_string();
      } else if (id == "__has_include" || id == "__has_include_next") {
        skip_directive_space();
        if (c_.peek() != '(') return;  // `#ifdef __has_include`, `defined(__has_include)`
        c_.next();
        skip_directive_space();
        header_name(line, id == "__has_include_next");
      }
    } else if (is_digit(c) || (c == '.' && is_digit(c_.peek_second()))) {
      pp_number();
    } else {
      c_.next();
    }
  }

  // A string or character literal; ends at its closing quote or at the end of the line.
  void quoted_literal(int quote) {
    c_.next();
    for (int c = c_.peek(); c != kEnd && c != '\n'; c = c_.peek()) {
      c_.next();
      if (c == quote) return;
      if (c == '\\' && c_.peek() != kEnd && c_.peek() != '\n') c_.next();
    }
  }

  void raw_string() {
    c_.next();  // '"'
    std::string delimiter;
    for (int c = c_.peek(); c != '('; c = c_.peek()) {
      // Not a raw string after all (the preprocessor rejects it): resume normal lexing.
      if (c == kEnd || c == '\n' || c == ')' || c == '\\' || c == ' ' || delimiter.size() > 16)
        return;
      delimiter.push_back(static_cast<char>(c));
      c_.next();
    }
    c_.next();  // '('
    c_.skip_raw_string_body(delimiter);
  }

  // A pp-number, so that digit separators (1'000) do not open a character literal.
  void pp_number() {
    for (int c = c_.peek(); c != kEnd; c = c_.peek()) {
      bool exponent = (c == 'e' || c == 'E' || c == 'p' || c == 'P') &&
                      (c_.peek_second() == '+' || c_.peek_second() == '-');
      bool separator = c == '\'' && is_ident_char(c_.peek_second());
      if (exponent || separator) {
        c_.next();
        c_.next();
      } else if (is_ident_char(c) || c == '.') {
        c_.next();
      } else {
        return;
      }
    }
  }

  Cursor c_;
  const std::function<void(const IncludeDirective&)>& visit_;
};

class Scanner {
 public:
  explicit Scanner(const IncludeRules& rules) : rules_(rules) {}

  void scan(std::string_view text, const std::string& name, const std::string& dir) {
    if (++depth_ > 200) {  // the preprocessor's own limit is lower; a guard, not a rule
      bypass("includes nest deeper than 200 levels at " + name);
      return;
    }
    find_includes(text, rules_.trigraphs, [&](const IncludeDirective& d) { visit(d, name, dir); });
    --depth_;
  }

  IncludeScan take() { return std::move(result_); }

 private:
  void bypass(const std::string& why) {
    if (result_.bypass.empty()) result_.bypass = why;
  }

  bool under_toolkit(const std::string& path) const {
    for (const std::string& dir : rules_.toolkit_dirs) {
      if (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
          path[dir.size()] == '/')
        return true;
    }
    return false;
  }

  void visit(const IncludeDirective& d, const std::string& from, const std::string& dir) {
    using Kind = IncludeDirective::Kind;
    std::string where = from + ":" + std::to_string(d.line);
    if (d.kind == Kind::Computed) {
      bypass("a computed #include at " + where);
      return;
    }
    if (d.kind == Kind::Next) {
      bypass("#include_next <" + d.name + "> at " + where);
      return;
    }
    bool quoted = d.kind == Kind::Quoted;
    std::string spelled = quoted ? "\"" + d.name + "\"" : "<" + d.name + ">";
    // The search list of Note [include resolution].
    std::vector<std::string> candidates;
    if (!d.name.empty() && d.name.front() == '/') {
      candidates.push_back(d.name);
    } else {
      if (quoted && !dir.empty()) candidates.push_back(dir + "/" + d.name);
      for (const std::string& inc : rules_.dirs) candidates.push_back(inc + "/" + d.name);
    }
    for (const std::string& candidate : candidates) {
      struct stat st {};
      if (::stat(candidate.c_str(), &st) != 0) {
        int err = errno;
        if (err == ENOENT || err == ENOTDIR || err == EACCES) continue;  // not here: search on
        bypass("#include " + shorten(spelled) + " at " + where + ", whose lookup in '" +
               shorten(candidate) + "' failed (" + std::strerror(err) + ")");
        return;
      }
      // The file as the preprocessor opens it: its quoted includes resolve in its own (real)
      // directory, which is also its identity in the key; dev:ino only breaks cycles.
      std::size_t slash = candidate.rfind('/');
      std::string parent = normalized_path(slash == 0 ? "/" : candidate.substr(0, slash));
      std::string path = (parent == "/" ? "" : parent) + "/" + candidate.substr(slash + 1);
      if (S_ISDIR(st.st_mode)) {
        add({spelled, path, "directory", {}});  // NVRTC stops here: "is a directory"
        return;
      }
      if (!S_ISREG(st.st_mode)) {
        KERNELOP_FAIL(Io) << "#include " << shorten(spelled) << " at " << where << " resolves to '"
                          << shorten(path) << "', which is " << file_type_name(st.st_mode)
                          << "; kernelop compiles regular files only";
      }
      if (under_toolkit(path)) {
        add({spelled, path, "toolkit", {}});
        return;
      }
      std::string identity =
          parent + "\n" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
      if (!visited_.insert(identity).second) return;
      std::string content, why;
      if (try_read_file(candidate, kMaxTextFileBytes, &content, &why) != ReadStatus::Ok) {
        bypass("#include " + shorten(spelled) + " at " + where + ", which resolves to '" +
               shorten(path) + "' and cannot be read (" + why + ")");
        return;
      }
      add({spelled, path, "file", hash_bytes(content)});
      scan(content, path, parent);
      return;
    }
    if (missing_.insert(spelled).second) add({spelled, {}, "missing", {}});
  }

  void add(IncludedFile f) { result_.files.push_back(std::move(f)); }

  const IncludeRules& rules_;
  std::set<std::string> visited_, missing_;
  IncludeScan result_;
  int depth_ = 0;
};

}  // namespace

void find_includes(std::string_view text, bool trigraphs,
                   const std::function<void(const IncludeDirective&)>& visit) {
  Lexer(text, trigraphs, visit).run();
}

IncludeScan scan_includes(std::string_view source, const std::string& source_name,
                          const IncludeRules& rules) {
  Scanner scanner(rules);
  scanner.scan(source, source_name, rules.source_dir);
  return scanner.take();
}

}  // namespace kernelop::detail
