// A spec's backward (Note [backward]): its JSON form, the rules it follows, the declaration and
// link derived from the forward, and its compilation.
#include <gtest/gtest.h>

#include "kernelop/compile.hpp"
#include "kernelop/package.hpp"
#include "kernelop/spec_json.hpp"
#include "test_util.hpp"

namespace kernelop {
namespace {

using testing::expect_error;
using Kind = BackwardLink::Source::Kind;

OpDecl autograd_example(const std::string& name) {
  return testing::example("autograd/" + name);
}

TEST(Backward, JsonRoundTripsWithNestedBackwardsAndRenames) {
  OpDecl d = autograd_example("sigmoid");
  ASSERT_EQ(d.spec.backward.size(), 1u);
  const BackwardSpec& b = d.spec.backward[0];
  EXPECT_EQ(b.differentiable, std::vector<std::string>{"x"});
  ASSERT_EQ(b.spec.backward.size(), 1u);
  EXPECT_EQ(b.spec.backward[0].from, (std::map<std::string, std::string>{{"g", "grad_y"}}));
  OpDecl again = parse_op_json(print_op_json(d), d.base_dir, "again.json");
  EXPECT_EQ(again, d);
  EXPECT_NE(print_op_json(d).find("\"from\":"), std::string::npos);
}

TEST(Backward, DeclarationTakesTheForwardsDtypesAndTypeParameters) {
  OpPlan fwd = derive_plan(autograd_example("sigmoid"));
  OpDecl bwd = backward_decl(fwd);
  EXPECT_EQ(bwd.op_name, "kernelop_autograd::sigmoid_backward");
  ASSERT_EQ(bwd.spec.type_params.size(), 1u);
  EXPECT_EQ(bwd.spec.type_params[0].name, "T");
  for (const Input& in : *bwd.spec.inputs)
    EXPECT_EQ(std::get<InputDecl>(in).dtype, std::optional<DTypeDecl>(std::string("T")));
  EXPECT_EQ((*bwd.spec.outputs)[0].dtype, std::optional<DTypeDecl>(std::string("T")));
  OpPlan b = derive_plan(bwd);
  EXPECT_EQ(b.qualified_schema(),
            "kernelop_autograd::sigmoid_backward(Tensor y, Tensor grad_y) -> Tensor");
  OpPlan bb = derive_plan(backward_decl(b));
  EXPECT_EQ(bb.qualified_schema(),
            "kernelop_autograd::sigmoid_backward_backward(Tensor y, Tensor g, Tensor grad_grad_x) "
            "-> (Tensor, Tensor)");
  EXPECT_EQ(bb.instances.size(), 2u);  // float and double
}

TEST(Backward, TheLinkSaysWhatIsSavedAndWhichGradientIsWhich) {
  OpPlan fwd = derive_plan(autograd_example("sigmoid"));
  OpPlan b = derive_plan(backward_decl(fwd));
  BackwardLink l = link_backward(fwd, b);
  EXPECT_EQ(l.sources,
            (std::vector<BackwardLink::Source>{{Kind::ForwardOutput, 0}, {Kind::Grad, 0}}));
  EXPECT_EQ(l.differentiable, std::vector<int>{0});
  EXPECT_EQ(l.grad_of, std::vector<int>{0});
  // the double backward: g receives grad_y (an input of the backward op), grad_grad_x the
  // gradient of its output
  OpPlan bb = derive_plan(backward_decl(b));
  BackwardLink l2 = link_backward(b, bb);
  EXPECT_EQ(l2.sources, (std::vector<BackwardLink::Source>{
                            {Kind::ForwardInput, 0}, {Kind::ForwardInput, 1}, {Kind::Grad, 0}}));
  EXPECT_EQ(l2.differentiable, (std::vector<int>{0, 1}));
  EXPECT_EQ(l2.grad_of, (std::vector<int>{0, 1}));

  OpPlan rms = derive_plan(autograd_example("rms_norm"));
  BackwardLink l3 = link_backward(rms, derive_plan(backward_decl(rms)));
  EXPECT_EQ(l3.sources, (std::vector<BackwardLink::Source>{{Kind::ForwardInput, 0},
                                                           {Kind::ForwardInput, 1},
                                                           {Kind::ForwardOutput, 1},
                                                           {Kind::Grad, 0}}));
  EXPECT_EQ(l3.differentiable, (std::vector<int>{0, 1}));
  EXPECT_EQ(l3.grad_of, (std::vector<int>{0, 1}));
}

// rms_norm's spec with its backward edited by `edit`.
OpDecl rms_with(const std::function<void(BackwardSpec&)>& edit) {
  OpDecl d = autograd_example("rms_norm");
  edit(d.spec.backward[0]);
  return d;
}

TEST(Backward, AGradientMayBeAClonedInputWithThatInputsDtype) {
  // A recorded backward that writes its gradients over copies of its inputs (Liger's SwiGLU):
  // the clone has its input's dtype, which must be the gradient's.
  OpDecl d = rms_with([](BackwardSpec& b) { (*b.spec.outputs)[0].init = CloneInit{"x"}; });
  OpPlan fwd = derive_plan(d);
  OpDecl bwd = backward_decl(fwd);
  EXPECT_EQ((*bwd.spec.outputs)[0].dtype, std::nullopt);
  EXPECT_EQ((*bwd.spec.outputs)[1].dtype, std::optional<DTypeDecl>(std::string("T")));
  EXPECT_EQ(derive_plan(bwd).qualified_schema(),
            "kernelop_autograd::rms_norm_backward(Tensor x, Tensor weight, Tensor rstd, Tensor "
            "grad_y) -> (Tensor, Tensor)");
  expect_error(
      [] {
        OpDecl e = rms_with([](BackwardSpec& b) {
          (*b.spec.outputs)[1].init = CloneInit{"x"};
          (*b.spec.outputs)[1].shape = SameAs{"x"};
        });
        std::get<InputDecl>((*e.spec.inputs)[1]).dtype = DType::Float32;
        std::get<InputDecl>((*e.spec.backward[0].spec.inputs)[1]).dtype = DType::Float32;
        derive_plan(e);
      },
      ErrorKind::Spec,
      "op kernelop_autograd::rms_norm: backward.outputs[1].init: clones 'x', which is T, but the "
      "gradient of 'weight' is float32");
}

TEST(Backward, RulesNameTheFieldAndWhatWasExpected) {
  expect_error([] { derive_plan(rms_with([](BackwardSpec& b) { b.differentiable.clear(); })); },
               ErrorKind::Spec,
               "op kernelop_autograd::rms_norm: backward.differentiable: is empty");
  expect_error(
      [] {
        derive_plan(rms_with([](BackwardSpec& b) { b.differentiable = {"x", "eps"}; }));
      },
      ErrorKind::Spec,
      "backward.differentiable[1]: 'eps' is not a tensor input (scalars get no gradient)");
  expect_error(
      [] {
        derive_plan(rms_with([](BackwardSpec& b) { b.differentiable = {"x", "x"}; }));
      },
      ErrorKind::Spec, "backward.differentiable[1]: 'x' twice");
  expect_error(
      [] {
        derive_plan(rms_with(
            [](BackwardSpec& b) { std::get<InputDecl>((*b.spec.inputs)[2]).name = "rsdt"; }));
      },
      ErrorKind::Spec,
      "backward.inputs[2]: 'rsdt' is not a forward input, output or output gradient (known: x, "
      "weight, eps, y, grad_y, rstd, grad_rstd)");
  expect_error(
      [] { derive_plan(rms_with([](BackwardSpec& b) { b.spec.outputs->pop_back(); })); },
      ErrorKind::Spec,
      "backward.outputs: has no 'grad_weight': every differentiable input gets its gradient");
  expect_error(
      [] {
        derive_plan(rms_with([](BackwardSpec& b) { (*b.spec.outputs)[1].name = "grad_eps"; }));
      },
      ErrorKind::Spec,
      "backward.outputs[1]: 'grad_eps' is not the gradient of a differentiable input (expected: "
      "grad_x, grad_weight)");
  expect_error(
      [] {
        derive_plan(rms_with([](BackwardSpec& b) {
          std::get<InputDecl>((*b.spec.inputs)[0]).dtype = DType::Float32;
        }));
      },
      ErrorKind::Spec, "backward.inputs[0].dtype: is float32 but 'x' is T in the forward");
  expect_error(
      [] {
        derive_plan(rms_with([](BackwardSpec& b) {
          b.spec.inputs->push_back(ScalarInput{"eps", ScalarType::Float64});
        }));
      },
      ErrorKind::Spec, "scalar 'eps' is float64 but the forward's is float");
  expect_error([] { derive_plan(rms_with([](BackwardSpec& b) { b.from["w"] = "weight"; })); },
               ErrorKind::Spec, "backward.from.w: 'w' is not an input of the backward");
  expect_error(
      [] {
        derive_plan(rms_with([](BackwardSpec& b) { (*b.spec.outputs)[1].dtype = DType::Float64; }));
      },
      ErrorKind::Spec, "backward.outputs[1].dtype: is float64 but the gradient of 'weight' is T");
  expect_error(
      [] { derive_plan(rms_with([](BackwardSpec& b) { (*b.spec.outputs)[1].name = "gw"; })); },
      ErrorKind::Spec, "backward.outputs[1]: 'gw' is not the gradient of a differentiable input");
  // An integer output has no gradient to read.
  OpDecl int_out = autograd_example("rms_norm");
  (*int_out.spec.outputs)[1].dtype = DType::Int32;
  std::get<InputDecl>((*int_out.spec.backward[0].spec.inputs)[2]).name = "grad_rstd";
  expect_error([&] { derive_plan(int_out); }, ErrorKind::Spec,
               "backward.inputs[2]: 'grad_rstd' is the gradient of an output that is int32; only "
               "floating-point outputs have gradients");
  // A scalar named like a gradient would make grad_y ambiguous.
  OpDecl clash = autograd_example("rms_norm");
  std::get<ScalarInput>((*clash.spec.inputs)[2]).name = "grad_y";
  expect_error([&] { derive_plan(clash); }, ErrorKind::Spec,
               "the forward has an input or output named 'grad_y', which would also name the "
               "gradient of its output");
  // The backward is a spec like any other: its own errors name its op.
  expect_error([] { derive_plan(rms_with([](BackwardSpec& b) { b.spec.geometry.reset(); })); },
               ErrorKind::Spec, "op kernelop_autograd::rms_norm_backward: geometry: missing");
  // A forward that writes an input has a backward too (Note [written inputs with a backward]):
  // the input may be differentiable, and the backward reads the value the forward left.
  OpDecl mutated = autograd_example("rms_norm");
  std::get<InputDecl>((*mutated.spec.inputs)[1]).mutated = true;
  OpPlan written = derive_plan(mutated);
  EXPECT_TRUE(written.tensors[static_cast<std::size_t>(written.tensor_slot("weight"))].mutated);
  OpPlan written_backward = derive_plan(backward_decl(written));
  BackwardLink written_link = link_backward(written, written_backward);
  EXPECT_EQ(written_link.grad_of.size(), written_link.differentiable.size());
  // A written input that holds a result (Note [written results]): its incoming gradient is
  // grad_<input>_out, grad_<input> the gradient the backward gives it.
  OpDecl result = autograd_example("rms_norm");
  auto& weight = std::get<InputDecl>((*result.spec.inputs)[1]);
  weight.mutated = weight.result = true;
  result.spec.backward[0].from["grad_y"] = "grad_weight_out";
  OpDecl result_again = parse_op_json(print_op_json(result), result.base_dir, "again.json");
  EXPECT_EQ(result_again, result);
  EXPECT_NE(print_op_json(result).find("\"result\": true"), std::string::npos);
  OpPlan result_plan = derive_plan(result);
  BackwardLink result_link = link_backward(result_plan, derive_plan(backward_decl(result_plan)));
  EXPECT_EQ(result_link.sources.back(), (BackwardLink::Source{Kind::ResultGrad, 1}));
  OpDecl named_out = result;
  std::get<ScalarInput>((*named_out.spec.inputs)[2]).name = "weight_out";
  expect_error([&] { derive_plan(named_out); }, ErrorKind::Spec,
               "the forward has an input or output named 'weight_out', which would also name the "
               "gradient of its written result 'weight'; rename it");
  OpDecl unread = result;
  unread.spec.backward[0].from["grad_y"] = "grad_weight";
  expect_error([&] { derive_plan(unread); }, ErrorKind::Spec,
               "'grad_weight' is not a forward input, output or output gradient (known: x, weight, "
               "eps, y, grad_y, rstd, grad_rstd, grad_weight_out)");
  OpDecl unmutated = autograd_example("rms_norm");
  std::get<InputDecl>((*unmutated.spec.inputs)[1]).result = true;
  expect_error(
      [&] { derive_plan(unmutated); }, ErrorKind::Spec,
      "inputs[1].result: 'weight' is not mutated; only an input the kernel writes in place "
      "holds a result");
  OpDecl twice = autograd_example("rms_norm");
  twice.spec.backward.push_back(twice.spec.backward[0]);
  expect_error([&] { derive_plan(twice); }, ErrorKind::Spec, "an op has one backward, found 2");
  // Integer inputs get no gradient.
  OpDecl ints = autograd_example("sigmoid");
  ints.spec.type_params[0].dtypes = {DType::Float32, DType::Int32};
  expect_error([&] { derive_plan(ints); }, ErrorKind::Spec,
               "backward.differentiable[0]: 'x' is T; only floating-point tensors get gradients");
  // With the override path there are no declared outputs to name.
  expect_error(
      [] {
        derive_plan(autograd_example("sigmoid"), ValidateOptions{true, false, 0});
      },
      ErrorKind::Spec, "needs the forward's inputs and outputs declared in the spec");
}

TEST(Backward, JsonErrorsNameTheNestedPath) {
  auto with_backward = [](const std::string& backward) {
    return R"J({"op": "t::s", "kernel_name": "k", "kernel_source": "x",
      "inputs": [{"name": "x", "dtype": "float32"}],
      "outputs": [{"name": "y", "shape": {"same_as": "x"}}],
      "geometry": {"elementwise": {}}, "backward": )J" +
           backward + "}";
  };
  expect_error([&] { parse_op_json(with_backward("[]"), "", "t.json"); }, ErrorKind::Spec,
               "t.json: backward: expected a spec with \"differentiable\": [...], found array");
  expect_error([&] { parse_op_json(with_backward(R"J({"kernel_name": "b"})J"), "", "t.json"); },
               ErrorKind::Spec, "t.json: backward.differentiable: missing");
  expect_error(
      [&] {
        parse_op_json(with_backward(R"J({"differentiable": ["x"], "kernal_name": "b"})J"), "",
                      "t.json");
      },
      ErrorKind::Spec, "t.json: backward.kernal_name: unknown field");
  expect_error(
      [&] {
        parse_op_json(
            with_backward(R"J({"differentiable": ["x"], "kernel_name": "b", "kernel_source": "x",
                               "backward": {"differentiable": 3}})J"),
            "", "t.json");
      },
      ErrorKind::Spec, "t.json: backward.backward.differentiable: expected an array");
  expect_error(
      [&] {
        parse_op_json(with_backward(R"J({"differentiable": ["x"], "from": 1})J"), "", "t.json");
      },
      ErrorKind::Spec, "t.json: backward.from: expected {\"input\": \"what it receives\"}");
}

