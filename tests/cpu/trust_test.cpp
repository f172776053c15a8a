// Trust (Note [untrusted files]): every failure on hostile or careless input is a kernelop::Error
// naming the path or field -- never a signal, a hang or unbounded memory -- and errors keep what
// is useful (NVRTC's and ptxas' logs, the architecture, the expression).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_io.hpp"
#include "core/framing.hpp"
#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/validate.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

constexpr const char* kKernel =
    "extern \"C\" __global__ void k(const float* x, int n, float* y) { y[0] = x[0]; }\n";

// A hang fails the test (SIGALRM ends the process) instead of wedging the suite.
class NoHang {
 public:
  NoHang() { ::alarm(60); }
  ~NoHang() { ::alarm(0); }
};

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kernelop-trust-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    dir_ = fs::canonical(dir_);
    set_warning_handler([this](std::string_view m) { warnings_.emplace_back(m); });
  }
  void TearDown() override {
    set_warning_handler(nullptr);
    fs::remove_all(dir_);
  }

  fs::path fifo(const std::string& name) {
    fs::path p = dir_ / name;
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }

  CompiledImage build(const OpDecl& d, CompileCache* cache = nullptr,
                      std::vector<std::string> archs = {"compute_90"}) {
    CompileOptions o;
    o.archs = std::move(archs);
    o.cache = cache;
    o.use_cache = cache != nullptr;
    return compile(derive_plan(d), o);
  }

  fs::path dir_;
  std::vector<std::string> warnings_;
};

TEST_F(TrustTest, ReadsRefuseWhatIsNotARegularFileWithTheReason) {
  NoHang guard;
  fs::create_directories(dir_ / "d");
  fs::create_symlink("loop", dir_ / "loop");
  // A sparse file over the cap costs no disk.
  { std::ofstream(dir_ / "huge"); }
  fs::resize_file(dir_ / "huge", detail::kMaxTextFileBytes + 1);
  struct Case {
    fs::path path;
    std::string reason;
  };
  std::vector<Case> cases = {
      {"/dev/zero", "not a regular file (it is a character device)"},
      {fifo("f"), "not a regular file (it is a FIFO)"},
      {dir_ / "d", "not a regular file (it is a directory)"},
      {dir_ / "loop", "Too many levels of symbolic links"},
      {dir_ / std::string(300, 'a'), "File name too long"},
      {dir_ / "missing", "No such file or directory"},
      {dir_ / "huge", "larger than the 64 MiB limit"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path.string());
    expect_error([&] { detail::read_file(c.path, "spec file"); }, ErrorKind::Io, c.reason);
    expect_error([&] { detail::read_file(c.path, "spec file"); }, ErrorKind::Io,
                 "cannot read spec file '" + detail::shorten(c.path.string(), 300) + "'");
    expect_error([&] { load_op_file(c.path); }, ErrorKind::Io, c.reason);
    // Packages have a larger cap: a huge file is read, and refused by its format.
    if (c.path.filename() != "huge")
      expect_error([&] { load_package(c.path); }, ErrorKind::Io, "cannot read package");
  }
}

TEST_F(TrustTest, SourceFilesAreReadTheSameWay) {
  NoHang guard;
  fifo("k.cu");
  for (const std::string& source : {std::string("k.cu"), std::string("/dev/zero")}) {
    SCOPED_TRACE(source);
    std::string spec = R"({"op": "t::op", "kernel_name": "k", "source_file": ")" + source +
                       R"(", "inputs": [{"name": "x", "dtype": "float32"}],
      "outputs": [{"name": "y", "shape": {"same_as": "x"}}], "extras": [{"numel": "x"}],
      "geometry": {"elementwise": {}}})";
    std::ofstream(dir_ / "t.json") << spec;
    expect_error([&] { load_op_file(dir_ / "t.json"); }, ErrorKind::Spec,
                 "source_file: cannot read");
    expect_error([&] { load_op_file(dir_ / "t.json"); }, ErrorKind::Spec, "not a regular file");
  }
}

