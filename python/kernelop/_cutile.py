"""cuTile kernels as kernelop ops: ko.cutile, the reference's name (torch_tensorrt.annotation.cutile).

``launch_fn`` is written as cuTile's documentation writes a launch: it takes the op's inputs, allocates and returns
the outputs and calls ``ct.launch(torch.cuda.current_stream(), grid, kernel, (args...))`` on a ``@ct.kernel``.
kernelop runs it once on fake tensors with symbolic sizes (no GPU needed) and intercepts the launch. Each tensor is an
array as cuTile's calling convention passes one (its pointer, then its sizes and strides in the array's index type),
ints and floats are scalars, and ``ct.Constant`` arguments are compiled in (configs replace them by name, each a
tactic). Every config is exported ahead of time with ``cuda.tile.compilation.export_kernel`` to a CUBIN per
architecture, plus architecture-independent Tile IR bytecode that drivers for CUDA 13.3 and later compile for a GPU
no CUBIN was built for; the block the kernel needs is the CUBIN's own (.reqntid), and its parameters are checked
against the CUBIN's records and the bytecode's disassembled entry (cuTile gives no PTX). The op then runs from C++
with neither Python nor cuTile (docs/cutile.md).
"""

from __future__ import annotations

import importlib.metadata
import inspect
import io
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import torch

from . import _kernelop
from ._dtypes import DTYPES
from ._recording import (CompiledKernel, CompileJob, Dsl, Handlers, Input, KernelBinary, RecordedPlugin, Recording,
                         arch_number,
                         caller_location, check_archs, check_config_keys, check_configs, count, float_scalar_name,
                         from_inputs, int_scalar_name, select_over_configs, spec_archs, user_requires)
from ._symbolic import FloatProbe, canonical, shorten, uses_dims

DEFAULT_ARCHS = ("sm_80", "sm_90", "sm_100")  # a CUBIN each: Ampere and Ada, Hopper, Blackwell
_INT32 = (-(2 ** 31), 2 ** 31 - 1)
# bytes: the base alignment cuTile's own launch finds in PyTorch's tensors, which the export assumes of every array:
# required of inputs, declared of outputs (kernelop allocates them so; a caller's buffer is checked at launch)
_ALIGN = 16
# @ct.kernel's compiler hints a config may set, and the values cuTile takes for each
_HINTS = {"occupancy": range(1, 33), "num_worker_warps": (1, 2, 4, 8, 16, 32), "opt_level": range(0, 4)}
# The Tile IR bytecode version of the portable image: the oldest that holds architecture-independent bytecode, so that
# every driver that compiles such bytecode (CUDA 13.3 on) loads it.
TILEIR_VERSION = "13.3"
# The architectures tileiras 13.4 compiles for, probed for the block a Tile IR image needs where no CUBIN runs.
TILEIR_PROBE_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121")


@dataclass(frozen=True)
class CutileSpec:
    """``ko.cutile(launch_fn, configs, arch)``: a cuTile launch to record, its configs (each a tactic: values of the
    kernel's ``ct.Constant`` parameters and of its compiler hints) and the architectures to compile for."""

    launch_fn: Callable[..., Any]
    configs: Tuple[Dict[str, Any], ...] = ()
    archs: Optional[Tuple[str, ...]] = None
    tileir: Optional[bool] = None  # the Tile IR bytecode too: True required, None where it can, False never


def cutile(launch_fn: Callable[..., Any], configs: Optional[Sequence[Dict[str, Any]]] = None,
           arch: Union[None, str, Sequence[str]] = None, tileir: Optional[bool] = None) -> CutileSpec:
    """A cuTile kernel spec (the reference's ``tta.cutile``). ``configs`` set ``ct.Constant`` parameters of the
    kernel launch_fn launches (and its hints: occupancy, num_worker_warps, opt_level), each a tactic; ``arch``
    (``"sm_90"`` or a list) replaces the default architectures (sm_80, sm_90 and sm_100 CUBINs). ``tileir`` adds
    each tactic's architecture-independent Tile IR bytecode, which the driver compiles on a GPU no CUBIN runs on
    (drivers for CUDA 13.3 and later): by default where it can (skipped, with a warning saying why, for an op whose
    launch_fn read the device's capability, a tactic that sets opt_level, or a kernel cuTile cannot export as
    bytecode 13.3); ``True`` requires it, ``False`` ships CUBINs only."""
    if tileir is not None and type(tileir) is not bool:
        raise TypeError(f"kernelop.cutile: tileir must be True, False or None, not {type(tileir).__name__}")
    return CutileSpec(launch_fn, check_configs("kernelop.cutile", launch_fn, configs),
                      spec_archs("kernelop.cutile", arch, cutile_archs), tileir)


