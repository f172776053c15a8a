"""Triton kernels as kernelop ops: ko.triton and ko.custom_plugin, the reference's names (torch_tensorrt.annotation).

``launch_fn`` is the body a user would have written for a ``torch.library.custom_op``: it takes the op's inputs,
allocates and returns the outputs and launches ``@triton.jit`` kernels as ``kernel[grid](..., BLOCK=...)`` (several,
with scratch and host glue between them: Note [recorded programs]).
kernelop runs it **once**, on fake tensors with symbolic sizes, and records the launch: which function, which tensor
is which input or output, the int arguments and the grid as expressions of the input sizes, the constexprs,
num_warps and num_stages. ``meta_impl`` (when given) is traced the same way for the output shapes. The result is an
ordinary kernelop spec (``RecordedPlugin.spec_json()``) whose kernel is compiled by ``triton.compile`` for each
config and architecture, through kernelop's compile cache; the op then runs from C++ with no Python and no Triton,
and packages like any other (docs/triton.md).

Triton's calling convention, in full: the non-constexpr parameters in the kernel's order, then two scratch pointers
(global and profile scratch: kernelop allocates the global scratch a kernel needs, stream-ordered, for
each launch, and refuses kernels built with Triton's profiling instrumentation); constexprs are
compiled in; the block is ``num_warps * 32`` threads; the dynamic shared memory is Triton's ``metadata.shared`` for
the architecture. Triton's JIT specialises on 16-byte-aligned pointers and ints divisible by 16; kernelop keeps those
specialisations as tactics guarded by requirements (``divisible=2``: pointers aligned and ints divisible, but for
ints computed from ``sm_count()``; ``divisible=3``: the same with the op's int scalar inputs left plain, when it has
both, so a scalar such as ``ignore_index=-100`` leaves the sizes specialised; ``divisible=1``: pointers aligned,
``divisible=0``: neither), so a misaligned input runs the generic kernel, never
one compiled for alignment it lacks.
"""


from __future__ import annotations

import inspect
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import torch

from ._dtypes import DTYPES
from ._recording import (CompileJob, CompiledKernel, Dsl, Handlers, Input, NestedRecording, RecordedPlugin, Recording,
                         arch_number, caller_location, check_archs, check_config_keys, check_configs,
                         check_output_names, conjunction, count, float_scalar_name, from_inputs, int_scalar_name,
                         select_over_configs, tactic_text, traced_error, user_requires)
from ._recording import sizes
from ._symbolic import BoolProbe, FloatProbe, Unexpressible, canonical, shorten, uses_dims

DEFAULT_ARCHS = ("sm_80", "sm_90")  # CUBIN each, plus the PTX of the oldest for newer GPUs
_OPTIONS = ("num_warps", "num_stages")
_DIVISIBLE = "divisible"  # the tunable of Triton's specialisations (module docstring)
_ADDED_TUNABLES = _OPTIONS + (_DIVISIBLE,)  # the tunables every Triton tactic has, besides the tuned constexprs
_ARCH = r"sm_[1-9][0-9]{1,2}"  # Triton compiles for one "sm_NN" per target (sm_90 gives Hopper's sm_90a)
_INT32 = (-2 ** 31, 2 ** 31 - 1)
_TYPES = {d.torch: d.triton for d in DTYPES if d.triton is not None}  # torch dtype -> Triton's pointee type


@dataclass(frozen=True)
class TritonSpec:
    """``ko.triton(launch_fn, configs)``: a Triton launch to record, and its configs (each a tactic)."""

    launch_fn: Callable[..., Any]
    configs: Tuple[Dict[str, Any], ...] = ()
    specialize: Any = None  # the size classes to record (Note [size classes]); None: every one launch_fn accepts
    outputs: Optional[Tuple[str, ...]] = None  # the names of what launch_fn returns, in order
    host_sync: bool = False  # launch_fn may read tensors' values on the host (Note [host reads])
    first_use: bool = False  # a size outside `specialize` is compiled when first called (Note [first-use growth])


def triton(launch_fn: Callable[..., Any], configs: Optional[Sequence[Mapping[str, Any]]] = None, *,
           specialize: Any = None, outputs: Optional[Sequence[str]] = None, host_sync: bool = False,
           first_use: bool = False) -> TritonSpec:
    """A Triton kernel spec (the reference's ``tta.triton``): ``configs`` replace the launch's meta-parameters
    (constexprs, ``num_warps``, ``num_stages``); each is a tactic kernelop tunes between. A config may carry
    ``"requires": [...]``, conditions (kernelop expressions) on the sizes it is right for. ``specialize``: the
    values to compile for when launch_fn derives a constexpr from a size (Note [size classes]): of
    ``triton.next_power_of_2(size)`` (powers of two), or of a size passed to a constexpr as it is (any ints >= 1);
    or a dict of size -> such a list. ``first_use=True``: a size outside them is compiled when the op is first called
    with it (recorded, compiled, and added to the op as a tactic; docs/triton.md). ``outputs``: the names of the
    tensors launch_fn returns, in order (by default each is named after the kernel parameter it is passed to, else
    out0, out1, ...); a forward's backward reads them and their gradients by these names. ``host_sync=True``:
    launch_fn may read values of one-element tensors on the host as library host code does, ``n =
    mask.sum().item()`` passed to a kernel and ``torch.equal(t, torch.tensor(1.0))`` deciding whether a kernel runs;
    kernelop reads them at launch (a stream synchronisation per read) and the op cannot be captured in a CUDA graph
    (Note [host reads], docs/triton.md)."""
    if not isinstance(host_sync, bool):
        raise TypeError(f"kernelop.triton: host_sync must be True or False, got {shorten(repr(host_sync))}")
    return TritonSpec(launch_fn, check_configs("kernelop.triton", launch_fn, configs),
                      sizes.check_specialize("kernelop.triton", specialize),
                      check_output_names("kernelop.triton", outputs), host_sync,
                      sizes.check_first_use("kernelop.triton", first_use))


