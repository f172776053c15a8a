// Differential test of the compile cache: over a corpus of include spellings and layouts, a build
// through the cache must be byte-identical to a fresh build (--no-cache) after every change to
// the files, whatever the working directory. Also: a key independent of how paths are spelled,
// toolkit headers (CUB) cached, and the fuzz-style lexer cases of Note [include scan].
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "compile/include_scan.hpp"
#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;

// Restores the working directory when a case ends.
class InDirectory {
 public:
  explicit InDirectory(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~InDirectory() { fs::current_path(old_); }

 private:
  fs::path old_;
};

struct Step {
  std::string what;
  std::function<void(const fs::path& root)> change;  // applied before this step's builds
  std::string cwd = ".";                             // relative to root
};

struct Case {
  std::string name;
  std::map<std::string, std::string> files;  // path relative to root -> contents
  std::string source;                        // the kernel source (inline) or ""
  std::string source_file;                   // relative to the spec directory, or ""
  std::string spec_dir = "spec";             // the spec's directory, relative to root
  std::vector<std::string> include_paths;    // as the spec lists them
  std::string compile_std = "c++17";
  std::vector<Step> steps;
};

constexpr const char* kKernel =
    "\nextern \"C\" __global__ void k(const float* x, int n, float* y) { y[0] = VALUE; }\n";

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class IncludeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("kernelop-include-cache-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    root_ = fs::canonical(root_);
    set_warning_handler([this](std::string_view m) { warnings_.emplace_back(m); });
  }
  void TearDown() override {
    set_warning_handler(nullptr);
    fs::remove_all(root_);
  }

  OpDecl decl(const Case& c, const std::string& base_dir) const {
    OpDecl d = testing::relu_like_op(c.source.empty() ? "" : c.source + kKernel);
    d.base_dir = base_dir;
    if (!c.source_file.empty()) {
      d.spec.source_file = c.source_file;
      std::ifstream in(fs::path(base_dir) / c.source_file);
      d.spec.kernel_source.assign(std::istreambuf_iterator<char>(in), {});
    }
    d.spec.include_paths = c.include_paths;
    d.spec.compile_std = c.compile_std;
    return d;
  }

  // The PTX of one build: through `cache`, or fresh.
  std::string build(const OpDecl& d, CompileCache* cache, bool* hit = nullptr) {
    CompileOptions o;
    o.archs = {"compute_90"};
    o.cache = cache;
    o.use_cache = cache != nullptr;
    CompiledImage image = compile(derive_plan(d), o);
    if (hit) *hit = image.images.at(0).cache_hit;
    return image.images.at(0).data;
  }

  // Runs every step of `c`: after each change, a build through a persistent cache (a fresh
  // CompileCache object each time, so hits come from disk) must equal a build without cache.
  void run(const Case& c) {
    SCOPED_TRACE(c.name);
    fs::path root = root_ / c.name;
    for (const auto& [path, text] : c.files) write(root / path, text);
    fs::path cache_dir = root_ / ("cache-" + c.name);
    std::vector<Step> steps = c.steps;
    steps.insert(steps.begin(), Step{"initial", nullptr, "."});
    for (const Step& step : steps) {
      SCOPED_TRACE(step.what);
      if (step.change) step.change(root);
      InDirectory cwd(root / step.cwd);
      // The spec's directory as a relative path from the working directory, as the CLI gives it.
      std::string base = fs::relative(root / c.spec_dir, root / step.cwd).string();
      if (base.empty()) base = ".";
      OpDecl d = decl(c, base);
      std::string fresh = build(d, nullptr);
      CompileCache cache(cache_dir);
      std::string cached = build(d, &cache);
      EXPECT_EQ(cached, fresh) << "the cache served code a fresh compile does not produce";
      // Read back once more from disk: the stored entry is the fresh result too.
      CompileCache again(cache_dir);
      bool hit = false;
      EXPECT_EQ(build(d, &again, &hit), fresh);
      EXPECT_TRUE(hit);
    }
  }

  fs::path root_;
  std::vector<std::string> warnings_;
};

// The value a header defines, as it appears in the PTX (a float's bits).
std::string value_header(const std::string& value) {
  return "#pragma once\n#define VALUE " + value + "\n";
}

