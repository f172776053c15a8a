"""Docs that cannot go stale: every fenced block of the README and docs/ is checked, or says why not.

A block is what its fence and the marker line right above the fence make it:

- ```json, unmarked: a whole spec equal (once parsed) to the example file of its op;
- ```python, unmarked: a program run on the CPU (meta tensors, recording, packaging), from the
  repository's root in a fresh interpreter; ``<!-- gpu -->``: the same, in the GPU part;
- ``<!-- output of: kernelop ARGS -->``: what the command-line tool prints for ARGS, run from the
  root (a line ``...`` stands for any number of lines);
- ``<!-- in: PATH -->``: lines found, in order and together, in the repository file PATH, which
  a test builds or runs (the C++ consumer project, the C example, an example kernel);
- ``<!-- declared in: HEADER -->``: C declarations, each of which (comments and spacing aside) is in
  HEADER;
- ``<!-- excerpt: WHY -->``: not checked, for the reason given (a signature, a sketch against an
  API that is not installed here, a fragment).

Any other block fails: a new block must be made checkable or say why it is not.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from kernelop_testing import run_tests

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
MARKER = re.compile(r"^<!-- (excerpt|in|declared in|output of|gpu)(?:: (.+))? -->$")


class Block:
    def __init__(self, path, line, lang, text, marker, argument):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.marker, self.argument = marker, argument

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def blocks(path):
    """Every fenced block of a Markdown file with the marker right above its fence; a fence indented
    (in a list item) is a block too, its lines taken without that indentation."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            indent = len(lines[i]) - len(lines[i].lstrip())
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                raise AssertionError(f"{os.path.relpath(path, ROOT)}:{i + 1}: a fence that is never closed")
            m = MARKER.match(lines[i - 1].strip()) if i > 0 else None
            text = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1:end])
            found.append(Block(path, i + 1, lines[i].strip()[3:].strip(), text,
                               m.group(1) if m else None, m.group(2) if m else None))
            i = end
        i += 1
    return found


def all_blocks():
    return [b for path in DOCS for b in blocks(path)]


def example_specs():
    """Every spec file under examples/, by op name."""
    specs = {}
    for path in glob.glob(os.path.join(ROOT, "examples", "**", "*.json"), recursive=True):
        try:
            doc = json.load(open(path, encoding="utf-8"))
        except ValueError:
            continue
        if isinstance(doc, dict) and "op" in doc:
            specs[doc["op"]] = (path, doc)
    return specs


