#!/usr/bin/env python3
"""Runs every randomized test many times, each with a fresh LOCKSTEP_SEED.

A randomized test draws new inputs on every run (ad::seed_from_env), so one
that fails for one input in 30 passes most CI runs and then costs a landing.
This runner (the ctest `repeat_randomized_tests`, label `slow`) finds such a
test first: it runs each one --runs times with fresh seeds, within a time
budget, and prints every failing seed with the command that reproduces it.

  repeat_seeds.py [--runs N] [--budget S] [--jobs J] [--min-runs M] --spec NAME EXE FILTER [--spec ...]

Each --spec is one gtest binary and the filter of its randomized tests
(tests/CMakeLists.txt collects them: lockstep_test's RANDOMIZED, or every
binary whose sources call seed_from_env). The budget is kept by measuring one
run of each spec first. The cheapest specs whose --runs runs fit are "cheap";
the others are scaled down to --min-runs and share the time left over. Runs
then go every spec to --min-runs, the cheap ones to --runs, the dear ones as
far as the budget allows (up to --runs); no run starts that its spec's mean
would carry past the budget, so a machine slower than the first runs showed
shortens the dear specs first. The plan, the reason for every scaled-down
spec and the runs done are printed per spec.

Fails when a run fails (or hangs) -- reporting its seed and how to reproduce
it -- or when a spec's output does not show the seed it was given: that binary
ignores LOCKSTEP_SEED, or its filter matches no test, and the spec repeats
nothing.
"""
import argparse
import os
import secrets
import subprocess
import sys
import threading
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--runs", type=int, default=100, help="runs per spec with fresh seeds (default 100)")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all runs (default 420)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--min-runs", type=int, default=3, help="runs of every spec before the cheap ones' rest (default 3)")
    ap.add_argument("--spec", nargs=3, action="append", metavar=("NAME", "EXE", "FILTER"), required=True)
    a = ap.parse_args()
    if a.runs < 1 or a.budget <= 0 or a.jobs < 1 or a.min_runs < 1:
        ap.error("--runs, --budget, --jobs and --min-runs must be positive")
    a.min_runs = min(a.min_runs, a.runs)
    return a


class Spec:
    def __init__(self, name, exe, gfilter):
        self.name, self.exe, self.filter = name, exe, gfilter
        self.label = name if gfilter == "*" else f"{name} {gfilter}"
        self.done = 0
        self.seconds = 0.0
        self.failures = []  # (seed, what, output tail)
        self.ignored_seed = False

    def mean(self):
        return self.seconds / self.done if self.done else 0.0

    def command(self):
        return [self.exe, f"--gtest_filter={self.filter}", "--gtest_brief=1"]

    def reproduce(self, seed):
        return f"LOCKSTEP_SEED={seed} {self.exe} --gtest_filter='{self.filter}'"


