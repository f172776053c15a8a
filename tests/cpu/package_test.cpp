// .kop packages: golden bytes pin format version 1; round trips; every kind of damage is an
// Error(Format) naming what is wrong.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/hash.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

// A fixed image with made-up machine code: the format test must not depend on NVRTC's output.
CompiledImage synthetic_image() {
  OpDecl decl = parse_op_json(R"({
    "op": "golden::relu",
    "kernel_name": "relu",
    "kernel_source": "extern \"C\" __global__ void relu(const float* x, int n, float* y) {}",
    "inputs": [{"name": "x"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}],
    "geometry": {"elementwise": {"block": [256], "layout": "flat"}}
  })",
                              ".", "golden");
  CompiledImage image;
  image.plan = complete_plan(derive_plan(decl));
  // What compile() infers from the signature: x is float32, so y is too.
  image.plan.tensors[0].dtype = DType::Float32;
  image.plan.tensors[1].dtype = DType::Float32;
  image.lowered_names = {"relu"};
  image.nvrtc_version = "13.0";
  image.options = {"--std=c++17", "-Xptxas=-v"};
  image.images.push_back(ArchImage{"sm_80",
                                   std::string("\x7f"
                                               "ELF-fake-cubin-80\0\1\2",
                                               21),
                                   {ResourceUsage{10, 0, 0, 0, 0, 364}},
                                   false,
                                   0});
  image.images.push_back(
      ArchImage{"compute_90", ".version 9.0\n.target sm_90\n.entry relu()\n", {}, false, 0});
  return image;
}

fs::path golden_path() {
  return testing::source_dir() / "tests" / "golden" / "relu_v1.kop";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Package, GoldenBytesPinFormatVersion1) {
  std::string bytes = write_package_bytes(synthetic_image());
  if (std::getenv("KERNELOP_UPDATE_GOLDEN")) {
    std::ofstream(golden_path(), std::ios::binary) << bytes;
  }
  ASSERT_TRUE(fs::exists(golden_path())) << "run once with KERNELOP_UPDATE_GOLDEN=1";
  EXPECT_EQ(bytes, slurp(golden_path()))
      << "the package bytes changed: bump kPackageFormatVersion and add a new golden file";
  EXPECT_EQ(kPackageFormatVersion, 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("KOPKG\r\n\x1a", 8));
  EXPECT_EQ(bytes[8], 1) << "a package without version-2 features is written as version 1";
}

// A package carries no path of the machine that built it: its NVRTC options keep everything but
// the include directories.
TEST(Package, IncludeDirectoriesOfTheBuilderAreNotRecorded) {
  CompiledImage image = synthetic_image();
  image.options = {"--std=c++17", "-I/home/someone/src/kernels", "-I/usr/local/cuda/include",
                   "-DSCALE=2", "--pre-include=cuda_fp16.h"};
  std::string bytes = write_package_bytes(image);
  EXPECT_EQ(bytes.find("/home/someone"), std::string::npos);
  EXPECT_EQ(bytes.find("/usr/local/cuda"), std::string::npos);
  Package pkg = parse_package(bytes);
  EXPECT_EQ(pkg.image.options,
            (std::vector<std::string>{"--std=c++17", "-DSCALE=2", "--pre-include=cuda_fp16.h"}));
}

TEST(Package, GoldenFileReadsBack) {
  Package pkg = load_package(golden_path());
  EXPECT_EQ(pkg.format_version, 1u);
  EXPECT_EQ(pkg.created_by, "kernelop 0.1.0");
  EXPECT_EQ(pkg.file_size, fs::file_size(golden_path()));
  EXPECT_EQ(pkg.checksum.size(), 32u);
  CompiledImage expected = synthetic_image();
  const CompiledImage& got = pkg.image;
  EXPECT_EQ(got.plan.qualified_schema(), "golden::relu(Tensor x) -> Tensor");
  EXPECT_EQ(got.plan.args, expected.plan.args);  // dtypes inferred at build time survive
  EXPECT_EQ(got.plan.outputs, expected.plan.outputs);
  EXPECT_EQ(got.lowered_names, expected.lowered_names);
  EXPECT_EQ(got.nvrtc_version, "13.0");
  EXPECT_EQ(got.options, expected.options);
  ASSERT_EQ(got.images.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.images[i].arch, expected.images[i].arch);
    EXPECT_EQ(got.images[i].data, expected.images[i].data);
    EXPECT_EQ(got.images[i].usage, expected.images[i].usage);
  }
}

