"""The recorder's front door (custom_plugin, record_plugin), what a DSL front end implements (Dsl), one recording in
progress (Recording) and its result (RecordedPlugin). Nothing here names a DSL: they are rows of kernelop._dsls."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import (AbstractSet, Any, Callable, ContextManager, Dict, Iterator, List, Optional, Sequence, Set, Tuple,
                    Union)

import torch

from .. import _dsls, _kernelop, _kernelop_torch
from .._spec import Backward
from .._symbolic import _HINTS, Recorder, Unexpressible, canonical, shorten
from . import compiling, sizes
from . import growth as growth_
from .compiling import CompiledKernel, CompileJob, KernelBinary
from .configs import (check_config_values, conjunction, count, select_over_conditions, select_over_configs,
                      validate_recorded)
from .interception import Handlers, NestedRecording, current_recording, intercepting, nested_message, recording
from .program import Program, copies_checked, glue_launch, plan_program, storage_of
from .program import VIEWS
from .tracing import (HostTests, Input, LaunchFnRaised, check_returned_inputs, examples, inputs_json, layout_of,
                      like_example, make_fakes, name_outputs, output_shapes, outputs_of, run_launch_fn,
                      signature_inputs, tensor_name)


def _accept_inputs(where: str, inputs: List[Input]) -> None:
    pass


def _no_problem(recorded: "RecordedPlugin", program: int, compiled: CompiledKernel) -> Optional[str]:
    return None


@dataclass(frozen=True)
class Dsl:
    """A DSL front end: what the one recorder asks of it. Each front end's module defines one as ``DSL`` and has a
    row in kernelop._dsls' table; the recorder does everything else (running launch_fn on fakes, host-side
    policing, outputs, requirements, configs, validation, the op's name, the compile loop and cache)."""

    name: str  # the spec's key and the package's tag ("triton"), kernelop.<name>(...), the namespace kernelop_<name>
    title: str  # in messages: "Triton", "CuTe DSL"
    spec_type: type  # what kernelop.<name>(...) makes: a frozen dataclass with launch_fn and configs (and its own)
    # (where, archs as the user gave them) -> the architectures, checked before anything is compiled
    check_archs: Callable[[str, Any], List[str]]
    # (a list the handlers append each launch to) -> what to intercept while launch_fn runs (Note [interception])
    intercept: Callable[[List[Any]], Handlers]
    # (where, the launches) -> (the one launch, the kernel's name); refuses none or several
    one_launch: Callable[[str, List[Any]], Tuple[Any, str]]
    # (the recording, the spec, the launch) -> the op: its arguments mapped to the DSL's calling convention, its
    # geometry, tunables and configs (one tactic each)
    translate: Callable[["Recording", Any, Any], "RecordedPlugin"]
    # (recorded, program, arch) -> how to compile one tactic's program for one architecture
    plan_compile: Callable[["RecordedPlugin", int, str], CompileJob]
    # (where, launch_fn's parameters): refuses one the DSL cannot take, before launch_fn runs
    check_inputs: Callable[[str, List[Input]], None] = _accept_inputs
    # (recorded, program, compiled) -> why kernelop cannot launch it, beyond the recorder's own rules; or None
    check_compiled: Callable[["RecordedPlugin", int, CompiledKernel], Optional[str]] = _no_problem
    # (a launch) -> (kernel parameter -> the tensor it gets, the names a tensor may not take: the kernel's
    # tunables); a DSL that gives it records several launches, scratch and glue (Note [recorded programs]), one
    # that does not records one launch per op (one_launch refuses more)
    launch_tensors: Optional[Callable[[Any], Tuple[Dict[str, Any], Set[str]]]] = None
    # () -> a context launch_fn runs in, besides the interception (the CuTe DSL's: libraries' kernel caches off)
    while_recording: Callable[[], ContextManager[Any]] = contextlib.nullcontext
    # the architectures an op compiles for when its spec names none, if the DSL has such a list (its compile default)
    default_archs: Tuple[str, ...] = ()
    # (recorded, program) -> the program's architecture-independent image (cuTile's Tile IR bytecode), or None
    portable: Optional[Callable[["RecordedPlugin", int], Optional[KernelBinary]]] = None


@dataclass
class RecordedPlugin:
    """A recorded launch (Triton's, or a CuTe DSL host function's): the op's kernelop spec plus what its compiler
    needs for each tactic."""

    op_name: str
    doc: Dict[str, Any]
    dsl: Dsl = field(repr=False)
    fn: Any  # what the DSL compiles: Triton's JITFunction, the @cute.jit function
    constexprs: Dict[str, Any]  # the compile-time values the launch passes
    compile_configs: List[Dict[str, Any]] = field(default_factory=list)  # per tactic: what the compiler needs
    default_archs: Tuple[str, ...] = ()  # compiled for when compile() is given none
    scratch_param: int = -1  # the kernel parameter the global scratch memory a build needs is passed as; -1: none
    dsl_state: Any = field(default=None, repr=False)  # the DSL's own, for its compiler
    # the recorded backward (Note [backward]; its spec is doc["backward"]), whose binaries go with the op's
    backward: Optional["RecordedPlugin"] = field(default=None, repr=False)
    # per entry of doc["then"] (Note [recorded programs]): the recorded kernel launched there, or None for kernelop's
    # glue (CUDA C++, which C++ compiles)
    then: List[Optional["RecordedPlugin"]] = field(default_factory=list, repr=False)
    writes: Optional[Set[str]] = None  # the op's tensors its kernel may write, where the DSL knows
    # the example tensors it was recorded from (contiguous where launch_fn refused an example's layout): the
    # backward's examples are made from them
    examples: Optional[Dict[str, torch.Tensor]] = field(default=None, repr=False, compare=False)
    # the architectures launch_fn decided the device's compute capability for, if it read it: compiled for no other
    capability_archs: Tuple[str, ...] = ()
    # what compile() made, by the architectures it was given
    _binaries: Dict[Tuple[str, ...], List[KernelBinary]] = field(default_factory=dict, repr=False, compare=False)
    # recorded with first_use=True: how it records a size class when first called with it (Note [first-use growth])
    growth: Optional[growth_.Growth] = field(default=None, repr=False, compare=False)

    def spec_json(self) -> str:
        """The op's kernelop spec as JSON: inspectable and diffable (docs/spec-format.md)."""
        with self._chain_lock():
            return json.dumps(self.full_doc(), indent=2) + "\n"

    def full_doc(self) -> Dict[str, Any]:
        """The op's spec with its backward chain as it is now (Note [first-use growth]: each link grows on its own
        calls, after the forward embedded it)."""
        if self.backward is None:
            return self.doc
        link = self.backward.full_doc()
        return {**self.doc, "backward": {**self.doc["backward"], **{k: v for k, v in link.items() if k != "op"}}}

    def _chain_lock(self) -> Any:
        """The lock growth of its chain holds (Note [first-use growth]), or none."""
        return self.growth.lock if self.growth is not None else contextlib.nullcontext()

    def compile(self, archs: Optional[Sequence[str]] = None) -> List[KernelBinary]:
        """Compiles each tactic for each architecture (triton.compile through kernelop's compile cache, or
        cute.compile); ``archs`` are checked before anything is compiled."""
        where = f"op {shorten(self.op_name)}"
        outer = current_recording()
        if outer is not None:
            raise NestedRecording(nested_message(f"{where} (compiled, registered, checked or packaged)", outer))
        arch_list = self.dsl.check_archs(where, archs if archs is not None else self.default_archs)
        other = [a for a in arch_list if a not in self.capability_archs]
        if self.capability_archs and other:
            raise ValueError(f"{where}: launch_fn decided on the device's compute capability for "
                             f"{', '.join(self.capability_archs)}, as it was recorded; compiling it for {other[0]} "
                             "would run those decisions there: record it with arch= naming every architecture")
        key = tuple(arch_list)
        if key not in self._binaries:
            binaries = compiling.compile_binaries(self, arch_list)
            for k, later in enumerate(self.then, 1):  # KernelBinary.launch tells the launches apart
                if later is not None:
                    binaries += [dataclasses.replace(b, launch=k) for b in compiling.compile_binaries(later,
                                                                                                   arch_list)]
            self._binaries[key] = binaries
        return self._binaries[key]

    def compile_programs(self, archs: List[str], programs: Sequence[int]) -> List[KernelBinary]:
        """The binaries of these tactics' programs alone (Note [first-use growth]: the tactics a size class adds)."""
        return compiling.compile_binaries(self, archs, programs)

    def backward_binaries(self, archs: Optional[Sequence[str]] = None) -> List[List[KernelBinary]]:
        """The backward chain's binaries, one list per link (Note [backward chain])."""
        chain, link = [], self.backward
        while link is not None:
            chain.append(link.compile(archs))
            link = link.backward
        return chain

    def check(self, archs: Optional[Sequence[str]] = None) -> None:
        """Compiles and checks the binaries against the spec as registration does; registers nothing."""
        with self._chain_lock():
            _kernelop.check_binaries(json.dumps(self.full_doc()), self.compile(archs), self.backward_binaries(archs))

    def register(self, archs: Optional[Sequence[str]] = None) -> Any:
        from .._ops import _op_object
        with self._chain_lock():
            if self.growth is not None and self.growth.registration is not None and \
                    self.growth.registration.current:  # registered, and grown since: that registration
                return _op_object(self.op_name)
            doc = json.dumps(self.full_doc())
            binaries = self.compile(archs)
            backward = self.backward_binaries(archs)
            overrides = _kernelop.Overrides()
            # (an op that grows on first use is another op than one that does not)
            overrides.caller_key = self.dsl.name + (":first_use:" if self.growth else ":") + hashlib.sha256(
                json.dumps(self.full_doc(), sort_keys=True).encode() +
                b"".join(b.data for b in binaries + [b for link in backward for b in link])).hexdigest()
            registration = _kernelop_torch.register_binaries(doc, binaries, overrides, backward)
            # Note [first-use growth]: the op, and each link of its chain, grows on a miss, under one lock
            link: Optional[RecordedPlugin] = self
            while link is not None:
                if link.growth is not None:
                    reg = registration if link is self else _kernelop_torch.find_registration(link.op_name)
                    if self.growth is not None:
                        link.growth.lock = self.growth.lock
                    if not reg.has_miss_handler:
                        reg.on_miss(growth_.handler(link, reg, archs))
                        link.growth.registration = reg
                link = link.backward
            return _op_object(self.op_name)

    def build_package(self, path: Union[str, os.PathLike], archs: Optional[Sequence[str]] = None) -> str:
        with self._chain_lock():
            _kernelop.build_package_binaries(json.dumps(self.full_doc()), self.compile(archs), os.fspath(path),
                                             self.backward_binaries(archs))
        return os.fspath(path)


