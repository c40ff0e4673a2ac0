# The names a document mentions must exist in the source tree (check_snippets.py --names).
#
# For every markdown file given:
#   paths    -- every path in backticks, in a link, or in prose under one of the tree's top-level
#               folders (`autograd/engine.cpp`, [x](../errors.md), tests/meson.build) must exist:
#               from the root, from the document's folder, or (for a path that does not start at
#               a top-level folder, like `distributed/process_group.h`) as the tail of a path in
#               the tree. {a,b} expands, <name> and * match anything; paths under build*/ must
#               name a source folder and a target its meson.build declares.
#   symbols  -- every qualified name in backticks (`octo::nn::Linear`, `DataParallel::forward`,
#               `detail::check_same_device`) must have its last component as an identifier in a
#               source file that also names the component before it; every `OCTO_...` macro or
#               variable in backticks must occur in the source.
#   notes    -- every Note [X] must be stated somewhere: a comment line that starts with
#               "Note [X]" and goes on with ":" or ends there; "Note [X] in `file`" must be
#               stated in that file. Notes cited in source comments are checked the same way.
#   flags    -- every --flag after one of octo's programs in a command (build/examples/mnist/
#               mnist, tools/gpu_check.sh, bench/bench_sgemm) must occur in that program's
#               sources; a --flag on its own in backticks, in the sources of the program last
#               named in its paragraph (or of any of octo's programs when none was).
# Things that are legitimately not in the tree are in ALLOW below, each with its reason.
import fnmatch
import os
import re

# (kind, pattern matched against the whole name, why it is not in the tree)
ALLOW = [
    ("symbol", r"torch(\.\w+)+", "PyTorch's names, for comparison"),
    ("symbol", r"(std|Eigen|Catch|CLI)::.*", "the standard library's and dependencies' names"),
    ("path", r"(\./)?build[\w-]*/meson-(logs|private|info)(/.*)?", "written by meson"),
    ("path", r"build-fuzz/(corpus|findings)(/.*)?", "written by tools/fuzz.sh"),
    ("path", r"build-gpudeps/?", "written by tools/gpu_check.sh --bundle-deps"),
    ("path", r"zlib\.h|zconf\.h", "zlib's headers, which a GPU machine may lack"),
    ("path", r"data/(mnist|fashion-mnist|cifar-10-batches-bin)/?",
     "downloaded by tools/get_data.sh"),
    ("flag", r"--(allow-run-as-root|oversubscribe|hostfile|ntasks(-per-node)?|gpus-per-node|"
             r"mpi=\w+|bind-to)", "mpirun's and srun's options"),
    ("flag", r"--(no-rebuild|suite|print-errorlogs|benchmark|num-processes|destdir|cflags|libs)",
     "meson's and pkg-config's options"),
]

TOP = ("autograd", "bench", "core", "data", "docs", "examples", "fuzz", "include", "kernels",
       "nn", "optim", "parallel", "tensor", "tests", "tools")
SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".build", ".txt", ".json", ".md",
              ".supp", ".in", ".format")
PATH_EXT = r"(?:h|cpp|cu|cuh|py|sh|md|build|txt|json|supp)"
PROSE_PATH = re.compile(r"(?<![\w/.`-])((?:%s)/[\w./{},<>*-]*\.%s)(?![\w])" % ("|".join(TOP),
                                                                             PATH_EXT))
TICKS = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
NOTE = re.compile(r"Note\s+\[([^\]]+)\]")
QUALIFIED = re.compile(r"(?<![\w:.])((?:[A-Za-z_]\w*::)+~?[A-Za-z_]\w*)")
MACRO = re.compile(r"(?<![\w])(OCTO_[A-Z0-9_]*[A-Z0-9])(\*?)")
FENCE = re.compile(r"^\s*(`{3,})\s*(\S*)")
SHELL_FENCES = ("", "sh", "bash", "console", "shell")


def allowed(kind, name):
    return any(k == kind and re.fullmatch(p, name) for k, p, _ in ALLOW)