def cutile_archs(where: str, archs: Any, name: str = "archs") -> List[str]:
    """cuTile's architectures: 'sm_NN' each (a CUBIN for that GPU generation)."""
    return check_archs(where, archs, r"sm_[1-9][0-9]{1,2}", "cuTile", "'sm_NN' such as 'sm_90'", name)


class torch_cuda_current_stream_while_kernelop_records:  # noqa: N801 - named for cuTile's own messages
    """torch.cuda.current_stream() while a cuTile launch_fn is recorded: the stream the op is called on, which
    launch_fn passes to ct.launch (kernelop launches there). It is nothing else: using it otherwise is refused. Its
    name is what cuTile's own launch says when given it, a launch kernelop did not intercept ("Unsupported stream
    type 'torch_cuda_current_stream_while_kernelop_records'": ct.launch imported by name)."""

    def __repr__(self) -> str:
        return "torch.cuda.current_stream()"

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"while kernelop records a cuTile launch_fn, torch.cuda.current_stream() stands for the caller's stream "
            f"and has no attribute {name!r}: pass it to ct.launch as it is, and call ct.launch through the module "
            "(import cuda.tile as ct; ct.launch(...)): a launch imported by name (from cuda.tile import launch) "
            "cannot be recorded")


CALLERS_STREAM = torch_cuda_current_stream_while_kernelop_records()


@dataclass
class _Launch:
    stream: Any
    grid: Any
    kernel: Any
    args: Any
    options: Dict[str, Any]
    where: str


@dataclass
class CutileState:
    """What compiling a recording needs beyond each tactic's constants (RecordedPlugin's compile_configs)."""

    kernel: Any  # the @ct.kernel
    # per array: (parameter, tensor, rank, index dtype, cuTile dtype, its strides as expressions)
    arrays: List[Tuple[str, str, int, str, str, Tuple[str, ...]]]
    scalars: Dict[str, str]  # scalar parameter -> its cuTile dtype name
    inputs: Set[str]  # the arrays that are the op's inputs (their base alignment is required)
    where: str
    tileir: Optional[bool] = None  # CutileSpec.tileir
    portable_why: Optional[str] = None  # why the op ships no Tile IR ("" when it does; None: not decided yet)
    # (config, arch) -> (CUBIN, symbol); (config, "tileir") -> (the portable bytecode, symbol)
    compiled: Dict[Tuple[int, str], Tuple[bytes, str]] = field(default_factory=dict)


# -- the launch -----------------------------------------------------------------------------------------------------

def _intercept(launches: List[Any]) -> Handlers:
    """While recording (on this thread, Note [interception]): ct.launch is recorded instead of run."""
    import cuda.tile as ct

    def launch(original: Any, stream: Any, grid: Any, kernel: Any, kernel_args: Any, *rest: Any,
               **options: Any) -> None:
        if rest:
            raise TypeError(f"ct.launch takes 4 positional arguments (stream, grid, kernel, kernel_args); got "
                            f"{4 + len(rest)}")
        launches.append(_Launch(stream, grid, kernel, kernel_args, options, caller_location()))

    return {(ct, "launch"): launch,
            (torch.cuda, "current_stream"): lambda original, *args, **kwargs: CALLERS_STREAM}


def _one_launch(where: str, launches: List[Any]) -> Tuple[Any, str]:
    if not launches:
        raise ValueError(f"{where}: launch_fn launched no cuTile kernel (expected ct.launch(torch.cuda."
                         "current_stream(), grid, kernel, (args...)))")
    if len(launches) > 1:
        raise ValueError(f"{where}: launch_fn made {len(launches)} ct.launch calls; kernelop records one launch per "
                         "cuTile op")
    return launches[0], _pyfunc(launches[0].kernel).__name__ if _is_kernel(launches[0].kernel) else "?"


def _is_kernel(kernel: Any) -> bool:
    import cuda.tile as ct
    return isinstance(kernel, ct.kernel)


def _pyfunc(kernel: Any) -> Any:
    return kernel._annotated_function.pyfunc


def _check_inputs(where: str, inputs: List[Input]) -> None:
    taken = [n for n, _, _ in inputs if n in _HINTS]
    if taken:
        raise ValueError(f"{where}: launch_fn's parameter '{taken[0]}' has the name of a compiler hint a cuTile config "
                         f"may set ({', '.join(_HINTS)}), so the op could not take an input of that name; rename it")


# -- the launch as a spec -------------------------------------------------------------------------------------------

