// The .kop AOT package: one file holding an op's spec (the plan is derived again on load),
// CUBIN per architecture, PTX, Tile IR bytecode,
// resource usage and a format version, checksummed. Loading one needs neither NVRTC nor the
// kernel source, and a package is untrusted input: a malformed file is an Error, never a crash.
//
// Note [package format]: little-endian.
//   [0, 8)    magic "KOPKG\r\n\x1a" (the CR LF and ^Z catch text-mode transfers)
//   [8, 12)   u32 format version (kPackageFormatVersion)
//   [12, 16)  u32 section count N (1 + number of images)
//   [16, 24)  u64 file size
//   [24, 40)  XXH3-128 of bytes [40, file size)
//   [40, 40 + 16 N)  section table: N x {u64 offset, u64 size}
//   section 0: metadata, UTF-8 JSON: format, op, schema, the spec (source inline, inferred
//              dtypes filled in), lowered names, NVRTC version and options, per-image arch and
//              resource usage; section i >= 1: the bytes of image i - 1.
// Bump kPackageFormatVersion on any change an older reader would misread; tests/golden pins
// the bytes of version 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/image.hpp"

namespace kernelop {

/// Version 2 adds what an older reader would get wrong by ignoring: images that need their own
/// dynamic shared memory ("launch_shared") and Triton kernels. Version 3 adds struct parameters
/// and CuTe DSL kernels, which a version-2 reader would refuse only as an unknown spec field.
/// Version 4 adds the backward chain (a last section holding the backward's own package).
/// Version 5 adds later launches (Note [several launches]: a section per launch, after the
/// images, each the launch's own package). Version 6 adds cuTile kernels, whose CUBINs come
/// without PTX (their parameters are checked against the CUBIN's own records), and outputs'
/// "align" (an alignment a caller's buffer is checked for), which an older reader would refuse
/// only as an unknown spec field. Version 7 adds Tile IR bytecode images ("tileir"),
/// which the driver compiles when it loads them. Version 8 adds thread-block cluster launches
/// (geometry "cluster"), which an older reader would refuse only as an unknown spec field. A
/// package is written as the oldest version that holds it (one using none of these is byte for byte
/// what version 1 always was); every version is read.
inline constexpr std::uint32_t kPackageFormatVersion = 8;

/// kernelop's version, "0.1.0" (from CMake's project(); recorded in packages as created_by).
std::string_view version();

/// A package's contents plus what only the file knows.
struct Package {
  CompiledImage image;
  /// The op's backward chain (Note [backward]): its backward's image, that one's backward's, ...
  std::vector<CompiledImage> backward;
  std::uint32_t format_version = 0;
  std::string checksum;    ///< hex of the XXH3-128 over the file's body
  std::string created_by;  ///< "kernelop 0.1.0"
  std::uint64_t file_size = 0;
};

/// Serialises a compiled image. Deterministic: the same image gives the same bytes. An op whose
/// spec declares a backward needs its backward chain (compile_backward): each image the backward
/// of the one before, all carried in the package (format 4) so that it loads for training.
std::string write_package_bytes(const CompiledImage& image,
                                std::span<const CompiledImage> backward = {});
/// Writes atomically (temporary file + rename). Throws Error(Io).
void write_package(const CompiledImage& image, const std::filesystem::path& path,
                   std::span<const CompiledImage> backward = {});

/// Parses and verifies package bytes; throws Error(Format) naming what is wrong. `origin`
/// names the package in messages.
Package parse_package(std::string_view bytes, std::string_view origin = "<memory>");
Package load_package(const std::filesystem::path& path);
/// load_package(path).image
CompiledImage read_package(const std::filesystem::path& path);

}  // namespace kernelop
