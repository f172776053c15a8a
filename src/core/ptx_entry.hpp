// A PTX .entry's parameters, checked against a plan's calling convention: shared by images
// from pre-compiled PTX (ptx_op) and from binaries another compiler made (Triton).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelop/error.hpp"
#include "kernelop/plan.hpp"

namespace kernelop::detail {

/// The PTX types of the parameters of `.entry entry(...)` (".u64", ".f32", ...), in order;
/// nullopt when the PTX has no such entry.
std::optional<std::vector<std::string>> ptx_entry_param_types(std::string_view ptx,
                                                              std::string_view entry);

/// Throws (through `fail`, which starts the message) unless the parameters match the plan's
/// arguments in number and size.
void check_entry_params(const OpPlan& plan, const std::vector<std::string>& types,
                        const std::function<ErrorStream(ErrorKind)>& fail);

/// Throws unless every tensor of the plan has a declared dtype (nothing can be inferred from
/// `from`, e.g. "PTX").
void check_declared_dtypes(const OpPlan& plan, const std::function<ErrorStream(ErrorKind)>& fail,
                           std::string_view from);

/// No inputs were declared: the .entry's parameters (`types`) become the plan's argument list
/// for raw launches. PTX does not type pointers, so 64-bit integers are taken as pointers.
void adopt_ptx_params(OpPlan& plan, const std::vector<std::string>& types,
                      const std::function<ErrorStream(ErrorKind)>& fail);

/// One parameter of a Tile IR entry as its disassembly writes it: `tile<ptr<f32>>` is a pointer
/// to f32, `tile<i32>` a 32-bit integer.
struct TileIrParam {
  std::string text;  ///< "tile<ptr<f32>>"
  bool pointer = false;
  std::string element;           ///< "f32", "bf16", "i64" (the pointee's for a pointer)
  std::string ptx_type() const;  ///< as ptx_entry_param_types would give it (".u64" for a pointer)
};

/// The parameters of `entry @entry(%arg0: tile<...>, ...)` in Tile IR text (cuTile's
/// disassembly), in order; nullopt, with the reason in `why`, when the text has no such entry or a
/// parameter of a type kernelop does not pass.
std::optional<std::vector<TileIrParam>> tileir_entry_params(std::string_view text,
                                                            std::string_view entry,
                                                            std::string* why);

/// Throws (through `fail`) unless the parameters match the plan's arguments as
/// check_entry_params checks PTX, and besides: a tensor as a pointer to its dtype's width and kind
/// (float or integer), a scalar as a float or an integer as declared.
void check_tileir_params(const OpPlan& plan, const std::vector<TileIrParam>& params,
                         const std::function<ErrorStream(ErrorKind)>& fail);

/// The PTX's `.target` ("sm_90a"), or "" when it has none.
std::string ptx_target(std::string_view ptx);

/// Whether parameter `param` can receive a scratch buffer the launch allocates: a 64-bit extra the
/// spec declares as the constant 0 (Triton's trailing scratch pointers), and `align` a power of
/// two from 1 to 4096.
bool scratch_param_ok(const OpPlan& plan, int param, int align);

}  // namespace kernelop::detail
