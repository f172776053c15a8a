// `kernelop run`: launch an op on random inputs on the GPU, check it against its reference and
// time it with CUDA events.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kernelop::cli {

struct RunOptions {
  std::string path;                  ///< a .kop package or a JSON spec
  std::vector<std::string> shapes;   ///< "x=4096", "x=64x1024"
  std::vector<std::string> scalars;  ///< "alpha=2.5"
  std::vector<std::string> dtypes;   ///< "x=float16" (dtype-generic kernels)
  std::vector<std::string> archs;    ///< when compiling a spec
  bool check = false;
  bool prefer_ptx = false;
  int device = 0;
  int warmup = 20;
  int iterations = 200;
  unsigned long long seed = 0;
};

/// Returns the exit code: 0 success, 1 a failed check.
int run_op(const RunOptions& options);

}  // namespace kernelop::cli
