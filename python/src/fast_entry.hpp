// The fast Python entry of kernelop ops (Note [fast Python entry] in fast_entry.cpp).
#pragma once

#include <Python.h>

#include <string>

namespace kernelop::python {

/// Makes the entry's type; called once, from the module's initialisation (needs torch imported).
/// False with a Python error set on failure.
bool init_fast_entry();

/// A FastEntry for the op `op_name` (e.g. "ns::relu", overload ""), taking the calls it can and
/// passing the others to `fallback` (PyTorch's own entry, the OpOverload's `_op`). Returns a new
/// reference; None when the op's schema has arguments or returns the entry does not convert (or
/// the op is not registered); nullptr with a Python error set on failure.
PyObject* make_fast_entry(const std::string& op_name, PyObject* fallback);

/// Whether `o` is a FastEntry.
bool is_fast_entry(PyObject* o);

}  // namespace kernelop::python