def _translate(ctx: Recording, spec: CutileSpec, launch: _Launch) -> RecordedPlugin:
    """The launch as a kernelop spec: arrays, scalars and constants by cuTile's calling convention, the grid as
    expressions of the sizes, the block each config's CUBIN requires, the configs as tactics."""
    import cuda.tile as ct
    from cuda.tile._annotated_function import LeafAnnotationNode

    where = ctx.where
    if launch.stream is not CALLERS_STREAM:
        raise ValueError(f"{where}: the launch at {launch.where} runs on {shorten(repr(launch.stream))}; kernelop "
                         "launches on the caller's stream, which launch_fn names torch.cuda.current_stream()")
    if any(launch.options.values()):
        raise ValueError(f"{where}: the launch at {launch.where} asks for "
                         f"{shorten(', '.join(k for k, v in launch.options.items() if v))}, which kernelop does not "
                         "make yet")
    kernel = launch.kernel
    if not _is_kernel(kernel):
        raise ValueError(f"{where}: the launch at {launch.where} launches {shorten(repr(kernel))}, not a @ct.kernel")
    fn = _pyfunc(kernel)
    kname = shorten(fn.__name__)
    num_ctas = kernel._compiler_options.num_ctas
    if num_ctas not in (None, 1):
        raise ValueError(f"{where}: {kname} is built for clusters (num_ctas={shorten(repr(num_ctas))}), which "
                         "kernelop does not launch yet")
    if not isinstance(launch.args, tuple):
        raise ValueError(f"{where}: the launch at {launch.where} passes its kernel arguments as "
                         f"{type(launch.args).__name__}; ct.launch takes a tuple")
    sig = kernel._annotated_function.pysig
    try:
        bound = sig.bind(*launch.args)
    except TypeError as e:
        raise ValueError(f"{where}: the launch at {launch.where} does not match {kname}'s parameters: "
                         f"{shorten(e, 300)}") from None
    bound.apply_defaults()
    nodes = dict(zip(sig.parameters, kernel._annotated_function.parameter_annotations))
    constant_params = [p for p, n in nodes.items() if isinstance(n, LeafAnnotationNode) and n.constant]
    ctx.name_outputs({p: v for p, v in bound.arguments.items() if isinstance(v, torch.Tensor)},
                     reserved=set(constant_params) | set(_HINTS))

    params: List[Any] = []
    constants: Dict[str, Any] = {}
    arrays: List[Tuple[str, str, int, str, str, Tuple[str, ...]]] = []
    scalars: Dict[str, str] = {}
    requires: List[str] = []
    dtypes = {d.torch: d.cutile for d in DTYPES if d.cutile}
    for p, value in bound.arguments.items():
        node = nodes[p]
        what = f"{kname}'s argument '{shorten(p)}'"
        if not isinstance(node, LeafAnnotationNode) or node.list is not None:
            raise ValueError(f"{where}: {what} is a tuple or list parameter; kernelop passes arrays, scalars and "
                             "ct.Constant values")
        if node.constant:
            if from_inputs(value):
                raise ValueError(f"{where}: ct.Constant '{shorten(p)}' gets a value computed from the inputs (a size "
                                 "or a scalar input); it must be a Python constant or come from configs (cuTile "
                                 "compiles one kernel per value)")
            if type(value) not in (int, float, bool):
                raise ValueError(f"{where}: ct.Constant '{shorten(p)}' is {shorten(repr(value))}; kernelop compiles "
                                 "in int, float and bool constants")
            constants[p] = value
        elif isinstance(value, torch.Tensor):
            annotation = node.array
            index = "int64" if annotation is not None and annotation.index_dtype == ct.int64 else "int32"
            if annotation is not None and (annotation.static_shape_dims or annotation.static_stride_dims):
                raise ValueError(f"{where}: {what} compiles sizes or strides in (static_shape_dims / "
                                 "static_stride_dims), which kernelop does not specialise yet; pass them as values")
            name = ctx.tensor_name(value, what)
            if value.dtype not in dtypes:
                raise ValueError(f"{where}: {what} is {value.dtype}, which kernelop passes to cuTile kernels as none "
                                 f"of {', '.join(str(d) for d in dtypes)}")
            if any(a[1] == name for a in arrays):
                raise ValueError(f"{where}: tensor '{shorten(name)}' is passed to {kname} twice; kernelop passes each "
                                 "tensor once")
            # The array's sizes and strides are the passed tensor's own (a view of an input or output, reshaped
            # or transposed on the host, is its base's sizes and strides rearranged), as expressions of the sizes.
            rank = value.dim()
            if rank == 0:
                raise ValueError(f"{where}: {what} is a 0-dim tensor, which cuTile's compiler does not take (0-dim "
                                 "tiles); pass a tensor of rank 1 or more (x.reshape(1))")
            wide = {"int64": True} if index == "int64" else {}
            layout = [canonical(ctx.expr(v, f"{where}: {what}'s {kind} {i}"))
                      for kind, values in (("size", value.shape), ("stride", value.stride()))
                      for i, v in enumerate(values)]
            params += [name] + [{"expr": e, **wide} for e in layout]
            arrays.append((p, name, rank, index, dtypes[value.dtype], tuple(layout[rank:])))
            if name not in ctx.out_names:
                requires.append(f"aligned({name}, {_ALIGN})")
        elif isinstance(value, FloatProbe):
            params.append(value.kernelop_name)
            scalars[p] = "float32"
        elif isinstance(value, bool):
            raise ValueError(f"{where}: {what} is a bool; pass it as a ct.Constant (cuTile compiles it in)")
        elif isinstance(value, (int, torch.SymInt)):
            wide64 = node.scalar is not None and node.scalar.dtype == ct.int64
            scalar = int_scalar_name(value, ctx.rec)
            text = scalar if scalar is not None else ctx.expr(value, f"{where}: {what}")
            if isinstance(value, int) and not wide64 and not _INT32[0] <= value <= _INT32[1]:
                raise ValueError(f"{where}: {what} is {value}, beyond int32, which cuTile passes an int as; annotate "
                                 "the parameter ct.ScalarInt64")
            params.append({"expr": text, **({"int64": True} if wide64 else {})} if scalar is None or wide64
                          else scalar)
            scalars[p] = "int64" if wide64 else "int32"
        elif isinstance(value, float):
            scalar = float_scalar_name(value, ctx.rec)
            params.append(scalar if scalar is not None else {"float": value})
            scalars[p] = "float32"
        else:
            raise ValueError(f"{where}: {what} is a {type(value).__name__}; kernelop passes tensors (as arrays), int "
                             "and float scalars and ct.Constant values")

    grid = _grid(ctx, launch)
    user_configs = list(spec.configs) or [{}]
    check_config_keys(where, user_configs, kname, "ct.Constant parameter", constant_params, list(_HINTS))
    tuned = [p for p in list(constant_params) + list(_HINTS) if any(p in c for c in user_configs)]
    hints = {h: getattr(kernel._compiler_options, h) for h in _HINTS}
    ctx.check_config_values(user_configs, tuned, {**constants, **hints})
    values: List[Dict[str, Any]] = [{k: c.get(k, constants.get(k, hints.get(k))) for k in tuned}
                                    for c in user_configs]
    for i, v in enumerate(values):
        for h, allowed in _HINTS.items():
            if h in v and (type(v[h]) is not int or v[h] not in allowed):
                raise ValueError(f"{where}: configs[{i}] sets {h} to {shorten(repr(v[h]))}; cuTile takes "
                                 f"{_allowed_text(allowed)}")
    _check_grid_follows(ctx, launch, grid, constants, user_configs)

    shapes = [dict(s, align=_ALIGN) for s in ctx.output_shapes(ctx.meta_impl)]
    requires += ctx.requirements()
    # The ranks the expressions of the sizes read (Note [rank-free recording]).
    exprs = grid + [p["expr"] for p in params if isinstance(p, dict) and "expr" in p] + requires + \
        [d for s in shapes for d in (s["shape"] if isinstance(s["shape"], list) else [])]
    requires = list(dict.fromkeys([f"rank({t.name}) == {t.rank}" for t in ctx.rec.tensors
                                   if t.name not in ctx.rec.rank_free and uses_dims(exprs, t.name)] + requires))
    ctx.tactics = f"{count(len(user_configs), 'config')} make {count(len(user_configs), 'tactic')}"
    try:
        source = inspect.getsource(inspect.getmodule(fn) or fn)
    except (OSError, TypeError):
        source = inspect.getsource(fn)
    mutated: Set[str] = set() if ctx.outputs else {a[1] for a in arrays}
    doc: Dict[str, Any] = {
        "op": ctx.op_name,
        "kernel_name": fn.__name__,  # each config's kernel has its own mangled symbol
        "kernel_source": source,
        "cutile": {"version": importlib.metadata.version("cuda-tile")},
        "inputs": [dict(i, mutated=True) if i["name"] in mutated else i for i in ctx.inputs_json()],
        "outputs": shapes,
        "params": params,
        "geometry": {"custom": {"grid": grid, "block": ["1", "1", "1"], "shared_mem": "0"}},
    }
    if requires:
        doc["requires"] = requires
    if tuned:
        doc["tunables"] = tuned
        doc["configs"] = [{**{k: _config_value(v[k]) for k in tuned},
                           **({"requires": user_requires(c)} if c.get("requires") else {})}
                          for c, v in zip(user_configs, values)]
    # Validated before anything is compiled (kernelop's own rules, in C++); the block stands in until read.
    ctx.validate(doc)
    state = CutileState(kernel, arrays, scalars, {a[1] for a in arrays if a[1] not in ctx.out_names}, where,
                        spec.tileir)
    recorded = RecordedPlugin(ctx.op_name, doc, ctx.dsl, kernel, constants,
                              [{"constants": {**constants, **{k: v[k] for k in tuned if k in constants}},
                                "hints": {k: v[k] for k in tuned if k in _HINTS}} for v in values],
                              default_archs=spec.archs or DEFAULT_ARCHS, dsl_state=state)
    blocks = [_block(recorded, i) for i in range(len(values))]
    block = blocks[0] if all(b == blocks[0] for b in blocks) else select_over_configs(blocks, values, tuned)
    doc["geometry"]["custom"]["block"] = block
    # Inputs the kernel writes in any config are Tensor(a!) (Note [written pointers]).
    written = set().union(*[_written_arrays(recorded, i) for i in range(len(values))])
    mutated = {name for name in written if name not in ctx.out_names}
    doc["inputs"] = [dict(i, mutated=True) if i["name"] in mutated else {k: v for k, v in i.items() if k != "mutated"}
                     for i in doc["inputs"]]
    recorded.writes = written
    if tuned:  # after the launch and its requirements, as the other front ends write them
        doc["tunables"] = doc.pop("tunables")
        doc["configs"] = doc.pop("configs")
    ctx.validate(doc)
    return recorded