@dataclass
class Recording:
    """One recording after launch_fn ran: what the recorder made of it, for the DSL's translate."""

    dsl: Dsl
    where: str  # kernelop.custom_plugin('<op name>'), in messages
    rec: Recorder
    inputs: List[Input]
    fakes: List[Any]  # launch_fn's arguments
    outputs: List[Any]  # the tensors launch_fn returned
    op_name: str  # as given, else kernelop_<dsl>::<kernel> until named after what was recorded
    named: bool  # whether the user gave op_name
    meta_impl: Optional[Callable[..., Any]]
    inits: List[Optional[Dict[str, Any]]] = field(default_factory=list)  # per output (Note [initialised outputs])
    permutes: List[Optional[List[int]]] = field(default_factory=list)  # per returned output (Note [returned views])
    strided: Set[str] = field(default_factory=set)  # inputs only a permuted copy reads (Program.strided_inputs)
    out_names: List[str] = field(default_factory=list)
    tactics: str = ""  # how the user's configs became the spec's tactics, for validate's messages
    name_key: Any = None  # what names the op by default besides its spec (Triton: the kernel's cache key)
    fixed_names: Optional[List[str]] = None  # a backward's outputs: grad_<input> (Note [backward])
    scratch: int = 0  # the last `scratch` of `outputs` are scratch (Note [recorded programs])
    then: List[Dict[str, Any]] = field(default_factory=list)  # the op's later launches, as its spec's "then"
    later: bool = False  # translating a later launch: a part of the op, validated with it
    program: bool = False  # the op has scratch, glue or several kernels: configs keep launch_fn's constexprs
    names_fixed: bool = False  # out_names were given for every launch (name_all)

    def name_all(self, tensors: Dict[str, Any], reserved: Any) -> None:
        """Names the outputs and scratch once for all the op's launches (`tensors`: every launch's parameter ->
        tensor, the first launch's first)."""
        self.name_outputs(tensors, reserved)
        self.names_fixed = True

    def name_outputs(self, tensors: Dict[str, Any], reserved: Any = ()) -> List[str]:
        """Names the outputs after the kernel parameter each is passed to (`tensors`: parameter -> tensor), or,
        for a backward, after the gradients they are; scratch after its parameter."""
        if self.names_fixed:
            return self.out_names
        returned = len(self.outputs) - self.scratch
        if self.fixed_names is not None:
            if returned != len(self.fixed_names) and _OUTPUT_NAMES.get() is not None:
                raise ValueError(f"{self.where}: a backward's launch_fn returns one new tensor per differentiable "
                                 f"input, in order ({', '.join(self.fixed_names)}); it returns {returned}")
            if returned != len(self.fixed_names):
                raise ValueError(f"{self.where}: outputs= names {len(self.fixed_names)} tensor(s) "
                                 f"({', '.join(self.fixed_names)}) and launch_fn returns {returned}")
            taken = {t.name for t in self.rec.tensors} | {s.name for s in self.rec.scalars}
            clash = [n for n in self.fixed_names if n in taken]
            if clash:
                raise ValueError(f"{self.where}: output name {clash[0]!r} is also an input's; name outputs apart")
            scratch = name_outputs(self.outputs[returned:], tensors, self.rec, set(reserved) | set(self.fixed_names),
                                   "scratch")
            self.out_names = list(self.fixed_names) + scratch
        else:
            names = name_outputs(self.outputs[:returned], tensors, self.rec, reserved)
            self.out_names = names + name_outputs(self.outputs[returned:], tensors, self.rec,
                                                  set(reserved) | set(names), "scratch")
        # item(t) names the tensor (Note [host reads]).
        self.rec.tensor_names.update({st: n for t, n in zip(self.outputs, self.out_names)
                                      if (st := storage_of(t)) is not None})
        return self.out_names

    def tensor_name(self, value: torch.Tensor, what: str) -> str:
        return tensor_name(self.where, value, self.rec, self.outputs, self.out_names, what,
                           self.dsl.launch_tensors is not None)

    def output_shapes(self, meta_impl: Optional[Callable[..., Any]]) -> List[Dict[str, Any]]:
        """The outputs' spec entries (meta_impl gives the returned ones'), then the scratch's."""
        n = len(self.outputs) - self.scratch
        inits = self.inits or [None] * len(self.outputs)
        out = output_shapes(self.where, self.rec, self.outputs[:n], self.out_names[:n], meta_impl, self.fakes,
                            inits[:n], self.permutes)
        if self.scratch:
            out += [dict(e, scratch=True) for e in output_shapes(self.where, self.rec, self.outputs[n:],
                                                                 self.out_names[n:], None, self.fakes, inits[n:])]
        return out

    def requirements(self) -> List[str]:
        """Every condition launch_fn and meta_impl evaluated or asserted on the sizes."""
        try:
            return self.rec.requirements_from_guards()
        except Unexpressible as e:
            raise ValueError(str(e)) from None

    def expr(self, value: Any, what: str) -> str:
        try:
            return self.rec.expr(value, what)
        except Unexpressible as e:
            raise ValueError(str(e)) from None

    def inputs_json(self) -> List[Dict[str, Any]]:
        return inputs_json(self.rec, self.inputs, self.strided)

    def check_config_values(self, user_configs: Sequence[Dict[str, Any]], tuned: Sequence[str],
                            constexprs: Dict[str, Any]) -> None:
        check_config_values(self.where, user_configs, tuned, constexprs)

    def validate(self, doc: Dict[str, Any]) -> None:
        if not self.later:  # a later launch is validated with the op
            validate_recorded(self.where, doc, self.tactics)


# A backward's output names while it is recorded (Recording.fixed_names): grad_<input> per differentiable input.
_OUTPUT_NAMES: contextvars.ContextVar[Optional[List[str]]] = contextvars.ContextVar("kernelop_output_names",
                                                                                    default=None)


def _example_tensors(where: str, launch_fn: Callable[..., Any], example_inputs: Any
                     ) -> Tuple[List[Input], Dict[str, torch.Tensor]]:
    """launch_fn's inputs and the example tensor of each tensor input (the user's, else rank 2, float32)."""
    inputs = signature_inputs(where, launch_fn)
    tensors = examples(where, [n for n, k, _ in inputs if k == "tensor"], example_inputs)
    return inputs, {name: tensors[name] if name in tensors else torch.empty(_HINTS[1], _HINTS[0], device="meta")
                    for name, kind, _ in inputs if kind == "tensor"}


