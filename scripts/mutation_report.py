#!/usr/bin/env python3
"""The mutation report: plant every mutant of the catalogue, one at a time, and
say which instruments catch it.

  python3 scripts/mutation_report.py [--build-dir build/release] [--only ID,ID] [--ci]
                                     [--budget SECONDS] [--json OUT] [--markdown OUT] [--check]

Planting: each mutant is a text patch (scripts/mutation_catalogue.py) applied
to the tracked sources, built incrementally in --build-dir (only the targets of
its instruments), run against the instruments of its area, and reverted with
`git checkout -- FILE`. By default in this checkout (it refuses to start unless
src/, tests/ and apps/ are clean, and reverts on any exit); with --scratch in a
git worktree of HEAD under <build-dir>/mutants with its own build configured
like --build-dir (cold unless ccache holds the objects). First the unmutated
tree must pass every instrument (an instrument that fails without a mutant
catches nothing).

Instruments (a test binary with a gtest filter, fail-fast; the ops checker's
output split by row):
  FD           finite differences: the op checker's vjp rows and contract,
               the whole-model gradient check, the checker's own mutants test
  float=double the op checker's float-against-double rows
  algebra      the op checker's algebraic identities
  composition  the model's loss = the op specs composed by hand
  metamorphic  tests/property (relations and definitional absolutes)
  reference    tests/reference (the independent NumPy reference)
  kernel bits  CPU kernels = spec bit for bit, CPU model = spec model, GEMM, vmath
  unit         the area's own unit/integration tests (trainer, optimizer, step, data, tokenizers, reductions)
  resume       tests/train/resume_state_test (a resumed run's state and metrics)
  regression   a self-corpus entry's own regression test (tests/history and the tests its fix added)
  golden       the golden weight hashes (test_golden) and the reductions' golden values
Start-up gates and live audits run on the GPU: --cuda (on the device) plants each CUDA
kernel mutant of the catalogue (mutation_catalogue.CUDA) by its runtime switch and runs
tests/cuda/mutation_runtime_test.cpp (the gates, then the audits of a micro model's pass).

A mutant is CAUGHT when an instrument other than the golden hashes fails,
GOLDEN-ONLY when only those do, MISSED when none does. The score is
caught / (mutants - equivalent ones), golden-only catches not counted.
--ci plants the mutants with a ci rank (cheap ones: one .cpp each), rank order, within
--budget and exits 0 when each is caught; exit 77 (skip) if the scratch build
alone spends the budget.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import mutation_catalogue  # noqa: E402

FAMILY_GOLDEN = {"gpt2": "*gpt2_micro", "llama": "*llama_micro", "bitnet": "*bitnet_micro"}


def instruments(m):
    """(instrument, target, binary, gtest filter) for a mutant, cheap first."""
    fam = m.get("family")
    golden = FAMILY_GOLDEN.get(fam, "*gpt2_micro")
    op = m.get("op")
    kbits = f"CpuKernelsOp/{op}.*" if op else "*"
    spec = [
        ("FD+float=double+algebra", "test_ops_gradcheck", "tests/ops/test_ops_gradcheck", "*"),
        ("FD", "test_ad_mutants", "tests/ad/test_ad_mutants", "*"),
        ("reference", "test_reference_numpy", "tests/reference/test_reference_numpy", "*"),
        ("metamorphic", "test_property_metamorphic", "tests/property/test_property_metamorphic", "*"),
        ("composition", "test_model_gradcheck", "tests/model/test_model_gradcheck", "ModelSpec.TheLoss*"),
        ("FD", "test_model_gradcheck", "tests/model/test_model_gradcheck", "ModelSpec.EveryParameter*"),
        ("kernel bits", "test_model_cpu_kernels", "tests/model/test_model_cpu_kernels", kbits),
        ("kernel bits", "test_model_cpu", "tests/model/test_model_cpu", "CpuModel.LossAndEvery*"),
        ("kernel bits", "test_cpu_gemm", "tests/cpu/test_cpu_gemm", "*"),
        ("kernel bits", "test_model_cpu_vmath", "tests/model/test_model_cpu_vmath", "*"),
        ("golden", "test_golden", "tests/train/test_golden", f"Micro/GoldenRun.{golden}"),
    ]
    train = [
        ("unit", "test_optim", "tests/train/test_optim", "*"),
        ("unit", "test_step_pipeline", "tests/train/test_step_pipeline", "*"),
        ("unit", "test_checkpoint", "tests/train/test_checkpoint", "*"),
        ("unit", "test_train_config", "tests/train/test_train_config", "*"),
        ("unit", "test_trainer", "tests/train/test_trainer", "*"),
        ("unit", "test_train_wiring", "tests/train/test_train_wiring", "*"),
        ("resume", "test_resume_state", "tests/train/test_resume_state", "*"),
        ("golden", "test_golden", "tests/train/test_golden", f"Micro/GoldenRun.{golden}"),
    ]
    data = [
        ("unit", "test_shards", "tests/data/test_shards", "*"),
        ("unit", "test_corpus", "tests/train/test_corpus", "*"),
        ("unit", "test_trainer", "tests/train/test_trainer", "*"),
        ("unit", "test_train_wiring", "tests/train/test_train_wiring", "*"),
        ("golden", "test_golden", "tests/train/test_golden", "Micro/GoldenRun.*gpt2_micro"),
    ]
    tok = [
        ("unit", "test_tok_train", "tests/tok/test_tok_train", "*"),
        ("unit", "test_tok_vocab", "tests/tok/test_tok_vocab", "*"),
        ("unit", "test_tok_pretokenize", "tests/tok/test_tok_pretokenize", "*"),
        ("golden", "test_golden", "tests/train/test_golden", "Micro/GoldenRun.*gpt2_micro"),
    ]
    reduce = [
        ("unit", "reduce_test", "tests/reduce/reduce_test", "-ReduceGolden.*"),
        ("FD+float=double+algebra", "test_ops_gradcheck", "tests/ops/test_ops_gradcheck", "*"),
        ("metamorphic", "test_property_metamorphic", "tests/property/test_property_metamorphic", "*"),
        ("reference", "test_reference_numpy", "tests/reference/test_reference_numpy", "*"),
        ("kernel bits", "test_model_cpu_kernels", "tests/model/test_model_cpu_kernels", "*"),
        ("golden", "reduce_test", "tests/reduce/reduce_test", "ReduceGolden.*"),
        ("golden", "test_golden", "tests/train/test_golden", "Micro/GoldenRun.*gpt2_micro"),
    ]
    suites = {"model": spec, "train": train, "data": data, "tok": tok, "reduce": reduce, "none": []}
    own = [tuple(t) + ({},) * (5 - len(t)) for t in m.get("tests", [])]
    return own + [t + ({},) for t in suites[m["suite"]]]


def classify_ops_output(out):
    """The op checker's failing rows -> instruments."""
    got = set()
    for line in out.splitlines():
        if not re.search(r"\bFAIL\b", line):
            continue
        if "finite differences" in line or "backward contract" in line or "surrogate" in line:
            got.add("FD")
        elif "float = double" in line:
            got.add("float=double")
        elif re.match(r"^\S+\s{2,}", line):
            got.add("algebra")
    return got or {"algebra"}  # a failing gtest without a table row: an op's own check


