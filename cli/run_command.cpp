// `kernelop run`: inputs, launch, reference check and timing.
#include "run_command.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <type_traits>
#include <variant>

#include "kernelop/compile.hpp"
#include "kernelop/device.hpp"
#include "kernelop/host_tensor.hpp"
#include "kernelop/numbers.hpp"
#include "kernelop/package.hpp"
#include "kernelop/runtime.hpp"
#include "kernelop/spec_json.hpp"
#include "kernelop/tuning.hpp"

namespace kernelop::cli {
namespace {

std::map<std::string, std::string> parse_pairs(const std::vector<std::string>& items,
                                               const char* option) {
  std::map<std::string, std::string> out;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      KERNELOP_FAIL(Spec) << option << " '" << item << "': expected NAME=VALUE";
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

Shape parse_shape(const std::string& name, const std::string& text) {
  Shape s;
  if (text.empty() || text == "scalar") return s;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, 'x');) {
    try {
      std::size_t used = 0;
      long long v = std::stoll(part, &used);
      if (used != part.size() || v < 0) throw std::invalid_argument(part);
      s.push_back(v);
    } catch (const std::logic_error&) {
      KERNELOP_FAIL(Spec) << "--shape " << name << "=" << text
                          << ": expected sizes like 4096 or 64x1024";
    }
  }
  return s;
}

std::string scalar_text_of(const ScalarArg& a) {
  switch (a.kind) {
    case ScalarArg::Kind::Float: {
      std::ostringstream s;
      s << std::setprecision(17) << a.f;
      return s.str();
    }
    case ScalarArg::Kind::Int:
      return std::to_string(a.i);
    case ScalarArg::Kind::Bool:
      return a.b ? "true" : "false";
  }
  return "";
}

// The scalars of a run: each given one parsed whole as its declared type (Note [numbers from
// users]); an omitted one takes the spec's default, else it is required.
std::vector<ScalarArg> parse_scalars(const OpPlan& plan,
                                     const std::map<std::string, std::string>& given) {
  for (const auto& [name, text] : given) {
    bool known = false;
    for (const ScalarSlot& s : plan.scalars) known = known || s.name == name;
    if (!known) {
      std::string names;
      for (const ScalarSlot& s : plan.scalars) names += (names.empty() ? "" : ", ") + s.name;
      KERNELOP_FAIL(Spec) << "--scalar " << detail::shorten(name) << "=...: op " << plan.op_name
                          << " has no scalar of that name (its scalars: "
                          << (names.empty() ? "none" : names) << ")";
    }
  }
  std::vector<ScalarArg> out;
  std::string missing;
  for (const ScalarSlot& s : plan.scalars) {
    auto it = given.find(s.name);
    if (it == given.end()) {
      if (!s.default_value) {
        missing += (missing.empty() ? "" : ", ") + s.name;
        continue;
      }
      std::visit(
          [&](auto v) {
            using V = decltype(v);
            if constexpr (std::is_same_v<V, bool>) {
              out.push_back(ScalarArg::of_bool(v));
            } else if constexpr (std::is_same_v<V, std::int64_t>) {
              out.push_back(ScalarArg::of_int(v));
            } else {
              out.push_back(ScalarArg::of_float(v));
            }
          },
          *s.default_value);
      continue;
    }
    const std::string& v = it->second;
    bool ok = false;
    switch (s.type) {
      case ScalarType::Float:
      case ScalarType::Float64:
        if (auto d = parse_double(v)) {
          out.push_back(ScalarArg::of_float(*d));
          ok = true;
        }
        break;
      case ScalarType::Int:
      case ScalarType::Int64:
        if (auto i = parse_int64(v)) {
          out.push_back(ScalarArg::of_int(*i));
          ok = true;
        }
        break;
      case ScalarType::Bool:
        if (auto b = parse_bool(v)) {
          out.push_back(ScalarArg::of_bool(*b));
          ok = true;
        }
        break;
    }
    if (!ok) {
      KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": --scalar " << s.name << "='"
                          << detail::shorten(v) << "' is not a valid " << scalar_type_name(s.type)
                          << (s.type == ScalarType::Bool ? " (expected true, false, 1 or 0)"
                              : (s.type == ScalarType::Int || s.type == ScalarType::Int64)
                                  ? " (expected a decimal integer like -3 or 4096)"
                                  : " (expected a number like 2.5 or 1e-3)");
    }
  }
  if (!missing.empty()) {
    KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": give the value of every scalar without a "
                        << "default with --scalar NAME=VALUE; missing: " << missing;
  }
  return out;
}

KernelOp load_op(const RunOptions& o) {
  LoadOptions load;
  load.prefer_ptx = o.prefer_ptx;
  load.prefer_tileir = o.prefer_tileir;
  load.log = o.tune;
  if (o.path.size() > 4 && o.path.substr(o.path.size() - 4) == ".kop")
    return KernelOp::from_package(o.path, load);
  CompileOptions c;
  c.archs = o.archs;
  return KernelOp(compile(derive_plan(load_op_file(o.path)), c), load);
}

std::string fmt_time(double ms) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(ms < 0.1 ? 2 : 1);
  if (ms < 1) {
    s << ms * 1000 << " us";
  } else {
    s << ms << " ms";
  }
  return s.str();
}

}  // namespace

