"""``python -m kernelop`` and the ``kernelop`` console script: the command-line tool.

The tool itself is C++ (``cli/main.cpp``); the wheel carries it as ``kernelop/bin/kernelop`` and
this entry replaces the Python process with it, so that ``kernelop check|build|run|tune`` and
``kernelop --version`` behave exactly as the binary built from the repository does.
"""

import os
import sys
from pathlib import Path


def tool_path() -> Path:
    """Where the package's command-line tool is."""
    return Path(__file__).resolve().parent / "bin" / "kernelop"


def main() -> None:
    exe = tool_path()
    if not os.access(exe, os.X_OK):
        sys.exit(
            f"kernelop: the command-line tool is not part of this installation ({exe} is missing); "
            "install the package with `pip install .` (which builds it), or build the repository's "
            "CLI with scripts/build-examples and run build/cli/kernelop"
        )
    env = dict(os.environ)
    # NVRTC from PyPI (torch's nvidia-cuda-nvrtc wheel), when the machine has no CUDA toolkit.
    for entry in sys.path:
        lib = Path(entry) / "nvidia" / "cu13" / "lib"
        if (lib / "libnvrtc.so.13").exists():
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), env.get("LD_LIBRARY_PATH")]))
            break
    os.execve(str(exe), ["kernelop", *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
