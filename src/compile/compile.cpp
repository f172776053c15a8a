// The compile stage: options, cache keys, parallel NVRTC runs per architecture, verification.
#include "kernelop/compile.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include <nvrtc.h>
#include <sys/stat.h>

#include "compile/config_launch.hpp"
#include "compile/cubin_info.hpp"
#include "compile/include_scan.hpp"
#include "compile/job_result.hpp"
#include "compile/nvrtc_program.hpp"
#include "compile/resource_usage.hpp"
#include "compile/signature.hpp"
#include "core/arch.hpp"
#include "core/file_io.hpp"
#include "core/hash.hpp"
#include "core/json_util.hpp"
#include "core/words.hpp"
#include "kernelop/cache.hpp"
#include "kernelop/launch_limits.hpp"

namespace kernelop {
namespace {

using detail::JobResult;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One NVRTC run: "-arch=sm_90" gives a CUBIN and PTX, "-arch=compute_90" PTX only.
struct Job {
  std::string arch_option;  // "sm_90" or "compute_90"
  std::string key;
  int program = 0;  // OpPlan::programs: the configs' -D defines
};

// The program's directory when there is no base directory: never the working directory.
constexpr std::string_view kNoDirectory = "/dev/null";

// The toolkit's headers (CUDA, CCCL) are not scanned (Note [include scan]); the key covers the
// toolkit install instead: where it is, and the size and time of its version headers.
const std::string& toolkit_identity() {
  static const std::string identity = [] {
    std::string id;
    for (const std::string& dir : cuda_include_dirs()) {
      id += detail::normalized_path(dir) + ";";
      for (const char* file : {"cuda.h", "cuda/std/__cccl/version.h", "cuda_fp16.h"}) {
        struct stat st {};
        if (::stat((fs::path(dir) / file).c_str(), &st) == 0) {
          id += std::string(file) + ":" + std::to_string(st.st_size) + ":" +
                std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ";";
        }
      }
    }
    return id;
  }();
  return identity;
}

bool nvrtc_at_least(int major, int minor) {
  int ma = 0, mi = 0;
  nvrtcVersion(&ma, &mi);
  return ma > major || (ma == major && mi >= minor);
}

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

class Compiler {
 public:
  Compiler(const OpPlan& plan, const CompileOptions& options) : plan_(plan), options_(options) {}

  CompiledImage run() {
    auto t0 = Clock::now();
    const KernelSpec& spec = plan_.spec;
    archs_ = !options_.archs.empty()       ? options_.archs
             : !spec.arch_override.empty() ? spec.arch_override
                                           : default_archs();
    check_archs();
    name_program();
    build_options();
    source_ = spec.kernel_source + "\n" + detail::signature_probe_source();
    for (std::size_t p = 0; p < plan_.programs.size(); ++p) {
      program_instances_.push_back(plan_.instances_of(static_cast<int>(p)));
      std::vector<std::string> expressions;
      for (int i : program_instances_.back()) {
        const std::string& name = plan_.instances[static_cast<std::size_t>(i)].name_expression;
        expressions.push_back(name);
        expressions.push_back(detail::signature_probe_expression(name));
      }
      expressions_.push_back(std::move(expressions));
    }
    CompiledImage image;
    image.nvrtc_version = detail::nvrtc_version();
    image.options = options_list_;
    make_jobs(image);
    std::vector<JobResult> results = run_jobs();

    // Every instance's symbol and signature codes, from the first job of its program.
    std::vector<std::vector<std::int64_t>> codes(plan_.instances.size());
    image.lowered_names.resize(plan_.instances.size());
    for (std::size_t j = 0; j < jobs_.size(); ++j) {
      const JobResult& r = results[j];
      const auto& members = program_instances_[static_cast<std::size_t>(jobs_[j].program)];
      for (std::size_t k = 0; k < members.size(); ++k) {
        auto i = static_cast<std::size_t>(members[k]);
        if (codes[i].empty()) {
          codes[i] = r.codes[k];
          image.lowered_names[i] = r.lowered[k];
        } else if (codes[i] != r.codes[k]) {
          KERNELOP_FAIL(Internal) << "op " << plan_.op_name
                                  << ": kernel signature differs between architectures";
        }
      }
    }
    image.plan = detail::verify_signature(plan_, codes);
    std::set<std::string> logs;
    for (const JobResult& r : results) {
      if (!r.log.empty() && logs.insert(r.log).second) {
        image.log += (image.log.empty() ? "" : "\n") + r.log;
      }
    }
    for (std::size_t p = 0; p < plan_.programs.size(); ++p) {
      for (const std::string& arch : archs_) {
        bool ptx = arch.rfind("compute_", 0) == 0;
        std::string number = arch.substr(arch.find('_') + 1);
        const JobResult& r = results[job_of_.at({static_cast<int>(p), number})];
        ArchImage a;
        a.arch = arch;
        a.program = static_cast<int>(p);
        a.data = ptx ? r.ptx : r.cubin;
        if (!ptx) a.usage = r.usage;
        a.cache_hit = r.cache_hit;
        a.compile_ms = r.ms;
        image.images.push_back(std::move(a));
      }
    }
    detail::check_configs_launch(image);
    image.total_ms = ms_since(t0);
    return image;
  }

