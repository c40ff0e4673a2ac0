#!/usr/bin/env python3
# Compiles and runs the C++ snippets of the user docs so they cannot drift from the library.
#
# Usage: check_snippets.py BUILD_DIR SOURCE_DIR DOC.md [DOC.md ...]
#        check_snippets.py --expect-fail compile|run|fence BUILD_DIR SOURCE_DIR DOC.md
#            (the checker's own test: succeeds only when DOC.md fails for exactly that reason)
#        check_snippets.py --extract OUT_DIR DOC.md [...]   (only write the generated programs)
#        check_snippets.py --names SOURCE_DIR [DOC.md ...]
#            (every path, qualified name, Note and flag the documents name exists in the source;
#            no DOC.md: every markdown file under docs/ and README.md; see doc_names.py)
#        check_snippets.py --expect-fail names SOURCE_DIR DOC.md   (the names check's own test)
#
# Fences: ```cpp blocks go, in order, into one main() (so later blocks see earlier variables);
# ```cpp file blocks go to file scope (includes, classes, helpers); ```cpp-nocompile blocks are
# shown to readers but not built (CUDA-only examples). Any other fence that starts with "cpp"
# is an error, so a typo cannot silently skip a snippet. Each document becomes one program,
# built the way a user builds one -- c++ -std=c++20 prog.cpp $(pkg-config --cflags --libs octo)
# against a staged `meson install` (as tools/check_install.sh does) -- and run; a compile error
# or a non-zero exit (a failed check() in the snippets) fails the test.
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

FENCE = re.compile(r"^(\s*)(`{3,})\s*([^`\s]*)\s*(.*)$")


class DocError(Exception):
    pass


def extract(path):
    """Returns (file_scope_blocks, main_blocks); each block is (first_line_number, text)."""
    top, body = [], []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang, rest = m.group(2), m.group(3), m.group(4).strip()
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(ticks):
            j += 1
        if j == len(lines):
            raise DocError(f"{path}:{i + 1}: unterminated code fence")
        text = "\n".join(lines[start:j])
        if lang.startswith("cpp") or lang in ("c++", "cxx", "C++"):
            if lang == "cpp" and rest == "file":
                top.append((start + 1, text))
            elif lang == "cpp" and rest == "":
                body.append((start + 1, text))
            elif lang == "cpp-nocompile":
                pass
            else:
                raise DocError(f"{path}:{i + 1}: unknown fence '{(lang + ' ' + rest).strip()}'; use "
                               "```cpp, ```cpp file or ```cpp-nocompile")
        i = j + 1
    return top, body


def program(path):
    top, body = extract(path)
    if not body:
        raise DocError(f"{path}: no ```cpp blocks to run")
    src = os.path.abspath(path)
    out = [f"// Generated from {os.path.basename(path)} by tests/docs/check_snippets.py; "
           "do not edit.",
           "#include <exception>", "#include <iostream>  // main() below reports failures"]
    for line, text in top:
        out.append(f'#line {line} "{src}"')
        out.append(text)
    out.append("int main() {")
    out.append("  try {")
    for line, text in body:
        out.append(f'#line {line} "{src}"')
        out.append(text)
    out.append("  } catch (const std::exception& e) {")
    out.append('    std::cerr << "snippet program failed: " << e.what() << "\\n";')
    out.append("    return 1;")
    out.append("  }")
    out.append('  std::cout << "all snippets ran\\n";')
    out.append("  return 0;")
    out.append("}")
    return "\n".join(out) + "\n", len(top), len(body)


def staged_install(build, tmp):
    subprocess.run(["meson", "install", "-C", build, "--destdir", tmp, "--quiet",
                    "--no-rebuild"], check=True, stdout=subprocess.DEVNULL)
    opts = json.loads(subprocess.run(["meson", "introspect", build, "--buildoptions"],
                                     check=True, capture_output=True, text=True).stdout)
    get = lambda name: next(o["value"] for o in opts if o["name"] == name)
    root = tmp + get("prefix")
    libdir = os.path.join(root, get("libdir"))
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = subprocess.run(["pkg-config", f"--define-variable=prefix={root}", "--cflags",
                            "--libs", "octo"], check=True, capture_output=True, text=True,
                           env=env).stdout
    return shlex.split(flags), libdir


