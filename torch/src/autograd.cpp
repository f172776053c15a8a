// The Autograd kernel of an op with a backward (Note [backward]): the forward runs below autograd,
// the tensors the backward reads are saved as an autograd::Function would save them, and a graph
// node calls the backward op through the dispatcher, so a backward with its own backward is
// differentiable again (double backward) and AOTAutograd traces both ops.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <optional>
#include <utility>

#include "registration.hpp"

namespace kernelop::torch_ops::impl {
namespace {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;
using Kind = BackwardLink::Source::Kind;

// Note [written inputs with a backward]: an op may write an input (Liger's cross entropy leaves
// the gradient in the logits it is given) and have a backward, as PyTorch's in-place ops do:
//  - before the call, an input it writes that carries autograd history is checked as PyTorch
//    checks an in-place op's self (a leaf that requires grad, or a view of one, is refused);
//  - the call goes through the ADInplaceOrView kernel, which bumps the versions of the inputs
//    it writes (make_written_versions_kernel), so a graph that saved one refuses to use it;
//  - the op's gradient for such an input is that of the value it had before the call (its edge
//    is taken before), and a backward that reads it gets the value the op left (saved after);
//  - the value the op leaves has no gradient: the input's history is rebased onto a node that
//    refuses to be differentiated, naming the op (a view's base through PyTorch's CopySlices).
// An op that writes inputs and declares no backward gets the same checks and rebase, and its
// outputs a node that names what to declare (make_written_without_backward_kernel).
struct WrittenInputs {
  struct Kept {  // per input written: the tensor, and the edge of its value before the call
    c10::SmallVector<at::Tensor, 2> tensors;
    torch::autograd::edge_list edges;
  };
  std::string op_name;
  std::vector<std::size_t> position;  // in input_order
  std::vector<std::string> name;
  std::vector<bool> result;  // InputDecl::result: rebased onto the op's node when it has one

  WrittenInputs() = default;
  explicit WrittenInputs(const OpPlan& p) : op_name(p.op_name) {
    for (std::size_t i = 0; i < p.input_order.size(); ++i) {
      const DeclaredInput& d = p.input_order[i];
      if (!d.is_tensor) continue;
      const TensorSlot& t = p.tensors[static_cast<std::size_t>(d.slot)];
      if (!t.mutated) continue;
      position.push_back(i);
      name.push_back(t.name);
      result.push_back(t.result);
    }
  }
  bool any() const { return !position.empty(); }
  bool writes(std::size_t input) const {
    return std::find(position.begin(), position.end(), input) != position.end();
  }
  // The tensor check() kept for input `input` (one this op writes), and its edge before the call.
  const at::Tensor& kept(const Kept& kept, std::size_t input) const {
    return kept.tensors[index(input)];
  }
  const torch::autograd::Edge& kept_edge(const Kept& kept, std::size_t input) const {
    return kept.edges[index(input)];
  }
  std::size_t index(std::size_t input) const {
    return static_cast<std::size_t>(std::find(position.begin(), position.end(), input) -
                                    position.begin());
  }

  // Whether an input it writes has autograd history to rebase (grad mode on).
  bool with_history(c10::ArrayRef<c10::IValue> in) const {
    if (!at::GradMode::is_enabled()) return false;
    for (std::size_t w : position) {
      if (in[w].isTensor() && in[w].toTensor().requires_grad()) return true;
    }
    return false;
  }

  // Checks them before the call and keeps them (the call consumes its arguments).
  Kept check(c10::ArrayRef<c10::IValue> in, bool result_requires_grad) const {
    Kept kept;
    for (std::size_t k = 0; k < position.size(); ++k) {
      const at::Tensor& t = in[position[k]].toTensor();
      try {
        torch::autograd::check_inplace(t, result_requires_grad || t.requires_grad());
      } catch (const c10::Error& e) {
        TORCH_CHECK(false, "op ", op_name, " writes its input '", name[k], "' in place: ", e.msg(),
                    " Pass a tensor computed from it (x.clone()), or call the op under "
                    "torch.no_grad()");
      }
      kept.tensors.push_back(t);
      kept.edges.push_back(t.requires_grad() ? torch::autograd::impl::gradient_edge(t)
                                             : torch::autograd::Edge{});
    }
    // Two written inputs over the same memory (one a view of the other, or the same tensor twice)
    // have no one value before and after: refused, as PyTorch refuses an out= aliasing an input.
    for (std::size_t j = 0; j < position.size(); ++j) {
      for (std::size_t k = j + 1; k < position.size(); ++k) {
        const at::Tensor &a = kept.tensors[j], &b = kept.tensors[k];
        // (Tensors of symbolic sizes, traced, have no addresses to compare: the call a traced
        // graph makes is checked when it runs.)
        const bool symbolic = a.unsafeGetTensorImpl()->has_symbolic_sizes_strides() ||
                              b.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
        const auto overlap = symbolic ? at::MemOverlapStatus::No : at::get_overlap_status(a, b);
        const bool views_other =
            (a.is_view() && a._base().is_same(b)) || (b.is_view() && b._base().is_same(a));
        TORCH_CHECK(overlap != at::MemOverlapStatus::Full &&
                        overlap != at::MemOverlapStatus::Partial && !views_other,
                    "op ", op_name, " writes its inputs '", name[j], "' and '", name[k],
                    "' in place, and they share memory (one a view of the other, or the same "
                    "tensor twice); pass tensors that do not (a .clone() of one)");
      }
    }
    return kept;
  }