def _example_outputs(where: str, spec: Any, tensors: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
    """What launch_fn returns for the example tensors, as meta tensors of those sizes (launch_fn run on fakes)."""
    inputs = signature_inputs(where, spec.launch_fn)
    dsl = _dsls.dsl_of(spec)
    assert dsl is not None
    rec, _, result = _discover(dsl, spec, where, inputs, tensors, raise_errors=True)
    outputs, _, permutes = outputs_of(where, result, rec)

    def size(s: Any) -> int:
        hint = s.node.hint if isinstance(s, torch.SymInt) else s
        if hint is None:
            raise ValueError(f"{where}: an output's size depends on a scalar input or the device "
                             f"({shorten(rec.expr(s, 'an output size'))}), so kernelop cannot make examples for the "
                             "backward from the forward's: record the backward of an op whose output sizes are sizes "
                             "of its inputs")
        return int(hint)
    # Their shapes as the op returns them (gradients have them), contiguous: a gradient arrives in any layout (an
    # example's layout would be recorded: Note [example layouts]).
    return [torch.empty([size(s) for s in o.permute(p or list(range(o.dim()))).shape], dtype=o.dtype, device="meta")
            for o, p in zip(outputs, permutes)]


def _record_backward(where: str, forward: RecordedPlugin, spec: Any, backward: Any, example_inputs: Any,
                     named: bool) -> None:
    """Records `backward` (Note [backward]) on examples made from the forward's: each of its tensor parameters
    receives a forward input, a forward output or grad_<output> (by name, or as backward.from_ renames), and its
    outputs are grad_<input> for each differentiable input. The forward's spec gets it as "backward"."""
    dsls = _dsls.all_dsls()
    if not isinstance(backward, Backward):
        raise TypeError(f"{where}: backward must be kernelop.Backward(differentiable, "
                        f"kernelop.{dsls[0].name}(bwd_launch_fn, ...)), got {type(backward).__name__}")
    if not isinstance(backward.spec, tuple(d.spec_type for d in dsls)):
        raise TypeError(f"{where}: the backward of a recorded op is recorded too: Backward.spec must be "
                        f"{' or '.join(f'kernelop.{d.name}(...)' for d in dsls)}, got {type(backward.spec).__name__}")
    part = backward._head()
    differentiable, renames = part["differentiable"], part.get("from", {})
    tensors = forward.examples if forward.examples is not None else \
        _example_tensors(where, spec.launch_fn, example_inputs)[1]
    out_names = [o["name"] for o in forward.doc["outputs"] if not o.get("scratch")]  # scratch is no output
    outs = _example_outputs(where, spec, tensors)
    if len(outs) != len(out_names):
        raise ValueError(f"{where}: launch_fn returned {len(outs)} new tensors for the backward's examples, and the "
                         f"op has {len(out_names)} outputs")
    receivable = {**tensors, **dict(zip(out_names, outs)), **{f"grad_{n}": o for n, o in zip(out_names, outs)}}
    # Note [written results]: an input the op writes and returns has a gradient too, grad_<input>_out (contiguous, as
    # it may arrive; grad_<input> is the gradient the backward gives the input)
    results = [i["name"] for i in forward.doc["inputs"] if i.get("result")]
    receivable.update({f"grad_{n}_out": torch.empty(tensors[n].shape, dtype=tensors[n].dtype, device="meta")
                       for n in results})
    bwd_spec: Any = backward.spec
    bwd_inputs = signature_inputs(f"{where} backward", bwd_spec.launch_fn)
    bwd_tensors = {}
    for name, kind, _ in bwd_inputs:
        if kind != "tensor":
            continue
        got = renames.get(name, name)
        if got not in receivable:
            raise ValueError(f"{where}: the backward's launch_fn takes tensor '{name}'"
                             f"{f' (from {got!r})' if got != name else ''}, which is none of what a backward "
                             f"receives: the forward's tensors {', '.join(repr(n) for n in tensors)}, its outputs "
                             f"{', '.join(repr(n) for n in out_names)} and their gradients "
                             f"{', '.join(repr('grad_' + n) for n in out_names + [r + '_out' for r in results])}")
        bwd_tensors[name] = receivable[got]
    if getattr(bwd_spec, "specialize", None) is None and getattr(spec, "specialize", None) is not None:
        bwd_spec = dataclasses.replace(bwd_spec, specialize=spec.specialize)  # the forward's sizes, by default
    if getattr(spec, "first_use", False) and hasattr(bwd_spec, "first_use"):
        bwd_spec = dataclasses.replace(bwd_spec, first_use=True)  # and its sizes compiled on first use
    if getattr(bwd_spec, "archs", None) is None and getattr(spec, "archs", None) is not None:
        bwd_spec = dataclasses.replace(bwd_spec, archs=spec.archs)  # and its architectures
    token = _OUTPUT_NAMES.set([f"grad_{n}" for n in differentiable])
    try:
        recorded = _record_specs(f"{where} backward", bwd_spec, None, f"{forward.op_name}_backward", bwd_tensors)
    finally:
        _OUTPUT_NAMES.reset(token)
    forward.doc["backward"] = {**part, **{k: v for k, v in recorded.doc.items() if k != "op"}}
    forward.backward = recorded
    if not named:  # the default name covers the backward too (its spec and its kernel's Triton cache key)
        identity = json.dumps([forward.op_name, forward.doc["backward"], str(getattr(recorded.fn, "cache_key", ""))],
                              sort_keys=True)
        forward.op_name = forward.doc["op"] = \
            f"{forward.op_name.rsplit('_', 1)[0]}_{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
        recorded.op_name = recorded.doc["op"] = f"{forward.op_name}_backward"
    # The op with its backward, as C++ will check it, before anything is compiled.
    validate_recorded(where, forward.doc, "the op with its recorded backward")


def _custom_plugin_where(op_name: Any, spec_or_list: Any) -> str:
    if op_name is not None and not isinstance(op_name, str):
        raise TypeError(f"kernelop.custom_plugin: op_name must be a str such as 'my_ns::my_op', got "
                        f"{type(op_name).__name__} {shorten(repr(op_name))}")
    if op_name is None:
        op_name = getattr(getattr(_first(spec_or_list), "launch_fn", None), "__name__", "launch_fn")
    return f"kernelop.custom_plugin({shorten(repr(op_name))})"


def _first(spec_or_list: Any) -> Any:
    return spec_or_list[0] if isinstance(spec_or_list, (list, tuple)) and spec_or_list else spec_or_list


def custom_plugin(spec_or_list: Any, meta_impl: Optional[Callable[..., Any]] = None, *,
                  op_name: Optional[str] = None, package: Optional[Union[str, os.PathLike]] = None,
                  archs: Optional[Sequence[str]] = None, example_inputs: Any = None,
                  backward: Optional[Backward] = None) -> Any:
    """Registers a Triton (or CuTe DSL) kernel as a kernelop op (the reference's ``tta.custom_plugin``); returns its
    ``torch.ops`` packet. ``package``: also write its .kop there. See :func:`record_plugin`."""
    if archs is not None:  # checked before recording (and so before anything is compiled), by the spec's DSL
        dsl = _dsls.dsl_of(_first(spec_or_list))
        if dsl is not None:  # else record_plugin refuses the spec
            archs = dsl.check_archs(_custom_plugin_where(op_name, spec_or_list), archs)
    recorded = record_plugin(spec_or_list, meta_impl, op_name=op_name, example_inputs=example_inputs,
                             backward=backward)
    op = recorded.register(archs)
    if package is not None:
        recorded.build_package(package, archs)
    return op


def record_plugin(spec_or_list: Any, meta_impl: Optional[Callable[..., Any]] = None, *,
                  op_name: Optional[str] = None, example_inputs: Any = None,
                  backward: Optional[Backward] = None) -> RecordedPlugin:
    """Records ``launch_fn`` once on symbolic fake tensors (and traces ``meta_impl`` for the output shapes) into a
    kernelop spec. ``example_inputs`` (a tuple or dict of tensors) gives the tensors' ranks, sizes and dtypes to
    record with (default: rank 2, float32). ``op_name`` defaults to a name derived from the kernel and its configs,
    the same in every process. ``backward``: ``Backward(differentiable, kernelop.triton(bwd_launch_fn, ...))``, a
    recorded backward (Note [backward]: its launch_fn's parameters are named after what they receive, and it
    returns the gradients of ``differentiable`` in order)."""
    where = _custom_plugin_where(op_name, spec_or_list)
    try:
        with recording(where):  # before anything else: a nested recording is refused, never waited for
            recorded = _record_specs(where, spec_or_list, meta_impl, op_name, example_inputs)
            if backward is not None:
                _record_backward(where, recorded, _first(spec_or_list), backward, example_inputs, op_name is not None)
            return recorded
    except NestedRecording as e:
        if current_recording() is None:  # the outermost recording: a plain ValueError for the user
            raise ValueError(str(e)) from None
        raise


def _record_specs(where: str, spec_or_list: Any, meta_impl: Optional[Callable[..., Any]], op_name: Optional[str],
                  example_inputs: Any) -> RecordedPlugin:
    dsls = _dsls.all_dsls()
    kinds = tuple(d.spec_type for d in dsls)
    specs: Optional[List[Any]] = [spec_or_list] if isinstance(spec_or_list, kinds) else list(spec_or_list) \
        if isinstance(spec_or_list, (list, tuple)) else None
    if not specs or not all(isinstance(s, kinds) for s in specs) or \
            not all(type(s) is type(specs[0]) for s in specs):
        raise TypeError(f"{where}: expected {' or '.join(f'kernelop.{d.name}(...)' for d in dsls)}, or a list of "
                        f"one kind of them, got {type(spec_or_list).__name__}")
    if meta_impl is not None and not callable(meta_impl):
        raise TypeError(f"{where}: meta_impl must be callable, got {type(meta_impl).__name__}")
    dsl = next(d for d in dsls if isinstance(specs[0], d.spec_type))
    # Several specs of one launch_fn: their configs are one list of tactics, recorded together (so the grid is
    # one expression over all of them). Different launch_fns would be different kernels: one op has one.
    if any(s.launch_fn is not specs[0].launch_fn for s in specs[1:]):
        raise ValueError(f"{where}: the specs have different launch_fns; kernelop compiles one {dsl.title} launch "
                         "per op (its configs are the tactics): give one spec with all the configs, or register one "
                         "op per launch_fn")
    for f in dataclasses.fields(specs[0]):  # anything else a spec says (the CuTe DSL's archs), they all say
        if f.name not in ("launch_fn", "configs") and any(getattr(s, f.name) != getattr(specs[0], f.name)
                                                          for s in specs[1:]):
            raise ValueError(f"{where}: the specs name different {f.name}")
    configs: List[Dict[str, Any]] = []
    for s in specs:
        configs += s.configs or [{}]
    return _record(dsl, dataclasses.replace(specs[0], configs=tuple(configs)), meta_impl, op_name, example_inputs)


def _record(dsl: Dsl, spec: Any, meta_impl: Optional[Callable[..., Any]], op_name: Optional[str],
            example_inputs: Any) -> RecordedPlugin:
    """launch_fn recorded rank-free where it can be (Note [rank-free recording]), once per size class where it
    derives a constexpr from a size (Note [size classes])."""
    fn_name = getattr(spec.launch_fn, "__name__", "launch_fn")
    where = f"kernelop.custom_plugin({shorten(repr(op_name if op_name is not None else fn_name))})"
    inputs, tensors = _example_tensors(where, spec.launch_fn, example_inputs)
    dsl.check_inputs(where, inputs)
    laid = [n for n, t in tensors.items() if layout_of(t) is not None]

    def contiguous(names: List[str]) -> Dict[str, torch.Tensor]:
        return {n: torch.empty(t.shape, dtype=t.dtype, device="meta") if n in names else t for n, t in tensors.items()}

    def record(examples: Dict[str, torch.Tensor]) -> RecordedPlugin:
        recorded = _record_examples(dsl, spec, meta_impl, op_name, where, inputs, examples)
        # (meta copies, laid out as the examples: the user's tensors are not kept alive by the op)
        recorded.examples = {n: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                             for n, t in examples.items()}
        return recorded
    try:
        with warnings.catch_warnings(record=True) as caught:  # emitted only if this recording is the op's
            warnings.simplefilter("always")
            recorded = record(tensors)
    except NestedRecording:
        raise
    except Exception as e:  # noqa: BLE001 - Note [example layouts]: launch_fn may not take that layout
        if not laid:
            raise
        recorded = record(contiguous(laid))
        warnings.warn(f"{where}: recorded with contiguous examples of {', '.join(laid)} (any layout, made "
                      f"contiguous): in their examples' layout, {shorten(e, 300)}", stacklevel=3)
        return recorded
    # Note [example layouts]: the layout of an input the kernel only reads is no requirement (the op takes any, as
    # it would have with a contiguous example): recorded again with those examples contiguous.
    written = {i["name"] for i in recorded.doc["inputs"] if i.get("mutated")}
    read = [n for n in laid if n not in written]
    if read:
        return record(contiguous(read))
    _replay(caught)
    return recorded


def _replay(caught: List[warnings.WarningMessage]) -> None:
    """Warnings recorded under catch_warnings(record=True), issued again under the user's filters, each from its
    module as a filter names it ("ignore::DeprecationWarning:triton.*"), not from its file's path."""
    modules: Dict[str, str] = {}
    for name, m in list(sys.modules.items()):  # the first name of a file ("__main__", not multiprocessing's alias)
        if isinstance(f := getattr(m, "__file__", None), str):
            modules.setdefault(os.path.abspath(f), name)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                               module=modules.get(os.path.abspath(w.filename)))


