// Note [fast Python entry]: calling torch.ops.<ns>.<op>(...) from Python goes through PyTorch's
// generic operator entry: the OpOverload's Python __call__, pybind11's dispatcher, a scan for
// __torch_function__, the schema match of every argument, and the op's namespace and name
// rebuilt as strings on every call, before the boxed call into the dispatcher. For a small
// kernelop op that is several microseconds a call, more than the op's own C++ work (measured in
// bench/autograd_bench.py and bench/torch_bench.py). kernelop installs, as the `_op` that its
// OpOverloadPacket and OpOverload call, a FastEntry: a CPython callable that puts plain
// positional arguments (tensors, Python floats, ints and bools; defaults from the schema) straight
// on the stack and makes the same boxed call, with the GIL released, as PyTorch's entry does.
// Everything else goes to PyTorch's own entry, unchanged: keyword arguments (and keyword-only
// parameters), a torch-function mode, a tensor with __torch_function__ (subclasses, tracing, fake
// tensors), named tensors, numpy scalars, SymInts, None, a wrong type or count. Behaviour,
// messages and exception types are therefore PyTorch's; errors raised inside the call go through
// PyTorch's own translator (and warnings, as with PyTorch's entry, to c10's handler).
//
// An entry serves the registration it was made for (torch_ops::registration_id): the dispatcher
// handle is looked up again whenever the adapter's registry_generation() changes, and once the
// op is unregistered or registered again the entry refuses every call with a message, where
// PyTorch's entry would call through the handle it kept, which no longer exists
// (python/kernelop/_ops.py drops such packets from torch.ops so that a new lookup is fresh).
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <Python.h>
#include <structmember.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fast_entry.hpp"
#include "kernelop/torch.hpp"

