#!/usr/bin/env python3
"""Summarises a tools/gpu/run.sh output folder as a markdown table of ratios against the targets.

Reads OUT/status.tsv (each command's exit code) and OUT/json/*.json (the rows written by
`fp8rl bench ... --json` and tools/gpu/torch_decode.py --json); prints markdown on stdout.
Python 3 standard library only. Exit code 0 unless the folder cannot be read.
"""

import csv
import json
import os
import sys

TARGETS = {
    "fprop": 1.6,           # FP8 fprop vs BF16 at 8192^3
    "quant": 0.75,          # quantization vs copy bandwidth
    "bf16_vs_torch": 2.0,   # BF16 decode vs PyTorch eager
    "fp8_decode": 1.3,      # FP8 decode vs BF16, Qwen3-0.6B batch 64
}
# The whole-step targets as `fp8rl bench step` reports them: name → (label, relation, target).
STEP_TARGETS = [
    ("step fp8 linears + fp8 KV vs bf16", "GRPO step FP8 + FP8 KV vs BF16", "≥", 1.48),
    ("step fp8 linears vs bf16", "GRPO step FP8 linears vs BF16", "≥", 1.15),
    ("recalibration share of the step (fp8 modes, worst)",
     "GRPO step recalibration share (FP8 modes, worst)", "≤", 0.03),
]