Step change_file(const std::string& path, const std::string& text, std::string cwd = ".") {
  return Step{"change " + path, [path, text](const fs::path& root) { write(root / path, text); },
              std::move(cwd)};
}

Step remove_file(const std::string& path) {
  return Step{"remove " + path, [path](const fs::path& root) { fs::remove(root / path); }, "."};
}

TEST_F(IncludeCacheTest, CachedBuildsEqualFreshBuildsOverTheCorpus) {
  std::vector<Case> corpus;
  // The working directory holds a header of the same name: never compiled, never keyed.
  corpus.push_back({"cwd_shadow",
                    {{"spec/k.cu", std::string("#include \"scale.h\"") + kKernel},
                     {"spec/scale.h", value_header("2.0f")},
                     {"scale.h", value_header("99.0f")},
                     {"other/scale.h", value_header("77.0f")}},
                    "",
                    "k.cu",
                    "spec",
                    {},
                    "c++17",
                    {{"from other", nullptr, "other"},
                     {"from spec", nullptr, "spec"},
                     change_file("scale.h", value_header("98.0f")),
                     change_file("spec/scale.h", value_header("3.0f"), "other")}});
  // -I order: the first directory that has the header wins; removing it moves to the next.
  corpus.push_back({"include_order",
                    {{"spec/k.cu", std::string("#include <h.h>") + kKernel},
                     {"a/h.h", value_header("1.0f")},
                     {"b/h.h", value_header("2.0f")}},
                    "",
                    "k.cu",
                    "spec",
                    {"../a", "../b"},
                    "c++17",
                    {remove_file("a/h.h"), change_file("b/h.h", value_header("5.0f")),
                     change_file("a/h.h", value_header("6.0f"))}});
  // Transitive, with a quoted include relative to the including header's own directory.
  corpus.push_back({"transitive",
                    {{"spec/k.cu", std::string("#include \"sub/a.h\"") + kKernel},
                     {"spec/sub/a.h", "#include \"b.h\"\n"},
                     {"spec/sub/b.h", "#include \"deeper/c.h\"\n"},
                     {"spec/sub/deeper/c.h", value_header("3.0f")},
                     {"spec/b.h", "#error wrong b.h\n"}},
                    "",
                    "k.cu",
                    "spec",
                    {},
                    "c++17",
                    {change_file("spec/sub/deeper/c.h", value_header("4.0f"))}});
  // Guarded cycle: a.h <-> b.h.
  corpus.push_back(
      {"guarded_cycle",
       {{"spec/k.cu", std::string("#include \"a.h\"") + kKernel},
        {"spec/a.h", "#ifndef A_H\n#define A_H\n#include \"b.h\"\n#endif\n"},
        {"spec/b.h", "#ifndef B_H\n#define B_H\n#include \"a.h\"\n#define VALUE 1.5f\n#endif\n"}},
       "",
       "k.cu",
       "spec",
       {},
       "c++17",
       {change_file("spec/b.h",
                    "#ifndef B_H\n#define B_H\n#include \"a.h\"\n#define VALUE 2.5f\n#endif\n")}});
  // Spellings of #include that a line-based scanner misses.
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"comment_between", "# /* c */ include \"h.h\""},
      {"digraph", "%:include \"h.h\""},
      {"splice_after_hash", "#\\\ninclude \"h.h\""},
      {"splice_in_word", "#inc\\\nlude \"h.h\""},
      {"splice_in_name", "#include \"h\\\n.h\""},
      {"crlf_splice", "#\\\r\ninclude \"h.h\""},
      {"multiline_comment_before", "/* a\n */ # include \"h.h\""},
      {"multiline_comment_inside", "# /* a\n b */ include \"h.h\""},
      {"comment_after_name", "#include /* c */ \"h.h\" // d"},
      {"has_include",
       "#if __has_include(\"h.h\")\n#include \"h.h\"\n#else\n#define VALUE 0.5f\n#endif"},
  };
  for (const auto& [name, line] : spellings) {
    corpus.push_back({"spelling_" + name,
                      {{"spec/h.h", value_header("7.0f")}},
                      line,
                      "",
                      "spec",
                      {},
                      "c++17",
                      {change_file("spec/h.h", value_header("8.0f"))}});
  }
  // Trigraphs exist in C++14: ??= is '#'.
  corpus.push_back({"trigraph_cxx14",
                    {{"spec/h.h", value_header("7.0f")}},
                    "?\?=include \"h.h\"",
                    "",
                    "spec",
                    {},
                    "c++14",
                    {change_file("spec/h.h", value_header("9.0f"))}});
  // A header that appears later changes __has_include's answer.
  corpus.push_back({"has_include_appears",
                    {{"spec/dummy.h", ""}},
                    "#if __has_include(\"opt.h\")\n#include \"opt.h\"\n#else\n#define VALUE "
                    "0.25f\n#endif",
                    "",
                    "spec",
                    {},
                    "c++17",
                    {change_file("spec/opt.h", value_header("4.5f")), remove_file("spec/opt.h")}});
  // A directive inside a string, a raw string or a comment is not a directive.
  corpus.push_back({"not_directives",
                    {{"spec/h.h", value_header("7.0f")}, {"spec/x.h", "#error not included\n"}},
                    "#include \"h.h\"\n// #include \"x.h\"\n/* #include \"x.h\" */\n"
                    "#define S \"#include \\\"x.h\\\"\"\n__device__ const char r[] = R\"(\n"
                    "#include \"x.h\"\n)\";",
                    "",
                    "spec",
                    {},
                    "c++17",
                    {change_file("spec/h.h", value_header("6.5f"))}});
  // Headers reached through a symlinked directory.
  corpus.push_back({"symlinked_dir",
                    {{"real/h.h", value_header("1.25f")}},
                    "#include \"link/h.h\"",
                    "",
                    "spec",
                    {},
                    "c++17",
                    {change_file("real/h.h", value_header("2.25f"))}});
  // The symlink must exist before the first build.
  fs::create_directories(root_ / "symlinked_dir" / "spec");
  fs::create_directory_symlink(root_ / "symlinked_dir" / "real",
                               root_ / "symlinked_dir" / "spec" / "link");
  for (const Case& c : corpus) run(c);
}

