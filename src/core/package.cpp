// .kop package writing and verified reading (Note [package format]).
#include "kernelop/package.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_io.hpp"
#include "core/framing.hpp"
#include "core/json_util.hpp"
#include "core/ptx_entry.hpp"
#include "kernelop/spec_json.hpp"
#include "kernelop/tuning.hpp"

namespace kernelop {
namespace {

using Json = nlohmann::ordered_json;

// A spec (its backward chain and later launches included) whose geometry states a thread-block
// cluster, even one of 1: a reader before format 8 would refuse the field.
bool names_a_cluster(const KernelSpec& s) {
  if (const Custom* c = s.geometry ? std::get_if<Custom>(&*s.geometry) : nullptr;
      c && !c->cluster.empty())
    return true;
  for (const BackwardSpec& b : s.backward) {
    if (names_a_cluster(b.spec)) return true;
  }
  for (const LaunchStep& l : s.then) {
    if (names_a_cluster(l.spec)) return true;
  }
  return false;
}

constexpr detail::FrameFormat kPackageFormat{
    {'K', 'O', 'P', 'K', 'G', '\r', '\n', '\x1a'}, kPackageFormatVersion, "package", 1};
constexpr std::size_t kHeaderSize = detail::kFrameHeaderSize;
constexpr std::uint32_t kMaxSections = 1024;
// The metadata nests a few levels; printing or copying JSON recurses, so deeper is rejected.

// The spec as a package stores it: source inline, dtypes the compiler inferred filled in.
OpDecl packaged_decl(const CompiledImage& image) {
  const OpPlan& plan = image.plan;
  OpDecl decl{plan.op_name, plan.spec, ""};
  // Paths of the build machine mean nothing where it loads: the backward's and the later
  // launches' neither.
  auto strip = [](auto& self, KernelSpec& s) -> void {
    s.source_file.reset();
    s.include_paths.clear();
    for (BackwardSpec& b : s.backward) self(self, b.spec);
    for (LaunchStep& l : s.then) self(self, l.spec);
  };
  strip(strip, decl.spec);
  if (decl.spec.inputs) {
    for (Input& input : *decl.spec.inputs) {
      auto* t = std::get_if<InputDecl>(&input);
      if (!t || t->dtype) continue;
      int slot = plan.tensor_slot(t->name);
      if (slot >= 0) t->dtype = plan.tensors[static_cast<std::size_t>(slot)].dtype;
    }
  }
  return decl;
}

// Packages nest (a backward's, a later launch's); a crafted file could nest them until reading
// overflows the stack. A real op nests a few levels (a double backward whose launches ...).
constexpr int kMaxNesting = 8;

class Reader {
 public:
  /// `launch`: the package is one of an op's launches (ValidateOptions::launch_of_op).
  Reader(std::string_view bytes, std::string_view origin, int depth = 0, bool launch = false)
      : bytes_(bytes), origin_(origin), depth_(depth), launch_(launch) {}

  // "package ORIGIN: ..." (Note [raising errors]).
  detail::ErrorStream error() const {
    detail::ErrorStream e(ErrorKind::Format);
    e << "package " << origin_ << ": ";
    return e;
  }

  Package read() {
    if (depth_ > kMaxNesting) {
      KERNELOP_RAISE(error()) << "nests packages more than " << kMaxNesting << " levels deep";
    }
    Package pkg;
    detail::Unframed frame;
    if (std::string why = detail::unframe(bytes_, kPackageFormat, frame); !why.empty()) {
      KERNELOP_RAISE(error()) << why;
    }
    pkg.format_version = frame.version;
    std::uint32_t count = frame.tag;  // sections
    pkg.checksum = frame.checksum.hex();
    pkg.file_size = bytes_.size();
    if (count < 1 || count > kMaxSections)
      KERNELOP_RAISE(error()) << "section count " << count << " is out of range";
    std::size_t table_end = kHeaderSize + 16 * static_cast<std::size_t>(count);
    if (table_end > bytes_.size())
      KERNELOP_RAISE(error()) << "section table runs past the end of the file";
    std::vector<std::string_view> sections;
    // Sections follow each other: overlapping ones would let a small file claim the same
    // bytes for every image, and loading it would copy them as many times.
    std::uint64_t previous_end = table_end;
    for (std::uint32_t i = 0; i < count; ++i) {
      auto offset = detail::get_le<std::uint64_t>(bytes_, kHeaderSize + 16 * std::size_t{i});
      auto length = detail::get_le<std::uint64_t>(bytes_, kHeaderSize + 16 * std::size_t{i} + 8);
      if (offset < table_end || offset > bytes_.size() || length > bytes_.size() - offset) {
        KERNELOP_RAISE(error()) << "section " << i << " lies outside the file";
      }
      if (offset < previous_end) {
        KERNELOP_RAISE(error()) << "section " << i << " overlaps the one before it";
      }
      previous_end = offset + length;
      sections.push_back(bytes_.substr(offset, length));
    }
    std::string why;
    std::optional<Json> parsed = detail::parse_json_strict<Json>(sections[0], &why);
    if (!parsed) KERNELOP_RAISE(error()) << "metadata is not valid JSON: " << why;
    const Json& meta = *parsed;
    try {
      read_metadata(meta, sections, pkg);
    } catch (const nlohmann::json::exception& e) {
      KERNELOP_RAISE(error()) << "metadata is malformed: " << e.what();
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Format) throw;
      KERNELOP_RAISE(error()) << "its spec is invalid: " << e.message();
    }
    return pkg;
  }

