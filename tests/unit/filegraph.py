#!/usr/bin/env python3
"""filegraph.py BUILDDIR [SRCDIR]: the file-level call graph of ksb's product code.

Reads the product objects of a built tree with nm(1) (an object whose
source is no longer in SRCDIR, default BUILDDIR, or is newer than the
object, is a stale leftover and is skipped) (GNU binutils): an
edge A -> B when A.o references a global symbol that B.o defines.  Prints
the circles (strongly connected components of two files or more) and every
function name that two product source files define (global or static, as
far as the objects still show them; `main` once per program excepted).
The one circle allowed is a command table: edges from ksbctl/ksbctl.c to
the subcommands' *_main functions are not counted.  Exit 0 when there is
no circle and no name defined twice, 1 otherwise, 2 on a usage error.
Needs python3 and nm; no root, no network."""
import collections, os, subprocess, sys

PRODUCT = ('common/', 'proto/', 'audit/', 'policy/', 'mirror/', 'gateway/',
           'vmrunner/', 'ksbctl/', 'guest/')
TABLE = 'ksbctl/ksbctl.c'


def objects(root, srcdir):
    """Map each product source (path relative to root) to its objects."""
    objs = collections.defaultdict(list)
    for dp, _dn, fn in os.walk(root):
        rel = os.path.relpath(dp, root)
        if not (rel + '/').startswith(PRODUCT):
            continue
        for f in fn:
            if not f.endswith('.o'):
                continue
            stem = f[:-2]
            # automake names per-target objects TARGET-SOURCE.o
            if '-' in stem:
                stem = stem.split('-', 1)[1]
            src = os.path.join(rel, stem + '.c')
            spath, opath = os.path.join(srcdir, src), os.path.join(dp, f)
            # An object older than its source is a leftover of another
            # build (a renamed target, a file since cut in two).
            if (os.path.exists(spath) and
                    os.path.getmtime(opath) >= os.path.getmtime(spath)):
                objs[src].append(opath)
    return objs


def symbols(objs):
    defs = collections.defaultdict(set)
    local = collections.defaultdict(set)
    undef = collections.defaultdict(set)
    for src, paths in objs.items():
        for p in paths:
            out = subprocess.run(['nm', p], capture_output=True, text=True,
                                 check=True).stdout
            for line in out.splitlines():
                f = line.split()
                if len(f) == 2 and f[0] == 'U':
                    undef[src].add(f[1])
                elif len(f) == 3 and f[1] in 'TDBR':
                    defs[f[2]].add(src)
                elif len(f) == 3 and f[1] == 't' and '.' not in f[2]:
                    local[f[2]].add(src)
    return defs, local, undef


def circles(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return out


def main():
    if len(sys.argv) not in (2, 3):
        print('usage: filegraph.py BUILDDIR [SRCDIR]', file=sys.stderr)
        return 2
    objs = objects(sys.argv[1], sys.argv[-1])
    defs, local, undef = symbols(objs)
    edges = collections.defaultdict(set)
    for src, syms in undef.items():
        for s in syms:
            if src == TABLE and s.endswith('_main'):
                continue
            for d in defs.get(s, ()):
                if d != src:
                    edges[src].add(d)
    bad = 0
    cs = circles(objs.keys(), edges)
    print('# %d product sources, %d circles' % (len(objs), len(cs)))
    for c in cs:
        print('circle: ' + ' '.join(c))
        bad += 1
    names = collections.defaultdict(set)
    for table in (defs, local):
        for s, srcs in table.items():
            names[s] |= srcs
    for s, srcs in sorted(names.items()):
        if s != 'main' and len(srcs) > 1:
            print('defined twice: %s in %s' % (s, ' '.join(sorted(srcs))))
            bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