def _allowed_text(allowed: Any) -> str:
    if isinstance(allowed, range):
        return f"an int from {allowed.start} to {allowed.stop - 1}"
    return "one of " + ", ".join(str(a) for a in allowed)


def _check_grid_follows(ctx: Recording, launch: _Launch, grid: List[str], constants: Dict[str, Any],
                        configs: List[Dict[str, Any]]) -> None:
    """The grid is recorded once, with the constants launch_fn passed. Configs may change a constant only when the
    grid cannot have been computed from it: a grid of sizes alone (a row per block). A grid with numbers of its own
    (cdiv(n, TILE) records as ``// 1024``) might follow the constant, and another value would launch the wrong
    number of blocks: refused."""
    changed = [k for k in constants if any(k in c and c[k] != constants[k] for c in configs)]
    numbers = sorted({int(t) for t in re.findall(r"(?<![\w.])\d+(?![\w.])", " ".join(grid)) if int(t) > 1})
    if changed and numbers:
        raise ValueError(f"{ctx.where}: configs change ct.Constant {shorten(', '.join(changed))}, and the grid of the "
                         f"launch at {launch.where} ({', '.join(grid)}) holds numbers "
                         f"({shorten(', '.join(map(str, numbers)))}) that may have been computed from "
                         f"{'it' if len(changed) == 1 else 'them'}: kernelop records the grid once, so another value "
                         "could launch the wrong number of blocks; register one op per value, or give the configs "
                         "only constants the grid does not depend on (a grid of sizes: a row per block)")


