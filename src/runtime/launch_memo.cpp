// The launch memo (Note [launch memo] in launch_memo.hpp): the key of a call, and which ops may
// use a memo.
#include "runtime/launch_memo.hpp"

#include "kernelop/numbers.hpp"

namespace kernelop::detail {

bool MemoKey::add_tensor(const TensorView& t, bool pointer_bits) {
  // dtype | rank | strides' rank | non-null pointer | device
  std::uint64_t head = static_cast<std::uint64_t>(t.dtype) |
                       static_cast<std::uint64_t>(t.shape.rank()) << 8 |
                       static_cast<std::uint64_t>(t.strides.rank()) << 16 |
                       static_cast<std::uint64_t>(t.data != nullptr) << 24 |
                       static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.device)) << 32;
  if (!push(head)) return false;
  // aligned(t, bytes) takes a power of two up to 4096: the low 12 bits decide it.
  if (pointer_bits && !push(reinterpret_cast<std::uintptr_t>(t.data) & 4095u)) return false;
  for (std::int64_t d : t.shape) {
    if (!push(static_cast<std::uint64_t>(d))) return false;
  }
  for (std::int64_t s : t.strides) {
    if (!push(static_cast<std::uint64_t>(s))) return false;
  }
  return true;
}

bool MemoKey::build(MemoMode mode, std::span<const TensorView> inputs,
                    std::span<const ScalarArg> scalars, std::span<const TensorView> outputs,
                    bool pointer_bits) {
  size = 0;
  if (inputs.size() > 0xffff || scalars.size() > 0xffff || outputs.size() > 0xffff) return false;
  push(static_cast<std::uint64_t>(mode) | static_cast<std::uint64_t>(inputs.size()) << 8 |
       static_cast<std::uint64_t>(scalars.size()) << 24 |
       static_cast<std::uint64_t>(outputs.size()) << 40);
  for (const TensorView& t : inputs) {
    if (!add_tensor(t, pointer_bits)) return false;
  }
  for (const TensorView& t : outputs) {
    if (!add_tensor(t, pointer_bits)) return false;
  }
  for (const ScalarArg& s : scalars) {
    // Floats: only their kind is checked and no expression reads them.
    std::uint64_t v = s.kind == ScalarArg::Kind::Int    ? static_cast<std::uint64_t>(s.i)
                      : s.kind == ScalarArg::Kind::Bool ? static_cast<std::uint64_t>(s.b)
                                                        : 0;
    if (!push(static_cast<std::uint64_t>(s.kind)) || !push(v)) return false;
  }
  return true;
}

bool reads_pointer_alignment(const OpPlan& p) {
  bool reads = false;
  auto scan = [&](const Expr& e) {
    e.for_each_leaf([&](const Expr& leaf) { reads = reads || leaf.op() == ExprOp::Aligned; });
  };
  for (const RequirementPlan& r : p.requirements) scan(r.condition);
  for (const ConfigPlan& c : p.configs) {
    for (const RequirementPlan& r : c.requirements) scan(r.condition);
  }
  for (const OutputPlan& o : p.outputs) {
    for (const Expr& e : o.shape.dims) scan(e);
    reads = reads || o.align > 1;  // OutputDecl::align: checked per pointer, never memoized away
  }
  for (const ArgSlot& a : p.args) {
    if (a.value) scan(*a.value);
  }
  for (const Expr& e : p.tuning_key) scan(e);
  if (p.geometry) {
    for (const Expr& e : p.geometry->grid) scan(e);
    for (const Expr& e : p.geometry->block) scan(e);
    scan(p.geometry->shared_mem);
  }
  return reads;
}

bool memo_eligible(const OpPlan& p) {
  if (!env_flag("KERNELOP_LAUNCH_MEMO", true)) return false;
  if (!p.geometry || p.args_from_kernel) return false;  // raw launches only
  // Several launches and scratch (Note [several launches]) take their own path.
  if (!p.spec.then.empty() || p.num_results() != p.outputs.size()) return false;
  // Note [host reads]: values read per call are no part of a memo's key.
  if (reads_on_host(p.spec)) return false;
  for (const TensorSlot& t : p.tensors) {
    if (t.mutated) return false;  // the overlap check reads the pointers
  }
  return true;
}

}  // namespace kernelop::detail
