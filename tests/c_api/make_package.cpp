// Compiles a spec and writes its .kop package: the fixture of the C ABI test (it stands in for
// `kernelop build --package` so that the test depends on the library only).
//   make_package SPEC.json OUT.kop
#include <filesystem>
#include <iostream>

#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/spec_json.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_package SPEC.json OUT.kop\n";
    return 2;
  }
  try {
    kernelop::OpPlan plan = kernelop::derive_plan(kernelop::load_op_file(argv[1]));
    kernelop::CompileOptions options;
    options.archs = {"sm_80", "sm_90", "compute_90"};
    options.use_cache = false;
    options.jobs = 1;
    kernelop::CompiledImage image = kernelop::compile(plan, options);
    std::filesystem::path out = argv[2];
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    kernelop::write_package(image, out, kernelop::compile_backward(image.plan, options));
    std::cout << "wrote " << out.string() << " (" << plan.op_name << ", " << image.images.size()
              << " images)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "make_package: error: " << e.what() << "\n";
    return 1;
  }
}
