// Image selection by compute capability.
#include "runtime/image_select.hpp"

#include "core/words.hpp"

namespace kernelop::detail {

int select_image(const std::vector<ArchImage>& images, int major, int minor, ImageFirst first,
                 std::string* why) {
  int device = major * 10 + minor;
  auto best = [&](ImageFirst kind) {
    int chosen = -1, chosen_score = -1;
    for (std::size_t i = 0; i < images.size(); ++i) {
      if (kind == ImageFirst::TileIr) {
        if (images[i].is_tileir() && device >= 80) return static_cast<int>(i);
        continue;
      }
      ArchId id;
      const bool want_ptx = kind == ImageFirst::Ptx;
      if (!parse_arch(images[i].arch, &id) || id.ptx != want_ptx) continue;
      bool exact = id.number == device;
      bool runs = id.suffix == 'a' ? exact
                  : want_ptx       ? id.number <= device
                                   : id.major() == major && id.minor() <= minor;
      if (!runs) continue;
      // Exact beats older minor versions; among equals an "a" build beats a plain one.
      int score = id.number * 4 + (exact ? 2 : 0) + (id.suffix == 'a' ? 1 : 0);
      if (score > chosen_score) {
        chosen = static_cast<int>(i);
        chosen_score = score;
      }
    }
    return chosen;
  };
  const ImageFirst order[3][3] = {{ImageFirst::Cubin, ImageFirst::Ptx, ImageFirst::TileIr},
                                  {ImageFirst::Ptx, ImageFirst::Cubin, ImageFirst::TileIr},
                                  {ImageFirst::TileIr, ImageFirst::Cubin, ImageFirst::Ptx}};
  for (ImageFirst kind : order[static_cast<int>(first)]) {
    if (int chosen = best(kind); chosen >= 0) return chosen;
  }
  if (why) {
    std::string built = join(images, [](const ArchImage& image) { return image.arch; });
    *why = "no image runs on sm_" + std::to_string(device) +
           " (built: " + (built.empty() ? "nothing" : built) +
           "); rebuild with that architecture or with PTX for an older one";
  }
  return -1;
}

}  // namespace kernelop::detail
