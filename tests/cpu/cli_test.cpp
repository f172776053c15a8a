// The kernelop command-line tool: exit codes, reports, cache reuse, output files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernelop/package.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kernelop-cli-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the CLI in `cwd` (default: the source tree) under a 60 s timeout; a hang or a signal
  // shows as an exit code of 124 or >= 128.
  CliRun run(const std::string& args, const std::string& env = "", std::string cwd = "",
             const char* program = KERNELOP_CLI_PATH) {
    if (cwd.empty()) cwd = testing::source_dir().string();
    std::string cmd = "cd '" + cwd + "' && KERNELOP_CACHE_DIR='" + (dir_ / "cache").string() +
                      "' " + env + " timeout -s KILL 60 '" + program + "' " + args + " >'" +
                      (dir_ / "out").string() + "' 2>'" + (dir_ / "err").string() + "'";
    int status = std::system(cmd.c_str());
    return CliRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "out"),
                  slurp(dir_ / "err")};
  }

  // A failure the user can act on: status 1 or 2 (never a signal or a timeout), a message.
  void expect_clean_failure(const CliRun& r, const std::string& needle) {
    EXPECT_TRUE(r.code == 1 || r.code == 2) << "exit status " << r.code << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, needle)) << r.err;
    EXPECT_FALSE(contains(r.err, "terminate called")) << r.err;
  }

  fs::path dir_;
};

TEST_F(CliTest, HelpEverywhere) {
  CliRun top = run("--help");
  EXPECT_EQ(top.code, 0);
  EXPECT_TRUE(contains(top.out, "build")) << top.out;
  EXPECT_TRUE(contains(top.out, "check"));
  CliRun build = run("build --help");
  EXPECT_EQ(build.code, 0);
  EXPECT_TRUE(contains(build.out, "--arch")) << build.out;
  EXPECT_TRUE(contains(build.out, "--no-cache"));
  EXPECT_EQ(run("check --help").code, 0);
}

// The installed CLI carries no example code: `run --check` (the examples' CPU references) is
// kernelop-examples', which is built for the repository's checks and never installed.
TEST_F(CliTest, OnlyTheExamplesRunnerChecksAgainstReferences) {
  CliRun installed = run("run examples/relu.json --shape x=4 --check");
  EXPECT_EQ(installed.code, 2);
  EXPECT_TRUE(contains(installed.err, "--check")) << installed.err;
  CliRun help = run("run --help", "", "", KERNELOP_EXAMPLES_PATH);
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_TRUE(contains(help.out, "--check")) << help.out;
  CliRun bad = run("run examples/relu.json --check --bogus", "", "", KERNELOP_EXAMPLES_PATH);
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "--bogus")) << bad.err;
}

// A newcomer's first two commands: bare `kernelop` is the help, `--version` the version (the
// one in CMakeLists.txt's project(), which packages record too).
TEST_F(CliTest, BareIsHelpAndVersionIsTheProjects) {
  CliRun bare = run("");
  EXPECT_EQ(bare.code, 0) << bare.err;
  EXPECT_TRUE(contains(bare.out, "Usage:")) << bare.out;
  EXPECT_TRUE(contains(bare.out, "build")) << bare.out;
  CliRun version = run("--version");
  EXPECT_EQ(version.code, 0) << version.err;
  EXPECT_EQ(version.out, "kernelop " + std::string(kernelop::version()) + "\n");
}

TEST_F(CliTest, UsageErrorsExitWithTwo) {
  CliRun missing = run("check does/not/exist.json");
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(contains(missing.err, "does/not/exist.json")) << missing.err;
  EXPECT_EQ(run("frobnicate").code, 2);
}