def sh(cmd, cwd, timeout=None, env=None):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            time.time() - t0


class Scratch:
    def __init__(self, build_dir, log, in_place, ci=False, cuda_off=False):
        self.log = log
        self.ci = ci
        self.cuda_off = cuda_off
        self.src_build = os.path.abspath(build_dir)
        self.in_place = in_place
        self.base = os.path.join(self.src_build, "mutants")
        self.tree = ROOT if in_place else os.path.join(self.base, "tree")
        self.build = self.src_build if in_place else os.path.join(self.tree, "build", "m-cpu" if cuda_off else "m")
        self.env = dict(os.environ, OMP_WAIT_POLICY="passive", GTEST_FAIL_FAST="1")

    def prepare(self):
        head = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True).strip()
        if self.in_place:
            dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "tests", "apps", "CMakeLists.txt"],
                                   cwd=ROOT).returncode
            if dirty and self.ci:
                print("skip: src/, tests/ or apps/ has uncommitted changes (the mutants are planted in place)")
                sys.exit(77)
            if dirty:
                raise SystemExit("mutation_report: src/, tests/ or apps/ has uncommitted changes; commit them "
                                 "(the mutants are planted and reverted in place) or use --scratch")
            if not os.path.exists(os.path.join(self.build, "build.ninja")):
                raise SystemExit(f"mutation_report: {self.build} is not a configured Ninja build")
            self.log(f"planting in place at {head[:12]}, build {self.build}")
            return head
        if not os.path.isdir(os.path.join(self.tree, ".git")) and not os.path.isfile(os.path.join(self.tree, ".git")):
            os.makedirs(self.base, exist_ok=True)
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
            subprocess.run(["git", "worktree", "add", "--detach", self.tree, head], cwd=ROOT, check=True,
                           capture_output=True)
        subprocess.run(["git", "checkout", "--quiet", "--force", "--detach", head], cwd=self.tree, check=True)
        subprocess.run(["git", "clean", "-fdq", "-e", "build"], cwd=self.tree, check=True)
        opts = self.cache_options()
        if not os.path.exists(os.path.join(self.build, "build.ninja")):
            cmd = f"cmake -S . -B {self.build} -G Ninja {' '.join(opts)}"
            rc, out, _ = sh(cmd, self.tree, env=self.env)
            if rc != 0:
                raise SystemExit(f"mutation_report: configuring the scratch build failed:\n{out}")
        self.log(f"scratch tree {self.tree} at {head[:12]}, build {self.build}")
        return head

    def cache_options(self):
        keep = ("CMAKE_BUILD_TYPE", "LOCKSTEP_CUDA", "LOCKSTEP_WERROR", "CMAKE_CXX_COMPILER_LAUNCHER",
                "CMAKE_CUDA_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER", "CMAKE_CUDA_ARCHITECTURES")
        opts = []
        cache = os.path.join(self.src_build, "CMakeCache.txt")
        if os.path.exists(cache):
            for line in open(cache):
                m = re.match(r"^([A-Z_]+):[A-Z]+=(.*)$", line.strip())
                if m and m.group(1) in keep and m.group(2):
                    opts.append(f"-D{m.group(1)}={m.group(2)}")
        if self.cuda_off:
            # The CPU half needs no CUDA objects; without them a mutant in an op or
            # number header rebuilds ~40% fewer objects (backend/cuda's host files
            # include the op headers too). Its own build: cold unless ccache has it.
            opts = [o for o in opts if not o.startswith("-DLOCKSTEP_CUDA=")] + ["-DLOCKSTEP_CUDA=OFF"]
        return opts

    def has_target(self, target):
        rc, out, _ = sh(f"ninja -C {self.build} -t query {target}", self.tree)
        return rc == 0

    def build_targets(self, targets, timeout):
        # -j 2 on the shared 2-core machine; LOCKSTEP_MUTANT_JOBS on a bigger one (the device host's CPU).
        jobs = os.environ.get("LOCKSTEP_MUTANT_JOBS", "2")
        return sh(f"nice -n 5 cmake --build {self.build} -j {jobs} --target {' '.join(sorted(set(targets)))}", self.tree,
                  timeout=timeout, env=self.env)

    def run(self, binary, gfilter, env=None, timeout=600):
        path = os.path.join(self.build, binary)
        return sh(f"{path} --gtest_filter='{gfilter}'", self.build, timeout=timeout, env=dict(self.env, **(env or {})))

    def apply(self, m):
        path = os.path.join(self.tree, m["file"])
        text = open(path).read()
        n = text.count(m["find"])
        if n != m["count"]:
            raise RuntimeError(f"{m['id']}: '{m['find'][:60]}' occurs {n} times in {m['file']}, expected {m['count']}")
        open(path, "w").write(text.replace(m["find"], m["repl"]))

    def revert(self, m):
        subprocess.run(["git", "checkout", "--quiet", "--", m["file"]], cwd=self.tree, check=True)


