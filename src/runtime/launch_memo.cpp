// The launch memo (Note [launch memo] in launch_memo.hpp).
#include "runtime/launch_memo.hpp"

#include "kernelop/numbers.hpp"

namespace kernelop::detail {

bool MemoKey::add_tensor(const TensorView& t) {
  // dtype | rank | strides' rank | non-null pointer | device
  std::uint64_t head = static_cast<std::uint64_t>(t.dtype) |
                       static_cast<std::uint64_t>(t.shape.rank()) << 8 |
                       static_cast<std::uint64_t>(t.strides.rank()) << 16 |
                       static_cast<std::uint64_t>(t.data != nullptr) << 24 |
                       static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.device)) << 32;
  if (!push(head)) return false;
  for (std::int64_t d : t.shape) {
    if (!push(static_cast<std::uint64_t>(d))) return false;
  }
  for (std::int64_t s : t.strides) {
    if (!push(static_cast<std::uint64_t>(s))) return false;
  }
  return true;
}

bool MemoKey::build(MemoMode mode, std::span<const TensorView> inputs,
                    std::span<const ScalarArg> scalars, std::span<const TensorView> outputs) {
  size = 0;
  if (inputs.size() > 0xffff || scalars.size() > 0xffff || outputs.size() > 0xffff) return false;
  push(static_cast<std::uint64_t>(mode) | static_cast<std::uint64_t>(inputs.size()) << 8 |
       static_cast<std::uint64_t>(scalars.size()) << 24 |
       static_cast<std::uint64_t>(outputs.size()) << 40);
  for (const TensorView& t : inputs) {
    if (!add_tensor(t)) return false;
  }
  for (const TensorView& t : outputs) {
    if (!add_tensor(t)) return false;
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

bool LaunchMemo::find(const MemoKey& key, MemoValue& value) const {
  std::uint64_t s1 = seq_.load(std::memory_order_acquire);
  if (s1 & 1u) return false;  // a store is under way
  if (key_size_.load(std::memory_order_relaxed) != key.size) return false;
  for (std::size_t i = 0; i < key.size; ++i) {
    if (key_[i].load(std::memory_order_relaxed) != key.words[i]) return false;
  }
  value.size = value_size_.load(std::memory_order_relaxed);
  if (value.size > kValueWords) return false;
  for (std::size_t i = 0; i < value.size; ++i)
    value.words[i] = value_[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return seq_.load(std::memory_order_relaxed) == s1;  // nothing was stored meanwhile
}

void LaunchMemo::store(const MemoKey& key, const MemoValue& value) {
  if (writing_.exchange(true, std::memory_order_acquire)) return;  // another thread is storing
  std::uint64_t s = seq_.load(std::memory_order_relaxed);
  seq_.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  key_size_.store(static_cast<std::uint32_t>(key.size), std::memory_order_relaxed);
  for (std::size_t i = 0; i < key.size; ++i) key_[i].store(key.words[i], std::memory_order_relaxed);
  value_size_.store(static_cast<std::uint32_t>(value.size), std::memory_order_relaxed);
  for (std::size_t i = 0; i < value.size; ++i)
    value_[i].store(value.words[i], std::memory_order_relaxed);
  seq_.store(s + 2, std::memory_order_release);
  writing_.store(false, std::memory_order_release);
}

bool memo_eligible(const OpPlan& p) {
  if (!env_flag("KERNELOP_LAUNCH_MEMO", true)) return false;
  if (!p.is_declarative() && !(p.geometry && !p.args_from_kernel)) return false;
  if (p.configs.size() != 1 || !p.configs[0].requirements.empty()) return false;
  for (const TensorSlot& t : p.tensors) {
    if (t.mutated) return false;
  }
  bool reads_pointer = false;
  auto scan = [&](const Expr& e) {
    e.for_each_leaf([&](const Expr& leaf) { reads_pointer |= leaf.op() == ExprOp::Aligned; });
  };
  for (const RequirementPlan& r : p.requirements) scan(r.condition);
  for (const OutputPlan& o : p.outputs) {
    for (const Expr& e : o.shape.dims) scan(e);
  }
  for (const ArgSlot& a : p.args) {
    if (a.value) scan(*a.value);
  }
  for (const Expr& e : p.geometry->grid) scan(e);
  for (const Expr& e : p.geometry->block) scan(e);
  scan(p.geometry->shared_mem);
  return !reads_pointer;
}

}  // namespace kernelop::detail
