#!/usr/bin/env python3
"""Summarises a GPU round's results folder as markdown: each target with its measured ratio and
whether it was met, the parts of the round with their time caps, the other measurements, and
each command's exit code.

    summarize.py [--brief] RESULTS_DIR

Reads RESULTS_DIR/status.tsv (each command: exit code, seconds, cap, log), RESULTS_DIR/parts.tsv
(each part of the round: share, cap, time used, result) when present, RESULTS_DIR/json/*.json
(the rows written by `fp8rl bench ... --json` and torch_decode.py --json) and the op tests' log
(logs/ops.log). --brief prints the targets and the parts only (the round prints it after each
part). Python 3 standard library only. Exit code 0 unless the folder cannot be read.
"""

import csv
import glob
import json
import os
import re
import sys

# The targets of the GPU round (docs/benchmarks.md).
TARGETS = {
    "fprop": 1.6,           # FP8 fprop GEMM vs cuBLASLt BF16 at 8192^3
    "quant": 0.75,          # quantization kernels vs copy bandwidth
    "fp8_decode": 1.3,      # FP8 + FP8 KV decode vs BF16, Qwen3-0.6B shape, batch 64
    "bf16_vs_torch": 2.0,   # our BF16 decode vs a PyTorch eager decode loop
    "experts_fp8_tflops": 1000,  # grouped FP8 expert GEMMs, Qwen3-30B-A3B shapes, 16,384 tokens
    "attention_bwd": 200,   # TFLOP/s of the tensor-core attention backward, D 128, T >= 1024
}
# The whole-step targets as `fp8rl bench step` reports them: name → (label, relation, target).
STEP_TARGETS = [
    ("step fp8 linears + fp8 KV vs bf16", "GRPO step FP8 + FP8 KV vs BF16", "≥", 1.48),
    ("step fp8 linears vs bf16", "GRPO step FP8 linears vs BF16", "≥", 1.15),
    ("recalibration share of the step (fp8 modes, worst)",
     "GRPO step recalibration share (FP8 modes, worst)", "≤", 0.03),
]
TIMED_OUT = ("124", "137")  # timeout(1): the command ran past its cap (TERM, then KILL)
# bench step's line per step as it ends: mode, step, steps, kind, seconds, phases.
STEP_LINE = re.compile(r"^step: (.+?) (\d+) of (\d+) \((warm-up|timed)\) ([0-9.]+) s: (.*)$")


