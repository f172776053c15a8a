"""Running a test body once per tactic of an op, each pinned in turn."""

import kernelop as ko


def each_tactic(op_name):
    """Yields (tactic index, its text) with that tactic pinned; unpins after each."""
    k = ko.kernel(op_name)
    for t in range(len(k.tactics)):
        k.pin_tactic(t)
        try:
            yield t, k.tactics[t]
        finally:
            k.pin_tactic(None)