namespace kernelop::python {
namespace {

enum class ArgKind : std::uint8_t { Tensor, Float, Int, Bool };

// What a call needs of the op, resolved from the dispatcher by name. Immutable once made: a call
// keeps the one it started with while a later call (another thread, or the op's own Python code
// calling back) resolves anew.
struct Resolved {
  std::uint64_t generation = 0;
  bool current = false;  // the op is still the registration the entry was made for
  // Kept while resolved: each call enters it (Note [registration lifetime]), so that the
  // handle stays valid until the call returns, whatever other threads unregister meanwhile.
  std::optional<torch_ops::Registration> registration;
  std::optional<c10::OperatorHandle> handle;
  std::vector<ArgKind> kinds;  // the positional parameters
  std::vector<std::optional<c10::IValue>> defaults;
  std::size_t returns = 0;
  bool usable = false;  // current, and every parameter and return of a kind the entry takes
};

struct FastEntry {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fallback;  // PyTorch's own entry (owned)
  c10::OperatorName* name;
  std::shared_ptr<const Resolved>* resolved;
  std::uint64_t id;                  // the registration the entry serves (registration_id())
  torch_ops::Registration* serves;   // that registration (owned)
  unsigned long long taken, passed;  // calls made here, calls handed to PyTorch's entry
};

PyTypeObject* entry_type = nullptr;  // made by init_fast_entry()
PyObject* disabled_impl = nullptr;   // torch._C._disabled_torch_function_impl

// Reads the registry and the dispatcher; never throws (it runs inside C callbacks).
// `inside`: the registration this thread is inside a call of, being unregistered; a call nested
// in that one (a dispatch mode calling the op again) belongs to it and finishes: its dispatcher
// entries stay until the outer call has returned (Note [registration lifetime]).
std::shared_ptr<const Resolved> resolve(const c10::OperatorName& name, std::uint64_t id,
                                        const torch_ops::Registration* inside = nullptr) noexcept {
  try {
    auto r = std::make_shared<Resolved>();
    r->generation = torch_ops::registry_generation();
    if (inside != nullptr) {
      r->registration = *inside;
      r->current = true;
    } else {
      if (torch_ops::registration_id(name.name) != id) return r;
      r->registration = torch_ops::find_registration(name.name);
      r->current = r->registration->id() == id;
    }
    if (!r->current) return r;
    r->handle = c10::Dispatcher::singleton().findOp(name);
    // An unregistration that began meanwhile changed the generation: resolved again next call.
    if (!r->handle || !r->handle->hasSchema() ||
        (inside == nullptr && torch_ops::registry_generation() != r->generation)) {
      r->current = torch_ops::registration_id(name.name) == id;
      return r;
    }
    const c10::FunctionSchema& s = r->handle->schema();
    if (s.is_vararg() || s.is_varret()) return r;
    for (const c10::Argument& a : s.arguments()) {
      if (a.kwarg_only()) {                // PyTorch's entry refuses them by position
        if (!a.default_value()) return r;  // a required keyword: every call is PyTorch's
        continue;
      }
      switch (a.type()->kind()) {
        case c10::TypeKind::TensorType:
          r->kinds.push_back(ArgKind::Tensor);
          break;
        case c10::TypeKind::FloatType:
          r->kinds.push_back(ArgKind::Float);
          break;
        case c10::TypeKind::IntType:
        case c10::TypeKind::SymIntType:
          r->kinds.push_back(ArgKind::Int);
          break;
        case c10::TypeKind::BoolType:
          r->kinds.push_back(ArgKind::Bool);
          break;
        default:
          return r;
      }
      r->defaults.push_back(a.default_value());
    }
    // Keyword-only parameters after the positional ones take their defaults.
    for (const c10::Argument& a : s.arguments()) {
      if (a.kwarg_only()) r->defaults.push_back(a.default_value());
    }
    for (const c10::Argument& ret : s.returns()) {
      if (ret.type()->kind() != c10::TypeKind::TensorType) return r;
    }
    r->returns = s.returns().size();
    r->usable = true;
    return r;
  } catch (...) {
    return std::make_shared<Resolved>();  // unusable, not current: calls are refused or passed
  }
}

// A tensor PyTorch's entry passes as it is: a torch.Tensor, or a subclass whose
// __torch_function__ is torch._C._disabled_torch_function_impl (nn.Parameter), without names
// (PyTorch's entry refuses named tensors). Any other subclass may override the call.
bool plain_tensor(PyObject* o) {
  if (!THPVariable_CheckExact(o)) {
    if (!THPVariable_Check(o) || disabled_impl == nullptr) return false;
    PyObject* f = PyObject_GetAttrString(o, "__torch_function__");
    if (f == nullptr) {
      PyErr_Clear();
      return false;
    }
    bool plain = f == disabled_impl;
    Py_DECREF(f);
    if (!plain) return false;
  }
  return !THPVariable_Unpack(o).has_names();
}

// One argument onto the stack; false: not a plain value of that kind (PyTorch's entry decides).
bool push(ArgKind kind, PyObject* o, torch::jit::Stack& stack) {
  switch (kind) {
    case ArgKind::Tensor:
      if (!plain_tensor(o)) return false;
      stack.emplace_back(THPVariable_Unpack(o));
      return true;
    case ArgKind::Float:
      if (PyFloat_CheckExact(o)) {
        stack.emplace_back(PyFloat_AS_DOUBLE(o));
        return true;
      }
      if (PyLong_CheckExact(o)) {
        double v = PyLong_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          return false;
        }
        stack.emplace_back(v);
        return true;
      }
      return false;
    case ArgKind::Int:
      if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
          PyErr_Clear();
          return false;
        }
        stack.emplace_back(static_cast<std::int64_t>(v));
        return true;
      }
      return false;
    case ArgKind::Bool:
      if (!PyBool_Check(o)) return false;
      stack.emplace_back(o == Py_True);
      return true;
  }
  return false;
}

// The stack for a call, or nullopt: PyTorch's entry takes it (nothing has run yet).
std::optional<torch::jit::Stack> stack_for(const Resolved& r, PyObject* const* args, Py_ssize_t n) {
  if (!r.usable || n > static_cast<Py_ssize_t>(r.kinds.size())) return std::nullopt;
  torch::jit::Stack stack;
  stack.reserve(std::max(r.defaults.size(), r.returns));
  for (std::size_t i = 0; i < r.defaults.size(); ++i) {
    if (static_cast<Py_ssize_t>(i) < n) {
      if (!push(r.kinds[i], args[i], stack)) return std::nullopt;
    } else if (r.defaults[i]) {
      stack.push_back(*r.defaults[i]);
    } else {
      return std::nullopt;  // a missing argument: PyTorch's message
    }
  }
  return stack;
}

