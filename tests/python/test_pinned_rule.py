# SPDX-License-Identifier: GPL-2.0
"""One rule for what a loaded torch tensor is, stated alike everywhere: the
block between the rule's markers in Documentation/python.md is the rule;
README.md and libpin/python/README.md carry the same block, and the
docstring of pinmem.safetensors.torch the same words (without Markdown's
backticks). Read as text: no torch needed."""
import ast
import os
import re

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START = "<!-- rule: loaded torch tensors"
END = "<!-- end of rule -->"


def _read(rel):
    with open(os.path.join(TOP, rel), encoding="utf-8") as f:
        return f.read()


def _block(text, where):
    i = text.find(START)
    assert i >= 0, "%s has no rule block (%s ...)" % (where, START)
    i = text.index("\n", i) + 1
    j = text.find(END, i)
    assert j >= 0, "%s: the rule block has no end marker" % where
    return text[i:j]


def _words(text):
    return " ".join(text.replace("`", "").split())


RULE = _words(_block(_read("Documentation/python.md"), "python.md"))


def test_the_rule_says_what_matters():
    for part in ("page-locked", "registered", "RLIMIT_MEMLOCK",
                 "is_pinned", "writable", "ReadOnlyTensor",
                 "pinmem-cached", "ReadOnlyError", "DLPack"):
        assert part in RULE, part


@pytest.mark.parametrize("rel", ["README.md", "libpin/python/README.md"])
def test_the_readmes_state_the_same_rule(rel):
    assert _words(_block(_read(rel), rel)) == RULE


def test_the_docstring_states_the_same_rule():
    rel = "libpin/python/pinmem/safetensors/torch.py"
    doc = ast.get_docstring(ast.parse(_read(rel)))
    assert RULE in _words(doc), "%s's docstring lacks the rule" % rel
    assert len(re.findall(re.escape(RULE[:40]), _words(doc))) == 1
