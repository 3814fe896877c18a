#!/usr/bin/env python3
"""The outside baseline for `fp8rl bench rollout`: a plain PyTorch eager decode loop with a KV cache.

A random-init Qwen3-shaped decoder in BF16 (the shapes of `fp8rl bench rollout --model`):
token embedding; per layer RMSNorm, q/k/v projections, per-head RMSNorm on q and k, RoPE
(rotate_half), grouped-query attention over a preallocated KV cache, o projection, residual,
RMSNorm, SwiGLU MLP, residual; final RMSNorm; lm_head; the next token sampled (temperature 1,
with its log-probability, as a rollout records it) or greedy. No torch.compile, no CUDA graphs,
no Hugging Face transformers.

Prefill runs all prompt tokens in one pass and gives each sequence its first new token; the
decode loop then runs new_tokens - 1 steps of one token per sequence. Only the decode loop is
timed for tokens/s (CUDA-synchronised), counted as fp8rl counts it: batch x (new_tokens - 1).

Prints one JSON object on stdout (progress goes to stderr); --json FILE also writes it there.
"""

import argparse
import json
import sys
import time

SHAPES = {
    # The shapes of fp8rl's bench model_shape(): small (a 2-core CPU), Qwen3-0.6B, Qwen3-1.7B.
    "small": dict(hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64, intermediate=768,
                  vocab=512, max_positions=4096, tie=False),
    "qwen3-0.6b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128,
                       intermediate=3072, vocab=151936, max_positions=40960, tie=True),
    "qwen3-1.7b": dict(hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128,
                       intermediate=6144, vocab=151936, max_positions=40960, tie=True),
}
ROPE_THETA = 1000000.0
RMS_EPS = 1e-6


def positive_list(text):
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a positive integer or a comma list of them (e.g. 64,256)")
    return values


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
    p.add_argument("--model", choices=sorted(SHAPES),
                   help="model shape (default: small on the CPU, qwen3-0.6b on CUDA)")
    p.add_argument("--batch", type=positive_list,
                   help="batch size or comma list (default: 16 on the CPU, 64 on CUDA)")
    p.add_argument("--prompt-len", type=positive, help="prompt tokens (default: 32 CPU, 128 CUDA)")
    p.add_argument("--new-tokens", type=positive,
                   help="new tokens per sequence (default: 32 CPU, 128 CUDA)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="default: cuda when available, else cpu")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                   help="weights, activations and KV cache (default bf16)")
    p.add_argument("--greedy", action="store_true", help="argmax instead of sampling")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", metavar="FILE", help="also write the JSON object to FILE")
    return p.parse_args(argv)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Qwen3Decoder:
    """The weights of a random Qwen3-shaped decoder and its cached forward pass."""

    def __init__(self, torch, shape, device, dtype, seed):
        self.t = torch
        self.s = shape
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        H, D, I = shape["hidden"], shape["head_dim"], shape["intermediate"]
        Hq, Hkv, V = shape["heads"], shape["kv_heads"], shape["vocab"]

        def matrix(rows, cols):
            w = torch.empty(rows, cols, device=device, dtype=dtype)
            w.normal_(0.0, 0.02, generator=g)
            return w

        def ones(n):
            return torch.ones(n, device=device, dtype=dtype)

        self.embed = matrix(V, H)
        self.layers = []
        for _ in range(shape["layers"]):
            self.layers.append(dict(
                in_norm=ones(H), q=matrix(Hq * D, H), k=matrix(Hkv * D, H), v=matrix(Hkv * D, H),
                q_norm=ones(D), k_norm=ones(D), o=matrix(H, Hq * D), post_norm=ones(H),
                gate=matrix(I, H), up=matrix(I, H), down=matrix(H, I)))
        self.final_norm = ones(H)
        self.lm_head = self.embed if shape["tie"] else matrix(V, H)
        # RoPE tables (Hugging Face layout: the frequencies repeated for both halves).
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, D, 2, device=device,
                                                       dtype=torch.float32) / D))
        pos = torch.arange(shape["max_positions"], device=device, dtype=torch.float32)
        freqs = torch.outer(pos, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos = emb.cos().to(dtype)
        self.sin = emb.sin().to(dtype)
        self.sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)

    def rmsnorm(self, x, w):
        t = self.t
        xf = x.float()
        xf = xf * t.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)
        return w * xf.to(x.dtype)

    def rotate_half(self, x):
        h = x.shape[-1] // 2
        return self.t.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, tokens, start, cache):
        """tokens [B, S] at positions start … start+S-1; writes K/V to the cache; returns the
        logits [B, V] (f32) of each sequence's last token."""
        t, s = self.t, self.s
        F = t.nn.functional
        B, S = tokens.shape
        Hq, Hkv, D = s["heads"], s["kv_heads"], s["head_dim"]
        groups = Hq // Hkv
        end = start + S
        cos = self.cos[start:end].view(1, 1, S, D)
        sin = self.sin[start:end].view(1, 1, S, D)
        h = F.embedding(tokens, self.embed)  # [B, S, H]
        for li, w in enumerate(self.layers):
            x = self.rmsnorm(h, w["in_norm"])
            q = F.linear(x, w["q"]).view(B, S, Hq, D)
            k = F.linear(x, w["k"]).view(B, S, Hkv, D)
            v = F.linear(x, w["v"]).view(B, S, Hkv, D)
            q = self.rmsnorm(q, w["q_norm"]).transpose(1, 2)  # [B, Hq, S, D]
            k = self.rmsnorm(k, w["k_norm"]).transpose(1, 2)
            v = v.transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k_cache, v_cache = cache[li]
            k_cache[:, :, start:end] = k
            v_cache[:, :, start:end] = v
            keys = k_cache[:, :, :end].repeat_interleave(groups, dim=1)  # GQA
            values = v_cache[:, :, :end].repeat_interleave(groups, dim=1)
            causal = S > 1  # prefill starts at position 0; a decode row sees the whole cache
            if self.sdpa is not None:
                o = self.sdpa(q, keys, values, is_causal=causal)
            else:
                scores = (q @ keys.transpose(-1, -2)).float() * (D ** -0.5)
                if causal:
                    mask = t.ones(S, end, device=q.device, dtype=t.bool).triu(end - S + 1)
                    scores = scores.masked_fill(mask, float("-inf"))
                o = scores.softmax(-1).to(q.dtype) @ values
            o = o.transpose(1, 2).reshape(B, S, Hq * D)
            h = h + F.linear(o, w["o"])
            x = self.rmsnorm(h, w["post_norm"])
            h = h + F.linear(F.silu(F.linear(x, w["gate"])) * F.linear(x, w["up"]), w["down"])
        last = self.rmsnorm(h[:, -1], self.final_norm)
        return F.linear(last, self.lm_head).float()