TEST_F(IncludeCacheTest, TheKeyDoesNotDependOnHowThePathIsSpelled) {
  write(root_ / "spec" / "k.cu", std::string("#include \"h.h\"") + kKernel);
  write(root_ / "spec" / "h.h", value_header("1.0f"));
  fs::path cache_dir = root_ / "cache";
  auto build_from = [&](const fs::path& cwd, const std::string& base) {
    InDirectory in(cwd);
    OpDecl d = testing::relu_like_op("");
    d.base_dir = base;
    d.spec.source_file = "k.cu";
    std::ifstream src(root_ / "spec" / "k.cu");
    d.spec.kernel_source.assign(std::istreambuf_iterator<char>(src), {});
    CompileCache cache(cache_dir);
    CompileOptions o;
    o.archs = {"compute_90"};
    o.cache = &cache;
    return compile(derive_plan(d), o).images.at(0).cache_hit;
  };
  EXPECT_FALSE(build_from(root_, "spec"));
  EXPECT_TRUE(build_from(root_, (root_ / "spec").string()));
  EXPECT_TRUE(build_from(root_ / "spec", "."));
  EXPECT_TRUE(build_from(root_ / "spec", "./"));
  EXPECT_TRUE(build_from(root_, "spec/../spec/"));
}

TEST_F(IncludeCacheTest, ToolkitHeadersAreCoveredByTheToolkitNotScanned) {
  // CUB has computed includes inside; they must not disable the cache.
  OpDecl d = testing::relu_like_op(
      "#include <cub/block/block_reduce.cuh>\n"
      "extern \"C\" __global__ void k(const float* x, int n, float* y) {\n"
      "  using R = cub::BlockReduce<float, 256>;\n  __shared__ typename R::TempStorage t;\n"
      "  float s = R(t).Sum(threadIdx.x < n ? x[threadIdx.x] : 0.f);\n"
      "  if (threadIdx.x == 0) y[0] = s;\n}\n");
  d.base_dir = root_.string();
  CompileCache cache(root_ / "cache");
  CompileOptions o;
  o.archs = {"compute_90"};
  o.cache = &cache;
  CompiledImage cold = compile(derive_plan(d), o);
  EXPECT_FALSE(cold.cache_bypassed);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
  CompileCache again(root_ / "cache");
  o.cache = &again;
  CompiledImage warm = compile(derive_plan(d), o);
  EXPECT_TRUE(warm.images.at(0).cache_hit);
  EXPECT_EQ(warm.images.at(0).data, cold.images.at(0).data);
}

