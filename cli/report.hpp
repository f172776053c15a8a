// Human-readable reports of plans and compiled images for the CLI.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kernelop/compile.hpp"

namespace kernelop::cli {

/// Schema, symbolic output shapes and dtypes, launch geometry and the argument layout.
/// The names, each once in first-seen order, a repeated one with its count: "k (x6)".
std::string distinct_text(const std::vector<std::string>& names);
void print_plan(std::ostream& out, const OpPlan& plan);
/// "  backward  op ns::name_backward: gradients of x; saves y; reads grad_y"
void print_backward(std::ostream& out, const OpPlan& forward, const OpPlan& backward);

/// Per-architecture registers, spills, shared memory and image size; for a fresh compilation
/// (`compiled`) also cache hit or miss and time.
/// The tuning tables: per device model and arch, each key with its tactic and every time.
void print_tuning(std::ostream& out, const std::vector<TuningTable>& tables);

void print_images(std::ostream& out, const CompiledImage& image, bool compiled = true);

}  // namespace kernelop::cli
