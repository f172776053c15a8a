"""Running test code in a fresh python3 where a module cannot be imported (a package must run without its DSL, the
engine-neutral core without torch)."""

import os
import subprocess
import sys
import textwrap


def run_python(code, prelude=""):
    """Runs `prelude` + code in a fresh python3 with this one's sys.path; returns its stdout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"subprocess failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def run_python_without(module, code):
    """Runs code in a fresh python3 where `import <module>` fails; returns its stdout."""
    return run_python(code, f"import sys\nsys.modules[{module!r}] = None  # not importable in this process\n")


def run_python_refusing(modules, code):
    """Runs code in a fresh python3 where importing any of `modules` (or a submodule of one) raises
    ModuleNotFoundError, as where they are not installed; returns its stdout."""
    return run_python(code, textwrap.dedent(f"""\
        import sys

        class _Refuse:  # a meta path finder ahead of all others: the refused packages are not installed here
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {tuple(modules)!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}} (refused by the test)", name=name)
                return None

        sys.meta_path.insert(0, _Refuse())

        import importlib.util
        _find_spec = importlib.util.find_spec

        def _absent(name, package=None):  # as for a package not installed (torch's CUDA init asks for triton)
            return None if name.split(".")[0] in {tuple(modules)!r} else _find_spec(name, package)

        importlib.util.find_spec = _absent
        """))