  // After the call: the values left in them have no gradient. The refusing node leads where the
  // value it replaced did, so that a gradient asked of what that value came from (autograd.grad)
  // reaches it, and refuses, rather than being left out of the graph task as a constant.
  // `differentiated`: the results the op's node took (Note [written results]), left alone.
  void rebase(const Kept& kept, bool differentiated = false) const {
    for (std::size_t k = 0; k < kept.tensors.size(); ++k) {
      const at::Tensor& t = kept.tensors[k];
      if (!t.requires_grad() || (differentiated && result[k])) continue;
      auto node = std::shared_ptr<torch::autograd::Error>(
          new torch::autograd::Error(
              "op " + op_name + " wrote into its input '" + name[k] +
                  "' in place: the value it left there has no gradient (the op's gradient is "
                  "that of the value before the call)",
              torch::autograd::edge_list{kept.edges[k]}),
          torch::autograd::deleteNode);
      const std::uint32_t nr = node->add_input_metadata(t);
      torch::autograd::impl::rebase_history(t, {std::move(node), nr});
    }
  }
};

// The call below autograd; an op that writes inputs goes through ADInplaceOrView, whose kernel
// bumps their versions.
void call_below_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                         torch::jit::Stack* stack, bool writes) {
  if (writes) {
    at::AutoDispatchBelowAutograd guard;
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
  } else {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
  }
}

// What one registration's Autograd kernel and graph nodes share.
struct AutogradInfo {
  std::string op_name;
  // The backward's registration and handle, kept by every graph node: a graph may outlive the
  // registration (then its backward call fails cleanly), never calls a successor of the name.
  std::shared_ptr<Registration::State> backward;
  std::optional<c10::OperatorHandle> backward_handle;
  BackwardLink link;
  // Per backward input (link.sources): ForwardInput / ForwardOutput, its index in the node's
  // saved values; Grad, the node input (the gradient's position among grad_outputs).
  std::vector<std::size_t> slot;
  std::vector<int> saved_inputs;   // forward inputs (input_order) the backward reads, in save order
  std::vector<int> saved_outputs;  // then forward outputs it reads
  // Node inputs: the gradients of the forward outputs the backward reads, then those of the
  // written results it reads (grad_<input>_out: Note [written results]), then, per call, one per
  // base of a result that is a view.
  std::vector<int> grad_outputs;
  std::vector<int> grad_results;  // input_order positions
  // Per gradient node input: how many backward inputs read it (more than one through "from")
  std::vector<int> grad_reads;
  std::size_t num_inputs = 0, num_outputs = 0;
  WrittenInputs written;
};

// Note [written results]: an op may write an input whose new value is one of its results
// (InputDecl::result: Liger's RoPE rotates HF's q and k in place), as PyTorch's in-place ops
// write self. After the call the op's node is that value's history, and the backward reads its
// gradient as grad_<input>_out; the gradient the node gives the input is that of the value before.
// A result that is a view (HF's q is a transposed view of the projection) gets the op's node as
// its own history, as an autograd::Function's output does, so that the common case costs no copy:
// the gradient of q reaches the backward as it is, and the gradient of q's old value goes back
// through q's old view history. Its base, whose values changed too, is no constant either: it is
// rebased onto the node as well (one node input per base), so a gradient reaching the base (the
// base used after the call, or a later in-place op on the view, through PyTorch's CopySlices)
// has its view's part added to the view's gradient before the backward, and the rest passed on
// to the base's old history. PyTorch's own rebase of a view (CopySlices) copies the base's
// gradient twice and takes one written view per node; this takes several (q and k, even of one
// fused projection).
struct ViewedResult {
  std::size_t result = 0;                   // index in grad_results
  std::size_t base = 0;                     // index in ResultBases::bases
  std::vector<c10::SymInt> sizes, strides;  // symbolic while AOTAutograd traces
  c10::SymInt offset = 0;                   // from the base's storage offset
};
struct ResultBase {
  std::uint32_t input_nr = 0;
  std::vector<c10::SymInt> sizes, strides;
  bool covered = false;       // a single view over all of it: nothing of its gradient is left
  std::size_t next_edge = 0;  // where the rest of its gradient goes (when not covered)
};

// A result's own node: one input (0, as PyTorch requires of a view's history, which it regenerates
// from the base after a later in-place op), forwarding the gradient to the op's node.
class ResultEdge final : public torch::autograd::Node {
 public:
  explicit ResultEdge(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  variable_list apply(variable_list&& grads) override { return std::move(grads); }

 private:
  std::string name_;
};

// `t`'s history becomes `edge` (input 0 of its ResultEdge), as PyTorch's rebase does for an
// in-place op's self: hooks registered on t from now on go to the new node; a retained gradient is
// retained there, and no longer at the node t had before (`old`). (A new retaining hook: PyTorch's
// reads the gradient at the input index t had when it was made, which the new node may not have.)
void rebase_result(const at::Tensor& t, const torch::autograd::Edge& edge,
                   const torch::autograd::Edge& old) {
  torch::autograd::impl::set_gradient_edge(t, edge);
  auto* meta = torch::autograd::impl::get_autograd_meta(t);
  if (meta) meta->cpp_hooks_list_ = nullptr;
  if (const auto* interp = t.unsafeGetTensorImpl()->pyobj_slot()->pyobj_interpreter())
    (*interp)->reset_backward_hooks(t.unsafeGetTensorImpl());
  if (meta && meta->retains_grad_) {
    if (old.function) old.function->pop_retains_grad_hook(old.input_nr);
    meta->retains_grad_ = false;
    t.retain_grad();
  }
}

// The base's gradient laid out as the base (the engine gives one of its shape, not its strides).
at::Tensor as_base(const at::Tensor& grad, const ResultBase& b) {
  if (grad.sym_strides().equals(b.strides)) return grad;
  at::Tensor out = at::empty_strided_symint(b.sizes, b.strides, grad.options());
  out.copy_(grad);
  return out;
}

// The part of a base's gradient (laid out as the base) that is a view's.
at::Tensor slice_of(const at::Tensor& base_grad, const ViewedResult& v) {
  return base_grad.as_strided_symint(v.sizes, v.strides, base_grad.sym_storage_offset() + v.offset);
}

// A saved forward input or output: a tensor as autograd::Function saves it, or a scalar input.
struct Saved {
  SavedVariable tensor;
  c10::IValue scalar;
  bool is_scalar = false;
};

class KernelopBackward final : public torch::autograd::Node {
 public:
  explicit KernelopBackward(std::shared_ptr<const AutogradInfo> info) : info_(std::move(info)) {}

