// The Autograd kernel of an op with a backward (Note [backward]): the forward runs below autograd,
// the tensors the backward reads are saved as an autograd::Function would save them, and a graph
// node calls the backward op through the dispatcher, so a backward with its own backward is
// differentiable again (double backward) and AOTAutograd traces both ops.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include "registration.hpp"

namespace kernelop::torch_ops::impl {
namespace {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;
using Kind = BackwardLink::Source::Kind;

// What one registration's Autograd kernel and graph nodes share.
struct AutogradInfo {
  std::string op_name;
  std::string backward_name;  // looked up per backward call: a graph may outlive a registration
  BackwardLink link;
  std::vector<int> grad_outputs;  // forward outputs whose gradients the backward reads
  std::vector<bool> read_inputs;  // per forward input (input_order): the backward reads it
  std::vector<bool> read_outputs;
  std::size_t num_inputs = 0, num_outputs = 0;
};

class KernelopBackward final : public torch::autograd::Node {
 public:
  explicit KernelopBackward(std::shared_ptr<const AutogradInfo> info) : info_(std::move(info)) {}

  std::string name() const override { return info_->op_name + "Backward"; }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);  // as generated nodes: saved variables are shared
    const AutogradInfo& a = *info_;
    torch::jit::Stack stack;
    stack.reserve(a.link.sources.size());
    std::shared_ptr<Node> self = shared_from_this();
    for (const BackwardLink::Source& s : a.link.sources) {
      auto i = static_cast<std::size_t>(s.index);
      switch (s.kind) {
        case Kind::ForwardInput:
          if (inputs_[i].defined_ivalue) {
            stack.push_back(inputs_[i].value);
          } else {
            stack.emplace_back(inputs_[i].saved.unpack(self));
          }
          break;
        case Kind::ForwardOutput:
          stack.emplace_back(outputs_[i].unpack(self));
          break;
        case Kind::Grad: {
          auto k = static_cast<std::size_t>(
              std::find(a.grad_outputs.begin(), a.grad_outputs.end(), s.index) -
              a.grad_outputs.begin());
          // An output the loss did not use has no gradient: zeros, as autograd::Function's
          // materialize_grads gives.
          stack.emplace_back(grads[k].defined()
                                 ? grads[k]
                                 : at::zeros_symint(shapes_[k].sizes, shapes_[k].options));
          break;
        }
      }
    }
    auto backward = c10::Dispatcher::singleton().findOp({a.backward_name, ""});
    TORCH_CHECK(backward.has_value(), "op ", a.op_name, ": its backward ", a.backward_name,
                " is no longer registered (unregistered while a graph that needs it was alive)");
    backward->callBoxed(stack);
    variable_list out(a.link.differentiable.size());
    for (std::size_t j = 0; j < a.link.grad_of.size(); ++j)
      out[static_cast<std::size_t>(a.link.grad_of[j])] = stack[j].toTensor();
    return out;
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Saved& s : inputs_) s.saved.reset_data();
    for (SavedVariable& s : outputs_) s.reset_data();
  }

  struct Saved {
    SavedVariable saved;
    c10::IValue value;  // a scalar input
    bool defined_ivalue = false;
  };
  std::vector<Saved> inputs_;
  std::vector<SavedVariable> outputs_;
  struct Shape {
    std::vector<c10::SymInt> sizes;
    at::TensorOptions options;
  };
  std::vector<Shape> shapes_;  // per grad output

 private:
  std::shared_ptr<const AutogradInfo> info_;
};