int run_op(const RunOptions& o, FindReference references) {
  KernelOp op = load_op(o);
  const OpPlan& plan = op.plan();
  if (o.tactic) op.pin_tactic(*o.tactic);  // its range checked here, before any device
  auto shapes = parse_pairs(o.shapes, "--shape");
  auto scalar_text = parse_pairs(o.scalars, "--scalar");
  auto dtype_text = parse_pairs(o.dtypes, "--dtype");

  // Inputs: shapes from the command line, dtypes declared, bound or chosen with --dtype.
  std::vector<HostTensor> inputs;
  std::string missing;
  for (int i = 0; i < plan.num_tensor_inputs; ++i) {
    const TensorSlot& t = plan.tensors[static_cast<std::size_t>(i)];
    auto it = shapes.find(t.name);
    if (it == shapes.end()) {
      missing += (missing.empty() ? "" : ", ") + t.name;
      continue;
    }
    DType dtype = DType::Float32;
    if (auto d = dtype_text.find(t.name); d != dtype_text.end()) {
      auto parsed = parse_dtype(d->second);
      if (!parsed)
        KERNELOP_FAIL(Spec) << "--dtype " << t.name << "=" << d->second << ": not a dtype";
      dtype = *parsed;
    } else if (t.dtype && std::holds_alternative<DType>(*t.dtype)) {
      dtype = std::get<DType>(*t.dtype);
    } else if (t.dtype) {  // a type parameter: its first dtype unless chosen
      for (const auto& tp : plan.type_params) {
        if (tp.name == std::get<std::string>(*t.dtype)) dtype = tp.dtypes.front();
      }
    }
    inputs.emplace_back(parse_shape(t.name, it->second), dtype);
  }
  if (!missing.empty()) {
    KERNELOP_FAIL(Spec) << "op " << plan.op_name
                        << ": give the shape of every tensor input with --shape NAME=DxD...; "
                        << "missing: " << missing;
  }
  std::vector<ScalarArg> scalars = parse_scalars(plan, scalar_text);
  for (const auto& [name, text] : shapes) {
    bool known = false;
    for (int i = 0; i < plan.num_tensor_inputs; ++i)
      known = known || plan.tensors[static_cast<std::size_t>(i)].name == name;
    if (!known) {
      KERNELOP_FAIL(Spec) << "--shape " << detail::shorten(name) << "=...: op " << plan.op_name
                          << " has no tensor input of that name";
    }
  }
  if (!scalars.empty()) {
    std::cout << "  scalars ";
    for (std::size_t i = 0; i < scalars.size(); ++i) {
      const ScalarSlot& s = plan.scalars[i];
      std::cout << (i ? ", " : "") << s.name << "=" << scalar_text_of(scalars[i])
                << (scalar_text.count(s.name) ? "" : " (default)");
    }
    std::cout << "\n";
  }

  const HostReference* ref = references ? references(plan.op_name) : nullptr;
  std::mt19937_64 rng(o.seed ? o.seed : std::random_device{}());
  if (ref && ref->make_inputs) {
    ref->make_inputs(inputs, rng);
  } else {
    default_inputs(inputs, rng);
  }

  // Device buffers and views.
  DeviceContext context(o.device);
  std::vector<DeviceBuffer> in_buffers;
  std::vector<TensorView> in_views;
  for (const HostTensor& h : inputs) {
    in_buffers.emplace_back(h.bytes());
    in_buffers.back().upload(h.encode().data(), h.bytes());
    in_views.push_back(TensorView{in_buffers.back().get(), h.dtype, h.shape, {}, o.device});
  }
  std::vector<Shape> out_shapes = op.output_shapes(in_views, scalars);
  std::vector<DType> out_dtypes = op.output_dtypes(in_views);
  std::vector<HostTensor> outputs;
  std::vector<DeviceBuffer> out_buffers;
  std::vector<TensorView> out_views;
  for (std::size_t i = 0; i < out_shapes.size(); ++i) {
    outputs.emplace_back(out_shapes[i], out_dtypes[i]);
    out_buffers.emplace_back(outputs.back().bytes());
    out_buffers.back().fill_bytes(0xff);  // NaN poison: an unwritten element fails the check
    out_views.push_back(
        TensorView{out_buffers.back().get(), out_dtypes[i], out_shapes[i], {}, o.device});
  }
  DeviceStream stream;
  // The uploads and the poison ran on the legacy default stream, which `stream` does not wait for.
  context.synchronize();
  LoadInfo info = op.load(o.device);
  std::cout << "op " << plan.op_name << " on device " << info.device << " (" << info.device_name
            << ", " << info.device_arch << "): "
            << (info.via_ptx      ? "PTX "
                : info.via_tileir ? "Tile IR "
                                  : "CUBIN ")
            << info.image_arch
            << (info.via_ptx || info.via_tileir ? " through the driver's JIT" : "")
            << ", loaded in " << fmt_time(info.load_ms) << "\n";
  std::cout << "  inputs  ";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::cout << (i ? ", " : "") << plan.tensors[i].name << ": " << dtype_name(inputs[i].dtype)
              << inputs[i].shape.to_string();
  }
  std::cout << "\n";

  int exit_code = 0;
  auto report_tactic = [&] {
    if (!plan.is_tuned()) return;
    TuningStats st = op.tuning_stats();
    int t = op.last_tactic();
    std::cout << "  tactic  " << t << " (" << op.tactic_text(t) << ") of " << op.num_tactics()
              << ": "
              << (st.pinned       ? "pinned"
                  : st.single     ? "the only eligible one"
                  : st.tunings    ? "tuned now"
                  : st.table_hits ? "from the tuning table"
                                  : "the first eligible (no tuning)")
              << "; " << st.timed_runs << " timing runs\n";
  };
  if (o.check || o.tune) {
    op.launch(in_views, scalars, out_views, stream.get());
    stream.synchronize();
    report_tactic();
  }
  if (o.check) {
    if (!ref) {
      std::cout << "  check   no reference for " << plan.op_name << "\n";
      exit_code = 1;
    } else {
      std::vector<HostTensor> want_in = inputs, want_out = outputs;
      ref->compute(want_in, scalars, want_out);
      double extra = ref->extra_atol ? ref->extra_atol(inputs) : 0;
      auto report = [&](const std::string& what, const DeviceBuffer& buf, HostTensor got,
                        const HostTensor& want) {
        std::string bytes(got.bytes(), '\0');
        buf.download(bytes.data(), bytes.size());
        got.decode(bytes);
        Comparison c = compare(got, want, extra);
        std::cout << "  check   " << what << ": " << (c.passed() ? "PASS" : "FAIL")
                  << "  max |error| " << c.max_abs_error << " over " << want.numel()
                  << " elements\n";
        if (!c.passed()) exit_code = 1;
      };
      auto check_all = [&](const std::string& prefix) {
        for (std::size_t i = 0; i < outputs.size(); ++i) {
          report(prefix + "output " +
                     plan.tensors[static_cast<std::size_t>(plan.outputs[i].slot)].name,
                 out_buffers[i], outputs[i], want_out[i]);
        }
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          if (plan.tensors[i].mutated) {
            report(prefix + "mutated input " + plan.tensors[i].name, in_buffers[i], inputs[i],
                   want_in[i]);
          }
        }
      };
      check_all("");
      // A tuned op: every tactic that can run these inputs gives the reference's result.
      bool mutates = std::any_of(plan.tensors.begin(), plan.tensors.end(),
                                 [](const TensorSlot& t) { return t.mutated; });
      for (int t = 0; plan.is_tuned() && !mutates && !o.tactic && t < op.num_tactics(); ++t) {
        for (auto& b : out_buffers) b.fill_bytes(0xff);
        context.synchronize();
        op.pin_tactic(t);
        try {
          op.launch(in_views, scalars, out_views, stream.get());
        } catch (const Error& e) {
          const std::string& m = e.message();
          if (m.find("cannot run these inputs") == std::string::npos) throw;
          std::cout << "  check   tactic " << t << " (" << op.tactic_text(t)
                    << "): not eligible for these inputs\n";
          continue;
        }
        stream.synchronize();
        check_all("tactic " + std::to_string(t) + " (" + op.tactic_text(t) + ") ");
      }
      if (plan.is_tuned() && !o.tactic) op.pin_tactic(-1);
    }
  }
  if (o.tune) {
    for (const TuningTable& t : op.tuning_tables()) {
      std::cout << "  tuning  " << t.device << " (" << t.arch << "): " << t.entries.size()
                << " key(s)\n";
    }
    if (!o.tuning_out.empty()) {
      std::vector<TuningTable> tables = read_tuning_file(o.tuning_out);
      for (const TuningTable& mine : op.tuning_tables()) merge_tuning_table(tables, mine);
      write_tuning_file(o.tuning_out, tables);
      std::cout << "  tuning  written to " << o.tuning_out << "\n";
    }
    return exit_code;
  }

  // Timing: each launch bracketed by events, median of many, after a warm-up. A tuned op runs
  // the tactic it chose (tuning happens in the first launch).
  for (int i = 0; i < o.warmup; ++i) op.launch(in_views, scalars, out_views, stream.get());
  std::vector<float> times;
  DeviceEvent start, stop;
  for (int i = 0; i < o.iterations; ++i) {
    start.record(stream);
    op.launch(in_views, scalars, out_views, stream.get());
    stop.record(stream);
    times.push_back(stop.since(start));
  }
  std::sort(times.begin(), times.end());
  double median = times.empty() ? 0 : times[times.size() / 2];
  double bytes = 0;
  for (const auto& h : inputs) bytes += static_cast<double>(h.bytes());
  for (const auto& h : outputs) bytes += static_cast<double>(h.bytes());
  std::cout
      << "  time    median " << fmt_time(median) << " over " << o.iterations << " launches (min "
      << fmt_time(times.empty() ? 0 : times.front()) << "), " << std::fixed << std::setprecision(1)
      << (median > 0 ? bytes / (median * 1e-3) / 1e9 : 0) << " GB/s (" << bytes / 1e6
      << " MB: each input and output byte once; an op that touches part of a tensor moves less)\n";
  return exit_code;
}

