// Python -> kernelop values shared by both extensions (see convert.hpp).
#include "convert.hpp"

#include <exception>
#include <span>
#include <type_traits>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace kernelop::python {

void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (error_class(e.kind())) {
        case ErrorClass::Value:
          type = PyExc_ValueError;
          break;
        case ErrorClass::Type:
          type = PyExc_TypeError;
          break;
        case ErrorClass::Runtime:
          type = PyExc_RuntimeError;
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

Overrides overrides_of(nb::handle h) {
  Overrides o;
  try {
    o.has_meta_fn = nb::cast<bool>(h.attr("has_meta_fn"));
    o.has_eager_fn = nb::cast<bool>(h.attr("has_eager_fn"));
    o.meta_outputs = nb::cast<int>(h.attr("meta_outputs"));
    o.schema = nb::cast<std::string>(h.attr("schema"));
    o.caller_key = nb::cast<std::string>(h.attr("caller_key"));
  } catch (const nb::python_error&) {
    KERNELOP_FAIL(Type) << "overrides: a " << nb::type_name(h.type()).c_str()
                        << " is not a kernelop._kernelop.Overrides";
  } catch (const nb::cast_error&) {
    KERNELOP_FAIL(Type) << "overrides: a " << nb::type_name(h.type()).c_str()
                        << " has a field of the wrong type";
  }
  return o;
}

CompileOptions options_for(const std::vector<std::string>& archs) {
  CompileOptions o;
  o.archs = archs;
  return o;
}

namespace {

// One row per field of KernelBinary, in its declaration order.
struct BinaryField {
  const char* name;
  const char* expected;  // the Python type, for messages
  void (*read)(KernelBinary&, nb::handle);
};

template <class T>
T field_value(nb::handle h) {
  if constexpr (std::is_same_v<T, int>) {
    if (!nb::isinstance<nb::int_>(h) || nb::isinstance<nb::bool_>(h)) throw nb::cast_error();
  }
  return nb::cast<T>(h);
}

std::string bytes_value(nb::handle h) {
  if (nb::isinstance<nb::bytes>(h)) {
    auto b = nb::borrow<nb::bytes>(h);
    return std::string(b.c_str(), b.size());
  }
  return field_value<std::string>(h);
}

constexpr std::array kBinaryFields = {
    BinaryField{"program", "int",
                [](KernelBinary& b, nb::handle h) { b.program = field_value<int>(h); }},
    BinaryField{"arch", "str",
                [](KernelBinary& b, nb::handle h) { b.arch = field_value<std::string>(h); }},
    BinaryField{"data", "bytes", [](KernelBinary& b, nb::handle h) { b.data = bytes_value(h); }},
    BinaryField{"ptx", "str",
                [](KernelBinary& b, nb::handle h) { b.ptx = field_value<std::string>(h); }},
    BinaryField{"entry", "str",
                [](KernelBinary& b, nb::handle h) { b.entry = field_value<std::string>(h); }},
    BinaryField{"launch_shared", "int",
                [](KernelBinary& b, nb::handle h) { b.launch_shared = field_value<int>(h); }},
    BinaryField{"scratch_bytes", "int",
                [](KernelBinary& b, nb::handle h) { b.scratch_bytes = field_value<int>(h); }},
    BinaryField{"scratch_align", "int",
                [](KernelBinary& b, nb::handle h) { b.scratch_align = field_value<int>(h); }},
    BinaryField{"scratch_param", "int",
                [](KernelBinary& b, nb::handle h) { b.scratch_param = field_value<int>(h); }},
    BinaryField{"launch", "int",
                [](KernelBinary& b, nb::handle h) { b.launch = field_value<int>(h); }},
};

}  // namespace

const std::vector<std::string>& kernel_binary_fields() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    out.reserve(kBinaryFields.size());
    for (const BinaryField& f : kBinaryFields) out.emplace_back(f.name);
    return out;
  }();
  return names;
}

std::vector<KernelBinary> binaries_of(nb::handle sequence, std::string_view whose) {
  std::vector<KernelBinary> out;
  std::size_t i = 0;
  for (nb::handle item : sequence) {
    KernelBinary b;
    for (const BinaryField& f : kBinaryFields) {
      if (!nb::hasattr(item, f.name)) {
        KERNELOP_FAIL(Type) << "binary " << i << whose << " (a "
                            << nb::type_name(item.type()).c_str() << ") has no field '" << f.name
                            << "'; expected a KernelBinary";
      }
      nb::object value = item.attr(f.name);
      try {
        f.read(b, value);
      } catch (const nb::cast_error&) {
        KERNELOP_FAIL(Type) << "binary " << i << whose << ": field '" << f.name << "' is a "
                            << nb::type_name(value.type()).c_str() << "; expected " << f.expected;
      }
    }
    out.push_back(std::move(b));
    ++i;
  }
  return out;
}

ImagesFromBinaries images_from_binaries(OpPlan plan, nb::handle binaries, nb::handle backward,
                                        const std::vector<std::string>& archs) {
  std::vector<KernelBinary> owned = binaries_of(binaries);
  std::vector<std::vector<KernelBinary>> links;
  for (nb::handle link : backward) {  // named by link: the backward's, its backward's, ...
    links.push_back(binaries_of(link, " of backward link " + std::to_string(links.size() + 1)));
  }
  nb::gil_scoped_release release;
  ImagesFromBinaries out{image_with_launches(std::move(plan), std::move(owned), options_for(archs)),
                         {}};
  out.backward = backward_from_binaries(out.image.plan, std::move(links), options_for(archs));
  return out;
}

RawArg raw_arg(nb::handle h, std::size_t i) {
  if (nb::isinstance<nb::bool_>(h)) return RawArg::of_scalar(ScalarArg::of_bool(nb::cast<bool>(h)));
  if (nb::isinstance<nb::int_>(h)) {
    return RawArg::of_scalar(ScalarArg::of_int(nb::cast<std::int64_t>(h)));
  }
  if (nb::isinstance<nb::float_>(h)) {
    return RawArg::of_scalar(ScalarArg::of_float(nb::cast<double>(h)));
  }
  if (nb::isinstance<nb::tuple>(h) && nb::len(h) == 5) {
    auto t = nb::borrow<nb::tuple>(h);
    TensorView v;
    v.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(t[0]));
    auto dtype = parse_dtype(nb::cast<std::string>(t[1]));
    if (!dtype) {
      KERNELOP_FAIL(Type) << "argument " << i << " has dtype " << nb::cast<std::string>(t[1])
                          << ", which kernelop does not support";
    }
    v.dtype = *dtype;
    auto shape = nb::cast<std::vector<std::int64_t>>(t[2]);
    auto strides = nb::cast<std::vector<std::int64_t>>(t[3]);
    v.shape = Shape(std::span<const std::int64_t>(shape));
    v.strides = Shape(std::span<const std::int64_t>(strides));
    v.device = nb::cast<int>(t[4]);
    return RawArg::of_tensor(v);
  }
  KERNELOP_FAIL(Type) << "argument " << i << " is a " << nb::type_name(h.type()).c_str()
                      << "; expected a tensor descriptor (data_ptr, dtype, shape, strides, "
                         "device), int, float or bool";
}

std::array<std::int64_t, 3> dims3(const std::vector<std::int64_t>& d, const char* what) {
  if (d.empty() || d.size() > 3) {
    KERNELOP_FAIL(Type) << what << " has " << d.size() << " dims; expected 1 to 3";
  }
  std::array<std::int64_t, 3> out = {1, 1, 1};
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = d[i];
  return out;
}

}  // namespace kernelop::python
