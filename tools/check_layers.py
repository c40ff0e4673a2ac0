#!/usr/bin/env python3
"""Checks that octo's #includes respect the layer table of docs/architecture.md.

    tools/check_layers.py              # check the tree this script lives in
    tools/check_layers.py --root DIR   # check another tree (it needs its own docs/architecture.md)
    tools/check_layers.py --self-test  # show that a bad tree is reported (exit 0 when it is)

The layers and their order come from the first Markdown table of docs/architecture.md whose
first column is "layer": each row names one folder in backticks, and a file may include only
files of its own layer or of a layer in an earlier row. Three rules, each reported as
`file:line: message` (exit 1 when any is broken):

  1. an include may not point to a layer in a later row of the table;
  2. nothing outside kernels/ includes a CUDA header (cuda_runtime.h, cublas, cudnn, nccl, ...)
     or a header of the backends' internals (kernels/cuda/, kernels/cpu/);
  3. no include cycle between files, where a header and the sources of the same name
     (foo.h, foo.cpp, foo.cu) count as one file: foo.cpp including bar.h while bar.h (or
     bar.cpp) includes foo.h is a cycle, even though the preprocessor would not loop.
"""

import argparse
import os
import re
import sys
import tempfile

SOURCE_EXTS = ('.h', '.cuh', '.cpp', '.cu')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# Headers of the CUDA toolkit and its libraries (cuda.h, cuda_runtime*.h, cuda_fp16.h, cublas*,
# cublasLt*, cudnn*, nccl*, curand*, cufft*, cusparse*, cusolver*, nvrtc*, thrust/, cub/).
CUDA_HEADER_RE = re.compile(
    r'^(cuda[_a-z0-9]*\.h|cublas\w*\.h|cudnn\w*\.h|nccl\w*\.h|curand\w*\.h|cufft\w*\.h|'
    r'cusparse\w*\.h|cusolver\w*\.h|nvrtc\w*\.h|thrust/.*|cub/.*)$')
BACKEND_INTERNALS = ('kernels/cuda/', 'kernels/cpu/')


def read_layers(doc_path):
    """The layer folders in table order, e.g. ['core/', 'kernels/', ...]."""
    with open(doc_path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    layers = []
    in_table = False
    for line in lines:
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if not in_table:
            if line.lstrip().startswith('|') and cells and cells[0].lower() == 'layer':
                in_table = True
            continue
        if not line.lstrip().startswith('|'):
            break  # the table ended
        if set(cells[0]) <= set('-: '):
            continue  # the |---|---| separator
        m = re.search(r'`([^`]+/)`', cells[0])
        if not m:
            raise SystemExit(f'{doc_path}: layer table row without a `folder/`: {line}')
        layers.append(m.group(1))
    if not layers:
        raise SystemExit(f'{doc_path}: no Markdown table whose first column is "layer"')
    return layers


def layer_of(path, layers):
    """The row index of the deepest layer folder containing path, or None."""
    best = None
    for i, layer in enumerate(layers):
        if path.startswith(layer) and (best is None or len(layer) > len(layers[best])):
            best = i
    return best


def source_files(root, layers):
    tops = sorted({layer.split('/')[0] for layer in layers})
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXTS):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, '/')


def resolve(root, including, target):
    """The repository path of a quoted include, or None (a system or generated header)."""
    for candidate in (target, os.path.join(os.path.dirname(including), target)):
        candidate = os.path.normpath(candidate).replace(os.sep, '/')
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def unit(path):
    """foo.h, foo.cpp and foo.cu are one unit: foo."""
    return os.path.splitext(path)[0]


def find_cycles(edges):
    """Strongly connected components with more than one unit (Tarjan, iterative)."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def cycle_path(comp, edges):
    """One cycle through the component's first unit, as a list of units (first repeated last)."""
    members = set(comp)
    start = comp[0]
    # breadth-first search back to start, inside the component
    parent = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, {})):
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in parent:
                parent[w] = v
                queue.append(w)
    return comp + [start]