def lines_match(want, got):
    """Whether the lines `got` are `want`, where a `...` line of `want` stands for any lines."""
    if not want:
        return not got
    if want[0].strip() == "...":
        return any(lines_match(want[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and want[0].rstrip() == got[0].rstrip() and lines_match(want[1:], got[1:])


def run_python(test, block):
    # From a file, as a reader runs it (Triton reads a @triton.jit function's source from its file), in the
    # repository's root (the blocks' paths are relative to it).
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "block.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(block.text + "\n")
        r = subprocess.run([sys.executable, path], cwd=ROOT, capture_output=True, text=True, timeout=900)
    test.assertEqual(r.returncode, 0, f"{block.where}: the block failed:\n{r.stdout}\n{r.stderr}")


class Docs(unittest.TestCase):
    def test_every_block_is_checked_or_says_why_not(self):
        for b in all_blocks():
            if b.marker is not None:
                self.assertTrue(b.marker == "gpu" or b.argument, f"{b.where}: marker {b.marker!r} needs its text")
                self.assertFalse(b.marker == "gpu" and b.lang != "python", f"{b.where}: only python runs on the GPU")
                continue
            self.assertIn(b.lang, ("json", "python"),
                          f"{b.where}: a ```{b.lang} block nothing checks; mark it <!-- in: FILE -->, "
                          "<!-- output of: kernelop ... --> or <!-- excerpt: why --> above the fence")

    def test_a_fence_in_a_list_item_is_a_block(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "list.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write("1. Step one:\n   <!-- excerpt: a fragment -->\n   ```cpp\n   int a;\n     int b;\n   ```\n"
                        "2. Step two:\n   ```sh\n   ls\n   ```\n")
            found = blocks(path)
        self.assertEqual([(b.lang, b.text, b.marker, b.argument) for b in found],
                         [("cpp", "int a;\n  int b;", "excerpt", "a fragment"), ("sh", "ls", None, None)])

    def test_markers_sit_on_fences(self):
        # A marker anywhere else marks nothing: a misplaced one would hide a stale block.
        for path in DOCS:
            lines = open(path, encoding="utf-8").read().split("\n")
            for i, text in enumerate(lines):
                if text.strip().startswith("<!-- ") and MARKER.match(text.strip()):
                    self.assertTrue(i + 1 < len(lines) and lines[i + 1].lstrip().startswith("```"),
                                    f"{os.path.relpath(path, ROOT)}:{i + 1}: the marker is not right above a fence")

    def test_json_blocks_are_example_files(self):
        examples = example_specs()
        checked = 0
        for b in all_blocks():
            if b.lang != "json" or b.marker is not None:
                continue
            try:
                doc = json.loads(b.text)
            except ValueError as e:
                self.fail(f"{b.where}: not JSON ({e}); mark a fragment with <!-- excerpt: why --> above the fence")
            self.assertIsInstance(doc, dict, b.where)
            self.assertIn(doc.get("op"), examples, f"{b.where}: spec of {doc.get('op')!r} is no example file; "
                          "show an example's file, or mark the block as an excerpt")
            file, want = examples[doc["op"]]
            self.assertEqual(doc, want, f"{b.where} differs from {os.path.relpath(file, ROOT)}")
            checked += 1
        self.assertGreater(checked, 3)

    def marked(self, marker):
        """The blocks with `marker`, each with the text of the repository file its marker names."""
        for b in all_blocks():
            if b.marker == marker:
                file = os.path.join(ROOT, b.argument)
                self.assertTrue(os.path.isfile(file), f"{b.where}: {b.argument} is not a file of the repository")
                yield b, open(file, encoding="utf-8").read()

    def test_in_blocks_are_in_their_files(self):
        checked = 0
        for b, text in self.marked("in"):
            want = [line.rstrip() for line in b.text.split("\n")]
            got = [line.rstrip() for line in text.split("\n")]
            found = any(got[k:k + len(want)] == want for k in range(len(got) - len(want) + 1))
            self.assertTrue(found, f"{b.where}: the block's lines are not, together and in order, in {b.argument}")
            checked += 1
        self.assertGreater(checked, 2)

    def test_declarations_are_the_headers(self):
        def statements(text):
            text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
            return [" ".join(re.findall(r"\w+|[^\w\s]", st)) for st in text.split(";") if st.strip()]
        checked = 0
        for b, text in self.marked("declared in"):
            have = set(statements(text))
            for st in statements(b.text):
                self.assertTrue(st in have, f"{b.where}: `{st};` is not declared so in {b.argument}")
                checked += 1
        self.assertGreater(checked, 10)

    def test_output_blocks_are_what_the_tool_prints(self):
        checked = 0
        for b in all_blocks():
            if b.marker != "output of":
                continue
            words = b.argument.split()
            self.assertEqual(words[0], "kernelop", f"{b.where}: only the kernelop tool's output is checked")
            r = subprocess.run([sys.executable, "-m", "kernelop", *words[1:]], cwd=ROOT, capture_output=True,
                               text=True, timeout=600)
            got = (r.stdout + r.stderr).rstrip("\n").split("\n")
            self.assertTrue(lines_match(b.text.split("\n"), got),
                            f"{b.where}: `{b.argument}` printed\n" + "\n".join(got) + "\nnot\n" + b.text)
            checked += 1
        self.assertGreater(checked, 0)

    def test_python_blocks_run(self):
        ran = 0
        for b in all_blocks():
            if b.lang == "python" and b.marker is None:
                with self.subTest(block=b.where):
                    run_python(self, b)
                ran += 1
        self.assertGreater(ran, 0)


class GpuDocs(unittest.TestCase):
    def test_gpu_python_blocks_run(self):
        ran = 0
        for b in all_blocks():
            if b.marker == "gpu":
                with self.subTest(block=b.where):
                    run_python(self, b)
                ran += 1
        self.assertGreater(ran, 0)


def cuda_available():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    run_tests(cpu=[Docs], gpu=[GpuDocs], cuda=cuda_available())