def load(folder, name):
    """The JSON document json/NAME.json, or None when missing or unreadable."""
    path = os.path.join(folder, "json", name + ".json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def short_mode(mode):
    """'bf16 linears, bf16 KV' -> 'bf16', 'fp8 linears, bf16 KV' -> 'fp8',
    'fp8 linears, fp8 KV' -> 'fp8 + fp8 KV': the step modes' names, short but distinct."""
    linears, _, kv = mode.partition(",")
    linears = linears.replace(" linears", "").strip()
    kv = kv.strip()
    return linears if kv in ("", "bf16 KV") else f"{linears} + {kv}"


def first_run(doc):
    if not doc:
        return None
    runs = doc.get("runs") if "runs" in doc else [doc]
    return runs[0] if runs else None


def fmt_ratio(v):
    return "–" if v is None else f"{v:.2f}x"


def fmt_pct(v):
    return "–" if v is None else f"{100 * v:.1f}%"


def read_tsv(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


class Summary:
    def __init__(self, folder):
        self.folder = folder
        self.status = {row["command"]: row for row in read_tsv(os.path.join(folder, "status.tsv"))}
        try:
            self.parts = read_tsv(os.path.join(folder, "parts.tsv"))
        except OSError:
            self.parts = []
        self.targets = []  # (measurement, value text, target text, verdict)
        self.info = []     # (measurement, value text)

    def why_missing(self, command):
        st = self.status.get(command)
        if st is None:
            return f"not measured ({command} did not run)"
        code, log = st["exit_code"], st.get("log", "")
        if code == "0":
            return f"not measured (no rows in json/{command}.json)"
        if code == "skipped":
            return f"skipped ({command}: {log})"
        if code in TIMED_OUT:
            return f"not measured ({command} ran past its cap of {st.get('cap', '?')} s, {log})"
        return f"not measured ({command} failed: exit {code}, see {log})"

    def target(self, name, value, relation, target, fmt, command):
        if value is None:
            self.targets.append((name, "–", f"{relation} {fmt(target)}", self.why_missing(command)))
            return
        ok = value >= target if relation == "≥" else value <= target
        self.targets.append((name, fmt(value), f"{relation} {fmt(target)}",
                             "met" if ok else "missed"))

    # --- the parts of the round

    def ops(self):
        """The op registry: every case within its bound on the backend under test."""
        st = self.status.get("ops")
        counts, backend = None, None
        try:
            with open(os.path.join(self.folder, "logs", "ops.log")) as f:
                for line in f:
                    m = re.match(r"(\d+) passed, (\d+) failed, (\d+) skipped", line)
                    if m:
                        counts = tuple(int(x) for x in m.groups())
                    m = re.match(r"== backend (\S+)", line)
                    if m:
                        backend = m.group(1)
        except OSError:
            pass
        label = f"op registry on {backend or 'the backend'}: every case within its bound"
        if counts is None or st is None:
            self.targets.append((label, "–", "0 failed", self.why_missing("ops")))
            return
        passed, failed, skipped = counts
        ok = failed == 0 and passed > 0 and st["exit_code"] == "0"
        self.targets.append((label, f"{passed} passed, {failed} failed, {skipped} skipped",
                             "0 failed", "met" if ok else "missed"))

    def gemm(self):
        rows = []  # bench-gemm.json (the 8192^3 target) first, then bench-gemm-*.json
        names = sorted(os.path.basename(p)[:-5] for p in
                       glob.glob(os.path.join(self.folder, "json", "bench-gemm-*.json")))
        for name in ["bench-gemm"] + names:
            run = first_run(load(self.folder, name))
            rows += run.get("rows", []) if run else []
        fprop = [r for r in rows if r.get("gemm") == "fprop" and "fp8_vs_bf16" in r]
        pick = next((r for r in fprop if (r.get("M"), r.get("N"), r.get("K")) == (8192,) * 3),
                    fprop[0] if fprop else None)
        label = (f"GEMM fprop FP8 vs BF16 at {pick['M']}x{pick['N']}x{pick['K']}" if pick
                 else "GEMM fprop FP8 vs BF16 at 8192^3")
        self.target(label, pick and pick.get("fp8_vs_bf16"), "≥", TARGETS["fprop"], fmt_ratio,
                    "bench-gemm")
        for r in rows:
            if "fp8_vs_bf16" in r and r is not pick:
                self.info.append((f"GEMM {r['gemm']} FP8 vs BF16, {r['shape']} "
                                  f"({r['M']}x{r['N']}x{r['K']})", fmt_ratio(r["fp8_vs_bf16"])))
            # --algos: the best of cuBLASLt's algorithms per precision, against its first choice.
            if r.get("fp8_best_algo") is not None:
                self.info.append((
                    f"GEMM {r['gemm']} {r['M']}x{r['N']}x{r['K']}: best of cuBLASLt's algorithms "
                    "(#, TF/s) bf16 / fp8; fp8/bf16 at the best",
                    f"#{r['bf16_best_algo']} {r['bf16_best_tflops']:.0f} (first "
                    f"{r.get('bf16_tflops', 0):.0f}) / #{r['fp8_best_algo']} "
                    f"{r['fp8_best_tflops']:.0f} (first {r.get('fp8_tflops', 0):.0f}); "
                    f"{fmt_ratio(r.get('fp8_vs_bf16_best_algos'))}"))

    def experts(self):
        """bench experts: the grouped FP8 expert GEMMs' TFLOP/s at the largest token count (fprop,
        the issue's target) and, per row, the grouped call's speed-up over one call per expert."""
        run = first_run(load(self.folder, "bench-experts"))
        rows = run.get("rows", []) if run else []
        fp8 = [r for r in rows if r.get("precision") == "fp8" and r.get("pass") == "fprop"]
        pick = max(fp8, key=lambda r: r["tokens"]) if fp8 else None
        # The better grouped path: the default call or the single-launch kernel (kernel 3).
        best = None
        if pick:
            paths = [pick.get("grouped_tflops"), pick.get("grouped_kernel3_tflops")]
            best = max((v for v in paths if v is not None), default=None)
        label = ("MoE expert GEMMs FP8 grouped fprop TFLOP/s (best of one call and one launch)"
                 + (f", {pick['tokens']} tokens" if pick else ""))
        self.target(label, best, "≥", TARGETS["experts_fp8_tflops"], lambda v: f"{v:.4g}",
                    "bench-experts")
        for r in rows:
            other = r.get("grouped_kernel2_seconds")
            self.info.append((f"MoE expert GEMMs {r['precision']} {r['pass']}, {r['tokens']} "
                              f"tokens: TFLOP/s per expert / grouped, grouped speed-up"
                              + (", grouped ms (kernel 2)" if other else ""),
                              f"{r['loop_tflops']:.4g} / {r['grouped_tflops']:.4g}, "
                              f"{fmt_ratio(r.get('grouped_speedup'))}"
                              + (f", {r['grouped_seconds'] * 1e3:.3f} ({other * 1e3:.3f})"
                                 if other else "")))
            if r.get("grouped_kernel3_tflops") is not None:
                self.info.append((f"MoE expert GEMMs fp8 {r['pass']}, {r['tokens']} tokens: one "
                                  f"launch (kernel 3) TFLOP/s, speed-up over the grouped call",
                                  f"{r['grouped_kernel3_tflops']:.4g}, "
                                  f"{fmt_ratio(r['grouped_seconds'] / r['grouped_kernel3_seconds'])}"))
    def attention(self):
        """bench attention: the tensor-core backward's TFLOP/s at T >= 1024 (the worst shape),
        and each shape's forward and backward numbers."""
        run = first_run(load(self.folder, "bench-attention"))
        if not run and "bench-attention" not in self.status:
            return  # the part was not asked for
        rows = (run or {}).get("rows", [])
        label = "attention backward on tensor cores, D 128, T ≥ 1024 (worst), TFLOP/s"
        mma = [r for r in rows if r.get("backward_mma_tflops") is not None]
        if rows and not mma:
            self.targets.append((label, "–", f"≥ {TARGETS['attention_bwd']}",
                                 f"not measured (no tensor-core kernels on {run.get('backend')})"))
        else:
            long = [r for r in mma if r.get("T", 0) >= 1024]
            worst = min(long, key=lambda r: r["backward_mma_tflops"]) if long else None
            self.target(label, worst and worst["backward_mma_tflops"], "≥",
                        TARGETS["attention_bwd"], lambda v: f"{v:.0f}", "bench-attention")
        tf = lambda v: "–" if v is None else f"{v:.1f}" if v >= 1 else f"{v:.2g}"
        sci = lambda v: "–" if v is None else f"{v:.1e}"
        for r in rows:
            if r.get("backward_mma_tflops") is not None:
                text = (f"fwd FP32 {tf(r.get('forward_fp32_tflops'))}, tensor cores "
                        f"{tf(r.get('forward_mma_tflops'))} "
                        f"({fmt_ratio(r.get('mma_forward_speedup'))}); bwd FP32 "
                        f"{tf(r.get('backward_fp32_tflops'))}, tensor cores "
                        f"{tf(r.get('backward_mma_tflops'))} "
                        f"({fmt_ratio(r.get('mma_backward_speedup'))}); outputs differ by "
                        f"{sci(r.get('mma_vs_fp32_rel_diff'))}")
            else:
                text = (f"fwd {tf(r.get('forward_tflops'))}, "
                        f"bwd {tf(r.get('backward_tflops'))}")
            self.info.append((f"attention TFLOP/s, T {r['T']} x {r['B']} sequences", text))

    def quant(self):
        run = first_run(load(self.folder, "bench-quant"))
        rows = run.get("rows", []) if run else []
        for op in ("quantize 1x128", "quantize 128x128", "quantize x and x^T"):
            # The targets' shapes: 8192 x 4096 and up (the smaller ones, the 0.6B step's, fit
            # the L2 cache and are there for the producers' rows).
            mine = [r for r in rows if r.get("op") == op and r.get("vs_copy") is not None
                    and r.get("rows", 0) * r.get("cols", 0) >= 8192 * 4096]
            worst = min(mine, key=lambda r: r["vs_copy"]) if mine else None
            label = f"{op} vs copy bandwidth" + (
                f" (worst shape, {worst['rows']}x{worst['cols']})" if worst else "")
            self.target(label, worst and worst["vs_copy"], "≥", TARGETS["quant"], fmt_pct,
                        "bench-quant")
        # The producers that quantize as they write: their bandwidth and their gain over the op
        # followed by its quantization.
        for r in rows:
            if r.get("speedup") is not None:
                self.info.append((f"{r['op']}, {r['rows']}x{r['cols']}",
                                  fmt_ratio(r["speedup"])))
            elif any(w in str(r.get("op", ""))
                     for w in ("->fp8", "staged", "stage16", "rmsnorm backward")) and \
                    r.get("vs_copy") is not None:
                self.info.append((f"{r['op']} vs copy bandwidth, {r['rows']}x{r['cols']}",
                                  fmt_pct(r["vs_copy"])))

    def kernels(self):
        """bench decode: its own targets (a layer's FP8 weight stream, the FP8 KV cache read, each
        against the copy bandwidth) and a decode layer's BF16 / FP8 + FP8 KV ratio per shape."""
        run = first_run(load(self.folder, "bench-decode"))
        if not run:
            if "bench-decode" in self.status:
                self.info.append(("decode kernels", self.why_missing("bench-decode")))
            return
        for t in run.get("targets", []):
            relation = "≥" if t["relation"] == ">=" else "≤"
            self.target(t["name"], t.get("value"), relation, t["target"], fmt_pct, "bench-decode")
        for r in run.get("layer_step", []):
            self.info.append((f"decode layer (linears + attention) BF16 / FP8 + FP8 KV, "
                              f"{r['rows']} rows x {r['context']}", fmt_ratio(r.get("bf16_over_fp8"))))
        for r in run.get("table", []):
            if r.get("o_fp8_us") is not None:
                self.info.append((f"attention {r.get('kv_cache', '?')} KV, {r['rows']} rows x "
                                  f"{r['context']}: with o quantized for o_proj / alone us",
                                  f"{r['o_fp8_us']:.1f} / {r['us']:.1f}"))
            if r.get("fp32_split_us") is not None:
                self.info.append((f"attention {r.get('kv_cache', '?')} KV, {r['rows']} rows x "
                                  f"{r['context']}: default / FP32 split kernel us (default vs copy)",
                                  f"{r['us']:.1f} / {r['fp32_split_us']:.1f} "
                                  f"({fmt_pct(r.get('vs_copy'))})"))
        for r in run.get("layers", []):
            self.info.append((f"decode layer's linears BF16 / FP8, {r['rows']} rows",
                              fmt_ratio(r.get("linears_bf16_over_fp8"))))
            if r.get("stacked_fp8_us") is not None:
                self.info.append((f"decode layer's linears with q/k/v and gate/up stacked (as generation runs "
                                  f"them), {r['rows']} rows: FP8 us, BF16 / FP8, vs copy (seven "
                                  f"GEMMs: vs copy)",
                                  f"{r['stacked_fp8_us']:.1f}, "
                                  f"{fmt_ratio(r['stacked_bf16_us'] / r['stacked_fp8_us'])}, "
                                  f"{fmt_pct(r.get('stacked_vs_copy'))} "
                                  f"({fmt_pct(r.get('linears_vs_copy'))})"))
            if r.get("linears_split_k_vs_copy") is not None:
                self.info.append((f"decode layer's linears vs copy, {r['rows']} rows: default / "
                                  "split-K kernel", f"{fmt_pct(r.get('linears_vs_copy'))} / "
                                  f"{fmt_pct(r['linears_split_k_vs_copy'])}"))

    def decode(self):
        for tag in ("0.6b", "1.7b"):
            run = first_run(load(self.folder, f"bench-rollout-{tag}"))
            torch = load(self.folder, f"torch-decode-{tag}")
            if tag == "1.7b" and not run and f"bench-rollout-{tag}" not in self.status:
                continue  # an extra part: not reported when it was not asked for
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
                # The FP8 target is set for the 0.6B shape at its first (smallest) batch.
                target_here = tag == "0.6b" and batch == batches[0]
                v = mine.get("fp8 linears, fp8 KV", {}).get("vs_bf16")
                label = f"FP8 + FP8 KV decode vs BF16, {where}"
                if target_here:
                    self.target(label, v, "≥", TARGETS["fp8_decode"], fmt_ratio,
                                f"bench-rollout-{tag}")
                elif v is not None:
                    self.info.append((label, fmt_ratio(v)))
                v = mine.get("fp8 linears, bf16 KV", {}).get("vs_bf16")
                if v is not None:
                    self.info.append((f"FP8 linears (BF16 KV) decode vs BF16, {where}",
                                      fmt_ratio(v)))
                # What recording the decode steps as graphs gained (BF16, same run).
                graphed = mine.get("bf16 linears, bf16 KV", {})
                eager = mine.get("bf16, no decode graphs", {}).get("decode_tokens_per_s")
                if bf16 and eager:
                    self.info.append((f"BF16 decode with / without decode graphs, {where}",
                                      fmt_ratio(bf16 / eager)))
                if graphed.get("graphs_unused"):
                    self.info.append((f"decode graphs unused, {where}", graphed["graphs_unused"]))
                # Ragged finishing (--ragged): decode time per token against the forced lengths'
                # (1: finished sequences cost nothing), and FP8 + FP8 KV against BF16 there.
                for mode in ("bf16 linears, bf16 KV", "fp8 linears, fp8 KV"):
                    r = mine.get(mode + ", ragged")
                    if r and r.get("seconds_per_token_vs_forced") is not None:
                        self.info.append((f"ragged lengths ({r.get('ragged_min')}+), {mode}, {where}: "
                                          "s/token vs forced; vs BF16",
                                          f"{fmt_ratio(r['seconds_per_token_vs_forced'])}; "
                                          f"{fmt_ratio(r.get('vs_bf16'))}"))

    def decode_previous_kernels(self):
        """bench rollout again on the previous default kernel options: each mode's tokens/s on
        the defaults against those (> 1: the defaults are faster), and FP8 + FP8 KV vs BF16 there."""
        run = first_run(load(self.folder, "bench-rollout-0.6b-previous"))
        if not run:
            if "bench-rollout-0.6b-previous" in self.status:
                self.info.append(("decode on the previous default kernels",
                                  self.why_missing("bench-rollout-0.6b-previous")))
            return
        base = first_run(load(self.folder, "bench-rollout-0.6b")) or {}
        opts = ", ".join(f"{k}={v}" for k, v in (run.get("kernel_options") or {}).items()
                         if k in ("attention_kernel", "linear_fp8_max_rows", "linear_fp8_kernel"))
        opts = opts or f"{run.get('backend')}: no kernel options"
        now = {(r["batch"], r["mode"]): r for r in base.get("rows", [])}
        for r in run.get("rows", []):
            b = now.get((r["batch"], r["mode"]), {})
            old, new = r.get("decode_tokens_per_s"), b.get("decode_tokens_per_s")
            cell = f"{old:.0f} tok/s" if old else "–"
            if new and old:
                cell += f" (the defaults: {fmt_ratio(new / old)})"
            if r.get("vs_bf16") is not None:
                cell += f"; vs BF16 {fmt_ratio(r['vs_bf16'])}"
            self.info.append((f"decode on the previous default kernels ({opts}), batch "
                              f"{r['batch']}, {r['mode']}", cell))

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

    def step_lines(self, command):
        """The steps a bench step run printed as they ended (its log), for a run cut short."""
        st = self.status.get(command) or {}
        try:
            with open(os.path.join(self.folder, st.get("log") or f"logs/{command}.log")) as f:
                return [m.groups() for m in map(STEP_LINE.match, f.read().splitlines()) if m]
        except OSError:
            return []

    def recipe(self):
        """The recipe workloads: each run's own phase targets, and its phases per mode."""
        for preset in ("recipe-8b", "recipe-0.6b", "recipe-8b-long", "recipe-moe"):
            command = f"bench-step-{preset}"
            run = first_run(load(self.folder, command))
            if not run:
                if command in self.status:
                    self.info.append((f"GRPO step {preset}", self.why_missing(command)))
                    # What it finished before it was cut short.
                    for mode, i, n, kind, secs, phases in self.step_lines(command):
                        self.info.append((f"{preset} (cut short) {mode}, step {i} of {n} ({kind})",
                                          f"{float(secs):.1f} s: {phases}"))
                continue
            for t in run.get("targets", []):
                if f"({preset})" in t["name"]:
                    relation = "≥" if t["relation"] == ">=" else "≤"
                    self.target(t["name"], t.get("value"), relation, t["target"], fmt_ratio, command)
            for phase, modes in (run.get("phases") or {}).items():
                cells = [f"{short_mode(m)} {v['seconds']:.3f} s {v['share'] * 100:.0f}% "
                         f"{fmt_ratio(v.get('bf16_over_this'))}" for m, v in modes.items()
                         if v.get("seconds") is not None and v.get("share") is not None]
                self.info.append((f"{preset} {phase}: s, share, bf16/this", "; ".join(cells)))
            proj = run.get("projection") or {}
            for phase in ("step", "generation", "training"):
                modes = (proj.get("phases") or {}).get(phase) or {}
                cells = [f"{short_mode(m)} {v['projected_seconds']:.2f} s "
                         f"{fmt_ratio(v.get('bf16_over_this'))}" for m, v in modes.items()
                         if v.get("projected_seconds") is not None]
                if cells:
                    self.info.append((f"{preset} {phase} projected to {proj.get('layers')} layers "
                                      f"(measured at {proj.get('measured_layers')}): s, bf16/this",
                                      "; ".join(cells)))
            cells = [f"{r['mode']}: {r['token_mult_prob_error']:.5f} / "
                     f"{r['gen_kl_error']:.2e}" for r in run.get("rows", [])
                     if r.get("token_mult_prob_error") is not None
                     and r.get("gen_kl_error") is not None]
            if cells:
                self.info.append((f"{preset} generator vs trainer: token_mult_prob_error / "
                                  "gen_kl_error", "; ".join(cells)))

    def train(self):
        for tag in ("0.6b", "1.7b"):
            run = first_run(load(self.folder, f"bench-train-{tag}"))
            if not run:
                if f"bench-train-{tag}" in self.status:
                    self.info.append((f"train step qwen3-{tag}",
                                      self.why_missing(f"bench-train-{tag}")))
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

    def learn(self):
        """bench train --seeds on the demo presets: every run must reach validation 0.9."""
        for preset in ("demo", "llama-demo"):
            command = f"bench-seeds-{preset}"
            run = first_run(load(self.folder, command))
            if not run:
                if command in self.status:
                    self.info.append((f"{preset} trained on the GPU", self.why_missing(command)))
                continue
            finals = []
            for r in run.get("rows", []):
                for p in ("fp8", "bf16"):
                    final, secs = r.get(f"{p}_final"), r.get(f"{p}_seconds")
                    if final is not None:
                        finals.append(final)
                        self.info.append((f"{preset} seed {r['seed']} {p}: final validation, "
                                          "wall s", f"{final:.3f}, {secs or 0:.1f}"))
            self.target(f"{preset}: every run's final validation (worst of {len(finals)})",
                        min(finals) if finals else None, "≥", 0.9, lambda v: f"{v:.3f}",
                        command)

    def ranks(self):
        run = first_run(load(self.folder, "bench-ranks"))
        for r in (run or {}).get("rows", []):
            self.info.append((f"GRPO step on {r['ranks']} rank(s): s / speed-up",
                              f"{r['step_seconds']:.3f} / {fmt_ratio(r.get('speedup'))}"))

    # --- output

    def device(self):
        for name in ("bench-gemm", "bench-decode", "bench-rollout-0.6b", "bench-step-gpu", "bench-train-0.6b"):
            run = first_run(load(self.folder, name))
            if run and run.get("device"):
                return f"{run.get('backend')}: {run['device']}"
        return "unknown (no benchmark ran)"

    def targets_table(self):
        out = ["## Targets", "", "| measurement | value | target | verdict |", "|---|---|---|---|"]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in self.targets]
        return out

    def parts_table(self):
        if not self.parts:
            return []
        out = ["", "## Parts of the round", "",
               "| part | measures | share | cap planned (s) | cap given (s) | used (s) | result |",
               "|---|---|---|---|---|---|---|"]
        for p in self.parts:
            out.append(f"| {p['part']} | {p['what']} | {p['share']} | {p['planned_s']} | "
                       f"{p['given_s']} | {p['used_s']} | {p['result']} |")
        return out

    def brief(self):
        met = sum(1 for t in self.targets if t[3] == "met")
        missed = sum(1 for t in self.targets if t[3] == "missed")
        head = [f"targets: {met} met, {missed} missed, "
                f"{len(self.targets) - met - missed} not measured", ""]
        return "\n".join(head + self.targets_table() + self.parts_table()) + "\n"

    def markdown(self):
        out = ["# GPU round summary", "",
               f"- results: {self.folder}", f"- device: {self.device()}"]
        if self.device().startswith("cpu:"):
            out.append("- CPU backend (a smoke run of the round): these numbers say nothing "
                       "about the GPU targets")
        failed = [c for c, s in self.status.items() if s["exit_code"] not in ("0", "skipped")]
        skipped = [c for c, s in self.status.items() if s["exit_code"] == "skipped"]
        out.append(f"- commands: {len(self.status)}, failed: {len(failed)}"
                   + (f" ({', '.join(failed)})" if failed else "")
                   + (f", skipped: {', '.join(skipped)}" if skipped else ""))
        out += [""] + self.targets_table() + self.parts_table()
        out += ["", "## Other measurements", "", "| measurement | value |", "|---|---|"]
        out += [f"| {a} | {b} |" for a, b in self.info]
        out += ["", "## Commands", "", "| command | part | exit code | seconds | cap (s) | log |",
                "|---|---|---|---|---|---|"]
        for c, s in self.status.items():
            code = s["exit_code"] + (" (timed out)" if s["exit_code"] in TIMED_OUT else "")
            out.append(f"| {c} | {s.get('part', '')} | {code} | {s['seconds']} | "
                       f"{s.get('cap', '')} | {s['log']} |")
        return "\n".join(out) + "\n"


def main(argv):
    brief = "--brief" in argv
    args = [a for a in argv if a != "--brief"]
    if len(args) != 1:
        print("usage: summarize.py [--brief] RESULTS_DIR", file=sys.stderr)
        return 2
    try:
        s = Summary(args[0])
    except (OSError, KeyError) as e:
        print(f"summarize.py: cannot read {args[0]}/status.tsv: {e!r}", file=sys.stderr)
        return 1
    for part in (s.ops, s.recipe, s.kernels, s.gemm, s.experts, s.attention, s.quant, s.decode,
                 s.decode_previous_kernels,
                 s.step, s.train, s.ranks, s.learn):
        try:
            part()
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            s.info.append((f"summary of {part.__name__}", f"unreadable results: {e!r}"))
    sys.stdout.write(s.brief() if brief else s.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