def check(root):
    """Returns the list of violation messages for the tree at root."""
    layers = read_layers(os.path.join(root, 'docs', 'architecture.md'))
    problems = []
    edges = {}  # unit -> {unit: (file, line, include)}
    for path in source_files(root, layers):
        src_layer = layer_of(path, layers)
        if src_layer is None:
            continue
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            lines = f.read().splitlines()
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            quote, target = m.groups()
            where = f'{path}:{lineno}: #include {quote}{target}{">" if quote == "<" else quote}'
            outside_kernels = not path.startswith('kernels/')
            if outside_kernels and CUDA_HEADER_RE.match(target):
                problems.append(f'{where}: a CUDA header outside kernels/ (layer '
                                f'{layers[src_layer]}); go through kernels/backend.h, '
                                'core/device_hooks.h or kernels/collectives.h')
                continue
            if quote == '<':
                continue
            resolved = resolve(root, path, target)
            if resolved is None:
                continue  # generated (octo_config.h) or not octo's
            if outside_kernels and resolved.startswith(BACKEND_INTERNALS):
                problems.append(f'{where}: backend internals outside kernels/ (layer '
                                f'{layers[src_layer]}); go through kernels/backend.h, '
                                'core/device_hooks.h or kernels/collectives.h')
            dst_layer = layer_of(resolved, layers)
            if dst_layer is not None and dst_layer > src_layer:
                problems.append(f'{where}: layer {layers[src_layer]} may not include layer '
                                f'{layers[dst_layer]}, which comes after it in the table of '
                                'docs/architecture.md')
            a, b = unit(path), unit(resolved)
            if a != b:
                edges.setdefault(a, {}).setdefault(b, (path, lineno, target))
    for comp in find_cycles(edges):
        path = cycle_path(comp, edges)
        steps = []
        for a, b in zip(path, path[1:]):
            f, lineno, target = edges[a][b]
            steps.append(f'{f}:{lineno} includes "{target}"')
        first = edges[path[0]][path[1]]
        more = '' if len(comp) == len(path) - 1 else f' (all of {", ".join(comp)} form one knot)'
        problems.append(f'{first[0]}:{first[1]}: include cycle between '
                        f'{" -> ".join(path)}: ' + '; '.join(steps) + more)
    return problems


def self_test():
    """Builds small trees with known faults and checks that each is reported (and a clean one
    is not). Returns 0 on success."""
    doc = ('# Architecture\n\n| layer | owns |\n|---|---|\n| `core/` | a |\n'
           '| `kernels/` | b |\n| `tensor/` | c |\n\nText after the table.\n')
    clean = {
        'docs/architecture.md': doc,
        'core/a.h': '#pragma once\n#include <vector>\n',
        'core/a.cpp': '#include "core/a.h"\n',
        'kernels/cuda/x.h': '#pragma once\n#include <cuda_runtime.h>\n#include "core/a.h"\n',
        'kernels/k.cpp': '#include "kernels/cuda/x.h"\n#include "octo_config.h"\n',
        'tensor/t.h': '#pragma once\n#include "core/a.h"\n#include "kernels/k.h"\n',
        'kernels/k.h': '#pragma once\n',
    }
    cases = {
        'upward include': ({'core/a.cpp': '#include "core/a.h"\n#include "tensor/u.h"\n',
                            'tensor/u.h': '#pragma once\n'},
                           ['core/a.cpp:2: #include "tensor/u.h": layer core/ may not include '
                            'layer tensor/']),
        'CUDA header': ({'tensor/t.cpp': '#include <cublas_v2.h>\n'},
                        ['tensor/t.cpp:1: #include <cublas_v2.h>: a CUDA header outside']),
        'backend internals': ({'tensor/t.cpp': '#include "kernels/cuda/x.h"\n'},
                              ['tensor/t.cpp:1: #include "kernels/cuda/x.h": backend internals']),
        'cycle': ({'core/b.h': '#pragma once\n', 'core/b.cpp': '#include "core/a.h"\n',
                   'core/a.cpp': '#include "core/a.h"\n#include "core/b.h"\n'},
                  ['include cycle between core/a -> core/b -> core/a']),
    }
    failures = 0

    def run(files):
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), 'w', encoding='utf-8') as f:
                    f.write(text)
            return check(root)

    got = run(clean)
    if got:
        print('self-test FAILED: the clean tree was reported:\n  ' + '\n  '.join(got))
        failures += 1
    for name, (changes, expected) in cases.items():
        got = run({**clean, **changes})
        for want in expected:
            if not any(want in p for p in got):
                print(f'self-test FAILED ({name}): expected a report containing\n  {want}\n'
                      'got:\n  ' + '\n  '.join(got or ['(nothing)']))
                failures += 1
        if len(got) != len(expected):
            print(f'self-test FAILED ({name}): expected {len(expected)} report(s), got:\n  ' +
                  '\n  '.join(got))
            failures += 1
    if failures == 0:
        print(f'self-test passed: a clean tree and {len(cases)} faulty ones')
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--root', default=os.path.join(os.path.dirname(__file__), '..'),
                        help='the repository to check (default: this one)')
    parser.add_argument('--self-test', action='store_true',
                        help='check that known-bad trees are reported')
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = check(os.path.abspath(args.root))
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} layering violation(s); see the table in docs/architecture.md')
        return 1
    print('layers: every include respects docs/architecture.md')
    return 0


if __name__ == '__main__':
    sys.exit(main())