namespace {

// The options `run` and `tune` share: the op, its inputs, where to compile and run it.
void add_input_options(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("op", o.path, "A .kop package or a JSON spec")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--shape", o.shapes, "Input shape, e.g. x=4096 or x=64x1024 (repeatable)");
  cmd->add_option("--scalar", o.scalars, "Scalar value, e.g. alpha=2.5 (repeatable)");
  cmd->add_option("--dtype", o.dtypes, "Input dtype for dtype-generic kernels, e.g. x=float16");
  cmd->add_option("--arch", o.archs, "Architectures when compiling a spec");
  cmd->add_option("--device", o.device, "CUDA device (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o.seed, "Random seed for the inputs (default: random)");
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& o, FindReference references) {
  auto* run = app.add_subcommand(
      "run", std::string("Launch an op on random inputs on a GPU and time it with CUDA events") +
                 (references ? "; optionally check it against its CPU reference" : ""));
  add_input_options(run, o);
  if (references) run->add_flag("--check", o.check, "Compare against the op's CPU reference");
  run->add_flag("--ptx", o.prefer_ptx,
                "Load the PTX through the driver's JIT even if a CUBIN fits");
  run->add_flag("--tileir", o.prefer_tileir,
                "Give the driver the Tile IR bytecode (cuTile's ops) even if a CUBIN fits");
  run->add_option("--iterations", o.iterations, "Timed launches (default 200)")
      ->check(CLI::PositiveNumber);
  run->add_option("--warmup", o.warmup, "Untimed launches first (default 20)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--tactic", o.tactic, "Pin this tactic of a tuned op (default: choose)");
  return run;
}

CLI::App* add_tune_command(CLI::App& app, RunOptions& o) {
  auto* tune = app.add_subcommand(
      "tune",
      "Tune a tuned op for input shapes on a GPU ahead of time: the tables persist "
      "beside the compile cache and, with --output, in a file for `build --tuning`");
  add_input_options(tune, o);
  tune->add_option("-o,--output", o.tuning_out,
                   "Also write the op's tuning tables to this JSON file (merged with it)");
  tune->callback([&o] { o.tune = true; });
  return tune;
}

int guarded_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const Error& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << program << ": error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << program << ": error: unknown failure\n";
  }
  return 1;
}

}  // namespace kernelop::cli