def _record_examples(dsl: Dsl, spec: Any, meta_impl: Optional[Callable[..., Any]], op_name: Optional[str], where: str,
                     inputs: List[Input], tensors: Dict[str, torch.Tensor]) -> RecordedPlugin:
    """_record for these example tensors."""
    rec, derived, _ = _discover(dsl, spec, where, inputs, tensors)
    if not derived:
        return _record_at_ranks(dsl, spec, meta_impl, op_name, where, inputs, tensors)[0]
    values_of = rec.shape_env.backed_var_to_val if hasattr(rec.shape_env, "backed_var_to_val") else \
        rec.shape_env.var_to_val
    first_use = getattr(spec, "first_use", False)
    d = sizes.classes_of(where, derived, getattr(spec, "specialize", None), values_of.get, first_use)
    classes = _record_classes(dsl, spec, meta_impl, op_name, where, inputs, tensors, d, derived, None)
    if len({bool(rank_free) for _, _, rank_free in classes}) > 1:  # one op has one convention: the examples' ranks
        classes = _record_classes(dsl, spec, meta_impl, op_name, where, inputs, tensors, d, derived, False)
    merged = _merge_classes(where, d, [(v, r) for v, r, _ in classes], op_name is not None)
    if first_use:  # Note [first-use growth]
        merged.growth = growth_.Growth(
            lambda one, rank_free: _record_classes(dsl, spec, meta_impl, op_name, where, inputs, tensors, one,
                                                   derived, rank_free),
            lambda w, all_classes, recorded: _merge_classes(w, all_classes, recorded, True),
            where, d, [(v, r) for v, r, _ in classes], bool(classes[0][2]))
    return merged


def _record_classes(dsl: Dsl, spec: Any, meta_impl: Optional[Callable[..., Any]], op_name: Optional[str], where: str,
                    inputs: List[Input], tensors: Dict[str, torch.Tensor], d: sizes.SizeClasses,
                    derived: List[sizes.Derived], rank_free: Optional[bool]
                    ) -> List[Tuple[Tuple[int, ...], RecordedPlugin, Set[str]]]:
    """Each size class recorded (rank-free where it can be, unless rank_free is False), with its rank-free
    tensors; the classes launch_fn refuses dropped, with a warning (Note [size classes])."""
    classes: List[Tuple[Tuple[int, ...], RecordedPlugin, Set[str]]] = []
    refused: List[Tuple[Tuple[int, ...], Exception]] = []
    texts = {x.text for x in derived}
    for v in d.combos:
        example = d.examples(v)
        inside = {name: like_example(t, [example.get(int(s), int(s)) for s in t.shape]) for name, t in tensors.items()}
        try:
            with sizes.exact_values(d.exact(v)):
                if rank_free is False:
                    r, rec_v, again = _record_once(dsl, spec, meta_impl, op_name, where, inputs, inside, False)
                else:
                    r, rec_v, again = _record_at_ranks(dsl, spec, meta_impl, op_name, where, inputs, inside)
        except NestedRecording:
            raise
        except (LaunchFnRaised, sizes.NoConfigForClass) as e:  # launch_fn refuses the class, or no config is for it
            refused.append((v, e))
            continue
        wrong = _decided_elsewhere(rec_v, d.exact(v))
        if wrong is not None:  # a class of 1, recorded at another size: launch_fn decided something not true at 1
            refused.append((v, ValueError(f"launch_fn decides {wrong} on the host, which does not hold there")))
            continue
        if len({x.text for x in again}) != len(texts):  # (named by rank or from the end: counted, not compared)
            raise ValueError(f"{where}: launch_fn derives {', '.join(map(repr, again)) or 'nothing'} for sizes where "
                             f"{d.within(v)}, but {', '.join(map(repr, derived))} for the examples; kernelop records "
                             "the classes of the sizes the examples derive from")
        classes.append((v, r, rec_v.rank_free))
    if classes and refused:
        warnings.warn(f"{where}: launch_fn refuses size classes {', '.join(str(d.key(v)) for v, _ in refused)} of "
                      f"{d!r}; sizes there are refused too (for {d.within(refused[0][0])}: "
                      f"{shorten(refused[0][1], 300)})", stacklevel=4)
    if not classes:
        first, error = refused[0]
        raise ValueError(f"{where}: launch_fn derives {d!r} and refuses every class of it kernelop recorded "
                         f"({', '.join(str(d.key(v)) for v, _ in refused)}); for {d.within(first)}: "
                         f"{shorten(error, 1000)}") from error
    return classes


def _decided_elsewhere(rec: Recorder, exact: Dict[Any, int]) -> Optional[str]:
    """A condition launch_fn evaluated on the host that is false for the sizes of a class of 1 (Note [size classes]:
    such a class is recorded at another size), as text; None when every one holds."""
    import sympy
    ones = {sym: sympy.Integer(1) for sym in rec.dim_keys if any(exact.get(k) == 1 for k in rec.keys_of(sym))}
    if not ones:
        return None
    for guard in rec.shape_env.guards:
        if set(ones) & guard.expr.free_symbols and guard.expr.subs(ones) == sympy.false:
            return rec.describe(guard.expr)
    return None