def load(folder, name):
    """The JSON document json/NAME.json, or None when missing or unreadable."""
    path = os.path.join(folder, "json", name + ".json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def first_run(doc):
    if not doc:
        return None
    runs = doc.get("runs") if "runs" in doc else [doc]
    return runs[0] if runs else None


def fmt_ratio(v):
    return "–" if v is None else f"{v:.2f}x"


def fmt_pct(v):
    return "–" if v is None else f"{100 * v:.1f}%"


class Summary:
    def __init__(self, folder):
        self.folder = folder
        self.status = {}
        path = os.path.join(folder, "status.tsv")
        with open(path) as f:
            for row in csv.DictReader(f, delimiter="\t"):
                self.status[row["command"]] = row
        self.targets = []  # (measurement, value text, target text, verdict)
        self.info = []     # (measurement, value text)

    def why_missing(self, command):
        st = self.status.get(command)
        if st is None:
            return f"MISSING ({command} did not run)"
        if st["exit_code"] == "0":
            return f"MISSING (no rows in json/{command}.json)"
        if st["exit_code"] == "skipped":
            return f"SKIPPED ({command}: {st['log']})"
        return f"MISSING ({command} failed: exit {st['exit_code']}, see {st['log']})"

    def target(self, name, value, relation, target, fmt, command):
        if value is None:
            self.targets.append((name, "–", f"{relation} {fmt(target)}", self.why_missing(command)))
            return
        ok = value >= target if relation == "≥" else value <= target
        self.targets.append((name, fmt(value), f"{relation} {fmt(target)}",
                             "PASS" if ok else "FAIL"))

    # --- the benchmarks

    def gemm(self):
        run = first_run(load(self.folder, "bench-gemm"))
        rows = run.get("rows", []) if run else []
        fprop = [r for r in rows if r.get("gemm") == "fprop" and "fp8_vs_bf16" in r]
        pick = next((r for r in fprop if r.get("shape") == "square 8192^3"),
                    fprop[0] if fprop else None)
        label = f"GEMM fprop FP8 vs BF16 at {pick['shape']}" if pick else "GEMM fprop FP8 vs BF16"
        self.target(label, pick and pick.get("fp8_vs_bf16"), "≥", TARGETS["fprop"], fmt_ratio,
                    "bench-gemm")
        for r in rows:
            if "fp8_vs_bf16" in r and r is not pick:
                self.info.append((f"GEMM {r['gemm']} FP8 vs BF16, {r['shape']} "
                                  f"({r['M']}x{r['N']}x{r['K']})", fmt_ratio(r["fp8_vs_bf16"])))

    def quant(self):
        run = first_run(load(self.folder, "bench-quant"))
        rows = run.get("rows", []) if run else []
        for op in ("quantize 1x128", "quantize 128x128", "quantize x and x^T"):
            mine = [r for r in rows if r.get("op") == op and r.get("vs_copy") is not None]
            worst = min(mine, key=lambda r: r["vs_copy"]) if mine else None
            label = f"{op} vs copy bandwidth" + (
                f" (worst shape, {worst['rows']}x{worst['cols']})" if worst else "")
            self.target(label, worst and worst["vs_copy"], "≥", TARGETS["quant"], fmt_pct,
                        "bench-quant")

    def decode(self):
        for tag in ("0.6b", "1.7b"):
            run = first_run(load(self.folder, f"bench-rollout-{tag}"))
            torch = load(self.folder, f"torch-decode-{tag}")
            rows = run.get("rows", []) if run else []
            model = run.get("model", tag) if run else f"qwen3-{tag}"
            batches = sorted({r["batch"] for r in rows}) or [None]
            for batch in batches:
                mine = {r["mode"]: r for r in rows if r["batch"] == batch}
                bf16 = mine.get("bf16 linears, bf16 KV", {}).get("decode_tokens_per_s")
                # BF16 decode against PyTorch eager at the same shape, batch and lengths.
                t_tps = None
                if torch and run and torch.get("model") == model and \
                        torch.get("prompt_len") == run.get("prompt_len") and \
                        torch.get("new_tokens") == run.get("new_tokens"):
                    t_tps = next((r.get("decode_tokens_per_s") for r in torch.get("rows", [])
                                  if r.get("batch") == batch), None)
                ratio = bf16 / t_tps if bf16 and t_tps else None
                missing = f"bench-rollout-{tag}" if bf16 is None else f"torch-decode-{tag}"
                where = f"{model} batch {batch}" if batch is not None else model
                self.target(f"BF16 decode vs PyTorch eager, {where}", ratio, "≥",
                            TARGETS["bf16_vs_torch"], fmt_ratio, missing)
                if bf16 and t_tps:
                    self.info.append((f"decode tok/s {where}: fp8rl bf16 / torch",
                                      f"{bf16:.0f} / {t_tps:.0f}"))
                for mode in ("fp8 linears, bf16 KV", "fp8 linears, fp8 KV"):
                    v = mine.get(mode, {}).get("vs_bf16")
                    label = f"FP8 decode vs BF16 ({mode}), {where}"
                    # The target is set for Qwen3-0.6B at batch 64 (the smallest batch here).
                    if tag == "0.6b" and batch == batches[0]:
                        self.target(label, v, "≥", TARGETS["fp8_decode"], fmt_ratio,
                                    f"bench-rollout-{tag}")
                    elif v is not None:
                        self.info.append((label, fmt_ratio(v)))
                # What recording the decode steps as graphs gained (BF16, same run).
                graphed = mine.get("bf16 linears, bf16 KV", {})
                eager = mine.get("bf16, no decode graphs", {}).get("decode_tokens_per_s")
                if bf16 and eager:
                    self.info.append((f"BF16 decode with / without decode graphs, {where}",
                                      fmt_ratio(bf16 / eager)))
                if graphed.get("graphs_unused"):
                    self.info.append((f"decode graphs unused, {where}", graphed["graphs_unused"]))

    def train(self):
        for tag in ("0.6b", "1.7b"):
            run = first_run(load(self.folder, f"bench-train-{tag}"))
            if not run:
                self.info.append((f"train step qwen3-{tag}", self.why_missing(f"bench-train-{tag}")))
                continue
            rows = {r["precision"]: r for r in run.get("rows", [])}
            where = f"{run.get('model')} {run.get('batch')}x{run.get('seq_len')}"
            bf16, fp8 = rows.get("bf16", {}), rows.get("fp8", {})
            if bf16.get("tokens_per_s") and fp8.get("tokens_per_s"):
                self.info.append((f"train step tok/s, {where}: bf16 / fp8",
                                  f"{bf16['tokens_per_s']:.0f} / {fp8['tokens_per_s']:.0f} "
                                  f"({fmt_ratio(fp8.get('vs_bf16'))})"))
            self.info.append((f"train step FP8 re-quantization share, {where}",
                              fmt_pct(fp8.get("requantization_share"))))

    def step(self):
        run = first_run(load(self.folder, "bench-step-gpu"))
        got = {t["name"]: t for t in run.get("targets", [])} if run else {}
        preset = f" (preset {run.get('preset')})" if run else ""
        for key, label, relation, target in STEP_TARGETS:
            fmt = fmt_pct if relation == "≤" else fmt_ratio
            t = got.get(key)
            value = t.get("value") if t else None
            if t:  # the run's own statement of the target
                relation = "≥" if t["relation"] == ">=" else "≤"
                target = t["target"]
            self.target(label + preset, value, relation, target, fmt, "bench-step-gpu")
        for r in (run or {}).get("rows", []):
            self.info.append((f"GRPO step s / rollout tok/s, {r['mode']}",
                              f"{r['step_seconds']:.3f} / {r['rollout_tokens_per_s']:.0f}"))

    # --- output

    def device(self):
        for name in ("bench-gemm", "bench-rollout-0.6b", "bench-train-0.6b", "bench-step-gpu"):
            run = first_run(load(self.folder, name))
            if run and run.get("device"):
                return f"{run.get('backend')}: {run['device']}"
        return "unknown (no benchmark ran)"

    def markdown(self):
        out = ["# GPU benchmark summary", "",
               f"- results: {self.folder}", f"- device: {self.device()}"]
        if self.device().startswith("cpu:"):
            out.append("- CPU backend (a smoke run of the script): these numbers say nothing "
                       "about the GPU targets")
        failed = [c for c, s in self.status.items() if s["exit_code"] not in ("0", "skipped")]
        skipped = [c for c, s in self.status.items() if s["exit_code"] == "skipped"]
        out.append(f"- commands: {len(self.status)}, failed: {len(failed)}"
                   + (f" ({', '.join(failed)})" if failed else "")
                   + (f", skipped: {', '.join(skipped)}" if skipped else ""))
        out += ["", "## Targets", "", "| measurement | value | target | verdict |",
                "|---|---|---|---|"]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.targets]
        out += ["", "## Other measurements", "", "| measurement | value |", "|---|---|"]
        out += [f"| {a} | {b} |" for a, b in self.info]
        out += ["", "## Commands", "", "| command | exit code | seconds | log |", "|---|---|---|---|"]
        for c, s in self.status.items():
            out.append(f"| {c} | {s['exit_code']} | {s['seconds']} | {s['log']} |")
        return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 1:
        print("usage: summarize.py OUT_DIR", file=sys.stderr)
        return 2
    try:
        s = Summary(argv[0])
    except OSError as e:
        print(f"summarize.py: cannot read {argv[0]}/status.tsv: {e}", file=sys.stderr)
        return 1
    for part in (s.gemm, s.quant, s.decode, s.train, s.step):
        try:
            part()
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            s.info.append((f"summary of {part.__name__}", f"unreadable results: {e!r}"))
    sys.stdout.write(s.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