class AutogradKernel final : public c10::OperatorKernel {
 public:
  explicit AutogradKernel(std::shared_ptr<const AutogradInfo> info) : info_(std::move(info)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    const AutogradInfo& a = *info_;
    std::vector<c10::IValue> args(torch::jit::last(*stack, a.num_inputs).begin(),
                                  torch::jit::last(*stack, a.num_inputs).end());
    bool needed = false;
    if (at::GradMode::is_enabled()) {
      for (int d : a.link.differentiable) {
        const c10::IValue& v = args[static_cast<std::size_t>(d)];
        needed = needed || (v.isTensor() && v.toTensor().requires_grad());
      }
    }
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    }
    if (!needed) return;
    auto node =
        std::shared_ptr<KernelopBackward>(new KernelopBackward(info_), torch::autograd::deleteNode);
    variable_list differentiable;
    for (int d : a.link.differentiable)
      differentiable.push_back(args[static_cast<std::size_t>(d)].toTensor());
    node->set_next_edges(torch::autograd::collect_next_edges(differentiable));
    node->inputs_.resize(a.num_inputs);
    for (std::size_t i = 0; i < a.num_inputs; ++i) {
      if (!a.read_inputs[i]) continue;
      if (args[i].isTensor()) {
        node->inputs_[i].saved = SavedVariable(args[i].toTensor(), false);
      } else {
        node->inputs_[i].value = args[i];
        node->inputs_[i].defined_ivalue = true;
      }
    }
    auto outputs = torch::jit::last(*stack, a.num_outputs);
    for (int o : a.grad_outputs) {
      const at::Tensor& t = outputs[static_cast<std::size_t>(o)].toTensor();
      torch::autograd::set_history(t, node);
      node->shapes_.push_back({t.sym_sizes().vec(), t.options()});
    }
    node->outputs_.resize(a.num_outputs);
    for (std::size_t o = 0; o < a.num_outputs; ++o) {
      if (!a.read_outputs[o]) continue;
      bool is_output = std::find(a.grad_outputs.begin(), a.grad_outputs.end(),
                                 static_cast<int>(o)) != a.grad_outputs.end();
      node->outputs_[o] = SavedVariable(outputs[o].toTensor(), is_output);
    }
  }

 private:
  std::shared_ptr<const AutogradInfo> info_;
};

// A backward op that declares no backward of its own: its results carry a node that refuses to be
// differentiated, naming what to declare, as once_differentiable does (not PyTorch's fallback,
// which would only warn and give no gradient).
class OnceDifferentiableKernel final : public c10::OperatorKernel {
 public:
  OnceDifferentiableKernel(std::size_t num_inputs, std::string message)
      : num_inputs_(num_inputs), message_(std::move(message)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    variable_list inputs;
    bool needed = false;
    for (const c10::IValue& v : torch::jit::last(*stack, num_inputs_)) {
      if (!v.isTensor()) continue;
      inputs.push_back(v.toTensor());
      needed = needed || (at::GradMode::is_enabled() && v.toTensor().requires_grad());
    }
    const std::size_t num_outputs = op.schema().returns().size();
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    }
    if (!needed) return;
    auto node = std::shared_ptr<torch::autograd::Error>(
        new torch::autograd::Error(message_, torch::autograd::collect_next_edges(inputs)),
        torch::autograd::deleteNode);
    for (const c10::IValue& v : torch::jit::last(*stack, num_outputs))
      torch::autograd::set_history(v.toTensor(), node);
  }

 private:
  std::size_t num_inputs_;
  std::string message_;
};

}  // namespace

torch::CppFunction make_once_differentiable_kernel(const OpPlan& backward,
                                                   const std::string& forward) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OnceDifferentiableKernel>(
      backward.input_order.size(),
      "op " + backward.op_name + " is the backward of " + forward +
          " and declares no backward of its own: to differentiate " + forward +
          " twice (create_graph=True, gradgradcheck), give its backward a \"backward\""));
}

torch::CppFunction make_autograd_kernel(const OpPlan& forward, const OpPlan& backward) {
  auto info = std::make_shared<AutogradInfo>();
  info->op_name = forward.op_name;
  info->backward_name = backward.op_name;
  info->link = link_backward(forward, backward);
  info->num_inputs = forward.input_order.size();
  info->num_outputs = forward.outputs.size();
  info->read_inputs.assign(info->num_inputs, false);
  info->read_outputs.assign(info->num_outputs, false);
  for (const BackwardLink::Source& s : info->link.sources) {
    auto i = static_cast<std::size_t>(s.index);
    if (s.kind == Kind::ForwardInput) info->read_inputs[i] = true;
    if (s.kind == Kind::ForwardOutput) info->read_outputs[i] = true;
    if (s.kind == Kind::Grad && std::find(info->grad_outputs.begin(), info->grad_outputs.end(),
                                          s.index) == info->grad_outputs.end()) {
      info->grad_outputs.push_back(s.index);
    }
  }
  std::sort(info->grad_outputs.begin(), info->grad_outputs.end());
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutogradKernel>(info));
}

}  // namespace kernelop::torch_ops::impl
