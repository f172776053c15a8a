// Plan and image reports.
#include "report.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace kernelop::cli {
namespace {

std::string size_text(std::size_t bytes) {
  std::ostringstream s;
  if (bytes < 1024) {
    s << bytes << " B";
  } else {
    s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / 1024.0 << " KiB";
  }
  return s.str();
}

std::string exprs_text(const std::array<Expr, 3>& exprs) {
  return "[" + exprs[0].to_string() + ", " + exprs[1].to_string() + ", " + exprs[2].to_string() +
         "]";
}

std::string arg_kind(ArgSlot::Kind kind) {
  switch (kind) {
    case ArgSlot::Kind::TensorInput:
      return "tensor input";
    case ArgSlot::Kind::ScalarInput:
      return "scalar input";
    case ArgSlot::Kind::ExtraValue:
      return "extra";
    case ArgSlot::Kind::Output:
      return "output";
  }
  return "";
}

}  // namespace

void print_backward(std::ostream& out, const OpPlan& forward, const OpPlan& backward) {
  BackwardLink link = link_backward(forward, backward);
  std::vector<std::string> grads, saved, incoming;
  for (int d : link.differentiable) {
    auto [is_tensor, slot] = forward.input_order[static_cast<std::size_t>(d)];
    grads.push_back(forward.tensors[static_cast<std::size_t>(slot)].name);
  }
  auto output_name = [&](int o) {
    return forward
        .tensors[static_cast<std::size_t>(forward.outputs[static_cast<std::size_t>(o)].slot)]
        .name;
  };
  for (const BackwardLink::Source& s : link.sources) {
    auto i = static_cast<std::size_t>(s.index);
    switch (s.kind) {
      case BackwardLink::Source::Kind::ForwardInput: {
        auto [is_tensor, slot] = forward.input_order[i];
        saved.push_back(is_tensor ? forward.tensors[static_cast<std::size_t>(slot)].name
                                  : forward.scalars[static_cast<std::size_t>(slot)].name);
        break;
      }
      case BackwardLink::Source::Kind::ForwardOutput:
        saved.push_back(output_name(s.index));
        break;
      case BackwardLink::Source::Kind::Grad:
        incoming.push_back("grad_" + output_name(s.index));
        break;
      case BackwardLink::Source::Kind::ResultGrad:  // a written input's new value
        incoming.push_back(
            "grad_" + forward.tensors[static_cast<std::size_t>(forward.input_order[i].slot)].name);
        break;
    }
  }
  auto joined = [](const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
    return text;
  };
  out << "  backward  op " << backward.op_name << ": gradients of " << joined(grads) << "; saves "
      << (saved.empty() ? "nothing" : joined(saved)) << "; reads " << joined(incoming) << "\n";
}

std::string distinct_text(const std::vector<std::string>& names) {
  // In first-seen order; a name repeated (one per config of a foreign kernel) once, counted.
  std::vector<std::pair<std::string, int>> seen;
  for (const std::string& n : names) {
    auto at = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == n; });
    if (at == seen.end()) {
      seen.emplace_back(n, 1);
    } else {
      ++at->second;
    }
  }
  std::string text;
  for (const auto& [name, count] : seen) {
    text += (text.empty() ? "" : ", ") + name;
    if (count > 1) text += " (x" + std::to_string(count) + ")";
  }
  return text;
}

