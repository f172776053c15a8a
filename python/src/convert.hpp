// What both Python extensions (the engine-neutral core, _kernelop, and the torch one,
// _kernelop_torch) read from Python: errors, compile options, launch arguments, binaries.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nanobind/nanobind.h>

#include "kernelop/kernelop.hpp"

namespace kernelop::python {

/// The override path: which parts the caller's Python functions supply (see _ops.py). The core
/// extension binds it as kernelop._kernelop.Overrides; the torch extension reads one by its
/// attributes (overrides_of), so no C++ type crosses between the two modules.
struct Overrides {
  bool has_meta_fn = false;
  bool has_eager_fn = false;
  int meta_outputs = 0;
  std::string schema;
  std::string caller_key;
  ValidateOptions validate() const { return {has_meta_fn, has_eager_fn, meta_outputs}; }
};

/// An Overrides read off a Python object with its attributes (the GIL must be held).
Overrides overrides_of(nanobind::handle h);

/// Translates kernelop::Error into the Python exception of its kind (error_class, error.hpp).
void register_error_translator();

/// Compile options for the given architectures (empty: the defaults).
CompileOptions options_for(const std::vector<std::string>& archs);

/// The field names of C++'s KernelBinary in declaration order: the attributes binaries_of reads
/// off each Python kernelop._recording.KernelBinary (a test ties both lists together).
const std::vector<std::string>& kernel_binary_fields();

/// Binaries from a sequence of Python objects with kernel_binary_fields() as attributes (the GIL
/// must be held). Throws Error(Type) naming the binary and the field that is missing or wrong.
/// `whose` follows "binary N" in messages (" of backward link 1").
std::vector<KernelBinary> binaries_of(nanobind::handle sequence, std::string_view whose = "");

/// An op's image from its binaries and its backward chain's (backward_from_binaries): `backward`
/// holds one sequence of KernelBinary per link (empty for a CUDA C++ link, compiled for `archs`).
/// Reads the Python objects holding the GIL, then builds without it.
struct ImagesFromBinaries {
  CompiledImage image;
  std::vector<CompiledImage> backward;
};
ImagesFromBinaries images_from_binaries(OpPlan plan, nanobind::handle binaries,
                                        nanobind::handle backward,
                                        const std::vector<std::string>& archs);

/// One argument of a raw launch: a tensor descriptor tuple (data_ptr, dtype name, shape,
/// strides, device) or a Python bool / int / float; `i` is its position, for messages.
RawArg raw_arg(nanobind::handle h, std::size_t i);

/// A launch's grid or block: 1 to 3 dimensions, padded with 1.
std::array<std::int64_t, 3> dims3(const std::vector<std::int64_t>& d, const char* what);

}  // namespace kernelop::python
