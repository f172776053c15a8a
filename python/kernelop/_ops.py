"""cuda_kernel_op and packages: specs become torch.ops registered from C++ (no Python per call)."""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Sequence

import torch  # noqa: F401  (loads libtorch before the extension that links it)

from . import _kernelop
from ._spec import KernelSpec

# The reference's TensorRT-only keywords: kernelop has no engine to act on them yet, so passing
# one is an error rather than being silently ignored.
_ENGINE_ONLY = ("aot_fn", "supports_dynamic_shapes", "requires_output_allocator", "priority",
                "capability_validator")


def _op_object(op_name: str) -> Any:
    ns, name = op_name.split("::", 1)
    return getattr(getattr(torch.ops, ns), name)


def cuda_kernel_op(op_name: str, spec: KernelSpec, *, meta_fn=None, eager_fn=None, schema=None,
                   archs: Optional[Sequence[str]] = None, base_dir: str = ".", **engine_options) -> Any:
    """Registers ``op_name`` ("namespace::name") from a declarative KernelSpec.

    The spec is validated, compiled by NVRTC (through kernelop's cache) for ``archs`` (default:
    the spec's arch_override, else sm_80..sm_90 + PTX) and registered from C++ with a CUDA kernel
    and a SymInt Meta kernel. Returns the ``torch.ops`` overload packet.
    """
    unknown = [k for k in engine_options if k not in _ENGINE_ONLY]
    if unknown:
        raise TypeError(f"cuda_kernel_op() got unexpected keyword argument(s): {', '.join(unknown)}")
    if engine_options:
        raise NotImplementedError(
            f"cuda_kernel_op({op_name!r}): {', '.join(engine_options)} configure the TensorRT engine path, "
            "which kernelop does not have yet")
    if meta_fn is not None or eager_fn is not None or schema is not None:
        raise NotImplementedError(
            f"cuda_kernel_op({op_name!r}): the override path (meta_fn/eager_fn/schema) is not implemented yet; "
            "give a complete declarative KernelSpec")
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"cuda_kernel_op({op_name!r}): spec must be a KernelSpec, got {type(spec).__name__}")
    doc = json.dumps(spec.to_json(op_name))
    _kernelop.register_spec(doc, os.path.abspath(base_dir), list(archs or []))
    return _op_object(op_name)


def ptx_op(op_name: str, ptx: Any, kernel_name: str, spec: Optional[KernelSpec] = None, *, meta_fn=None,
           eager_fn=None, schema=None, **engine_options) -> Any:
    """Registers ``op_name`` from pre-compiled PTX (str or bytes, e.g. from Triton), skipping NVRTC.

    ``kernel_name`` is the PTX ``.entry`` symbol. Unlike the reference, where every function is
    hand-written, a declarative ``spec`` (its ``kernel_source`` is ignored) gives the schema,
    shapes and geometry; every tensor dtype must be declared, and the entry's parameters are
    checked against the calling convention.
    """
    if engine_options:
        raise NotImplementedError(f"ptx_op({op_name!r}): {', '.join(engine_options)} configure the TensorRT "
                                  "engine path, which kernelop does not have yet")
    if spec is None or meta_fn is not None or eager_fn is not None or schema is not None:
        raise NotImplementedError(f"ptx_op({op_name!r}): give a declarative KernelSpec; the override path "
                                  "(meta_fn/eager_fn/schema) is not implemented yet")
    text = ptx.decode() if isinstance(ptx, (bytes, bytearray)) else str(ptx)
    doc = spec.to_json(op_name)
    doc["kernel_source"] = text  # packages carry the PTX as the op's source
    _kernelop.register_ptx(json.dumps(doc), os.path.abspath("."), text, kernel_name)
    return _op_object(op_name)


def build_package(op_name: str, spec: KernelSpec, path: str, *, archs: Optional[Sequence[str]] = None,
                  base_dir: str = ".") -> str:
    """Compiles ``spec`` and writes a self-contained .kop package to ``path``."""
    _kernelop.build_package(json.dumps(spec.to_json(op_name)), os.path.abspath(base_dir), list(archs or []),
                            str(path))
    return str(path)


def load_package(path: str) -> Any:
    """Registers the op of a .kop package (no NVRTC, no source) and returns its torch.ops packet."""
    schema = _kernelop.load_package(str(path))
    return _op_object(schema.split("(", 1)[0])