// Note [golden packages]: one golden file per package format, each written from a fixed
// synthetic image. A writer that changes the bytes of a format, or a reader that reads an old file
// differently, fails here; KERNELOP_UPDATE_GOLDEN=1 rewrites the files (for a new format only).
struct Golden {
  std::string file;
  CompiledImage image;
  std::vector<CompiledImage> backward;
};

// Format 2: a Triton kernel with its own dynamic shared memory and global scratch.
Golden golden_v2() {
  OpDecl decl = parse_op_json(R"json({
    "op": "golden::scratchy",
    "kernel_name": "k",
    "kernel_source": "def k(X, Y, n): pass",
    "triton": {"version": "3.6.0"},
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}, "dtype": "float32"}],
    "params": ["x", "y", {"numel": "x"}, {"expr": "0", "int64": true}, {"expr": "0", "int64": true}],
    "geometry": {"custom": {"grid": ["numel(x)"], "block": ["128"]}}
  })json",
                              ".", "scratchy");
  Golden g{"scratchy_v2.kop", {}, {}};
  g.image.plan = complete_plan(derive_plan(decl));
  g.image.lowered_names = {"k"};
  ArchImage a{"sm_90a",
              std::string("\x7f"
                          "ELF-fake",
                          9),
              {ResourceUsage{}},
              false,
              0};
  a.launch_shared = 4104;
  a.scratch_bytes = 256;
  a.scratch_align = 128;
  a.scratch_param = 3;
  g.image.images.push_back(a);
  return g;
}

// Format 3: a CuTe DSL kernel taking a struct (pointer, size, 64-bit stride).
Golden golden_v3() {
  OpDecl decl = parse_op_json(R"J({
    "op": "golden::cute_copy",
    "kernel_name": "copy",
    "kernel_source": "def copy(): pass",
    "cutedsl": {"version": "4.8.1"},
    "inputs": [{"name": "a", "dtype": "float32"}],
    "outputs": [{"name": "c", "shape": {"same_as": "a"}}],
    "params": [{"struct": ["a", {"expr": "dim(a, 0)"}, {"expr": "stride(a, 0)", "int64": true}]}, "c"],
    "geometry": {"custom": {"grid": ["cdiv(numel(a), 256)"], "block": [256]}}
  })J",
                              "", "cute_copy");
  std::string ptx =
      ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry copy(\n"
      "\t.param .align 8 .b8 copy_param_0[24],\n\t.param .u64 copy_param_1\n)\n{\n\tret;\n}\n";
  return {"cute_copy_v3.kop", image_from_ptx(derive_plan(decl), ptx, "copy"), {}};
}

