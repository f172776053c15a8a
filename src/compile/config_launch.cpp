// Configs that cannot launch are refused when the image is made, not at their first launch.
#include "compile/config_launch.hpp"

#include <algorithm>
#include <optional>

#include "core/arch.hpp"
#include "core/words.hpp"
#include "kernelop/launch_limits.hpp"

namespace kernelop::detail {
namespace {

// False when one of the config's requires that read only arch() and tunables is false on
// architecture `arch`: the config never runs there, whatever its resources.
bool may_run_on(const ConfigPlan& config, int arch) {
  struct Env {
    const ConfigPlan& c;
    int arch;
    std::int64_t leaf(const ExprNode& n) const {
      return n.op == ExprOp::Arch ? arch : c.values[static_cast<std::size_t>(n.slot)];
    }
  };
  for (const RequirementPlan& r : config.requirements) {
    bool device_only = true;
    r.condition.for_each_leaf([&](const Expr& leaf) {
      device_only = device_only && (leaf.op() == ExprOp::Arch || leaf.op() == ExprOp::Tunable);
    });
    try {
      if (device_only && evaluate<std::int64_t>(r.condition, Env{config, arch}) == 0) return false;
    } catch (const Error&) {  // an arithmetic error: decided at launch
    }
  }
  return true;
}

// The value of `e` under `config` when it reads nothing but tunables (and arch(), when `arch`
// says which architecture: a block cuTile's compiler chose per architecture).
std::optional<std::int64_t> constant_under(const Expr& e, const ConfigPlan& config,
                                           std::optional<int> arch = std::nullopt) {
  bool ok = true;
  e.for_each_leaf([&](const Expr& leaf) {
    ok = ok && (leaf.op() == ExprOp::Tunable || (arch && leaf.op() == ExprOp::Arch));
  });
  if (!ok) return std::nullopt;
  struct Env {
    const ConfigPlan& c;
    int arch;
    std::int64_t leaf(const ExprNode& n) const {
      return n.op == ExprOp::Arch ? arch : c.values[static_cast<std::size_t>(n.slot)];
    }
  };
  try {
    return evaluate<std::int64_t>(e, Env{config, arch.value_or(0)});
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

void check_required_block(const OpPlan& plan, int program, int arch,
                          const std::array<int, 3>& required,
                          const std::function<ErrorStream(ErrorKind)>& fail) {
  if (!plan.geometry) return;
  for (std::size_t c = 0; c < plan.configs.size(); ++c) {
    const ConfigPlan& config = plan.configs[c];
    if (config.program != program) continue;
    std::vector<std::int64_t> block;
    for (const Expr& b : plan.geometry->block) {
      auto v = constant_under(b, config, arch);
      if (!v) break;  // decided per call: the driver's error names the launch
      block.push_back(*v);
    }
    if (block.size() != plan.geometry->block.size()) continue;
    block.resize(3, 1);
    if (block[0] != required[0] || block[1] != required[1] || block[2] != required[2]) {
      KERNELOP_RAISE(
          fail(ErrorKind::Compile)
          << "tactic " << c << " (" << config.text << ") launches a block of "
          << detail::int_list_text(block) << " but the kernel requires "
          << detail::int_list_text(std::vector<std::int64_t>{required[0], required[1], required[2]})
          << " (.reqntid in the CUBIN)");
    }
  }
}

void check_configs_launch(const CompiledImage& image) {
  const OpPlan& plan = image.plan;
  if (!plan.geometry || (!plan.is_tuned() && !plan.spec.foreign)) return;
  for (std::size_t c = 0; c < plan.configs.size(); ++c) {
    const ConfigPlan& config = plan.configs[c];
    auto fail = [&]() {
      detail::ErrorStream e(ErrorKind::Compile);
      e << "op " << plan.op_name << ": tactic " << c << " (" << config.text << ") cannot launch: ";
      return e;
    };
    std::vector<std::int64_t> block;
    bool known = true;
    for (const Expr& b : plan.geometry->block) {
      auto v = constant_under(b, config);
      known = known && v.has_value();
      block.push_back(v.value_or(1));
    }
    if (!known) continue;
    if (std::string why = block_problem(block); !why.empty()) {
      KERNELOP_RAISE(fail() << "its block " << detail::int_list_text(block) << " " << why);
    }
    std::int64_t threads = block[0] * block[1] * block[2];
    std::int64_t smem = constant_under(plan.geometry->shared_mem, config).value_or(0);
    for (const ArchImage& a : image.images) {
      if (!a.is_cubin() || a.program != config.program) continue;
      detail::ArchId id;
      detail::parse_arch(a.arch, &id);
      if (!may_run_on(config, id.number)) continue;  // e.g. "arch() >= 90" on sm_80
      for (int inst = 0; inst < static_cast<int>(plan.instances.size()); ++inst) {
        if (plan.instances[static_cast<std::size_t>(inst)].config != static_cast<int>(c)) continue;
        const ResourceUsage* u = image.usage(a.arch, inst);
        if (u && static_cast<std::int64_t>(u->registers) * threads > kRegistersPerSm) {
          KERNELOP_RAISE(fail() << "on " << a.arch << " a block of " << threads << " threads x "
                                << u->registers << " registers needs " << u->registers * threads
                                << " registers; an SM has " << kRegistersPerSm);
        }
        std::int64_t shared = smem + (u ? std::max(0, u->static_shared) : 0) + a.launch_shared;
        if (shared > max_shared_per_block(id.number)) {
          KERNELOP_RAISE(fail() << "on " << a.arch << " it needs " << shared
                                << " bytes of shared memory per block; a block may use "
                                << max_shared_per_block(id.number));
        }
      }
    }
  }
}

}  // namespace kernelop::detail