TEST_F(TrustTest, WritesNeverReplaceWhatIsNotARegularFile) {
  EXPECT_NE(detail::write_file_atomically("/dev/null", "x", 0644).find("character device"),
            std::string::npos);
  fs::create_directories(dir_ / "d");
  EXPECT_NE(detail::write_file_atomically(dir_ / "d", "x", 0644).find("a directory"),
            std::string::npos);
  EXPECT_NE(detail::write_file_atomically(dir_ / "none" / "f", "x", 0644), "");
  expect_error([&] { detail::write_file(dir_ / std::string(300, 'b'), "x", "package"); },
               ErrorKind::Io, "cannot write package");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1)
      << "a temporary file was left behind";
  EXPECT_NE(detail::make_directories("/dev/null/x", 0700).find("Not a directory"),
            std::string::npos);
}

TEST_F(TrustTest, HostileIncludesAreErrorsNotSignalsOrHangs) {
  NoHang guard;
  fifo("fifo.h");
  fs::create_symlink("self.h", dir_ / "self.h");
  struct Case {
    std::string include;
    ErrorKind kind;
    std::string message;
  };
  std::vector<Case> cases = {
      {"\"" + std::string(5000, 'a') + ".h\"", ErrorKind::Compile, "cannot open source file"},
      {"\"self.h\"", ErrorKind::Compile, "cannot open source file \"self.h\""},
      {"\"fifo.h\"", ErrorKind::Io,
       "resolves to '" + (dir_ / "fifo.h").string() +
           "', which is a FIFO; kernelop compiles regular files only"},
      {"\"/dev/zero\"", ErrorKind::Io, "which is a character device"},
      {"<fifo.h>", ErrorKind::Io, "which is a FIFO"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.include.substr(0, 40));
    OpDecl d = testing::relu_like_op("#include " + c.include + "\n" + kKernel);
    d.base_dir = dir_.string();
    CompileCache cache(dir_ / "cache");
    expect_error([&] { build(d, &cache); }, c.kind, c.message);
    expect_error([&] { build(d, &cache); }, c.kind, "op test::op: ");
  }
}

TEST_F(TrustTest, AnIncludePathThatIsAFileOrMissingIsSkipped) {
  std::ofstream(dir_ / "file") << "";
  std::ofstream(dir_ / "h.h") << "#define VALUE 1\n";
  OpDecl d = testing::relu_like_op("#include <h.h>\n" + std::string(kKernel));
  d.spec.include_paths = {(dir_ / "file").string(), (dir_ / "missing").string(), dir_.string()};
  CompileCache cache(dir_ / "cache");
  CompiledImage image = build(d, &cache);
  EXPECT_FALSE(image.cache_bypassed);
}

TEST_F(TrustTest, AnUnusableCacheDirectoryIsAWarningAndAnUncachedBuild) {
  std::ofstream(dir_ / "file") << "";
  for (const fs::path& bad :
       {dir_ / std::string(300, 'c') / "cache", dir_ / "file", dir_ / "file" / "below"}) {
    SCOPED_TRACE(bad.string().substr(0, 80));
    warnings_.clear();
    CompileCache cache(bad);
    CompiledImage image = build(testing::relu_like_op(kKernel), &cache);
    EXPECT_FALSE(image.images.at(0).cache_hit);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("is unusable"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find("compiling without the persistent cache"), std::string::npos);
    // Warned once per cache, not per build.
    build(testing::relu_like_op(kKernel), &cache);
    EXPECT_EQ(warnings_.size(), 1u);
  }
}