def _config_value(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _grid(ctx: Recording, launch: _Launch) -> List[str]:
    grid = launch.grid
    if isinstance(grid, (int, torch.SymInt)):
        grid = (grid,)
    if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3:
        raise ValueError(f"{ctx.where}: the launch at {launch.where} has the grid {shorten(repr(grid))}; expected a "
                         "tuple of 1 to 3 sizes")
    out = []
    for axis, g in enumerate(grid):
        if isinstance(g, bool) or not isinstance(g, (int, torch.SymInt)):
            raise ValueError(f"{ctx.where}: grid axis {axis} of the launch at {launch.where} is "
                             f"{shorten(repr(g))}; expected an int or an expression of the sizes")
        out.append(canonical(ctx.expr(g, f"{ctx.where}: grid axis {axis}")))
    return out + ["1"] * (3 - len(out))


# -- compilation ----------------------------------------------------------------------------------------------------

def _signature(recorded: RecordedPlugin, config: int) -> Tuple[Any, Any]:
    """The kernel with the config's hints, and its cuTile signature: arrays as kernelop passes them (non-negative
    strides, those that are 1 whatever the sizes stated so; 16-byte aligned: required of inputs, declared of
    outputs; outputs allocated apart),
    scalars, and the config's constants."""
    import cuda.tile as ct
    from cuda.tile._cext import CallingConvention
    from cuda.tile.compilation import ArrayConstraint, KernelSignature, ScalarConstraint

    state: CutileState = recorded.dsl_state
    compile_config = recorded.compile_configs[config]
    kernel = state.kernel.replace_hints(**compile_config["hints"]) if compile_config["hints"] else state.kernel
    by_param = {a[0]: a for a in state.arrays}
    constraints: List[Any] = []
    for p in kernel._annotated_function.pysig.parameters:
        if p in by_param:
            _, name, rank, index, dtype, strides = by_param[p]
            # inputs may alias each other (a call may pass one tensor twice); outputs alias nothing; a stride of 0
            # (an expanded view) aliases elements; a stride that is 1 whatever the sizes is stated
            shared = name in state.inputs and len(state.inputs) > 1
            constraints.append(ArrayConstraint(
                getattr(ct, dtype), rank, index_dtype=getattr(ct, index), stride_lower_bound_incl=0,
                alias_groups=("kernelop_inputs",) if shared else (), may_alias_internally="0" in strides,
                stride_constant=[1 if e == "1" else None for e in strides] if "1" in strides else None,
                base_addr_divisible_by=_ALIGN))
        elif p in state.scalars:
            constraints.append(ScalarConstraint(getattr(ct, state.scalars[p])))
        else:
            constraints.append(compile_config["constants"][p])
    signature = KernelSignature(constraints, CallingConvention.cutile_python_v1())
    return kernel, signature.with_mangled_symbol(_pyfunc(kernel).__name__)


def _export(recorded: RecordedPlugin, config: int, arch: Optional[str],
            bytecode_version: Optional[str] = TILEIR_VERSION) -> Tuple[bytes, str]:
    """export_kernel of one config: a CUBIN for one architecture, or (arch None) the architecture-independent Tile IR
    bytecode of `bytecode_version` (None: the newest tileiras writes); memoised on the recording."""
    from cuda.tile.compilation import export_kernel

    state: CutileState = recorded.dsl_state
    key = (config, arch or f"tileir-{bytecode_version}")
    if key in state.compiled:
        return state.compiled[key]
    out = io.BytesIO()
    try:
        kernel, signature = _signature(recorded, config)
        if arch is None:
            export_kernel(kernel, [signature], out, gpu_code=None, output_format="tileir_bytecode",
                          bytecode_version=bytecode_version)
        else:
            export_kernel(kernel, [signature], out, gpu_code=arch, output_format="cubin")
    except Exception as e:  # noqa: BLE001 - cuTile's compile error, named with the tactic
        raise RuntimeError(f"op {shorten(recorded.op_name)}: cuTile's export_kernel of tactic {config} for "
                           f"{arch or 'Tile IR bytecode'} failed: {type(e).__name__}: {shorten(e, 2000)}") from e
    state.compiled[key] = (out.getvalue(), signature.symbol)
    return state.compiled[key]


def _tileir_text(recorded: RecordedPlugin, config: int, bytecode_version: Optional[str] = TILEIR_VERSION) -> str:
    """The disassembly of one config's Tile IR bytecode (cuTile's tileirdisasm)."""
    from cuda.tile._compile import _bytecode_to_mlir_text

    bytecode, _ = _export(recorded, config, None, bytecode_version)
    try:
        return str(_bytecode_to_mlir_text(bytecode))
    except Exception as e:  # noqa: BLE001 - cuTile's disassembler's error, named with the tactic
        raise RuntimeError(f"op {shorten(recorded.op_name)}: cuTile's tileirdisasm of tactic {config} failed: "
                           f"{type(e).__name__}: {shorten(e, 2000)}") from e


def _portable_refusal(recorded: RecordedPlugin) -> str:
    """Why the op ships no Tile IR image ("" when it ships one for every tactic), decided once for the whole op: an
    architecture whose GPU runs the bytecode runs every tactic from it. Refused where the spec asked for it."""
    state: CutileState = recorded.dsl_state
    if state.portable_why is not None:
        return state.portable_why
    why = ""
    if state.tileir is False:
        why = "tileir=False"
    elif recorded.capability_archs:
        why = (f"launch_fn read the device's capability, decided for {', '.join(recorded.capability_archs)} only: "
               "a GPU the bytecode runs on could be another")
    elif any(c.get("hints", {}).get("opt_level") is not None for c in recorded.compile_configs):
        why = "a tactic sets opt_level, a flag of tileiras the bytecode does not keep (the driver compiles it its way)"
    else:
        try:
            for program in range(len(recorded.compile_configs)):
                _tileir_text(recorded, program)
        except RuntimeError as e:
            why = f"cuTile cannot export it as Tile IR bytecode {TILEIR_VERSION} ({shorten(e, 300)})"
    if why and state.tileir:
        raise ValueError(f"{state.where}: tileir=True, but {why}")
    if why and state.tileir is None:
        warnings.warn(f"{state.where}: the op ships no Tile IR bytecode (CUBINs only): {why}", stacklevel=6)
    state.portable_why = why
    return why


def _portable(recorded: RecordedPlugin, program: int) -> Optional[KernelBinary]:
    """One tactic's Tile IR bytecode, with its disassembly (whose entry C++ checks against the calling convention);
    None when the op ships none (_portable_refusal)."""
    if _portable_refusal(recorded):
        return None
    bytecode, symbol = _export(recorded, program, None)
    return KernelBinary(program, "tileir", bytecode, _tileir_text(recorded, program), symbol)


def _required_block(recorded: RecordedPlugin, config: int, arch: str) -> List[int]:
    cubin, symbol = _export(recorded, config, arch)
    block = _kernelop.cubin_required_block(cubin, symbol)
    if block is None:
        raise ValueError(f"{recorded.dsl_state.where}: the CUBIN cuTile made for {arch} states no block for "
                         f"{shorten(symbol)} (.reqntid), which kernelop launches it with")
    return list(block)


def _block(recorded: RecordedPlugin, config: int) -> List[str]:
    """The block one config's kernel requires, per axis: cuTile's compiler chooses it per architecture (a matmul's
    warp groups on sm_100), so it is an expression of arch() over the recording's architectures, each CUBIN's own,
    and, where the op may ship Tile IR, over the architectures tileiras knows whose GPUs no CUBIN runs on (the
    driver compiles the bytecode there, as tileiras would: a CUBIN of theirs, not shipped, tells the block)."""
    archs = list(recorded.default_archs)
    state: CutileState = recorded.dsl_state
    if state.tileir is not False:
        majors = {arch_number(a) // 10 for a in archs}
        archs += [a for a in TILEIR_PROBE_ARCHS if arch_number(a) // 10 not in majors]
    blocks = []
    for a in sorted(archs, key=arch_number):
        try:
            blocks.append((arch_number(a), _required_block(recorded, config, a)))
        except RuntimeError:
            if a in recorded.default_archs:
                raise
    blocks.sort()
    out = []
    for axis in range(3):
        text = str(blocks[0][1][axis])
        for (number, b), (_, before) in zip(blocks[1:], blocks):
            if b[axis] != before[axis]:
                text = f"select(arch() >= {number}, {b[axis]}, {text})"
        out.append(canonical(text))
    return out


def _plan_compile(recorded: RecordedPlugin, program: int, arch: str) -> CompileJob:
    """export_kernel of one tactic for one architecture (not cached by kernelop: cuTile keeps its own cache). Its
    parameters and the block it requires are checked against the spec in C++ (image_from_binaries), as every
    CUBIN's."""

    def compile() -> CompiledKernel:
        cubin, symbol = _export(recorded, program, arch)
        return CompiledKernel(name=symbol, cubin=cubin, ptx="")

    return CompileJob(compile)


# -- what the kernel writes (Note [written pointers]) ---------------------------------------------------------------

_VALUE = r"%[\w$.-]+(?:#\d+)?"
# Ops that pass a pointer (or a view of one) on, by the operands it comes from; any other op makes data.
_CARRIES = {"assume": (-1,), "make_tensor_view": (0,), "make_partition_view": (0,), "make_strided_view": (0,),
            "make_gather_scatter_view": (0,), "offset": (0,), "reshape": (0,), "broadcast": (0,), "permute": (0,),
            "select": (1, 2)}


def written_parameters(tileir: str) -> Tuple[Set[int], List[str]]:
    """The positions (among the entry's parameters) of the pointers a kernel's Tile IR (tileirdisasm's text) may write
    through — the stores and atomics (``store_*_tko``, ``atomic_*_tko``), each followed back through the ops that
    carry a pointer or a view and through the values ``if``, ``for`` and ``loop`` regions yield — and the lines of
    the writes it could not follow to a pointer parameter (then every pointer parameter is in the set)."""
    header = re.search(r"entry\s+@[\w$.-]+\((.*?)\)\s*(?:optimization_hints|\{)", tileir, re.S)
    if header is None:
        return set(), ["no entry"]
    params = {n: i for i, n in enumerate(re.findall(r"(%[\w$.-]+):", header.group(1)))}
    pointers = {n for n, _ in re.findall(r"(%[\w$.-]+):\s*(tile<[^,]*ptr<[^>]*>>)", header.group(1))}

    def key(value: str) -> str:  # "%2" is "%2#0", the first result
        return value if "#" in value else value + "#0"

    sources: Dict[str, List[str]] = {}  # value -> the values it may carry a pointer from
    frames: List[Tuple[str, List[str], List[str]]] = []  # open regions: (op, its results, its loop's iter args)
    writes: List[Tuple[str, str]] = []
    for raw in tileir[header.end():].splitlines():
        line = raw.strip()
        if line.startswith("}"):
            if not line.endswith("{"):  # "} else {" keeps the region open
                frames.pop() if frames else None
            continue
        if line.endswith("{") and not re.match(r"(%[^=]*=\s*)?(for|loop|if)\b", line):
            frames.append(("other", [], []))  # a reduce's or scan's body: its yields carry no pointer
            continue
        lhs, eq, rhs = line.partition(" = ")
        results: List[str] = []
        if eq and lhs.startswith("%"):
            for name in (n.strip() for n in lhs.split(",")):
                base, _, count = name.partition(":")
                results += [f"{base}#{k}" for k in range(int(count) if count.isdigit() else 1)]
        body = rhs if results else line
        op = (body.split() or [""])[0]
        operands = re.findall(_VALUE, body.split(" : ")[0])
        if op in ("for", "loop", "if") and line.endswith("{"):
            carried = re.search(r"iter_values\(([^)]*)\)", body)
            pairs = re.findall(rf"({_VALUE})\s*=\s*({_VALUE})", carried.group(1)) if carried else []
            iter_args = [key(a) for a, _ in pairs]
            induction = re.match(rf"for\s+({_VALUE})\s+in\b", body)
            if induction:  # the loop's counter: data
                sources.setdefault(key(induction.group(1)), [])
            for (a, init), r in zip(pairs, results):
                sources.setdefault(key(a), []).append(key(init))
                sources.setdefault(r, []).append(key(a))  # the last iteration's values, or the initial ones
            frames.append((op, results, iter_args))
            continue
        if op in ("yield", "continue", "break") and frames:
            # yield: the innermost region's results; continue and break: the innermost loop's (an if's body
            # may continue or break the loop around it)
            kinds = ("for", "loop") if op != "yield" else ("for", "loop", "if", "other")
            frame = next((f for f in reversed(frames) if f[0] in kinds), None)
            if frame is not None and frame[0] != "other":
                targets = frame[2] if op == "continue" else frame[1]
                for target, v in zip(targets, operands):
                    sources.setdefault(target, []).append(key(v))
            continue
        if op in _CARRIES:
            for r in results:
                sources.setdefault(r, []).extend(key(operands[k]) for k in _CARRIES[op] if -len(operands) <= k <
                                                 len(operands))
        else:
            for r in results:
                sources.setdefault(r, [])  # data, not a pointer
        if op.endswith("_tko") and op.startswith(("store", "atomic")):
            view = re.search(rf"({_VALUE})\[", body)  # a store into a view: view[index]; else a pointer tile first
            writes.append((key(view.group(1)) if view else key(operands[0]) if operands else "", line))

    def origins(value: str, seen: Set[str]) -> Set[str]:
        if value in seen:
            return set()
        seen.add(value)
        name = value[:-2] if value.endswith("#0") else value
        if name in params:
            return {name}
        if value not in sources:  # a value this reading does not know
            raise KeyError(value)
        return set().union(set(), *[origins(v, seen) for v in sources[value]])

    written: Set[int] = set()
    unfollowable: List[str] = []
    for value, line in writes:
        try:
            found = {params[v] for v in origins(value, set()) if v in pointers}
        except KeyError:
            found = set()
        if not found:  # a pointer from memory, or from an op kernelop does not follow
            unfollowable.append(line)
        written |= found
    if unfollowable:
        written = {params[p] for p in pointers}
    return written, unfollowable


def _written_arrays(recorded: RecordedPlugin, config: int) -> Set[str]:
    """The tensors one config's kernel may write, from its Tile IR."""
    state: CutileState = recorded.dsl_state
    positions, unfollowable = written_parameters(_tileir_text(recorded, config, None))  # the newest bytecode
    if unfollowable:
        warnings.warn(f"{state.where}: {shorten(_pyfunc(state.kernel).__name__)} writes through a pointer kernelop "
                      f"cannot follow to a parameter ({shorten(unfollowable[0], 200)}); every tensor it is given is "
                      "taken as written (inputs become Tensor(a!))", stacklevel=5)
    # Flat parameter positions: an array is 1 + 2 * rank of them, a scalar one, a constant none.
    position, by_position = 0, {}
    arrays = {a[0]: a for a in state.arrays}
    for p in state.kernel._annotated_function.pysig.parameters:
        if p in arrays:
            by_position[position] = arrays[p][1]
            position += 1 + 2 * arrays[p][2]
        elif p in state.scalars:
            position += 1
    return {by_position[i] for i in positions if i in by_position}


DSL = Dsl(name="cutile", title="cuTile", spec_type=CutileSpec, check_archs=cutile_archs, intercept=_intercept,
          one_launch=_one_launch, translate=_translate, plan_compile=_plan_compile, check_inputs=_check_inputs,
          default_archs=DEFAULT_ARCHS, portable=_portable)