 private:
  // An integer field, range-checked: get<int>() on 1e300 or -1.5 would be undefined behaviour.
  template <class Int>
  Int get_int(const Json& j, const std::string& what) const {
    using Limits = std::numeric_limits<Int>;
    if (j.is_number_unsigned() && j.get<std::uint64_t>() <= std::uint64_t{Limits::max()}) {
      return static_cast<Int>(j.get<std::uint64_t>());
    }
    if (j.is_number_integer() && !j.is_number_unsigned()) {
      auto v = j.get<std::int64_t>();
      if (v >= std::int64_t{Limits::min()} && v <= std::int64_t{Limits::max()})
        return static_cast<Int>(v);
    }
    KERNELOP_RAISE(error()) << what << " is " << j.dump() << "; expected an integer in range";
  }

  void read_metadata(const Json& meta, const std::vector<std::string_view>& sections,
                     Package& pkg) {
    if (!meta.is_object()) KERNELOP_RAISE(error()) << "metadata is not a JSON object";
    if (get_int<std::uint32_t>(meta.at("format"), "metadata.format") != pkg.format_version)
      KERNELOP_RAISE(error()) << "metadata format differs from the header";
    pkg.created_by = meta.at("created_by").get<std::string>();
    CompiledImage& image = pkg.image;
    const Json& spec = meta.at("spec");
    if (!spec.is_object()) KERNELOP_RAISE(error()) << "metadata.spec is not an object";
    // The source travels inline: a path would make loading read a file of the loader's machine.
    if (spec.contains("source_file")) {
      KERNELOP_RAISE(error())
          << "metadata.spec has a source_file; a package holds its kernel source inline";
    }
    // The spec as packaged holds the dtypes its kernel fixed (Note [plan stages]).
    ValidateOptions options;
    options.launch_of_op = launch_;
    image.plan = complete_plan(
        derive_plan(parse_op_json(spec.dump(), "", std::string(origin_) + ": spec"), options));
    if (image.plan.op_name != meta.at("op").get<std::string>())
      KERNELOP_RAISE(error()) << "metadata.op differs from the spec's op";
    image.lowered_names = meta.at("lowered_names").get<std::vector<std::string>>();
    if (image.lowered_names.size() != image.plan.instances.size()) {
      KERNELOP_RAISE(error()) << image.lowered_names.size() << " kernel symbols for "
                              << image.plan.instances.size() << " instantiations";
    }
    image.nvrtc_version = meta.at("nvrtc_version").get<std::string>();
    image.options = meta.at("compile_options").get<std::vector<std::string>>();
    const Json& images = meta.at("images");
    // The backward chain travels as the last section, a package of its own (format 4).
    const bool has_backward = meta.contains("backward");
    if (const auto& f = image.plan.spec.foreign;
        f && pkg.format_version < f->info().package_format) {
      KERNELOP_RAISE(error()) << "a format " << pkg.format_version << " package cannot hold a "
                              << f->display() << " kernel (format " << f->info().package_format
                              << " or later)";
    }
    if (names_a_cluster(image.plan.spec) && pkg.format_version < 8) {
      KERNELOP_RAISE(error()) << "a format " << pkg.format_version
                              << " package cannot hold a thread-block cluster launch";
    }
    if (has_backward && pkg.format_version < 4) {
      KERNELOP_RAISE(error()) << "a format " << pkg.format_version
                              << " package cannot hold a backward";
    }
    if (has_backward != !image.plan.spec.backward.empty()) {
      KERNELOP_RAISE(error()) << (has_backward ? "it holds a backward its spec does not declare"
                                               : "its spec declares a backward it does not hold");
    }
    // The later launches travel after the images, each a package of its own (format 5).
    const std::size_t launches = image.plan.spec.then.size();
    if (meta.contains("then") != (launches > 0) ||
        (launches > 0 && (!meta.at("then").is_array() || meta.at("then").size() != launches))) {
      KERNELOP_RAISE(error()) << "its spec declares " << launches
                              << " later launch(es) and it holds "
                              << (meta.contains("then") && meta.at("then").is_array()
                                      ? meta.at("then").size()
                                      : 0);
    }
    if ((launches > 0 || image.plan.num_results() != image.plan.outputs.size()) &&
        pkg.format_version < 5) {
      KERNELOP_RAISE(error()) << "a format " << pkg.format_version
                              << " package cannot hold later launches or scratch";
    }
    if (sections.size() < 2 + launches + (has_backward ? 1 : 0)) {
      KERNELOP_RAISE(error()) << "it has " << sections.size() << " sections, too few for its "
                              << "images, launches and backward";
    }
    std::size_t image_sections = sections.size() - 1 - launches - (has_backward ? 1 : 0);
    if (!images.is_array() || images.size() != image_sections) {
      KERNELOP_RAISE(error()) << "metadata lists " << (images.is_array() ? images.size() : 0)
                              << " images for " << image_sections << " image sections";
    }
    if (has_backward) {
      OpDecl want = backward_decl(image.plan);
      Package inner =
          Reader(sections.back(), std::string(origin_) + ": backward " + want.op_name, depth_ + 1)
              .read();
      if (!derives_backward(image.plan, inner.image.plan) ||
          meta.at("backward").at("op").get<std::string>() != want.op_name) {
        KERNELOP_RAISE(error()) << "its backward is not " << want.op_name
                                << " as its spec derives it";
      }
      pkg.backward.push_back(std::move(inner.image));
      for (CompiledImage& b : inner.backward) pkg.backward.push_back(std::move(b));
    }
    for (std::size_t k = 0; k < launches; ++k) {
      OpDecl want = launch_decl(image.plan, k);
      Package inner = Reader(sections[1 + image_sections + k],
                             std::string(origin_) + ": launch " + want.op_name, depth_ + 1, true)
                          .read();
      if (!derives_launch(image.plan, k, inner.image.plan) ||
          meta.at("then").at(k).at("op").get<std::string>() != want.op_name ||
          !inner.backward.empty()) {
        KERNELOP_RAISE(error()) << "its launch " << k + 1 << " is not " << want.op_name
                                << " as its spec derives it";
      }
      image.then.push_back(std::move(inner.image));
    }
    for (std::size_t i = 0; i < images.size(); ++i) {
      ArchImage a;
      a.arch = images[i].at("arch").get<std::string>();
      bool cubin = a.is_cubin();
      if (a.kind().empty() || (a.is_tileir() && pkg.format_version < 7)) {
        KERNELOP_RAISE(error()) << "image " << i << " has arch '" << a.arch << "' in a format "
                                << pkg.format_version << " package";
      }
      a.data.assign(sections[i + 1]);
      if (a.is_tileir() && !is_tileir_bytecode(a.data)) {
        KERNELOP_RAISE(error()) << "image " << i << " (" << a.arch << ") is not Tile IR bytecode";
      }
      // "kind" is redundant with the arch; a package where they disagree is not one we wrote.
      if (images[i].at("kind").get<std::string>() != a.kind()) {
        KERNELOP_RAISE(error()) << "image " << i << " (" << a.arch << ") has kind '"
                                << images[i].at("kind").get<std::string>() << "'";
      }
      std::string why;
      auto usage = detail::usage_from_json(images[i].at("usage"), &why);
      if (!usage) KERNELOP_RAISE(error()) << "image " << i << ": " << why;
      a.usage = std::move(*usage);
      // Written only when not 0, so that an untuned op's package is what format 1 always was.
      if (images[i].contains("program")) {
        a.program = get_int<int>(images[i].at("program"), "image program");
        if (a.program < 0 || static_cast<std::size_t>(a.program) >= image.plan.programs.size()) {
          KERNELOP_RAISE(error()) << "image " << i << " (" << a.arch << ") is of compilation "
                                  << a.program << " of " << image.plan.programs.size();
        }
      }
      if (images[i].contains("launch_shared")) {
        a.launch_shared = get_int<int>(images[i].at("launch_shared"), "image launch_shared");
        if (a.launch_shared < 0 || pkg.format_version < 2) {
          KERNELOP_RAISE(error()) << "image " << i << " (" << a.arch << ") has launch_shared "
                                  << a.launch_shared << " in a format " << pkg.format_version
                                  << " package";
        }
      }
      if (images[i].contains("scratch")) {
        const Json& sc = images[i].at("scratch");
        a.scratch_bytes = get_int<int>(sc.at("bytes"), "image scratch bytes");
        a.scratch_align = get_int<int>(sc.at("align"), "image scratch align");
        a.scratch_param = get_int<int>(sc.at("param"), "image scratch param");
        if (pkg.format_version < 2 || a.scratch_bytes <= 0 ||
            !detail::scratch_param_ok(image.plan, a.scratch_param, a.scratch_align)) {
          KERNELOP_RAISE(error()) << "image " << i << " (" << a.arch << ") has scratch of "
                                  << a.scratch_bytes << " bytes (alignment " << a.scratch_align
                                  << ") in parameter " << a.scratch_param
                                  << ", which the op's parameters cannot take";
        }
      }
      if (a.is_tileir() && (a.launch_shared != 0 || a.scratch_bytes != 0)) {
        KERNELOP_RAISE(error())
            << "image " << i << " (" << a.arch
            << ") states launch shared memory or scratch, which Tile IR does not";
      }
      std::size_t members = image.plan.instances_of(a.program).size();
      if (cubin ? a.usage.size() != members : !a.usage.empty()) {
        KERNELOP_RAISE(error()) << "image " << a.arch << " has usage for " << a.usage.size()
                                << " of " << members << " instantiations";
      }
      image.images.push_back(std::move(a));
    }
    if (image.images.empty()) KERNELOP_RAISE(error()) << "it holds no image";
    // Tuning tables (optional): each must belong to this very op (kernelop/tuning.hpp).
    if (meta.contains("tuning")) {
      std::string origin = std::string(origin_) + ": tuning";
      image.tuning = parse_tuning_tables(meta.at("tuning").dump(), origin);
      for (const TuningTable& t : image.tuning) {
        if (std::string why = tuning_table_mismatch(t, image); !why.empty()) {
          KERNELOP_RAISE(error()) << "its tuning table for " << t.device << " (" << t.arch
                                  << ") does not fit the op: " << why;
        }
      }
    }
  }

