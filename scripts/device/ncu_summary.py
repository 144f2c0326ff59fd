#!/usr/bin/env python3
"""Sums an ncu --csv log (metric gpu__time_duration.sum) per kernel name: calls, device µs, share.

Usage: ncu_summary.py LOG.csv [PASSES]   (PASSES: divide calls and time by the passes captured)
"""
import csv, sys, collections

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]  # ncu prints its own ==PROF== lines first
for r in csv.DictReader(lines):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        unit = r.get("Metric Unit", "nsecond")
        v = float(r["Metric Value"].replace(",", ""))
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        rows.append((r["Kernel Name"], r.get("Grid Size", ""), r.get("Block Size", ""), v * scale))
passes = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
by = collections.OrderedDict()
for name, grid, block, us in rows:
    key = (name[:90], grid, block)
    c, t = by.get(key, (0, 0.0))
    by[key] = (c + 1, t + us)
total = sum(t for _, t in by.values())
print(f"{len(rows)} kernels, {total:.1f} us of device time ({total / passes:.1f} us a pass over {passes:g} passes)")
print(f"{'calls/pass':>10} {'us/pass':>9} {'us/call':>8} {'share':>6}  grid  block  kernel")
for (name, grid, block), (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"{c / passes:>10.1f} {t / passes:>9.1f} {t / c:>8.2f} {100 * t / total:>5.1f}%  {grid} {block}  {name}")
