#!/usr/bin/python3
"""Test of scripts/plot_runs.py (argv[1]): two tiny synthetic runs to a PNG,
checked by its signature and header, and by its pixels (matplotlib reads it
back): each run's colour is drawn, in the plot area, and the picture is not
blank; then the errors (missing run, malformed line, empty file, bad flags)
exit 2 naming the problem."""
import json
import os
import struct
import subprocess
import sys
import tempfile

script = sys.argv[1]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")
    else:
        print(f"ok: {what}")


try:
    import matplotlib.image
except ImportError:
    print("FAIL: matplotlib is missing for /usr/bin/python3: run scripts/setup.sh (python3-matplotlib)")
    sys.exit(1)


def write_run(d, name, offset, cfg=None):
    run = os.path.join(d, name)
    os.makedirs(run)
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        for s in range(1, 41):
            f.write(json.dumps({"type": "train", "step": s, "loss": 6.0 - 0.05 * s + offset, "lr": 1e-3}) + "\n")
            if s % 10 == 0:
                f.write(json.dumps({"type": "val", "step": s, "loss": 6.1 - 0.05 * s + offset, "bpb": 3.0,
                                    "final": False}) + "\n")
        f.write(json.dumps({"type": "val", "step": 40, "loss": 4.0 + offset, "bpb": 2.0, "final": True}) + "\n")
    if cfg:
        with open(os.path.join(run, "run.json"), "w") as f:
            json.dump(cfg, f)
    return run


def run(*args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as d:
    a = write_run(d, "float", 0.0, {"model": "gpt2-micro", "linear": "float"})
    b = write_run(d, "units", 0.5, {"model": "gpt2-micro", "linear": "units", "unit_backward": True})
    out = os.path.join(d, "loss.png")
    rc, text = run(a, os.path.join(b, "metrics.jsonl"), "-o", out, "--smooth", "3")
    check(rc == 0, f"two runs plotted (rc {rc}: {text.strip()})")
    check(os.path.isfile(out), "the PNG exists")
    data = open(out, "rb").read() if os.path.isfile(out) else b""
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature")
    if len(data) > 24:
        w, h = struct.unpack(">II", data[16:24])
        check(w >= 600 and h >= 400, f"picture size {w}x{h}")
    if data:
        img = matplotlib.image.imread(out)  # float RGBA in [0, 1]
        rgb = img[:, :, :3]
        nonwhite = (rgb < 0.9).any(axis=2).mean()
        check(0.01 < nonwhite < 0.5, f"not blank, not filled: {nonwhite:.3f} of the pixels drawn")
        # matplotlib's first two default colours, tab:blue and tab:orange
        for name, col in (("tab:blue", (0x1f, 0x77, 0xb4)), ("tab:orange", (0xff, 0x7f, 0x0e))):
            c = [v / 255 for v in col]
            hits = ((abs(rgb[:, :, 0] - c[0]) < 0.08) & (abs(rgb[:, :, 1] - c[1]) < 0.08) &
                    (abs(rgb[:, :, 2] - c[2]) < 0.08)).sum()
            check(hits > 200, f"{name} drawn ({hits} pixels): one run each")
    # Errors name the problem and exit 2.
    rc, text = run(os.path.join(d, "nothing"), "-o", out)
    check(rc == 2 and "no such run directory" in text, f"missing run refused: {text.strip()}")
    bad = os.path.join(d, "bad.jsonl")
    open(bad, "w").write('{"type":"train","step":1,"loss":5.0}\n{"type":"train","step":2}\n')
    rc, text = run(bad, "-o", out)
    check(rc == 2 and "bad.jsonl:2: not a metrics line" in text, f"malformed line refused: {text.strip()}")
    empty = os.path.join(d, "empty.jsonl")
    open(empty, "w").write("\n")
    rc, text = run(empty, "-o", out)
    check(rc == 2 and "no train or val lines" in text, f"empty metrics refused: {text.strip()}")
    rc, text = run(a, "-o", os.path.join(d, "loss.svg"))
    check(rc == 2 and "PNG" in text, f"non-PNG output refused: {text.strip()}")
    rc, text = run(a, b, "--label", "one", "-o", out)
    check(rc == 2 and "--label given 1 times for 2 runs" in text, f"label count refused: {text.strip()}")

print(f"plot_runs test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