def next_tokens(torch, logits, greedy, gen):
    """The next token of each row and its log-probability (temperature 1)."""
    logp = torch.log_softmax(logits, dim=-1)
    if greedy:
        tok = logp.argmax(dim=-1, keepdim=True)
    else:
        tok = torch.multinomial(logp.exp(), 1, generator=gen)
    return tok, logp.gather(-1, tok)


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        log(f"torch_decode: PyTorch is not importable ({e})")
        return 1
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        log("torch_decode: --device cuda but torch.cuda.is_available() is False")
        return 1
    cpu = device == "cpu"
    model_name = args.model or ("small" if cpu else "qwen3-0.6b")
    batches = args.batch or [16 if cpu else 64]
    prompt_len = args.prompt_len or (32 if cpu else 128)
    new_tokens = args.new_tokens or (32 if cpu else 128)
    shape = SHAPES[model_name]
    if prompt_len + new_tokens > shape["max_positions"]:
        log(f"torch_decode: --prompt-len + --new-tokens exceeds {shape['max_positions']} positions")
        return 1
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(args.seed)

    def sync():
        if not cpu:
            torch.cuda.synchronize()

    with torch.inference_mode():
        t0 = time.perf_counter()
        model = Qwen3Decoder(torch, shape, device, dtype, args.seed)
        sync()
        log(f"torch_decode: {model_name} initialised in {time.perf_counter() - t0:.1f} s on "
            f"{device}")
        gen = torch.Generator(device=device)
        gen.manual_seed(args.seed)
        prompts = torch.randint(0, shape["vocab"], (max(batches), prompt_len), device=device,
                                generator=gen)

        def generate(batch, cache, n_new):
            """Prefill + decode of n_new tokens per sequence; returns the tokens and the
            prefill and decode seconds."""
            t_start = time.perf_counter()
            logits = model.forward(prompts[:batch], 0, cache)
            tok, lp = next_tokens(torch, logits, args.greedy, gen)
            out, logps = [tok], [lp]
            sync()
            t_prefill = time.perf_counter() - t_start
            t_start = time.perf_counter()
            for step in range(1, n_new):
                logits = model.forward(tok, prompt_len + step - 1, cache)
                tok, lp = next_tokens(torch, logits, args.greedy, gen)
                out.append(tok)
                logps.append(lp)
            sync()
            t_decode = time.perf_counter() - t_start
            return torch.cat(out, dim=1), t_prefill, t_decode

        rows = []
        for batch in batches:
            max_len = prompt_len + new_tokens
            cache = [tuple(torch.empty(batch, shape["kv_heads"], max_len, shape["head_dim"],
                                       device=device, dtype=dtype) for _ in range(2))
                     for _ in range(shape["layers"])]
            generate(batch, cache, 2)  # warm-up: allocator, kernels, library handles
            tokens, t_prefill, t_decode = generate(batch, cache, new_tokens)
            assert tokens.shape == (batch, new_tokens)
            decode_tokens = batch * (new_tokens - 1)
            tps = decode_tokens / t_decode if t_decode > 0 else None
            log(f"torch_decode: batch {batch}: prefill {t_prefill:.3f} s, decode "
                f"{t_decode:.3f} s, {tps or 0:.1f} decode tok/s")
            rows.append(dict(batch=batch, prefill_seconds=t_prefill, decode_seconds=t_decode,
                             decode_tokens=decode_tokens, decode_tokens_per_s=tps))
            del cache
    result = dict(
        tool="torch_decode", torch=torch.__version__, device=device,
        device_name=torch.cuda.get_device_name() if not cpu else "cpu",
        model=model_name, model_shape=shape, dtype=args.dtype, prompt_len=prompt_len,
        new_tokens=new_tokens, sampling="greedy" if args.greedy else "sampled (temperature 1)",
        attention="scaled_dot_product_attention" if model.sdpa is not None else "matmul + softmax",
        rows=rows)
    text = json.dumps(result)
    print(text, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            f.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
