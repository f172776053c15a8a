"""Running test code in a fresh python3 where a module cannot be imported (a package must run without its DSL)."""

import os
import subprocess
import sys
import textwrap


def run_python_without(module, code):
    """Runs code in a fresh python3 where `import <module>` fails; returns its stdout."""
    prelude = f"import sys\nsys.modules[{module!r}] = None  # not importable in this process\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"subprocess failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout
