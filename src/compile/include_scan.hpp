// Finds the files a source includes, transitively, so the compile cache key can cover their
// contents. NVRTC reports no dependencies, so kernelop scans #include directives itself.
//
// Note [include scan]: the scan over-approximates (it follows includes in inactive #if
// branches too), which only makes the key more sensitive. A computed include (#include MACRO)
// cannot be followed; the scan reports it and the caller bypasses the persistent cache.
#pragma once

#include <string>
#include <vector>

#include "core/hash.hpp"

namespace kernelop::detail {

struct IncludedFile {
  std::string spelled;  ///< as written: "my.h" or <cuda_fp16.h>
  std::string path;     ///< resolved path; empty when not found (e.g. an NVRTC built-in header)
  Digest content;       ///< hash of the file's contents (zero when not found)
};

struct IncludeScan {
  std::vector<IncludedFile> files;
  bool has_computed_include = false;
};

/// `source_dir` is where quoted includes of the top-level source resolve first.
IncludeScan scan_includes(const std::string& source, const std::string& source_dir,
                          const std::vector<std::string>& include_dirs);

}  // namespace kernelop::detail
