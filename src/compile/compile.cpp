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

#include "compile/cubin_info.hpp"
#include "compile/include_scan.hpp"
#include "compile/nvrtc_program.hpp"
#include "compile/resource_usage.hpp"
#include "compile/signature.hpp"
#include "core/arch.hpp"
#include "core/hash.hpp"
#include "kernelop/cache.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One NVRTC run: "-arch=sm_90" gives a CUBIN and PTX, "-arch=compute_90" PTX only.
struct Job {
  std::string arch_option;  // "sm_90" or "compute_90"
  std::string key;
};

struct JobResult {
  std::string cubin, ptx, log;
  std::vector<std::string> lowered;              // per instance
  std::vector<std::vector<std::int64_t>> codes;  // per instance
  std::vector<ResourceUsage> usage;              // per instance (CUBIN jobs)
  double ms = 0;
  bool cache_hit = false;
};

std::string serialize(const JobResult& r) {
  nlohmann::json j;
  j["cubin"] = nlohmann::json::binary(std::vector<std::uint8_t>(r.cubin.begin(), r.cubin.end()));
  j["ptx"] = r.ptx;
  j["log"] = r.log;
  j["lowered"] = r.lowered;
  j["codes"] = r.codes;
  nlohmann::json usage = nlohmann::json::array();
  for (const auto& u : r.usage) {
    usage.push_back({u.registers, u.stack_frame, u.spill_stores, u.spill_loads, u.static_shared,
                     u.const_bytes});
  }
  j["usage"] = usage;
  auto bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

std::optional<JobResult> deserialize(const std::string& payload) {
  try {
    auto j = nlohmann::json::from_cbor(payload);
    JobResult r;
    const auto& cubin = j.at("cubin").get_binary();
    r.cubin.assign(cubin.begin(), cubin.end());
    r.ptx = j.at("ptx").get<std::string>();
    r.log = j.at("log").get<std::string>();
    r.lowered = j.at("lowered").get<std::vector<std::string>>();
    r.codes = j.at("codes").get<std::vector<std::vector<std::int64_t>>>();
    for (const auto& u : j.at("usage")) {
      r.usage.push_back(ResourceUsage{u.at(0), u.at(1), u.at(2), u.at(3), u.at(4), u.at(5)});
    }
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
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
    build_options();
    source_ = spec.kernel_source + "\n" + detail::signature_probe_source();
    // Inline sources get a fixed name, so that the cache key does not depend on the op name.
    program_name_ =
        spec.source_file ? fs::path(*spec.source_file).filename().string() : "kernel.cu";
    for (const auto& inst : plan_.instances) {
      expressions_.push_back(inst.name_expression);
      expressions_.push_back(detail::signature_probe_expression(inst.name_expression));
    }
    CompiledImage image;
    image.nvrtc_version = detail::nvrtc_version();
    image.options = options_list_;
    make_jobs(image);
    std::vector<JobResult> results = run_jobs();

    image.plan = plan_;
    const JobResult& first = results.front();
    for (const JobResult& r : results) {
      if (r.codes != first.codes) {
        KERNELOP_FAIL(Internal) << "op " << plan_.op_name
                                << ": kernel signature differs between architectures";
      }
    }
    detail::verify_signature(image.plan, first.codes);
    image.lowered_names = first.lowered;
    std::set<std::string> logs;
    for (const JobResult& r : results) {
      if (!r.log.empty() && logs.insert(r.log).second) {
        image.log += (image.log.empty() ? "" : "\n") + r.log;
      }
    }
    for (const std::string& arch : archs_) {
      bool ptx = arch.rfind("compute_", 0) == 0;
      std::string number = arch.substr(arch.find('_') + 1);
      std::size_t job = job_of_number_.at(number);
      const JobResult& r = results[job];
      ArchImage a;
      a.arch = arch;
      a.data = ptx ? r.ptx : r.cubin;
      if (!ptx) a.usage = r.usage;
      a.cache_hit = r.cache_hit;
      a.compile_ms = r.ms;
      image.images.push_back(std::move(a));
    }
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

  void build_options() {
    const KernelSpec& spec = plan_.spec;
    options_list_.push_back("--std=" + spec.compile_std);
    auto add_dir = [&](const std::string& dir) {
      include_dirs_.push_back(dir);
      options_list_.push_back("-I" + dir);
    };
    if (!plan_.base_dir.empty()) add_dir(plan_.base_dir);
    for (const auto& p : spec.include_paths) {
      add_dir(fs::path(p).is_absolute() || plan_.base_dir.empty()
                  ? p
                  : (fs::path(plan_.base_dir) / p).string());
    }
    for (const auto& p : options_.include_paths) add_dir(p);
    for (const auto& dir : cuda_include_dirs()) add_dir(dir);
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
    detail::IncludeScan scan =
        detail::scan_includes(spec.kernel_source, plan_.base_dir, include_dirs_);
    image.cache_bypassed = scan.has_computed_include;
    detail::Hasher base;
    base.field("kernelop.compile").field(static_cast<std::int64_t>(CompileCache::kFormatVersion));
    base.field(image.nvrtc_version).field(program_name_).field(source_);
    for (const auto& e : expressions_) base.field(e);
    for (const auto& o : options_list_) base.field(o);
    for (const auto& f : scan.files) {
      base.field(f.spelled).field(f.path).field(f.content.hex());
    }
    std::string base_key = base.digest().hex();
    // One job per architecture number; an sm_ job also yields that number's PTX.
    for (const auto& arch : archs_) {
      std::string number = arch.substr(arch.find('_') + 1);
      bool cubin = arch.rfind("sm_", 0) == 0;
      auto it = job_of_number_.find(number);
      if (it != job_of_number_.end()) {
        if (cubin) jobs_[it->second].arch_option = "sm_" + number;
        continue;
      }
      job_of_number_[number] = jobs_.size();
      jobs_.push_back(Job{(cubin ? "sm_" : "compute_") + number, {}});
    }
    for (Job& job : jobs_) {
      detail::Hasher h;
      h.field(base_key).field("-arch=" + job.arch_option);
      job.key = h.digest().hex();
    }
    use_cache_ = options_.use_cache && !scan.has_computed_include;
    if (options_.use_cache && scan.has_computed_include) {
      warn("op " + plan_.op_name +
           ": the source has a computed #include, which the cache key cannot cover; "
           "compiling without the persistent cache");
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
    if (use_cache_) {
      if (auto payload = cache->load(job.key)) {
        if (auto r = deserialize(*payload)) {
          r->cache_hit = true;
          r->ms = ms_since(t0);
          return *r;
        }
        warn("compile cache entry '" + cache->entry_path(job.key).string() +
             "' could not be decoded; recompiling");
      }
    }
    JobResult r = compile_job(job);
    r.ms = ms_since(t0);
    if (use_cache_) cache->store(job.key, serialize(r));
    return r;
  }

  JobResult compile_job(const Job& job) {
    // If ptxas' report is missing from the log anyway, the CUBIN is the fallback (see
    // usage_from_cubin).
    {
      detail::NvrtcProgram program(source_, program_name_);
      for (const auto& e : expressions_) program.add_name_expression(e);
      std::vector<std::string> opts = options_list_;
      opts.push_back("-arch=" + job.arch_option);
      bool ok = program.compile(opts);
      std::string log = program.log();
      if (!ok) fail_compile(job, log);
      JobResult r;
      r.log = detail::strip_ptxas_report(log);
      r.ptx = program.ptx();
      r.cubin = program.cubin();
      bool complete = true;  // every instance found in ptxas' report
      for (std::size_t i = 0; i < plan_.instances.size(); ++i) {
        r.lowered.push_back(program.lowered_name(expressions_[2 * i]));
        r.codes.push_back(
            detail::parse_signature_codes(program.lowered_name(expressions_[2 * i + 1])));
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

  [[noreturn]] void fail_compile(const Job& job, const std::string& log) const {
    std::string user_log = detail::strip_ptxas_report(log);
    // Errors only inside the generated probe mean NVRTC could not take the kernel's address.
    // NVRTC reports errors as "<file>(<line>): error ...".
    std::size_t user_lines = count_lines(plan_.spec.kernel_source);
    bool any = false, all_generated = true;
    for (std::size_t at = user_log.find("): error"); at != std::string::npos;
         at = user_log.find("): error", at + 1)) {
      std::size_t open = user_log.rfind('(', at);
      if (open == std::string::npos) continue;
      std::string digits = user_log.substr(open + 1, at - open - 1);
      if (digits.empty() || digits.size() > 9 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      any = true;
      if (std::stoul(digits) <= user_lines) all_generated = false;
    }
    ErrorContext ctx{plan_.op_name, plan_.spec.kernel_name, job.arch_option, "compile", user_log};
    std::string opts;
    for (const auto& o : options_list_) opts += " " + o;
    if (any && all_generated) {
      KERNELOP_FAIL(Compile).context(ctx)
          << "op " << plan_.op_name << ": kernel '" << plan_.spec.kernel_name
          << "' is not a __global__ function of " << program_name_
          << " that NVRTC can take the address of (missing, misspelled, not __global__, "
             "overloaded, or wrong template arguments); NVRTC log:\n"
          << user_log;
    }
    KERNELOP_FAIL(Compile).context(ctx)
        << "op " << plan_.op_name << ": NVRTC failed to compile " << program_name_ << " for "
        << job.arch_option << " (options:" << opts << "):\n"
        << user_log;
  }

  const OpPlan& plan_;
  const CompileOptions& options_;
  std::vector<std::string> archs_, options_list_, include_dirs_, expressions_;
  std::string source_, program_name_;
  std::vector<Job> jobs_;
  std::map<std::string, std::size_t> job_of_number_;
  bool use_cache_ = true;
};

}  // namespace

const std::vector<std::string>& default_archs() {
  static const std::vector<std::string> archs = {"sm_80", "sm_86", "sm_89", "sm_90", "compute_90"};
  return archs;
}

std::vector<std::string> cuda_include_dirs() {
  auto has_headers = [](const fs::path& dir) { return fs::exists(dir / "cuda_fp16.h"); };
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
  if (fs::is_directory(fs::path(found) / "cccl"))
    dirs.push_back((fs::path(found) / "cccl").string());
  return dirs;
}

CompiledImage compile(const OpPlan& plan, const CompileOptions& options) {
  return Compiler(plan, options).run();
}

}  // namespace kernelop