def triton_archs(where: str, archs: Any) -> List[str]:
    """Triton's architectures: 'sm_NN' each (Triton picks Hopper's sm_90a for sm_90 itself)."""
    return check_archs(where, archs, _ARCH, "Triton", "'sm_NN' such as 'sm_90'")


@dataclass(frozen=True)
class TritonState:
    """What triton.compile needs of a recording beyond each tactic's constexprs and options (RecordedPlugin's
    compile_configs): the kernel's signature (parameter -> "*fp32", "i32", "constexpr", ...)."""

    signature: Dict[str, str]


# -- the launch -----------------------------------------------------------------------------------------------------

@dataclass
class _Launch:
    fn: Any  # triton JITFunction
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    grid: Any
    where: str


def _intercept(launches: List[Any]) -> Handlers:
    from triton.runtime import autotuner, jit

    def run(original: Any, self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        # A size given to a constexpr as it is: one kernel per value (Note [size classes]).
        constexpr = {p.name for p in self.params if p.is_constexpr}
        args = tuple(sizes.exact_size(a) if i < len(self.params) and self.params[i].is_constexpr else a
                     for i, a in enumerate(args))
        kwargs = {k: sizes.exact_size(v) if k in constexpr else v for k, v in kwargs.items()}
        launches.append(_Launch(self, args, kwargs, grid, caller_location()))
        return None

    def autotuned(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
        raise Unexpressible(f"launch_fn launches '{shorten(getattr(self.fn, '__name__', self.fn))}' through "
                            "@triton.autotune, which times kernels on real tensors; give its configs to "
                            "kernelop.triton(launch_fn, configs=[...]) instead (kernelop tunes them as tactics)")

    import triton as triton_module
    return {(jit.JITFunction, "run"): run, (autotuner.Autotuner, "run"): autotuned,
            (triton_module, "next_power_of_2"): sizes.power_of_two}


def _first_launch(where: str, launches: List[Any]) -> Tuple[Any, str]:
    """The op's own kernel: the first launch (later ones are its then, Note [recorded programs])."""
    if not launches:
        raise ValueError(f"{where}: launch_fn launched no Triton kernel (expected kernel[grid](...))")
    return launches[0], launches[0].fn.__name__


def _launch_tensors(launch: _Launch) -> Tuple[Dict[str, Any], Set[str]]:
    """The tensors a launch passes, by the kernel's parameter, and the names its tunables take."""
    kernel = launch.fn
    kwargs = {k: v for k, v in launch.kwargs.items() if k not in _OPTIONS and k != "num_ctas"}
    try:
        bound = inspect.signature(kernel.fn).bind(*launch.args, **kwargs)
    except TypeError:  # the translation names the mismatch
        return {}, set()
    constexpr = {p.name for p in kernel.params if p.is_constexpr}
    return ({n: v for n, v in bound.arguments.items() if isinstance(v, torch.Tensor)},
            constexpr | set(_ADDED_TUNABLES))


def _check_inputs(where: str, inputs: List[Input]) -> None:
    taken = [n for n, _, _ in inputs if n in _ADDED_TUNABLES]
    if taken:
        raise ValueError(f"{where}: launch_fn's parameter '{taken[0]}' has the name of a tunable kernelop gives every "
                         f"Triton tactic ({', '.join(_ADDED_TUNABLES)}: Triton's compile options and its "
                         "specialisation variant), so the op could not take an input of that name; rename it")


# -- the launch as a spec -------------------------------------------------------------------------------------------

@dataclass
class _Arguments:
    """The kernel's parameters as kernelop passes them (Triton's calling convention)."""

    params: List[Any] = field(default_factory=list)  # the spec's params
    signature: Dict[str, str] = field(default_factory=dict)
    constexprs: Dict[str, Any] = field(default_factory=dict)
    pointers: List[str] = field(default_factory=list)  # tensor names passed as pointers, for alignment requirements
    tensors: Dict[str, str] = field(default_factory=dict)  # pointer parameter -> the input or output it gets
    derived: Dict[str, str] = field(default_factory=dict)  # constexpr -> the size-derived value it gets
    int_args: List[Tuple[int, str]] = field(default_factory=list)  # (position, expression) of ints not known here
    scalar_ints: Set[int] = field(default_factory=set)  # positions among int_args that are the op's scalar inputs
    static_divisible: List[int] = field(default_factory=list)  # positions of constant ints divisible by 16


@dataclass
class _Tactics:
    """The user's configs, each replaced by Triton's specialisations as guarded variants."""

    tuned: List[str]  # the constexprs the configs set, in parameter order
    values: List[Dict[str, Any]]  # per user config: the tuned constexprs and the options
    configs: List[Dict[str, Any]]  # the spec's, one per tactic
    compile_configs: List[Dict[str, Any]]  # per tactic: what triton.compile needs
    tunables: List[str]


def _translate(ctx: Recording, spec: TritonSpec, launch: _Launch) -> RecordedPlugin:
    """The launch as a kernelop spec: its arguments, the configs times Triton's specialisations as tactics, the grid
    as one expression over them, the outputs' shapes and every condition on the sizes as requirements."""
    import triton as triton_module

    where = ctx.where
    kernel = launch.fn
    # The launch's arguments, bound to the kernel's parameters. Its compile options are Python constants or come
    # from the configs: each value is its own compilation.
    options: Dict[str, int] = {}
    for k in _OPTIONS:
        if k in launch.kwargs:
            options[k] = _launch_option(where, launch, k, launch.kwargs.pop(k))
    if type(launch.kwargs.get("num_ctas")) is int and launch.kwargs["num_ctas"] == 1:
        launch.kwargs.pop("num_ctas")
    # Triton's attrs are keyed by the parameter's position among ALL the kernel's parameters (constexprs too).
    position = {name: i for i, name in enumerate(kernel.arg_names)}
    unknown = [k for k in launch.kwargs if k not in position]
    if unknown:
        raise ValueError(f"{where}: the launch at {launch.where} passes {shorten(', '.join(unknown), 300)}, which "
                         f"kernelop does not record (known options: {', '.join(_OPTIONS)}; num_ctas must be 1)")
    try:
        bound = inspect.signature(kernel.fn).bind(*launch.args, **launch.kwargs)
    except TypeError as e:
        raise ValueError(f"{where}: the launch at {launch.where} does not match {shorten(kernel.__name__)}'s "
                         f"parameters: {shorten(e, 300)}") from None
    bound.apply_defaults()
    constexpr = {p.name for p in kernel.params if p.is_constexpr}
    ctx.name_outputs({n: v for n, v in bound.arguments.items() if isinstance(v, torch.Tensor)},
                     reserved=set(constexpr) | set(_ADDED_TUNABLES))
    args = _arguments(ctx, kernel, bound, position)
    tactics = _tactics(ctx, spec, kernel, args, constexpr, options, position)
    # The inputs the kernel writes, known once the spec's shape is validated; meanwhile an op without outputs is
    # validated as writing every input (it must write one).
    mutated: Set[str] = set() if ctx.outputs else {t.name for t in ctx.rec.tensors}

    def spec_doc(grid: List[str], shapes: List[Dict[str, Any]], requires: List[str]) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "op": ctx.op_name,
            "kernel_name": kernel.__name__,
            "kernel_source": kernel.src if isinstance(getattr(kernel, "src", None), str) else
            inspect.getsource(kernel.fn),
            "triton": {"version": triton_module.__version__},
            "inputs": [dict(i, mutated=True) if i["name"] in mutated else i for i in ctx.inputs_json()],
            "outputs": shapes,
            "params": args.params,
            "geometry": {"custom": {"grid": grid, "block": ["num_warps * 32"]}},
        }
        if requires:
            doc["requires"] = requires
        doc["tunables"] = tactics.tunables
        doc["configs"] = tactics.configs
        if ctx.then:
            doc["then"] = ctx.then
        return doc

    # Validated (kernelop's own rules, in C++) before the grid is traced for each config, and again once complete:
    # a spec kernelop refuses is never compiled.
    ctx.validate(spec_doc(["1"], ctx.output_shapes(None), []))
    # Inputs the kernel writes in any config are Tensor(a!) (Note [written pointers]).
    written = _kernel_writes(ctx, kernel, args.signature, [c["constexprs"] for c in tactics.compile_configs])
    mutated = {args.tensors[p] for p in written if p in args.tensors}

    tuned, values = tactics.tuned, tactics.values
    if not callable(launch.grid) and len({tuple(v[k] for k in tuned) for v in values}) > 1:
        # Right for a kernel whose programs loop (a row each), wrong for one whose program covers BLOCK elements.
        warnings.warn(f"{where}: the launch at {launch.where} has a fixed grid, the same for every config, while the "
                      f"configs change {shorten(', '.join(tuned))}; if a program covers a block of that size, give "
                      "the grid as a function of them (lambda meta: (triton.cdiv(n, meta['BLOCK']),))", stacklevel=4)
    grids = [_grid(ctx, launch, bound, v) for v in values]
    grid = _unify(ctx, launch, bound, values, tuned, grids)

    # Requirements: every condition launch_fn and meta_impl evaluated or asserted on the sizes (so meta_impl is
    # traced first), and ranks.
    shapes = ctx.output_shapes(ctx.meta_impl)
    requires = ctx.requirements()
    exprs = grid + [p["expr"] for p in args.params if isinstance(p, dict) and "expr" in p] + requires + \
        [d for s in shapes for d in (s["shape"] if isinstance(s["shape"], list) else [])]
    # Tensors recorded rank-free state no rank (Note [rank-free recording]).
    requires = [f"rank({t.name}) == {t.rank}" for t in ctx.rec.tensors
                if t.name not in ctx.rec.rank_free and uses_dims(exprs, t.name)] + requires
    ctx.name_key = kernel.cache_key
    return RecordedPlugin(ctx.op_name, spec_doc(grid, shapes, requires), ctx.dsl, kernel, args.constexprs,
                          tactics.compile_configs, DEFAULT_ARCHS, scratch_param=len(args.params) - 2,
                          dsl_state=TritonState(args.signature),
                          writes={args.tensors[p] for p in written if p in args.tensors})


def _arguments(ctx: Recording, kernel: Any, bound: inspect.BoundArguments, position: Dict[str, int]) -> _Arguments:
    """Each of the kernel's parameters: a tensor's pointer, a scalar input, an expression of the sizes (an int), or
    a constexpr compiled in; then Triton's two scratch pointers."""
    where, kname = ctx.where, shorten(kernel.__name__)
    out = _Arguments()
    signature, constexprs, params = out.signature, out.constexprs, out.params
    for p in kernel.params:
        value = bound.arguments[p.name]
        what = f"{kname}'s argument '{shorten(p.name)}'"
        if p.is_constexpr:
            if from_inputs(value):
                raise ValueError(f"{where}: constexpr '{shorten(p.name)}' gets a value computed from the inputs (a "
                                 "size or a scalar input); it must be a Python constant, come from configs (Triton "
                                 "compiles one kernel per value), be triton.next_power_of_2 of a size, which "
                                 "kernelop compiles per size class, or be a size itself, which kernelop compiles for "
                                 "the values specialize= lists (docs/triton.md)")
            signature[p.name] = "constexpr"
            constexprs[p.name] = value
            if isinstance(value, sizes.DerivedInt):  # next_power_of_2 of a size, in this size class
                out.derived[p.name] = value.derived
                constexprs[p.name] = int(value)
        elif value is None:
            signature[p.name] = "constexpr"
            constexprs[p.name] = None
        elif isinstance(value, torch.Tensor):
            name = ctx.tensor_name(value, what)
            if value.dtype not in _TYPES:
                raise ValueError(f"{where}: {what} is {value.dtype}, which kernelop passes to Triton kernels as "
                                 f"none of {', '.join(str(d) for d in _TYPES)}")
            signature[p.name] = "*" + _TYPES[value.dtype]
            params.append(name)
            out.pointers.append(name)
            out.tensors[p.name] = name
        elif isinstance(value, FloatProbe):
            signature[p.name] = "fp32"
            params.append(value.kernelop_name)
        elif isinstance(value, BoolProbe):
            signature[p.name] = "i1"
            params.append(value.kernelop_name)
        elif isinstance(value, bool):
            signature[p.name] = "constexpr"  # Triton compiles non-constexpr bools as values; a constant is the same
            constexprs[p.name] = value
        elif isinstance(value, int) and value == 1:  # Triton's JIT specialises 1 as a constexpr
            signature[p.name] = "constexpr"
            constexprs[p.name] = 1
        elif isinstance(value, (int, torch.SymInt)):
            scalar = int_scalar_name(value, ctx.rec)
            text = scalar if scalar is not None else ctx.expr(value, f"{where}: {what}")
            wide = isinstance(value, int) and not (_INT32[0] <= value <= _INT32[1])
            signature[p.name] = "i64" if wide else "i32"
            if scalar is not None:
                params.append(scalar)
                out.int_args.append((position[p.name], scalar))
                out.scalar_ints.add(position[p.name])
            else:
                params.append({"expr": text, **({"int64": True} if wide else {})})
                if isinstance(value, int):
                    if value % 16 == 0:
                        out.static_divisible.append(position[p.name])
                else:
                    out.int_args.append((position[p.name], text))
        elif isinstance(value, float):
            scalar = float_scalar_name(value, ctx.rec)
            if scalar is not None:  # float(x) of a float scalar input: the input itself
                signature[p.name] = "fp32"
                params.append(scalar)
            else:  # a literal: a constant of the op, passed as Triton passes it (fp32)
                signature[p.name] = "fp32"
                params.append({"float": value})
        else:
            raise ValueError(f"{where}: {what} is a {type(value).__name__}; kernelop passes tensors, scalars, "
                             "sizes and constants")
    # Triton's trailing parameters: the global and profile scratch pointers (null: no scratch).
    params += [{"expr": "0", "int64": True}, {"expr": "0", "int64": True}]
    return out


def _tactics(ctx: Recording, spec: TritonSpec, kernel: Any, args: _Arguments, constexpr: Set[str],
             options: Dict[str, int], position: Dict[str, int]) -> _Tactics:
    """The configs: each replaces meta-parameters of the launch; every key must be one, and none may be named like a
    tunable kernelop adds. Each is compiled once per Triton specialisation it can run (module docstring)."""
    where, kname = ctx.where, shorten(kernel.__name__)
    user_configs = list(spec.configs) or [{}]
    # A config that sets a constexpr the launch derives from a size (Note [size classes]) is right only where that
    # value is the derived one: it belongs to that size class alone.
    overriding = [c for c in user_configs
                  if any(k in c and int(c[k]) != args.constexprs[k] for k in args.derived)]
    if overriding and len(overriding) == len(user_configs):
        k = next(k for k in args.derived if k in user_configs[0])
        raise sizes.NoConfigForClass(f"{where}: no config is for this size class: every config sets {k}, which the "
                                     f"launch computes as {args.derived[k]} = {args.constexprs[k]} here")
    user_configs = [c for c in user_configs if c not in overriding]
    check_config_keys(where, user_configs, kname, "constexpr", sorted(constexpr), _OPTIONS)
    if ctx.program:  # its scratch shapes and later launches were recorded with launch_fn's own values
        for i, c in enumerate(user_configs):
            changed = [k for k in c if k in constexpr and k not in args.derived and c[k] != args.constexprs.get(k)]
            if changed:
                k = changed[0]
                raise ValueError(f"{where}: configs[{i}] sets {shorten(k)} = {shorten(repr(c[k]))}, which launch_fn "
                                 f"passes as {shorten(repr(args.constexprs.get(k)))}; an op of several launches, "
                                 "scratch or glue is recorded with launch_fn's own values (its scratch shapes and "
                                 "later launches may depend on them), so its configs may change num_warps and "
                                 "num_stages only: derive the value from a size (triton.next_power_of_2), or "
                                 "register one op per value")
    # Constexprs derived from a size are tuned too: each size class compiles its own value.
    tuned = sorted({k for c in user_configs for k in c if k in constexpr and k != "requires"} | set(args.derived),
                   key=position.__getitem__)
    clash = [k for k in tuned if k in _ADDED_TUNABLES]
    if clash:
        raise ValueError(f"{where}: the configs set {kname}'s constexpr '{clash[0]}', but '{clash[0]}' is the name of "
                         "a tunable kernelop gives every Triton tactic ('divisible': Triton's specialisation variant, "
                         "2 = pointers aligned and ints divisible by 16, 3 = the same but for int scalar inputs, "
                         "1 = pointers aligned, 0 = neither; "
                         "'num_warps', 'num_stages': Triton's compile options); rename the constexpr")
    ctx.check_config_values(user_configs, tuned, args.constexprs)
    base_options = {"num_warps": options.get("num_warps", 4), "num_stages": options.get("num_stages", 3)}
    values: List[Dict[str, Any]] = []
    kept: List[Dict[str, Any]] = []
    for c in user_configs:
        v = {k: c.get(k, args.constexprs.get(k)) for k in tuned}
        v.update({k: c.get(k, base_options[k]) for k in _OPTIONS})
        if args.derived and v in values:  # configs that differ only in a derived value they restate: one
            continue
        values.append(v)
        kept.append(c)
    user_configs = kept

    # Triton's specialisations, as guarded variants of each config. Their requires exclude each other, so a call
    # can run exactly one variant of a config, the one Triton's JIT would pick, and tuning compares configs only.
    aligned = [f"aligned({t}, 16)" for t in dict.fromkeys(args.pointers)]
    # An int computed from the device's SM count (rows per program of a persistent kernel) is a per-device partition
    # that seldom divides by 16; requiring it would leave every other int unspecialised (Liger's RMSNorm backward
    # lost its vectorised row loads): it is compiled as a plain int in every variant.
    # A value read on the host (item(t), Note [host reads]) is no size either, and a requirement may not read it.
    specialised = [(i, e) for i, e in args.int_args if "sm_count()" not in e and "item(" not in e]
    # Ints computed from sizes (strides, row lengths) and the op's int scalar inputs are specialised as two groups: a
    # scalar that seldom divides by 16 (Liger's ignore_index=-100) must not cost the sizes their specialisation (its
    # cross entropy lost its vectorised row loads), so variant 3 is variant 2 with the scalars left plain.
    from_sizes = [(i, e) for i, e in specialised if i not in args.scalar_ints]
    from_scalars = [(i, e) for i, e in specialised if i in args.scalar_ints]
    size_div = list(dict.fromkeys(canonical(f"({e}) % 16 == 0") for _, e in from_sizes))
    scalar_div = list(dict.fromkeys(canonical(f"({e}) % 16 == 0") for _, e in from_scalars))

    def none_of(conds: List[str]) -> List[str]:
        return [canonical(f"{conjunction(conds)} == 0")] if conds else []

    variants = [d for d, present in ((2, bool(size_div or scalar_div)), (3, bool(size_div and scalar_div)),
                                     (1, bool(aligned)), (0, True)) if present]
    first_div = size_div or scalar_div  # what variant 2 (and 3) needs first; variant 1 and 0 are its negation
    requires_of = {2: aligned + size_div + scalar_div, 3: aligned + size_div + none_of(scalar_div),
                   1: aligned + none_of(first_div), 0: none_of(aligned)}
    specialised_of = {2: [i for i, _ in specialised], 3: [i for i, _ in from_sizes], 1: [], 0: []}
    if not aligned:
        requires_of[0] = none_of(first_div)

    pointer_positions = [position[p] for p, t in args.signature.items() if t.startswith("*")]
    configs: List[Dict[str, Any]] = []
    compile_configs: List[Dict[str, Any]] = []
    for user, v in zip(user_configs, values):
        for d in variants:
            cfg: Dict[str, Any] = {k: int(v[k]) for k in tuned}  # a bool as 0 or 1: the spec's tunables are ints
            cfg.update({k: v[k] for k in _OPTIONS})
            cfg[_DIVISIBLE] = d
            if requires_of[d] or user.get("requires"):
                cfg["requires"] = user_requires(user) + list(requires_of[d])
            configs.append(cfg)
            attrs = list(specialised_of[d])
            if d >= 1:
                attrs += pointer_positions
            compile_configs.append({
                "constexprs": {**args.constexprs, **{k: v[k] for k in tuned}},
                "options": {k: v[k] for k in _OPTIONS},
                "divisible": sorted(set(attrs + args.static_divisible)),
            })
    ctx.tactics = (f"{count(len(user_configs), 'config')} x {count(len(variants), 'Triton specialisation')} "
                   f"(divisible={', '.join(str(d) for d in variants)}) make {count(len(configs), 'tactic')} (tactic t "
                   f"is configs[t // {len(variants)}])")
    return _Tactics(tuned, values, configs, compile_configs, tuned + list(_OPTIONS) + [_DIVISIBLE])


def _launch_option(where: str, launch: _Launch, name: str, value: Any) -> int:
    """A compile option given at the launch (num_warps, num_stages): a Python int, never a value from the inputs."""
    if from_inputs(value):
        raise ValueError(f"{where}: the launch at {launch.where} sets the launch parameter '{name}' to a value "
                         f"computed from the inputs (a size or a scalar input); {name} must be a Python constant or "
                         f"come from configs (kernelop.triton(launch_fn, configs=[{{'{name}': 4}}, ...]): Triton "
                         "compiles one kernel per value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: the launch at {launch.where} sets the launch parameter '{name}' to "
                         f"{type(value).__name__} {shorten(repr(value))}; expected an int (a Python constant, or from "
                         "configs)")
    return value


# -- the grid -------------------------------------------------------------------------------------------------------

def _grid(ctx: Recording, launch: _Launch, bound: inspect.BoundArguments, values: Dict[str, Any]) -> List[Any]:
    where, rec = ctx.where, ctx.rec
    grid = launch.grid
    if callable(grid):
        meta = dict(bound.arguments)
        meta.update(values)
        try:
            with rec.mode:
                grid = grid(meta)
        except NestedRecording:
            raise
        except Unexpressible as e:
            raise ValueError(f"{where}: the grid: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise traced_error(where, rec, e, "the grid function", f"(at {launch.where})") from e
    if isinstance(grid, (int, torch.SymInt)):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise ValueError(f"{where}: the grid of the launch at {launch.where} is {shorten(repr(grid))}; expected 1 to 3 "
                         "sizes")
    return list(grid)


def _unify(ctx: Recording, launch: _Launch, bound: inspect.BoundArguments, values: List[Dict[str, Any]],
           tuned: List[str], grids: List[List[Any]]) -> List[str]:
    """One expression per grid axis over the tunables: the same text for every config, or the grid traced with the
    tunables symbolic (checked against every config), or a select() over the configs."""
    where, rec = ctx.where, ctx.rec
    texts = [[ctx.expr(g, f"{where}: grid axis {a}") for a, g in enumerate(grid)] for grid in grids]
    if any(len(t) != len(texts[0]) for t in texts):
        raise ValueError(f"{where}: the grid has a different number of axes in different configs")
    if all(t == texts[0] for t in texts):
        return texts[0]
    names = tuned + list(_OPTIONS)
    start = rec.guard_count()
    try:
        # Hints of at least 2: ShapeEnv makes symbols hinted 0 or 1 constants (bools, num_stages=1).
        symbolic = {k: rec.tunable(k, max(int(values[0][k]), 2)) for k in names}
        general = _grid(ctx, launch, bound, symbolic)
        symbols = {k: v.node.expr for k, v in symbolic.items()}
        ok = rec.guard_count() == start and len(general) == len(grids[0]) and all(
            rec.same(_sympy(general[a]).subs({symbols[k]: values[c][k] for k in names}), _sympy(grids[c][a]))
            for c in range(len(values)) for a in range(len(general)))
        result = [rec.expr(g, "grid") for g in general] if ok else []
    except Exception:  # noqa: BLE001 - any failure of the symbolic attempt: one grid per config instead
        ok = False
    del rec.shape_env.guards[start:]
    if ok:
        return result
    return select_over_configs(texts, values, names)


def _sympy(v: Any) -> Any:
    import sympy
    return v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(int(v))


# -- what the kernel writes -----------------------------------------------------------------------------------------

# Note [written pointers]: a kernel that stores through an input's pointer (Liger's cross entropy zeroes the logits of
# ignored rows) writes that input in place, and the op's schema must say so (Tensor(a!)), or functionalization,
# torch.compile and CUDA graphs would treat a written tensor as read-only. Triton's IR knows every write: each
# tt.store, atomic and descriptor store names its pointer, whose value is built from a kernel parameter by pointer
# arithmetic (addptr, splat, broadcast, ...), selects between pointers, loop-carried pointers and branch arguments.
# kernelop lowers each config's kernel to TTIR (after Triton's inliner and its rewrite of block pointers, before any
# GPU-specific pass; a fraction of a second) and follows every written pointer back to the parameters it can come
# from. A pointer it cannot follow (an int cast to a pointer, a pointer loaded from memory, a write in a function
# that was not inlined) may be any of them: every tensor parameter is then taken as written, with a warning.
_POINTER_SOURCES = {  # op -> which operands a pointer result comes from
    "tt.addptr": (0,), "tt.splat": (0,), "tt.broadcast": (0,), "tt.expand_dims": (0,), "tt.reshape": (0,),
    "tt.trans": (0,), "tt.bitcast": (0,), "ttg.convert_layout": (0,), "tt.advance": (0,), "tt.make_tensor_ptr": (0,),
    "tt.make_tensor_descriptor": (0,), "tt.split": (0,), "tt.cat": (0, 1), "tt.join": (0, 1),
    "arith.select": (1, 2),
}
_WRITES = ("tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_store", "tt.descriptor_reduce",
           "tt.descriptor_scatter")  # the pointer (or descriptor) is the op's first value operand
_VALUE = r"%[\w$.-]+(?:#\d+)?"
_OP_LINE = re.compile(r"^(?:(%[\w$.-]+)(?::\d+)? = )?\"?([a-z_]+\.[\w.]+)\"?(.*)$")


class Unfollowable(Exception):
    """A written pointer whose origin the IR does not tell."""


def written_parameters(ttir: str) -> Tuple[Set[int], List[str]]:
    """The positions (among the entry function's parameters) of the pointers a kernel's TTIR (``str_nodebug``) may
    write through, and the lines of the writes it could not follow (then every parameter is in the set)."""
    lines = [line.strip() for line in ttir.splitlines()]
    defs: Dict[str, Tuple[str, List[str]]] = {}  # value -> (op, operands)
    incoming: Dict[str, List[str]] = {}  # loop-carried or branch argument -> the values it may take
    block_args: Dict[str, List[str]] = {}  # "^bb1" -> its arguments
    params: Dict[str, int] = {}
    writes: List[Tuple[str, str, bool]] = []  # (the written value, the line, whether it must be a pointer)
    unfollowable: List[str] = []
    in_entry = False
    for line in lines:
        if line.startswith("tt.func"):
            in_entry = " public " in f" {line} "
            if in_entry:
                params = {n: i for i, n in enumerate(re.findall(r"(%[\w$.-]+): ", line.split("(", 1)[1]))}
            continue
        block = re.match(r"^(\^[\w]+)\((.*)\):", line)
        if block:
            block_args[block.group(1)] = re.findall(r"(%[\w$.-]+): ", block.group(2))
            continue
        m = _OP_LINE.match(line)
        if not m:
            continue
        result, op, rest = m.groups()
        if op in _WRITES or op == "tt.elementwise_inline_asm":
            operands = re.findall(_VALUE, rest)
            if not in_entry:
                unfollowable.append(line)
            elif op == "tt.elementwise_inline_asm":  # asm may write through any pointer it is given
                writes += [(v, line, False) for v in operands]
            elif operands:
                writes.append((operands[0], line, True))
        if op in ("cf.br", "cf.cond_br"):
            for target, args in re.findall(r"(\^[\w]+)\(([^)]*)\)", rest):
                for i, v in enumerate(re.findall(_VALUE, args.split(":")[0])):
                    incoming.setdefault(f"{target}:{i}", []).append(v)
        if result is None:
            continue
        if op == "scf.for":
            carried = re.search(r"iter_args\((.*?)\)\s*->", rest)
            for k, (arg, init) in enumerate(re.findall(rf"(%[\w$.-]+) = ({_VALUE})", carried.group(1) if carried
                                                          else "")):
                incoming.setdefault(arg, []).append(init)
                incoming.setdefault(f"{result}#{k}" if k else result, []).append(init)
            continue
        defs[result] = (op, re.findall(_VALUE, rest.split(" : ")[0]))
    for target, names in block_args.items():
        for i, name in enumerate(names):
            incoming.setdefault(name, []).extend(incoming.get(f"{target}:{i}", []))

    def origins(value: str, seen: Set[str]) -> Set[int]:
        if value in seen:
            return set()
        seen.add(value)
        if value in params:
            return {params[value]}
        value = value[:-2] if value.endswith("#0") else value
        if value in incoming:
            return set().union(*[origins(v, seen) for v in incoming[value]])
        op_operands = defs.get(value.split("#")[0])
        if op_operands is None or op_operands[0] not in _POINTER_SOURCES:
            raise Unfollowable(value)
        op, operands = op_operands
        picked = [operands[i] for i in _POINTER_SOURCES[op] if i < len(operands)]
        return set().union(*[origins(v, seen) for v in picked])

    written: Set[int] = set()
    for value, line, pointer in writes:
        try:
            written |= origins(value, set())
        except Unfollowable:
            if pointer:
                unfollowable.append(line)
    if unfollowable:
        written = set(params.values())
    return written, unfollowable


def _kernel_writes(ctx: Recording, kernel: Any, signature: Dict[str, str], constexpr_sets: List[Dict[str, Any]]
                   ) -> Set[str]:
    """The parameters each config's kernel may write through (Note [written pointers])."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    runtime = [n for n in kernel.arg_names if signature.get(n) != "constexpr"]
    target = GPUTarget("cuda", arch_number(DEFAULT_ARCHS[0]), 32)
    backend = make_backend(target)
    written: Set[str] = set()
    for constexprs in {json.dumps(c, sort_keys=True, default=str): c for c in constexpr_sets}.values():
        # One analysis per kernel (Triton's cache key: its source and every function it calls), signature and
        # constexprs in a process: a recording runs launch_fn at several ranks and size classes.
        key = json.dumps([kernel.cache_key, signature, constexprs], sort_keys=True, default=str)
        if key not in _ANALYSED:
            _ANALYSED[key] = _ttir_writes(ctx, kernel, signature, constexprs, target, backend, ir, ASTSource)
        positions, unfollowable = _ANALYSED[key]
        if unfollowable:
            warnings.warn(f"{ctx.where}: {shorten(kernel.__name__)} writes through a pointer kernelop cannot follow "
                          f"to a parameter ({shorten(unfollowable[0], 200)}); every tensor it is given is taken as "
                          "written (inputs become Tensor(a!))", stacklevel=5)
        written |= {runtime[i] for i in positions if i < len(runtime)}
    return written


_ANALYSED: Dict[str, Tuple[Set[int], List[str]]] = {}  # _kernel_writes' analyses by kernel, signature, constexprs


def _ttir_writes(ctx: Recording, kernel: Any, signature: Dict[str, str], constexprs: Dict[str, Any], target: Any,
                 backend: Any, ir: Any, ASTSource: Any) -> Tuple[Set[int], List[str]]:
    """written_parameters of one config's kernel, lowered to TTIR."""
    src = ASTSource(kernel, dict(signature), constexprs=dict(constexprs), attrs={})
    try:
        options = backend.parse_options(src.parse_options())
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(target, options, backend.get_codegen_implementation(options),
                             backend.get_module_map(), context)
        stages: Dict[str, Any] = {}
        backend.add_stages(stages, options, src.language)
        text = stages["ttir"](module, {}).str_nodebug()
    except Exception as e:  # noqa: BLE001 - Triton's own error, named with the config
        raise ValueError(f"{ctx.where}: Triton cannot build {shorten(kernel.__name__)} with "
                         f"{shorten(constexprs, 300)}: {type(e).__name__}: {shorten(e, 1000)}") from e
    return written_parameters(text)


# -- compilation ----------------------------------------------------------------------------------------------------

def _plan_compile(recorded: RecordedPlugin, program: int, arch: str) -> CompileJob:
    """triton.compile of one tactic for one architecture, its options parsed by Triton (which refuses, say,
    num_warps=3) when planned, before anything is compiled."""
    import triton as triton_module
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import get_cache_key

    number = arch_number(arch)
    cc = recorded.compile_configs[program]
    attrs = {(i,): [["tt.divisibility", 16]] for i in cc["divisible"]}
    src = ASTSource(recorded.fn, dict(recorded.dsl_state.signature), constexprs=dict(cc["constexprs"]), attrs=attrs)
    target = GPUTarget("cuda", number, 32)
    try:
        backend = make_backend(target)
        options = backend.parse_options(dict(cc["options"], **src.parse_options()))
    except Exception as e:  # noqa: BLE001 - Triton's refusal, named with the tactic
        raise ValueError(f"op {shorten(recorded.op_name)}: tactic {program} ({tactic_text(recorded, program)}) for "
                         f"sm_{number}: Triton refuses its options: {type(e).__name__}: {shorten(e, 500)}") from e

    def compile() -> CompiledKernel:
        try:
            k = triton_module.compile(src, target=target, options=dict(cc["options"]))
        except Exception as e:  # noqa: BLE001 - Triton's compile error, named with the tactic
            raise RuntimeError(f"op {shorten(recorded.op_name)}: triton.compile of tactic {program} "
                               f"({tactic_text(recorded, program)}) for sm_{number} failed: {e}") from e
        md = k.metadata
        return CompiledKernel(name=md.name, cubin=k.asm["cubin"], ptx=k.asm["ptx"], shared=int(md.shared),
                              global_scratch=int(getattr(md, "global_scratch_size", 0) or 0),
                              global_scratch_align=int(getattr(md, "global_scratch_align", 1) or 1),
                              profile_scratch=int(getattr(md, "profile_scratch_size", 0) or 0),
                              num_ctas=int(getattr(md, "num_ctas", 1)), num_warps=int(md.num_warps),
                              cooperative=bool(getattr(md, "launch_cooperative_grid", False)),
                              pdl=bool(getattr(md, "launch_pdl", False)))

    # Triton's own cache key (its version, the kernel and every function it calls or gets as a constexpr, the
    # signature, constexprs and attrs, the backend with ptxas, the parsed options, the environment variables that
    # change code); the recorder adds the layout of kernelop's entry.
    return CompileJob(compile, get_cache_key(src, backend, options, get_cache_invalidating_env_vars()))


def _check_compiled(recorded: RecordedPlugin, program: int, compiled: CompiledKernel) -> Optional[str]:
    if compiled.num_warps != recorded.compile_configs[program]["options"]["num_warps"]:
        return f"Triton compiled it for {compiled.num_warps} warps, not the config's"
    return None


DSL = Dsl(name="triton", title="Triton", spec_type=TritonSpec, check_archs=triton_archs, intercept=_intercept,
          one_launch=_first_launch, translate=_translate, plan_compile=_plan_compile, check_inputs=_check_inputs,
          check_compiled=_check_compiled, launch_tensors=_launch_tensors)
