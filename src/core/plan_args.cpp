// The plan deriver, the launch: the kernel's arguments (tensors, scalars, extras, struct
// parameters) and the launch geometry, resolved to slots.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <sstream>

#include "core/deriver.hpp"
#include "core/words.hpp"

namespace kernelop::detail {

void Deriver::derive_args() {
  int extras = 0;
  if (spec_.params) {
    for (const Param& param : *spec_.params) {
      std::visit(Overloaded{
                     [&](const ParamName& n) { plan_.args.push_back(named_arg(n.name)); },
                     [&](const Extra& e) { plan_.args.push_back(extra_arg(e, extras++)); },
                     [&](const ParamStruct& st) {
                       StructParam sp;
                       sp.first = static_cast<int>(plan_.args.size());
                       for (const ParamField& field : st.fields) {
                         plan_.args.push_back(std::visit(
                             Overloaded{[&](const ParamName& n) { return named_arg(n.name); },
                                        [&](const Extra& e) { return extra_arg(e, extras++); }},
                             field));
                         int size = arg_size(plan_.args.back());
                         sp.size = (sp.size + size - 1) / size * size;
                         sp.offsets.push_back(sp.size);
                         sp.size += size;
                         sp.align = std::max(sp.align, size);
                       }
                       sp.size = (sp.size + sp.align - 1) / sp.align * sp.align;
                       plan_.structs.push_back(std::move(sp));
                     },
                 },
                 param);
    }
    return;
  }
  for (auto [is_tensor, slot] : plan_.input_order)
    plan_.args.push_back(is_tensor ? tensor_arg(slot) : scalar_arg(slot));
  for (const Extra& e : spec_.extras) plan_.args.push_back(extra_arg(e, extras++));
  for (const auto& out : plan_.outputs) plan_.args.push_back(tensor_arg(out.slot));
}

ArgSlot Deriver::named_arg(const std::string& name) const {
  int t = plan_.tensor_slot(name);
  return t >= 0 ? tensor_arg(t) : scalar_arg(plan_.scalar_slot(name));
}

ArgSlot Deriver::tensor_arg(int slot) const {
  const TensorSlot& t = plan_.tensors[static_cast<std::size_t>(slot)];
  ArgSlot arg;
  arg.kind = t.is_output ? ArgSlot::Kind::Output : ArgSlot::Kind::TensorInput;
  arg.name = t.name;
  arg.index = slot;
  arg.is_const = !t.is_output && !t.mutated;
  return arg;
}

ArgSlot Deriver::scalar_arg(int slot) const {
  KERNELOP_INTERNAL_CHECK(slot >= 0) << "(a parameter names no input; validate() admits none)";
  const ScalarSlot& s = plan_.scalars[static_cast<std::size_t>(slot)];
  ArgSlot arg;
  arg.kind = ArgSlot::Kind::ScalarInput;
  arg.name = s.name;
  arg.index = slot;
  arg.value_type = s.type;
  return arg;
}

ArgSlot Deriver::extra_arg(const Extra& extra, int index) {
  if (const auto* f = std::get_if<ExtraFloat>(&extra)) {
    // Note [float extras]: the value is the constant's float32 bit pattern, an int32 expression,
    // which packing writes as its 4 bytes (value_type Float); every other path (the memo, the
    // raw launch, packages) treats it as any constant extra.
    auto bits = std::bit_cast<std::int32_t>(static_cast<float>(f->value));
    ArgSlot arg;
    arg.kind = ArgSlot::Kind::ExtraValue;
    arg.index = index;
    arg.value = Expr(static_cast<std::int64_t>(bits));
    std::ostringstream text;
    text << static_cast<float>(f->value) << "f";
    arg.name = text.str();
    arg.value_type = ScalarType::Float;
    return arg;
  }
  Expr value = 0;
  bool int64 = false;
  std::visit(Overloaded{
                 [&](const Numel& e) { value = Expr::numel(e.input), int64 = e.int64; },
                 [&](const DimSize& e) { value = Expr::dim(e.input, e.axis), int64 = e.int64; },
                 [&](const ExtraExpr& e) { value = e.value, int64 = e.int64; },
                 [&](const ExtraFloat&) {},
             },
             extra);
  ArgSlot arg;
  arg.kind = ArgSlot::Kind::ExtraValue;
  arg.index = index;
  arg.value = resolve(value);
  arg.name = value.to_string();
  arg.value_type = int64 ? ScalarType::Int64 : ScalarType::Int;
  require_ranks_of(*arg.value, "extra " + std::to_string(index) + " '" + arg.name + "'");
  return arg;
}

void Deriver::derive_geometry() {
  if (!spec_.geometry) return;
  LaunchGeometry g;
  std::ostringstream desc;
  std::visit(Overloaded{[&](const Elementwise& e) { elementwise(e, g, desc); },
                        [&](const Reduction& r) { reduction(r, g, desc); },
                        [&](const Custom& c) { custom(c, g, desc); }},
             *spec_.geometry);
  finish_geometry(g, desc);
}

void Deriver::elementwise(const Elementwise& elementwise, LaunchGeometry& g,
                          std::ostringstream& desc) {
  const Elementwise* e = &elementwise;
  {
    std::string over =
        e->over ? *e->over : plan_.tensors[static_cast<std::size_t>(plan_.num_tensor_inputs)].name;
    auto k = e->block.size();
    desc << "Elementwise(block=(";
    for (std::size_t i = 0; i < k; ++i) desc << (i ? ", " : "") << e->block[i];
    desc << (k == 1 ? ",)" : ")") << ", layout=" << (e->layout == Layout::Flat ? "flat" : "nd")
         << ", over=" << over << ")";
    for (std::size_t i = 0; i < k; ++i) g.block[i] = e->block[i];
    if (e->layout == Layout::Flat) {
      g.grid[0] = cdiv(Expr::numel(over), e->block[0]);
    } else {
      for (std::size_t i = 0; i < k; ++i) {
        g.grid[i] = cdiv(Expr::dim(over, -static_cast<std::int64_t>(i) - 1), e->block[i]);
      }
      std::vector<std::int64_t> trailing;
      for (std::size_t i = 0; i < k; ++i) trailing.push_back(-static_cast<std::int64_t>(i) - 1);
      Expr leading = Expr::numel_except(over, trailing);
      g.grid[2] = k == 3 ? g.grid[2] * leading : leading;
    }
  }
}

void Deriver::reduction(const Reduction& reduction, LaunchGeometry& g, std::ostringstream& desc) {
  const Reduction* r = &reduction;
  {
    const std::string& first = plan_.tensors.front().name;
    desc << "Reduction(reduce_dims=" << detail::int_list_text(r->reduce_dims)
         << ", block_size=" << r->block_size << ", over=" << first << ")";
    g.grid[0] = Expr::numel_except(first, r->reduce_dims);
    g.block[0] = r->block_size;
    if (r->shared_mem) g.shared_mem = *r->shared_mem;
  }
}

void Deriver::custom(const Custom& c, LaunchGeometry& g, std::ostringstream& desc) {
  desc << "Custom";
  for (std::size_t i = 0; i < c.grid.size(); ++i) g.grid[i] = c.grid[i];
  for (std::size_t i = 0; i < c.block.size(); ++i) g.block[i] = c.block[i];
  g.shared_mem = c.shared_mem;
  for (std::size_t i = 0; i < c.cluster.size(); ++i) g.cluster[i] = c.cluster[i];
  if (!c.cluster.empty()) {
    desc << "(cluster=[";
    for (std::size_t i = 0; i < c.cluster.size(); ++i) {
      desc << (i ? ", " : "") << c.cluster[i].to_string();
    }
    desc << "])";
  }
}

void Deriver::finish_geometry(LaunchGeometry& g, std::ostringstream& desc) {
  g.description = desc.str();
  for (auto* part : {&g.grid, &g.block, &g.cluster}) {
    for (Expr& x : *part) {
      x = resolve(x.simplified());
      require_ranks_of(x, "geometry " + g.description);
    }
  }
  g.shared_mem = resolve(g.shared_mem.simplified());
  require_ranks_of(g.shared_mem, "geometry " + g.description);
  plan_.geometry = std::move(g);
}

}  // namespace kernelop::detail