def _discover(dsl: Dsl, spec: Any, where: str, inputs: List[Input], tensors: Dict[str, torch.Tensor],
              raise_errors: bool = False) -> Tuple[Recorder, List[sizes.Derived], Any]:
    """launch_fn run once at the examples' ranks, for what it derives from sizes (Note [size classes]), with what it
    returned; its errors are left to the recordings that follow unless `raise_errors`."""
    rec = Recorder(where)
    rec.archs = _recorded_archs(dsl, spec)
    rec.rank_free = {name for name, t in tensors.items() if t.dim() >= 2}  # sizes named as rank-free ops name them
    fakes = make_fakes(rec, inputs, tensors)
    derived = sizes.begin(rec)
    result = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result, _ = run_launch_fn(where, rec, spec.launch_fn, fakes, _intercepting(dsl, []),
                                      host=HostTests() if _host_sync(spec) else None)
    except NestedRecording:
        raise
    except Exception:  # noqa: BLE001 - the recording proper reports it
        if raise_errors:
            raise
    finally:
        sizes.end()
    return rec, derived, result


def _record_at_ranks(dsl: Dsl, spec: Any, meta_impl: Optional[Callable[..., Any]], op_name: Optional[str],
                     where: str, inputs: List[Input], tensors: Dict[str, torch.Tensor]
                     ) -> Tuple[RecordedPlugin, Recorder, List[sizes.Derived]]:
    """Recorded at two ranks above the examples', kept when both give the same op; else at the examples' ranks,
    with the ranks as requirements (Note [rank-free recording]). An example's layout (Note [example layouts]) is
    one of its rank."""
    if any(layout_of(t) is not None for t in tensors.values()):
        return _record_once(dsl, spec, meta_impl, op_name, where, inputs, tensors, False)
    probes = []
    for extra in (1, 2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                probes.append((_record_once(dsl, spec, meta_impl, op_name, where, inputs,
                                            _higher_ranks(tensors, extra), True), caught))
            except NestedRecording:
                raise
            except Exception:  # noqa: BLE001 - rank-specific code: recorded at the examples' ranks below
                break
    if len(probes) == 2 and _same_op(probes[0][0][0], probes[1][0][0]):
        _replay(probes[0][1])
        return probes[0][0]
    return _record_once(dsl, spec, meta_impl, op_name, where, inputs, tensors, False)


def _same_tunables(where: str, d: sizes.SizeClasses, classes: List[Tuple[Tuple[int, ...], RecordedPlugin]]
                   ) -> List[Tuple[Tuple[int, ...], RecordedPlugin]]:
    """The classes with one list of tunables: a constexpr derived in some classes and a constant in others (Liger's
    ``min(MAX_FUSED_SIZE, next_power_of_2(V))`` is MAX_FUSED_SIZE itself for the largest classes) is a tunable of
    all, bound in each config of the others to the constant they compiled in."""
    names: List[str] = []
    for _, r in classes:
        names += [t for t in r.doc.get("tunables", []) if t not in names]
    out = []
    for v, r in classes:
        missing = [t for t in names if t not in r.doc.get("tunables", [])]
        configs = []
        # appended side by side (DSL translate); an op with no tunables has its one tactic's
        for c, compiled in zip(r.doc.get("configs", [{}]), r.compile_configs):
            constants = compiled.get("constexprs", {})
            absent = [t for t in missing if not isinstance(constants.get(t), int)]  # derived values are ints
            if absent:
                raise ValueError(f"{where}: the op recorded for {d.within(v)} has no meta-parameter "
                                 f"{absent[0]!r}, which other size classes derive; kernelop merges size classes "
                                 "that differ only in constexprs, compile options, configs and the grid")
            configs.append(dict(c, **{t: int(constants[t]) for t in missing}))  # config values are ints
        out.append((v, dataclasses.replace(r, doc=dict(r.doc, tunables=names, configs=configs))))
    return out


def _merge_classes(where: str, d: sizes.SizeClasses, classes: List[Tuple[Tuple[int, ...], RecordedPlugin]],
                   named: bool) -> RecordedPlugin:
    """One op of the size classes' recordings (Note [size classes]): their configs side by side, each requiring its
    class; the op requiring that one class holds."""
    classes = _same_tunables(where, d, classes)
    base = classes[0][1]
    for v, r in classes[1:]:
        for k in set(base.doc) | set(r.doc):
            if k in ("op", "requires", "configs", "inputs") + _SELECTABLE:
                continue
            if base.doc.get(k) != r.doc.get(k):
                raise _classes_differ(where, d, classes[0][0], v, k)
    requires = [r.doc.get("requires", []) for _, r in classes]
    common = [c for c in requires[0] if all(c in other for other in requires[1:])]
    extra = [[c for c in req if c not in common] for req in requires]
    doc = dict(base.doc)
    for k in _SELECTABLE:  # a launch value or a shape that differs between classes: a select over them
        missing = [v for v, r in classes if k not in r.doc]
        if missing and len(missing) < len(classes):  # (a later launch only some classes make, for one)
            raise _classes_differ(where, d, classes[0][0], missing[0] if k in doc else
                                  next(v for v, r in classes if k in r.doc), k)
        if k in doc:
            doc[k] = _select_over_classes(where, d, classes, k)
    mutated = {i["name"] for _, r in classes for i in r.doc["inputs"] if i.get("mutated")}
    doc["inputs"] = [dict(i, mutated=True) if i["name"] in mutated else i for i in base.doc["inputs"]]
    configs: List[Dict[str, Any]] = []
    compile_configs: List[Dict[str, Any]] = []
    for (v, r), more in zip(classes, extra):
        for c in r.doc["configs"]:
            c = dict(c)
            c[_SIZE_CLASS] = d.key(v)  # configs of different classes bind different values (tactics are told apart)
            if more or c.get("requires"):
                c["requires"] = more + [x for x in c.get("requires", []) if x not in more]
            configs.append(c)
        compile_configs += r.compile_configs
    if _SIZE_CLASS in doc["tunables"]:
        raise ValueError(f"{where}: the kernel has a meta-parameter named '{_SIZE_CLASS}', the tunable kernelop gives "
                         "an op's size classes; rename it")
    doc["tunables"] = doc.get("tunables", []) + [_SIZE_CLASS]
    if all(extra):  # a size no class covers is refused by the Meta kernel too, not only at launch
        common.append(canonical(" + ".join(conjunction(more) for more in extra) + " != 0"))
    doc["requires"] = common
    doc["configs"] = configs
    merged = dataclasses.replace(base, doc=doc, compile_configs=compile_configs, _binaries={},
                                 capability_archs=next((r.capability_archs for _, r in classes if r.capability_archs),
                                                       ()))
    if not named:
        body = {k: v for k, v in doc.items() if k != "op"}
        name = doc["op"].rsplit("_", 1)[0]
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
        merged.op_name = doc["op"] = f"{name}_{digest}"
    validate_recorded(where, doc, f"{len(classes)} size classes of {d!r} "
                      f"({', '.join(str(d.key(v)) for v, _ in classes)}) make {len(configs)} tactics")
    return merged


_SIZE_CLASS = "size_class"


def _classes_differ(where: str, d: sizes.SizeClasses, first: Tuple[int, ...], v: Tuple[int, ...], k: str) -> Exception:
    return ValueError(f"{where}: the op recorded for {d.within(v)} differs from the one for {d.within(first)} in "
                      f"{k!r}; kernelop merges size classes that differ only in constexprs, compile options, configs "
                      "and launch values (the grid, block, shared memory and the kernel's int arguments)")


_SELECTABLE = ("geometry", "params", "outputs", "then")
"""What size classes may differ in (Note [size classes]): expressions in the launch (grid, block, shared memory, the
kernel's int arguments), the outputs' and scratch's shapes (per-SM partials sized by the class) and the later
launches'."""
_EXPRESSION_KEYS = ("expr", "grid", "block", "shared_mem", "cluster", "shape")


def _select_over_classes(where: str, d: sizes.SizeClasses, classes: List[Tuple[Tuple[int, ...], RecordedPlugin]],
                         key: str) -> Any:
    """The classes' `key` (_SELECTABLE) as one, each expression that differs between classes a select over
    size_class; anything else must be the same."""
    def walk(x: Any, exprs: List[str], is_expr: bool) -> Any:
        """x with its expressions taken out into exprs (each replaced by a marker)."""
        if isinstance(x, dict):
            return {k: walk(v, exprs, k in _EXPRESSION_KEYS) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v, exprs, is_expr) for v in x]
        if is_expr:
            exprs.append(str(x))
            return "\0"
        return x

    def as_merged(doc: Any) -> Any:
        """A class's value of `key`; a geometry without a cluster, where another class's has one, as a cluster of 1
        (QuACK launches clusters at long rows only)."""
        if key == "geometry" and isinstance(doc, dict) and "custom" in doc and "cluster" not in doc["custom"] and \
                any("cluster" in r.doc.get(key, {}).get("custom", {}) for _, r in classes):
            return {**doc, "custom": {**doc["custom"], "cluster": ["1", "1", "1"]}}
        return doc

    shapes, texts = [], []
    for _, r in classes:
        exprs: List[str] = []
        shapes.append(walk(as_merged(r.doc.get(key)), exprs, False))
        texts.append(exprs)
    for (v, _), shape in zip(classes[1:], shapes[1:]):
        if shape != shapes[0]:
            raise _classes_differ(where, d, classes[0][0], v, key)
    if all(t == texts[0] for t in texts):
        return classes[0][1].doc[key]
    if key in ("geometry", "params"):  # the op's own launch: its tactic's class
        merged = iter(select_over_configs(texts, [{_SIZE_CLASS: d.key(v)} for v, _ in classes], [_SIZE_CLASS]))
    else:  # shapes (which no tunable may decide) and later launches: the class's condition on the sizes
        merged = iter(select_over_conditions(texts, [d.condition(v) for v, _ in classes]))

    def put(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: put(v) for k, v in x.items()}
        if isinstance(x, list):
            return [put(v) for v in x]
        return next(merged) if x == "\0" else x
    return put(shapes[0])