  std::string name() const override { return info_->op_name + "Backward"; }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);  // as generated nodes: saved variables are shared
    const AutogradInfo& a = *info_;
    const bool releasing = std::exchange(releasing_, false);  // this run's notice only
    torch::jit::Stack stack;
    stack.reserve(a.link.sources.size());
    std::shared_ptr<Node> self = shared_from_this();
    c10::SmallVector<std::size_t, 4> unpacked;
    const bool donate_grads = !at::GradMode::is_enabled();
    // Note [written results]: the bases' gradients, laid out as the bases
    c10::SmallVector<at::Tensor, 2> base_grads;
    for (const ResultBase& b : bases_) {
      const at::Tensor& g = grads[b.input_nr];
      base_grads.push_back(g.defined() ? as_base(g, b) : at::Tensor());
    }
    for (const ViewedResult& v : views_) {
      const at::Tensor& g = base_grads[v.base];
      if (!g.defined()) continue;
      at::Tensor& direct = grads[a.grad_outputs.size() + v.result];
      at::Tensor part = slice_of(g, v);
      direct = direct.defined() ? at::add(direct, part) : part;
    }
    for (std::size_t j = 0; j < a.link.sources.size(); ++j) {
      const std::size_t k = a.slot[j];
      const Kind kind = a.link.sources[j].kind;
      if (kind == Kind::Grad || kind == Kind::ResultGrad) {
        // An output the loss did not use has no gradient: zeros, as autograd::Function's
        // materialize_grads gives. Note [donated inputs]: a gradient the engine gave this node
        // alone is moved into the call, so that an output that starts as its copy may take its
        // buffer; outside a double-backward graph only, as PyTorch's InputBuffer reuses one, and
        // when one backward input reads it.
        if (!grads[k].defined()) {
          stack.emplace_back(input_metadata(k).zeros_like());
        } else if (donate_grads && a.grad_reads[k] == 1) {
          stack.emplace_back(std::move(grads[k]));
        } else {
          stack.emplace_back(grads[k]);
        }
      } else if (saved_[k].is_scalar) {
        stack.push_back(saved_[k].scalar);
      } else {
        stack.emplace_back(saved_[k].tensor.unpack(self));
        unpacked.push_back(k);
      }
    }
    std::optional<CallScope> scope;
    try {
      scope.emplace(*a.backward);
    } catch (const Error&) {
      TORCH_CHECK(false, "op ", a.op_name, ": its backward ", a.backward->op().plan().op_name,
                  " is no longer registered (unregistered while a graph that needs it was "
                  "alive); run backward before unregistering the op");
    }
    // Note [donated inputs]: a graph that will not run again (no retain_graph) lets go of its
    // saved tensors before the backward op runs rather than after, so that a tensor nothing else
    // holds is the call's alone and may become the buffer of an output that starts as its copy.
    if (releasing) {
      for (std::size_t k : unpacked) saved_[k].tensor.reset_data();
    }
    a.backward_handle->callBoxed(stack);
    TORCH_CHECK(stack.size() == a.link.grad_of.size(), "op ", a.op_name, ": its backward ",
                a.backward->op().plan().op_name, " returned ", stack.size(), " value(s); expected ",
                a.link.grad_of.size());
    variable_list out(num_outputs());
    for (std::size_t j = 0; j < a.link.grad_of.size(); ++j)
      out[static_cast<std::size_t>(a.link.grad_of[j])] = stack[j].toTensor();
    // The rest of each base's gradient, outside the views the op wrote, goes to its old history.
    for (std::size_t i = 0; i < bases_.size(); ++i) {
      if (bases_[i].covered || !base_grads[i].defined()) continue;
      const ResultBase& b = bases_[i];
      at::Tensor rest = at::empty_strided_symint(b.sizes, b.strides, base_grads[i].options());
      rest.copy_(base_grads[i]);
      for (const ViewedResult& v : views_) {
        if (v.base == i) slice_of(rest, v).zero_();
      }
      out[bases_[i].next_edge] = std::move(rest);
    }
    return out;
  }