TEST(Backward, TheChainCompilesWithItsSignaturesVerified) {
  CompileOptions o;
  o.archs = {"compute_80"};
  OpPlan fwd = derive_plan(autograd_example("rms_norm"));
  CompiledImage b = compile(derive_plan(backward_decl(fwd)), o);
  EXPECT_EQ(b.lowered_names.size(), 2u);
  // A backward kernel whose signature does not follow its convention is caught like any other.
  OpDecl wrong = autograd_example("rms_norm");
  wrong.spec.backward[0].spec.extras.pop_back();
  expect_error([&] { compile(derive_plan(backward_decl(derive_plan(wrong))), o); },
               ErrorKind::Compile, "op kernelop_autograd::rms_norm_backward");
}

TEST(Backward, PackagesCarryTheChainAsFormat4) {
  CompileOptions o;
  o.archs = {"compute_80"};
  OpPlan plan = derive_plan(autograd_example("sigmoid"));
  CompiledImage image = compile(plan, o);
  std::vector<CompiledImage> chain = compile_backward(plan, o);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain[1].plan.op_name, "kernelop_autograd::sigmoid_backward_backward");
  std::string bytes = write_package_bytes(image, chain);
  EXPECT_EQ(bytes[8], 4);
  Package back = parse_package(bytes, "sigmoid.kop");
  ASSERT_EQ(back.backward.size(), 2u);
  EXPECT_EQ(back.backward[0].plan.qualified_schema(), chain[0].plan.qualified_schema());
  EXPECT_EQ(back.backward[0].lowered_names, chain[0].lowered_names);
  EXPECT_EQ(back.backward[1].images.at(0).data, chain[1].images.at(0).data);
  EXPECT_EQ(write_package_bytes(back.image, back.backward), bytes);  // deterministic
  // The chain must be the one the spec derives, all of it.
  expect_error(
      [&] { write_package_bytes(image); }, ErrorKind::Spec,
      "its package needs the compiled kernelop_autograd::sigmoid_backward (none was given)");
  expect_error(
      [&] { write_package_bytes(image, std::span(chain).subspan(0, 1)); }, ErrorKind::Spec,
      "op kernelop_autograd::sigmoid_backward: its spec declares a backward, so its package "
      "needs the compiled kernelop_autograd::sigmoid_backward_backward");
  expect_error([&] { write_package_bytes(chain[1], chain); }, ErrorKind::Spec,
               "a backward image (kernelop_autograd::sigmoid_backward) was given but the spec "
               "declares no backward");
  // A damaged backward is caught by its own checksum, named.
  std::string damaged = bytes;
  damaged[damaged.size() - 3] ^= 0x40;
  expect_error([&] { parse_package(damaged, "sigmoid.kop"); }, ErrorKind::Format,
               "package sigmoid.kop");
}

}  // namespace
}  // namespace kernelop
