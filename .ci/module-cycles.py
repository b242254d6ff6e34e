#!/usr/bin/env python3
"""Module cycles among sibling modules of a crate: reads `crate::`, `super::` and `self::` paths (in `use`
items, brace groups expanded, and inline), resolves each to the sibling modules under the two modules' common
parent, and prints every strongly connected group of siblings. Test-only code (`#[cfg(test)] mod tests`)
is reported separately. Exits 1 when there is a cycle. Usage: .ci/module-cycles.py crates/eddies/src
A module may use its ancestors and its descendants; among siblings, imports must form no cycle, so that each
folder reads from its ground floor up (issue 26)."""
import os, re, sys
from collections import defaultdict

root = sys.argv[1]

def modpath(path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)

def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]"""
    tree = tree.strip()
    m = re.match(r"^([\w:]*?)(::)?\{(.*)\}$", tree, re.S)
    if not m:
        return [tree]
    prefix, body = m.group(1), m.group(3)
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur); cur = ""; continue
        depth += ch == "{"; depth -= ch == "}"; cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            for e in expand(p):
                out.append(prefix + "::" + e if prefix else e)
    return out

def resolve(here, path):
    segs = [s.strip() for s in path.split("::")]
    segs = [s.split(" as ")[0].strip() for s in segs]
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        base, rest = tuple(base), segs
    else:
        return None
    return base + tuple(s for s in rest if s and s != "*" and s != "self")

files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
mods = {modpath(f) for f in files}
# Items a module takes from its children with `use child::…` (re-exports and private imports alike), so that
# `super::Item` reaching a sibling through the parent counts as an edge to that sibling.
reexport = {}
for f in files:
    if os.path.basename(f) not in ("mod.rs", "lib.rs"):
        continue
    here = modpath(f)
    for m in re.finditer(r"\buse\s+([^;]*);", open(f).read()):
        for p in expand(m.group(1)):
            segs = [x.strip().split(" as ")[-1].strip() for x in p.split("::")]
            if segs[0] in ("crate", "super", "self"):
                full = resolve(here, p) or ()
                segs = list(full[len(here):]) if full[:len(here)] == here else []
            if len(segs) >= 2 and here + (segs[0],) in mods:
                name = p.split("::")[-1].split(" as ")[-1].strip()
                reexport[here + (name,)] = here + (segs[0],)
edges = {False: defaultdict(set), True: defaultdict(set)}
for f in files:
    here = modpath(f)
    is_mod = os.path.basename(f) in ("mod.rs", "lib.rs", "main.rs")
    text = open(f).read()
    text = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
    t = text.find("#[cfg(test)]\nmod tests")
    parts = [(text, False)] if t < 0 else [(text[:t], False), (text[t:], True)]
    for body, test in parts:
        # inside `mod tests`, `super::` means the file's own module
        scope = here + ("tests",) if test else here
        paths = []
        for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", body, re.S):
            paths += expand(m.group(1))
        for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", body):
            paths.append(m.group(1))
        for p in paths:
            tgt = resolve(scope, p)
            if tgt is None:
                continue
            # longest prefix that is a module, through the parents' imports of their children's items
            for k in range(len(tgt), 0, -1):
                if tgt[:k] in reexport and tgt[:k] not in mods:
                    tgt = reexport[tgt[:k]]
                    break
                if tgt[:k] in mods:
                    break
            while tgt and tgt not in mods:
                tgt = tgt[:-1]
            src = here
            k = 0
            while k < min(len(src), len(tgt)) and src[k] == tgt[k]:
                k += 1
            if k == len(src) or k == len(tgt):
                continue  # ancestor/descendant, not siblings
            edges[test][src[:k]].add((src[k], tgt[k]))

def sccs(nodes, adj):
    idx, low, st, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
        for w in adj.get(v, ()):
            if w not in idx:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            c = []
            while True:
                w = st.pop(); on.discard(w); c.append(w)
                if w == v: break
            if len(c) > 1: out.append(sorted(c))
    for v in nodes:
        if v not in idx: visit(v)
    return out

found = False
for test in (False, True):
    for parent in sorted(set(edges[False]) | set(edges[True])):
        es = set(edges[False][parent]) | (set(edges[True][parent]) if test else set())
        adj = defaultdict(set)
        for a, b in es:
            adj[a].add(b)
        nodes = sorted({a for a, _ in es} | {b for _, b in es})
        for c in sccs(nodes, adj):
            if test and c in sccs(nodes, {a: {b for x, b in edges[False][parent] if x == a} for a in nodes}):
                continue
            found = True
            inner = sorted((a, b) for a, b in es if a in c and b in c)
            where = "::".join(("crate",) + parent)
            print(("with tests: " if test else "") + f"{where}: cycle among {c}: " + ", ".join(f"{a}->{b}" for a, b in inner))
sys.exit(1 if found else 0)
