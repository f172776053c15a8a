// kernelop-examples: `kernelop run` that knows the CPU references of the example ops, so that
// `run --check` compares each launch with them (scripts/run-examples). Not installed.
#include <iostream>

#include "references.hpp"
#include "run_command.hpp"

namespace {

int run_examples(int argc, char** argv) {
  using namespace kernelop;
  CLI::App app{"Run kernelop's example ops on a GPU, checked against their CPU references",
               "kernelop-examples"};
  app.require_subcommand(1);
  cli::RunOptions options;
  cli::add_run_command(app, options, examples::find_reference);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return cli::run_op(options, examples::find_reference);
}

}  // namespace

int main(int argc, char** argv) {
  return kernelop::cli::guarded_main("kernelop-examples", run_examples, argc, argv);
}
