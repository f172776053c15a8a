// Lookup in a compiled image.
#include "kernelop/image.hpp"

namespace kernelop {

const ArchImage* CompiledImage::find(std::string_view arch) const {
  for (const auto& image : images) {
    if (image.arch == arch) return &image;
  }
  return nullptr;
}

}  // namespace kernelop
