// Note [fast Python entry]: calling torch.ops.<ns>.<op>(...) from Python goes through PyTorch's
// generic operator entry: the OpOverload's Python __call__, pybind11's dispatcher, a scan for
// __torch_function__, the schema match of every argument, and the op's namespace and name
// rebuilt as strings on every call, before the boxed call into the dispatcher. For a small
// kernelop op that is several microseconds a call, more than the op's own C++ work (measured in
// bench/autograd_bench.py). kernelop installs, as the `_op` that its OpOverloadPacket and
// OpOverload call, a FastEntry: a CPython callable that puts plain positional arguments
// (tensors, Python floats, ints and bools; defaults from the schema) straight on the stack and
// makes the same boxed call, with the GIL released, as PyTorch's entry does. Everything else
// goes to PyTorch's own entry, unchanged: keyword arguments, a torch-function mode, a tensor
// with __torch_function__ (subclasses, tracing), numpy scalars, SymInts, None, a wrong type or
// count. Behaviour, messages and exception types are therefore PyTorch's; errors raised inside
// the call are translated by PyTorch's own translator. The dispatcher handle is cached while the
// adapter's registry_generation() is unchanged, so an op unregistered (or registered again) is
// looked up afresh, never called through a stale handle.
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

// What a call needs of the op, resolved from the dispatcher by name.
struct Resolved {
  std::uint64_t generation = 0;
  std::optional<c10::OperatorHandle> handle;
  std::vector<ArgKind> kinds;
  std::vector<std::optional<c10::IValue>> defaults;
  std::size_t returns = 0;
  bool usable = false;  // registered, and every argument and return of a kind the entry takes
};

struct FastEntry {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fallback;  // PyTorch's own entry (owned)
  c10::OperatorName* name;
  Resolved* resolved;
  unsigned long long taken, passed;  // calls made here, calls handed to PyTorch's entry
  std::uint64_t id;  // the registration PyTorch's entry was made for (registration_id())
};

// PyTorch's entry calls through the dispatcher handle it was made with, which dangles once the
// op is unregistered: a registration other than `id` (or none) means it must not be called.
bool fallback_is_stale(const FastEntry* self) {
  return torch_ops::registration_id(self->name->name) != self->id;
}

// The op's schema, when its arguments and returns are all of the kinds the entry converts.
void resolve(const c10::OperatorName& name, Resolved& r) {
  r = Resolved{};
  r.generation = torch_ops::registry_generation();
  r.handle = c10::Dispatcher::singleton().findOp(name);
  if (!r.handle || !r.handle->hasSchema()) return;
  const c10::FunctionSchema& s = r.handle->schema();
  if (s.is_vararg() || s.is_varret()) return;
  for (const c10::Argument& a : s.arguments()) {
    switch (a.type()->kind()) {
      case c10::TypeKind::TensorType:
        r.kinds.push_back(ArgKind::Tensor);
        break;
      case c10::TypeKind::FloatType:
        r.kinds.push_back(ArgKind::Float);
        break;
      case c10::TypeKind::IntType:
      case c10::TypeKind::SymIntType:
        r.kinds.push_back(ArgKind::Int);
        break;
      case c10::TypeKind::BoolType:
        r.kinds.push_back(ArgKind::Bool);
        break;
      default:
        return;
    }
    r.defaults.push_back(a.default_value());
  }
  for (const c10::Argument& ret : s.returns()) {
    if (ret.type()->kind() != c10::TypeKind::TensorType) return;
  }
  r.returns = s.returns().size();
  r.usable = true;
}

// A tensor PyTorch's entry passes as it is: a torch.Tensor, or a subclass whose
// __torch_function__ is torch._C._disabled_torch_function_impl (nn.Parameter). Any other
// subclass may override the call: PyTorch's entry decides.
bool plain_tensor(PyObject* o) {
  if (THPVariable_CheckExact(o)) return true;
  if (!THPVariable_Check(o)) return false;
  static PyObject* disabled = [] {
    PyObject* c = PyImport_ImportModule("torch._C");
    PyObject* f = c ? PyObject_GetAttrString(c, "_disabled_torch_function_impl") : nullptr;
    Py_XDECREF(c);
    if (f == nullptr) PyErr_Clear();
    return f;  // kept for the process
  }();
  if (disabled == nullptr) return false;
  PyObject* f = PyObject_GetAttrString(o, "__torch_function__");
  if (f == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool plain = f == disabled;
  Py_DECREF(f);
  return plain;
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

// The call, or nullptr without an error set: PyTorch's entry takes it.
PyObject* fast_call(FastEntry* self, PyObject* const* args, Py_ssize_t n) {
  Resolved& r = *self->resolved;
  if (!r.usable || n > static_cast<Py_ssize_t>(r.kinds.size())) return nullptr;
  HANDLE_TH_ERRORS
  torch::jit::Stack stack;
  stack.reserve(std::max(r.kinds.size(), r.returns));
  for (std::size_t i = 0; i < r.kinds.size(); ++i) {
    if (static_cast<Py_ssize_t>(i) < n) {
      if (!push(r.kinds[i], args[i], stack)) return nullptr;
    } else if (r.defaults[i]) {
      stack.push_back(*r.defaults[i]);
    } else {
      return nullptr;  // a missing argument: PyTorch's message
    }
  }
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
  if (r.returns == 0) Py_RETURN_NONE;
  auto wrap = [&](c10::IValue& v) -> PyObject* {
    if (!v.isTensor()) {
      throw std::runtime_error("op " + self->name->name + " returned a " + v.tagKind() +
                               " where its schema declares a Tensor");
    }
    return THPVariable_Wrap(std::move(v).toTensor());
  };
  if (r.returns == 1) return wrap(stack[0]);
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(r.returns));
  if (!tuple) return nullptr;
  for (std::size_t i = 0; i < r.returns; ++i) {
    PyObject* t = wrap(stack[i]);
    if (!t) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), t);
  }
  return tuple;
  END_HANDLE_TH_ERRORS
}

