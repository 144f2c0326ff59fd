"""One table for the performance issue: lockstep's training modes and PyTorch's, same model, same run.

  python3 bench/train/perf_table.py --bench /tmp/b/bench/train/train_bench --device cuda --steps 5 \
      [--config gpt2-124m:16:1024:50304] [--torch-modes fp32,bf16,bf16-compile,bf16-det] [--log perf.log] \
      [--profile DIR] [--modes float,units,unit-bwd]

Rows: lockstep float canonical, units forward-only (--linear units), units with the unit
backward (--linear units --unit-backward), the same with the LM head on the units too
(--units-head; --modes picks rows); then each PyTorch mode (torch_reference.py:
fp32 TF32 off, bf16 autocast, bf16 + torch.compile, bf16 deterministic; fused AdamW).
--profile DIR: each lockstep row also runs its steps again under the step profile
(train_bench --profile: every kernel launch class timed with CUDA events) and writes
DIR/profile_<mode>.json and the full tables to DIR/profile_<mode>.txt; a summary (by op, the
largest op calls by shape with their rate) goes to the output and the log.
Columns: tokens/s, ms/step, peak GPU memory (lockstep: the device pool's high-water
mark over the training; PyTorch: max_memory_allocated), and each lockstep row's ratio to
every PyTorch row. MFU is against the model FLOPs 6·params·tokens + attention
(12·layers·T·d per token) and the measured cuBLAS bf16 8192³ ceiling when --bf16-tflops is
given (bench/cuda/int8_gemm_bench prints it). The full output goes to --log too.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as tr  # noqa: E402  (exits 0 with a message where torch is missing)

LOCKSTEP_MODES = [("float", "float canonical", []), ("units", "units fwd", ["--linear", "units"]),
                  ("unit-bwd", "units + unit bwd", ["--linear", "units", "--unit-backward"]),
                  ("unit-bwd-head", "units + unit bwd + head", ["--linear", "units", "--unit-backward", "--units-head"]),
                  ("unit-bwd-attn", "units + unit bwd + attn", ["--linear", "units", "--unit-backward",
                                                                "--attention", "units"]),
                  ("unit-all", "units + bwd + head + attn", ["--linear", "units", "--unit-backward", "--units-head",
                                                             "--attention", "units"])]


def summarize_profile(say, name, json_path, full_path, rows):
    with open(json_path) as f:
        pr = json.load(f)
    say(f"--- lockstep {name}: step profile, sum {pr['sum_ms_per_step']:.1f} ms/step vs unprofiled "
        f"{pr['unprofiled_ms_per_step']:.1f} (full tables: {full_path})")
    total = pr["sum_ms_per_step"] or 1.0
    for r in pr["by_op"]:
        if r["ms_per_step"] >= 0.05:
            say(f"  {r['scope'][:58]:<58} {r['calls_per_step']:>7.1f} {r['ms_per_step']:>9.2f} ms {100 * r['ms_per_step'] / total:>5.1f}%")
    say("  largest op calls by shape (rate: TFLOP/s, TOPS for int8):")
    for r in pr["by_scope"][:rows]:
        rate = f"{r['tera_per_s']:>7.1f}" if "tera_per_s" in r else ""
        say(f"  {r['scope'][:58]:<58} {r['calls_per_step']:>7.1f} {r['ms_per_step']:>9.2f} ms {100 * r['ms_per_step'] / total:>5.1f}% {rate}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--config", default="gpt2-124m:16:1024:50304")
    ap.add_argument("--torch-modes", default="fp32,bf16,bf16-compile,bf16-det")
    ap.add_argument("--bf16-tflops", type=float, default=0.0, help="measured bf16 GEMM ceiling for MFU")
    ap.add_argument("--log", default="")
    ap.add_argument("--profile", default="", help="directory for the step profiles (profile_<mode>.json)")
    ap.add_argument("--profile-rows", type=int, default=10, help="op-call rows of each profile summary")
    ap.add_argument("--modes", default="float,units,unit-bwd",
                    help="lockstep rows to run: " + ",".join(m[0] for m in LOCKSTEP_MODES))
    a = ap.parse_args()
    wanted = [m for m in a.modes.split(",") if m]
    unknown = [m for m in wanted if m not in [k for k, _, _ in LOCKSTEP_MODES]]
    if unknown:
        ap.error(f"--modes: unknown {','.join(unknown)}")
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    rows = []
    for key, name, flags in [m for m in LOCKSTEP_MODES if m[0] in wanted]:
        cmd = [a.bench, a.config, "--json", "--threads", str(a.threads), "--steps", str(a.steps), "--device", a.device] + flags
        if a.profile:
            cmd += ["--profile", os.path.join(a.profile, f"profile_{key}.json")]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            say(f"lockstep {name}: failed ({p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode})")
            continue
        c = json.loads(p.stdout.strip().splitlines()[-1])
        if a.profile:
            # The full tables (train_bench writes them to stderr beside its JSON line) go to
            # DIR/profile_<mode>.txt; here a summary: by op, and the op calls by shape.
            full = os.path.join(a.profile, f"profile_{key}.txt")
            with open(full, "w") as f:
                f.write(p.stderr)
            summarize_profile(say, name, os.path.join(a.profile, f"profile_{key}.json"), full, a.profile_rows)
        peak = c.get("peak_in_use_bytes", -1)
        rows.append((f"lockstep {name}", c["train_tok_s"], c["ms_per_step"], peak / 2**30 if peak >= 0 else float("nan"), c))
    if not rows:
        return 1
    c = rows[0][4]
    tokens = c["batch"] * c["seq"]
    flops_per_token = 6 * c["params"] + 12 * c["n_layer"] * c["seq"] * c["d_model"]
    for m in [m for m in a.torch_modes.split(",") if m]:
        rate, peak = tr.torch_tokens_per_second(c, a.threads, a.steps, a.device, m, with_memory=True)
        rows.append((f"PyTorch {m}", rate, 1e3 * tokens / rate, peak / 2**30, None))
    torch_rows = [r for r in rows if r[4] is None]
    head = f"{'row':<34} {'tok/s':>9} {'ms/step':>9} {'MFU':>6} {'peak GiB':>9}" + "".join(
        f" {'/' + r[0].split(' ', 1)[1]:>13}" for r in torch_rows)
    say(f"{a.config} on {a.device}, {a.steps} timed steps; MFU vs bf16 {a.bf16_tflops or 'n/a'} TFLOP/s")
    say(head)
    for r in rows:
        mfu = (r[1] * flops_per_token / 1e12 / a.bf16_tflops) if a.bf16_tflops else float("nan")
        ratios = "".join(f" {r[1] / t[1]:>13.3f}" for t in torch_rows) if r[4] is not None else ""
        say(f"{r[0]:<34} {r[1]:>9.0f} {r[2]:>9.1f} {mfu:>6.1%} {r[3]:>9.2f}{ratios}")
    if a.log:
        with open(a.log, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