// An entry whose checksum is right but whose contents kernelop never wrote.
TEST_F(TrustTest, ForgedCacheEntriesWithAValidChecksumAreRecompiled) {
  OpDecl d = testing::relu_like_op(kKernel);
  d.base_dir = dir_.string();
  CompiledImage fresh = build(d, nullptr, {"sm_90"});
  {
    CompileCache cache(dir_ / "cache");
    build(d, &cache, {"sm_90"});
  }
  fs::path entry;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "cache"))
    if (e.path().extension() == ".kce") entry = e.path();
  ASSERT_FALSE(entry.empty());
  auto forge = [&](const nlohmann::json& meta, const std::string& cubin, const std::string& ptx) {
    std::string payload;
    auto cbor = nlohmann::json::to_cbor(meta);
    detail::put_le<std::uint64_t>(payload, cbor.size());
    payload.append(cbor.begin(), cbor.end());
    for (const std::string* blob : {&cubin, &ptx}) {
      detail::put_le<std::uint64_t>(payload, blob->size());
      payload.append(*blob);
    }
    // A well-framed entry (Note [binary framing]) whose payload is the forgery.
    std::string file = detail::frame(
        {{'K', 'O', 'P', 'C', 'A', 'C', 'H', 'E'}, CompileCache::kFormatVersion, "entry"}, 0,
        payload);
    std::ofstream(entry, std::ios::binary | std::ios::trunc) << file;
  };
  nlohmann::json good = {
      {"log", ""}, {"lowered", {"k"}}, {"codes", {{3, 1, 2, 3}}}, {"usage", {{1, 0, 0, 0, 0, 0}}}};
  struct Case {
    std::string what;
    nlohmann::json meta;
    std::string cubin, ptx;
  };
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = good;
    j[key] = std::move(value);
    return j;
  };
  std::vector<Case> cases = {
      {"0 symbols for 1 instances", with("lowered", nlohmann::json::array()), "c", "p"},
      {"0 signatures for 1 instances", with("codes", nlohmann::json::array()), "c", "p"},
      {"invalid signature codes", with("codes", {nlohmann::json::array()}), "c", "p"},
      {"invalid signature codes", with("codes", {{5, 1}}), "c", "p"},
      {"no CUBIN", good, "", "p"},
      {"no PTX", good, "c", ""},
      {"resource usage of the wrong length", with("usage", nlohmann::json::array()), "c", "p"},
      {"not a compile result", with("usage", {{-7, 0, 0, 0, 0, 0}}), "c", "p"},
      {"not a compile result", with("usage", "oops"), "c", "p"},
      {"not a compile result", nlohmann::json::array(), "c", "p"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    warnings_.clear();
    forge(c.meta, c.cubin, c.ptx);
    CompileCache cache(dir_ / "cache");
    CompiledImage image = build(d, &cache, {"sm_90"});
    EXPECT_FALSE(image.images.at(0).cache_hit);
    EXPECT_EQ(image.images.at(0).data, fresh.images.at(0).data);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("is invalid (" + c.what), std::string::npos) << warnings_[0];
  }
}

TEST_F(TrustTest, ConstantExpressionsThatCannotBeEvaluatedAreRefusedByValidation) {
  struct Case {
    std::string expr, message;
  };
  std::vector<Case> extras = {
      {"1 // 0", "extras[0].expr: '1 // 0' divides by zero"},
      {"numel(x) % 0", "'numel(x) % 0' divides by zero"},
      {"cdiv(numel(x), 2 - 2)", "divides by zero"},
      {"9223372036854775807 + 1", "expression '9223372036854775807 + 1' overflows int64"},
      {"numel(x) + 4611686018427387904 * 2", "overflows int64"},
  };
  for (const Case& c : extras) {
    SCOPED_TRACE(c.expr);
    OpDecl d = testing::relu_like_op(kKernel);
    d.spec.extras = {ExtraExpr{Expr::parse(c.expr), false}};
    expect_error([&] { derive_plan(d); }, ErrorKind::Spec, c.message);
  }
  OpDecl d = testing::relu_like_op(kKernel);
  d.spec.requirements = {Requirement::parse("1 == 2")};
  expect_error([&] { derive_plan(d); }, ErrorKind::Spec, "requires[0]: '1 == 2' is always false");
  d.spec.requirements = {Requirement::parse("numel(x) >= 0"), Requirement::parse("2 > 1")};
  EXPECT_NO_THROW(derive_plan(d));
}

