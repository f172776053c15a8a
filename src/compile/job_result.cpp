// The compile cache's payload for one NVRTC run.
#include "compile/job_result.hpp"

#include <nlohmann/json.hpp>

#include "core/file_io.hpp"
#include "core/framing.hpp"
#include "core/json_util.hpp"

namespace kernelop::detail {

// Note [cache payload]: [u64 n][n bytes: CBOR of the small fields][u64 n][CUBIN][u64 n][PTX].
// The two large blobs are raw bytes: CBOR reads strings byte by byte (1.7 ms for a CUB kernel's
// 120 KiB CUBIN and its PTX), a memcpy does not. Every length is checked against what is left.
std::string serialize(const JobResult& r) {
  nlohmann::json j;
  j["log"] = r.log;
  j["lowered"] = r.lowered;
  j["codes"] = r.codes;
  j["usage"] = usage_to_json(r.usage);
  auto meta = nlohmann::json::to_cbor(j);
  std::string out;
  out.reserve(24 + meta.size() + r.cubin.size() + r.ptx.size());
  put_le<std::uint64_t>(out, meta.size());
  out.append(meta.begin(), meta.end());
  for (const std::string* blob : {&r.cubin, &r.ptx}) {
    put_le<std::uint64_t>(out, blob->size());
    out.append(*blob);
  }
  return out;
}

std::optional<JobResult> deserialize(std::string_view payload) {
  auto take = [&](std::string_view* part) {
    if (payload.size() < 8) return false;
    std::uint64_t n = get_le<std::uint64_t>(payload, 0);
    if (n > payload.size() - 8) return false;
    *part = payload.substr(8, n);
    payload.remove_prefix(8 + n);
    return true;
  };
  std::string_view meta, cubin, ptx;
  if (!take(&meta) || !take(&cubin) || !take(&ptx) || !payload.empty()) return std::nullopt;
  try {
    auto j = nlohmann::json::from_cbor(meta.begin(), meta.end());
    JobResult r;
    r.cubin.assign(cubin);
    r.ptx.assign(ptx);
    r.log = j.at("log").get<std::string>();
    r.lowered = j.at("lowered").get<std::vector<std::string>>();
    r.codes = j.at("codes").get<std::vector<std::vector<std::int64_t>>>();
    std::string why;
    auto usage = usage_from_json(j.at("usage"), &why);
    if (!usage) return std::nullopt;
    r.usage = std::move(*usage);
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace kernelop::detail