void print_plan(std::ostream& out, const OpPlan& plan) {
  out << "  schema    " << plan.qualified_schema() << "\n";
  std::vector<std::string> names;
  for (const KernelInstance& k : plan.instances) names.push_back(k.name_expression);
  out << "  kernel    " << distinct_text(names) << "\n";
  for (const auto& slot : plan.tensors) {
    if (slot.is_output || !slot.mutated) continue;
    out << "  mutates   " << slot.name << "\n";
  }
  for (const auto& o : plan.outputs) {
    const TensorSlot& t = plan.tensors[static_cast<std::size_t>(o.slot)];
    out << (o.scratch ? "  scratch   " : "  output    ") << t.name << ": "
        << shape_rule_text(plan, o.shape) << "  dtype "
        << (t.dtype ? dtype_decl_text(*t.dtype) : "?");
    if (o.dtype_from >= 0)
      out << " (from " << plan.tensors[static_cast<std::size_t>(o.dtype_from)].name << ")";
    // Note [initialised outputs]: what the runtime writes into it before each launch.
    if (o.fill) out << "  init fill " << o.fill->value;
    if (o.clone_slot >= 0)
      out << "  init clone of " << plan.tensors[static_cast<std::size_t>(o.clone_slot)].name;
    // Note [returned views]: how the op returns what its launches write.
    if (!o.permute.empty()) {
      out << "  returned as permute(";
      for (std::size_t k = 0; k < o.permute.size(); ++k) out << (k ? ", " : "") << o.permute[k];
      out << ")";
    }
    // OutputDecl::align: checked at launch for a caller's buffer.
    if (o.align > 1) out << "  aligned to " << o.align << " bytes (at launch: data pointer)";
    out << "\n";
  }
  // Note [several launches]: what runs after the op's kernel, in order.
  for (std::size_t k = 0; k < plan.spec.then.size(); ++k) {
    const LaunchStep& step = plan.spec.then[k];
    out << "  then      " << launch_decl(plan, k).op_name << ": kernel " << step.spec.kernel_name;
    for (const auto& [own, op_tensor] : step.from) out << ", " << own << " <- " << op_tensor;
    out << "\n";
  }
  if (plan.geometry) {
    const LaunchGeometry& g = *plan.geometry;
    out << "  geometry  " << g.description << "\n";
    out << "            grid  = " << exprs_text(g.grid) << "\n";
    out << "            block = " << exprs_text(g.block)
        << "  shared_mem = " << g.shared_mem.to_string() << "\n";
  }
  for (const auto& r : plan.rank_requirements) {
    out << "  requires  rank(" << plan.tensors[static_cast<std::size_t>(r.slot)].name
        << ") >= " << r.min_rank << " (" << r.reason << ")\n";
  }
  for (const auto& r : plan.requirements) {
    out << "  requires  " << r.text << (r.reads_pointers ? "  (at launch: data pointers)" : "")
        << "\n";
  }
  if (plan.is_tuned()) {
    out << "  tactics   " << plan.configs.size() << " (tunables:";
    for (const Tunable& t : plan.tunables) {
      out << " " << t.name << (t.define ? " (-D)" : "") << (t.boolean ? " (bool)" : "");
    }
    out << ")\n";
    for (std::size_t c = 0; c < plan.configs.size(); ++c) {
      const ConfigPlan& config = plan.configs[c];
      out << "            " << std::setw(3) << c << "  " << config.text;
      for (std::size_t r = 0; r < config.requirements.size(); ++r) {
        out << (r ? ", " : "  requires ") << config.requirements[r].text;
      }
      out << "\n";
    }
    out << "  tuning key ";
    if (plan.tuning_key.empty()) out << "every dim of every tensor input";
    for (std::size_t k = 0; k < plan.tuning_key.size(); ++k) {
      out << (k ? ", " : "") << plan.tuning_key[k].to_string();
    }
    out << " (each rounded up to a power of 2)\n";
  }
  for (const auto& t : plan.tensors) {
    if (t.strided) out << "  strided   " << t.name << " (passed as it is, with its strides)\n";
  }
  out << "  arguments";
  std::vector<KernelParam> params = plan.kernel_params();
  for (std::size_t k = 0, i = 0; k < params.size(); ++k) {
    const KernelParam& param = params[k];
    if (param.is_struct) {
      out << (i ? "           " : "") << " " << std::setw(2) << k << "  struct of " << param.size
          << " bytes, aligned to " << param.align << ":\n";
    }
    for (int f = 0; f < param.count; ++f, ++i) {
      const ArgSlot& a = plan.args[i];
      std::string decl = plan.c_type(a) + " " + a.name;
      if (param.is_struct) {
        std::size_t s = 0;
        while (plan.structs[s].first != param.first) ++s;
        out << "               +" << std::left << std::setw(4)
            << plan.structs[s].offsets[static_cast<std::size_t>(f)] << std::setw(26) << decl
            << std::right << " " << arg_kind(a.kind) << "\n";
        continue;
      }
      out << (i ? "           " : "") << " " << std::setw(2) << k << "  " << std::left
          << std::setw(28) << decl << std::right << " " << arg_kind(a.kind) << "\n";
    }
  }
}