TEST_F(CliTest, CheckPrintsWhatTheSpecImplies) {
  CliRun r = run("check examples/rowsum_keepdim.json examples/bias_add_2d.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "schema    kernelop_examples::rowsum_keepdim(Tensor x) -> Tensor"));
  EXPECT_TRUE(
      contains(r.out, "output    y: reduce(x, dims=[-1], keepdim=true)  dtype float32 (from x)"));
  EXPECT_TRUE(contains(
      r.out, "grid  = [cdiv(dim(y, -1), 16), cdiv(dim(y, -2), 16), numel_except(y, -1, -2)]"));
  EXPECT_TRUE(contains(r.out, "requires  rank(y) >= 2"));
  EXPECT_TRUE(contains(r.out, "int dim(x, -2)")) << r.out;
}

TEST_F(CliTest, TunedOpsShowTheirTacticsAndPackagesTakeOnlyTheirOwnTables) {
  CliRun r = run("check examples/gemm_tiled.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "tactics   8 (tunables: TILE WPT (-D))")) << r.out;
  EXPECT_TRUE(contains(r.out, "  7  TILE=64, WPT=16  requires dim(a, 0) >= 64, dim(b, 1) >= 64"));
  EXPECT_TRUE(contains(r.out, "tuning key dim(a, 0), dim(b, 1), dim(a, 1) (each rounded up"));
  r = run("build examples/softmax_tuned.json --arch sm_90 --package -o " + (dir_ / "pkg").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "softmax_tuned<32, 4, 8>  tactic 7 (THREADS=32, VEC=4, ROWS=8)"))
      << r.out;
  r = run("inspect " + (dir_ / "pkg" / "kernelop_examples.softmax_tuned.kop").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "tactics   8")) << r.out;
  // --tuning: only with --package; a file without this op's table, or a corrupt one, is refused.
  std::ofstream(dir_ / "other.json") << R"J([{"format": 1, "op": "x::y", "fingerprint": "0",
      "device": "d", "arch": "sm_90", "kernelop": "0", "configs": ["A=1"], "entries": []}])J";
  expect_clean_failure(run("build examples/softmax_tuned.json --tuning " +
                           (dir_ / "other.json").string() + " -o " + (dir_ / "o").string()),
                       "build --tuning embeds tables in packages; add --package");
  expect_clean_failure(run("build examples/softmax_tuned.json --arch sm_90 --package --tuning " +
                           (dir_ / "other.json").string() + " -o " + (dir_ / "o").string()),
                       "op kernelop_examples::softmax_tuned: " + (dir_ / "other.json").string() +
                           " has no tuning table for it");
  std::ofstream(dir_ / "bad.json") << R"J([{"format": 1, "op": "kernelop_examples::softmax_tuned",
      "fingerprint": "0", "device": "d", "arch": "sm_90", "kernelop": "0", "configs": [],
      "entries": []}])J";
  expect_clean_failure(run("build examples/softmax_tuned.json --arch sm_90 --package --tuning " +
                           (dir_ / "bad.json").string() + " -o " + (dir_ / "o").string()),
                       "does not fit this build: it was tuned with another build of the op");
  // A FIFO given as the table is refused, never waited on.
  ASSERT_EQ(::mkfifo((dir_ / "fifo.json").c_str(), 0600), 0);
  expect_clean_failure(run("build examples/softmax_tuned.json --arch sm_90 --package --tuning " +
                           (dir_ / "fifo.json").string() + " -o " + (dir_ / "o").string()),
                       "not a regular file");
  std::ofstream(dir_ / "corrupt.json") << "[{\"format\": 1,";
  expect_clean_failure(run("build examples/softmax_tuned.json --arch sm_90 --package --tuning " +
                           (dir_ / "corrupt.json").string() + " -o " + (dir_ / "o").string()),
                       "corrupt.json: not valid JSON");
}

TEST_F(CliTest, InvalidSpecFailsWithTheFieldOnStderr) {
  std::ofstream(dir_ / "bad.json") << R"({"op": "t::bad", "kernel_name": "k", "kernel_source": "x",
    "inputs": [{"name": "x"}], "outputs": [{"name": "y", "shape": {"same_as": "q"}}],
    "geometry": {"elementwise": {"block": [256]}}})";
  CliRun r = run("check '" + (dir_ / "bad.json").string() + "' examples/relu.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(
      r.err, "op t::bad: outputs[0].shape.same_as: 'q' is not a tensor input (tensor inputs: x)"))
      << r.err;
  EXPECT_TRUE(contains(r.out, "kernelop_examples::relu")) << "the other spec is still checked";
}