// Format 4: an op with a backward chain (its backward and that one's backward).
Golden golden_v4() {
  auto stage = [](const std::string& name, int inputs) {
    std::string params;
    for (int i = 0; i < inputs + 2; ++i)
      params += (i ? ",\n\t.param .u64 p" : "\t.param .u64 p") + std::to_string(i);
    return ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry " + name + "(\n" +
           params + "\n)\n{\n\tret;\n}\n";
  };
  OpDecl decl = parse_op_json(R"J({
    "op": "golden::square",
    "kernel_name": "sq",
    "kernel_source": "extern \"C\" __global__ void sq() {}",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x", "int64": true}],
    "geometry": {"elementwise": {"block": [256], "layout": "flat"}},
    "backward": {
      "differentiable": ["x"],
      "kernel_name": "sq_bwd",
      "kernel_source": "extern \"C\" __global__ void sq_bwd() {}",
      "inputs": [{"name": "x"}, {"name": "grad_y"}],
      "outputs": [{"name": "grad_x", "shape": {"same_as": "x"}}],
      "extras": [{"numel": "x", "int64": true}],
      "geometry": {"elementwise": {"block": [256], "layout": "flat"}},
      "backward": {
        "differentiable": ["grad_y"],
        "kernel_name": "sq_bwd2",
        "kernel_source": "extern \"C\" __global__ void sq_bwd2() {}",
        "inputs": [{"name": "x"}, {"name": "grad_grad_x"}],
        "outputs": [{"name": "grad_grad_y", "shape": {"same_as": "x"}}],
        "extras": [{"numel": "x", "int64": true}],
        "geometry": {"elementwise": {"block": [256], "layout": "flat"}}
      }
    }
  })J",
                              "", "square");
  Golden g{"square_v4.kop", image_from_ptx(derive_plan(decl), stage("sq", 1), "sq"), {}};
  derive_chain(g.image.plan, [&](const OpPlan& backward) -> const OpPlan& {
    std::string entry = backward.spec.kernel_name;
    g.backward.push_back(image_from_ptx(backward, stage(entry, 2), entry));
    return g.backward.back().plan;
  });
  return g;
}

std::vector<Golden> goldens() {
  return {golden_v2(), golden_v3(), golden_v4()};
}

TEST(Package, GoldenBytesPinFormats2To4) {
  std::uint32_t format = 2;
  for (const Golden& g : goldens()) {
    fs::path path = testing::source_dir() / "tests" / "golden" / g.file;
    std::string bytes = write_package_bytes(g.image, g.backward);
    if (std::getenv("KERNELOP_UPDATE_GOLDEN")) std::ofstream(path, std::ios::binary) << bytes;
    ASSERT_TRUE(fs::exists(path)) << path << ": run once with KERNELOP_UPDATE_GOLDEN=1";
    EXPECT_EQ(bytes, slurp(path)) << g.file << ": the package bytes changed";
    EXPECT_EQ(static_cast<std::uint32_t>(bytes[8]), format) << g.file;
    ++format;
  }
}

TEST(Package, GoldenFilesOfFormats2To4ReadBack) {
  std::uint32_t format = 2;
  for (const Golden& g : goldens()) {
    SCOPED_TRACE(g.file);
    fs::path path = testing::source_dir() / "tests" / "golden" / g.file;
    Package pkg = load_package(path);
    EXPECT_EQ(pkg.format_version, format++);
    EXPECT_EQ(pkg.created_by, "kernelop 0.1.0");
    EXPECT_EQ(pkg.image.plan.spec, g.image.plan.spec);
    EXPECT_EQ(pkg.image.plan.args, g.image.plan.args);
    EXPECT_EQ(pkg.image.plan.structs, g.image.plan.structs);
    EXPECT_EQ(pkg.image.plan.qualified_schema(), g.image.plan.qualified_schema());
    EXPECT_EQ(pkg.image.lowered_names, g.image.lowered_names);
    ASSERT_EQ(pkg.image.images.size(), g.image.images.size());
    for (std::size_t i = 0; i < g.image.images.size(); ++i) {
      const ArchImage& got = pkg.image.images[i];
      const ArchImage& want = g.image.images[i];
      EXPECT_EQ(got.arch, want.arch);
      EXPECT_EQ(got.data, want.data);
      EXPECT_EQ(got.launch_shared, want.launch_shared);
      EXPECT_EQ(got.scratch_bytes, want.scratch_bytes);
      EXPECT_EQ(got.scratch_align, want.scratch_align);
      EXPECT_EQ(got.scratch_param, want.scratch_param);
    }
    ASSERT_EQ(pkg.backward.size(), g.backward.size());
    for (std::size_t i = 0; i < g.backward.size(); ++i) {
      EXPECT_EQ(pkg.backward[i].plan.qualified_schema(), g.backward[i].plan.qualified_schema());
      EXPECT_EQ(pkg.backward[i].images.at(0).data, g.backward[i].images.at(0).data);
    }
  }
}

