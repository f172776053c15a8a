// Image selection by compute capability.
#include "runtime/image_select.hpp"

#include "core/words.hpp"

namespace kernelop::detail {

int select_image(const std::vector<ArchImage>& images, int major, int minor, bool prefer_ptx,
                 std::string* why) {
  int device = major * 10 + minor;
  auto best = [&](bool want_ptx) {
    int chosen = -1, chosen_score = -1;
    for (std::size_t i = 0; i < images.size(); ++i) {
      ArchId id;
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
  int first = best(prefer_ptx);
  if (first >= 0) return first;
  int second = best(!prefer_ptx);
  if (second >= 0) return second;
  if (why) {
    std::string built = join(images, [](const ArchImage& image) { return image.arch; });
    *why = "no image runs on sm_" + std::to_string(device) +
           " (built: " + (built.empty() ? "nothing" : built) +
           "); rebuild with that architecture or with PTX for an older one";
  }
  return -1;
}

}  // namespace kernelop::detail
