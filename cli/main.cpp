// The kernelop command-line tool: validate specs, compile them, report what they imply.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "kernelop/cache.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/spec_json.hpp"
#include "report.hpp"

namespace fs = std::filesystem;
using namespace kernelop;

namespace {

std::string file_stem(const OpPlan& plan) {
  return plan.ns + "." + plan.name;
}

void write_file(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
  if (!out) KERNELOP_FAIL(Io) << "cannot write '" << path.string() << "'";
}

// Runs `fn` on each spec; reports errors on stderr and returns the exit code.
template <class Fn>
int for_each_spec(const std::vector<std::string>& specs, Fn fn) {
  int failures = 0;
  for (const auto& path : specs) {
    try {
      fn(path);
    } catch (const Error& e) {
      ++failures;
      std::string what = e.what();
      // Errors about the file itself already start with its path.
      std::cerr << "kernelop: error: " << (what.rfind(path, 0) == 0 ? "" : path + ": ") << what
                << "\n";
    }
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelop: hand-written CUDA kernels + a declarative spec -> operators"};
  app.require_subcommand(1);

  std::vector<std::string> specs;
  auto* check = app.add_subcommand("check", "Validate spec files and print what they imply");
  check->add_option("specs", specs, "JSON spec files")->required()->check(CLI::ExistingFile);

  std::vector<std::string> build_specs, archs;
  std::string out_dir;
  bool no_cache = false;
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  if (*check) {
    return for_each_spec(specs, [](const std::string& path) {
      OpPlan plan = derive_plan(load_op_file(path));
      std::cout << "op " << plan.op_name << "  (" << path << ")\n";
      cli::print_plan(std::cout, plan);
      std::cout << "  ok\n\n";
    });
  }

  if (!out_dir.empty()) fs::create_directories(out_dir);
  CompileOptions options;
  options.archs = archs;
  options.use_cache = !no_cache;
  options.jobs = jobs;
  return for_each_spec(build_specs, [&](const std::string& path) {
    OpDecl decl = load_op_file(path);
    OpPlan plan = derive_plan(decl);
    CompiledImage image = compile(plan, options);
    std::cout << "op " << plan.op_name << "  (" << path << ")\n";
    cli::print_plan(std::cout, image.plan);
    cli::print_images(std::cout, image);
    if (!out_dir.empty()) {
      for (const ArchImage& a : image.images) {
        write_file(
            fs::path(out_dir) / (file_stem(plan) + "." + a.arch + (a.is_ptx() ? ".ptx" : ".cubin")),
            a.data);
      }
      write_file(fs::path(out_dir) / (file_stem(plan) + ".json"),
                 print_op_json(decl, JsonWriteOptions{2, true}));
    }
    std::cout << "\n";
  });
}