TEST_F(IncludeCacheTest, UnresolvableIncludesBypassTheCacheNamingFileAndLine) {
  write(root_ / "h.h", value_header("1.0f"));
  struct Bypass {
    std::string source, expected;
  };
  std::vector<Bypass> cases = {
      {"#define H \"h.h\"\n#include H", "a computed #include at kernel.cu:2"},
      {"#include \"h.h\"\n#include_next <h.h>", "#include_next <h.h> at kernel.cu:2"},
      {"#if __has_include(H)\n#endif\n#include \"h.h\"", "a computed #include at kernel.cu:1"},
  };
  for (const Bypass& c : cases) {
    SCOPED_TRACE(c.source);
    warnings_.clear();
    OpDecl d = testing::relu_like_op(c.source + kKernel);
    d.base_dir = "";  // no directory: kernel.cu, includes from -I only
    d.spec.include_paths = {root_.string()};
    CompileCache cache(root_ / "cache");
    CompileOptions o;
    o.archs = {"compute_90"};
    o.cache = &cache;
    try {
      CompiledImage image = compile(derive_plan(d), o);
      EXPECT_TRUE(image.cache_bypassed);
    } catch (const Error&) {
      // #include_next in a primary source is only a warning; a failure is fine too.
    }
    ASSERT_FALSE(warnings_.empty());
    EXPECT_NE(warnings_[0].find(c.expected), std::string::npos) << warnings_[0];
  }
}

TEST_F(IncludeCacheTest, LexerFindsWhatThePreprocessorSeesAndNothingElse) {
  auto names = [](const std::string& text, bool trigraphs = false) {
    std::vector<std::string> out;
    detail::find_includes(text, trigraphs, [&](const detail::IncludeDirective& d) {
      using K = detail::IncludeDirective::Kind;
      out.push_back((d.kind == K::Computed ? "computed"
                     : d.kind == K::Next   ? "next:" + d.name
                                           : d.name) +
                    "@" + std::to_string(d.line));
    });
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("#include \"a.h\"\n  #  include <b.h>\n"), (V{"a.h@1", "b.h@2"}));
  EXPECT_EQ(names("x = 1; #include \"a.h\"\n"), V{}) << "not first on the line";
  EXPECT_EQ(names("#define X 1'000 // ' \n#include \"a.h\"\n"), (V{"a.h@2"}));
  EXPECT_EQ(names("char c = '\"'; \n#include \"a.h\"\n"), (V{"a.h@2"}));
  EXPECT_EQ(names("// comment \\\n#include \"a.h\"\n"), V{}) << "a spliced comment";
  EXPECT_EQ(names("// comment \\ \n#include \"a.h\"\n"), (V{"a.h@2"})) << "no splice after space";
  EXPECT_EQ(names("?\?=include \"a.h\"\n", false), V{});
  EXPECT_EQ(names("?\?=include \"a.h\"\n", true), (V{"a.h@1"}));
  EXPECT_EQ(names("// x ?\?/\n#include \"a.h\"\n", true), V{});
  EXPECT_EQ(names("#include MACRO\n#include_next <n.h>\n"), (V{"computed@1", "next:n.h@2"}));
  EXPECT_EQ(names("#ifdef __has_include\n#if defined(__has_include) && __has_include(<q.h>)\n"),
            (V{"q.h@2"}));
  EXPECT_EQ(names("auto s = R\"d(\n#include \"a.h\"\n)d\";\n#include \"b.h\"\n"), (V{"b.h@4"}));
  EXPECT_EQ(names("#include \"unterminated\n#include \"b.h\"\n"), (V{"b.h@2"}));
  EXPECT_EQ(names("/* never closed\n#include \"a.h\"\n"), V{});
}

}  // namespace
}  // namespace kernelop