TEST_F(CliTest, BuildReportsAndTheSecondRunIsServedFromTheCache) {
  CliRun cold = run(
      "build examples/relu.json examples/sin_cos.json --arch sm_80 --arch sm_90 --arch compute_90");
  ASSERT_EQ(cold.code, 0) << cold.err;
  EXPECT_TRUE(contains(cold.out, "3 images, 0 from the cache")) << cold.out;
  EXPECT_TRUE(contains(cold.out, "sm_80       cubin  ")) << cold.out;
  EXPECT_TRUE(contains(cold.out, "compute_90  ptx")) << cold.out;
  EXPECT_TRUE(contains(cold.out, "float* s")) << cold.out;
  CliRun warm = run(
      "build examples/relu.json examples/sin_cos.json --arch sm_80 --arch sm_90 --arch compute_90");
  ASSERT_EQ(warm.code, 0) << warm.err;
  EXPECT_FALSE(contains(warm.out, "0 from the cache")) << warm.out;
  EXPECT_TRUE(contains(warm.out, "3 images, 3 from the cache")) << warm.out;
  CliRun uncached = run("build examples/relu.json --arch sm_90 --no-cache");
  EXPECT_TRUE(contains(uncached.out, "1 images, 0 from the cache")) << uncached.out;
}

TEST_F(CliTest, BuildWritesImagesAndAStandaloneSpec) {
  CliRun r = run("build examples/relu_generic.json --arch sm_90 --arch compute_90 -o '" +
                 (dir_ / "out-dir").string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  fs::path base = dir_ / "out-dir" / "kernelop_examples.relu_generic";
  EXPECT_EQ(slurp(base.string() + ".sm_90.cubin").substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_TRUE(contains(slurp(base.string() + ".compute_90.ptx"), ".target sm_90"));
  std::string spec = slurp(base.string() + ".json");
  EXPECT_TRUE(contains(spec, "\"kernel_source\"")) << "the written spec inlines its source";
  EXPECT_FALSE(contains(spec, "\"source_file\""));
}

TEST_F(CliTest, CompileErrorsExitWithOne) {
  std::ofstream(dir_ / "broken.json") << R"({"op": "t::broken", "kernel_name": "k",
    "kernel_source": "extern \"C\" __global__ void k(const float* x, int n, float* y) { oops; }",
    "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}], "geometry": {"elementwise": {"block": [256]}}})";
  CliRun r = run("build '" + (dir_ / "broken.json").string() + "' --arch sm_90");
  EXPECT_EQ(r.code, 1);
  // An inline source is named kernel.cu in the spec's directory.
  EXPECT_TRUE(contains(r.err, "op t::broken: NVRTC failed to compile " +
                                  fs::weakly_canonical(dir_).string() + "/kernel.cu for sm_90"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "identifier \"oops\" is undefined")) << r.err;
}

TEST_F(CliTest, UnusableOutputDirectoriesAreErrorsNamingThePath) {
  std::ofstream(dir_ / "file") << "";
  for (const std::string& out :
       {std::string("/dev/null"), (dir_ / "file").string(), std::string("/proc/kernelop-x"),
        (dir_ / "file" / "sub").string()}) {
    SCOPED_TRACE(out);
    CliRun r = run("build examples/relu.json --arch compute_90 -o '" + out + "'");
    expect_clean_failure(r, "cannot use output directory '" + out + "'");
    r = run("build examples/relu.json --arch compute_90 --package -o '" + out + "'");
    expect_clean_failure(r, "cannot use output directory '" + out + "'");
  }
}

TEST_F(CliTest, FilesThatAreNotRegularAreRefusedWithoutHanging) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  expect_clean_failure(run("inspect /dev/zero"),
                       "cannot read package '/dev/zero': not a regular file (it is a character "
                       "device)");
  expect_clean_failure(run("inspect '" + (dir_ / "fifo").string() + "'"), "(it is a FIFO)");
  expect_clean_failure(run("check '" + (dir_ / "fifo").string() + "'"), "(it is a FIFO)");
  expect_clean_failure(run("build /dev/zero"), "cannot read spec file '/dev/zero'");
  std::ofstream(dir_ / "t.json") << R"({"op": "t::op", "kernel_name": "k", "source_file": "fifo",
    "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}})";
  expect_clean_failure(run("build '" + (dir_ / "t.json").string() + "'"),
                       "source_file: cannot read '" + (dir_ / "fifo").string() + "'");
}

TEST_F(CliTest, ABadCacheDirectoryIsAWarningAndTheBuildSucceeds) {
  std::string long_dir = (dir_ / std::string(300, 'c')).string();
  for (const std::string& cache : {long_dir, std::string("/dev/null")}) {
    SCOPED_TRACE(cache.substr(0, 60));
    CliRun r =
        run("build examples/relu.json --arch compute_90", "KERNELOP_CACHE_DIR='" + cache + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "kernelop: warning: compile cache directory")) << r.err;
    EXPECT_TRUE(contains(r.err, "compiling without the persistent cache")) << r.err;
  }
  CliRun r = run("build examples/relu.json --arch compute_90", "CUDA_HOME='" + long_dir + "'");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(CliTest, BuildNeverOverwritesItsOwnInputs) {
  // The spec is named like the file build -o writes: <ns>.<name>.json.
  std::string spec = R"({"op": "t::op", "kernel_name": "k", "source_file": "t.op.compute_90.ptx",
    "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}})";
  std::string source =
      "extern \"C\" __global__ void k(const float* x, int n, float* y) { y[0] = x[0]; }\n";
  std::ofstream(dir_ / "t.op.json") << spec;
  std::ofstream(dir_ / "t.op.compute_90.ptx") << source;
  CliRun r = run("build t.op.json --arch compute_90 -o .", "", dir_.string());
  expect_clean_failure(r, "it is one of this build's inputs");
  EXPECT_EQ(slurp(dir_ / "t.op.json"), spec);
  EXPECT_EQ(slurp(dir_ / "t.op.compute_90.ptx"), source);
  // A hard link is the same file under another name.
  fs::create_directories(dir_ / "outdir");
  fs::create_hard_link(dir_ / "t.op.json", dir_ / "outdir" / "t.op.json");
  r = run("build t.op.json --arch compute_90 -o outdir", "", dir_.string());
  expect_clean_failure(r, "it is one of this build's inputs");
  EXPECT_EQ(slurp(dir_ / "t.op.json"), spec);
  EXPECT_FALSE(fs::exists(dir_ / "outdir" / "t.op.compute_90.ptx")) << "a failed build left a file";
}

TEST_F(CliTest, TwoSpecsOfOneOpInOneRunAreAnError) {
  std::string spec = R"({"op": "t::twice", "kernel_name": "k", "kernel_source":
    "extern \"C\" __global__ void k(const float* x, int n, float* y) { y[0] = VALUE; }",
    "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}, "defines": ["VALUE=)";
  std::ofstream(dir_ / "a.json") << spec << R"(1.0f"]})";
  std::ofstream(dir_ / "b.json") << spec << R"(2.0f"]})";
  CliRun r = run("build a.json b.json --arch compute_90 --package -o pkg", "", dir_.string());
  expect_clean_failure(r, "op t::twice is defined by both 'a.json' and 'b.json'");
  // The first one's package stays, whole.
  EXPECT_TRUE(fs::exists(dir_ / "pkg" / "t.twice.kop"));
  EXPECT_EQ(run("inspect '" + (dir_ / "pkg" / "t.twice.kop").string() + "'").code, 0);
}