def run_once(spec, lock, timeout):
    seed = secrets.randbits(64)
    env = dict(os.environ, LOCKSTEP_SEED=str(seed))
    t0 = time.monotonic()
    try:
        p = subprocess.run(spec.command(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=timeout)
        out, what = p.stdout, (None if p.returncode == 0 else f"exit status {p.returncode}")
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        what = f"still running after {timeout:.0f} s (killed)"
    dt = time.monotonic() - t0
    with lock:
        spec.done += 1
        spec.seconds += dt
        if what is None and str(seed) not in out:
            spec.ignored_seed = True
        if what is not None:
            spec.failures.append((seed, what, "\n".join(out.splitlines()[-40:])))
            print(f"FAIL {spec.label}: {what} with LOCKSTEP_SEED={seed}", flush=True)
    return dt


def cheap_set(specs, started, runs, min_runs, left):
    """The cheap specs: the cheapest ones whose runs still to start (to --runs)
    fit in `left` (seconds of one job) after every spec's --min-runs."""
    left -= sum(s.mean() * max(0, min_runs - started[id(s)]) for s in specs)
    cheap = set()
    for s in sorted(specs, key=lambda s: s.mean()):
        cost = s.mean() * max(0, runs - max(min_runs, started[id(s)]))
        if cost > left:
            break
        cheap.add(id(s))
        left -= cost
    return cheap


def main():
    a = parse_args()
    specs = [Spec(*s) for s in a.spec]
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + a.budget
    print(f"repeat_seeds: {len(specs)} randomized test specs, {a.runs} runs each with fresh LOCKSTEP_SEED "
          f"values where the budget allows ({a.budget:.0f} s, {a.jobs} jobs; at least {a.min_runs} runs each)",
          flush=True)

    # One run of each: its cost, and a first check of every spec.
    unmeasured = list(specs)

    def measure():
        while True:
            with lock:
                if not unmeasured:
                    return
                s = unmeasured.pop(0)
            run_once(s, lock, a.budget)

    pool = [threading.Thread(target=measure) for _ in range(a.jobs)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    started = {id(s): s.done for s in specs}
    spent = {id(s): s.seconds for s in specs}
    cheap = cheap_set(specs, started, a.runs, a.min_runs, max(0.0, deadline - time.monotonic()) * a.jobs)
    print(f"{'spec':<72} {'s/run':>7}  plan", flush=True)
    for s in specs:
        plan = (f"{a.runs} runs (cheap)" if id(s) in cheap else
                f"{a.min_runs} runs, then a share of the time left over ({a.runs} runs x {s.mean():.2f} s do not "
                f"fit in the budget left after the cheaper specs)")
        print(f"{s.label:<72} {s.mean():7.2f}  {plan}", flush=True)

    # Then, while the budget lasts: every spec to --min-runs, the cheap ones
    # to --runs (the fewest runs first), then the dear ones up to --runs (the
    # one that has had the least time first). Which specs are cheap is decided
    # again before every run, from the means so far and the time left: a
    # machine slower than the first runs showed shortens the dear specs first.
    plock = threading.Lock()

    def pick():
        now = time.monotonic()
        fits = [s for s in specs if started[id(s)] < a.runs and now + s.mean() <= deadline]
        behind = [s for s in fits if started[id(s)] < a.min_runs]
        if behind:
            return min(behind, key=lambda s: started[id(s)])
        ids = cheap_set(specs, started, a.runs, a.min_runs, (deadline - now) * a.jobs)
        cheap_fits = [s for s in fits if id(s) in ids]
        if cheap_fits:
            return min(cheap_fits, key=lambda s: started[id(s)])
        return min(fits, key=lambda s: spent[id(s)]) if fits else None

    def worker():
        while True:
            with plock:
                s = pick()
                if s is None:
                    return
                started[id(s)] += 1
                spent[id(s)] += s.mean()
            # A run 10x its spec's mean is hung (a hang with a seed is a bug too).
            run_once(s, lock, max(60.0, 10.0 * s.mean()))

    workers = [threading.Thread(target=worker) for _ in range(a.jobs)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()

    elapsed = time.monotonic() - start
    print(f"\n{'spec':<72} {'runs':>5} {'s/run':>7} {'failed':>6}")
    scaled = 0
    for s in specs:
        note = ""
        if s.ignored_seed:
            note = "  the output does not show the seed given: LOCKSTEP_SEED ignored, or no test matched"
        elif s.done < a.runs:
            scaled += 1
            note = f"  scaled down from {a.runs}: the budget allowed {s.done} runs of {s.mean():.2f} s"
        print(f"{s.label:<72} {s.done:5d} {s.mean():7.2f} {len(s.failures):6d}{note}")
    for s in specs:
        for seed, what, tail in s.failures:
            print(f"\n== {s.label}: {what}\n   reproduce: {s.reproduce(seed)}\n{tail}")
    failed = sum(len(s.failures) for s in specs)
    total = sum(s.done for s in specs)
    least = min(s.done for s in specs)
    print(f"\nrepeat_seeds: {total} runs in {elapsed:.0f} s, every spec at least {least} times; "
          f"{failed} failing seeds" + (f"; {scaled} specs scaled down from {a.runs} runs" if scaled else ""))
    bad = failed > 0 or any(s.ignored_seed for s in specs)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