TEST(Package, RealCompileRoundTripsThroughAFile) {
  OpPlan plan = derive_plan(testing::example("relu_generic"));
  CompileOptions o;
  o.archs = {"sm_80", "compute_80"};
  CompiledImage image = compile(plan, o);
  fs::path path =
      fs::temp_directory_path() / ("kernelop-pkg-" + std::to_string(::getpid()) + ".kop");
  write_package(image, path);
  CompiledImage back = read_package(path);
  fs::remove(path);
  EXPECT_EQ(back.plan.args, image.plan.args);
  EXPECT_EQ(back.plan.instances, image.plan.instances);
  EXPECT_EQ(back.lowered_names, image.lowered_names);
  ASSERT_EQ(back.images.size(), 2u);
  EXPECT_EQ(back.images[0].data, image.images[0].data);
  EXPECT_EQ(back.images[1].data, image.images[1].data);
  EXPECT_EQ(back.images[0].usage, image.images[0].usage);
  // Loading for launch needs no NVRTC and no source file: the spec travels inline.
  EXPECT_NE(back.plan.spec.kernel_source.find("relu_generic"), std::string::npos);
  EXPECT_FALSE(back.plan.spec.source_file.has_value());
  KernelOp op(std::move(back));
  EXPECT_EQ(op.plan().instances.size(), 3u);
}

TEST(Package, InferredDtypesAreStoredInTheSpec) {
  CompiledImage image = synthetic_image();
  Package pkg = parse_package(write_package_bytes(image));
  ASSERT_TRUE(pkg.image.plan.spec.inputs);
  const auto& x = std::get<InputDecl>((*pkg.image.plan.spec.inputs)[0]);
  EXPECT_EQ(x.dtype, DTypeDecl(DType::Float32));
}

void expect_damaged(std::string bytes, const std::string& needle) {
  expect_error([&] { parse_package(bytes, "bad.kop"); }, ErrorKind::Format,
               "package bad.kop: " + needle);
}

TEST(Package, DamageIsDetectedAndNamed) {
  const std::string good = write_package_bytes(synthetic_image());
  expect_damaged("", "not a kernelop package (bad magic; 0 bytes)");
  expect_damaged("hello world, this is not a package at all....", "not a kernelop package");
  std::string v = good;
  v[8] = static_cast<char>(kPackageFormatVersion + 1);
  expect_damaged(v, "format version " + std::to_string(kPackageFormatVersion + 1) +
                        " is not supported (this kernelop reads 1 to " +
                        std::to_string(kPackageFormatVersion) + ")");
  v[8] = 0;
  expect_damaged(v, "format version 0 is not supported (this kernelop reads 1 to " +
                        std::to_string(kPackageFormatVersion) + ")");
  expect_damaged(good.substr(0, good.size() - 1), "truncated or padded: the header says");
  expect_damaged(good + "x", "truncated or padded");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  expect_damaged(flipped, "checksum mismatch: the file is damaged");
  std::string tail = good;
  tail.back() ^= 1;
  expect_damaged(tail, "checksum mismatch");
}

TEST(Package, LoadErrorsForMissingFilesAndDirectories) {
  expect_error([] { load_package("/nonexistent/x.kop"); }, ErrorKind::Io,
               "cannot read package '/nonexistent/x.kop'");
  expect_error([] { load_package(fs::temp_directory_path()); }, ErrorKind::Io, "is a directory");
}

