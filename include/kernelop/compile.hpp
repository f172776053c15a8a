// NVRTC compilation of a plan to CUBIN per architecture plus PTX, with the calling convention
// verified against the kernel's real signature in the same compilation.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/image.hpp"
#include "kernelop/plan.hpp"

namespace kernelop {

class CompileCache;

/// The default architectures: CUBIN for sm_80, sm_86, sm_89 and sm_90, and PTX for compute_90
/// so that newer GPUs can JIT the kernel (see docs/spec-format.md, "Architectures").
const std::vector<std::string>& default_archs();

struct CompileOptions {
  /// "sm_NN" -> CUBIN, "compute_NN" -> PTX. Empty: the spec's arch_override, else
  /// default_archs().
  std::vector<std::string> archs;
  std::vector<std::string> include_paths;  ///< searched after the spec's
  std::vector<std::string> defines;        ///< added to the spec's
  std::optional<bool> fast_math;           ///< overrides the spec's
  std::optional<bool> line_info;           ///< overrides the spec's
  /// nullptr: CompileCache::global(). Ignored when use_cache is false.
  CompileCache* cache = nullptr;
  bool use_cache = true;
  /// Parallel NVRTC compilations (one per architecture); 0: one per hardware thread.
  int jobs = 0;
};

/// Compiles every architecture (in parallel, through the cache). Throws Error(Compile) with the
/// op, the stage, the architecture and the full NVRTC log on a compile error, and on a
/// mismatch between the calling convention and the kernel's parameters.
CompiledImage compile(const OpPlan& plan, const CompileOptions& options = {});

/// The op's backward chain compiled (Note [backward]): its backward, that one's backward, ...;
/// empty when the spec declares none. What write_package takes with the op's own image; give it
/// the compiled image's plan (dtypes the compilation inferred are the backward's too).
std::vector<CompiledImage> compile_backward(const OpPlan& plan, const CompileOptions& options = {});

/// Machine code another compiler made (Triton): one compilation (OpPlan::programs) for one
/// architecture.
struct KernelBinary {
  int program = 0;
  /// "sm_90" (CUBIN in `data`), "compute_80" (PTX in `data`) or "tileir" (Tile IR bytecode)
  std::string arch;
  std::string data;  ///< CUBIN bytes, PTX text or Tile IR bytecode
  /// For a CUBIN: the PTX it was assembled from (its parameters are checked). For Tile IR: the
  /// disassembly of its entry (`entry @name(%arg0: tile<ptr<f32>>, ...)`), checked the same way.
  std::string ptx;
  std::string entry;  ///< the kernel's symbol
  /// Dynamic shared memory every launch needs (Triton's metadata.shared), in bytes.
  int launch_shared = 0;
  /// Global scratch memory per block (Triton's metadata.global_scratch_size and _align), passed
  /// as parameter `scratch_param`, which the spec must declare as a 64-bit extra of value 0.
  int scratch_bytes = 0;
  int scratch_align = 0;
  int scratch_param = -1;
  /// Which of the op's launches (Note [several launches], spec.hpp) it is for: 0 the op's own
  /// kernel, k its `then[k - 1]` (image_with_launches sorts binaries by it).
  int launch = 0;
};

/// An image from pre-compiled PTX (e.g. Triton's or a saved NVRTC output), skipping NVRTC: the
/// driver JIT-compiles it for any GPU at or above its `.target`. The plan's tensor dtypes must all
/// be declared (nothing can be inferred from PTX); the `.entry` named `entry` must exist and its
/// parameters must match the calling convention in number and size. Throws Error(Spec) or
/// Error(Compile) naming the op and the parameter.
CompiledImage image_from_ptx(OpPlan plan, std::string ptx, const std::string& entry);

/// The block a CUBIN's kernel `entry` must be launched with (its `.reqntid`: cuTile's kernels
/// state theirs), or nullopt when it states none or the bytes hold no such kernel. Read from the
/// CUBIN's .nv.info.<entry>, bounds-checked (the bytes are untrusted).
std::optional<std::array<int, 3>> cubin_required_block(std::string_view cubin,
                                                       std::string_view entry);

/// An image from binaries: every program must have at least one, each entry's parameters must
/// match the calling convention (the plan's args) in number and size, every tensor dtype must be
/// declared, and a config that could not launch on an architecture it was built for (threads,
/// registers, shared memory) is refused. Throws Error(Spec) or Error(Compile) naming the op, the
/// tactic and the architecture.
CompiledImage image_from_binaries(OpPlan plan, std::vector<KernelBinary> binaries);

/// The image of an op whose kernels other compilers made, with its later launches (Note [several
/// launches]): `binaries` of every launch, told apart by KernelBinary::launch; launch 0's make the
/// image (image_from_binaries), the others go to compile_launches, whose CUDA C++ launches
/// (kernelop's glue) compile with `options`. Throws Error(Spec) naming the binary when its launch
/// is not one the spec declares.
CompiledImage image_with_launches(OpPlan plan, std::vector<KernelBinary> binaries,
                                  const CompileOptions& options = {});

/// Compiles the op's later launches (Note [several launches], spec.hpp) into `image.then`, each
/// derived from the image's completed plan: CUDA C++ ones with NVRTC and `options`, another
/// compiler's from `binaries[k]` (the launch k + 1's, checked as image_from_binaries checks them;
/// give none for a CUDA C++ launch). compile() calls it with no binaries. Throws Error(Spec)
/// naming the launch when the binaries and the launches disagree.
void compile_launches(CompiledImage& image, std::vector<std::vector<KernelBinary>> binaries = {},
                      const CompileOptions& options = {});

/// The backward chain (Note [backward chain]) of an op whose kernels other compilers made:
/// `binaries[i]` are the i-th link's (its backward, that one's backward, ...), each link's image
/// made by image_with_launches (its later launches of CUDA C++, kernelop's glue, compiled with
/// `options`); a link whose kernel is CUDA C++ takes no binaries and is
/// compiled with `options`. Give the forward image's plan. Throws Error(Spec) naming the op when
/// the chain the specs declare and the links given differ in length, or a link's binaries are
/// given for a CUDA C++ kernel or missing for another compiler's.
std::vector<CompiledImage> backward_from_binaries(const OpPlan& plan,
                                                  std::vector<std::vector<KernelBinary>> binaries,
                                                  const CompileOptions& options = {});

/// The CUDA include directories passed to NVRTC by default: $CUDA_HOME/include, else
/// $CUDA_PATH/include, else the toolkit kernelop was built with; plus its cccl/ subdirectory
/// (libcu++, CUB, Thrust since CUDA 13) when present. Empty when no toolkit is found.
std::vector<std::string> cuda_include_dirs();

}  // namespace kernelop