def failed_tests(out):
    """The gtest names that failed ("Suite.Name", parameters dropped), in order."""
    names = []
    for line in out.splitlines():
        t = re.match(r"^\[  FAILED  \] ([A-Za-z0-9_]+\.[A-Za-z0-9_]+)", line)
        if t and t.group(1) not in names:
            names.append(t.group(1))
    return names


def run_instruments(s, m, log):
    caught, times, properties = {}, {}, []
    for name, target, binary, gfilter, env in instruments(m):
        if name == "metamorphic":
            env = dict(env, GTEST_FAIL_FAST="0")  # every property: the report names which ones catch it
        rc, out, dt = s.run(binary, gfilter, env)
        times[f"{target}:{gfilter}"] = round(dt, 1)
        if rc == 0:
            continue
        if name == "metamorphic":
            properties = failed_tests(out) or ["?"]
        names = classify_ops_output(out) if name == "FD+float=double+algebra" else {name}
        first = next((l for l in out.splitlines() if "Failure" in l or "FAIL" in l), out.strip()[-200:])
        for n in names:
            caught.setdefault(n, f"{target}: {first.strip()[:160]}")
    if properties:
        caught["metamorphic"] = "+".join(properties)
    return caught, times


def instrument_label(k, caught):
    """An instrument's name in the log; the metamorphic one with the properties that failed."""
    return f"metamorphic[{caught[k]}]" if k == "metamorphic" and caught[k] and "[" not in caught[k] \
        and ":" not in caught[k] else k