  std::string_view bytes_;
  std::string origin_;
  int depth_ = 0;
  bool launch_ = false;
};

}  // namespace

std::string write_package_bytes(const CompiledImage& image,
                                std::span<const CompiledImage> backward) {
  // A package must run with no Python: every part of the op comes from its spec.
  if (!image.plan.is_declarative()) {
    KERNELOP_FAIL(Spec) << "op " << image.plan.op_name
                        << ": only declarative ops go in packages (inputs, outputs and geometry "
                           "in the spec); this one relies on meta_fn or eager_fn";
  }
  // The backward chain: exactly as deep as the specs declare, each image the one derived.
  std::string backward_bytes;
  if (!image.plan.spec.backward.empty()) {
    OpDecl want = backward_decl(image.plan);
    if (backward.empty() || !derives_backward(image.plan, backward[0].plan)) {
      KERNELOP_FAIL(Spec) << "op " << image.plan.op_name << ": its spec declares a backward, so "
                          << "its package needs the compiled " << want.op_name << " ("
                          << (backward.empty() ? "none was given"
                                               : "given " + backward[0].plan.op_name +
                                                     (backward[0].plan.op_name == want.op_name
                                                          ? " of another spec"
                                                          : ""))
                          << ")";
    }
    backward_bytes = write_package_bytes(backward[0], backward.subspan(1));
  } else if (!backward.empty()) {
    KERNELOP_FAIL(Spec) << "op " << image.plan.op_name << ": a backward image ("
                        << backward[0].plan.op_name
                        << ") was given but the spec declares no backward";
  }
  // Version 1 unless the package holds what a version-1 reader would misread.
  const auto& foreign = image.plan.spec.foreign;
  std::uint32_t format = foreign ? foreign->info().package_format : 1;
  for (const ArchImage& a : image.images) {
    if (a.launch_shared != 0 || a.scratch_bytes != 0) format = std::max(format, 2u);
    if (a.is_tileir()) format = std::max(format, 7u);
  }
  if (!image.plan.structs.empty()) format = std::max(format, 3u);
  if (names_a_cluster(image.plan.spec)) format = std::max(format, 8u);
  for (const OutputPlan& o : image.plan.outputs) {
    if (o.align != 0) format = std::max(format, 6u);  // an output's "align"
  }
  if (!backward_bytes.empty()) format = std::max(format, 4u);
  // The later launches (Note [several launches]), each a package of its own.
  if (image.then.size() != image.plan.spec.then.size()) {
    KERNELOP_FAIL(Spec) << "op " << image.plan.op_name << ": its spec declares "
                        << image.plan.spec.then.size() << " later launch(es) and the image holds "
                        << image.then.size() << " (compile_launches compiles them)";
  }
  std::vector<std::string> launch_bytes;
  Json then = Json::array();
  for (std::size_t k = 0; k < image.then.size(); ++k) {
    if (!derives_launch(image.plan, k, image.then[k].plan)) {
      KERNELOP_FAIL(Spec) << "op " << image.plan.op_name << ": its launch " << k + 1 << " image ("
                          << image.then[k].plan.op_name << ") is not the one its spec derives";
    }
    launch_bytes.push_back(write_package_bytes(image.then[k]));
    then.push_back(Json{{"op", image.then[k].plan.op_name}});
  }
  if (!launch_bytes.empty() || image.plan.num_results() != image.plan.outputs.size())
    format = std::max(format, 5u);
  Json meta = Json::object();
  meta["format"] = format;
  meta["created_by"] = "kernelop " + std::string(version());
  meta["op"] = image.plan.op_name;
  meta["schema"] = image.plan.qualified_schema();
  meta["spec"] = Json::parse(print_op_json(packaged_decl(image), JsonWriteOptions{-1, true}));
  meta["lowered_names"] = image.lowered_names;
  meta["nvrtc_version"] = image.nvrtc_version;
  // Include directories are the builder's paths (its checkout, its toolkit): not recorded.
  Json options = Json::array();
  for (const std::string& o : image.options) {
    if (!o.starts_with("-I")) options.push_back(o);
  }
  meta["compile_options"] = options;
  Json images = Json::array();
  for (const ArchImage& a : image.images) {
    images.push_back(
        Json{{"arch", a.arch}, {"kind", a.kind()}, {"usage", detail::usage_to_json(a.usage)}});
    if (a.program != 0) images.back()["program"] = a.program;
    if (a.launch_shared != 0) images.back()["launch_shared"] = a.launch_shared;
    if (a.scratch_bytes != 0) {
      images.back()["scratch"] =
          Json{{"bytes", a.scratch_bytes}, {"align", a.scratch_align}, {"param", a.scratch_param}};
    }
  }
  meta["images"] = std::move(images);
  if (!backward_bytes.empty()) meta["backward"] = Json{{"op", backward[0].plan.op_name}};
  if (!launch_bytes.empty()) meta["then"] = std::move(then);
  if (!image.tuning.empty()) {
    for (const TuningTable& t : image.tuning) {
      if (std::string why = tuning_table_mismatch(t, image); !why.empty()) {
        KERNELOP_FAIL(Spec) << "op " << image.plan.op_name << ": the tuning table for " << t.device
                            << " (" << t.arch << ") does not fit the op: " << why;
      }
    }
    meta["tuning"] = Json::parse(tuning_tables_json(image.tuning));
  }

  std::vector<std::string_view> sections;
  std::string meta_text;
  try {
    meta_text = meta.dump();
  } catch (const nlohmann::json::exception& e) {  // a string that is not UTF-8
    KERNELOP_FAIL(Format) << "cannot write a package of op " << image.plan.op_name << ": "
                          << e.what();
  }
  sections.push_back(meta_text);
  for (const ArchImage& a : image.images) sections.push_back(a.data);
  for (const std::string& l : launch_bytes) sections.push_back(l);  // each a package of its own
  if (!backward_bytes.empty()) sections.push_back(backward_bytes);  // a package of its own
  auto count = static_cast<std::uint32_t>(sections.size());
  std::string body;  // everything after the frame's header
  std::uint64_t offset = kHeaderSize + 16ull * count;
  for (auto s : sections) {
    detail::put_le<std::uint64_t>(body, offset);
    detail::put_le<std::uint64_t>(body, s.size());
    offset += s.size();
  }
  for (auto s : sections) body.append(s);
  return detail::frame(kPackageFormat, count, body, format);
}

std::string_view version() {
  return KERNELOP_VERSION;
}

void write_package(const CompiledImage& image, const std::filesystem::path& path,
                   std::span<const CompiledImage> backward) {
  detail::write_file(path, write_package_bytes(image, backward), "package");
}

Package parse_package(std::string_view bytes, std::string_view origin) {
  return Reader(bytes, origin).read();
}

Package load_package(const std::filesystem::path& path) {
  return parse_package(detail::read_file(path, "package", detail::kMaxBinaryFileBytes),
                       path.string());
}

CompiledImage read_package(const std::filesystem::path& path) {
  return load_package(path).image;
}

}  // namespace kernelop