# Host calls library code makes around a launch that need a GPU and change nothing kernelop records: replaced while
# launch_fn runs (the op launches on its inputs' device, on the caller's stream).
_HOST = {(torch.cuda, "device"): lambda original, *args, **kwargs: contextlib.nullcontext(),
         (torch.cuda, "get_device_properties"): sizes.device_properties,
         # sizes a library compiles in (Note [sizes as ints])
         (torch.SymInt, "__int__"): sizes.size_as_int, (torch.SymInt, "__index__"): sizes.size_as_int,
         (torch.SymInt, "__hash__"): sizes.size_hash,
         **{(torch.SymInt, name): sizes.size_comparison(name)
            for name in sizes.COMPARISONS}}

def _recorded_archs(dsl: Dsl, spec: Any) -> Tuple[str, ...]:
    """The architectures the op compiles for, where known as it is recorded (the spec's arch=, else the DSL's)."""
    return tuple(getattr(spec, "archs", None) or dsl.default_archs)


@contextlib.contextmanager
def _intercepting(dsl: Dsl, launches: List[Any]) -> Iterator[None]:
    """What launch_fn runs under: the host calls replaced (_HOST), the DSL's launch intercepted, its context."""
    with intercepting({**_HOST, **dsl.intercept(launches)}), dsl.while_recording():
        yield


_LEADING_HINTS = (3, 5)  # sizes of the axes added to record at higher ranks: small, so products of leading sizes
# stay in the range a library's branches on them (Liger's "n_rows < 4096 * 8") take for the examples


def _higher_ranks(tensors: Dict[str, torch.Tensor], extra: int) -> Dict[str, torch.Tensor]:
    """The example tensors `extra` ranks above: axes added after the first to every tensor of rank >= 2; tensors of
    rank 0 and 1 kept (a bias, a weight)."""
    out = {}
    for name, ex in tensors.items():
        shape = list(ex.shape)
        if len(shape) >= 2:  # after the first axis: the first and the last keep the examples' sizes
            shape = shape[:1] + list(_LEADING_HINTS[:extra]) + shape[1:]
        out[name] = torch.empty(shape, dtype=ex.dtype, device="meta")
    return out


def _output_names(where: str, spec: Any) -> Optional[List[str]]:
    """The returned tensors' names: a backward's grad_<input> (Note [backward]), else the spec's `outputs`."""
    fixed, given = _OUTPUT_NAMES.get(), getattr(spec, "outputs", None)
    if fixed is not None and given is not None and list(given) != fixed:
        raise ValueError(f"{where}: a backward's outputs are named after the gradients they are ({', '.join(fixed)}); "
                         f"outputs= names them {', '.join(given)}")
    return fixed if fixed is not None else list(given) if given is not None else None


def _same_op(a: RecordedPlugin, b: RecordedPlugin) -> bool:
    strip = lambda r: {k: v for k, v in r.doc.items() if k != "op"}
    return strip(a) == strip(b) and a.compile_configs == b.compile_configs


def _record_once(dsl: Dsl, spec: Any, meta_impl: Optional[Callable[..., Any]], op_name: Optional[str], where: str,
                 inputs: List[Input], tensors: Dict[str, torch.Tensor], rank_free: bool
                 ) -> Tuple[RecordedPlugin, Recorder, List[sizes.Derived]]:
    """launch_fn run once on fakes, its one launch translated by its DSL, the op named after what was recorded
    (unless the user named it) and validated; with the recorder and what launch_fn derived from sizes."""
    rec = Recorder(where)
    rec.archs = _recorded_archs(dsl, spec)
    if rank_free:  # the tensors recorded at two ranks (_higher_ranks)
        rec.rank_free = {name for name, t in tensors.items() if t.dim() >= 3}
    paths = _host_paths(dsl, spec, where, inputs, tensors, rank_free) if _host_sync(spec) else None
    fakes = make_fakes(rec, inputs, tensors)
    launches: List[Any] = []
    derived = sizes.begin(rec)
    host = HostTests(paths.decisions) if paths is not None else None
    try:
        result, writes = run_launch_fn(where, rec, spec.launch_fn, fakes,
                                       _intercepting(dsl, launches), launches, host)
    finally:
        sizes.end()
    if host is not None:  # .item() values are unbacked sizes, written item(t) (Note [host reads])
        rec.host_reads = {e.result.node.expr: e.args[0] for e in writes.events
                          if e.op == "_local_scalar_dense" and isinstance(e.result, torch.SymInt)}
    launch, kernel_name = dsl.one_launch(where, launches)
    outputs, returned, permutes = outputs_of(where, result, rec)
    # Several launches, scratch and glue (Note [recorded programs]), where the DSL tells each launch's tensors; the
    # tensors read on the host are needed like a kernel's (Note [host reads]).
    per_launch = [dsl.launch_tensors(x) for x in launches] if dsl.launch_tensors is not None else []
    read = {f"read{i}": t for i, t in enumerate(writes.host_reads())}
    prog = plan_program(where, rec, writes.events, outputs, [t for t, _ in per_launch] + [read]) if per_launch \
        else Program()
    inits = writes.check(where, rec, outputs + prog.scratch, {storage_of(g.y) for g in prog.glue}, len(outputs))
    named = op_name is not None
    if op_name is None:  # named at the end after what was recorded; the kernel's name meanwhile
        op_name = f"kernelop_{dsl.name}::{kernel_name}"
    rec.where = where = f"kernelop.custom_plugin({shorten(repr(op_name))})"
    recording_ = Recording(dsl, where, rec, inputs, fakes, outputs + prog.scratch, op_name, named, meta_impl,
                           inits=inits, permutes=permutes, strided=prog.strided_inputs(rec, per_launch),
                           fixed_names=_output_names(where, spec),
                           scratch=len(prog.scratch),
                           program=bool(prog.scratch or prog.glue) or len(launches) > 1)
    later: List[Optional[RecordedPlugin]] = []
    order: List[Optional[RecordedPlugin]] = []  # the later kernels and the glue (None), in launch_fn's order
    if per_launch:
        every: Dict[str, Any] = {}
        for tensors, _ in per_launch:
            every.update({k: v for k, v in tensors.items() if k not in every})
        recording_.name_all(every, set().union(*[r for _, r in per_launch]))
        reads = {n for t in read.values() if (n := rec.name_of(t)) is not None}
        # The later kernels first: their grids' conditions on the sizes become the op's requirements too.
        later = [_translate_later(dsl, recording_, spec, x, tensors, reads) for x, (tensors, _) in
                 zip(launches[1:], per_launch[1:])]
        order = _then_order(later, prog)
        recording_.then = _then_entries(recording_, order, prog)
    recorded = dsl.translate(recording_, spec, launch)
    if rec.capability_read:  # decided for these architectures (sizes.DeviceProperties)
        recorded.capability_archs = rec.archs
    check_returned_inputs(where, recorded.doc, returned)  # (before the name: a result is part of the op)
    if paths is not None and host is not None:
        positions = [next(i for i, x in enumerate(order) if x is r) for r in later]
        _add_when(where, rec, paths, host, recorded.doc, recording_.then, positions)
        docs = [recorded.doc] + [recording_.then[k] for k in positions]
        written = [r.writes if r is not None and r.writes is not None else  # else: what it takes, written or not
                   {rec.name_of(t) for t in ts.values()}
                   for r, (ts, _) in zip([recorded] + later, per_launch)]
        _check_read_when_reached(where, rec, paths, host, writes.events, docs, written, prog)
    if recording_.then:
        recorded.doc["then"] = recording_.then
        recorded.then = order
    if prog.copies:  # a copy of an input made after a kernel wrote it would miss the write
        names = {storage_of(t.fake): t.name for t in rec.tensors}
        copies_checked(where, prog, names, [r.writes or set() if r is not None else set()
                                            for r in [recorded] + later])
    if not named:  # the same in every process, and different for a different launch, dtype or config set
        body = {k: v for k, v in recorded.doc.items() if k != "op"}
        identity = json.dumps(body if recording_.name_key is None else [recording_.name_key, body], sort_keys=True)
        recorded.op_name = recorded.doc["op"] = \
            f"kernelop_{dsl.name}::{kernel_name}_{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
    for k, r in enumerate(recorded.then, 1):
        if r is not None:
            r.op_name = f"{recorded.op_name}_launch{k}"
    recording_.validate(recorded.doc)
    return recorded, rec, derived


