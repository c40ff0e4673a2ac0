#!/usr/bin/env python3
"""Checks that docs/adding-an-op.md and the elementwise op table (kernels/functors.h) agree.

usage: check_adding_an_op.py SOURCE_ROOT

Fails (exit 1, one line per problem) when
  - a path the page names in backticks does not exist (placeholders like <family> are skipped);
  - an OCTO_* macro the page names is #defined nowhere in the tree, or one of the three table
    lists is not defined in the file the page says holds the op table;
  - an X(Kind, "name", dtypes) row the page shows is not an entry of the table;
  - a line of a cpp snippet of part (a) is not in the files part (a) tells the reader to edit
    (comments and white space aside): the walk-through shows real code;
  - an entry of OCTO_UNARY_OPS / OCTO_BINARY_OPS has no `Tensor name(` declaration in
    autograd/ops/*.h (the name is octo's function), or a backward entry's name is not
    "<unary op>_backward".
"""
import os
import pathlib
import re
import sys

DOC = "docs/adding-an-op.md"
LISTS = ("OCTO_UNARY_OPS", "OCTO_BINARY_OPS", "OCTO_BINARY_BACKWARD_OPS")
ENTRY = re.compile(r'X\((\w+),\s*"(\w+)",\s*(\w+)\)')
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".py", ".build", ".md", ".sh"}


def macro_body(text, name):
    """The body of `#define name(...)` with its continuation lines, or None."""
    m = re.search(r"^#define\s+" + name + r"\b.*?(?<!\\)$", text, re.M | re.S)
    return m.group(0) if m else None


def table_entries(text):
    """{list name: [(Kind, name, dtypes)]} from the op table header."""
    out = {}
    for name in LISTS:
        body = macro_body(text, name)
        out[name] = ENTRY.findall(body) if body else None
    return out


def normalise(line):
    line = re.sub(r"//.*", "", line)
    line = re.sub(r"/\*.*?\*/", "", line)
    return " ".join(line.split())


def main():
    root = pathlib.Path(sys.argv[1])
    doc = (root / DOC).read_text()
    problems = []

    # 1. Paths in backticks.
    for token in sorted(set(re.findall(r"`([^`\s]+)`", doc))):
        if "<" in token or "/" not in token or token.startswith(("-", "#")):
            continue
        if pathlib.PurePath(token).suffix in SOURCE_SUFFIXES or token.endswith("/"):
            if not (root / token).exists():
                problems.append(f"{DOC} names `{token}`, which does not exist")

    # 2. Macros, and where the table lives.
    tree = []
    for d, subdirs, files in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
        tree += [pathlib.Path(d) / f for f in files if f.endswith((".h", ".cpp", ".cu"))]
    defined = set()
    for p in tree:
        defined.update(re.findall(r"^#define\s+(OCTO_\w+)", p.read_text(errors="replace"), re.M))
    for macro in sorted(set(re.findall(r"\b(OCTO_[A-Z0-9_]+)\b", doc))):
        if macro not in defined:
            problems.append(f"{DOC} names {macro}, which no header #defines")
    m = re.search(r"The op table: `([^`]+)`", doc)
    if not m:
        problems.append(f"{DOC} does not say which file holds the op table ('The op table: `...`')")
        print("\n".join(problems))
        return 1
    table_file = root / m.group(1)
    table_text = table_file.read_text() if table_file.exists() else ""
    entries = table_entries(table_text)
    for name, rows in entries.items():
        if rows is None:
            problems.append(f"{m.group(1)} does not define {name}, which {DOC} says it holds")
    all_rows = {row for rows in entries.values() if rows for row in rows}

    # 3. Table rows the page shows.
    for row in ENTRY.findall(doc):
        if row[0] != "Kind" and row not in all_rows:
            problems.append(f'{DOC} shows X({row[0]}, "{row[1]}", {row[2]}), not in the op table')

    # 4. The cpp snippets of part (a) are real code from the files it names.
    part_a = doc.split("## (b)")[0]
    files_a = [t for t in re.findall(r"^### \d\. .*?`([^`]+)`", part_a, re.M)]
    source_a = set()
    for f in files_a:
        path = root / f
        if path.exists():
            source_a.update(normalise(line) for line in path.read_text().splitlines())
    for block in re.findall(r"```cpp\n(.*?)```", part_a, re.S):
        for line in block.splitlines():
            n = normalise(line)
            if n and n not in source_a:
                problems.append(f"{DOC}: snippet line '{n}' is in none of {', '.join(files_a)}")

    # 5. Every table entry is octo's function of that name (backward helpers: <op>_backward).
    decls = set()
    for h in (root / "autograd" / "ops").glob("*.h"):
        decls.update(re.findall(r"\bTensor\s+(\w+)\(", h.read_text()))
    unary_names = {n for _, n, _ in entries.get("OCTO_UNARY_OPS") or []}
    for list_name in ("OCTO_UNARY_OPS", "OCTO_BINARY_OPS"):
        for kind, name, _ in entries.get(list_name) or []:
            if name not in decls:
                problems.append(f"{list_name} entry {kind} is named '{name}', "
                                "but autograd/ops/*.h declares no Tensor " + name + "(...)")
    for kind, name, _ in entries.get("OCTO_BINARY_BACKWARD_OPS") or []:
        if not (name.endswith("_backward") and name[: -len("_backward")] in unary_names):
            problems.append(f"OCTO_BINARY_BACKWARD_OPS entry {kind} is named '{name}', "
                            "not '<unary op>_backward'")

    if problems:
        print("\n".join(problems))
        return 1
    print(f"{DOC}: {len(all_rows)} table entries, the page's paths, macros and snippets agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
