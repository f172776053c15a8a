"""The rules every DSL front end's configs and architectures follow, checked before anything is compiled, and the
one way a value that differs between configs becomes one expression (select over the configs)."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import _kernelop
from .._symbolic import canonical, shorten


def check_output_names(where: str, outputs: Any) -> Optional[Tuple[str, ...]]:
    """The names a spec gives the tensors launch_fn returns: None, or distinct identifiers."""
    if outputs is None:
        return None
    if isinstance(outputs, (str, bytes)) or not isinstance(outputs, Sequence):
        raise TypeError(f"{where}: outputs must be a list of names such as ['loss', 'grad'], got "
                        f"{type(outputs).__name__}")
    for i, name in enumerate(outputs):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"{where}: outputs[{i}] is {shorten(repr(name))}; an output's name is an identifier")
        if name in list(outputs)[:i]:
            raise ValueError(f"{where}: outputs names {name!r} twice")
    return tuple(outputs)


def check_configs(where: str, launch_fn: Any, configs: Any) -> Tuple[Dict[str, Any], ...]:
    """A spec's launch_fn and configs as given by the user: a callable and a list of dicts of ints or bools."""
    if not callable(launch_fn):
        raise TypeError(f"{where}: launch_fn must be callable, got {type(launch_fn).__name__}")
    if configs is None:
        configs = ()
    if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Sequence):
        raise TypeError(f"{where}: configs must be a list of dicts such as [{{'BLOCK_SIZE': 256}}], got "
                        f"{type(configs).__name__}")
    out = []
    for i, c in enumerate(configs):
        if not isinstance(c, Mapping):
            raise TypeError(f"{where}: configs[{i}] must be a dict, got {type(c).__name__}")
        for k, v in c.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: configs[{i}] has key {shorten(repr(k))}; keys are meta-parameter names")
            if k == "requires":  # conditions on the sizes the config is right for (kernelop expressions)
                if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or \
                        not all(isinstance(r, str) for r in v):
                    raise TypeError(f"{where}: configs[{i}]['requires'] must be a list of conditions such as "
                                    f"['BLOCK_SIZE >= dim(x, -1)'], got {shorten(repr(v))}")
                continue
            if not isinstance(v, int):  # bools are ints
                raise TypeError(f"{where}: configs[{i}][{shorten(repr(k))}] is {shorten(repr(v))}; config values are "
                                "ints or bools")
        out.append({k: (list(v) if k == "requires" else v) for k, v in c.items()})
    return tuple(out)


def check_config_keys(where: str, configs: Sequence[Mapping[str, Any]], kernel: str, kind: str,
                      params: Sequence[str], options: Sequence[str] = ()) -> None:
    """Every key of every config is one of the kernel's compile-time parameters (`kind`: "constexpr",
    "ct.Constant parameter"), one of the DSL's options, or "requires"."""
    for i, c in enumerate(configs):
        bad = [k for k in c if k not in params and k not in options and k != "requires"]
        if bad:
            also = f"; options: {', '.join(options)}" if options else ""
            raise ValueError(f"{where}: configs[{i}] sets {shorten(', '.join(bad))}, which {shorten(kernel)} has no "
                             f"{kind} of (its {kind}s: {shorten(', '.join(params) or 'none', 300)}{also})")


def spec_archs(where: str, arch: Any, check: Any) -> Optional[Tuple[str, ...]]:
    """A DSL spec's ``arch`` argument (None, one architecture or a list), checked by the DSL's `check`."""
    if arch is None:
        return None
    return tuple(check(where, [arch] if isinstance(arch, str) else arch, "arch"))


def user_requires(config: Mapping[str, Any]) -> List[str]:
    """The conditions a user's config states (``"requires"``), canonical."""
    return [canonical(r) for r in config.get("requires", ())]


