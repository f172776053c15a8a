// Registration of KernelOps as PyTorch operators: schema checks, the registry, register_op.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "kernelop/spec_json.hpp"
#include "kernelop/torch.hpp"
#include "registration.hpp"

namespace kernelop::torch_ops {
namespace {

using impl::rethrow_as_torch;

std::string fingerprint(const KernelOp& op, const RegisterOptions& o, const std::string& schema) {
  const OpPlan& p = op.plan();
  return schema + "\n" + print_op_json(OpDecl{p.op_name, p.spec, ""}, JsonWriteOptions{-1, true}) +
         "\ncuda=" + (o.cuda_kernel ? "kernelop" : "caller") +
         " meta=" + (o.meta_kernel ? "kernelop" : "caller") + " backward_of=" + o.backward_of +
         " outputs=" + std::to_string(p.outputs.size()) + "\ncaller=" + o.caller_key;
}

// kernelop's kernels read the stack by position: a given schema must have the plan's shape.
void check_schema(const OpPlan& p, const std::string& text) {
  c10::FunctionSchema fs = torch::schema((p.op_name + text).c_str());
  auto fail = [&]() {
    ::kernelop::detail::ErrorStream e(ErrorKind::Spec);
    e << "op " << p.op_name << ": schema '" << text << "' does not match the spec, which derives '"
      << p.schema << "': ";
    return e;
  };
  if (fs.arguments().size() != p.input_order.size()) {
    KERNELOP_RAISE(fail()) << "it has " << fs.arguments().size() << " argument(s), the spec "
                           << p.input_order.size();
  }
  for (std::size_t i = 0; i < p.input_order.size(); ++i) {
    const c10::Argument& a = fs.arguments()[i];
    auto [is_tensor, slot] = p.input_order[i];
    bool writes = a.alias_info() && a.alias_info()->isWrite();
    if (is_tensor) {
      const TensorSlot& t = p.tensors[static_cast<std::size_t>(slot)];
      if (a.type()->kind() != c10::TypeKind::TensorType || writes != t.mutated) {
        KERNELOP_RAISE(fail()) << "argument " << i << " ('" << a.name() << "') is '"
                               << a.type()->str() << (writes ? "(a!)" : "")
                               << "' where the spec has " << (t.mutated ? "mutated " : "")
                               << "tensor input '" << t.name << "'";
      }
      continue;
    }
    const ScalarSlot& sc = p.scalars[static_cast<std::size_t>(slot)];
    c10::TypeKind want = sc.type == ScalarType::Bool ? c10::TypeKind::BoolType
                         : (sc.type == ScalarType::Float || sc.type == ScalarType::Float64)
                             ? c10::TypeKind::FloatType
                             : c10::TypeKind::IntType;
    bool int_like = want == c10::TypeKind::IntType && a.type()->kind() == c10::TypeKind::SymIntType;
    if (a.type()->kind() != want && !int_like) {
      KERNELOP_RAISE(fail()) << "argument " << i << " ('" << a.name() << "') is '"
                             << a.type()->str() << "' where the spec has "
                             << scalar_schema_type(sc.type) << " scalar '" << sc.name << "'";
    }
  }
  if (fs.returns().size() != p.num_results()) {
    KERNELOP_RAISE(fail()) << "it returns " << fs.returns().size() << " value(s), the spec "
                           << p.num_results() << " tensor(s)";
  }
  for (const c10::Argument& r : fs.returns()) {
    if (r.type()->kind() != c10::TypeKind::TensorType || r.alias_info()) {
      KERNELOP_RAISE(fail()) << "it returns '" << r.type()->str()
                             << "'; kernelop's kernels return new Tensors";
    }
  }
}

std::atomic<std::uint64_t> generation{0};
std::atomic<RemovalGuard> removal_guard{nullptr};  // set_removal_guard

// The registrations this thread is inside a call of (CallScopes, innermost last): an
// unregistration from inside one would wait for itself.
thread_local c10::SmallVector<const Registration::State*, 4> entered;

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::shared_ptr<Registration::State>>& registry() {
  static auto* r =
      new std::map<std::string, std::shared_ptr<Registration::State>>();  // lives to exit
  return *r;
}

// Note [operator anchors]: PyTorch's Python objects for an op (a torch.ops packet, an overload's
// `_op`) keep a dispatcher handle, a pointer to the op's entry, which PyTorch frees once no
// library defines or implements the name. torch.ops caches packets without a lock, so a lookup
// racing with a registration on another thread can keep such an object outside kernelop's fast
// entry; after an unregistration its handle would dangle. Every name kernelop registers gets an
// anchor for the process: a fallthrough kernel for a dispatch key no tensor of kernelop's carries
// (PrivateUse3), which keeps the entry alive. A stale object then raises PyTorch's "Tried to
// access the schema" error instead of reading freed memory, and works again once the name is
// registered again.
void anchor(const OpPlan& plan) {
  static auto* anchors = new std::map<std::string, std::unique_ptr<torch::Library>>();  // to exit
  if (anchors->count(plan.op_name)) return;
  auto library = std::make_unique<torch::Library>(torch::Library::FRAGMENT, plan.ns, std::nullopt,
                                                  __FILE__, __LINE__);
  library->impl(plan.name.c_str(), torch::dispatch(c10::DispatchKey::PrivateUse3,
                                                   torch::CppFunction::makeFallthrough()));
  (*anchors)[plan.op_name] = std::move(library);
}

// Names whose unregistration waits for calls in flight; registering one again waits for it.
std::set<std::string>& draining() {
  static auto* d = new std::set<std::string>();  // lives to exit, as the registry
  return *d;
}
std::condition_variable& drained() {
  static auto* c = new std::condition_variable();
  return *c;
}

}  // namespace

CallScope::CallScope(const Registration& registration) : CallScope(*registration.state_) {}

CallScope::CallScope(Registration::State& state) : state_(&state) {
  bool nested = std::find(entered.begin(), entered.end(), &state) != entered.end();
  entered.push_back(&state);  // first: nothing can fail once the count is up
  // Sequentially consistent, as unregister_op's store to retired and load of calls: either the
  // unregistration sees this call, or this call sees the unregistration (Note [registration
  // lifetime]). A scope nested in one of the same registration on this thread belongs to a call
  // already counted: it finishes.
  state.calls.fetch_add(1);
  if (!nested && state.retired.load()) {
    std::string name = state.op().plan().op_name;  // read while this call still holds the state
    entered.pop_back();
    state.calls.fetch_sub(1);
    state_ = nullptr;
    KERNELOP_FAIL(Launch) << "op " << name
                          << " is no longer registered (it was unregistered); register it again "
                             "and call the new registration";
  }
}

CallScope::~CallScope() {
  if (state_ == nullptr) return;
  // Scopes end in reverse order on their thread.
  for (auto it = entered.rbegin(); it != entered.rend(); ++it) {
    if (*it == state_) {
      entered.erase(std::next(it).base());
      break;
    }
  }
  state_->calls.fetch_sub(1);
}

std::uint64_t Registration::id() const {
  return state_->id;
}
bool Registration::current() const {
  return !state_->retired.load();
}
bool Registration::entered_here() const {
  return std::find(entered.begin(), entered.end(), state_.get()) != entered.end();
}

const OpPlan& Registration::plan() const {
  return state_->op().plan();
}
const KernelOp& Registration::op() const {
  return state_->op();
}
const std::string& Registration::schema() const {
  return state_->schema;
}

void Registration::on_miss(MissHandler handler) const {
  std::lock_guard lock(state_->grow_mutex);
  if (state_->on_miss) {
    KERNELOP_FAIL(Spec) << "op " << state_->op().plan().op_name << " already has a miss handler";
  }
  state_->on_miss = std::move(handler);
  state_->has_miss_handler.store(true);
}

void Registration::grow(KernelOp op) const {
  std::lock_guard lock(state_->grow_mutex);
  const OpPlan& now = state_->op().plan();
  const OpPlan& p = op.plan();
  auto backward_name = [](const OpPlan& q) {
    return q.spec.backward.empty() ? std::string() : backward_decl(q).op_name;
  };
  std::string what;
  if (p.op_name != now.op_name) {
    what = "it is op " + p.op_name;
  } else if (p.schema != now.schema) {
    what = "its schema is '" + p.schema + "', not '" + now.schema + "'";
  } else if (backward_name(p) != backward_name(now)) {
    what = "its backward is '" + backward_name(p) + "', not '" + backward_name(now) + "'";
  } else if (impl::writes_inputs(p) != impl::writes_inputs(now)) {
    what = "it writes other inputs";
  } else if (op.num_tactics() < state_->op().num_tactics()) {
    what = "it has " + std::to_string(op.num_tactics()) + " tactics, fewer than the " +
           std::to_string(state_->op().num_tactics()) + " it has now";
  } else if (p.num_results() != now.num_results()) {
    what = "it has " + std::to_string(p.num_results()) + " results, not " +
           std::to_string(now.num_results());
  }
  if (!what.empty()) {
    KERNELOP_FAIL(Spec) << "op " << now.op_name
                        << ": a registration grows only by the same op with more tactics, and "
                        << "the op given differs: " << what;
  }
  // A pinned tactic stays pinned: the tactics before are the grown op's first ones.
  if (int t = state_->op().pinned_tactic(); t >= 0 && t < op.num_tactics()) op.pin_tactic(t);
  state_->generations.push_back(std::move(op));
  state_->current.store(&state_->generations.back(), std::memory_order_release);
}

bool Registration::has_miss_handler() const {
  return state_->has_miss_handler.load();
}

std::size_t Registration::generations() const {
  std::lock_guard lock(state_->grow_mutex);
  return state_->generations.size();
}

Registration register_op(KernelOp op, const RegisterOptions& options) {
  const OpPlan& p = op.plan();
  std::string schema_text = options.schema.empty() ? p.schema : options.schema;
  if (schema_text.empty()) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name
                        << ": no schema; the spec declares no inputs, so give the schema";
  }
  if (schema_text.front() != '(') {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": schema '" << schema_text
                        << "' must start with the argument list, e.g. '(Tensor x) -> Tensor'";
  }
  if ((options.cuda_kernel || options.meta_kernel) && p.args_from_kernel) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": the spec declares no inputs, so kernelop "
                        << "cannot derive its " << (options.cuda_kernel ? "CUDA" : "Meta")
                        << " kernel; give meta_fn and eager_fn";
  }
  if (options.meta_kernel && p.has_external_outputs()) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": its output shapes come from a meta_fn, "
                        << "so kernelop cannot register a Meta kernel for it";
  }
  if (options.cuda_kernel && !p.args_from_kernel && !p.geometry) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name
                        << ": the spec has no geometry, so kernelop cannot derive its CUDA "
                           "kernel; give eager_fn";
  }
  try {
    if ((options.cuda_kernel || options.meta_kernel) && !options.schema.empty()) {
      check_schema(p, options.schema);
    } else if (!options.schema.empty()) {
      (void)torch::schema((p.op_name + options.schema).c_str());  // a parse error names the text
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // the schema parser's ErrorReport
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": schema '" << options.schema
                        << "' is not a valid PyTorch schema: " << e.what();
  }
  // The backward: given exactly when the spec declares one, and the op derived from it.
  std::shared_ptr<Registration::State> backward_state;
  if (!p.spec.backward.empty() || !options.backward_op.empty()) {
    if (p.spec.backward.empty()) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": a backward op ('" << options.backward_op
                          << "') is given but the spec declares no backward";
    }
    OpDecl want = backward_decl(p);
    if (options.backward_op != want.op_name) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": its spec declares a backward, registered as '"
                          << want.op_name << "' before the op"
                          << (options.backward_op.empty()
                                  ? std::string(" (none was given)")
                                  : "; given '" + options.backward_op + "'");
    }
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(want.op_name);
    // (the op it was registered as: Note [first-use growth])
    if (it == registry().end() || !(it->second->first->plan().spec == want.spec)) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": its backward '" << want.op_name << "' is "
                          << (it == registry().end() ? "not registered through kernelop"
                                                     : "registered with another spec");
    }
    backward_state = it->second;
  }
  std::string print = fingerprint(op, options, schema_text);
  std::unique_lock lock(registry_mutex());
  if (draining().count(p.op_name) && !entered.empty()) {
    // The unregistration waits for the calls in flight, this thread's among them.
    KERNELOP_FAIL(Spec) << "op " << p.op_name
                        << " cannot be registered from inside a call of a kernelop op while its "
                           "previous registration is being unregistered: register it after the "
                           "call returns";
  }
  drained().wait(lock, [&] { return draining().count(p.op_name) == 0; });
  // The backward checked above may have been unregistered meanwhile (the lock was released).
  if (backward_state) {
    auto it = registry().find(backward_state->op().plan().op_name);
    if (it == registry().end() || it->second != backward_state) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": its backward '"
                          << backward_state->op().plan().op_name
                          << "' was unregistered while this op was being registered";
    }
  }
  if (auto it = registry().find(p.op_name); it != registry().end()) {
    if (it->second->fingerprint == print) return Registration(it->second, false);
    KERNELOP_FAIL(Spec) << "op " << p.op_name << " is already registered by kernelop as '"
                        << it->second->schema
                        << "' with a different spec, schema, functions or build options; this "
                           "registration gives '"
                        << p.op_name << schema_text << "'. Use another name, or the same arguments";
  }
  auto state = std::make_shared<Registration::State>(std::move(op), std::move(print));
  const OpPlan& plan = state->op().plan();
  state->schema = plan.op_name + schema_text;
  // Built in local objects: if any step throws, their destructors undo the steps before it.
  auto library = std::make_unique<torch::Library>(torch::Library::FRAGMENT, plan.ns, std::nullopt,
                                                  __FILE__, __LINE__);
  auto definition = std::make_unique<torch::Library>(torch::Library::FRAGMENT, plan.ns,
                                                     std::nullopt, __FILE__, __LINE__);
  try {
    // The kernels first and the schema last, in a library of its own that goes first: an op is
    // visible to lookups (torch.ops, a dispatcher handle) only with all its kernels (Note
    // [registration lifetime]). Kernels go only to an op kernelop defines: another library's op
    // of this name is refused first.
    if (auto h = c10::Dispatcher::singleton().findSchema({plan.op_name, ""}); h && h->hasSchema()) {
      std::ostringstream s;
      s << h->schema();
      KERNELOP_FAIL(Spec) << "op " << plan.op_name
                          << ": PyTorch refused the registration (already defined as '" << s.str()
                          << "')";
    }
    if (options.cuda_kernel) {
      library->impl(plan.name.c_str(),
                    torch::dispatch(c10::DispatchKey::CUDA, impl::make_cuda_kernel(state.get())));
    }
    if (options.meta_kernel) {
      library->impl(plan.name.c_str(),
                    torch::dispatch(c10::DispatchKey::Meta, impl::make_meta_kernel(state.get())));
    }
    library->impl(plan.name.c_str(),
                  torch::dispatch(c10::DispatchKey::CPU, impl::make_cpu_kernel(state.get())));
    if (backward_state) {
      library->impl(plan.name.c_str(),
                    torch::dispatch(c10::DispatchKey::Autograd,
                                    impl::make_autograd_kernel(state.get(), plan, backward_state)));
    } else if (!options.backward_of.empty()) {
      library->impl(
          plan.name.c_str(),
          torch::dispatch(c10::DispatchKey::Autograd, impl::make_once_differentiable_kernel(
                                                          state.get(), plan, options.backward_of)));
    } else if (impl::writes_inputs(plan)) {
      library->impl(plan.name.c_str(),
                    torch::dispatch(c10::DispatchKey::Autograd,
                                    impl::make_written_without_backward_kernel(state.get(), plan)));
    }
    if (impl::writes_inputs(plan)) {
      library->impl(plan.name.c_str(),
                    torch::dispatch(c10::DispatchKey::ADInplaceOrView,
                                    impl::make_written_versions_kernel(state.get(), plan)));
    }
    // Note [host reads]: an op that synchronises on a tensor's value is no graph node.
    const std::vector<at::Tag> tags = reads_on_host(plan.spec)
                                          ? std::vector<at::Tag>{at::Tag::cudagraph_unsafe}
                                          : std::vector<at::Tag>{};
    definition->def((plan.name + schema_text).c_str(), tags);
  } catch (const c10::Error& e) {
    std::string existing;
    if (auto h = c10::Dispatcher::singleton().findSchema({plan.op_name, ""}); h && h->hasSchema()) {
      std::ostringstream s;
      s << h->schema();
      existing = s.str();
    }
    definition.reset();
    library.reset();
    KERNELOP_FAIL(Spec) << "op " << plan.op_name << ": PyTorch refused the registration"
                        << (existing.empty() ? "" : " (already defined as '" + existing + "')")
                        << ": " << e.what_without_backtrace();
  }
  try {
    anchor(plan);  // under the registry's mutex (Note [operator anchors])
  } catch (const c10::Error& e) {
    definition.reset();
    library.reset();
    KERNELOP_FAIL(Spec) << "op " << plan.op_name
                        << ": PyTorch refused the registration: " << e.what_without_backtrace();
  }
  state->library = std::move(library);
  state->definition = std::move(definition);
  state->backward_op = options.backward_op;
  state->id = generation.fetch_add(1, std::memory_order_acq_rel) + 1;
  registry()[plan.op_name] = state;
  return Registration(state, true);
}

