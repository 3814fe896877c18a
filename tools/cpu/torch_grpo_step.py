#!/usr/bin/env python3
"""The outside baseline for `fp8rl bench step` on the CPU: one GRPO step in plain PyTorch.

A random-init Qwen3-shaped decoder (the shape is given on the command line; `fp8rl bench step`
passes its preset's): token embedding; per layer RMSNorm, q/k/v projections, per-head RMSNorm
on q and k, RoPE (rotate_half), grouped-query causal attention, o projection, residual,
RMSNorm, SwiGLU MLP, residual; final RMSNorm; lm_head. FP32 weights and activations (PyTorch's
CPU BF16 matmuls are no faster on most CPUs), eager mode, no torch.compile.

What one step does, timed separately:
  rollout   B prompts of P tokens, R new tokens each, sampled at temperature 1 with a KV cache
            (prefill, then one token per sequence per step), recording each token's log-prob;
  training  the forward over the B full sequences (teacher forcing), the log-probs of the
            response tokens, the GRPO loss (group-normalised advantages, importance weight
            exp(p - g) truncated at 2, PPO ratio clipped to [0.8, 1.2], token-level mean),
            backward, the gradient clipped to norm 1, an AdamW step.
Both are the phases `fp8rl bench step` reports as gen s and train s. W warm-up steps, then N
timed; the median per phase, and the median CPU time of the whole step (all threads: what the
step costs whatever else shares the machine). On a shared machine run it with
OMP_WAIT_POLICY=PASSIVE (fp8rl bench step does): OpenMP threads spinning while they wait for a
busy core made a step several times slower there.

Prints one JSON object on stdout (progress goes to stderr); --json FILE also writes it there.
"""

import argparse
import json
import sys
import time

RMS_EPS = 1e-6


def positive(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("hidden", 128), ("layers", 2), ("heads", 4), ("kv-heads", 2),
                          ("head-dim", 32), ("intermediate", 256), ("vocab", 12)):
        p.add_argument(f"--{name}", type=positive, default=default)
    p.add_argument("--rope-theta", type=float, default=1000000.0)
    p.add_argument("--prompts", type=positive, default=32, help="prompts per step")
    p.add_argument("--group", type=positive, default=8, help="responses per prompt")
    p.add_argument("--prompt-len", type=positive, default=6)
    p.add_argument("--new-tokens", type=positive, default=6)
    p.add_argument("--threads", type=positive, default=None, help="torch.set_num_threads")
    p.add_argument("--steps", type=positive, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", metavar="FILE", help="also write the JSON object to FILE")
    return p.parse_args(argv)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Qwen3:
    """A random Qwen3-shaped decoder: FP32 parameters with gradients, full and cached forward."""

    def __init__(self, torch, a):
        self.t = torch
        self.a = a
        H, D, I, V = a.hidden, a.head_dim, a.intermediate, a.vocab

        def matrix(rows, cols):
            return torch.nn.Parameter(torch.randn(rows, cols) * 0.05)

        def ones(n):
            return torch.nn.Parameter(torch.ones(n))

        self.embed = matrix(V, H)
        self.layers = [dict(in_norm=ones(H), q=matrix(a.heads * D, H), k=matrix(a.kv_heads * D, H),
                            v=matrix(a.kv_heads * D, H), q_norm=ones(D), k_norm=ones(D),
                            o=matrix(H, a.heads * D), post_norm=ones(H), gate=matrix(I, H),
                            up=matrix(I, H), down=matrix(H, I))
                       for _ in range(a.layers)]
        self.final_norm = ones(H)
        self.lm_head = matrix(V, H)
        inv_freq = 1.0 / (a.rope_theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        pos = torch.arange(a.prompt_len + a.new_tokens + 1, dtype=torch.float32)
        emb = torch.cat((torch.outer(pos, inv_freq),) * 2, dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()
        self.sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)

    def parameters(self):
        out = [self.embed, self.final_norm, self.lm_head]
        for w in self.layers:
            out += list(w.values())
        return out

    def rmsnorm(self, x, w):
        return w * (x * self.t.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS))

    def rotate_half(self, x):
        h = x.shape[-1] // 2
        return self.t.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, tokens, start=0, cache=None):
        """tokens [B, S] at positions start …; with a cache (a list of [k, v] per layer, grown
        by concatenation) the keys and values are appended to it. Logits [B, S, V]."""
        t, a = self.t, self.a
        F = t.nn.functional
        B, S = tokens.shape
        D, groups = a.head_dim, a.heads // a.kv_heads
        cos = self.cos[start:start + S].view(1, 1, S, D)
        sin = self.sin[start:start + S].view(1, 1, S, D)
        h = F.embedding(tokens, self.embed)
        for li, w in enumerate(self.layers):
            x = self.rmsnorm(h, w["in_norm"])
            q = self.rmsnorm(F.linear(x, w["q"]).view(B, S, a.heads, D), w["q_norm"]).transpose(1, 2)
            k = self.rmsnorm(F.linear(x, w["k"]).view(B, S, a.kv_heads, D), w["k_norm"]).transpose(1, 2)
            v = F.linear(x, w["v"]).view(B, S, a.kv_heads, D).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if cache is not None:
                if cache[li]:
                    k = t.cat((cache[li][0], k), dim=2)
                    v = t.cat((cache[li][1], v), dim=2)
                cache[li] = [k, v]
            keys = k.repeat_interleave(groups, dim=1)
            values = v.repeat_interleave(groups, dim=1)
            causal = S > 1
            if self.sdpa is not None:
                o = self.sdpa(q, keys, values, is_causal=causal)
            else:
                scores = (q @ keys.transpose(-1, -2)) * (D ** -0.5)
                if causal:
                    L = keys.shape[2]
                    mask = t.ones(S, L, dtype=t.bool).triu(L - S + 1)
                    scores = scores.masked_fill(mask, float("-inf"))
                o = scores.softmax(-1) @ values
            h = h + F.linear(o.transpose(1, 2).reshape(B, S, a.heads * D), w["o"])
            x = self.rmsnorm(h, w["post_norm"])
            h = h + F.linear(F.silu(F.linear(x, w["gate"])) * F.linear(x, w["up"]), w["down"])
        return F.linear(self.rmsnorm(h, self.final_norm), self.lm_head)


