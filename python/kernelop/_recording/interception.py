"""Intercepting a DSL's launch while a thread records (Note [interception]), and refusing nested recordings."""

from __future__ import annotations

import contextlib
import threading
import traceback
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from .._symbolic import user_location

Handlers = Mapping[Tuple[Any, str], Callable[..., Any]]
"""(owner, attribute) -> handler(original, *args, **kwargs): what a DSL intercepts (Dsl.intercept)."""

# Note [interception]: recording replaces a DSL's launch entry points (class attributes) with a dispatcher for as long
# as any thread records. The dispatcher acts for the threads that are recording (their handlers are thread-local) and
# calls the original for every other thread, so a thread's real launches are never touched and recordings on several
# threads run side by side: no lock is held while user code (launch_fn, a grid function, meta_impl) runs, so nothing
# it does can wait on another recording. The patches are counted; the last recording to end restores the originals.
# A thread records one op at a time: a recording started while the same thread records (launch_fn recording or
# registering another op) is refused, naming both (NestedRecording).
_patch_lock = threading.Lock()
_patched: Dict[Tuple[int, str], List[Any]] = {}  # (id(owner), attribute) -> [owner, original, recordings using it]
_thread = threading.local()  # .recording: the `where` of the op this thread records; .handlers: its interceptions


class NestedRecording(ValueError):
    """kernelop was asked to record or compile an op while the same thread records another (refused)."""


def caller_location() -> str:
    """Where the user's code made the call being intercepted: the innermost frame outside kernelop, the DSLs and
    torch (told apart by their package directories, _symbolic.user_location)."""
    return user_location(traceback.extract_stack()[:-1]) or "?"


def _dispatcher(key: Tuple[int, str], original: Any) -> Callable[..., Any]:
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        handler = (getattr(_thread, "handlers", None) or {}).get(key)
        if handler is None:  # a thread that is not recording: the DSL's own
            return original(*args, **kwargs)
        return handler(original, *args, **kwargs)
    return dispatch


@contextlib.contextmanager
def intercepting(handlers: Handlers) -> Iterator[None]:
    """While active, ``owner.attribute(*args, **kwargs)`` called on this thread calls ``handler(original, *args,
    **kwargs)``; every other thread gets the original (Note [interception])."""
    mine = {(id(owner), attr): handler for (owner, attr), handler in handlers.items()}
    with _patch_lock:
        for owner, attr in handlers:
            entry = _patched.get((id(owner), attr))
            if entry is None:
                original = getattr(owner, attr)
                entry = _patched[(id(owner), attr)] = [owner, original, 0]
                setattr(owner, attr, _dispatcher((id(owner), attr), original))
            entry[2] += 1
    previous = getattr(_thread, "handlers", None)
    _thread.handlers = mine
    try:
        yield
    finally:
        _thread.handlers = previous
        with _patch_lock:
            for key in mine:
                entry = _patched[key]
                entry[2] -= 1
                if entry[2] == 0:
                    setattr(entry[0], key[1], entry[1])
                    del _patched[key]


def current_recording() -> Optional[str]:
    """The `where` of the op this thread records, or None."""
    return getattr(_thread, "recording", None)


@contextlib.contextmanager
def recording(where: str) -> Iterator[None]:
    """Marks this thread as recording the op `where` for the duration; refuses a recording nested in another."""
    outer = current_recording()
    if outer is not None:
        raise NestedRecording(nested_message(where, outer))
    _thread.recording = where
    try:
        yield
    finally:
        _thread.recording = None


def nested_message(inner: str, outer: str) -> str:
    return (f"{inner} was called while kernelop records {outer} (from its launch_fn, grid function or meta_impl); "
            "an op's launch_fn must not record, compile or register another op (it runs once, on fake tensors): "
            f"record and register the other op outside launch_fn, before {outer}")
