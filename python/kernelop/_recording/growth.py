"""Sizes compiled when an op is first called with them (``first_use=True``).

Note [first-use growth]: a size a kernel compiles in (a constexpr taking a size as it is, QuACK's static N, or the
power of two above one) is a size class (Note [size classes]); an op serves the classes it was recorded at. With
``first_use=True`` a call whose sizes fall in a class the op lacks is not refused: the registration's miss handler
(kernelop/torch.hpp; the CUDA and Meta kernels call it when a call breaks a requirement) computes the call's class
from its shapes, records launch_fn at that class alone (on fake tensors, with the op's own examples, as the classes
before it were), merges it after the op's classes (their tactics keep their numbers, their binaries are reused),
compiles only the new tactics and grows the registration by the merged op; the call is then retried with it. The
class is kept: later calls of its sizes are served by it, the RecordedPlugin now has it (a package built from it
later includes it), and its binaries are in kernelop's compile cache where the DSL gives a cache identity.

A class launch_fn refuses, or one whose recording differs from the op's in more than its size classes may, is
remembered as refused and the call fails with the requirement it broke and why. An op grows by at most
sizes.MAX_CLASSES classes. The backward (a registration of its own) grows on its own calls the same way; the
forward's spec then embeds the backward as it is now. The handler holds the op's lock while it records, so two
threads missing the same class record it once. Under torch.compile the Meta kernel decides the requirement with a
guard and, on a miss, specialises the call's sizes (the class's requirement would anyway).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .. import _kernelop
from .._symbolic import shorten
from . import sizes
from .interception import NestedRecording, current_recording, recording

if TYPE_CHECKING:
    from .plugin import RecordedPlugin


class Growth:
    """What an op recorded with first_use=True needs to record and add a size class on a call (Note [first-use
    growth]): its recording's inputs, examples and classes."""

    def __init__(self, record_class: Any, merge: Any, where: str, d: sizes.SizeClasses,
                 classes: List[Tuple[Tuple[int, ...], "RecordedPlugin"]], rank_free: bool) -> None:
        self.record_class = record_class  # (SizeClasses of one class, rank_free) -> [(class, recorded, rank_free)]
        self.merge = merge  # (where, SizeClasses, [(class, recorded)]) -> the merged op
        self.where, self.d, self.classes, self.rank_free = where, d, classes, rank_free
        # every class in the order of their size_class values (those launch_fn refused when recorded too): the
        # classes before keep their values as classes are added
        self.combos = list(d.combos)
        self.refused: Dict[Tuple[int, ...], str] = {}
        # one per backward chain (RecordedPlugin.register shares the forward's): growth, and what reads the chain's
        # plugins (register, check, build_package), hold it
        self.lock = threading.RLock()
        self.registration: Any = None  # the registration it grows, once registered
        self.grown = 0  # classes added on first use
        # the context it was recorded in (a backward's output names: plugin._OUTPUT_NAMES), each class recorded in it
        self.context = contextvars.copy_context()

    def class_of(self, names: Sequence[str], shapes: Sequence[Tuple[int, ...]]) -> Tuple[int, ...]:
        """The size class of a call's tensor shapes (tensor inputs named `names`, in order; a size of -1 is one the
        Meta kernel left symbolic); raises _NoClass saying why it has none."""
        leaves: Dict[str, int] = {}
        for name, shape in zip(names, shapes):
            for a, n in enumerate(shape):
                if n >= 0:
                    leaves[f"dim({name}, {a})"] = leaves[f"dim({name}, {a - len(shape)})"] = int(n)
            if all(n >= 0 for n in shape):
                numel = 1
                for n in shape:
                    numel *= int(n)
                leaves[f"numel({name})"] = numel
        combo = []
        for g in range(len(self.d.groups)):
            lead = self.d.lead(g)
            try:
                value = _kernelop.eval_expr(lead.text, leaves)
            except Exception as e:  # noqa: BLE001 - a rank too small for the size, a size the call has not
                raise _NoClass(f"the call has no {lead.text} (shapes {shorten(shapes, 200)})") from e
            if lead.function and value <= sizes.DEFAULT_CLASSES[0] // 2:
                raise _NoClass(f"{lead!r} of {value} has no size class (they begin at {sizes.DEFAULT_CLASSES[0]})")
            if not lead.function and value < 1:
                raise _NoClass(f"{lead.text} is {value}")
            combo.append(sizes.next_power_of_2(value) if lead.function else value)
        return tuple(combo)

    def grow(self, current: "RecordedPlugin", combo: Tuple[int, ...]
             ) -> Tuple["RecordedPlugin", List[Tuple[Tuple[int, ...], "RecordedPlugin"]], List[Tuple[int, ...]]]:
        """`current` with the class `combo` recorded and merged after its own classes, with the classes and combos
        it then has (kept by the caller once the registration grew); raises why it cannot."""
        if len(self.classes) >= sizes.MAX_CLASSES:
            raise ValueError(f"the op already has {len(self.classes)} size classes, the most kernelop records for "
                             "one op; list the sizes it serves in specialize")
        one = sizes.SizeClasses(self.d.groups, self.d.hints, [[v] for v in combo])
        with recording(self.where):
            recorded = self.record_class(one, None if self.rank_free else False)
        (_, r, rank_free), = recorded
        if bool(rank_free) != self.rank_free:
            raise ValueError(f"launch_fn's recording for {one.within(combo)} is "
                             f"{'rank-specific' if self.rank_free else 'rank-free'}, unlike the op's other size "
                             "classes; list the size in specialize")
        classes = self.classes + [(combo, r)]
        d = sizes.SizeClasses(self.d.groups, self.d.hints,
                              [sorted({c[g] for c, _ in classes}) for g in range(len(self.d.groups))])
        d.combos = self.combos + [combo]
        return self.merge(self.where, d, classes), classes, d.combos