def main(argv):
    a = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        log(f"torch_grpo_step: PyTorch is not importable ({e})")
        return 1
    if a.heads % a.kv_heads:
        log("torch_grpo_step: --heads must be a multiple of --kv-heads")
        return 1
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = Qwen3(torch, a)
    params = model.parameters()
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    B, P, R = a.prompts * a.group, a.prompt_len, a.new_tokens
    gen = torch.Generator()
    gen.manual_seed(a.seed)
    prompts = torch.randint(0, a.vocab, (a.prompts, P), generator=gen).repeat_interleave(a.group, 0)

    def rollout():
        with torch.no_grad():
            cache = [None] * a.layers
            logits = model.forward(prompts, 0, cache)[:, -1]
            toks, logps = [], []
            for step in range(R):
                lp = torch.log_softmax(logits, dim=-1)
                tok = torch.multinomial(lp.exp(), 1, generator=gen)
                toks.append(tok)
                logps.append(lp.gather(-1, tok))
                if step + 1 < R:
                    logits = model.forward(tok, P + step, cache)[:, -1]
            return torch.cat(toks, 1), torch.cat(logps, 1)

    def train(response, g):
        seq = torch.cat((prompts, response), 1)  # [B, P + R]
        rewards = torch.rand(a.prompts, a.group, generator=gen)
        adv = (rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-6)
        adv = adv.reshape(B, 1)
        opt.zero_grad(set_to_none=True)
        logits = model.forward(seq[:, :-1])[:, P - 1:]  # the positions predicting the response
        p = torch.log_softmax(logits, -1).gather(-1, response.unsqueeze(-1)).squeeze(-1)
        ratio = torch.exp(p - p.detach())
        w = torch.exp(p.detach() - g).clamp(max=2.0)
        loss = (w * torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return float(loss)

    times = {"rollout": [], "training": [], "cpu": []}
    for i in range(a.warmup + a.steps):
        c0 = time.process_time()
        t0 = time.perf_counter()
        response, g = rollout()
        t1 = time.perf_counter()
        train(response, g)
        t2 = time.perf_counter()
        c1 = time.process_time()
        if i >= a.warmup:
            times["rollout"].append(t1 - t0)
            times["training"].append(t2 - t1)
            times["cpu"].append(c1 - c0)

    def median(v):
        v = sorted(v)
        return v[len(v) // 2]

    gen_s, train_s = median(times["rollout"]), median(times["training"])
    log(f"torch_grpo_step: {B} sequences of {P} + {R} tokens, {torch.get_num_threads()} "
        f"threads: rollout {gen_s:.3f} s, training {train_s:.3f} s")
    result = dict(tool="torch_grpo_step", torch=torch.__version__, threads=torch.get_num_threads(),
                  dtype="fp32", sequences=B, prompt_len=P, new_tokens=R,
                  shape=dict(hidden=a.hidden, layers=a.layers, heads=a.heads,
                             kv_heads=a.kv_heads, head_dim=a.head_dim,
                             intermediate=a.intermediate, vocab=a.vocab),
                  attention="scaled_dot_product_attention" if model.sdpa else "matmul + softmax",
                  warmup=a.warmup, steps=a.steps, rollout_seconds=gen_s,
                  training_seconds=train_s, step_seconds=gen_s + train_s,
                  step_cpu_seconds=median(times["cpu"]))
    text = json.dumps(result)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