class Tree:
    """The source tree: files, folders, identifiers and the Notes it states."""

    def __init__(self, root):
        self.root = root
        self.files, self.dirs = set(), set()
        self.text = {}
        for d, subdirs, names in os.walk(root):
            rel = os.path.relpath(d, root)
            keep = []
            for s in subdirs:
                full = os.path.join(d, s)
                if s == ".git" or os.path.exists(os.path.join(full, "build.ninja")) or \
                        os.path.exists(os.path.join(full, "meson-private")):
                    continue  # a build folder or the repository's metadata
                keep.append(s)
            subdirs[:] = keep
            if rel != ".":
                self.dirs.add(rel)
            for n in names:
                p = n if rel == "." else os.path.join(rel, n)
                self.files.add(p)
                if n.endswith(SOURCE_EXT) or n in ("meson.build", "meson_options.txt", "run") \
                        or "." not in n:
                    try:
                        self.text[p] = open(os.path.join(d, n), encoding="utf-8").read()
                    except (UnicodeDecodeError, OSError):
                        pass
        self.code = {p: t for p, t in self.text.items() if not p.endswith(".md")}
        self.words = {}  # identifier -> files naming it
        for p, t in self.code.items():
            for w in set(re.findall(r"[A-Za-z_]\w*", t)):
                self.words.setdefault(w, set()).add(p)
        self.notes = {}  # note title -> files stating it
        stated = re.compile(r"^[ \t]*(?://+|#|\*)[ \t]*Note \[([^\]]+)\](?::|[ \t]*$)", re.M)
        for p, t in self.code.items():
            for m in stated.finditer(t):
                self.notes.setdefault(m.group(1), set()).add(p)
        self.all = self.files | self.dirs

    def exists(self, path, base):
        """Whether `path` (maybe with {a,b}, <x>, *) names something, from the root or base."""
        for p in expand(path):
            p = p.rstrip("/")
            if not p:
                continue
            pattern = re.sub(r"<[^>]*>", "*", p)
            candidates = [os.path.normpath(pattern)]
            if base:
                candidates.append(os.path.normpath(os.path.join(base, pattern)))
            found = False
            for c in candidates:
                if any(ch in c for ch in "*?[") and fnmatch.filter(self.all, c):
                    found = True
                elif c in self.all:
                    found = True
            if not found and p.split("/")[0] not in TOP and not p.startswith("."):
                tail = "/" + pattern
                found = any(fnmatch.fnmatch("/" + x, "*" + tail) for x in self.all)
            if not found:
                return False
        return True


