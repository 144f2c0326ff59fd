#!/usr/bin/python3
"""Draw training and validation loss against step for lockstep runs.

    scripts/plot_runs.py RUN [RUN ...] -o out.png [--title T] [--label NAME ...] [--smooth N]

Each RUN is a run directory (the --out of `lockstep train`, holding
metrics.jsonl) or a metrics.jsonl file. Per run, one colour: the training loss
(thin, a moving average over --smooth steps; raw with --smooth 1) and the
validation loss (markers; the final full pass as a larger marker). Needs
Debian's python3-matplotlib (scripts/setup.sh installs it); the shebang is
Debian's python3 on purpose.

metrics.jsonl lines (train/run.cpp):
  {"type":"train","step":S,"loss":L,...}
  {"type":"val","step":S,"loss":L,"bpb":B,...,"final":true|false}
A resumed run may have rewritten steps: the last line for a step wins.
"""
import argparse
import json
import os
import sys


def fail(msg):
    print(f"plot_runs: {msg}", file=sys.stderr)
    sys.exit(2)


def metrics_path(run):
    if os.path.isdir(run):
        p = os.path.join(run, "metrics.jsonl")
        if not os.path.isfile(p):
            fail(f"{run}: no metrics.jsonl in this run directory")
        return p
    if os.path.isfile(run):
        return run
    fail(f"{run}: no such run directory or metrics file")


def read_metrics(path):
    train, val, final = {}, {}, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
                kind, step, loss = rec["type"], int(rec["step"]), float(rec["loss"])
            except (ValueError, KeyError, TypeError) as e:
                fail(f"{path}:{n}: not a metrics line ({e.__class__.__name__}: {e})")
            if kind == "train":
                train[step] = loss
            elif kind == "val":
                if rec.get("final"):
                    final = (step, loss)
                else:
                    val[step] = loss
    if not train and not val and final is None:
        fail(f"{path}: no train or val lines")
    return sorted(train.items()), sorted(val.items()), final


def moving_average(values, n):
    if n <= 1:
        return list(values)
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= n:
            acc -= values[i - n]
        out.append(acc / min(i + 1, n))
    return out


def label_of(run, path):
    d = run if os.path.isdir(run) else os.path.dirname(path)
    name = os.path.basename(os.path.normpath(d)) or path
    cfg = os.path.join(d, "run.json")
    if os.path.isfile(cfg):
        try:
            with open(cfg, encoding="utf-8") as f:
                c = json.load(f)
            mode = c.get("linear", "float")
            if c.get("unit_backward"):
                mode += " + unit backward"
            if c.get("units_head"):
                mode += " + LM head"
            name = f"{name} ({c.get('model', '?')}, linear {mode})"
        except (ValueError, OSError):
            pass
    return name


def main(argv):
    ap = argparse.ArgumentParser(description="training and validation loss against step, to PNG")
    ap.add_argument("runs", nargs="+", metavar="RUN", help="run directory or metrics.jsonl")
    ap.add_argument("-o", "--output", required=True, help="PNG file to write")
    ap.add_argument("--title", default="lockstep: loss against step")
    ap.add_argument("--label", action="append", default=[], help="a name per RUN, in order (default: the directory)")
    ap.add_argument("--smooth", type=int, default=10, help="moving average of the training loss over N steps")
    a = ap.parse_args(argv)
    if a.label and len(a.label) != len(a.runs):
        fail(f"--label given {len(a.label)} times for {len(a.runs)} runs")
    if a.smooth < 1:
        fail(f"--smooth must be >= 1, got {a.smooth}")
    if not a.output.lower().endswith(".png"):
        fail(f"-o {a.output}: the output is a PNG file (name it .png)")
    runs = []
    for i, r in enumerate(a.runs):
        p = metrics_path(r)
        runs.append((a.label[i] if a.label else label_of(r, p), *read_metrics(p)))

    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is not installed (Debian: apt-get install python3-matplotlib; scripts/setup.sh does)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, train, val, final) in enumerate(runs):
        c = colors[i % len(colors)]
        if train:
            steps = [s for s, _ in train]
            ax.plot(steps, moving_average([l for _, l in train], a.smooth), color=c, lw=1.0, alpha=0.75,
                    label=f"{name}: train" + (f" (mean of {a.smooth})" if a.smooth > 1 else ""))
        vs = list(val) + ([final] if final else [])
        if vs:
            ax.plot([s for s, _ in vs], [l for _, l in vs], color=c, lw=1.6, marker="o", ms=4,
                    label=f"{name}: validation" + (f" (final {final[1]:.4f})" if final else ""))
        if final:
            ax.plot([final[0]], [final[1]], color=c, marker="*", ms=13, ls="none")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title(a.title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out_dir = os.path.dirname(os.path.abspath(a.output))
    if not os.path.isdir(out_dir):
        fail(f"-o {a.output}: directory {out_dir} does not exist")
    fig.savefig(a.output)
    print(f"plot_runs: wrote {a.output} ({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