TEST_F(CliTest, HostileIncludesEndInAMessageNotASignalOrAHang) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.h").c_str(), 0600), 0);
  fs::create_symlink("self.h", dir_ / "self.h");
  const std::string body =
      "\nextern \"C\" __global__ void k(const float* x, int n, float* y) { y[0] = x[0]; }\n";
  struct Case {
    std::string include, message;
  };
  std::vector<Case> cases = {
      {"\"" + std::string(5000, 'a') + ".h\"", "cannot open source file"},
      {"\"self.h\"", "cannot open source file \"self.h\""},
      {"\"fifo.h\"", "which is a FIFO; kernelop compiles regular files only"},
      {"\"/dev/zero\"", "which is a character device"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::ofstream(dir_ / "k.cu") << "#include " << c.include << body;
    std::ofstream(dir_ / "t.json") << R"({"op": "t::inc", "kernel_name": "k", "source_file": "k.cu",
      "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
      "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}})";
    expect_clean_failure(run("build t.json --arch compute_90", "", dir_.string()), c.message);
  }
  // An include path the build cannot use (a file, a missing directory) is skipped.
  std::ofstream(dir_ / "k.cu") << "#include <h.h>" << body;
  std::ofstream(dir_ / "inc.h") << "";
  fs::create_directories(dir_ / "real");
  std::ofstream(dir_ / "real" / "h.h") << "#define H 1\n";
  std::ofstream(dir_ / "t.json") << R"({"op": "t::inc", "kernel_name": "k", "source_file": "k.cu",
    "include_paths": ["inc.h", "missing", "real"],
    "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}})";
  CliRun r = run("build t.json --arch compute_90", "", dir_.string());
  EXPECT_EQ(r.code, 0) << r.err;
}