class _NoClass(ValueError):
    """A call's shapes fall in no size class kernelop can record."""


class _Passing(Exception):
    """A refusal of this call's circumstances, not of its class: said, not remembered."""


def _elsewhere(fn: Callable[[], Any]) -> Any:
    """fn() on a thread of its own, for its result: a call of the op may run under dispatch state of its caller's
    (a Meta kernel under FakeTensorMode runs with torch dispatch off and meta tensors forced, make_fx's proxy
    mode), which is thread-local; the recorder needs its own. The caller waits, without the GIL."""
    out: Dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - raised on the caller's thread
            out["error"] = e
    worker = threading.Thread(target=run, name="kernelop-first-use")
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def handler(recorded: "RecordedPlugin", registration: Any, archs: Optional[Sequence[str]]) -> Any:
    """The miss handler of `recorded`'s registration (Note [first-use growth])."""
    growth = recorded.growth
    assert growth is not None
    names = [i["name"] for i in recorded.doc["inputs"] if "scalar" not in i]  # the tensors, in declared order

    def on_miss(shapes: List[Tuple[int, ...]], scalars: List[Any], refusal: str) -> Any:
        with growth.lock:
            try:
                combo = growth.class_of(names, shapes)
            except _NoClass as e:
                return f"kernelop compiles no size class on first use for it: {e}"
            if combo in growth.refused:
                return growth.refused[combo]
            if any(c == combo for c, _ in growth.classes):
                return True  # another call grew it meanwhile (or the call broke another requirement: not grown)
            within = growth.d.within(combo)
            outer = current_recording()
            try:
                if outer is not None:  # (the op called inside another recording's launch_fn)
                    raise _Passing(f"it is called while kernelop records {outer}; recordings do not nest")
                if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                    raise _Passing("the stream is capturing a CUDA graph, and compiling and loading a kernel has "
                                   "no place in one: call the op once at these sizes before the capture")

                def grow_and_adopt() -> None:
                    merged, classes, combos = growth.grow(recorded, combo)
                    _adopt(recorded, merged, archs, registration)
                    growth.classes, growth.combos = classes, combos  # only once the registration has it
                _elsewhere(lambda: growth.context.copy().run(grow_and_adopt))
            except (_Passing, NestedRecording, OSError) as e:  # this call's circumstances: said, not remembered
                return f"kernelop compiled no op for {within} on first use: {shorten(e, 1000)}"
            except Exception as e:  # noqa: BLE001 - said with the call's error, and remembered for the class
                growth.refused[combo] = f"kernelop compiled no op for {within} on first use: {shorten(e, 1000)}"
                return growth.refused[combo]
            growth.grown += 1
            return True
    return on_miss


def _adopt(recorded: "RecordedPlugin", merged: "RecordedPlugin", archs: Optional[Sequence[str]],
           registration: Any) -> None:
    """`recorded` becomes `merged` (its name, its backward as it is now and its binaries kept; only the new tactics
    compiled) and the registration grows by it."""
    merged.op_name = merged.doc["op"] = recorded.op_name
    merged.examples, merged.growth = recorded.examples, recorded.growth
    merged.backward = recorded.backward
    if recorded.backward is not None:  # the backward as it is now (it grows on its own calls)
        merged.doc["backward"] = recorded.full_doc()["backward"]
    before = len(recorded.compile_configs)
    for key, binaries in recorded._binaries.items():  # the tactics before keep their numbers: built once
        merged._binaries[key] = [b for b in binaries if b.launch == 0 and b.program < before] + \
            merged.compile_programs(list(key), range(before, len(merged.compile_configs))) + \
            [b for b in binaries if b.launch != 0]
    registration.grow(json.dumps(merged.full_doc()), merged.compile(archs), merged.backward_binaries(archs))
    for f in dataclasses.fields(recorded):  # the user's RecordedPlugin has the class too (build_package)
        setattr(recorded, f.name, getattr(merged, f.name))