 private:
  void check_archs() {
    std::set<std::string> seen;
    for (const auto& arch : archs_) {
      detail::ArchId id;
      if (!detail::parse_arch(arch, &id)) {
        KERNELOP_FAIL(Spec) << "op " << plan_.op_name << ": architecture '" << arch
                            << "' is invalid; expected 'sm_NN' (CUBIN) or 'compute_NN' (PTX)";
      }
      if (!seen.insert(arch).second) {
        KERNELOP_FAIL(Spec) << "op " << plan_.op_name << ": architecture '" << arch
                            << "' is listed twice";
      }
    }
    if (archs_.empty()) KERNELOP_FAIL(Spec) << "op " << plan_.op_name << ": no architecture";
  }

  // Note [include resolution] in include_scan.hpp: NVRTC looks for the top-level source's quoted
  // includes in the directory of the program's name, so the name is the source's absolute path
  // (an inline source is named kernel.cu in the spec's directory). Without a base directory, the
  // name's directory is one that cannot exist (/dev/null is not a directory), never the working
  // directory.
  void name_program() {
    const KernelSpec& spec = plan_.spec;
    std::string base = plan_.base_dir.empty() ? "" : detail::normalized_path(plan_.base_dir);
    fs::path file = spec.source_file ? fs::path(*spec.source_file) : fs::path("kernel.cu");
    if (base.empty() && !file.is_absolute()) {
      program_name_ = std::string(kNoDirectory) + "/" + file.filename().string();
      return;
    }
    program_name_ = detail::normalized_path(file.is_absolute() ? file : fs::path(base) / file);
    rules_.source_dir = fs::path(program_name_).parent_path().string();
  }

  void build_options() {
    const KernelSpec& spec = plan_.spec;
    options_list_.push_back("--std=" + spec.compile_std);
    rules_.trigraphs = spec.compile_std == "c++11" || spec.compile_std == "c++14";
    // Every directory absolute and normalised: the key must not depend on the working
    // directory or on how a path is spelled.
    auto add_dir = [&](const std::string& dir) {
      std::string d = detail::normalized_path(dir);
      rules_.dirs.push_back(d);
      options_list_.push_back("-I" + d);
    };
    if (!plan_.base_dir.empty()) add_dir(plan_.base_dir);
    for (const auto& p : spec.include_paths) {
      add_dir(fs::path(p).is_absolute() || plan_.base_dir.empty()
                  ? p
                  : (fs::path(plan_.base_dir) / p).string());
    }
    for (const auto& p : options_.include_paths) add_dir(p);
    for (const auto& dir : cuda_include_dirs()) {
      add_dir(dir);
      rules_.toolkit_dirs.push_back(rules_.dirs.back());
    }
    for (const auto& d : spec.defines) options_list_.push_back("-D" + d);
    for (const auto& d : options_.defines) options_list_.push_back("-D" + d);
    if (options_.fast_math.value_or(spec.fast_math)) options_list_.push_back("--use_fast_math");
    if (options_.line_info.value_or(spec.line_info)) options_list_.push_back("-lineinfo");
    options_list_.push_back("-Xptxas=-v");  // resource usage; stripped from the user's log
    // Since 12.9 NVRTC consults the driver's compute cache, and a hit skips ptxas and so its
    // report. kernelop caches itself (with a key that covers the headers); keep NVRTC's off.
    if (nvrtc_at_least(12, 9)) options_list_.push_back("--no-cache");
  }