def build_and_run(doc, tmp, flags, libdir):
    code, ntop, nbody = program(doc)
    name = os.path.splitext(os.path.basename(doc))[0]
    cpp = os.path.join(tmp, name + "_snippets.cpp")
    exe = os.path.join(tmp, name + "_snippets")
    open(cpp, "w", encoding="utf-8").write(code)
    # A sanitized libocto (-Db_sanitize=...) needs programs built with the same runtime.
    cxx = shlex.split(os.environ.get("CXX", "c++")) + shlex.split(
        os.environ.get("OCTO_SANITIZE_FLAGS", ""))
    log = [f"== {doc}: {ntop} file-scope + {nbody} main() blocks"]
    r = subprocess.run(cxx + ["-std=c++20", "-Wall", "-Wno-unused-variable", cpp] + flags +
                       ["-o", exe], capture_output=True, text=True)
    if r.returncode != 0:
        return "compile", "\n".join(log + ["compile FAILED:", r.stdout, r.stderr])
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, OMP_NUM_THREADS="2")
    env.pop("OCTO_TRACE", None)
    if "init_process_group" in code and "ASAN_OPTIONS" in env:
        # Open MPI unloads its components at MPI_Finalize, so LeakSanitizer can neither name
        # nor suppress their one-time allocations; memory errors stay fatal (docs/testing.md).
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    r = subprocess.run([exe], capture_output=True, text=True, cwd=tmp, env=env, timeout=600)
    log += [r.stdout.rstrip(), r.stderr.rstrip()]
    ok = r.returncode == 0 and "all snippets ran" in r.stdout
    log.append("OK" if ok else f"run FAILED (exit {r.returncode})")
    return None if ok else "run", "\n".join(x for x in log if x)


def names(argv, expect_fail=False):
    """--names SOURCE_DIR [DOC.md ...]: prints each failure as file:line; returns them."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import doc_names
    source = os.path.realpath(argv[0])
    docs = [d if os.path.isabs(d) else os.path.join(source, d) for d in argv[1:]]
    if not docs:
        for d, subdirs, files in os.walk(os.path.join(source, "docs")):
            subdirs.sort()
            docs += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]
        docs.append(os.path.join(source, "README.md"))
    failures = doc_names.run(source, docs, with_source_notes=not expect_fail)
    for f in failures:
        print(f)
    print(f"{len(docs)} documents, {len(failures)} names not found in the source")
    return failures


def expect_names(argv):
    """The names check's own test: the failures must fall on exactly the lines of the document
    marked "fails: N" (N failures each), so a check that stops firing, or fires on a right name,
    fails it."""
    if len(argv) != 2:
        raise SystemExit("usage: check_snippets.py --expect-fail names SOURCE_DIR DOC.md")
    doc = argv[1] if os.path.isabs(argv[1]) else os.path.join(os.path.realpath(argv[0]), argv[1])
    want = {}
    for n, line in enumerate(open(doc, encoding="utf-8").read().split("\n"), 1):
        m = re.search(r"fails: (\d+)", line)
        if m:
            want[n] = int(m.group(1))
    got = {}
    for f in names(argv, expect_fail=True):
        n = int(f.split(":")[1])
        got[n] = got.get(n, 0) + 1
    print(f"failures per line: {got}, expected: {want}")
    return 0 if want and got == want else 1


def main(argv):
    if len(argv) >= 3 and argv[1] == "--names":
        return 1 if names(argv[2:]) else 0
    if len(argv) >= 4 and argv[1:3] == ["--expect-fail", "names"]:
        return expect_names(argv[3:])
    if len(argv) >= 3 and argv[1] == "--extract":
        os.makedirs(argv[2], exist_ok=True)
        for doc in argv[3:]:
            name = os.path.splitext(os.path.basename(doc))[0]
            out = os.path.join(argv[2], name + "_snippets.cpp")
            open(out, "w", encoding="utf-8").write(program(doc)[0])
            print(out)
        return 0
    if len(argv) >= 3 and argv[1] == "--expect-fail":
        expect = argv[2]
        if expect not in ("compile", "run", "fence"):
            raise SystemExit(f"--expect-fail: expected compile, run or fence, got {expect}")
        argv = argv[:1] + argv[3:]
        try:
            failures = run_docs(argv)
        except DocError as e:
            print(e)
            failures = ["fence"]
        print(f"failures: {failures}, expected: ['{expect}']")
        return 0 if failures == [expect] else 1
    return 0 if not run_docs(argv) else 1


def run_docs(argv):
    """Builds and runs each document's program; returns the failure kinds (empty: all passed)."""
    if len(argv) < 4:
        raise SystemExit("usage: check_snippets.py [--expect-fail KIND] BUILD_DIR SOURCE_DIR "
                         "DOC.md...")
    build, source = os.path.realpath(argv[1]), os.path.realpath(argv[2])
    docs = [d if os.path.isabs(d) else os.path.join(source, d) for d in argv[3:]]
    for d in docs:
        program(d)  # fence errors before the slow part
    with tempfile.TemporaryDirectory() as tmp:
        flags, libdir = staged_install(build, tmp)
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda d: build_and_run(d, tmp, flags, libdir), docs))
    for _, log in results:
        print(log)
    return [kind for kind, _ in results if kind]


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except DocError as e:
        print(e)
        sys.exit(1)