  // The engine's notice, before apply(), that the graph is not retained (release_variables()
  // follows apply()).
  void will_release_variables() override { releasing_ = true; }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Saved& s : saved_) s.tensor.reset_data();
  }

  // Saved inputs, then saved outputs (AutogradInfo::slot); inline, so recording a call allocates
  // no more than an autograd::Function does.
  c10::SmallVector<Saved, 4> saved_;
  // Note [written results]: this call's results that are views, and their bases.
  std::vector<ViewedResult> views_;
  std::vector<ResultBase> bases_;

 private:
  std::shared_ptr<const AutogradInfo> info_;
  bool releasing_ = false;
};

// Enters a call of `state` into `scope` (Note [registration lifetime]), as a torch error when it
// is gone.
void enter(std::optional<CallScope>& scope, Registration::State& state) {
  try {
    scope.emplace(state);
  } catch (const Error& e) {
    rethrow_as_torch(e);
  }
}

class AutogradKernel final : public c10::OperatorKernel {
 public:
  AutogradKernel(Registration::State* state, std::shared_ptr<const AutogradInfo> info)
      : state_(state), info_(std::move(info)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    std::optional<CallScope> scope;
    enter(scope, *state_);
    const AutogradInfo& a = *info_;
    const bool writes = a.written.any();
    bool needed = false, history = false;
    if (at::GradMode::is_enabled()) {
      auto in = torch::jit::last(*stack, a.num_inputs);
      for (int d : a.link.differentiable) {
        const c10::IValue& v = in[static_cast<std::size_t>(d)];
        needed = needed || (v.isTensor() && v.toTensor().requires_grad());
      }
      history = writes && a.written.with_history(in);
    }
    if (!needed && !history) {  // no graph to record (inference, or inside a backward pass)
      call_below_autograd(op, ks, stack, writes);
      return;
    }
    // Note [written inputs with a backward]
    WrittenInputs::Kept written;
    if (writes) written = a.written.check(torch::jit::last(*stack, a.num_inputs), needed);
    if (!needed) {
      call_below_autograd(op, ks, stack, writes);
      a.written.rebase(written);
      return;
    }
    auto node =
        std::shared_ptr<KernelopBackward>(new KernelopBackward(info_), torch::autograd::deleteNode);
    {
      auto in = torch::jit::last(*stack, a.num_inputs);
      torch::autograd::edge_list edges;
      edges.reserve(a.link.differentiable.size());
      for (int d : a.link.differentiable) {
        edges.push_back(
            torch::autograd::impl::gradient_edge(in[static_cast<std::size_t>(d)].toTensor()));
      }
      node->set_next_edges(std::move(edges));
      // The call consumes its arguments: what the backward reads is saved first (an input the op
      // writes, after the call: the value it leaves).
      for (int i : a.saved_inputs) {
        const c10::IValue& v = in[static_cast<std::size_t>(i)];
        Saved& s = node->saved_.emplace_back();
        if (v.isTensor()) {
          if (!a.written.writes(static_cast<std::size_t>(i)))
            s.tensor = SavedVariable(v.toTensor(), false);
        } else {
          s.scalar = v;
          s.is_scalar = true;
        }
      }
    }
    call_below_autograd(op, ks, stack, writes);
    auto outputs = torch::jit::last(*stack, a.num_outputs);
    for (int o : a.grad_outputs)
      torch::autograd::set_history(outputs[static_cast<std::size_t>(o)].toTensor(), node);
    if (writes) {
      const auto results = take_results(*node, written);
      a.written.rebase(written, true);
      for (std::size_t k = 0; k < a.saved_inputs.size(); ++k) {
        const auto i = static_cast<std::size_t>(a.saved_inputs[k]);
        if (!a.written.writes(i)) continue;
        const at::Tensor& t = a.written.kept(written, i);
        const auto r = static_cast<std::size_t>(
            std::find(a.grad_results.begin(), a.grad_results.end(), static_cast<int>(i)) -
            a.grad_results.begin());
        if (r == a.grad_results.size()) {
          node->saved_[k].tensor = SavedVariable(t, false);
          continue;
        }
        // A result's history is the node's input (through its ResultEdge): saved as an output of
        // the node (no reference cycle), which unpacks it onto that input (a double backward).
        torch::autograd::impl::set_gradient_edge(t, {node, results[r].first});
        node->saved_[k].tensor = SavedVariable(t, true);
        torch::autograd::impl::set_gradient_edge(t, results[r].second);
      }
    }
    for (int o : a.saved_outputs) {
      bool is_output =
          std::find(a.grad_outputs.begin(), a.grad_outputs.end(), o) != a.grad_outputs.end();
      node->saved_.emplace_back().tensor =
          SavedVariable(outputs[static_cast<std::size_t>(o)].toTensor(), is_output);
    }
  }

