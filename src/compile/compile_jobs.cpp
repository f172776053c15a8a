// The compile stage, running the jobs: in parallel, through the compile cache (each entry checked
// as if hostile), with NVRTC, and the errors of a failed compilation.
#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <thread>

#include <nvrtc.h>

#include "compile/compiler.hpp"
#include "compile/cubin_info.hpp"
#include "compile/nvrtc_program.hpp"
#include "compile/resource_usage.hpp"
#include "compile/signature.hpp"
#include "core/file_io.hpp"
#include "core/words.hpp"

namespace kernelop::detail {
namespace fs = std::filesystem;
namespace {

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

}  // namespace

std::vector<JobResult> Compiler::run_jobs() {
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

JobResult Compiler::run_job(const Job& job, CompileCache* cache) {
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

std::optional<JobResult> Compiler::cached(const Job& job,
                                          const std::shared_ptr<const std::string>& payload,
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

std::string Compiler::check_cached(const Job& job, const JobResult& r) const {
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

JobResult Compiler::compile_job(const Job& job) {
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

ResourceUsage Compiler::usage_from_cubin(const Job& job, const std::string& cubin,
                                         const std::string& lowered) const {
  auto u = detail::cubin_resource_usage(cubin, lowered);
  if (!u) {
    KERNELOP_FAIL(Internal) << "op " << plan_.op_name << ": no resource usage for " << lowered
                            << " on " << job.arch_option;
  }
  u->spill_stores = u->spill_loads = u->static_shared = -1;
  return *u;
}

bool Compiler::only_generated_errors(const std::string& log) const {
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

void Compiler::fail_compile(const Job& job, nvrtcResult result, std::string log) const {
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
                                    std::to_string(globals.size()) +
                                    ", the closest: " + detail::closest_names(base, globals) + ")");
  }
  // ptxas' own errors ("ptxas error : Entry function 'k' uses too much shared data") are part
  // of user_log; should a failure leave no error line at all, its report is the only clue.
  bool has_error_line = user_log.find("error") != std::string::npos;
  KERNELOP_FAIL(Compile).context(ctx)
      << "op " << plan_.op_name << ": NVRTC failed to compile " << shown << " for "
      << job.arch_option << " (options:" << opts << ")"
      << (has_error_line ? ":\n" + user_log : "; no error message; the compiler's report:\n" + log)
      << missing_include_note(user_log);
}

std::string Compiler::missing_include_note(const std::string& log) const {
  if (log.find("cannot open source file") == std::string::npos) return "";
  // The spec's include_paths that name no directory (NVRTC skips them without a word).
  std::string note;
  const KernelSpec& spec = plan_.spec;
  for (std::size_t i = 0; i < spec.include_paths.size(); ++i) {
    const std::string& p = spec.include_paths[i];
    fs::path resolved = fs::path(p).is_absolute() || plan_.base_dir.empty()
                            ? fs::path(p)
                            : fs::path(plan_.base_dir) / p;
    std::error_code ec;
    if (fs::is_directory(resolved, ec)) continue;
    note += "\n  include_paths[" + std::to_string(i) + "] '" + detail::shorten(p) + "' (" +
            detail::shorten(detail::normalized_path(resolved.string())) + ") is not a directory";
  }
  std::string searched;
  for (const std::string& d : rules_.dirs) {
    bool toolkit = std::find(rules_.toolkit_dirs.begin(), rules_.toolkit_dirs.end(), d) !=
                   rules_.toolkit_dirs.end();
    if (!toolkit) searched += (searched.empty() ? "" : ", ") + detail::shorten(d);
  }
  return "\nnote: a header was not found; the directories searched besides the toolkit's: " +
         (searched.empty() ? std::string("none") : searched) + note;
}

}  // namespace kernelop::detail
