// The plan deriver's class, shared by its three parts: plan.cpp (the stage: configs, kernel
// instances, the schema), plan_shapes.cpp (slots, output shapes and dtypes, requirements, and the
// ranks their expressions need) and plan_args.cpp (the kernel's arguments and the launch
// geometry). Private to the library.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernelop/plan.hpp"
#include "kernelop/validate.hpp"

namespace kernelop::detail {

class Deriver {
 public:
  Deriver(const OpDecl& decl, const ValidateOptions& overrides)
      : decl_(decl), spec_(decl.spec), overrides_(overrides) {}

  OpPlan run();

 private:
  // A tunable's value as C++ text (template arguments): a number, or false/true.
  static std::string value_text(const Tunable& t, std::int64_t v);
  // The configs' values and compilations; their requires once the slots are known. An untuned op
  // has one config with no values.
  void derive_configs();
  // Note [instances and configs] in plan.cpp.
  void derive_instances();
  void derive_schema();

  // plan_shapes.cpp: slots, outputs, requirements.
  void derive_slots();
  // Declared outputs, else the meta function's: out0, out1, ...
  std::vector<std::string> output_names() const;
  Expr resolve(const Expr& e) const;
  void derive_config_requirements();
  void derive_requirements();
  RequirementPlan requirement(const Requirement& r);
  int input_ref_slot(const InputRef& ref) const;
  void require_rank(int slot, std::int64_t rank, std::string reason);
  // The ranks `e` needs whatever the inputs: a select's branches are read only when taken, so
  // their axes are checked when evaluated (`select(rank(x) >= 3, stride(x, -3), 0)` takes a
  // rank-1 x), not demanded of every call.
  void require_ranks_of(const Expr& e, const std::string& reason);
  void derive_outputs();

  // plan_args.cpp: the kernel's arguments and the launch geometry.
  // The kernel's arguments: in the order of `params` when given, else the default convention
  // (inputs as declared, then extras, then outputs).
  void derive_args();
  ArgSlot named_arg(const std::string& name) const;
  ArgSlot tensor_arg(int slot) const;
  ArgSlot scalar_arg(int slot) const;
  ArgSlot extra_arg(const Extra& extra, int index);
  void derive_geometry();
  void elementwise(const Elementwise& elementwise, LaunchGeometry& g, std::ostringstream& desc);
  void reduction(const Reduction& reduction, LaunchGeometry& g, std::ostringstream& desc);
  void custom(const Custom& c, LaunchGeometry& g, std::ostringstream& desc);
  void finish_geometry(LaunchGeometry& g, std::ostringstream& desc);

  const OpDecl& decl_;
  const KernelSpec& spec_;
  ValidateOptions overrides_;
  OpPlan plan_;
};

}  // namespace kernelop::detail