 private:
  // Note [written results]: the node becomes the history of the results the op wrote (after the
  // outputs' node inputs), and of the bases of those that are views.
  // Per result: its node input and its own edge.
  c10::SmallVector<std::pair<std::uint32_t, torch::autograd::Edge>, 4> take_results(
      KernelopBackward& node, const WrittenInputs::Kept& written) const {
    const AutogradInfo& a = *info_;
    auto own_edge = [&](const at::Tensor& t, std::uint32_t nr) {
      auto edge =
          std::shared_ptr<ResultEdge>(new ResultEdge(node.name()), torch::autograd::deleteNode);
      edge->add_next_edge({node.shared_from_this(), nr});
      edge->add_input_metadata(t);
      return torch::autograd::Edge{std::move(edge), 0};
    };
    c10::SmallVector<at::Tensor, 2> bases;
    c10::SmallVector<torch::autograd::Edge, 2> base_edges;  // before the rebase
    c10::SmallVector<std::uint32_t, 4> input_nr;            // per result
    for (std::size_t r = 0; r < a.grad_results.size(); ++r) {
      const at::Tensor& t = a.written.kept(written, static_cast<std::size_t>(a.grad_results[r]));
      input_nr.push_back(node.add_input_metadata(t));
      if (!t.is_view()) continue;
      at::Tensor base(t._base());
      std::size_t bi = 0;
      while (bi < bases.size() && !bases[bi].is_same(base)) ++bi;
      if (bi == bases.size()) {
        bases.push_back(base);
        base_edges.push_back(torch::autograd::impl::gradient_edge(base));
        ResultBase b;
        b.sizes = base.sym_sizes().vec();
        b.strides = base.sym_strides().vec();
        // All of a dense base, from its first element: nothing of its gradient is left. A base
        // that had no history has nowhere to send the rest either.
        b.covered =
            !base_edges.back().is_valid() ||
            (TORCH_GUARD_SIZE_OBLIVIOUS(t.sym_numel().sym_eq(base.sym_numel())) &&
             TORCH_GUARD_SIZE_OBLIVIOUS(t.sym_storage_offset().sym_eq(base.sym_storage_offset())) &&
             t.is_non_overlapping_and_dense() && base.is_non_overlapping_and_dense());
        node.bases_.push_back(std::move(b));
      } else if (base_edges[bi].is_valid()) {
        node.bases_[bi].covered = false;  // two views of one base: the rest is computed
      }
      ViewedResult v;
      v.result = r;
      v.base = bi;
      v.sizes = t.sym_sizes().vec();
      v.strides = t.sym_strides().vec();
      v.offset = t.sym_storage_offset() - base.sym_storage_offset();
      node.views_.push_back(std::move(v));
    }
    // The node's edges are complete before anything points to it (PyTorch orders nodes so): a
    // base's old history takes the rest of its gradient.
    for (std::size_t bi = 0; bi < bases.size(); ++bi) {
      ResultBase& b = node.bases_[bi];
      if (!b.covered) {
        b.next_edge = node.num_outputs();
        node.add_next_edge(base_edges[bi]);
      }
      b.input_nr = node.add_input_metadata(bases[bi]);
    }
    // A view's own history is its node, as an autograd::Function's output's (until its base
    // changes again); the base's too.
    c10::SmallVector<std::pair<std::uint32_t, torch::autograd::Edge>, 4> out;
    for (std::size_t r = 0; r < a.grad_results.size(); ++r) {
      const auto input = static_cast<std::size_t>(a.grad_results[r]);
      const at::Tensor& t = a.written.kept(written, input);
      out.emplace_back(input_nr[r], own_edge(t, input_nr[r]));
      rebase_result(t, out.back().second, a.written.kept_edge(written, input));
    }
    for (std::size_t bi = 0; bi < bases.size(); ++bi)
      rebase_result(bases[bi], own_edge(bases[bi], node.bases_[bi].input_nr), base_edges[bi]);
    return out;
  }