  void make_jobs(CompiledImage& image) {
    const KernelSpec& spec = plan_.spec;
    detail::IncludeScan scan;
    try {
      scan = detail::scan_includes(spec.kernel_source, display_name(), rules_);
    } catch (const Error& e) {
      KERNELOP_FAIL(Io).context({plan_.op_name, spec.kernel_name, {}, "compile", {}})
          << "op " << plan_.op_name << ": " << e.message();
    }
    image.cache_bypassed = !scan.bypass.empty();
    detail::Hasher base;
    base.field("kernelop.compile").field(static_cast<std::int64_t>(CompileCache::kFormatVersion));
    base.field(image.nvrtc_version).field(toolkit_identity()).field(program_name_).field(source_);
    for (const auto& o : options_list_) base.field(o);
    for (const auto& f : scan.files) {
      base.field(f.spelled).field(f.path).field(f.state).field(f.content.hex());
    }
    std::string base_key = base.digest().hex();
    // One job per program and architecture number; an sm_ job also yields that number's PTX.
    for (std::size_t p = 0; p < plan_.programs.size(); ++p) {
      for (const auto& arch : archs_) {
        std::string number = arch.substr(arch.find('_') + 1);
        bool cubin = arch.rfind("sm_", 0) == 0;
        auto it = job_of_.find({static_cast<int>(p), number});
        if (it != job_of_.end()) {
          if (cubin) jobs_[it->second].arch_option = "sm_" + number;
          continue;
        }
        job_of_[{static_cast<int>(p), number}] = jobs_.size();
        jobs_.push_back(Job{(cubin ? "sm_" : "compute_") + number, {}, static_cast<int>(p)});
      }
    }
    for (Job& job : jobs_) {
      detail::Hasher h;
      h.field(base_key).field("-arch=" + job.arch_option);
      for (const auto& e : expressions_[static_cast<std::size_t>(job.program)]) h.field(e);
      for (const auto& d : program_options(job.program)) h.field(d);
      job.key = h.digest().hex();
    }
    use_cache_ = options_.use_cache && scan.bypass.empty();
    if (options_.use_cache && !scan.bypass.empty()) {
      warn("op " + plan_.op_name + ": the cache key cannot cover " + scan.bypass +
           "; compiling without the persistent cache");
    }
  }

