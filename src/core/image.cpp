// Lookup in a compiled image.
#include "kernelop/image.hpp"

#include <algorithm>

namespace kernelop {

const ArchImage* CompiledImage::find(std::string_view arch, int program) const {
  for (const auto& image : images) {
    if (image.arch == arch && image.program == program) return &image;
  }
  return nullptr;
}

const ResourceUsage* CompiledImage::usage(std::string_view arch, int instance) const {
  if (instance < 0 || static_cast<std::size_t>(instance) >= plan.instances.size()) return nullptr;
  int program = plan.configs[static_cast<std::size_t>(
                                 plan.instances[static_cast<std::size_t>(instance)].config)]
                    .program;
  const ArchImage* a = find(arch, program);
  if (!a) return nullptr;
  std::vector<int> members = plan.instances_of(program);
  auto at = std::find(members.begin(), members.end(), instance) - members.begin();
  return static_cast<std::size_t>(at) < a->usage.size() ? &a->usage[static_cast<std::size_t>(at)]
                                                        : nullptr;
}

}  // namespace kernelop