TEST(Package, WriteIsAtomicAndReadable) {
  fs::path dir = fs::temp_directory_path() / ("kernelop-pkg-dir-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_package(synthetic_image(), dir / "a.kop");
  write_package(synthetic_image(), dir / "a.kop");  // overwrite in place
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "no temporary file left behind";
  EXPECT_EQ(slurp(dir / "a.kop"), slurp(golden_path()));
  expect_error([&] { write_package(synthetic_image(), dir / "missing" / "a.kop"); }, ErrorKind::Io,
               "cannot write package");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kernelop

// --- hostile packages: damage behind a valid checksum is an Error(Format), never a crash -------
// (found by fuzz/package_fuzzer; see scripts/fuzz)

namespace kernelop {
namespace {

// A small package whose metadata the tests below edit as text (meta.dump() is compact).
std::string hostile_base_package() {
  OpDecl decl = parse_op_json(R"({
    "op": "hostile::relu",
    "kernel_name": "relu",
    "kernel_source": "K",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
    "extras": [{"numel": "x"}],
    "geometry": {"elementwise": {"block": [256], "layout": "flat"}}
  })",
                              ".", "hostile");
  CompiledImage image;
  image.plan = complete_plan(derive_plan(decl));
  image.lowered_names = {"relu"};
  image.nvrtc_version = "13.0";
  image.images.push_back(
      ArchImage{"sm_80", "CUBIN", {ResourceUsage{16, 0, 0, 0, 0, 364}}, false, 0});
  image.images.push_back(ArchImage{"compute_90", "PTX", {}, false, 0});
  return write_package_bytes(image);
}

std::uint64_t u64_at(const std::string& bytes, std::size_t offset) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

// The sections of a package (Note [package format]).
std::vector<std::string> sections_of(const std::string& bytes) {
  std::uint32_t count = 0;
  std::memcpy(&count, bytes.data() + 12, sizeof count);
  std::vector<std::string> sections;
  for (std::uint32_t i = 0; i < count; ++i) {
    sections.push_back(bytes.substr(u64_at(bytes, 40 + 16 * i), u64_at(bytes, 48 + 16 * i)));
  }
  return sections;
}

// A package of these sections whose header (size, checksum) is right. `table` overrides the
// section table's {offset, size} entries, relative to the end of the table.
std::string package_of(const std::vector<std::string>& sections,
                       std::vector<std::pair<std::uint64_t, std::uint64_t>> table = {},
                       std::uint32_t version = 1) {
  std::uint64_t table_end = 40 + 16 * sections.size(), offset = 0;
  if (table.empty()) {
    for (const auto& s : sections) {
      table.emplace_back(offset, s.size());
      offset += s.size();
    }
  }
  std::string body;
  for (auto [at, size] : table) {
    std::uint64_t absolute = table_end + at;
    body.append(reinterpret_cast<const char*>(&absolute), 8);
    body.append(reinterpret_cast<const char*>(&size), 8);
  }
  for (const auto& s : sections) body += s;
  std::string out("KOPKG\r\n\x1a", 8);
  std::uint32_t count = static_cast<std::uint32_t>(sections.size());
  std::uint64_t size = 40 + body.size();
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(reinterpret_cast<const char*>(&count), 4);
  out.append(reinterpret_cast<const char*>(&size), 8);
  detail::Digest digest = detail::hash_bytes(body);
  out.append(reinterpret_cast<const char*>(digest.bytes.data()), 16);
  return out + body;
}

// The base package with `from` replaced by `to` in its metadata.
std::string with_metadata_edit(const std::string& from, const std::string& to) {
  std::vector<std::string> sections = sections_of(hostile_base_package());
  std::size_t at = sections[0].find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << sections[0];
  if (at != std::string::npos) sections[0].replace(at, from.size(), to);
  return package_of(sections);
}

void expect_hostile(const std::string& bytes, const std::string& needle) {
  expect_error([&] { parse_package(bytes, "hostile.kop"); }, ErrorKind::Format,
               "package hostile.kop: " + needle);
}

TEST(PackageHostile, HelpersBuildAValidPackage) {
  std::string bytes = hostile_base_package();
  EXPECT_EQ(package_of(sections_of(bytes)), bytes);
  EXPECT_EQ(parse_package(with_metadata_edit("\"K\"", "\"K2\"")).image.plan.spec.kernel_source,
            "K2");
}

// A package's spec must carry its source inline: a source_file would make loading a package read
// a file of the loading machine, named by whoever wrote the package.
TEST(PackageHostile, SourceFileIsRejected) {
  expect_hostile(with_metadata_edit("\"kernel_source\":\"K\"", "\"source_file\":\"/etc/hostname\""),
                 "metadata.spec has a source_file; a package holds its kernel source inline");
}

// get<int>() on a floating-point or out-of-range number is undefined behaviour (UBSan).
TEST(PackageHostile, IntegersAreRangeChecked) {
  expect_hostile(with_metadata_edit("[[16,", "[[1e300,"),
                 "image 0: resource usage value 1e+300 is not an integer in [-1, 2147483647]");
  expect_hostile(with_metadata_edit("[[16,", "[[-1.5,"),
                 "image 0: resource usage value -1.5 is not an integer in [-1, 2147483647]");
  expect_hostile(with_metadata_edit("[[16,", "[[2147483648,"),
                 "image 0: resource usage value 2147483648 is not an integer in [-1, 2147483647]");
  expect_hostile(with_metadata_edit("[[16,", "[[\"16\","),
                 "image 0: resource usage value \"16\" is not an integer in [-1, 2147483647]");
  expect_hostile(with_metadata_edit("\"format\":1,", "\"format\":1e300,"),
                 "metadata.format is 1e+300; expected an integer in range");
  expect_hostile(with_metadata_edit("\"format\":1,", "\"format\":-1,"),
                 "metadata.format is -1; expected an integer in range");
  expect_hostile(with_metadata_edit("\"format\":1,", "\"format\":1e999,"),
                 "metadata is not valid JSON: ");
}

// Fields that say the same thing twice must agree; JSON keys appear once (one strict parser for
// specs and packages).
TEST(PackageHostile, RedundantFieldsAndDuplicateKeysAreRejected) {
  expect_hostile(with_metadata_edit("\"kind\":\"cubin\"", "\"kind\":\"ptx\""),
                 "image 0 (sm_80) has kind 'ptx'");
  expect_hostile(with_metadata_edit("\"format\":1,", "\"format\":1,\"format\":1,"),
                 "metadata is not valid JSON: field 'format' is given twice");
}

// Printing and copying JSON recurse: metadata nesting deeper than 64 levels is rejected while
// it is parsed, before anything walks it.
TEST(PackageHostile, DeepMetadataIsRejected) {
  std::string deep = "\"x\":" + std::string(100000, '[') + std::string(100000, ']') + ",";
  expect_hostile(with_metadata_edit("{\"format\"", "{" + deep + "\"format\""),
                 "metadata is not valid JSON: nests deeper than 64 levels");
  expect_hostile(with_metadata_edit("\"spec\":{", "\"spec\":{" + deep),
                 "metadata is not valid JSON: nests deeper than 64 levels");
}

TEST(PackageHostile, DeepExpressionsInTheSpecAreRejected) {
  std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
  expect_hostile(with_metadata_edit("{\"same_as\":\"x\"}", "[\"" + deep + "\"]"),
                 "its spec is invalid: ");
  expect_error(
      [&] {
        parse_package(with_metadata_edit("{\"same_as\":\"x\"}", "[\"" + deep + "\"]"),
                      "hostile.kop");
      },
      ErrorKind::Format, "at column 257: expression nests deeper than 256 levels");
}

// Overlapping sections would let a small file name the same bytes for every image, and loading
// it copy them once per image.
TEST(PackageHostile, OverlappingSectionsAreRejected) {
  std::vector<std::string> sections = sections_of(hostile_base_package());
  ASSERT_EQ(sections.size(), 3u);
  std::uint64_t meta = sections[0].size(), cubin = sections[1].size();
  expect_hostile(package_of(sections, {{0, meta}, {meta, cubin}, {meta, cubin}}),
                 "section 2 overlaps the one before it");
  expect_hostile(package_of(sections, {{0, meta}, {0, meta}, {meta, cubin}}),
                 "section 1 overlaps the one before it");
  // Gaps are fine (the writer leaves none, but a reader need not care).
  sections[1] += "pad";
  EXPECT_NO_THROW(parse_package(
      package_of(sections, {{0, meta}, {meta, cubin}, {meta + cubin + 3, sections[2].size()}})));
}

// Format 2: what a version-1 reader would misread (an image's own shared memory, global scratch)
// round-trips, and a package without either is still written as version 1 (the golden test).
TEST(Package, LaunchSharedMemoryAndScratchRoundTripAsFormat2) {
  CompiledImage image = golden_v2().image;
  std::string bytes = write_package_bytes(image);
  EXPECT_EQ(bytes[8], 2);
  Package back = parse_package(bytes, "scratchy.kop");
  EXPECT_EQ(back.format_version, 2u);
  ASSERT_EQ(back.image.images.size(), 1u);
  const ArchImage& b = back.image.images[0];
  EXPECT_EQ(b.launch_shared, 4104);
  EXPECT_EQ(b.scratch_bytes, 256);
  EXPECT_EQ(b.scratch_align, 128);
  EXPECT_EQ(b.scratch_param, 3);
  ASSERT_TRUE(back.image.plan.spec.foreign.has_value());
  EXPECT_EQ(back.image.plan.spec.foreign->compiler, ForeignKernel::Compiler::Triton);
  // Scratch aimed at a parameter that is not a 64-bit 0 (here the numel extra) is refused.
  image.images[0].scratch_param = 2;
  expect_error([&] { parse_package(write_package_bytes(image), "bad.kop"); }, ErrorKind::Format,
               "has scratch of 256 bytes (alignment 128) in parameter 2, which the op's parameters "
               "cannot take");
  image.images[0].scratch_param = 3;
  image.images[0].scratch_align = 100;
  expect_error([&] { parse_package(write_package_bytes(image), "bad.kop"); }, ErrorKind::Format,
               "alignment 100");
}

// Tile IR bytecode (cuTile's portable image) makes a package format 7; it must be bytecode, in a
// package of format 7 or later, and say "tileir" twice (arch and kind).
TEST(Package, TileIrBytecodeImagesAreFormat7) {
  CompiledImage image = golden_v2().image;
  ArchImage tileir;
  tileir.arch = "tileir";
  tileir.data = std::string("\x7fTileIR\0\x0d\x03\0\0", 12) + "k";
  image.images.push_back(tileir);
  std::string bytes = write_package_bytes(image);
  EXPECT_EQ(bytes[8], 7);
  Package back = parse_package(bytes, "tile.kop");
  ASSERT_EQ(back.image.images.size(), 2u);
  EXPECT_TRUE(back.image.images[1].is_tileir());
  EXPECT_EQ(back.image.images[1].data, image.images[1].data);
  EXPECT_TRUE(back.image.images[1].usage.empty());
  std::vector<std::string> sections = sections_of(bytes);
  std::string meta = sections[0];
  std::size_t at = meta.find("\"format\":7");
  ASSERT_NE(at, std::string::npos) << meta;
  sections[0].replace(at, 10, "\"format\":6");
  expect_error([&] { parse_package(package_of(sections, {}, 6), "old.kop"); }, ErrorKind::Format,
               "package old.kop: image 1 has arch 'tileir' in a format 6 package");
  sections[0] = meta;
  sections[2] = std::string(1, 0x7f) + "ELF";
  expect_error([&] { parse_package(package_of(sections, {}, 7), "bad.kop"); }, ErrorKind::Format,
               "package bad.kop: image 1 (tileir) is not Tile IR bytecode");
  sections = sections_of(bytes);
  at = sections[0].find("\"kind\":\"tileir\"");
  ASSERT_NE(at, std::string::npos);
  sections[0].replace(at, 15, "\"kind\":\"cubin\"");
  expect_error([&] { parse_package(package_of(sections, {}, 7), "bad.kop"); }, ErrorKind::Format,
               "package bad.kop: image 1 (tileir) has kind 'cubin'");
  image.images[1].launch_shared = 64;  // Tile IR states no launch shared memory
  expect_error([&] { parse_package(write_package_bytes(image), "bad.kop"); }, ErrorKind::Format,
               "package bad.kop: image 1 (tileir) states launch shared memory or scratch");
  image.images[1].launch_shared = 0;
  sections = sections_of(bytes);
  at = sections[0].find("\"arch\":\"tileir\"");
  ASSERT_NE(at, std::string::npos);
  sections[0].replace(at, 15, "\"arch\":\"tile\"");
  expect_error([&] { parse_package(package_of(sections, {}, 7), "bad.kop"); }, ErrorKind::Format,
               "package bad.kop: image 1 has arch 'tile' in a format 7 package");
}

// A thread-block cluster launch makes a package format 8 (an older reader would refuse only the
// spec's unknown field); a format 7 package claiming one is refused.
TEST(Package, ClusterLaunchesAreFormat8) {
  Golden g = golden_v2();
  OpDecl decl{g.image.plan.op_name, g.image.plan.spec, "."};  // golden_v2's op, launched in pairs
  Custom& custom = std::get<Custom>(*decl.spec.geometry);
  custom.grid = {Expr::numel("x") * 2};
  custom.cluster = {2};
  CompiledImage image = g.image;
  image.plan = complete_plan(derive_plan(decl));
  std::string bytes = write_package_bytes(image);
  EXPECT_EQ(bytes[8], 8);
  Package back = parse_package(bytes, "cluster.kop");
  ASSERT_TRUE(back.image.plan.geometry.has_value());
  EXPECT_TRUE(back.image.plan.geometry->clustered());
  EXPECT_EQ(back.image.plan.geometry->cluster[0].to_string(), "2");
  std::vector<std::string> sections = sections_of(bytes);
  std::size_t at = sections[0].find("\"format\":8");
  ASSERT_NE(at, std::string::npos) << sections[0];
  sections[0].replace(at, 10, "\"format\":7");
  expect_error([&] { parse_package(package_of(sections, {}, 7), "old.kop"); }, ErrorKind::Format,
               "package old.kop: a format 7 package cannot hold a thread-block cluster launch");
  EXPECT_EQ(write_package_bytes(g.image)[8], 2) << "no cluster: the format it had";
}

// A foreign compiler's images need the package format its row of kForeignCompilers names: a CuTe
// DSL package claiming format 2 (header and metadata agreeing) is refused, never read as a
// Triton-era package.
TEST(Package, AForeignKernelInAnOlderFormatIsRefused) {
  std::vector<std::string> sections = sections_of(write_package_bytes(golden_v3().image));
  std::size_t at = sections[0].find("\"format\":3");
  ASSERT_NE(at, std::string::npos) << sections[0];
  sections[0].replace(at, 10, "\"format\":2");
  expect_error([&] { parse_package(package_of(sections, {}, 2), "old.kop"); }, ErrorKind::Format,
               "package old.kop: a format 2 package cannot hold a CuTe DSL kernel (format 3 or "
               "later)");
  EXPECT_NO_THROW(parse_package(
      package_of(sections_of(write_package_bytes(golden_v3().image)), {}, 3), "new.kop"));
}

}  // namespace
}  // namespace kernelop