// Runs the call on `stack` and converts its results. Returns a new reference, or nullptr with a
// Python error set: once the op has run, a call is never handed to PyTorch's entry.
PyObject* run(const FastEntry* self, const Resolved& r, torch::jit::Stack& stack) {
  try {
    {
      struct Released {  // the GIL, for the call, as PyTorch's entry releases it
        PyThreadState* state = PyEval_SaveThread();
        ~Released() { PyEval_RestoreThread(state); }
      } released;
      r.handle->callBoxed(stack);
    }
    if (stack.size() != r.returns) {
      throw std::runtime_error("op " + self->name->name + " returned " +
                               std::to_string(stack.size()) + " values; its schema declares " +
                               std::to_string(r.returns));
    }
    for (const c10::IValue& v : stack) {
      if (!v.isTensor()) {
        throw std::runtime_error("op " + self->name->name + " returned a " + v.tagKind() +
                                 " where its schema declares a Tensor");
      }
    }
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
  if (r.returns == 0) Py_RETURN_NONE;
  if (r.returns == 1) return THPVariable_Wrap(std::move(stack[0]).toTensor());
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(r.returns));
  if (tuple == nullptr) return nullptr;
  for (std::size_t i = 0; i < r.returns; ++i) {
    PyObject* t = THPVariable_Wrap(std::move(stack[i]).toTensor());
    if (t == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), t);
  }
  return tuple;
}

