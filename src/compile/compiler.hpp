// The compile stage's class, shared by its two parts: compile.cpp (options, cache keys, the jobs,
// and the image assembled from their results) and compile_jobs.cpp (running the jobs: the
// compile cache, NVRTC, and the errors of a failed compilation). Private to the library.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nvrtc.h>

#include "compile/include_scan.hpp"
#include "compile/job_result.hpp"
#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"

namespace kernelop::detail {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One NVRTC run: "-arch=sm_90" gives a CUBIN and PTX, "-arch=compute_90" PTX only.
struct Job {
  std::string arch_option;  // "sm_90" or "compute_90"
  std::string key;
  int program = 0;  // OpPlan::programs: the configs' -D defines
};

// The program's directory when there is no base directory: never the working directory.
inline constexpr std::string_view kNoDirectory = "/dev/null";

class Compiler {
 public:
  Compiler(const OpPlan& plan, const CompileOptions& options) : plan_(plan), options_(options) {}

  CompiledImage run();

 private:
  void check_archs();
  // Note [include resolution] in include_scan.hpp: NVRTC looks for the top-level source's quoted
  // includes in the directory of the program's name, so the name is the source's absolute path
  // (an inline source is named kernel.cu in the spec's directory). Without a base directory, the
  // name's directory is one that cannot exist (/dev/null is not a directory), never the working
  // directory.
  void name_program();
  void build_options();
  void make_jobs(CompiledImage& image);
  // The -D options of a program's configs (define tunables), after the spec's own.
  std::vector<std::string> program_options(int program) const;
  std::string display_name() const;

  // compile_jobs.cpp: running the jobs, in parallel, through the compile cache.
  std::vector<JobResult> run_jobs();
  JobResult run_job(const Job& job, CompileCache* cache);
  // A cached result, decoded and checked as if hostile (a valid checksum only proves that the
  // bytes are the ones written, not that the writer was kernelop).
  std::optional<JobResult> cached(const Job& job, const std::shared_ptr<const std::string>& payload,
                                  CompileCache* cache, Clock::time_point t0) const;
  std::string check_cached(const Job& job, const JobResult& r) const;
  JobResult compile_job(const Job& job);
  // Registers and stack frame from the CUBIN's attributes; spills and static shared memory (whose
  // section also holds reserved bytes on some architectures) only ptxas reports: marked unknown.
  ResourceUsage usage_from_cubin(const Job& job, const std::string& cubin,
                                 const std::string& lowered) const;
  // True when every error of the log lies in code kernelop generated: NVRTC's name-expression
  // map ("__nv_name_map(2): error") or the signature probe after the user's lines. NVRTC reports
  // errors as "<file>(<line>): error ...".
  bool only_generated_errors(const std::string& log) const;
  [[noreturn]] void fail_compile(const Job& job, nvrtcResult result, std::string log) const;
  // A note for a log that could not open a header: the directories searched and the spec's
  // include_paths that name no directory ("" for any other log).
  std::string missing_include_note(const std::string& log) const;

  const OpPlan& plan_;
  const CompileOptions& options_;
  std::vector<std::string> archs_, options_list_;
  std::vector<std::vector<std::string>> expressions_;  // per program: name, probe, name, ...
  std::vector<std::vector<int>> program_instances_;    // per program: its instances
  detail::IncludeRules rules_;
  std::string source_, program_name_;
  std::vector<Job> jobs_;
  std::map<std::pair<int, std::string>, std::size_t> job_of_;  // (program, arch number)
  bool use_cache_ = true;
};

}  // namespace kernelop::detail