// A header that is not found names where it was looked for, and the include path that names no
// directory (which NVRTC skips without a word).
TEST_F(CliTest, AMissingHeaderNamesTheDirectoriesAndTheBrokenIncludePath) {
  std::ofstream(dir_ / "k.cu") << "#include \"helper.h\"\n"
                               << "__global__ void k(const float* x, int n, float* y) {}\n";
  fs::create_directories(dir_ / "inc");
  std::ofstream(dir_ / "t.json") << R"({"op": "t::inc", "kernel_name": "k", "source_file": "k.cu",
    "include_paths": ["incs", "inc"],
    "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}], "geometry": {"elementwise": {}}})";
  CliRun r = run("build t.json --arch sm_90 --no-cache", "", dir_.string());
  expect_clean_failure(r, "cannot open source file \"helper.h\"");
  std::string base = fs::canonical(dir_).string();
  EXPECT_TRUE(contains(r.err, "the directories searched besides the toolkit's: " + base + ", " +
                                  base + "/incs, " + base + "/inc"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "include_paths[0] 'incs' (" + base + "/incs) is not a directory"))
      << r.err;
  EXPECT_FALSE(contains(r.err, "include_paths[1]")) << r.err;  // inc is a directory
}

TEST_F(CliTest, CheckRefusesExpressionsThatCanNeverBeEvaluated) {
  struct Case {
    std::string field, message;
  };
  std::vector<Case> cases = {
      {R"("extras": [{"expr": "1 // 0"}])", "extras[0].expr: '1 // 0' divides by zero"},
      {R"("extras": [{"expr": "9223372036854775807 + 1"}])", "overflows int64"},
      {R"("extras": [{"numel": "x"}], "requires": ["1 == 2"])",
       "requires[0]: '1 == 2' is always false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    std::ofstream(dir_ / "t.json") << R"({"op": "t::expr", "kernel_name": "k",
      "kernel_source": "extern \"C\" __global__ void k(const float* x, int n, float* y) {}",
      "inputs": [{"name": "x", "dtype": "float32"}], "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
      )" << c.field << R"(, "geometry": {"elementwise": {}}})";
    expect_clean_failure(run("check '" + (dir_ / "t.json").string() + "'"), c.message);
  }
}

TEST_F(CliTest, HowTheSpecPathIsSpelledDoesNotChangeTheCacheEntry) {
  fs::copy_file(testing::examples_dir() / "relu.json", dir_ / "t.json");
  fs::copy_file(testing::examples_dir() / "relu.cu", dir_ / "relu.cu");
  CliRun first = run("build t.json --arch compute_90", "", dir_.string());
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_TRUE(contains(first.out, "0 from the cache")) << first.out;
  for (const std::string& spelled : {(dir_ / "t.json").string(), std::string("./t.json"),
                                     std::string("../") + dir_.filename().string() + "/t.json"}) {
    SCOPED_TRACE(spelled);
    CliRun again = run("build '" + spelled + "' --arch compute_90", "", dir_.string());
    EXPECT_EQ(again.code, 0) << again.err;
    EXPECT_TRUE(contains(again.out, "1 from the cache")) << again.out;
  }
}

// Hostile input (issue "Trust, second pass"; the library's cases are in hostile_test): scalars
// and tactic ids parse whole or are refused, naming the value; omitted scalars take the spec's
// default or are required.
class HostileCliTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    std::ofstream(dir_ / "mix.json") << R"({
  "op": "hostile_cli::mix", "kernel_name": "k",
  "kernel_source": "extern \"C\" __global__ void k(const float* x, float a, int k, bool neg, float b, int n, float* y) {}",
  "inputs": [{"name": "x", "dtype": "float32"}, {"name": "a", "scalar": "float"},
             {"name": "k", "scalar": "int"}, {"name": "neg", "scalar": "bool"},
             {"name": "b", "scalar": "float", "default": 0.25}],
  "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
  "extras": [{"numel": "x"}],
  "geometry": {"elementwise": {"block": [256], "layout": "flat"}}
})";
  }
  std::string mix(const std::string& scalars) {
    return "run '" + (dir_ / "mix.json").string() + "' --shape x=16 --iterations 1 --warmup 0 " +
           scalars;
  }
};

