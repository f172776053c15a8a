// The kernelop command-line tool: validate specs, compile them, report what they imply.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/file_io.hpp"
#include "kernelop/package.hpp"
#include "kernelop/spec_json.hpp"
#include "kernelop/tuning.hpp"
#include "report.hpp"
#include "run_command.hpp"

namespace fs = std::filesystem;
using namespace kernelop;

namespace {

std::string file_stem(const OpPlan& plan) {
  return plan.ns + "." + plan.name;
}

// The identity (device, inode) of an existing file, to recognise one under any spelling.
std::optional<std::pair<dev_t, ino_t>> file_identity(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair<dev_t, ino_t>(st.st_dev, st.st_ino);
}

// What `build -o DIR` writes: never one of its own inputs, never one op twice, and nothing
// partial: each file is written atomically, and an op whose outputs fail half-way has the ones
// already written removed.
class OutputWriter {
 public:
  explicit OutputWriter(fs::path dir) : dir_(std::move(dir)) {}

  void add_input(const fs::path& path) {
    if (auto id = file_identity(path)) inputs_.insert(*id);
  }

  // Claims the output names of `op` (defined in `spec`); throws when another spec of this run
  // already defined that op.
  void claim(const std::string& op, const std::string& spec) {
    auto [it, fresh] = ops_.emplace(op, spec);
    if (!fresh) {
      KERNELOP_FAIL(Spec) << "op " << op << " is defined by both '" << it->second << "' and '"
                          << spec << "'; refusing to overwrite its output in '" << dir_.string()
                          << "'";
    }
  }

  // Writes every file of one op, or none.
  void write_all(const std::vector<std::pair<std::string, std::string>>& files) {
    std::vector<fs::path> written;
    try {
      for (const auto& [name, bytes] : files) {
        fs::path path = dir_ / name;
        if (auto id = file_identity(path); id && inputs_.count(*id)) {
          KERNELOP_FAIL(Io) << "refusing to write '" << path.string()
                            << "': it is one of this build's inputs";
        }
        write_file(path, bytes, "output");
        written.push_back(path);
      }
    } catch (...) {
      for (const fs::path& path : written) ::unlink(path.c_str());
      throw;
    }
  }