# tests/property's tests by a short tag for the table (the summary line names them in full).
PROPERTY_TAGS = {
    "Metamorphic.PermutingBatchRowsPermutesTheOutputsBitForBit": "permute",
    "Metamorphic.AFutureTokenChangesNoEarlierOutput": "causal",
    "Metamorphic.ARowsOutputsDoNotDependOnTheOtherRowsOfItsBatch": "batch-invariant",
    "Metamorphic.TheLossIsTheMeanOfThePositionLossesWithATarget": "loss-mean",
    "Absolute.UniformLogitsGiveLogVocab": "log-V",
    "Absolute.LinearLayersScaleExactlyWithPowersOfTwo": "pow2-scaling",
    "Absolute.AtUnitScalesTheUnitsAreTheExactIntegerDotProduct": "unit-scale",
    "Absolute.SoftmaxRowsSumToOneWithinTheProvenBound": "softmax-sum",
    "Absolute.AttentionOneKeyIsTheValueIdenticalKeysAverageTheValues": "one-key",
    "Absolute.RopeAtPositionOneRotatesPairJByThetaToTheMinusTwoJOverD": "rope-angle",
    "Absolute.TheNormsHonourEps": "norm-eps",
    "Absolute.ActivationsAreTheirPublishedFormulas": "activations",
}


def short_property(name):
    return PROPERTY_TAGS.get(name, name.split(".", 1)[-1])


def verdict(caught, m):
    others = [k for k in caught if k != "golden"]
    if others:
        return "caught"
    if caught:
        return "golden-only"
    return "equivalent" if "equivalent" in m["desc"] else "missed"


ORDER = ["FD", "float=double", "algebra", "composition", "metamorphic", "reference", "kernel bits", "unit",
         "resume", "regression", "golden"]