def expand(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    out = []
    for alt in m.group(1).split(","):
        out += expand(path[:m.start()] + alt + path[m.end():])
    return out


def looks_like_path(token):
    if " " in token or "(" in token or "=" in token or token.startswith(("/", "$", "~", "-")):
        return False
    if "://" in token or token.startswith("#"):
        return False
    if "/" in token:
        first = token.lstrip("./").split("/")[0]
        return first in TOP or re.match(r"build[\w-]*$", first) is not None or \
            re.search(r"\.%s$" % PATH_EXT, token) is not None
    return re.fullmatch(r"[\w-]+\.(?:h|cpp|cu|cuh|py|sh)", token) is not None or \
        token in ("meson.build", "meson_options.txt")


def check_build_path(tree, path):
    """build/examples/mnist/mnist: the source folder exists and its meson.build names the target."""
    rest = re.sub(r"^(\./)?(build[\w-]*|B)/", "", path).rstrip("/")
    if not rest or tree.exists(rest, None):
        return True
    folder, name = os.path.split(rest)
    build = os.path.join(folder, "meson.build")
    return build in tree.text and re.search(r"['\"]%s['\"]" % re.escape(name), tree.text[build])


class Programs:
    """octo's own command-line programs and the sources their flags must appear in."""

    def __init__(self, tree):
        self.tree = tree
        self.sources = {}  # program name -> files
        for p in tree.files:
            if p.startswith(("tools/", "bench/")) and p.endswith((".sh", ".py")):
                self.sources[p] = {p}
        for build in [p for p in tree.text if p.endswith("meson.build")]:
            folder = os.path.dirname(build)
            if folder.split("/")[0] not in ("examples", "bench"):
                continue
            for m in re.finditer(r"executable\(\s*'([\w-]+)'\s*,([^)]*)", tree.text[build]):
                name, srcs = m.group(1), re.findall(r"'([^']+)'", m.group(2))
                files = {os.path.normpath(os.path.join(folder, s)) for s in srcs}
                if folder != "examples" and folder.startswith("examples"):
                    files |= {f for f in tree.files if f.startswith((folder + "/",
                                                                      "examples/common/"))}
                self.sources[os.path.join(folder, name)] = files & tree.files
        # A script that runs one of the programs takes its flags too (tools/train_mnist.sh).
        scripts = [x for x in self.sources if x.startswith(("tools/", "bench/")) and
                   x.endswith((".sh", ".py"))]
        for p in scripts:
            for other in list(self.sources):
                if other != p and other not in scripts and other in tree.text[p]:
                    self.sources[p] |= self.sources[other]

    def find(self, token):
        """The program a command token names, or None."""
        t = re.sub(r"^(\./)?((build[\w-]*|B)/)?", "", token).rstrip("/")
        if t in self.sources:
            return t
        if t.startswith("examples/") and os.path.join(t, os.path.basename(t)) in self.sources:
            return os.path.join(t, os.path.basename(t))  # `examples/mnist`: the folder's program
        for name in self.sources:  # `mnist`, `bench_sgemm`: a program by its own name
            if not name.endswith((".sh", ".py")) and os.path.basename(name) == t:
                return name
        return None

    def has_flag(self, program, flag):
        pattern = re.compile(r"(?<![\w-])%s(?![\w-])" % re.escape(flag))
        names = self.sources.values() if program is None else [self.sources[program]]
        return any(pattern.search(self.tree.text.get(f, "")) for files in names for f in files)


def check_flags(programs, line, where, context, failures, standalone):
    """Checks the --flags after each of octo's programs in a command line; returns the last
    program named (the context for later flags on their own)."""
    words = re.split(r"\s+", line.split(" #")[0].strip())
    program = None
    for w in words:
        if w in ("|", "&&", ";", "||"):
            program = None
            continue
        found = programs.find(w)
        if found:
            program = context = found
            continue
        m = re.match(r"(--[A-Za-z][\w-]*)", w)
        if not m or (program is None and not standalone):
            continue
        flag = m.group(1)
        if allowed("flag", flag) or allowed("flag", w):
            continue
        target = program if program else context
        if not programs.has_flag(target, flag):
            who = target if target else "any of octo's programs"
            failures.append(f"{where}: flag '{flag}' does not occur in the sources of {who}")
    return context


def check_doc(tree, programs, doc, failures):
    rel = os.path.relpath(doc, tree.root)
    base = os.path.dirname(rel)
    lines = open(doc, encoding="utf-8").read().split("\n")
    fence = None
    context = None  # the program last named in this paragraph
    prose = []  # (line number, text) outside code fences, for Notes that wrap lines
    for n, line in enumerate(lines, 1):
        where = f"{rel}:{n}"
        m = FENCE.match(line)
        if fence is None and m:
            fence = (m.group(1), m.group(2))
            continue
        if fence is not None:
            if line.strip().startswith(fence[0]):
                fence = None
            elif fence[1] in SHELL_FENCES:
                for cmd in re.split(r"\s*(?:&&|;|\|)\s*", line):
                    context = check_flags(programs, cmd, where, context, failures, False)
            continue
        if line.startswith("#") or not line.strip():
            context = None
        prose.append((n, line))
        tokens = TICKS.findall(line)
        for t in tokens:
            t = t.strip()
            if re.match(r"(\./|mpirun|srun|OCTO_\w+=)", t) or " --" in t or \
                    (programs.find(t.split(" ")[0]) and " " in t):
                context = check_flags(programs, t, where, context, failures, False)
            elif t.startswith("--"):
                check_flags(programs, t, where, context, failures, True)
            if programs.find(t.split(" ")[0]):
                context = programs.find(t.split(" ")[0])
            path = t.split(" ")[0] if programs.find(t.split(" ")[0]) else t
            if looks_like_path(path):
                check_path(tree, path, base, where, failures)
            for q in QUALIFIED.findall(t):
                check_symbol(tree, q, where, failures)
            for mac, star in MACRO.findall(t):
                if star:
                    ok = any(w.startswith(mac) for w in tree.words)
                else:
                    ok = mac in tree.words
                if not ok:
                    failures.append(f"{where}: `{mac}{star}` does not occur in the source")
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            check_path(tree, target.split("#")[0], base, where, failures, link=True)
        bare = TICKS.sub(" ", line)
        for p in PROSE_PATH.findall(bare):
            check_path(tree, p.rstrip("."), base, where, failures)
    check_notes(tree, prose, rel, failures)


def check_path(tree, path, base, where, failures, link=False):
    if allowed("path", path):
        return
    if re.match(r"(\./)?(build[\w-]*|B)/", path):
        if not check_build_path(tree, path):
            failures.append(f"{where}: '{path}': no such target in the source tree's meson.build")
        return
    if link:
        ok = tree.exists(os.path.normpath(os.path.join(base, path)), None)
    else:
        # A build target by its name (`examples/mnist/mnist`) or a module by its stem
        # (`parallel/comm` for comm.h and comm.cpp) names what is in the tree too.
        ok = tree.exists(path, base) or check_build_path(tree, path) or \
            ("/" in path and "." not in os.path.basename(path) and tree.exists(path + ".*", None))
    if not ok:
        failures.append(f"{where}: path '{path}' does not exist in the source tree")


def check_symbol(tree, name, where, failures):
    if allowed("symbol", name):
        return
    parts = [p.lstrip("~") for p in name.split("::")]
    last, owner = parts[-1], parts[-2]
    files = tree.words.get(last, set())
    if not files:
        failures.append(f"{where}: `{name}`: '{last}' does not occur in the source")
    elif not files & tree.words.get(owner, set()):
        failures.append(f"{where}: `{name}`: no source file names both '{owner}' and '{last}'")


def check_notes(tree, numbered_lines, rel, failures):
    """Notes may wrap lines, so they are matched over the joined text."""
    text, starts = "", []
    for n, line in numbered_lines:
        starts.append((len(text), n))
        text += line + "\n"
    for m in NOTE.finditer(text):
        title = re.sub(r"\s+", " ", m.group(1))
        n = max(line for off, line in starts if off <= m.start())
        where = f"{rel}:{n}"
        stated = tree.notes.get(title)
        if not stated:
            failures.append(f"{where}: Note [{title}] is stated nowhere in the source")
            continue
        after = re.match(r"\s+in\s+`?([\w./-]+)", text[m.end():])
        if after and looks_like_path(after.group(1).rstrip(".")):
            f = after.group(1).rstrip(".")
            if not any(s == f or s.endswith("/" + f) for s in stated):
                failures.append(f"{where}: Note [{title}] is stated in {', '.join(sorted(stated))}"
                                f", not in {f}")


def check_source_notes(tree, failures):
    for p, t in sorted(tree.code.items()):
        if p.startswith("tests/docs/"):  # this checker and its fixtures quote Notes as examples
            continue
        for m in NOTE.finditer(t):
            title = re.sub(r"\s*(//+|#)?\s+", " ", m.group(1)).strip()
            if title not in tree.notes:
                n = t.count("\n", 0, m.start()) + 1
                failures.append(f"{p}:{n}: Note [{title}] is stated nowhere in the source")


def run(source, docs, with_source_notes=True):
    """Returns the failures, each 'file:line: what'."""
    tree = Tree(source)
    programs = Programs(tree)
    failures = []
    for d in docs:
        check_doc(tree, programs, d, failures)
    if with_source_notes:
        check_source_notes(tree, failures)
    return failures