TEST_F(HostileCliTest, ScalarsParseWholeOrAreRefusedNamingTheValue) {
  struct Case {
    const char* arg;
    const char* message;
  };
  for (const Case& c : {
           Case{"--scalar a=1 --scalar k=12abc --scalar neg=true",
                "op hostile_cli::mix: --scalar k='12abc' is not a valid int (expected a decimal "
                "integer like -3 or 4096)"},
           Case{"--scalar a=1 --scalar k=1e3 --scalar neg=true",
                "--scalar k='1e3' is not a valid int"},
           Case{"--scalar a=1.5xyz --scalar k=1 --scalar neg=true",
                "--scalar a='1.5xyz' is not a valid float (expected a number like 2.5 or 1e-3)"},
           Case{"--scalar a=1 --scalar k=1 --scalar neg=True",
                "--scalar neg='True' is not a valid bool (expected true, false, 1 or 0)"},
           Case{"--scalar a=1 --scalar k=1 --scalar neg=yes",
                "--scalar neg='yes' is not a valid bool"},
           Case{"--scalar a=1 --scalar k=1 --scalar neg=2", "--scalar neg='2' is not a valid bool"},
           Case{"--scalar a=1 --scalar k=1",
                "op hostile_cli::mix: give the value of every scalar without a default with "
                "--scalar NAME=VALUE; missing: neg"},
           Case{"", "missing: a, k, neg"},
           Case{"--scalar a=1 --scalar k=1 --scalar neg=1 --scalar alpah=2",
                "--scalar alpah=...: op hostile_cli::mix has no scalar of that name (its "
                "scalars: a, k, neg, b)"},
       }) {
    expect_clean_failure(run(mix(c.arg)), c.message);
  }
  // A 10 MB value is cut in the message.
  CliRun huge = run(mix("--scalar a=1 --scalar neg=1 --scalar k=" + std::string(100000, '9')));
  expect_clean_failure(huge, "characters)' is not a valid int");
  EXPECT_LT(huge.err.size(), 2000u);
}

TEST_F(HostileCliTest, OmittedScalarsTakeTheSpecsDefault) {
  // Parsed before any GPU is needed: the line is printed here too (the run then fails without a
  // GPU, or runs on one).
  CliRun r = run(mix("--scalar a=-2.5 --scalar k=-7 --scalar neg=false"));
  EXPECT_TRUE(contains(r.out, "  scalars a=-2.5, k=-7, neg=false, b=0.25 (default)"))
      << r.out << r.err;
  CliRun given = run(mix("--scalar a=1e3 --scalar k=3 --scalar neg=1 --scalar b=4"));
  EXPECT_TRUE(contains(given.out, "  scalars a=1000, k=3, neg=true, b=4\n")) << given.out;
}

TEST_F(HostileCliTest, TacticIdsAreInRangeOrRefused) {
  std::string tuned = "run examples/softmax_tuned.json --shape x=4x8 --iterations 1 --tactic ";
  expect_clean_failure(run(tuned + "-5"),
                       "op kernelop_examples::softmax_tuned: cannot pin tactic -5; expected -1 "
                       "(unpin) or 0..7");
  expect_clean_failure(run(tuned + "99"), "cannot pin tactic 99; expected -1 (unpin) or 0..7");
  CliRun text = run(tuned + "1.9");
  EXPECT_EQ(text.code, 2) << text.err;  // CLI11's parse error: a usage error
  EXPECT_EQ(run(tuned + "12abc").code, 2);
  EXPECT_EQ(run(mix("--scalar a=1 --scalar k=1 --scalar neg=1 --iterations -1")).code, 2);
}

TEST_F(HostileCliTest, EnvironmentFlagsAreOneOrZero) {
  CliRun r = run("build examples/relu.json -o '" + (dir_ / "built").string() + "' --arch sm_80",
                 "KERNELOP_DISABLE_CACHE=yes");
  expect_clean_failure(r,
                       "environment variable KERNELOP_DISABLE_CACHE='yes': expected 1 (on) or "
                       "0 (off)");
}

}  // namespace
}  // namespace kernelop