def markdown(results, head, seconds):
    # The command as it ran (its flags, its LOCKSTEP_MUTANT_JOBS) and the machine's core count, not a fixed line.
    jobs = os.environ.get("LOCKSTEP_MUTANT_JOBS")
    cmd = " ".join(["python3", "scripts/mutation_report.py"] + sys.argv[1:])
    lines = [f"Measured at {head[:12]} ({seconds / 60:.0f} min on {os.cpu_count()} cores): "
             f"`{'LOCKSTEP_MUTANT_JOBS=' + jobs + ' ' if jobs else ''}{cmd}`.", "",
             "| mutant | area | kind | " + " | ".join(ORDER) + " | verdict |",
             "|---|---|---|" + "---|" * len(ORDER) + "---|"]
    for r in results:
        cells = [("x" if k != "metamorphic" or ":" in r["caught"][k] or not r["caught"][k]
                  else ", ".join(short_property(p) for p in r["caught"][k].split("+"))) if k in r["caught"] else ""
                 for k in ORDER]
        lines.append(f"| `{r['id']}` | {r['area']} | {'fwd-consistent' if r['kind'] != 'local' else 'local'} | "
                     + " | ".join(cells) + f" | {r['verdict']} |")
    counted = [r for r in results if r["verdict"] not in ("equivalent", "does not compile")]
    caught = sum(r["verdict"] == "caught" for r in counted)
    golden = sum(r["verdict"] == "golden-only" for r in counted)
    missed = [r["id"] for r in counted if r["verdict"] == "missed"]
    fc = [r for r in counted if r["kind"] != "local"]
    lines += ["", f"Score: {caught}/{len(counted)} caught by an instrument other than the golden hashes "
              f"({100.0 * caught / max(1, len(counted)):.1f}%); golden-only {golden}; missed {len(missed)}"
              f"{' (' + ', '.join(missed) + ')' if missed else ''}; equivalent (must survive) "
              f"{sum(r['verdict'] == 'equivalent' for r in results)}. Forward-consistent: "
              f"{sum(r['verdict'] == 'caught' for r in fc)}/{len(fc)} caught by something other than a golden hash."]
    by_property = {}
    for r in results:
        v = r["caught"].get("metamorphic", "")
        if v and ":" not in v:
            for p in v.split("+"):
                by_property.setdefault(p, []).append(r["id"])
    if by_property:
        lines += ["", "Per property (tests/property, run in full for every mutant; the table's tag first): " + "; ".join(
            f"{short_property(p)} = `{p}`: {', '.join(ids)}" for p, ids in sorted(by_property.items())) + "."]
    return "\n".join(lines)


def table_from_logs(paths, out_path):
    by_id = {m["id"]: m for m in mutation_catalogue.M}
    got, heads, seconds = {}, [], 0.0
    line_re = re.compile(r"^\[\s*(\d+)s\] (\S+)\s+(caught|golden-only|missed|equivalent|does not compile)\s+(.*?)\s+\(build")
    for p in paths:
        last = 0.0
        for line in open(p):
            h = re.search(r"planting in place at ([0-9a-f]+)|scratch tree .* at ([0-9a-f]+)", line)
            if h:
                heads.append(h.group(1) or h.group(2))
            m = line_re.match(line)
            if m and m.group(2) in by_id:
                last = float(m.group(1))
                names = [] if m.group(4) == "-" else [x.strip() for x in m.group(4).split(",")]
                caught = {}
                for n in names:
                    pm = re.match(r"^metamorphic\[(.*)\]$", n)
                    caught["metamorphic" if pm else n] = pm.group(1) if pm else ""
                got[m.group(2)] = dict(by_id[m.group(2)], caught=caught, verdict=m.group(3))
        seconds += last
    results = [got[m["id"]] for m in mutation_catalogue.M if m["id"] in got]
    table = markdown(results, "+".join(dict.fromkeys(heads)) or "?", seconds)
    not_run = [m["id"] for m in mutation_catalogue.M if m["id"] not in got]
    if not_run:
        table += f"\n\nNot planted in these runs ({len(not_run)}): " + ", ".join(f"`{i}`" for i in not_run) + "."
    print(table)
    if out_path:
        with open(out_path, "w") as f:
            f.write(table + "\n")
    return 0