def check_config_values(where: str, user_configs: Sequence[Dict[str, Any]], tuned: Sequence[str],
                        constexprs: Dict[str, Any]) -> None:
    """Every config sets every tuned constexpr, or the launch passes an int for it (the DSL recorders' one rule)."""
    for i, c in enumerate(user_configs):
        missing = [k for k in tuned if k not in c and constexprs.get(k) is None]
        if missing:
            raise ValueError(f"{where}: configs[{i}] does not set {shorten(', '.join(missing))}")
        kept = [k for k in tuned if k not in c and not hasattr(type(constexprs[k]), "__index__")]
        if kept:
            raise ValueError(f"{where}: configs[{i}] does not set '{shorten(kept[0])}', and the value the launch "
                             f"passes for it, {shorten(repr(constexprs[kept[0]]))}, is not an int; set it in every "
                             "config (config values are ints or bools)")


def check_archs(where: str, archs: Any, pattern: str, dsl: str, rule: str, name: str = "archs") -> List[str]:
    """The architectures a user gave: a non-empty list of distinct strings, each matching `pattern` (the DSL's rule,
    said as `rule`); checked before anything is compiled."""
    example = "['sm_80', 'sm_90']"
    if isinstance(archs, (str, bytes)) or not isinstance(archs, (list, tuple)):
        hint = f"; write [{shorten(repr(archs))}]" if isinstance(archs, str) else ""
        raise TypeError(f"{where}: argument '{name}' must be a list of architectures such as {example}, got "
                        f"{type(archs).__name__} {shorten(repr(archs))}{hint}")
    if not archs:
        raise ValueError(f"{where}: argument '{name}' is empty; expected a non-empty list of architectures such as "
                         f"{example}, got {archs!r}")
    seen = set()
    for i, a in enumerate(archs):
        if not isinstance(a, str):
            raise TypeError(f"{where}: {name}[{i}] is {type(a).__name__} {shorten(repr(a))}; expected an "
                            f"architecture string, {rule}")
        if not re.fullmatch(pattern, a):
            raise ValueError(f"{where}: architecture {shorten(repr(a))} is invalid for {dsl} ({name}[{i}]); expected "
                             f"{rule} (kernelop adds the PTX of the oldest for newer GPUs)")
        if a in seen:
            raise ValueError(f"{where}: an architecture is listed twice in {name}: {a!r}")
        seen.add(a)
    return list(archs)


def select_over_configs(texts: List[List[str]], values: List[Dict[str, Any]], names: List[str]) -> List[str]:
    """Per axis, one expression that is config c's texts[c][axis] when the tunables have config c's values."""
    return select_over_conditions(texts, [conjunction([f"{k} == {int(v[k])}" for k in names]) for v in values])


def select_over_conditions(texts: List[List[str]], conditions: List[str]) -> List[str]:
    """Per axis, one expression that is texts[c][axis] for the first c whose condition holds (the last's otherwise)."""
    out = []
    for a in range(len(texts[0])):
        text = texts[-1][a]
        for c in range(len(conditions) - 2, -1, -1):
            if text != texts[c][a]:
                text = f"select({conditions[c]}, {texts[c][a]}, {text})"
        out.append(canonical(text))
    return out


def conjunction(conds: List[str]) -> str:
    """All of `conds`: kernelop expressions have no 'and'; a product of comparisons is 1 exactly when all hold."""
    return " * ".join(f"({c})" for c in conds)


def count(n: int, what: str) -> str:
    """"1 config", "3 configs"."""
    return f"{n} {what}{'' if n == 1 else 's'}"


def validate_recorded(where: str, doc: Dict[str, Any], tactics: str) -> None:
    """kernelop's validation of a recorded spec (the C++ validate(), through check_spec), run before anything is
    compiled, so a spec kernelop refuses is refused at once. `tactics` says how the user's configs became the
    spec's (e.g. "86 configs x 3 Triton specialisations (divisible=2, 1, 0) make 258 tactics")."""
    try:
        _kernelop.check_spec(json.dumps(doc), "", _kernelop.Overrides())
    except (ValueError, TypeError) as e:
        raise type(e)(f"{where}: {tactics}; kernelop refuses the recorded spec before compiling: "
                      f"{shorten(e, 2000)}") from None