TEST_F(TrustTest, MessagesCutLongExpressionsAroundTheColumn) {
  std::string text = "numel(x)";
  for (int i = 0; i < 200; ++i) text += " + 1";
  text += " +* 2";
  try {
    Expr::parse(text);
    FAIL() << "expected a parse error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_LT(what.size(), 300u) << what;
    EXPECT_NE(what.find("+* 2"), std::string::npos) << what;
    EXPECT_NE(what.find("at column " + std::to_string(text.size() - 2)), std::string::npos) << what;
  }
}

TEST_F(TrustTest, AMisspelledKernelInARealSourceFileIsNamed) {
  // A source file of many lines, where NVRTC's own name map reports "__nv_name_map(2)".
  std::string source = "// a kernel\n\n\n\n\n\n\n\n" + std::string(kKernel) + "\n\n\n";
  std::ofstream(dir_ / "relu.cu") << source;
  OpDecl d = testing::relu_like_op(source, "rleu");
  d.base_dir = dir_.string();
  d.spec.source_file = "relu.cu";
  expect_error([&] { build(d); }, ErrorKind::Compile,
               "kernel 'rleu' is not a __global__ function of " + (dir_ / "relu.cu").string() +
                   " that NVRTC can take the address of");
  // A real error in the user's code is not mistaken for a missing kernel.
  OpDecl broken = testing::relu_like_op(source + "int oops = undefined_thing;\n");
  broken.base_dir = dir_.string();
  expect_error([&] { build(broken); }, ErrorKind::Compile, "NVRTC failed to compile");
}

TEST_F(TrustTest, APtxasFailureKeepsItsReport) {
  OpDecl d = testing::relu_like_op(
      "extern \"C\" __global__ void k(const float* x, int n, float* y) {\n"
      "  __shared__ float big[1 << 20];\n  big[threadIdx.x] = x[0];\n  __syncthreads();\n"
      "  y[0] = big[n];\n}\n");
  // NVRTC puts ptxas' error after a NUL in its log: it must not be cut there.
  expect_error([&] { build(d, nullptr, {"sm_90"}); }, ErrorKind::Compile,
               "ptxas error   : Entry function 'k' uses too much shared data (0x400000 bytes");
}

TEST_F(TrustTest, UnsupportedArchitecturesAreNamedWithWhatIsSupported) {
  OpDecl d = testing::relu_like_op(kKernel);
  for (std::string arch : {"sm_52", "sm_999"}) {
    SCOPED_TRACE(arch);
    expect_error([&] { build(d, nullptr, {arch}); }, ErrorKind::Compile,
                 "cannot compile for architecture '" + arch + "' (it supports sm_");
    expect_error([&] { build(d, nullptr, {arch}); }, ErrorKind::Compile,
                 "invalid value for --gpu-architecture");
  }
  expect_error([&] { build(d, nullptr, {"compute_xx"}); }, ErrorKind::Spec,
               "architecture 'compute_xx' is invalid");
}

}  // namespace
}  // namespace kernelop

namespace kernelop {
namespace {

// Note [raising errors]: a check streams (and builds) its message only when it fails.
TEST(ErrorBuilder, ChecksBuildTheirMessageOnlyWhenTheyFail) {
  int built = 0;
  auto text = [&] {
    ++built;
    return std::string("detail");
  };
  KERNELOP_CHECK(1 + 1 == 2, Spec) << text();
  EXPECT_EQ(built, 0);
  testing::expect_error([&] { KERNELOP_CHECK(1 + 1 == 3, Type) << "got " << text(); },
                        ErrorKind::Type, "got detail");
  EXPECT_EQ(built, 1);
  testing::expect_error([&] { KERNELOP_INTERNAL_CHECK(2 < 1) << "(why)"; }, ErrorKind::Internal,
                        "internal error (a bug in kernelop): '2 < 1' is false at ");
}

}  // namespace
}  // namespace kernelop
