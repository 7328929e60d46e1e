#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The shape of the sources, as TAP: no circles between files (libpin, the
tools, the cache service, kmod, the Python packages: the binding and the
Kubernetes device plugin), libpin's layers used
only from above, and no function longer than a screen (libpin, the tools,
the service, kmod), counted
from the line its definition starts on to its closing brace.

C: Universal Ctags finds each function and variable definition (its file,
its first and last line, whether it is static); a file uses another when
its code (comments and strings left out) names something the other defines
and it does not define itself, or when it #includes it. Headers count by
their #includes and by the bodies of their static inline functions.
Python: the package's modules and their imports (ast), lazy ones too.

    tests/layers.py [--root DIR]

A circle is a set of files that reach each other through these edges (two
files calling each other is the smallest). The layers of libpin are its
folders, lowest first: core/, io/, st/, cache/; a file may use only its own
layer's files, those below it, and the headers at libpin/ and include/.
"""
import argparse
import ast
import json
import os
import re
import subprocess
import sys

MAX_LINES = 80
LIBPIN_LAYERS = ["core", "io", "st", "cache"]

def sources(root, top, exts):
    out = []
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith(exts):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def ctags(root, files):
    """Definitions: {file: [tag]} for functions and variables."""
    if not files:
        return {}
    cmd = ["ctags", "--output-format=json", "--fields=+nef",
           "--language-force=C", "--kinds-C=fv", "-o", "-", "-L", "-"]
    res = subprocess.run(cmd, cwd=root, input="\n".join(files) + "\n",
                         capture_output=True, text=True, check=True)
    tags = {f: [] for f in files}
    for line in res.stdout.splitlines():
        t = json.loads(line)
        if t.get("_type") == "tag":
            tags[t["path"]].append(t)
    return tags


_C_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'
                      r"'(?:\\.|[^'\\\n])*'", re.S)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# "struct pin_region_info" names a type, not the function of that name.
_TAG = re.compile(r"\b(?:struct|union|enum)\s+[A-Za-z_][A-Za-z0-9_]*")


def strip_c(text):
    # Keep the line count: a comment or string becomes its newlines.
    return _C_NOISE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def c_graph(root, files, incdirs):
    """Edges {file: {file}} and the tags, for C files under one tree."""
    tags = ctags(root, files)
    owner = {}   # a name with external linkage (or a header's inline) -> file
    for f, ts in tags.items():
        for t in ts:
            if not t.get("file") or f.endswith(".h"):
                owner.setdefault(t["name"], set()).add(f)
    known = set(files)
    edges = {f: set() for f in files}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            raw = fh.read()
        for inc in _INCLUDE.findall(raw):
            for d in [os.path.dirname(f)] + incdirs:
                p = os.path.normpath(os.path.join(d, inc))
                if p in known:
                    if p != f:
                        edges[f].add(p)
                    break
        code = _TAG.sub(" ", strip_c(raw))
        if f.endswith(".h"):
            lines = code.split("\n")
            code = "\n".join("\n".join(lines[t["line"] - 1:t["end"]])
                             for t in tags[f] if t["kind"] == "function")
        own = {t["name"] for t in tags[f]}
        for name in set(_IDENT.findall(code)) - own:
            for g in owner.get(name, ()):
                if g != f:
                    edges[f].add(g)
    return edges, tags


def circles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def explain(comp, edges):
    s = set(comp)
    return ["%s -> %s" % (a, ", ".join(sorted(edges[a] & s))) for a in comp]


def long_functions(tags):
    out = []
    for f, ts in sorted(tags.items()):
        for t in ts:
            if t["kind"] == "function" and "end" in t:
                n = t["end"] - t["line"] + 1
                if n > MAX_LINES:
                    out.append((f, t["name"], t["line"], n))
    return out


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "libpin" and len(parts) > 2 and parts[1] in LIBPIN_LAYERS:
        return LIBPIN_LAYERS.index(parts[1])
    return -1    # libpin/*.h and include/: below every layer


def py_graph(root, pkgdir):
    """Edges between the modules of one package, by dotted name."""
    pkg = os.path.basename(pkgdir)
    mods = {}
    for f in sources(root, pkgdir, (".py",)):
        rel = os.path.relpath(f, os.path.dirname(pkgdir))[:-3].split(os.sep)
        ispkg = rel[-1] == "__init__"
        name = ".".join(rel[:-1] if ispkg else rel)
        mods[name] = (f, ispkg)

    def target(name):
        return name if name in mods else None

    edges = {m: set() for m in mods}
    for m, (f, ispkg) in mods.items():
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), f)
        here = m if ispkg else m.rpartition(".")[0]
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[:len(base) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                subs = [base + "." + a.name for a in node.names]
                subs = [s for s in subs if s in mods]
                # "from pkg import mod" uses mod; "from pkg import name"
                # uses pkg itself.
                found = subs if subs and len(subs) == len(node.names) else [base] + subs
            for name in found:
                if name.split(".")[0] != pkg:
                    continue
                t = target(name)
                while t is None and "." in name:
                    name = name.rpartition(".")[0]
                    t = target(name)
                if t and t != m:
                    edges[m].add(t)
    return edges


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = False

    def result(self, ok, name, lines=()):
        self.n += 1
        print("%s %d - %s" % ("ok" if ok else "not ok", self.n, name))
        for ln in lines:
            print("# " + ln)
        self.failed |= not ok

    def done(self):
        print("1..%d" % self.n)
        return 1 if self.failed else 0


def check_circles(tap, what, edges, fail=True):
    comps = circles(edges)
    lines = []
    for c in comps:
        lines.append("circle: " + " ".join(c))
        lines += ["  " + e for e in explain(c, edges)]
    if fail:
        tap.result(not comps, "%s: no circle between files" % what, lines)
    else:
        tap.result(True, "%s: circles reported (%d)" % (what, len(comps)), lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), ".."))
    root = os.path.abspath(ap.parse_args().root)
    tap = Tap()

    # libpin
    files = sources(root, "libpin", (".c", ".h"))
    edges, tags = c_graph(root, files, ["libpin", "include"])
    check_circles(tap, "libpin (includes and calls)", edges)
    bad = ["%s uses %s" % (a, b) for a in sorted(edges) for b in sorted(edges[a])
           if layer_of(b) > layer_of(a)]
    tap.result(not bad, "libpin: each layer (%s) uses only those below it"
               % " < ".join(LIBPIN_LAYERS), bad)
    longs = long_functions(tags)
    tap.result(not longs, "libpin: no function over %d lines" % MAX_LINES,
               ["%s:%d %s() %d lines" % (f, ln, n, c) for f, n, ln, c in longs])

    # the tools, the cache service, kmod: no circle, no long function
    for top in ("tools", "service", "kmod"):
        files = sources(root, top, (".c", ".h"))
        edges, tags = c_graph(root, files, [top, "include"])
        check_circles(tap, "%s (includes and calls)" % top, edges)
        longs = long_functions(tags)
        tap.result(not longs, "%s: no function over %d lines" % (top, MAX_LINES),
                   ["%s:%d %s() %d lines" % (f, ln, n, c)
                    for f, n, ln, c in longs])

    # the Python packages: the binding, the Kubernetes device plugin
    for pkg in ("libpin/python/pinmem",
                "deploy/kubernetes/device-plugin/pinmem_device_plugin"):
        edges = py_graph(root, pkg)
        check_circles(tap, "python package %s (imports)" % os.path.basename(pkg),
                      edges)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