  Registration::State* state_;
  std::shared_ptr<const AutogradInfo> info_;
};

// An op with no backward of its own whose results must not be differentiated silently: a backward
// op (double backward) or an op that writes inputs (Note [written inputs with a backward]). Its
// results carry a node that refuses to be differentiated, naming what to declare, as
// once_differentiable does (not PyTorch's fallback, which would only warn and give no gradient).
class NoBackwardKernel final : public c10::OperatorKernel {
 public:
  NoBackwardKernel(Registration::State* state, std::size_t num_inputs, std::string message,
                   WrittenInputs written)
      : state_(state),
        num_inputs_(num_inputs),
        message_(std::move(message)),
        written_(std::move(written)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    std::optional<CallScope> scope;
    enter(scope, *state_);
    const bool writes = written_.any();
    // Inside a backward pass (grad mode off, the usual case) nothing is collected: only the call.
    variable_list inputs;
    bool needed = false, history = false;
    if (at::GradMode::is_enabled()) {
      auto in = torch::jit::last(*stack, num_inputs_);
      for (const c10::IValue& v : in) {
        if (!v.isTensor()) continue;
        inputs.push_back(v.toTensor());
        needed = needed || v.toTensor().requires_grad();
      }
      history = writes && written_.with_history(in);
    }
    WrittenInputs::Kept written;
    if (history) written = written_.check(torch::jit::last(*stack, num_inputs_), needed);
    const std::size_t num_outputs = op.schema().returns().size();
    call_below_autograd(op, ks, stack, writes);
    if (needed) {
      // The edges of the inputs' values before the call (the rebase below comes after).
      auto node = std::shared_ptr<torch::autograd::Error>(
          new torch::autograd::Error(message_, torch::autograd::collect_next_edges(inputs)),
          torch::autograd::deleteNode);
      for (const c10::IValue& v : torch::jit::last(*stack, num_outputs)) {
        if (v.isTensor() && torch::autograd::isDifferentiableType(v.toTensor().scalar_type()))
          torch::autograd::set_history(v.toTensor(), node);
      }
    }
    written_.rebase(written);
  }

 private:
  Registration::State* state_;
  std::size_t num_inputs_;
  std::string message_;
  WrittenInputs written_;
};

// ADInplaceOrView of an op that writes inputs: their versions are bumped after the call, as
// PyTorch's in-place ops do, so that a graph that saved one refuses to use the value it lost.
class WrittenVersionsKernel final : public c10::OperatorKernel {
 public:
  WrittenVersionsKernel(Registration::State* state, std::size_t num_inputs, WrittenInputs written)
      : state_(state), num_inputs_(num_inputs), written_(std::move(written)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    std::optional<CallScope> scope;
    enter(scope, *state_);
    c10::SmallVector<at::Tensor, 2> kept;
    {
      auto in = torch::jit::last(*stack, num_inputs_);
      for (std::size_t w : written_.position) {
        if (in[w].isTensor()) kept.push_back(in[w].toTensor());
      }
    }
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
    }
    for (const at::Tensor& t : kept) torch::autograd::increment_version(t);
  }

 private:
  Registration::State* state_;
  std::size_t num_inputs_;
  WrittenInputs written_;
};

}  // namespace