Registration register_with_backward(KernelOp op, std::vector<KernelOp> chain,
                                    const RegisterOptions& options) {
  const OpPlan& p = op.plan();
  const OpPlan& last = chain.empty() ? p : chain.back().plan();
  if (!last.spec.backward.empty()) {
    KERNELOP_FAIL(Spec) << "op " << p.op_name << ": " << last.op_name
                        << " declares a backward, but its backward chain was given " << chain.size()
                        << " op(s)";
  }
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const OpPlan& forward = i == 0 ? p : chain[i - 1].plan();
    if (!derives_backward(forward, chain[i].plan())) {
      KERNELOP_FAIL(Spec) << "op " << p.op_name << ": backward chain link " << i << " ("
                          << chain[i].plan().op_name << ") is not the backward " << forward.op_name
                          << " declares";
    }
  }
  // Each link's options, named before any KernelOp is moved into its registration.
  std::vector<RegisterOptions> links(chain.size());
  for (std::size_t i = 0; i < chain.size(); ++i) {
    links[i].backward_of = i == 0 ? p.op_name : chain[i - 1].plan().op_name;
    if (i + 1 < chain.size()) links[i].backward_op = chain[i + 1].plan().op_name;
  }
  RegisterOptions with = options;
  if (!chain.empty()) with.backward_op = chain[0].plan().op_name;
  std::vector<std::string> created;  // what this call registered, the deepest first
  try {
    for (std::size_t i = chain.size(); i-- > 0;) {
      Registration r = register_op(std::move(chain[i]), links[i]);
      if (r.created()) created.push_back(r.plan().op_name);
    }
    Registration r = register_op(std::move(op), with);
    if (r.created()) created.push_back(r.plan().op_name);
    return r;
  } catch (...) {
    // Nothing half-registered: what this call added goes, the forward-most first; ops that
    // existed before (an identical registration) stay.
    for (auto it = created.rbegin(); it != created.rend(); ++it) unregister_op(*it);
    throw;
  }
}

