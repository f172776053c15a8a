// The persistent compile cache: hits and misses, what the key covers, corruption recovery,
// directory safety, and concurrent processes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kernelop-cache-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    set_warning_handler([this](std::string_view m) { warnings_.emplace_back(m); });
  }
  void TearDown() override {
    set_warning_handler(nullptr);
    fs::remove_all(dir_);
  }

  OpDecl op(const std::string& body = "y[i] = x[i];") {
    OpDecl d;
    d.op_name = "cache::op";
    d.base_dir = dir_.string() + "/src";
    d.spec.kernel_source =
        "#include \"helper.h\"\nextern \"C\" __global__ void k(const float* x, int n, float* y) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) " +
        body + "\n}\n";
    d.spec.kernel_name = "k";
    d.spec.inputs = std::vector<Input>{InputDecl{"x", DType::Float32, false}};
    d.spec.outputs =
        std::vector<OutputDecl>{OutputDecl{"y", SameAs{std::string("x"), {}}, {}, {}, {}}};
    d.spec.extras = {Numel{"x", false}};
    d.spec.geometry = Elementwise{};
    return d;
  }

  void write_header(const std::string& text) {
    fs::create_directories(dir_ / "src");
    std::ofstream(dir_ / "src" / "helper.h") << text;
  }

  CompiledImage build(CompileCache& cache, const OpDecl& d) {
    CompileOptions o;
    o.archs = {"sm_90"};
    o.cache = &cache;
    return compile(derive_plan(d), o);
  }

  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (!fs::exists(dir_ / "cache")) return out;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "cache")) {
      if (e.is_regular_file()) out.push_back(e.path());
    }
    return out;
  }

  fs::path dir_;
  std::vector<std::string> warnings_;
};

TEST_F(CacheTest, MissThenMemoryHitThenDiskHit) {
  write_header("#define H 1\n");
  CompileCache cache(dir_ / "cache");
  CompiledImage cold = build(cache, op());
  EXPECT_FALSE(cold.images[0].cache_hit);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().stores, 1u);
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_EQ(entries()[0].extension(), ".kce");  // no temp file left behind

  CompiledImage warm = build(cache, op());
  EXPECT_TRUE(warm.images[0].cache_hit);
  EXPECT_EQ(cache.stats().memory_hits, 1u);
  EXPECT_EQ(warm.images[0].data, cold.images[0].data);
  EXPECT_EQ(warm.images[0].usage, cold.images[0].usage);
  EXPECT_EQ(warm.lowered_names, cold.lowered_names);

  CompileCache fresh(dir_ / "cache");  // a new process sees the same directory
  CompiledImage disk = build(fresh, op());
  EXPECT_TRUE(disk.images[0].cache_hit);
  EXPECT_EQ(fresh.stats().disk_hits, 1u);
  EXPECT_EQ(disk.images[0].data, cold.images[0].data);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(CacheTest, KeyCoversSourceOptionsArchAndIncludedHeaderContents) {
  write_header("#define H 1\n");
  CompileCache cache(dir_ / "cache");
  build(cache, op());
  EXPECT_FALSE(build(cache, op("y[i] = 2 * x[i];")).images[0].cache_hit) << "source changed";
  OpDecl fast = op();
  fast.spec.fast_math = true;
  EXPECT_FALSE(build(cache, fast).images[0].cache_hit) << "options changed";
  OpDecl defined = op();
  defined.spec.defines = {"X=1"};
  EXPECT_FALSE(build(cache, defined).images[0].cache_hit) << "defines changed";
  CompileOptions sm80;
  sm80.archs = {"sm_80"};
  sm80.cache = &cache;
  EXPECT_FALSE(compile(derive_plan(op()), sm80).images[0].cache_hit) << "arch changed";
  write_header("#define H 2\n");  // same name, new contents
  EXPECT_FALSE(build(cache, op()).images[0].cache_hit) << "header contents changed";
  write_header("#define H 1\n");
  EXPECT_TRUE(build(cache, op()).images[0].cache_hit) << "back to the first contents";
  // The op name is not part of the key: the same kernel under another name is a hit.
  OpDecl renamed = op();
  renamed.op_name = "other::name";
  EXPECT_TRUE(build(cache, renamed).images[0].cache_hit);
}

