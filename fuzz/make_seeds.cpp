// Writes the fuzzers' seed corpora: a valid package and the spec JSON of every example
// (examples/ and examples/autograd/, whose packages carry backward chains: format 4, and later
// launches with scratch: format 5).
//
// Usage: kernelop_fuzz_seeds EXAMPLES_DIR PACKAGE_CORPUS_DIR SPEC_JSON_CORPUS_DIR
// The packages hold made-up machine code (no NVRTC needed): one CUBIN and one PTX image.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernelop/error.hpp"
#include "kernelop/image.hpp"
#include "kernelop/package.hpp"
#include "kernelop/plan.hpp"
#include "kernelop/spec_json.hpp"

namespace fs = std::filesystem;

namespace {

kernelop::CompiledImage synthetic_image(const kernelop::OpDecl& decl,
                                        const kernelop::ValidateOptions& options = {}) {
  kernelop::CompiledImage image;
  image.plan = kernelop::complete_plan(kernelop::derive_plan(decl, options));
  for (const kernelop::KernelInstance& instance : image.plan.instances) {
    image.lowered_names.push_back(instance.name_expression);
  }
  image.nvrtc_version = "13.0";
  image.options = {"--std=c++17", "-Xptxas=-v"};
  kernelop::ArchImage cubin;
  cubin.arch = "sm_80";
  cubin.data = "CUBIN";
  for (std::size_t i = 0; i < image.plan.instances.size(); ++i) {
    cubin.usage.push_back(kernelop::ResourceUsage{16, 0, 0, 0, 0, 364});
  }
  image.images.push_back(std::move(cubin));
  kernelop::ArchImage ptx;
  ptx.arch = "compute_90";
  ptx.data = ".version 9.0\n.target sm_90\n.address_size 64\n";
  image.images.push_back(std::move(ptx));
  // Its later launches (Note [several launches]: format-5 packages), each an image of its own.
  for (std::size_t k = 0; k < image.plan.spec.then.size(); ++k) {
    kernelop::ValidateOptions launch;
    launch.launch_of_op = true;
    image.then.push_back(synthetic_image(kernelop::launch_decl(image.plan, k), launch));
  }
  return image;
}

// The backward chain a package of `plan` carries (format 4): synthetic images of its backward,
// that one's backward, ... (none when the spec declares no backward).
std::vector<kernelop::CompiledImage> synthetic_chain(const kernelop::OpPlan& plan) {
  std::vector<kernelop::CompiledImage> chain;
  const kernelop::OpPlan* last = &plan;
  while (!last->spec.backward.empty()) {
    chain.push_back(synthetic_image(kernelop::backward_decl(*last)));
    last = &chain.back().plan;
  }
  return chain;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr,
                 "usage: %s EXAMPLES_DIR PACKAGE_CORPUS_DIR SPEC_JSON_CORPUS_DIR "
                 "INCLUDE_SCAN_CORPUS_DIR\n",
                 argv[0]);
    return 2;
  }
  const fs::path examples = argv[1], packages = argv[2], specs = argv[3], sources = argv[4];
  try {
    fs::create_directories(packages);
    fs::create_directories(specs);
    fs::create_directories(sources);
    // The include scanner starts from every example source and header (first byte: trigraphs
    // off), plus the spellings of Note [include scan].
    for (const auto& entry : fs::directory_iterator(examples)) {
      std::string ext = entry.path().extension().string();
      if (ext != ".cu" && ext != ".cuh" && ext != ".h") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      write_file(sources / entry.path().filename(),
                 std::string(1, '\0') + std::string(std::istreambuf_iterator<char>(in), {}));
    }
    write_file(sources / "spellings.cu",
               std::string("\1# /* c */ include \"a.h\"\n%:include <b.h>\n#\\\ninclude \"c.h\"\n"
                           "?\?=include \"d.h\"\n#if __has_include(<e.h>)\n#include_next <f.h>\n"
                           "#include MACRO\nauto r = R\"x(\n#include \"g.h\"\n)x\";\n"
                           "char c = '\"'; int n = 1'000; // ?\?/\n#include \"h.h\"\n"));
    // Every example spec, the autograd ones (backward chains: format-4 packages) included.
    std::vector<fs::path> files;
    for (const fs::path& dir : {examples, examples / "autograd"}) {
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() == ".json") files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    int written = 0;
    for (const fs::path& file : files) {
      // examples/autograd/softmax.json beside examples/softmax.json: distinct seed names.
      std::string name = (file.parent_path() == examples ? "" : "autograd_") + file.stem().string();
      std::ifstream in(file, std::ios::binary);
      write_file(specs / (name + ".json"), std::string(std::istreambuf_iterator<char>(in), {}));
      try {
        kernelop::OpDecl decl = kernelop::load_op_file(file);
        // The form packages embed: source inline, nothing to read from disk.
        write_file(specs / (name + ".inline.json"),
                   kernelop::print_op_json(decl, kernelop::JsonWriteOptions{2, true}));
        kernelop::CompiledImage image = synthetic_image(decl);
        kernelop::write_package(image, packages / (name + ".kop"), synthetic_chain(image.plan));
        ++written;
      } catch (const kernelop::Error& e) {  // e.g. a spec that needs a meta_fn: no package
        std::fprintf(stderr, "kernelop_fuzz_seeds: no package for %s: %s\n", file.c_str(),
                     e.what());
      }
    }
    if (written == 0) throw std::runtime_error("no example gave a package");
    std::printf("kernelop_fuzz_seeds: %d packages in %s, %zu specs in %s\n", written,
                packages.c_str(), files.size() + static_cast<std::size_t>(written), specs.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernelop_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