void print_tuning(std::ostream& out, const std::vector<TuningTable>& tables) {
  for (const TuningTable& t : tables) {
    out << "  tuning    " << t.device << " (" << t.arch << "), kernelop " << t.version << ": "
        << t.entries.size() << " key(s)\n";
    for (const TuningEntry& e : t.entries) {
      out << "            " << e.text << " -> tactic " << e.config << " ("
          << (static_cast<std::size_t>(e.config) < t.configs.size()
                  ? t.configs[static_cast<std::size_t>(e.config)]
                  : "?")
          << ");";
      for (std::size_t c = 0; c < e.times_ms.size(); ++c) {
        if (e.times_ms[c] < 0) continue;
        out << " [" << c << "] " << std::fixed << std::setprecision(4) << e.times_ms[c] << " ms";
      }
      out << "\n";
    }
  }
}

void print_images(std::ostream& out, const CompiledImage& image, bool compiled) {
  out << "  images    " << std::left << std::setw(12) << "arch" << std::setw(7) << "kind"
      << std::setw(6) << "regs" << std::setw(13) << "spill st/ld" << std::setw(7) << "smem"
      << std::setw(11) << "size" << (compiled ? "source" : "") << std::right << "\n";
  int hits = 0;
  for (const ArchImage& a : image.images) {
    hits += a.cache_hit ? 1 : 0;
    std::vector<int> members = image.plan.instances_of(a.program);
    for (std::size_t inst = 0; inst < std::max<std::size_t>(1, a.usage.size()); ++inst) {
      out << "            " << std::left << std::setw(12) << a.arch << std::setw(7) << a.kind();
      if (inst < a.usage.size()) {
        const ResourceUsage& u = a.usage[inst];
        out << std::setw(6) << u.registers << std::setw(13)
            << (u.spill_stores < 0
                    ? std::string("?/?")
                    : std::to_string(u.spill_stores) + "/" + std::to_string(u.spill_loads))
            << std::setw(7)
            << (u.static_shared < 0 ? std::string("?") : std::to_string(u.static_shared));
      } else {
        out << std::setw(6) << "-" << std::setw(13) << "-" << std::setw(7) << "-";
      }
      std::ostringstream src;
      if (compiled) {
        src << (a.cache_hit ? "cache hit " : "compiled  ") << std::fixed << std::setprecision(1)
            << a.compile_ms << " ms";
      }
      out << std::setw(11) << size_text(a.data.size()) << src.str();
      if (inst < a.usage.size() && (a.usage.size() > 1 || image.plan.is_tuned())) {
        const KernelInstance& k = image.plan.instances[static_cast<std::size_t>(members[inst])];
        out << "  " << k.name_expression;
        if (image.plan.is_tuned()) {
          out << "  tactic " << k.config << " ("
              << image.plan.configs[static_cast<std::size_t>(k.config)].text << ")";
        }
      }
      out << std::right << "\n";
    }
  }
  if (!compiled) return;
  out << "  total     " << std::fixed << std::setprecision(1) << image.total_ms << " ms, "
      << image.images.size() << " images, " << hits << " from the cache"
      << (image.cache_bypassed ? " (persistent cache bypassed: see the warning)" : "") << "\n";
  if (!image.log.empty()) out << "  warnings\n" << image.log << "\n";
}

}  // namespace kernelop::cli