# Note [host paths]: a launch_fn that tests a tensor's value on the host (torch.equal(t, c), allowed by
# ko.triton(..., host_sync=True): Note [host reads]) takes one branch per call. kernelop runs it once per combination
# of its tests' outcomes, on fresh fakes (at most _MAX_HOST_PATHS): the branches may differ only in which kernels they
# launch (the same aten ops, the same results; the constants a test compares with, which a branch decided earlier may
# never make, are no part of that). The op is the path with the most launches; every other path's launches must be
# some of them, in order, and each launch gets as its `when` the outcomes that decide it: those all the paths that
# make it share, which no path that skips it meets. kernelop tests them in order and stops at the first that fails,
# as the host code does (`if a: ... elif b: ... else: K` gets "when": [not a, not b]; a's branch never tests b).
# Liger's cross entropy backward:
#     if torch.equal(grad_output, torch.tensor(1.0)): pass          (skips its kernel)
#     else: element_mul_kernel[(n_rows,)](...)                      -> "when": [{"tensor": "grad_output", "!=": 1.0}]
_MAX_HOST_PATHS = 16


def _host_sync(spec: Any) -> bool:
    return bool(getattr(spec, "host_sync", False))


@dataclass
class HostPaths:
    """The branch the recording takes (`decisions`), and per launch it makes the outcomes that decide it (test
    index, outcome)."""

    decisions: Tuple[bool, ...]
    when: List[List[Tuple[int, bool]]]


