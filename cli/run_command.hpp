// `kernelop run`: launch an op on random inputs on the GPU, time it with CUDA events and,
// where the program knows the op's CPU reference, check it. The installed `kernelop` knows
// none; `kernelop-examples` (built, not installed) knows the examples' (examples/support).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/host_tensor.hpp"

namespace kernelop::cli {

struct RunOptions {
  std::string path;                  ///< a .kop package or a JSON spec
  std::vector<std::string> shapes;   ///< "x=4096", "x=64x1024"
  std::vector<std::string> scalars;  ///< "alpha=2.5"
  std::vector<std::string> dtypes;   ///< "x=float16" (dtype-generic kernels)
  std::vector<std::string> archs;    ///< when compiling a spec
  bool check = false;
  bool prefer_ptx = false;
  bool prefer_tileir = false;
  int device = 0;
  int warmup = 20;
  int iterations = 200;
  unsigned long long seed = 0;
  std::optional<int> tactic;  ///< pin this tactic (tuned ops)
  std::string tuning_out;  ///< `tune`: write the op's tuning tables here (merged with the file's)
  bool tune = false;       ///< the `tune` subcommand: tune, report, no timing loop
};

/// The CPU reference of an op (nullptr: none).
using FindReference = const HostReference* (*)(std::string_view op_name);

/// Adds the `run` subcommand and its options to `app`; `--check` only with references.
CLI::App* add_run_command(CLI::App& app, RunOptions& options, FindReference references);
/// Adds the `tune` subcommand: run's inputs, one launch (which tunes the key on a table miss),
/// the op's tuning report, and the tables written to --output.
CLI::App* add_tune_command(CLI::App& app, RunOptions& options);

/// Returns the exit code: 0 success, 1 a failed check.
int run_op(const RunOptions& options, FindReference references);

/// Runs a command-line program's body: every failure is reported on stderr as
/// "<program>: error: ..." and ends with status 1 (nothing reaches std::terminate).
int guarded_main(const char* program, int (*body)(int, char**), int argc, char** argv);

}  // namespace kernelop::cli
