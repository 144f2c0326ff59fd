#!/usr/bin/env python3
"""The include-direction check: every file under src/lockstep/ and apps/ may
include (and forward-declare into) only the folders its layer may see.

The rules are not written here. They are the table in docs/ARCHITECTURE.md,
section "Layers", between the markers

    <!-- layers:begin ... -->   and   <!-- layers:end -->

one row per folder: | layer | `folder/` | `namespace` | may include | what |.
"may include" names folders directly; a folder may also see everything those
folders may see (the closure), so each row lists only its nearest neighbours
below. The table itself is checked: a folder may name only folders of a lower
layer or of its own (sideways, as ops/ and ad/ do), and every folder that holds
a file must have a row.

Two kinds of edge are found, each reported as FILE:LINE: FROM -> TO:
  - #include "lockstep/<folder>/..." (or <...>) of a folder FROM may not see;
  - namespace lockstep::<ns> { opened by a file of FROM, where <ns> is the
    namespace of a folder TO that FROM may not see: a forward declaration into
    another layer is an include by other means.

  scripts/check_layers.py [--root DIR]   check the tree at DIR (default: this checkout)
  scripts/check_layers.py --no-exceptions   ... and report the known exceptions too
  scripts/check_layers.py --self-test    plant back-edges in small trees and
                                         require that each is reported
Exit status 0: no forbidden edge; 1: forbidden edges (listed); 2: a bad table.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Known exceptions: (file, the folder it may reach, why). Empty: the last ones
# (the optimizer's scalars and element update, reached up for in train/) went
# with the optimizer's move below the backends (ops/optim.hpp). An entry that no
# longer matches any edge is reported, so that the list can only shrink.
KNOWN_EXCEPTIONS: list[tuple[str, str, str]] = []

SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh", ".in"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]lockstep/([^">]+)[">]')
QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
NAMESPACE = re.compile(r'^\s*(?:inline\s+)?namespace\s+lockstep::(\w+)')
BEGIN, END = "<!-- layers:begin", "<!-- layers:end"
TICKED = re.compile(r"`([^`]+)`")


class TableError(Exception):
    pass


@dataclass
class Row:
    folder: str
    layer: int
    namespaces: list[str]
    direct: list[str]
    line: int
    sees: set[str] = field(default_factory=set)  # the closure of direct


def folder_key(name: str) -> str:
    """The table key of a file, from its path under src/lockstep/ (or of an
    included 'lockstep/...' path): 'num', 'backend/cpu', 'top' for the
    top-level files (version.hpp, build_info.hpp)."""
    parts = name.split("/")
    if len(parts) == 1:
        return "top"
    if parts[0] == "backend" and len(parts) > 2:
        return "backend/" + parts[1]
    return parts[0]


def read_table(doc: Path) -> dict[str, Row]:
    if not doc.is_file():
        raise TableError(f"{doc}: not found (the layer table lives there)")
    lines = doc.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip().startswith(BEGIN))
        stop = next(i for i, l in enumerate(lines) if i > start and l.strip().startswith(END))
    except StopIteration:
        raise TableError(f"{doc}: no '{BEGIN} ... -->' / '{END} -->' markers around the layer table") from None
    rows: dict[str, Row] = {}
    for i in range(start + 1, stop):
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0] or cells[0] == "layer" or set(cells[0]) <= set("-: "):
            continue
        where = f"{doc}:{i + 1}"
        try:
            layer = int(cells[0])
        except ValueError:
            raise TableError(f"{where}: the layer column must be a number, got '{cells[0]}'") from None
        folder = TICKED.findall(cells[1])
        if not folder:
            raise TableError(f"{where}: the folder column needs the folder in backticks")
        key = folder[0].rstrip("/")
        if key in rows:
            raise TableError(f"{where}: '{key}' has a second row (first on line {rows[key].line})")
        namespaces = [n.removeprefix("lockstep::").split("::")[0] for n in TICKED.findall(cells[2])]
        direct = [d.rstrip("/") for d in TICKED.findall(cells[3])]
        rows[key] = Row(key, layer, [n for n in namespaces if n != "lockstep"], direct, i + 1)
    if not rows:
        raise TableError(f"{doc}: no rows between the layer markers")
    for r in rows.values():
        for d in r.direct:
            if d not in rows:
                raise TableError(f"{doc}:{r.line}: '{r.folder}' may include '{d}', which has no row")
            if rows[d].layer > r.layer:
                raise TableError(f"{doc}:{r.line}: '{r.folder}' (layer {r.layer}) may include '{d}' "
                                 f"(layer {rows[d].layer}): arrows point down, never up")
    for r in rows.values():  # closure: what the folders it names may see
        todo, seen = list(r.direct), set()
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(rows[d].direct)
        r.sees = seen - {r.folder}
    owners: dict[str, str] = {}
    for r in rows.values():
        for n in r.namespaces:
            if n in owners:
                raise TableError(f"{doc}:{r.line}: namespace lockstep::{n} is claimed by '{owners[n]}' and '{r.folder}'")
            owners[n] = r.folder
    return rows


def sources(root: Path):
    """(path relative to root, table key) of every source file checked."""
    for base, prefix in ((root / "src" / "lockstep", None), (root / "apps", "apps")):
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for f in sorted(filenames):
                p = Path(dirpath) / f
                if p.suffix not in SOURCE_SUFFIXES:
                    continue
                key = prefix or folder_key(p.relative_to(base).as_posix())
                yield p.relative_to(root).as_posix(), key, p


def check(root: Path, exceptions=KNOWN_EXCEPTIONS) -> tuple[list[str], list[str]]:
    """Returns (forbidden edges, notes about the exception list)."""
    rows = read_table(root / "docs" / "ARCHITECTURE.md")
    ns_owner = {n: r.folder for r in rows.values() for n in r.namespaces}
    excused = {(f, to): why for f, to, why in exceptions}
    used: set[tuple[str, str]] = set()
    problems: list[str] = []
    missing_rows: dict[str, str] = {}
    for rel, key, path in sources(root):
        if key not in rows:
            missing_rows.setdefault(key, rel)
            continue
        row = rows[key]
        for n, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INCLUDE.match(text)
            if m:
                to, what = folder_key(m.group(1)), f'#include "lockstep/{m.group(1)}"'
                if to not in rows:
                    problems.append(f"{rel}:{n}: {what}: folder '{to}' has no row in the layer table")
                    continue
            elif (q := QUOTED.match(text)) and ("/" in q.group(1) or "\\" in q.group(1)):
                # A relative path would reach another folder unseen: only a
                # file of the same directory may be included by its bare name.
                problems.append(f'{rel}:{n}: #include "{q.group(1)}": a relative include across folders; '
                                f'write "lockstep/<folder>/..." so that the layer check sees it')
                continue
            else:
                m = NAMESPACE.match(text)
                if not m or m.group(1) not in ns_owner:
                    continue
                to = ns_owner[m.group(1)]
                what = f"namespace lockstep::{m.group(1)} {{ (a declaration into {to}/)"
            if to == key or to in row.sees:
                continue
            if (rel, to) in excused:
                used.add((rel, to))
                continue
            sees = f"may see only {', '.join(sorted(row.sees))}" if row.sees else "may see no other folder"
            problems.append(f"{rel}:{n}: {key} -> {to}: {what}; {key}/ {sees}")
    for key, rel in sorted(missing_rows.items()):
        problems.append(f"{rel}: folder '{key}' has no row in the layer table (docs/ARCHITECTURE.md, Layers)")
    notes = [f"known exception no longer needed, remove it from KNOWN_EXCEPTIONS: {f} -> {to} ({why})"
             for (f, to), why in excused.items() if (f, to) not in used]
    return problems, notes


def run(root: Path, exceptions=KNOWN_EXCEPTIONS, out=sys.stdout) -> int:
    try:
        problems, notes = check(root, exceptions)
    except TableError as e:
        print(f"check_layers: bad layer table: {e}", file=out)
        return 2
    for p in problems:
        print(p, file=out)
    for n in notes:
        print(n, file=out)
    if problems or notes:
        print(f"check_layers: {len(problems)} forbidden edge(s), {len(notes)} stale exception(s) "
              f"(allowed directions: docs/ARCHITECTURE.md, Layers)", file=out)
        return 1
    print(f"check_layers: no forbidden include or declaration under {root}/src/lockstep and apps "
          f"({len(exceptions)} known exception(s))", file=out)
    return 0


# --- the self-test: small trees with planted faults ---------------------------
SELF_TEST_TABLE = """# x
<!-- layers:begin (read by scripts/check_layers.py) -->
| layer | folder | namespace | may include | what |
|---|---|---|---|---|
| 0 | `num/` | `lockstep::num` | | |
| 1 | `ops/` | `lockstep::ops` | `num/` `ad/` | |
| 1 | `ad/` | `lockstep::ad` | `ops/` | |
| 2 | `backend/cpu/` | `lockstep::cpu` | `ops/` | |
| 2 | `io/` | `lockstep::io` | `num/` | |
| 3 | `model/` | `lockstep::model` | `backend/cpu/` | |
| 4 | `train/` | `lockstep::train` | `model/` | |
| 5 | `apps/` | | `train/` | |
<!-- layers:end -->
"""

CLEAN_TREE = {
    "src/lockstep/num/fp.hpp": "#pragma once\n",
    "src/lockstep/ops/op.hpp": '#include "lockstep/num/fp.hpp"\n#include "lockstep/ad/check.hpp"\n',
    "src/lockstep/ad/check.hpp": '#include "lockstep/ops/op.hpp"\n',
    "src/lockstep/backend/cpu/ops.hpp": '#include "lockstep/ops/op.hpp"\n#include "lockstep/num/fp.hpp"\n',
    "src/lockstep/model/model.hpp": '#include <lockstep/backend/cpu/ops.hpp>\nnamespace lockstep::cpu {\n}\n',
    "src/lockstep/train/run.cpp": '#include "lockstep/model/model.hpp"\n#include "lockstep/num/fp.hpp"\n',
    "apps/lockstep/main.cpp": '#include "lockstep/train/run.hpp"\n',
}

# Each planted fault: the files changed, and what the report must say.
PLANTED = [
    ("a backend includes the model",
     {"src/lockstep/backend/cpu/ops.hpp": '#include "lockstep/ops/op.hpp"\n  #  include "lockstep/model/aux.hpp"\n'},
     "src/lockstep/backend/cpu/ops.hpp:2: backend/cpu -> model"),
    ("the model includes train through angle brackets",
     {"src/lockstep/model/model.hpp": "#include <lockstep/train/optim.hpp>\n"},
     "src/lockstep/model/model.hpp:1: model -> train"),
    ("a forward declaration into a higher layer",
     {"src/lockstep/model/model.hpp": "namespace lockstep::train {\nstruct AdamWScalars;\n}\n"},
     "src/lockstep/model/model.hpp:1: model -> train: namespace lockstep::train"),
    ("the lowest layer includes a sibling above it",
     {"src/lockstep/num/fp.hpp": '#pragma once\n#include "lockstep/ops/op.hpp"\n'},
     "src/lockstep/num/fp.hpp:2: num -> ops"),
    ("a relative include into another folder",
     {"src/lockstep/backend/cpu/ops.hpp": '#include "ops_local.hpp"\n#include "../../model/model.hpp"\n'},
     'src/lockstep/backend/cpu/ops.hpp:2: #include "../../model/model.hpp": a relative include'),
    ("a new folder without a row",
     {"src/lockstep/optim/adamw.hpp": "#pragma once\n"},
     "folder 'optim' has no row"),
    ("an include of a folder without a row",
     {"src/lockstep/train/run.cpp": '#include "lockstep/nowhere/x.hpp"\n'},
     "folder 'nowhere' has no row"),
    ("a folder of the same layer not named",
     {"src/lockstep/io/file.hpp": "#pragma once\n",
      "src/lockstep/backend/cpu/ops.hpp": '#include "lockstep/io/file.hpp"\n'},
     "src/lockstep/backend/cpu/ops.hpp:1: backend/cpu -> io"),
    ("a lower layer not reachable from the folders named",
     {"src/lockstep/io/file.hpp": "#pragma once\n",
      "src/lockstep/model/model.hpp": '#include "lockstep/io/file.hpp"\n'},
     "src/lockstep/model/model.hpp:1: model -> io"),
]

BAD_TABLES = [
    ("an upward arrow in the table", ("| 0 | `num/` | `lockstep::num` | |", "| 0 | `num/` | `lockstep::num` | `ops/` |"),
     "arrows point down"),
    ("a duplicated row", ("| 4 | `train/`", "| 3 | `model/` | | | |\n| 4 | `train/`"), "second row"),
    ("an unknown folder named", ("| 5 | `apps/` | | `train/` |", "| 5 | `apps/` | | `infer/` |"), "no row"),
]


def write_tree(root: Path, files: dict[str, str], table: str) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "ARCHITECTURE.md").write_text(table, encoding="utf-8")


def self_test() -> int:
    failures = 0
    with tempfile.TemporaryDirectory(prefix="check_layers_") as tmp:
        def tree(name, files, table=SELF_TEST_TABLE):
            root = Path(tmp) / name
            write_tree(root, {**CLEAN_TREE, **files}, table)
            return root

        problems, notes = check(tree("clean", {}), exceptions=[])
        if problems or notes:
            print("self-test FAILED: the clean tree is refused:\n  " + "\n  ".join(problems + notes))
            failures += 1
        for i, (what, files, expect) in enumerate(PLANTED):
            problems, _ = check(tree(f"planted{i}", files), exceptions=[])
            if not any(expect in p for p in problems):
                print(f"self-test FAILED: {what}: no report containing '{expect}'; got {problems}")
                failures += 1
            else:
                print(f"self-test: {what}: reported ({next(p for p in problems if expect in p)})")
        # An exception excuses exactly its edge, and a stale one is reported.
        root = tree("excused", PLANTED[1][1])
        problems, notes = check(root, exceptions=[("src/lockstep/model/model.hpp", "train", "planted")])
        stale_problems, stale = check(tree("stale", {}), exceptions=[("src/lockstep/model/model.hpp", "train", "x")])
        if problems or notes or stale_problems or len(stale) != 1:
            print(f"self-test FAILED: exceptions: {problems} {notes} {stale_problems} {stale}")
            failures += 1
        else:
            print("self-test: a known exception excuses its edge; a stale one is reported")
        for i, (what, (old, new), expect) in enumerate(BAD_TABLES):
            assert old in SELF_TEST_TABLE, old
            try:
                check(tree(f"table{i}", {}, SELF_TEST_TABLE.replace(old, new, 1)), exceptions=[])
                print(f"self-test FAILED: {what}: the table was accepted")
                failures += 1
            except TableError as e:
                if expect not in str(e):
                    print(f"self-test FAILED: {what}: '{e}' does not say '{expect}'")
                    failures += 1
                else:
                    print(f"self-test: {what}: refused ({e})")
    print(f"check_layers self-test: {'FAILED' if failures else 'passed'} "
          f"({len(PLANTED)} planted edges, {len(BAD_TABLES)} bad tables, the exception list)")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--no-exceptions", action="store_true",
                    help="ignore KNOWN_EXCEPTIONS: list every edge the optimizer move has to remove")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    return run(a.root.resolve(), exceptions=[] if a.no_exceptions else KNOWN_EXCEPTIONS)


if __name__ == "__main__":
    sys.exit(main())
