// The prebuilt-image factories (Note [kernel sources]): images from pre-compiled PTX and from
// machine code another compiler made (Triton, CuTe DSL), checked as hostile input, then held like
// any NVRTC image.
#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include "compile/config_launch.hpp"
#include "compile/cubin_info.hpp"
#include "core/arch.hpp"
#include "core/ptx_entry.hpp"
#include "core/words.hpp"
#include "kernelop/compile.hpp"
#include "kernelop/launch_limits.hpp"

namespace kernelop {

CompiledImage image_from_ptx(OpPlan plan, std::string ptx, const std::string& entry) {
  std::function<detail::ErrorStream(ErrorKind)> fail = [&](ErrorKind kind) {
    detail::ErrorStream s(kind);
    s << "op " << plan.op_name << ": PTX entry '" << entry << "': ";
    return s;
  };
  detail::check_declared_dtypes(plan, fail, "PTX");
  if (plan.instances.size() != 1) {
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "PTX holds one instantiation; type_params are not supported";
  }
  std::string target = detail::ptx_target(ptx);
  if (target.empty()) KERNELOP_RAISE(fail(ErrorKind::Spec)) << "the PTX has no .target line";
  if (target.rfind("sm_", 0) != 0)
    KERNELOP_RAISE(fail(ErrorKind::Spec)) << ".target is '" << target << "'";
  auto types = detail::ptx_entry_param_types(ptx, entry);
  if (!types) {
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "no such .entry in the PTX (kernel names are the mangled "
           "symbols; extern \"C\" kernels keep their names)";
  }
  if (plan.args_from_kernel) detail::adopt_ptx_params(plan, *types, fail);
  detail::check_entry_params(plan, *types, fail);
  CompiledImage image;
  image.lowered_names = {entry};
  image.images.push_back(ArchImage{"compute_" + target.substr(3), std::move(ptx), {}, false, 0});
  image.plan = complete_plan(std::move(plan));  // Note [plan stages]
  return image;
}

std::optional<std::array<int, 3>> cubin_required_block(std::string_view cubin,
                                                       std::string_view entry) {
  std::optional<detail::CubinEntry> e = detail::cubin_entry(cubin, entry);
  return e ? e->required_block : std::nullopt;
}

namespace {

// Tile IR bytecode (cuTile's, loaded by drivers that compile it): its header, its entry by name,
// and the entry's parameters as the disassembly given with it (KernelBinary::ptx) states them.
// The bytecode itself is not disassembled here (that needs cuTile's tileirdisasm): the front end
// gives the disassembly of these very bytes, and the entry's name must occur in them.
void check_tileir_binary(const OpPlan& plan, const KernelBinary& b,
                         const std::function<detail::ErrorStream(ErrorKind)>& at) {
  if (!is_tileir_bytecode(b.data)) {
    KERNELOP_RAISE(at(ErrorKind::Spec))
        << "the data is not Tile IR bytecode (no \\x7fTileIR header)";
  }
  if (b.data.find(b.entry) == std::string::npos) {
    KERNELOP_RAISE(at(ErrorKind::Spec)) << "the bytecode does not name the entry";
  }
  if (b.launch_shared != 0 || b.scratch_bytes != 0) {
    KERNELOP_RAISE(at(ErrorKind::Spec))
        << "Tile IR states no launch shared memory or scratch (given " << b.launch_shared << " and "
        << b.scratch_bytes << " bytes)";
  }
  std::string why;
  auto params = detail::tileir_entry_params(b.ptx, b.entry, &why);
  if (!params) KERNELOP_RAISE(at(ErrorKind::Compile)) << why;
  detail::check_tileir_params(plan, *params, at);
}

}  // namespace

CompiledImage image_from_binaries(OpPlan plan, std::vector<KernelBinary> binaries) {
  const std::string op = plan.op_name;
  std::function<detail::ErrorStream(ErrorKind)> fail = [&](ErrorKind kind) {
    detail::ErrorStream s(kind);
    s << "op " << op << ": ";
    return s;
  };
  detail::check_declared_dtypes(plan, fail, "machine code");
  if (plan.args_from_kernel) {
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "the kernel's parameters must be declared (inputs, outputs, params)";
  }
  if (plan.dtype_combinations() != 1) {
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "compiled machine code holds one instantiation per config; type_params are not "
           "supported";
  }
  const int programs = static_cast<int>(plan.programs.size());
  std::vector<std::string> entries(static_cast<std::size_t>(programs));
  std::set<std::pair<int, std::string>> seen;
  CompiledImage image;
  for (std::size_t i = 0; i < binaries.size(); ++i) {
    KernelBinary& b = binaries[i];
    auto at = [&](ErrorKind kind) {
      detail::ErrorStream s = fail(kind);
      s << "binary " << i << " (program " << b.program << ", " << b.arch << ", entry '" << b.entry
        << "'): ";
      return s;
    };
    if (b.launch != 0) {
      KERNELOP_RAISE(at(ErrorKind::Spec))
          << "it is for launch " << b.launch << " (a later launch's, Note [several launches]); "
          << "image_from_binaries takes the op's own kernel's (launch 0): image_with_launches "
             "takes every launch's";
    }
    detail::ArchId id;
    const bool tileir = b.arch == kTileIrArch;
    if (!tileir && !detail::parse_arch(b.arch, &id)) {
      KERNELOP_RAISE(at(ErrorKind::Spec))
          << "architecture '" << b.arch << "' is invalid; expected 'sm_NN', 'compute_NN' or '"
          << kTileIrArch << "'";
    }
    if (b.program < 0 || b.program >= programs) {
      KERNELOP_RAISE(at(ErrorKind::Spec))
          << "program " << b.program << " does not exist (the op has " << programs << ")";
    }
    if (!seen.insert({b.program, b.arch}).second) {
      KERNELOP_RAISE(at(ErrorKind::Spec)) << "a second binary for this program and architecture";
    }
    if (!detail::is_identifier(b.entry)) {
      KERNELOP_RAISE(at(ErrorKind::Spec)) << "the entry is not a kernel symbol";
    }
    if (b.data.empty()) KERNELOP_RAISE(at(ErrorKind::Spec)) << "no machine code";
    if (b.launch_shared < 0) {
      KERNELOP_RAISE(at(ErrorKind::Spec)) << "launch_shared is " << b.launch_shared;
    }
    if (b.scratch_bytes < 0 ||
        (b.scratch_bytes > 0 &&
         !detail::scratch_param_ok(plan, b.scratch_param, b.scratch_align))) {
      KERNELOP_RAISE(at(ErrorKind::Spec))
          << "scratch of " << b.scratch_bytes << " bytes per block (alignment " << b.scratch_align
          << ") in parameter " << b.scratch_param
          << ": expected a size >= 0, a power-of-two alignment up to 4096, and a parameter the "
             "spec "
             "declares as a 64-bit extra of value 0";
    }
    std::string& entry = entries[static_cast<std::size_t>(b.program)];
    if (!entry.empty() && entry != b.entry) {
      KERNELOP_RAISE(at(ErrorKind::Spec))
          << "another architecture of this program names its kernel '" << entry << "'";
    }
    entry = b.entry;
    if (tileir) {
      check_tileir_binary(plan, b, at);
      ArchImage a;
      a.arch = b.arch;
      a.program = b.program;
      a.data = std::move(b.data);
      image.images.push_back(std::move(a));
      continue;
    }
    const std::string& ptx = id.ptx ? b.data : b.ptx;
    // A PTX image runs on the GPUs its .target allows: "compute_90" must hold sm_90 PTX, and
    // arch-specific PTX (sm_90a) must say so ("compute_90a"), or newer GPUs would fail to JIT it.
    if (id.ptx && detail::ptx_target(ptx) != "sm_" + b.arch.substr(8)) {
      KERNELOP_RAISE(at(ErrorKind::Spec)) << "the PTX's .target is '" << detail::ptx_target(ptx)
                                          << "', not sm_" << b.arch.substr(8);
    }
    // A CUBIN states its parameters and required block (.nv.info.<entry>); its PTX, where the
    // compiler gives it, states their types too. Machine code without PTX (cuTile's) is checked
    // against the CUBIN's own records.
    std::optional<detail::CubinEntry> cubin;
    if (!id.ptx) cubin = detail::cubin_entry(b.data, b.entry);
    std::optional<std::vector<std::string>> types;
    if (!ptx.empty()) {
      types = detail::ptx_entry_param_types(ptx, b.entry);
      if (!types) KERNELOP_RAISE(at(ErrorKind::Compile)) << "the PTX has no such .entry";
    } else if (cubin) {
      types = cubin->param_types;
    } else {
      KERNELOP_RAISE(at(ErrorKind::Compile))
          << (id.ptx ? "no PTX"
                     : "no PTX, and the CUBIN has no readable parameter records for the kernel "
                       "(.nv.info.<entry>)")
          << " to check its parameters against";
    }
    detail::check_entry_params(plan, *types, [&](ErrorKind kind) { return at(kind); });
    if (cubin && cubin->required_block) {
      detail::check_required_block(plan, b.program, id.number, *cubin->required_block,
                                   [&](ErrorKind kind) { return at(kind); });
    }
    ArchImage a;
    a.arch = b.arch;
    a.program = b.program;
    a.launch_shared = b.launch_shared;
    if (b.scratch_bytes > 0) {
      a.scratch_bytes = b.scratch_bytes;
      a.scratch_align = b.scratch_align;
      a.scratch_param = b.scratch_param;
    }
    if (!id.ptx) {
      auto usage = detail::cubin_resource_usage(b.data, b.entry);
      if (!usage) {
        KERNELOP_RAISE(at(ErrorKind::Compile))
            << "the CUBIN is not a 64-bit ELF holding the kernel '" << b.entry << "'";
      }
      a.usage.assign(plan.instances_of(b.program).size(), *usage);
    }
    a.data = std::move(b.data);
    image.images.push_back(std::move(a));
  }
  for (int p = 0; p < programs; ++p) {
    if (!entries[static_cast<std::size_t>(p)].empty()) continue;
    std::vector<std::string> tactics;
    for (std::size_t c = 0; c < plan.configs.size(); ++c) {
      if (plan.configs[c].program == p)
        tactics.push_back(std::to_string(c) + " (" + plan.configs[c].text + ")");
    }
    KERNELOP_RAISE(fail(ErrorKind::Spec))
        << "no binary for program " << p << ", which tactic " << detail::join(tactics) << " runs";
  }
  std::stable_sort(image.images.begin(), image.images.end(),
                   [](const ArchImage& x, const ArchImage& y) { return x.program < y.program; });
  for (const KernelInstance& inst : plan.instances) {
    int program = plan.configs[static_cast<std::size_t>(inst.config)].program;
    image.lowered_names.push_back(entries[static_cast<std::size_t>(program)]);
  }
  image.plan = complete_plan(std::move(plan));  // Note [plan stages]
  detail::check_configs_launch(image);
  return image;
}

}  // namespace kernelop
