// The compile stage: options, cache keys, parallel NVRTC runs per architecture, verification.
// This part: the stage's entry, the options, the jobs and their keys, and the image assembled from
// their results; compile_jobs.cpp runs the jobs (the Compiler class is compile/compiler.hpp).
#include "kernelop/compile.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <nvrtc.h>
#include <sys/stat.h>

#include "compile/compiler.hpp"
#include "compile/config_launch.hpp"
#include "compile/include_scan.hpp"
#include "compile/nvrtc_program.hpp"
#include "compile/signature.hpp"
#include "core/arch.hpp"
#include "core/file_io.hpp"
#include "core/hash.hpp"
#include "kernelop/cache.hpp"

namespace kernelop {
namespace fs = std::filesystem;

namespace detail {
namespace {

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

}  // namespace

CompiledImage Compiler::run() {
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

void Compiler::check_archs() {
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

void Compiler::name_program() {
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

void Compiler::build_options() {
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
  // The headers of the dtypes type parameters are instantiated with: kernelop names __half in
  // the instantiations it asks for (relu<__half>), which a generic source need not include.
  std::vector<std::string_view> headers;
  for (const KernelInstance& inst : plan_.instances) {
    for (DType d : inst.bindings) {
      std::string_view h = dtype_cuda_header(d);
      if (!h.empty() && std::find(headers.begin(), headers.end(), h) == headers.end())
        headers.push_back(h);
    }
  }
  for (std::string_view h : headers) options_list_.push_back("--pre-include=" + std::string(h));
  for (const auto& d : spec.defines) options_list_.push_back("-D" + d);
  for (const auto& d : options_.defines) options_list_.push_back("-D" + d);
  if (options_.fast_math.value_or(spec.fast_math)) options_list_.push_back("--use_fast_math");
  if (options_.line_info.value_or(spec.line_info)) options_list_.push_back("-lineinfo");
  options_list_.push_back("-Xptxas=-v");  // resource usage; stripped from the user's log
  // Since 12.9 NVRTC consults the driver's compute cache, and a hit skips ptxas and so its
  // report. kernelop caches itself (with a key that covers the headers); keep NVRTC's off.
  if (nvrtc_at_least(12, 9)) options_list_.push_back("--no-cache");
}

void Compiler::make_jobs(CompiledImage& image) {
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

std::vector<std::string> Compiler::program_options(int program) const {
  std::vector<std::string> out;
  for (const auto& d : plan_.programs[static_cast<std::size_t>(program)]) out.push_back("-D" + d);
  return out;
}

std::string Compiler::display_name() const {
  return program_name_.rfind(kNoDirectory, 0) == 0 ? program_name_.substr(kNoDirectory.size() + 1)
                                                   : program_name_;
}

}  // namespace detail

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
  CompiledImage image = detail::Compiler(plan, options).run();
  if (!plan.spec.then.empty()) compile_launches(image, {}, options);
  return image;
}

void compile_launches(CompiledImage& image, std::vector<std::vector<KernelBinary>> binaries,
                      const CompileOptions& options) {
  const OpPlan& op = image.plan;
  if (!binaries.empty() && binaries.size() != op.spec.then.size()) {
    KERNELOP_FAIL(Spec) << "op " << op.op_name << ": binaries were given for " << binaries.size()
                        << " later launch(es), and its spec declares " << op.spec.then.size();
  }
  std::vector<CompiledImage> then;
  for (std::size_t k = 0; k < op.spec.then.size(); ++k) {
    OpPlan launch = derive_launch_plan(op, k);
    std::vector<KernelBinary> mine =
        binaries.empty() ? std::vector<KernelBinary>{} : std::move(binaries[k]);
    if (!launch.spec.foreign) {
      if (!mine.empty()) {
        KERNELOP_FAIL(Spec) << "op " << launch.op_name << ": its kernel '"
                            << launch.spec.kernel_name << "' is CUDA C++, which NVRTC compiles; "
                            << mine.size() << " binaries were given for it";
      }
      then.push_back(compile(launch, options));
    } else {
      if (mine.empty()) {
        KERNELOP_FAIL(Spec) << "op " << launch.op_name << ": its kernel '"
                            << launch.spec.kernel_name << "' is a "
                            << launch.spec.foreign->display() << " kernel, and no binaries "
                            << "were given for it";
      }
      then.push_back(image_from_binaries(std::move(launch), std::move(mine)));
    }
  }
  image.then = std::move(then);
}

CompiledImage image_with_launches(OpPlan plan, std::vector<KernelBinary> binaries,
                                  const CompileOptions& options) {
  const std::size_t launches = plan.spec.then.size();
  std::vector<KernelBinary> own;
  std::vector<std::vector<KernelBinary>> later(launches);
  for (std::size_t i = 0; i < binaries.size(); ++i) {
    KernelBinary& b = binaries[i];
    if (b.launch < 0 || static_cast<std::size_t>(b.launch) > launches) {
      KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": binary " << i << " (entry '" << b.entry
                          << "') is for launch " << b.launch << ", and the op has " << launches + 1
                          << " launch(es): 0 (its own kernel)"
                          << (launches ? " to " + std::to_string(launches) + " (its then)" : "");
    }
    int launch = b.launch;
    b.launch = 0;
    (launch == 0 ? own : later[static_cast<std::size_t>(launch - 1)]).push_back(std::move(b));
  }
  CompiledImage image = image_from_binaries(std::move(plan), std::move(own));
  bool any_later = false;
  for (const auto& l : later) any_later = any_later || !l.empty();
  if (launches) compile_launches(image, any_later ? std::move(later) : decltype(later){}, options);
  return image;
}

std::vector<CompiledImage> compile_backward(const OpPlan& plan, const CompileOptions& options) {
  std::vector<CompiledImage> chain;
  derive_chain(plan, [&](const OpPlan& backward) -> const OpPlan& {
    chain.push_back(compile(backward, options));
    return chain.back().plan;
  });
  return chain;
}

std::vector<CompiledImage> backward_from_binaries(const OpPlan& plan,
                                                  std::vector<std::vector<KernelBinary>> binaries,
                                                  const CompileOptions& options) {
  std::vector<CompiledImage> chain;
  derive_chain(plan, [&](const OpPlan& backward) -> const OpPlan& {
    std::size_t link = chain.size();
    if (link >= binaries.size()) {
      KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": binaries were given for "
                          << binaries.size() << " link(s) of its backward chain, and its specs "
                          << "declare more: none for op " << backward.op_name;
    }
    if (!backward.spec.foreign) {
      if (!binaries[link].empty()) {
        KERNELOP_FAIL(Spec) << "op " << backward.op_name << ": its kernel '"
                            << backward.spec.kernel_name << "' is CUDA C++, which NVRTC compiles; "
                            << binaries[link].size() << " binaries were given for it";
      }
      chain.push_back(compile(backward, options));
    } else {
      if (binaries[link].empty()) {
        KERNELOP_FAIL(Spec) << "op " << backward.op_name << ": its kernel '"
                            << backward.spec.kernel_name << "' is a "
                            << backward.spec.foreign->display() << " kernel, and no binaries "
                            << "were given for it";
      }
      chain.push_back(image_with_launches(backward, std::move(binaries[link]), options));
    }
    return chain.back().plan;
  });
  if (chain.size() != binaries.size()) {
    KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": its specs declare a backward chain of "
                        << chain.size() << " link(s), and binaries were given for "
                        << binaries.size();
  }
  return chain;
}

}  // namespace kernelop