 private:
  fs::path dir_;
  std::set<std::pair<dev_t, ino_t>> inputs_;
  std::map<std::string, std::string> ops_;
};

// Runs `fn` on each spec; reports errors on stderr and returns the exit code.
template <class Fn>
int for_each_spec(const std::vector<std::string>& specs, Fn fn) {
  int failures = 0;
  for (const auto& path : specs) {
    try {
      fn(path);
    } catch (const std::exception& e) {
      ++failures;
      std::string what = e.what();
      // Errors about the file itself already start with its path.
      std::cerr << "kernelop: error: " << (what.find(path) != std::string::npos ? "" : path + ": ")
                << what << "\n";
    }
  }
  return failures ? 1 : 0;
}

int run_cli(int argc, char** argv) {
  CLI::App app{"kernelop: hand-written CUDA kernels + a declarative spec -> operators"};
  app.require_subcommand(0, 1);  // bare `kernelop`: the help, below
  app.set_version_flag("--version", "kernelop " + std::string(version()));

  std::vector<std::string> specs;
  auto* check = app.add_subcommand("check", "Validate spec files and print what they imply");
  check->add_option("specs", specs, "JSON spec files")->required()->check(CLI::ExistingFile);

  std::vector<std::string> build_specs, archs;
  std::string out_dir;
  bool no_cache = false, package = false;
  int jobs = 0;
  auto* build = app.add_subcommand(
      "build", "Compile spec files with NVRTC and report schema, geometry and per-arch resources");
  build->add_option("specs", build_specs, "JSON spec files")->required()->check(CLI::ExistingFile);
  build->add_option("-o,--output", out_dir,
                    "Write <ns>.<name>.<arch>.cubin / .ptx and <ns>.<name>.json here");
  build->add_option("--arch", archs,
                    "Architectures (sm_NN for CUBIN, compute_NN for PTX); repeatable. "
                    "Default: the spec's arch_override, else sm_80 sm_86 sm_89 sm_90 compute_90");
  build->add_flag("--no-cache", no_cache, "Compile without the persistent cache");
  build->add_option("-j,--jobs", jobs, "Parallel NVRTC compilations (default: all cores)");
  build->add_flag("--package", package,
                  "Write one self-contained package DIR/<ns>.<name>.kop per spec (needs -o)");

  std::string tuning_file;
  build
      ->add_option("--tuning", tuning_file,
                   "With --package: embed this file's tuning tables for the op (from `kernelop "
                   "tune --output`), so that the deployment times nothing")
      ->check(CLI::ExistingFile);

  std::string inspect_path;
  auto* inspect = app.add_subcommand("inspect", "Verify a .kop package and show its contents");
  inspect->add_option("package", inspect_path, "A .kop package")->required();

  cli::RunOptions run_options;
  auto* run = cli::add_run_command(app, run_options, nullptr);
  cli::RunOptions tune_options;
  auto* tune = cli::add_tune_command(app, tune_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (app.get_subcommands().empty()) {
    std::cout << app.help();
    return 0;
  }

  if (*check) {
    return for_each_spec(specs, [](const std::string& path) {
      OpPlan plan = derive_plan(load_op_file(path));
      std::cout << "op " << plan.op_name << "  (" << path << ")\n";
      cli::print_plan(std::cout, plan);
      // The backward chain (Note [backward chain]): each an op of its own, with its derived plan.
      OpPlan forward = plan;
      derive_chain(plan, [&](OpPlan backward) -> const OpPlan& {
        cli::print_backward(std::cout, forward, backward);
        cli::print_plan(std::cout, backward);
        forward = std::move(backward);
        return forward;
      });
      std::cout << "  ok\n\n";
    });
  }

  if (*inspect) {
    try {
      Package pkg = load_package(inspect_path);
      const CompiledImage& image = pkg.image;
      std::cout << "package " << inspect_path << "\n";
      std::cout << "  format    version " << pkg.format_version << ", " << pkg.file_size
                << " bytes, checksum " << pkg.checksum << " (verified)\n";
      const auto& foreign = image.plan.spec.foreign;
      std::cout << "  built by  " << pkg.created_by << " with "
                << (foreign ? std::string(foreign->display()) + " " + foreign->version
                            : "NVRTC " + image.nvrtc_version)
                << "\n";
      if (!foreign) {
        std::cout << "  options  ";
        for (const auto& opt : image.options) std::cout << " " << opt;
        std::cout << "\n";
      }
      std::cout << "  symbols   " << cli::distinct_text(image.lowered_names) << "\n";
      cli::print_plan(std::cout, image.plan);
      cli::print_images(std::cout, image, false);
      cli::print_tuning(std::cout, image.tuning);
      for (std::size_t i = 0; i < pkg.backward.size(); ++i) {
        cli::print_backward(std::cout, i == 0 ? image.plan : pkg.backward[i - 1].plan,
                            pkg.backward[i].plan);
        cli::print_plan(std::cout, pkg.backward[i].plan);
        cli::print_images(std::cout, pkg.backward[i], false);
      }
    } catch (const Error& e) {
      std::cerr << "kernelop: error: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }

  if (*run || *tune) {
    try {
      return cli::run_op(*run ? run_options : tune_options, nullptr);
    } catch (const Error& e) {
      std::cerr << "kernelop: error: " << e.what() << "\n";
      return 1;
    }
  }

  if (!tuning_file.empty() && !package) {
    std::cerr << "kernelop: error: build --tuning embeds tables in packages; add --package\n";
    return 2;
  }
  std::vector<TuningTable> tuning;
  if (!tuning_file.empty()) {
    try {
      tuning = read_tuning_file(tuning_file);
    } catch (const Error& e) {
      std::cerr << "kernelop: error: " << e.what() << "\n";
      return 1;
    }
  }
  if (package && out_dir.empty()) {
    std::cerr << "kernelop: error: build --package needs -o DIR\n";
    return 2;
  }
  if (!out_dir.empty()) {
    if (std::string why = make_directories(out_dir, 0755); !why.empty()) {
      std::cerr << "kernelop: error: cannot use output directory '" << out_dir << "': " << why
                << "\n";
      return 1;
    }
  }
  CompileOptions options;
  options.archs = archs;
  options.use_cache = !no_cache;
  options.jobs = jobs;
  OutputWriter writer(out_dir);
  std::vector<OpDecl> decls;
  // Every spec and source of this run is an input that no output may replace.
  for (const auto& path : build_specs) {
    writer.add_input(path);
    try {
      OpDecl decl = load_op_file(path);
      if (decl.spec.source_file) writer.add_input(fs::path(decl.base_dir) / *decl.spec.source_file);
    } catch (const Error&) {
      // Reported when the spec is built below.
    }
  }
  return for_each_spec(build_specs, [&](const std::string& path) {
    OpDecl decl = load_op_file(path);
    OpPlan plan = derive_plan(decl);
    if (!out_dir.empty()) writer.claim(plan.op_name, path);
    CompiledImage image = compile(plan, options);
    std::cout << "op " << plan.op_name << "  (" << path << ")\n";
    cli::print_plan(std::cout, image.plan);
    cli::print_images(std::cout, image);
    // The backward chain is compiled and its signatures verified like any kernel.
    std::vector<CompiledImage> chain = compile_backward(image.plan, options);
    for (std::size_t i = 0; i < chain.size(); ++i) {
      cli::print_backward(std::cout, i == 0 ? plan : chain[i - 1].plan, chain[i].plan);
      cli::print_plan(std::cout, chain[i].plan);
      cli::print_images(std::cout, chain[i]);
    }
    if (package) {
      for (const TuningTable& t : tuning) {
        if (t.op != plan.op_name) continue;
        if (std::string why = tuning_table_mismatch(t, image); !why.empty()) {
          KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": the tuning table for " << t.device
                              << " (" << t.arch << ") in " << tuning_file
                              << " does not fit this build: " << why;
        }
        image.tuning.push_back(t);
      }
      if (!tuning.empty() && image.tuning.empty()) {
        KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": " << tuning_file
                            << " has no tuning table for it";
      }
      cli::print_tuning(std::cout, image.tuning);
      fs::path pkg = fs::path(out_dir) / (file_stem(plan) + ".kop");
      std::string bytes = write_package_bytes(image, chain);
      writer.write_all({{pkg.filename().string(), bytes}});
      std::cout << "  package   " << pkg.string() << " (" << bytes.size() << " bytes)\n";
    } else if (!out_dir.empty()) {
      std::vector<std::pair<std::string, std::string>> files;
      for (const ArchImage& a : image.images) {
        files.emplace_back(file_stem(plan) + "." + a.arch + "." + std::string(a.kind()), a.data);
      }
      files.emplace_back(file_stem(plan) + ".json", print_op_json(decl, JsonWriteOptions{2, true}));
      writer.write_all(files);
    }
    std::cout << "\n";
  });
}

}  // namespace

int main(int argc, char** argv) {
  return kernelop::cli::guarded_main("kernelop", run_cli, argc, argv);
}
