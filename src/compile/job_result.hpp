// What one NVRTC run yields, and its encoding as a compile-cache payload.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/image.hpp"

namespace kernelop::detail {

struct JobResult {
  std::string cubin, ptx, log;
  std::vector<std::string> lowered;              // per instance
  std::vector<std::vector<std::int64_t>> codes;  // per instance
  std::vector<ResourceUsage> usage;              // per instance (CUBIN jobs)
  double ms = 0;
  bool cache_hit = false;
};

/// Note [cache payload] in job_result.cpp. deserialize() checks every length and the resource
/// usage's range; it returns nullopt for anything kernelop did not write.
std::string serialize(const JobResult& r);
std::optional<JobResult> deserialize(std::string_view payload);

}  // namespace kernelop::detail