  std::vector<JobResult> run_jobs() {
    std::vector<JobResult> results(jobs_.size());
    std::vector<std::exception_ptr> errors(jobs_.size());
    CompileCache* cache = options_.cache ? options_.cache : &CompileCache::global();
    if (use_cache_) cache->prepare();  // an unsafe cache directory fails before any work
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i = next++; i < jobs_.size(); i = next++) {
        try {
          results[i] = run_job(jobs_[i], cache);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    std::size_t threads = std::min<std::size_t>(
        jobs_.size(), options_.jobs > 0 ? static_cast<std::size_t>(options_.jobs) : hw);
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    return results;
  }

  JobResult run_job(const Job& job, CompileCache* cache) {
    auto t0 = Clock::now();
    if (!use_cache_) {
      JobResult r = compile_job(job);
      r.ms = ms_since(t0);
      return r;
    }
    auto first = cache->load(job.key);
    if (auto r = cached(job, first, cache, t0)) return *r;
    // Note [compile once per host]: wait for whoever compiles this entry, then look again
    // (unless the entry was there and invalid: then it is this process's to replace).
    auto lock = cache->lock_entry(job.key);
    if (lock && !first) {
      if (auto r = cached(job, cache->load_from_disk(job.key), cache, t0)) return *r;
    }
    JobResult r = compile_job(job);
    r.ms = ms_since(t0);
    cache->store(job.key, detail::serialize(r));
    return r;
  }

  // A cached result, decoded and checked as if hostile (a valid checksum only proves that the
  // bytes are the ones written, not that the writer was kernelop).
  std::optional<JobResult> cached(const Job& job, const std::shared_ptr<const std::string>& payload,
                                  CompileCache* cache, Clock::time_point t0) const {
    if (!payload) return std::nullopt;
    std::optional<JobResult> r = detail::deserialize(*payload);
    std::string why = r ? check_cached(job, *r) : "not a compile result";
    if (!why.empty()) {
      warn("compile cache entry '" + cache->entry_path(job.key).string() + "' is invalid (" + why +
           "); recompiling");
      return std::nullopt;
    }
    r->cache_hit = true;
    r->ms = ms_since(t0);
    return r;
  }

  std::string check_cached(const Job& job, const JobResult& r) const {
    std::size_t n = program_instances_[static_cast<std::size_t>(job.program)].size();
    bool cubin_job = job.arch_option.rfind("sm_", 0) == 0;
    if (r.lowered.size() != n)
      return std::to_string(r.lowered.size()) + " symbols for " + std::to_string(n) + " instances";
    if (r.codes.size() != n)
      return std::to_string(r.codes.size()) + " signatures for " + std::to_string(n) + " instances";
    if (r.ptx.empty()) return "no PTX";
    if (cubin_job != !r.cubin.empty()) return cubin_job ? "no CUBIN" : "an unexpected CUBIN";
    if (r.usage.size() != (cubin_job ? n : 0)) return "resource usage of the wrong length";
    for (std::size_t i = 0; i < n; ++i) {
      if (r.lowered[i].empty() || r.lowered[i].find('\0') != std::string::npos)
        return "an invalid symbol name";
      const auto& c = r.codes[i];
      if (c.empty() || c[0] < 0 || static_cast<std::size_t>(c[0]) + 1 != c.size())
        return "invalid signature codes";
    }
    return {};
  }

  JobResult compile_job(const Job& job) {
    // If ptxas' report is missing from the log anyway, the CUBIN is the fallback (see
    // usage_from_cubin).
    {
      const auto& expressions = expressions_[static_cast<std::size_t>(job.program)];
      detail::NvrtcProgram program(source_, program_name_);
      for (const auto& e : expressions) program.add_name_expression(e);
      std::vector<std::string> opts = options_list_;
      for (auto& d : program_options(job.program)) opts.push_back(std::move(d));
      opts.push_back("-arch=" + job.arch_option);
      nvrtcResult result = program.compile(opts);
      std::string log = program.log();
      if (result != NVRTC_SUCCESS) fail_compile(job, result, log);
      JobResult r;
      r.log = detail::strip_ptxas_report(log);
      r.ptx = program.ptx();
      r.cubin = program.cubin();
      bool complete = true;  // every instance found in ptxas' report
      for (std::size_t i = 0; i < expressions.size() / 2; ++i) {
        r.lowered.push_back(program.lowered_name(expressions[2 * i]));
        r.codes.push_back(
            detail::parse_signature_codes(program.lowered_name(expressions[2 * i + 1])));
        if (r.cubin.empty()) continue;
        auto usage = detail::parse_resource_usage(log, r.lowered.back(), job.arch_option);
        complete = complete && usage.has_value();
        r.usage.push_back(usage ? *usage : usage_from_cubin(job, r.cubin, r.lowered.back()));
      }
      if (!complete) {
        warn("op " + plan_.op_name + ": ptxas reported no resource usage for " + job.arch_option +
             "; spills and static shared memory are unknown");
      }
      return r;
    }
  }

  // Registers and stack frame from the CUBIN's attributes; spills and static shared memory (whose
  // section also holds reserved bytes on some architectures) only ptxas reports: marked unknown.
  ResourceUsage usage_from_cubin(const Job& job, const std::string& cubin,
                                 const std::string& lowered) const {
    auto u = detail::cubin_resource_usage(cubin, lowered);
    if (!u) {
      KERNELOP_FAIL(Internal) << "op " << plan_.op_name << ": no resource usage for " << lowered
                              << " on " << job.arch_option;
    }
    u->spill_stores = u->spill_loads = u->static_shared = -1;
    return *u;
  }

  // True when every error of the log lies in code kernelop generated: NVRTC's name-expression
  // map ("__nv_name_map(2): error") or the signature probe after the user's lines. NVRTC reports
  // errors as "<file>(<line>): error ...".
  bool only_generated_errors(const std::string& log) const {
    std::size_t user_lines = count_lines(plan_.spec.kernel_source);
    bool any = false;
    for (std::size_t at = log.find("): error"); at != std::string::npos;
         at = log.find("): error", at + 1)) {
      std::size_t open = log.rfind('(', at);
      std::size_t line_start = log.rfind('\n', at);
      line_start = line_start == std::string::npos ? 0 : line_start + 1;
      if (open == std::string::npos || open < line_start) continue;
      std::string file = log.substr(line_start, open - line_start);
      std::string digits = log.substr(open + 1, at - open - 1);
      if (digits.empty() || digits.size() > 9 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      any = true;
      bool generated =
          file == "__nv_name_map" || (file == display_name() && std::stoul(digits) > user_lines);
      if (!generated) return false;
    }
    return any;
  }

  [[noreturn]] void fail_compile(const Job& job, nvrtcResult result, std::string log) const {
    // The program's name without a directory is shown as it was given: kernel.cu.
    for (std::size_t at = log.find(kNoDirectory); at != std::string::npos;
         at = log.find(kNoDirectory, at))
      log.erase(at, kNoDirectory.size() + 1);
    std::string user_log = detail::strip_ptxas_report(log);
    ErrorContext ctx{plan_.op_name, plan_.spec.kernel_name, job.arch_option, "compile", log};
    std::string opts;
    for (const auto& o : options_list_) opts += " " + o;
    std::string shown = display_name();
    if (result == NVRTC_ERROR_INVALID_OPTION && log.find("gpu-architecture") != std::string::npos) {
      KERNELOP_FAIL(Compile).context(ctx)
          << "op " << plan_.op_name << ": NVRTC " << detail::nvrtc_version()
          << " cannot compile for architecture '" << job.arch_option << "' (it supports "
          << detail::nvrtc_supported_archs() << "); NVRTC log:\n"
          << user_log;
    }
    if (only_generated_errors(user_log)) {
      // The log is about code kernelop generated (the name map, the signature probe): it stays
      // in the context; the message lists the source's own kernels instead.
      std::vector<std::string> globals = detail::global_function_names(plan_.spec.kernel_source);
      std::string base = plan_.spec.kernel_name.substr(0, plan_.spec.kernel_name.find('<'));
      bool declared = std::find(globals.begin(), globals.end(), base) != globals.end();
      KERNELOP_FAIL(Compile).context(ctx)
          << "op " << plan_.op_name << ": kernel '" << detail::shorten(plan_.spec.kernel_name)
          << "' is not a __global__ function of " << shown << " that NVRTC can take the address of"
          << (declared ? " (it is declared __global__: check its template arguments, overloads "
                         "and that it is not static or in an anonymous namespace)"
              : globals.empty() ? " (the source declares no __global__ function)"
                                : " (no __global__ function of that name; the source declares " +
                                      std::to_string(globals.size()) + ", the closest: " +
                                      detail::closest_names(base, globals) + ")");
    }
    // ptxas' own errors ("ptxas error : Entry function 'k' uses too much shared data") are part
    // of user_log; should a failure leave no error line at all, its report is the only clue.
    bool has_error_line = user_log.find("error") != std::string::npos;
    KERNELOP_FAIL(Compile).context(ctx)
        << "op " << plan_.op_name << ": NVRTC failed to compile " << shown << " for "
        << job.arch_option << " (options:" << opts << ")"
        << (has_error_line ? ":\n" + user_log
                           : "; no error message; the compiler's report:\n" + log);
  }

  // The -D options of a program's configs (define tunables), after the spec's own.
  std::vector<std::string> program_options(int program) const {
    std::vector<std::string> out;
    for (const auto& d : plan_.programs[static_cast<std::size_t>(program)]) out.push_back("-D" + d);
    return out;
  }

  std::string display_name() const {
    return program_name_.rfind(kNoDirectory, 0) == 0 ? program_name_.substr(kNoDirectory.size() + 1)
                                                     : program_name_;
  }

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

}  // namespace

const std::vector<std::string>& default_archs() {
  static const std::vector<std::string> archs = {"sm_80", "sm_86", "sm_89", "sm_90", "compute_90"};
  return archs;
}

std::vector<std::string> cuda_include_dirs() {
  // Environment variables are user input: only error_code overloads (a 300-character name must
  // not throw).
  auto is_dir = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
  };
  auto has_headers = [](const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "cuda_fp16.h", ec);
  };
  std::string found;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(var);
    if (found.empty() && v && *v && has_headers(fs::path(v) / "include"))
      found = (fs::path(v) / "include").string();
  }
  for (const char* dir : {KERNELOP_CUDA_INCLUDE_DIR, "/usr/local/cuda/include"}) {
    if (found.empty() && has_headers(dir)) found = dir;
  }
  if (found.empty()) return {};
  std::vector<std::string> dirs = {found};
  if (is_dir(fs::path(found) / "cccl")) dirs.push_back((fs::path(found) / "cccl").string());
  return dirs;
}

CompiledImage compile(const OpPlan& plan, const CompileOptions& options) {
  if (const auto& k = plan.spec.foreign) {
    KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": '" << plan.spec.kernel_name << "' is a "
                        << k->display() << " kernel: NVRTC cannot compile it; kernelop's Python "
                        << "package compiles it with " << k->compile_fn() << " (kernelop."
                        << k->key() << ") and image_from_binaries takes the result";
  }
  if (!plan.structs.empty()) {
    KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": parameter " << plan.structs[0].first
                        << " is a struct of fields, which kernelop verifies only against PTX "
                           "(a CuTe DSL kernel's); a CUDA C++ kernel compiled by NVRTC takes "
                           "each field as its own parameter";
  }
  return Compiler(plan, options).run();
}

std::vector<CompiledImage> compile_backward(const OpPlan& plan, const CompileOptions& options) {
  std::vector<CompiledImage> chain;
  derive_chain(plan, [&](const OpPlan& backward) -> const OpPlan& {
    chain.push_back(compile(backward, options));
    return chain.back().plan;
  });
  return chain;
}

}  // namespace kernelop
