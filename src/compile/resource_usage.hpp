// Per-kernel resource usage (registers, spills, shared memory) from ptxas' verbose report.
#pragma once

#include <string>

#include "kernelop/compile.hpp"

namespace kernelop::detail {

/// Reads the `ptxas info` lines of an NVRTC log (compiled with -Xptxas=-v) for one function
/// compiled for `arch` ("sm_90"). Returns nullopt when the log has no report for it.
std::optional<ResourceUsage> parse_resource_usage(const std::string& log,
                                                  const std::string& lowered_name,
                                                  const std::string& arch);

/// The log without ptxas' verbose report: what the user should see as warnings.
std::string strip_ptxas_report(const std::string& log);

}  // namespace kernelop::detail