TEST_F(CacheTest, ComputedIncludeBypassesThePersistentCache) {
  write_header("#define H 1\n");
  CompileCache cache(dir_ / "cache");
  OpDecl d = op();
  d.spec.kernel_source = "#define HEADER \"helper.h\"\n#include HEADER\n" + d.spec.kernel_source;
  CompiledImage a = build(cache, d);
  EXPECT_TRUE(a.cache_bypassed);
  CompiledImage b = build(cache, d);
  EXPECT_FALSE(b.images[0].cache_hit);
  EXPECT_TRUE(entries().empty());
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_[0].find("computed #include"), std::string::npos);
}

void damage(const fs::path& path, const std::function<void(std::string&)>& edit) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  edit(bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(CacheTest, DamagedEntriesAreRecompiledNeverTrusted) {
  write_header("#define H 1\n");
  {
    CompileCache cache(dir_ / "cache");
    build(cache, op());
  }
  const fs::path entry = entries().at(0);
  std::string good;
  {
    std::ifstream in(entry, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  struct Case {
    const char* why;
    std::function<void(std::string&)> edit;
  };
  std::vector<Case> cases = {
      {"truncated", [](std::string& b) { b.resize(b.size() / 2); }},
      {"checksum mismatch", [](std::string& b) { b[b.size() - 10] ^= 0x5a; }},
      {"not a kernelop compile cache entry (bad magic", [](std::string& b) { b[0] = 'X'; }},
      {"not a kernelop compile cache entry (bad magic", [](std::string& b) { b.resize(5); }},
      {"format version", [](std::string& b) { b[8] = 99; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    warnings_.clear();
    damage(entry, c.edit);
    CompileCache cache(dir_ / "cache");
    CompiledImage image = build(cache, op());
    EXPECT_FALSE(image.images[0].cache_hit);
    EXPECT_EQ(cache.stats().corrupt, 1u);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("is damaged (" + std::string(c.why)), std::string::npos)
        << warnings_[0];
    EXPECT_NE(warnings_[0].find(entry.string()), std::string::npos);
    // The entry was rewritten whole: a fresh cache reads it back as a hit with the same code.
    CompileCache again(dir_ / "cache");
    CompiledImage reread = build(again, op());
    EXPECT_TRUE(reread.images[0].cache_hit);
    EXPECT_EQ(reread.images[0].data, image.images[0].data);
    EXPECT_EQ(again.stats().corrupt, 0u);
  }
}

TEST_F(CacheTest, DirectoryIsCreatedPrivate) {
  write_header("");
  CompileCache cache(dir_ / "cache" / "nested");
  build(cache, op());
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "cache" / "nested").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);
  ASSERT_EQ(::stat((dir_ / "cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);
}

TEST_F(CacheTest, RefusesADirectoryOthersCanWrite) {
  write_header("");
  fs::create_directories(dir_ / "cache");
  fs::permissions(dir_ / "cache", fs::perms(0777));
  CompileCache cache(dir_ / "cache");
  expect_error([&] { build(cache, op()); }, ErrorKind::Cache,
               "is writable by group or others (mode 0777); kernelop refuses to load machine "
               "code others can replace. Run 'chmod 700 ");
  EXPECT_TRUE(entries().empty()) << "nothing was written";
  fs::permissions(dir_ / "cache", fs::perms(0720));
  CompileCache group(dir_ / "cache");
  expect_error([&] { build(group, op()); }, ErrorKind::Cache, "mode 0720");
  fs::permissions(dir_ / "cache", fs::perms(0700));
  CompileCache ok(dir_ / "cache");
  EXPECT_NO_THROW(build(ok, op()));
}

TEST_F(CacheTest, RefusesADirectoryAnotherUserOwns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user";
  write_header("");
  fs::create_directories(dir_ / "cache");
  fs::permissions(dir_ / "cache", fs::perms(0700));
  ASSERT_EQ(::chown((dir_ / "cache").c_str(), 65534, 65534), 0);
  CompileCache cache(dir_ / "cache");
  expect_error([&] { build(cache, op()); }, ErrorKind::Cache, "is owned by uid 65534");
}

TEST_F(CacheTest, MemoryOnlyCacheWritesNothing) {
  write_header("");
  CompileCache cache{fs::path()};
  build(cache, op());
  EXPECT_TRUE(build(cache, op()).images[0].cache_hit);
  EXPECT_FALSE(fs::exists(dir_ / "cache"));
}

TEST_F(CacheTest, DefaultDirectoryFollowsTheEnvironment) {
  const char* saved = std::getenv("KERNELOP_CACHE_DIR");
  std::string keep = saved ? saved : "";
  ::setenv("KERNELOP_CACHE_DIR", "/tmp/explicit", 1);
  EXPECT_EQ(CompileCache::default_dir(), fs::path("/tmp/explicit"));
  ::unsetenv("KERNELOP_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(CompileCache::default_dir(), fs::path("/tmp/xdg/kernelop"));
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(CompileCache::default_dir(), fs::path("/home/someone/.cache/kernelop"));
  if (saved) ::setenv("KERNELOP_CACHE_DIR", keep.c_str(), 1);
}

TEST_F(CacheTest, TwoProcessesCompilingTheSameKernelAtOnce) {
  write_header("#define H 1\n");
  OpDecl d = op();
  // Both children start from an empty cache and compile and store the same entry.
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        CompileCache cache(dir_ / "cache");
        CompileOptions o;
        o.archs = {"sm_80", "sm_90"};
        o.cache = &cache;
        CompiledImage image = compile(derive_plan(d), o);
        code = image.images.size() == 2 ? 0 : 3;
      } catch (...) {
        code = 4;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  std::size_t kce = 0;
  for (const auto& e : entries()) {
    EXPECT_EQ(e.extension(), ".kce") << "temp file left behind: " << e;
    kce += e.extension() == ".kce";
  }
  EXPECT_EQ(kce, 2u);
  CompileCache cache(dir_ / "cache");
  CompileOptions o;
  o.archs = {"sm_80", "sm_90"};
  o.cache = &cache;
  CompiledImage image = compile(derive_plan(d), o);
  EXPECT_TRUE(image.images[0].cache_hit && image.images[1].cache_hit);
  EXPECT_EQ(cache.stats().corrupt, 0u);
  EXPECT_TRUE(warnings_.empty());
}

// Note [compile once per host]: 8 processes that miss the same entries at once run NVRTC once
// per entry; the others wait on the entry's lock and read what the first stored.
TEST_F(CacheTest, EightProcessesCompileEachImageOnce) {
  write_header("#define H 1\n");
  // A kernel slow enough to compile (a few hundred ms) that all 8 processes overlap.
  OpDecl d = op("{ float s = 0; for (int j = 0; j < 64; ++j) s += __sinf(x[i] * j); y[i] = s; }");
  d.spec.kernel_source = "#include <cub/block/block_reduce.cuh>\n" + d.spec.kernel_source;
  constexpr int kProcesses = 8;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(pipe_fds[0]);
      int compiled = -1;
      try {
        CompileCache cache(dir_ / "cache");
        CompileOptions o;
        o.archs = {"sm_80", "sm_90"};
        o.cache = &cache;
        CompiledImage image = compile(derive_plan(d), o);
        compiled = 0;
        for (const ArchImage& a : image.images) compiled += a.cache_hit ? 0 : 1;
      } catch (...) {
        compiled = 100;
      }
      char byte = static_cast<char>(compiled);
      ssize_t ignored = ::write(pipe_fds[1], &byte, 1);
      (void)ignored;
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(pipe_fds[1]);
  int total = 0;
  for (int p = 0; p < kProcesses; ++p) {
    char byte = 0;
    ASSERT_EQ(::read(pipe_fds[0], &byte, 1), 1);
    ASSERT_NE(byte, 100) << "a process failed";
    total += byte;
  }
  ::close(pipe_fds[0]);
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  // Two images (sm_80, sm_90), each compiled by exactly one of the 8 processes.
  EXPECT_EQ(total, 2);
  for (const auto& e : entries()) EXPECT_EQ(e.extension(), ".kce") << "left behind: " << e;
}

}  // namespace
}  // namespace kernelop