torch::CppFunction make_once_differentiable_kernel(Registration::State* state,
                                                   const OpPlan& backward,
                                                   const std::string& forward) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<NoBackwardKernel>(
      state, backward.input_order.size(),
      "op " + backward.op_name + " is the backward of " + forward +
          " and declares no backward of its own: to differentiate " + forward +
          " twice (create_graph=True, gradgradcheck), give its backward a \"backward\"",
      WrittenInputs(backward)));
}

bool writes_inputs(const OpPlan& p) {
  return WrittenInputs(p).any();
}

torch::CppFunction make_written_without_backward_kernel(Registration::State* state,
                                                        const OpPlan& p) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<NoBackwardKernel>(
      state, p.input_order.size(),
      "op " + p.op_name +
          " declares no backward: to differentiate through it, give it one "
          "(docs/autograd.md)",
      WrittenInputs(p)));
}

torch::CppFunction make_written_versions_kernel(Registration::State* state, const OpPlan& p) {
  return torch::CppFunction::makeFromBoxedFunctor(
      std::make_unique<WrittenVersionsKernel>(state, p.input_order.size(), WrittenInputs(p)));
}

torch::CppFunction make_autograd_kernel(Registration::State* state, const OpPlan& forward,
                                        std::shared_ptr<Registration::State> backward_state) {
  const OpPlan& backward = backward_state->op().plan();
  auto info = std::make_shared<AutogradInfo>();
  info->op_name = forward.op_name;
  info->backward_handle = c10::Dispatcher::singleton().findOp({backward.op_name, ""});
  KERNELOP_INTERNAL_CHECK(info->backward_handle.has_value())
      << "(the backward " << backward.op_name << " of " << forward.op_name
      << " is not in the dispatcher)";
  info->link = link_backward(forward, backward);
  info->num_inputs = forward.input_order.size();
  info->num_outputs = forward.num_results();
  info->written = WrittenInputs(forward);
  auto add = [](std::vector<int>& list, int index) {
    if (std::find(list.begin(), list.end(), index) == list.end()) list.push_back(index);
  };
  for (const BackwardLink::Source& s : info->link.sources) {
    if (s.kind == Kind::ForwardInput) add(info->saved_inputs, s.index);
    if (s.kind == Kind::ForwardOutput) add(info->saved_outputs, s.index);
    if (s.kind == Kind::Grad) add(info->grad_outputs, s.index);
    if (s.kind == Kind::ResultGrad) add(info->grad_results, s.index);
  }
  // Node inputs in output order, then in input order
  std::sort(info->grad_outputs.begin(), info->grad_outputs.end());
  std::sort(info->grad_results.begin(), info->grad_results.end());
  info->grad_reads.assign(info->grad_outputs.size() + info->grad_results.size(), 0);
  // A written result whose gradient the backward does not read is a value without one.
  for (std::size_t k = 0; k < info->written.position.size(); ++k) {
    info->written.result[k] =
        std::find(info->grad_results.begin(), info->grad_results.end(),
                  static_cast<int>(info->written.position[k])) != info->grad_results.end();
  }
  auto position = [](const std::vector<int>& list, int index) {
    return static_cast<std::size_t>(std::find(list.begin(), list.end(), index) - list.begin());
  };
  for (const BackwardLink::Source& s : info->link.sources) {
    switch (s.kind) {
      case Kind::ForwardInput:
        info->slot.push_back(position(info->saved_inputs, s.index));
        break;
      case Kind::ForwardOutput:
        info->slot.push_back(info->saved_inputs.size() + position(info->saved_outputs, s.index));
        break;
      case Kind::Grad:
        info->slot.push_back(position(info->grad_outputs, s.index));
        ++info->grad_reads[info->slot.back()];
        break;
      case Kind::ResultGrad:
        info->slot.push_back(info->grad_outputs.size() + position(info->grad_results, s.index));
        ++info->grad_reads[info->slot.back()];
        break;
    }
  }
  info->backward = std::move(backward_state);
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutogradKernel>(state, info));
}

}  // namespace kernelop::torch_ops::impl
