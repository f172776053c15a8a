// Strict JSON parsing and the resource-usage encoding.
#include "core/json_util.hpp"

#include <climits>

namespace kernelop::detail {

Json usage_to_json(const std::vector<ResourceUsage>& usage) {
  Json out = Json::array();
  for (const ResourceUsage& u : usage) {
    out.push_back({u.registers, u.stack_frame, u.spill_stores, u.spill_loads, u.static_shared,
                   u.const_bytes});
  }
  return out;
}

std::optional<std::vector<ResourceUsage>> usage_from_json(const Json& j, std::string* why) {
  if (!j.is_array()) {
    *why = "resource usage is not a list";
    return std::nullopt;
  }
  std::vector<ResourceUsage> out;
  for (const Json& u : j) {
    int v[6];
    if (!u.is_array() || u.size() != 6) {
      *why = "malformed resource usage " + u.dump().substr(0, 80);
      return std::nullopt;
    }
    for (std::size_t i = 0; i < 6; ++i) {
      // get<int>() on 1e300 or -1.5 would be undefined behaviour: integers in range only.
      if (!u[i].is_number_integer() ||
          (u[i].is_number_unsigned() && u[i].get<std::uint64_t>() > std::uint64_t{INT_MAX}) ||
          (!u[i].is_number_unsigned() &&
           (u[i].get<std::int64_t>() < -1 || u[i].get<std::int64_t>() > INT_MAX))) {
        *why = "resource usage value " + u[i].dump().substr(0, 40) + " is not an integer in [-1, " +
               std::to_string(INT_MAX) + "]";
        return std::nullopt;
      }
      v[i] = static_cast<int>(u[i].get<std::int64_t>());
    }
    out.push_back(ResourceUsage{v[0], v[1], v[2], v[3], v[4], v[5]});
  }
  return out;
}

}  // namespace kernelop::detail
