#!/usr/bin/env python3
"""Import circles between the modules of each crate (module A uses B and B uses A, or longer).

Usage: python3 scripts/import_cycles.py [crates/<name> ...]   (default: every crate)
Exit status 1 when a circle is found; each circle is printed with one use site per edge.

A module is one source file (`src/a/b.rs` or `src/a/b/mod.rs` is `a::b`). An edge A -> B is a
`crate::b...` path (in a `use` or inline) in A's non-test code that names B or an item of B;
`super::` paths are resolved against A's path. Edges between a module and its own ancestors are
left out (a parent declaring and re-exporting its children, a child using its parent's shared
items is the normal shape of a module tree). Test modules (`#[cfg(test)] mod ... {` to the end
of the file) are left out. Circles are looked for between top-level modules (`data::hdf5`
using `score` and `score` using `data` is a circle `data <-> score`) and between the files of
one top-level module.
"""
import re
import sys
from pathlib import Path


def modules(src: Path):
    mods = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "mod":
            parts = parts[:-1]
        if parts in (["lib"], ["main"]):
            parts = []
        if parts and parts[0] == "bin":
            continue
        mods[tuple(parts)] = f
    return mods


def strip(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)  # comments and doc comments
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
    return text[: m.start()] if m else text


def expand_use(body: str):
    """Flatten `a::{b, c::{d, e}}` into paths."""
    body = re.sub(r"\s+", "", body)
    out = []

    def rec(prefix, s):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:i])
                start = i + 1
        items.append(s[start:])
        for it in items:
            if not it:
                continue
            if "{" in it:
                head, rest = it.split("{", 1)
                rec(prefix + head, rest[: rest.rfind("}")])
            else:
                out.append(prefix + it.split(" as ")[0])

    rec("", body)
    return out


def paths_in(text: str, me):
    found = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        found += expand_use(m.group(1))
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", text):
        found.append(m.group(1))
    res = []
    for p in found:
        segs = [s for s in p.split("::") if s]
        if not segs:
            continue
        if segs[0] == "crate":
            res.append(segs[1:])
        elif segs[0] == "super":
            base = list(me)
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            res.append(base + segs)
        elif segs[0] == "self":
            res.append(list(me) + segs[1:])
    return res


def crate_graph(src: Path):
    mods = modules(src)
    graph = {m: {} for m in mods}
    for me, f in mods.items():
        text = strip(f.read_text())
        for p in paths_in(text, me):
            # the longest module prefix of p
            target = None
            for k in range(len(p), 0, -1):
                if tuple(p[:k]) in mods:
                    target = tuple(p[:k])
                    break
            if target is None or target == me:
                continue
            if target == me[: len(target)] or me == target[: len(me)]:
                continue  # ancestor / descendant
            graph[me].setdefault(target, "::".join(p))
    return graph


def collapsed(graph):
    """Top-level modules (`data::hdf5` counts as `data`), and, inside one top-level module, files."""
    out = {}
    for a, edges in graph.items():
        for b, via in edges.items():
            if a[:1] != b[:1]:
                ka, kb = a[:1], b[:1]
            else:
                ka, kb = a, b
            out.setdefault(ka, {})
            out.setdefault(kb, {})
            out[ka].setdefault(kb, (a, via))
    return out


def sccs(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a) for a in sys.argv[1:]] or sorted((root / "crates").iterdir())
    bad = 0
    for c in crates:
        src = c / "src"
        if not src.is_dir():
            continue
        g = collapsed(crate_graph(src))
        for comp in sccs(g):
            bad += 1
            names = lambda m: "::".join(m) or "(crate root)"
            print(f"{c.name}: circle among {', '.join(sorted(names(m) for m in comp))}")
            cs = set(comp)
            for a in sorted(comp):
                for b, (site, via) in sorted(g[a].items()):
                    if b in cs:
                        print(f"    {names(a)} -> {names(b)}  (in {names(site)}: crate::{via})")
    if bad:
        print(f"{bad} import circle(s)")
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