PyObject* entry_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) {
  auto* self = reinterpret_cast<FastEntry*>(callable);
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  Resolved& r = *self->resolved;
  if (r.generation != torch_ops::registry_generation()) resolve(*self->name, r);
  if ((kwnames == nullptr || PyTuple_GET_SIZE(kwnames) == 0) &&
      !at::impl::torch_function_mode_enabled()) {
    PyObject* result = fast_call(self, args, n);
    if (result != nullptr || PyErr_Occurred()) {
      ++self->taken;
      return result;
    }
  }
  if (r.generation != self->id && fallback_is_stale(self)) {
    if (!r.handle) {
      PyErr_Format(PyExc_RuntimeError,
                   "op %s is no longer registered (it was unregistered); register it again",
                   self->name->name.c_str());
    } else {
      PyErr_Format(PyExc_RuntimeError,
                   "op %s was registered again after this torch.ops object was made, and this "
                   "call needs PyTorch's own entry, which belongs to the earlier registration: "
                   "look the op up again (torch.ops.<namespace>.<name>, or the object kernelop "
                   "returned)",
                   self->name->name.c_str());
    }
    return nullptr;
  }
  ++self->passed;
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

void entry_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<FastEntry*>(o);
  Py_XDECREF(self->fallback);
  delete self->name;
  delete self->resolved;
  PyTypeObject* type = Py_TYPE(o);
  type->tp_free(o);
  Py_DECREF(type);
}

// Attributes it lacks (__name__, __module__, ...) are PyTorch's entry's: OpOverloadPacket
// forwards dunder lookups to its _op.
PyObject* entry_getattro(PyObject* o, PyObject* name) {
  PyObject* v = PyObject_GenericGetAttr(o, name);
  if (v != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<FastEntry*>(o)->fallback, name);
}

// OpOverload hashes as its _op: the same hash as before the entry was installed.
Py_hash_t entry_hash(PyObject* o) {
  return PyObject_Hash(reinterpret_cast<FastEntry*>(o)->fallback);
}

PyObject* entry_repr(PyObject* o) {
  return PyUnicode_FromFormat("<kernelop fast entry of %s>",
                              reinterpret_cast<FastEntry*>(o)->name->name.c_str());
}

PyObject* entry_stale(PyObject* o, void*) {
  return PyBool_FromLong(fallback_is_stale(reinterpret_cast<FastEntry*>(o)));
}

PyObject* entry_fallback(PyObject* o, void*) {
  PyObject* f = reinterpret_cast<FastEntry*>(o)->fallback;
  Py_INCREF(f);
  return f;
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
PyType_Slot entry_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(entry_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_getattro, reinterpret_cast<void*>(entry_getattro)},
    {Py_tp_hash, reinterpret_cast<void*>(entry_hash)},
    {Py_tp_repr, reinterpret_cast<void*>(entry_repr)},
    {Py_tp_members, entry_members},
    {Py_tp_getset, entry_getset},
    {0, nullptr},
};
PyType_Spec entry_spec = {"kernelop._kernelop.FastEntry", sizeof(FastEntry), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, entry_slots};

PyTypeObject* entry_type() {
  static PyTypeObject* type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&entry_spec));
  return type;
}

}  // namespace

PyObject* make_fast_entry(const std::string& op_name, PyObject* fallback) {
  auto name = std::make_unique<c10::OperatorName>(op_name, "");
  auto resolved = std::make_unique<Resolved>();
  std::uint64_t id = torch_ops::registration_id(op_name);
  resolve(*name, *resolved);
  if (id == 0 || !resolved->usable) Py_RETURN_NONE;
  PyTypeObject* type = entry_type();
  if (type == nullptr) return nullptr;
  auto* self = PyObject_New(FastEntry, type);
  if (self == nullptr) return nullptr;
  self->vectorcall = entry_vectorcall;
  Py_INCREF(fallback);
  self->fallback = fallback;
  self->name = name.release();
  self->resolved = resolved.release();
  self->taken = self->passed = 0;
  self->id = id;
  return reinterpret_cast<PyObject*>(self);
}

bool is_fast_entry(PyObject* o) {
  PyTypeObject* type = entry_type();
  if (type == nullptr) PyErr_Clear();
  return type != nullptr && Py_TYPE(o) == type;
}

}  // namespace kernelop::python
