"""Docs that cannot go stale, their specs: every ```json block of the README and docs/ is a whole spec that is one of
the repository's example files (equal to it once parsed: the doc shows the file the tests run), or is marked as an
excerpt by a ``<!-- excerpt: why -->`` line right above its fence. (The other languages' blocks are not checked yet.)"""

import glob
import json
import os
import re
import unittest

from kernelop_testing import run_tests

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
EXCERPT = re.compile(r"^<!-- excerpt: .+ -->$")


def json_blocks(path):
    """(line number, text, marked as an excerpt) of each ```json block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```json":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            marked = i > 0 and EXCERPT.match(lines[i - 1].strip()) is not None
            blocks.append((i + 1, "\n".join(lines[i + 1:end]), marked))
            i = end
        i += 1
    return blocks


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


class Specs(unittest.TestCase):
    def test_every_json_block_is_an_example_file_or_marked_as_an_excerpt(self):
        examples = example_specs()
        checked = 0
        for path in DOCS:
            for line, text, marked in json_blocks(path):
                where = f"{os.path.relpath(path, ROOT)}:{line}"
                if marked:
                    continue
                try:
                    doc = json.loads(text)
                except ValueError as e:
                    self.fail(f"{where}: not JSON ({e}); mark a fragment with <!-- excerpt: why --> above the fence")
                self.assertIsInstance(doc, dict, where)
                self.assertIn(doc.get("op"), examples, f"{where}: spec of {doc.get('op')!r} is no example file; "
                              "show an example's file, or mark the block as an excerpt")
                file, want = examples[doc["op"]]
                self.assertEqual(doc, want, f"{where} differs from {os.path.relpath(file, ROOT)}")
                checked += 1
        self.assertGreater(checked, 3)

    def test_excerpt_markers_sit_on_json_blocks(self):
        # A marker anywhere else marks nothing: a misplaced one would hide a stale block.
        for path in DOCS:
            lines = open(path, encoding="utf-8").read().split("\n")
            for i, text in enumerate(lines):
                if EXCERPT.match(text.strip()):
                    self.assertTrue(i + 1 < len(lines) and lines[i + 1].strip() == "```json",
                                    f"{os.path.relpath(path, ROOT)}:{i + 1}: the marker is not right above a ```json")


if __name__ == "__main__":
    run_tests(cpu=[Specs], gpu=[], cuda=False)