def _tensors_in(x: Any) -> List[torch.Tensor]:
    """The tensors in an argument or a result (nested lists, tuples and dicts)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    return [t for v in x for t in _tensors_in(v)] if isinstance(x, (list, tuple)) else []


def _test_only(writes: Any, launches: List[Any], result: Any) -> Set[int]:
    """Note [host paths]: the events of this branch that ran only for its tests: the tests (torch.equal) and what
    made or inspected a constant only a test reads (torch.tensor(2.0) of `elif torch.equal(h, torch.tensor(2.0))`).
    An op that makes no tensor (x.device) only inspects: it keeps no constant."""
    events = list(writes.events)
    maker = {storage_of(t): i for i, e in reversed(list(enumerate(events))) for t in _tensors_in(e.result)}
    outside = {storage_of(t) for x in launches for t in _tensors_in((getattr(x, "args", ()), getattr(x, "kwargs", {})))}
    outside |= {storage_of(t) for t in _tensors_in(result)}
    readers: Dict[Any, List[int]] = {}  # storage -> the events that make a tensor from it, or test it
    for i, e in enumerate(events):
        if _tensors_in(e.result) or e.op == "equal":
            for t in _tensors_in((e.args, e.kwargs)):
                readers.setdefault(storage_of(t), []).append(i)
    dropped: Set[int] = set()
    while True:
        before = len(dropped)
        for i, e in enumerate(events):
            if i in dropped:
                continue
            made = _tensors_in(e.result)
            reads = {storage_of(t) for t in _tensors_in((e.args, e.kwargs))}
            constant_for_tests = made and all(t in writes.constants for t in made) and all(
                storage_of(t) not in outside and [k for k in readers.get(storage_of(t), []) if k != i]
                and all(k in dropped for k in readers[storage_of(t)] if k != i) for t in made)
            if e.op == "equal" or constant_for_tests or \
                    (not made and reads and all(maker.get(r) in dropped for r in reads)):
                dropped.add(i)
        if len(dropped) == before:
            return dropped


def _host_paths(dsl: Dsl, spec: Any, where: str, inputs: List[Input], tensors: Dict[str, torch.Tensor],
                rank_free: bool) -> HostPaths:
    """Note [host paths]: launch_fn run on every branch of its host tests."""
    def run(decisions: Tuple[bool, ...]) -> Tuple[Tuple[bool, ...], Set[Any], Set[Any], Callable[..., Any]]:
        rec = Recorder(where)
        rec.archs = _recorded_archs(dsl, spec)
        if rank_free:
            rec.rank_free = {name for name, t in tensors.items() if t.dim() >= 3}
        fakes = make_fakes(rec, inputs, tensors)
        launches: List[Any] = []
        host = HostTests(decisions)
        sizes.begin(rec)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result, writes = run_launch_fn(where, rec, spec.launch_fn, fakes,
                                               _intercepting(dsl, launches), launches, host)
        finally:
            sizes.end()
        names = {storage_of(t.fake): t.name for t in rec.tensors}
        dropped = _test_only(writes, launches, result)
        where_of = [(e.where, e.op) for e in writes.events]  # (line, op) of each event, comparable across branches
        host_code = {w for i, w in enumerate(where_of) if i not in dropped}
        for_tests = {w for i, w in enumerate(where_of) if i in dropped}
        tests_of = [(test[0], test[1], test[2]) for test in host.tests]
        taken = decisions[:len(tests_of)] + (False,) * max(0, len(tests_of) - len(decisions))

        def compared(skip: Set[Any]) -> Tuple[List[Any], List[Any], Any, List[int]]:
            """What the branch did, without the aten ops at `skip` that ran only for its tests."""
            # an event is left out when it ran for the tests here and its line and op are host code on no branch
            events = [e for i, e in enumerate(writes.events)
                      if e.op != "equal" and not (i in dropped and where_of[i] in skip)]
            made: Dict[Optional[int], int] = {}  # a tensor launch_fn made: the aten op that made its storage
            for i, e in enumerate(events):
                for t in _tensors_in(e.result):
                    made.setdefault(storage_of(t), i)

            def key(x: Any) -> Any:
                """What a branch did with `x`, comparable across branches: every argument, every view."""
                if isinstance(x, torch.Tensor):
                    st = storage_of(x)
                    return (names[st] if st in names else ("made by", made.get(st)), str(x.dtype),
                            tuple(str(d) for d in x.shape), tuple(str(d) for d in x.stride()),
                            str(x.storage_offset()))
                if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    return str(x.node.expr)
                if isinstance(x, (list, tuple)):
                    return tuple(key(v) for v in x)
                if isinstance(x, dict):
                    return tuple(sorted((str(k), key(v)) for k, v in x.items()))
                if isinstance(x, (int, float, str, bool, type(None), torch.dtype, torch.device)):
                    return x
                return getattr(x, "__code__", None) or type(x).__name__  # a grid function: its code
            launched = [(getattr(x, "fn", None), key(getattr(x, "args", ())), key(getattr(x, "kwargs", {})),
                         key(getattr(x, "grid", None))) for x in launches]
            tests = [(key(t), c, at) for t, c, at in tests_of]
            kept = [e for e in events if e.op not in VIEWS]
            ops = [(e.op, key(e.args), key(e.kwargs)) for e in kept]
            results = [key(r) for r in (result if isinstance(result, (tuple, list)) else [result])]
            return launched, tests, (ops, results), [e.position for e in kept]
        return taken, host_code, for_tests, compared

    runs = []
    pending: List[Tuple[bool, ...]] = [()]
    while pending:
        prefix = pending.pop()
        runs.append(run(prefix))
        taken = runs[-1][0]
        pending += [taken[:j] + (True,) for j in range(len(prefix), len(taken))]
        if len(runs) + len(pending) > _MAX_HOST_PATHS:
            raise ValueError(f"{where}: launch_fn's host tests (torch.equal) make more than {_MAX_HOST_PATHS} "
                             "branches; kernelop records each branch of at most that many")
    # The aten ops every branch that ran them ran only for its tests (a constant one branch tests and another
    # passes to a kernel is host code both share).
    skip = set().union(*(for_tests for _, _, for_tests, _ in runs)) - \
        set().union(*(host_code for _, host_code, _, _ in runs))
    paths = []
    positions: List[List[int]] = []  # per path, per aten op: the number of its kernels launched before it
    for taken, _, _, compared in runs:
        launched, tests, rest, placed = compared(skip)
        paths.append((taken, launched, tests, rest))
        positions.append(placed)
    if len(paths) == 1:
        return HostPaths(paths[0][0], [[] for _ in paths[0][1]])
    lines = ", ".join(dict.fromkeys(at for _, _, tests, _ in paths for _, _, at in tests))

    def refuse(why: str) -> ValueError:
        return ValueError(f"{where}: launch_fn's branches on its host tests (torch.equal at {lines}) {why}; "
                          "kernelop records branches that differ only in which kernels they launch (Note [host "
                          "paths], docs/triton.md)")
    for taken, _, tests, rest in paths:
        if rest != paths[0][3]:
            raise refuse("run different host code (or the same with other arguments) or return different tensors")
        for j, t in enumerate(tests):
            other = next((p[2][j] for p in paths if len(p[2]) > j), t)
            if t[:2] != other[:2]:
                raise refuse("test different tensors at one point")
    main = max(range(len(paths)), key=lambda i: len(paths[i][1]))
    main_launches = paths[main][1]
    present: List[List[int]] = [[] for _ in main_launches]  # per main launch, the paths that make it
    for i, (_, launched, _, _) in enumerate(paths):
        at = 0
        for x in launched:  # a subsequence of the main path's launches, matched in order
            while at < len(main_launches) and main_launches[at] != x:
                at += 1
            if at == len(main_launches):
                raise refuse("launch different kernels, or the same kernel with other arguments")
            present[at].append(i)
            at += 1
    for i in range(len(paths)):  # each aten op between the same kernels on every branch (those it launches)
        mine = [k for k, made in enumerate(present) if i in made]  # the main path's index of each of its kernels
        for p, q in zip(positions[i], positions[main]):
            if not (mine[p - 1] + 1 if p > 0 else 0) <= q <= (mine[p] if p < len(mine) else len(main_launches)):
                raise refuse("run their host code between other kernels")
    when: List[List[Tuple[int, bool]]] = []
    for k, made in enumerate(present):
        shared = [(j, v) for j, v in enumerate(paths[made[0]][0])
                  if all(len(paths[i][0]) > j and paths[i][0][j] == v for i in made)]
        for i in range(len(paths)):
            if i in made:
                continue
            # kernelop tests `shared` in order and stops at the first that fails, as launch_fn's own branches do
            # (`if a: ... elif b: ... else: K` skips K on a's branch without testing b)
            for j, v in shared:
                if len(paths[i][0]) <= j:
                    raise refuse(f"skip kernel {k + 1} on a branch that does not reach the tests that decide it")
                if paths[i][0][j] != v:
                    break
            else:
                raise refuse(f"launch kernel {k + 1} on outcomes of the tests that no conjunction of them tells")
        when.append([] if len(made) == len(paths) else shared)
    return HostPaths(paths[main][0], when)


def _add_when(where: str, rec: Recorder, paths: HostPaths, host: HostTests, doc: Dict[str, Any],
              then: List[Dict[str, Any]], positions: List[int]) -> None:
    """Each launch's `when` (Note [host paths]) in its spec: the op's own kernel's in `doc`, kernel k's in its
    entry of `then` (`positions[k - 1]`)."""
    for k, literals in enumerate(paths.when):
        tests = []
        for j, outcome in literals:
            t, c, at = host.tests[j][:3]
            name = rec.name_of(t)
            if name is None or t.storage_offset() != 0:
                raise ValueError(f"{where}: launch_fn tests a tensor on the host (torch.equal at {at}) that is no "
                                 "input, output or scratch of the op as a whole; test one of those")
            tests.append({"tensor": name, "==" if outcome else "!=": c})
        if tests:
            target = doc if k == 0 else then[positions[k - 1]]
            target["when"] = tests
            if k > 0:  # a later launch takes what it tests as an input (the op's own kernel has every tensor)
                have = {i["name"] for i in target["inputs"]} | {o["name"] for o in target["outputs"]}
                for test in tests:
                    if test["tensor"] not in have:
                        have.add(test["tensor"])
                        dtype = next(str(host.tests[j][0].dtype) for j, _ in literals
                                     if rec.name_of(host.tests[j][0]) == test["tensor"])
                        target["inputs"] = target["inputs"] + [{"name": test["tensor"],
                                                                "dtype": dtype.replace("torch.", "")}]


def _check_read_when_reached(where: str, rec: Recorder, paths: HostPaths, host: HostTests, events: List[Any],
                             docs: List[Dict[str, Any]], written: List[Any], prog: Program) -> None:
    """Note [host reads]: kernelop reads a tested or .item()'d tensor when the launch it decides is reached, and
    launch_fn read it earlier: nothing between the two may write it (a kernel, `written`, or the glue)."""
    reads = [(test[0], test[2], test[3], test[4],
              [k for k, lits in enumerate(paths.when) if any(j == i for j, _ in lits)])
             for i, test in enumerate(host.tests)]
    for e_index, e in enumerate(events):
        if e.op == "_local_scalar_dense":
            name = rec.name_of(e.args[0])
            reads.append((e.args[0], e.where, e.position, e_index,
                          [k for k, d in enumerate(docs) if f"item({name})" in json.dumps(d.get("params", []))]))
    for t, at, position, event, users in reads:
        name = rec.name_of(t)
        for k in users:
            writer = next((f"launch_fn's kernel {m + 1} (in launch order)" for m in range(position, k)
                           if name in (written[m] or ())), None) or \
                next((f"kernelop's glue at {g.where}" for g in prog.glue
                      if g.event > event and g.position <= k and storage_of(g.y) == storage_of(t)), None)
            if writer is not None:
                raise ValueError(f"{where}: launch_fn reads '{name}' on the host (at {at}), and {writer} writes it "
                                 "before the kernel that read decides; kernelop reads it when that kernel is reached, "
                                 "so it would read the new value: read it after the write, or read a copy")


def _then_order(later: List[Optional[RecordedPlugin]], prog: Program) -> List[Optional[RecordedPlugin]]:
    """The later launches and the glue in launch_fn's order: kernel k + 1 is launch position k; glue at position p
    runs after the first p kernels."""
    steps: List[Tuple[int, int, Optional[RecordedPlugin]]] = [(k + 1, 1, r) for k, r in enumerate(later)]
    steps += [(g.position, 0, None) for g in prog.glue]  # after `position` kernels, before the next
    return [r for _, _, r in sorted(steps, key=lambda x: (x[0], x[1]))]


def _then_entries(ctx: Recording, order: List[Optional[RecordedPlugin]], prog: Program) -> List[Dict[str, Any]]:
    """The spec's "then": each later kernel's spec (its written outputs as outputs, the rest it takes as inputs)
    and each glue step's, in launch_fn's order (`order`: _then_order's)."""
    names = {storage_of(t): n for t, n in zip(ctx.outputs, ctx.out_names)}
    names.update({storage_of(t.fake): t.name for t in ctx.rec.tensors})
    glue = iter(prog.glue)
    out = []
    for r in order:
        out.append(glue_launch(next(glue), names) if r is None else {k: v for k, v in r.doc.items() if k != "op"})
    return out


def _translate_later(dsl: Dsl, ctx: Recording, spec: Any, launch: Any, tensors: Dict[str, Any],
                     reads: AbstractSet[str] = frozenset()) -> RecordedPlugin:
    """A later kernel of the op (Note [recorded programs]) as a spec of its own: the op's inputs, the outputs and
    scratch it writes as its outputs, those it only reads as inputs, and those read on the host (`reads`: its item()
    arguments and `when` tests may read them, Note [host reads]). Its meta-parameters are launch_fn's (the op's
    configs tune its first kernel)."""
    r = dsl.translate(dataclasses.replace(ctx, later=True, meta_impl=None, then=[]),
                      dataclasses.replace(spec, configs=()), launch)
    taken = {storage_of(t) for t in tensors.values()}
    by_name = dict(zip(ctx.out_names, ctx.outputs))
    passed = {n for n, t in by_name.items() if storage_of(t) in taken}
    writes = r.writes if r.writes is not None else passed
    written_inputs = sorted(writes & {t.name for t in ctx.rec.tensors})
    if written_inputs:
        raise ValueError(f"{ctx.where}: the kernel launched at {getattr(launch, 'where', '?')} writes input "
                         f"'{written_inputs[0]}', and it is not the op's first kernel; kernelop runs later kernels on "
                         "the op's outputs and scratch: write the input in the first kernel, or a copy of it")
    doc = dict(r.doc)
    doc.pop("backward", None)
    doc["outputs"] = [{k: v for k, v in o.items() if k not in ("scratch", "init")} for o in doc["outputs"]
                      if o["name"] in passed and o["name"] in writes]
    used = {n for n in reads if f"item({n})" in json.dumps(doc.get("params", []))}  # its item() arguments'
    doc["inputs"] = [dict(i) for i in doc["inputs"]] + [
        {"name": n, "dtype": str(by_name[n].dtype).replace("torch.", "")} for n in ctx.out_names
        if (n in passed and n not in writes) or (n in used and n not in passed)]
    r.doc = doc
    return r


def package_main(what: str, recorded: Callable[[str], Dict[str, RecordedPlugin]], ns: str) -> None:
    """The command line of a module of recorded ops (the examples'): ``--package DIR`` writes each op's package as
    DIR/<ns>.<name>.kop, printing "op <name>: <n> tactics -> <path>" (scripts/stage-gpu builds the GPU suite's
    packages so, on a machine without a GPU)."""
    import argparse

    parser = argparse.ArgumentParser(description=f"Writes the .kop packages of {what} ({ns}.NAME.kop).")
    parser.add_argument("--package", required=True, metavar="DIR")
    out = parser.parse_args().package
    os.makedirs(out, exist_ok=True)
    for name, r in recorded(ns).items():
        path = r.build_package(os.path.join(out, f"{ns}.{name}.kop"))
        print(f"op {r.op_name}: {count(len(r.doc.get('configs', [{}])), 'tactic')} -> {path}")