void Registration::keep_alive(std::shared_ptr<void> owner) const {
  std::shared_ptr<void> previous;  // released outside the lock: it may run the owner's code
  std::lock_guard lock(registry_mutex());
  previous = std::exchange(state_->owned, std::move(owner));
}

void set_removal_guard(RemovalGuard guard) {
  removal_guard.store(guard);
}

void unregister_op(const std::string& op_name) {
  std::shared_ptr<Registration::State> state;
  {
    std::unique_lock lock(registry_mutex());
    if (!entered.empty()) {
      // A wait for calls in flight from inside one could wait for itself, or for a call that
      // waits for this thread.
      KERNELOP_FAIL(Spec) << "op " << op_name
                          << " cannot be unregistered from inside a call of a kernelop op (e.g. "
                             "from a meta_fn or eager_fn): unregister it after the call returns";
    }
    // Another thread is unregistering it: done once that has finished.
    drained().wait(lock, [&] { return draining().count(op_name) == 0; });
    auto it = registry().find(op_name);
    if (it == registry().end()) return;
    for (const auto& [name, other] : registry()) {
      if (other->backward_op == op_name) {
        KERNELOP_FAIL(Spec) << "op " << op_name << " is the backward of " << name
                            << ", which is registered: unregister " << name << " first";
      }
    }
    draining().insert(op_name);  // first: nothing below throws
    state = it->second;
    // No new call enters from here on; registering the name again waits (draining) until the
    // dispatcher has forgotten this registration and the caller's functions are released.
    state->retired.store(true);
    generation.fetch_add(1, std::memory_order_release);  // entries made for it look again
    registry().erase(it);
  }
  // Calls in flight finish first (Note [registration lifetime]); without the registry's mutex,
  // which they may take (an eager_fn looking up a registration).
  for (int spins = 0; state->calls.load() != 0; ++spins) {
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // The schema first: no lookup finds the op from here on; then the kernels.
  auto remove = [](void* s) {
    auto* st = static_cast<Registration::State*>(s);
    st->definition.reset();
    st->library.reset();
  };
  if (RemovalGuard guard = removal_guard.load()) {
    guard(remove, state.get());
  } else {
    remove(state.get());
  }
  // The caller's functions (a Python Library with a meta_fn or eager_fn) go before the name is
  // free again: a registration waiting for it must not meet them. Released without the lock:
  // releasing them may run the owner's code (and take the GIL).
  std::shared_ptr<void> owned;
  {
    std::lock_guard lock(registry_mutex());
    owned = std::move(state->owned);
  }
  owned.reset();
  // The miss handler too (Note [first-use growth]: a Python handler holds the registration, a
  // cycle until it goes); no call is in flight any more.
  MissHandler handler;
  {
    std::lock_guard lock(state->grow_mutex);
    handler = std::move(state->on_miss);
    state->on_miss = nullptr;
    state->has_miss_handler.store(false);
  }
  handler = nullptr;
  std::lock_guard lock(registry_mutex());
  draining().erase(op_name);
  drained().notify_all();
}

Registration find_registration(const std::string& op_name) {
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(op_name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& [name, state] : registry()) known += (known.empty() ? "" : ", ") + name;
    KERNELOP_FAIL(Spec) << "no op " << op_name << " was registered through kernelop (registered: "
                        << (known.empty() ? "none" : known) << ")";
  }
  return Registration(it->second, false);
}

std::uint64_t registry_generation() {
  return generation.load(std::memory_order_acquire);
}

std::uint64_t registration_id(const std::string& op_name) {
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(op_name);
  return it == registry().end() ? 0 : it->second->id;
}

void* current_stream(int device) {
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
  return guard.getStream(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)))
      .native_handle();
}

bool is_registered(const std::string& op_name) {
  std::lock_guard lock(registry_mutex());
  return registry().count(op_name) > 0;
}

}  // namespace kernelop::torch_ops