def existing_catalogues(s):
    """The catalogues planted in-process by their own tests: the wrong backwards of
    ad/mutants.cpp (test_ad_mutants: finite differences) and the CUDA kernel mutants
    of backend/cuda/mutant.hpp (test_cuda_gate_mutants: the start-up gates; on a GPU)."""
    lines = ["", "Planted in-process by their own tests (not re-planted as patches):", ""]
    rc, out, _ = s.run("tests/ad/test_ad_mutants", "*", {"GTEST_FAIL_FAST": "0"})
    rows = [l for l in out.splitlines() if re.match(r"^\S+\s{2,}\S", l) and ("REJECTED" in l or "accepted" in l)]
    rejected = sum("REJECTED" in l for l in rows)
    lines.append(f"- ad/mutants.cpp, wrong backwards against finite differences (test_ad_mutants, rc {rc}): "
                 f"{rejected} rejected, {len(rows) - rejected} accepted (correct backwards, controls, equivalents), "
                 f"{'all as expected' if rc == 0 else 'NOT as expected'}.")
    gpu = os.path.join(s.build, "tests/cuda/test_cuda_gate_mutants")
    if os.path.exists(gpu):
        rc, out, _ = s.run("tests/cuda/test_cuda_gate_mutants", "*", {"GTEST_FAIL_FAST": "0"})
        got = re.findall(r"mutant '([^']+)': (?:passes all \d+ op gate cases; )?rejected by (\d+) of (\d+)", out)
        skipped = "SKIPPED" in out and not got
        if skipped:
            lines.append(f"- the {len(mutation_catalogue.CUDA)} CUDA kernel mutants (mutation_catalogue.CUDA): no GPU "
                         "here; on the device: `python3 scripts/mutation_report.py --cuda --build-dir /tmp/mb` "
                         "(start-up gates and live audits).")
        else:
            lines.append(f"- backend/cuda/mutant.hpp kernel mutants against the start-up gates (rc {rc}): "
                         + ", ".join(f"`{n}` {r}/{t}" for n, r, t in got) + ".")
    return "\n".join(lines)


def cuda_report(a, log):
    """The CUDA half, on the device: every CUDA kernel mutant of the catalogue
    (mutation_catalogue.CUDA) planted by its runtime switch (backend/cuda/mutant.hpp:
    one build, no recompiling per mutant) against the start-up gates and the live
    audits (tests/cuda/mutation_runtime_test.cpp). Configures --build-dir with
    -DLOCKSTEP_CUDA=ON when it is not a configured build (ccache when on PATH),
    builds the one test binary with every core, runs it, prints the table.
    Exit 0 only when every CUDA mutant is caught and the clean kernels pass."""
    build = os.path.abspath(a.build_dir)
    env = dict(os.environ, GTEST_FAIL_FAST="0")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        launch = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"] \
            if shutil.which("ccache") else []
        cmd = (f"cmake -S {ROOT} -B {build} -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_CUDA=ON "
               f"-DLOCKSTEP_WERROR=ON {' '.join(launch)}")
        rc, out, dt = sh(cmd, ROOT, env=env)
        log(f"configure: rc {rc}, {dt:.0f}s")
        if rc != 0:
            print(out[-4000:])
            return 1
    jobs = a.jobs or os.cpu_count() or 2
    rc, out, dt = sh(f"cmake --build {build} -j {jobs} --target test_cuda_mutation_runtime", ROOT, env=env)
    log(f"build of test_cuda_mutation_runtime (-j {jobs}): rc {rc}, {dt:.0f}s")
    if rc != 0:
        print(out[-4000:])
        return 1
    binary = os.path.join(build, "tests/cuda/test_cuda_mutation_runtime")
    rc, out, dt = sh(binary, build, env=env)
    log(f"test_cuda_mutation_runtime: rc {rc}, {dt:.0f}s")
    if "SKIPPED" in out and "MUTANT " not in out:
        print(out[-2000:])
        print("no GPU here: run this mode on the device")
        return 77
    got = {}
    for line in out.splitlines():
        m = re.match(r"^MUTANT (\S+) gates (\d+)/(\d+) audits (\S+) first: ?(.*)$", line)
        if m:
            got[m.group(1)] = dict(rejected=int(m.group(2)), outcomes=int(m.group(3)), audits=m.group(4),
                                   first=m.group(5))
    lines = ["| mutant | kernel bug | start-up gates | live audits | verdict |", "|---|---|---|---|---|"]
    missed = []
    for c in mutation_catalogue.CUDA:
        g = got.get(c["id"])
        if g is None:
            lines.append(f"| `{c['id']}` | {c['desc']} | not run | not run | not measured |")
            missed.append(c["id"])
            continue
        audits = g["audits"]
        caught_by_audit = audits != "-" and int(audits.split("/")[0]) > 0
        gates = f"x ({g['rejected']} of {g['outcomes']})" if g["rejected"] else f"- (0 of {g['outcomes']})"
        audit_cell = "not audited" if audits == "-" else (f"x ({audits.replace('/', ' mismatches of ')} launches)"
                                                          if caught_by_audit else f"- (0 of {audits.split('/')[1]} launches)")
        caught = g["rejected"] > 0 or caught_by_audit
        if not caught:
            missed.append(c["id"])
        lines.append(f"| `{c['id']}` | {c['desc']} | {gates} | {audit_cell} | {'caught' if caught else 'MISSED'} |")
    n = len(mutation_catalogue.CUDA)
    lines += ["", f"CUDA kernel mutants caught at run time: {n - len(missed)}/{n}"
              f"{' (missed or not run: ' + ', '.join(missed) + ')' if missed else ''}; "
              f"test_cuda_mutation_runtime rc {rc}."]
    table = "\n".join(lines)
    print(table)
    if rc != 0:
        fails = [l for l in out.splitlines() if "Failure" in l or "[  FAILED" in l or "error" in l.lower()]
        print("\n".join(fails[:20]))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n")
    return 0 if rc == 0 and not missed else 1