PyObject* entry_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) {
  auto* self = reinterpret_cast<FastEntry*>(callable);
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if ((*self->resolved)->generation != torch_ops::registry_generation()) {
    *self->resolved = resolve(*self->name, self->id);
  }
  std::shared_ptr<const Resolved> r = *self->resolved;  // this call's, whatever happens meanwhile
  if (!r->current && self->serves->entered_here()) r = resolve(*self->name, self->id, self->serves);
  if (!r->current) {
    bool gone = true;
    try {
      gone = torch_ops::registration_id(self->name->name) == 0;
    } catch (...) {
    }
    if (gone) {
      PyErr_Format(PyExc_RuntimeError,
                   "op %s is no longer registered (it was unregistered); register it again",
                   self->name->name.c_str());
    } else {
      PyErr_Format(PyExc_RuntimeError,
                   "op %s was registered again after this torch.ops object was made, and this "
                   "object belongs to the earlier registration: look the op up again "
                   "(torch.ops.<namespace>.<name>, or the object kernelop returned)",
                   self->name->name.c_str());
    }
    return nullptr;
  }
  // The call, on this path or PyTorch's, runs inside a scope of the registration.
  std::optional<torch_ops::CallScope> scope;
  try {
    scope.emplace(*r->registration);
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
  if ((kwnames == nullptr || PyTuple_GET_SIZE(kwnames) == 0) &&
      !at::impl::torch_function_mode_enabled()) {
    std::optional<torch::jit::Stack> stack;
    try {
      stack = stack_for(*r, args, n);
    } catch (...) {
      torch::translate_exception_to_python(std::current_exception());
      return nullptr;
    }
    if (PyErr_Occurred()) return nullptr;  // raised by Python code a lookup ran
    if (stack) {
      ++self->taken;
      return run(self, *r, *stack);
    }
  }
  ++self->passed;
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

void entry_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<FastEntry*>(o);
  Py_XDECREF(self->fallback);
  delete self->name;
  delete self->resolved;
  delete self->serves;
  PyTypeObject* type = Py_TYPE(o);
  type->tp_free(o);
  Py_DECREF(type);
}

// Attributes it lacks (__name__, ...) are PyTorch's entry's: OpOverloadPacket forwards dunder
// lookups to its _op. __module__ and __doc__ too (the type has its own), which torch._ops reads
// when it refreshes a packet.
PyObject* entry_getattro(PyObject* o, PyObject* name) {
  PyObject* fallback = reinterpret_cast<FastEntry*>(o)->fallback;
  if (PyUnicode_Check(name) && (PyUnicode_CompareWithASCIIString(name, "__module__") == 0 ||
                                PyUnicode_CompareWithASCIIString(name, "__doc__") == 0)) {
    return PyObject_GetAttr(fallback, name);
  }
  PyObject* v = PyObject_GenericGetAttr(o, name);
  if (v != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
  PyErr_Clear();
  return PyObject_GetAttr(fallback, name);
}

// OpOverload hashes as its _op: the same hash as before the entry was installed.
Py_hash_t entry_hash(PyObject* o) {
  return PyObject_Hash(reinterpret_cast<FastEntry*>(o)->fallback);
}

PyObject* entry_repr(PyObject* o) {
  return PyUnicode_FromFormat("<kernelop fast entry of %s>",
                              reinterpret_cast<FastEntry*>(o)->name->name.c_str());
}

PyObject* entry_fallback(PyObject* o, void*) {
  PyObject* f = reinterpret_cast<FastEntry*>(o)->fallback;
  Py_INCREF(f);
  return f;
}

PyObject* entry_stale(PyObject* o, void*) {
  auto* self = reinterpret_cast<FastEntry*>(o);
  std::uint64_t now = 0;
  try {
    now = torch_ops::registration_id(self->name->name);
  } catch (...) {
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
  return PyBool_FromLong(now != self->id);
}

// Copies of the entry are the entry, as for the builtin it wraps.
PyObject* entry_copy(PyObject* o, PyObject*) {
  Py_INCREF(o);
  return o;
}

PyMemberDef entry_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastEntry, vectorcall), READONLY, nullptr},
    {"taken", T_ULONGLONG, offsetof(FastEntry, taken), READONLY, "calls this entry made"},
    {"passed", T_ULONGLONG, offsetof(FastEntry, passed), READONLY,
     "calls it handed to PyTorch's entry"},
    {nullptr, 0, 0, 0, nullptr},
};
PyGetSetDef entry_getset[] = {
    {"fallback", entry_fallback, nullptr, "PyTorch's own entry, which takes the other calls",
     nullptr},
    {"stale", entry_stale, nullptr,
     "whether the op was unregistered or registered again since this entry was made", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyMethodDef entry_methods[] = {
    {"__copy__", entry_copy, METH_NOARGS, nullptr},
    {"__deepcopy__", entry_copy, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};
PyType_Slot entry_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(entry_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_getattro, reinterpret_cast<void*>(entry_getattro)},
    {Py_tp_hash, reinterpret_cast<void*>(entry_hash)},
    {Py_tp_repr, reinterpret_cast<void*>(entry_repr)},
    {Py_tp_members, entry_members},
    {Py_tp_getset, entry_getset},
    {Py_tp_methods, entry_methods},
    {0, nullptr},
};
PyType_Spec entry_spec = {
    "kernelop._kernelop.FastEntry", sizeof(FastEntry), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    entry_slots};

}  // namespace

bool init_fast_entry() {
  if (entry_type != nullptr) return true;
  PyObject* torch_c = PyImport_ImportModule("torch._C");
  if (torch_c == nullptr) return false;
  disabled_impl = PyObject_GetAttrString(torch_c, "_disabled_torch_function_impl");
  Py_DECREF(torch_c);
  if (disabled_impl == nullptr) return false;
  entry_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&entry_spec));
  return entry_type != nullptr;
}

PyObject* make_fast_entry(const std::string& op_name, PyObject* fallback) {
  if (entry_type == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "kernelop: the fast entry's type is not initialised");
    return nullptr;
  }
  auto name = std::make_unique<c10::OperatorName>(op_name, "");
  std::uint64_t id = torch_ops::registration_id(op_name);
  auto resolved = std::make_unique<std::shared_ptr<const Resolved>>(resolve(*name, id));
  // Made even where the schema has types the entry does not convert: every call then goes to
  // PyTorch's entry, inside a scope of the registration (Note [registration lifetime]).
  if (id == 0 || !(*resolved)->current) Py_RETURN_NONE;
  auto serves = std::make_unique<torch_ops::Registration>(*(*resolved)->registration);
  auto* self = PyObject_New(FastEntry, entry_type);
  if (self == nullptr) return nullptr;
  self->vectorcall = entry_vectorcall;
  Py_INCREF(fallback);
  self->fallback = fallback;
  self->name = name.release();
  self->resolved = resolved.release();
  self->id = id;
  self->serves = serves.release();
  self->taken = self->passed = 0;
  return reinterpret_cast<PyObject*>(self);
}

bool is_fast_entry(PyObject* o) {
  return entry_type != nullptr && Py_TYPE(o) == entry_type;
}

}  // namespace kernelop::python