def main():
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # revert the planted mutant (finally) on kill
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build/release", help="a configured build whose CMake options to copy")
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--ci", action="store_true", help="the ci=True mutants only, within --budget")
    ap.add_argument("--budget", type=float, default=0, help="seconds; 0: no limit")
    ap.add_argument("--json", default="", help="write the results as JSON")
    ap.add_argument("--markdown", default="", help="write the table as Markdown")
    ap.add_argument("--check", action="store_true", help="only check that every patch applies to HEAD")
    ap.add_argument("--existing-only", action="store_true",
                    help="only the in-process catalogues (ad/mutants.cpp; the CUDA mutants where a GPU is)")
    ap.add_argument("--table-from-log", nargs="+", default=[],
                    help="the table from the per-mutant lines of earlier runs' output (later lines win)")
    ap.add_argument("--scratch", action="store_true", help="plant in a worktree of HEAD, not in this checkout")
    ap.add_argument("--cuda-off", action="store_true",
                    help="--scratch with its build configured -DLOCKSTEP_CUDA=OFF: the CPU half without the CUDA "
                         "objects a header mutant would rebuild (cold the first time unless ccache has it)")
    ap.add_argument("--skip-baseline", action="store_true", help="trust that the unmutated tree passes")
    ap.add_argument("--cuda", action="store_true",
                    help="the CUDA half, on the device: the CUDA kernel mutants against the start-up gates and "
                         "the live audits (configures --build-dir with -DLOCKSTEP_CUDA=ON if needed)")
    ap.add_argument("--jobs", type=int, default=0, help="--cuda: build jobs (default: every core)")
    a = ap.parse_args()
    start = time.time()

    def log(msg):
        print(f"[{time.time() - start:6.0f}s] {msg}", flush=True)

    # Cheapest first (a .cpp with few dependents, then the engine's headers, then
    # the op and number headers every kernel set and the CUDA objects include),
    # so that a --budget or an interrupted run has measured the most mutants; --only: the order given.
    def cost(m):
        f = m["file"]
        if f.endswith(".cpp"):
            return 0
        if f.startswith("src/lockstep/model/"):
            return 1
        return 2
    cat = sorted(mutation_catalogue.M, key=cost)
    if a.only:
        want = set(a.only.split(","))
        unknown = want - {m["id"] for m in cat}
        if unknown:
            raise SystemExit(f"mutation_report: unknown mutant ids: {', '.join(sorted(unknown))}")
        order = {i: n for n, i in enumerate(a.only.split(","))}
        cat = sorted((m for m in cat if m["id"] in want), key=lambda m: order[m["id"]])
    if a.ci:
        # ci holds a rank (1 first): under a --budget the sample keeps its most telling mutants.
        cat = sorted((m for m in cat if m["ci"]), key=lambda m: int(m["ci"]))
    if a.check:
        bad = 0
        for m in cat:
            n = open(os.path.join(ROOT, m["file"])).read().count(m["find"])
            if n != m["count"]:
                print(f"{m['id']}: occurs {n} times in {m['file']}, expected {m['count']}")
                bad += 1
        print(f"{len(cat)} mutants, {bad} do not apply")
        return 1 if bad else 0

    if a.cuda:
        return cuda_report(a, log)
    if a.table_from_log:
        return table_from_logs(a.table_from_log, a.markdown)
    s = Scratch(a.build_dir, log, not (a.scratch or a.cuda_off), a.ci, a.cuda_off)
    if a.existing_only:
        s.build = s.src_build
        print(existing_catalogues(s))
        return 0
    head = s.prepare()
    if a.cuda_off:
        # A mutant whose own instruments are CUDA host tests (history-gate-stub) has none here.
        absent = {i[1] for m in cat for i in instruments(m) if not s.has_target(i[1])}
        skipped = [m["id"] for m in cat if any(i[1] in absent for i in instruments(m))]
        if skipped:
            log(f"not in a CUDA-off build (targets {', '.join(sorted(absent))}): {', '.join(skipped)}")
        cat = [m for m in cat if m["id"] not in skipped]
    targets = sorted({i[1] for m in cat for i in instruments(m)})
    remaining = lambda: None if a.budget <= 0 else max(1.0, a.budget - (time.time() - start))  # noqa: E731
    rc, out, dt = s.build_targets(targets, remaining())
    log(f"baseline build of {len(targets)} targets: rc {rc}, {dt:.0f}s")
    if rc != 0:
        if rc == 124 and a.ci:
            print("skip: the scratch build spent the budget")
            return 77
        print(out[-4000:])
        return 1
    if not a.skip_baseline:
        seen = set()
        for m in cat:
            for name, target, binary, gfilter, env in instruments(m):
                key = (binary, gfilter, tuple(sorted(env.items())))
                if key in seen:
                    continue
                seen.add(key)
                rc, out, dt = s.run(binary, gfilter, env)
                if rc != 0:
                    print(out[-3000:])
                    raise SystemExit(f"mutation_report: {target} --gtest_filter={gfilter} fails on the unmutated tree")
        log(f"baseline: {len(seen)} instrument runs pass on the unmutated tree")

    results = []
    planting_started = time.time()
    for m in cat:
        # A mutant is started only if one more, at the mean cost so far, fits the budget.
        mean = (time.time() - planting_started) / len(results) if results else 0.0
        if a.budget > 0 and time.time() - start + mean > a.budget:
            log(f"budget: {m['id']} and later not planted (one more would end at "
                f"{time.time() - start + mean:.0f}s of {a.budget:.0f}s)")
            break
        s.apply(m)
        try:
            mt = sorted({i[1] for i in instruments(m)})
            rc, out, dt = s.build_targets(mt, None)
            if rc != 0:
                err = next((l for l in out.splitlines() if "error" in l), out[-300:])
                r = dict(m, caught={}, verdict="does not compile", note=err[:200], build_s=round(dt))
            else:
                caught, times = run_instruments(s, m, log)
                r = dict(m, caught=caught, verdict=verdict(caught, m), build_s=round(dt), times=times)
        finally:
            s.revert(m)
        results.append(r)
        log(f"{m['id']:32s} {r['verdict']:16s} {', '.join(instrument_label(k, r['caught']) for k in ORDER if k in r['caught']) or '-'}"
            f"  (build {r['build_s']}s)")
    s.build_targets(targets, None)  # leave the scratch build unmutated

    table = markdown(results, head, time.time() - start) + "\n" + existing_catalogues(s)
    print(table)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n")
    bad = [r["id"] for r in results if r["verdict"] in ("missed", "does not compile")]
    if a.ci:
        bad += [r["id"] for r in results if r["verdict"] == "golden-only"]
    if bad:
        print(f"not caught: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
