#!/usr/bin/env python3
"""An independent float64 reference of the decoders the engine runs, written from Hugging Face
transformers' modeling code (Qwen3ForCausalLM, LlamaForCausalLM, Qwen3MoeForCausalLM) in plain
Python: no numpy, no torch, nothing of this project. It reads a model folder (config.json and
model.safetensors or its index of shards, F32 / BF16 / F16 tensors) and prints the log-probability
of each next token of a sequence, as `fp8rl score` prints them:

    hf_reference.py MODEL_DIR 1,5,7,9   →   {"logprobs": [...]}

What it implements, each as transformers does:
  - RMSNorm: x / sqrt(mean(x²) + eps) · w (in float64 here);
  - attention: q, k, v projections (no bias); Qwen3 families normalise each head of q and k with
    RMSNorm (q_norm, k_norm) before RoPE, Llama does not; RoPE in the rotate_half layout with
    inv_freq = theta^(−2i/D), or Llama 3's rope_scaling (_compute_llama3_parameters); grouped
    query heads; causal softmax(q·kᵀ/√D)·v; o projection;
  - MLP: down(silu(gate(x)) · up(x)); Qwen3-MoE layers (decoder_sparse_step, mlp_only_layers):
    router logits = gate(x), softmax over all experts, the top num_experts_per_tok, divided by
    their sum when norm_topk_prob, Σ weight · expert(x);
  - final RMSNorm, lm_head (the embedding when tie_word_embeddings), log-softmax.
"""
import json
import math
import os
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[b:e]
        if t["dtype"] == "F32":
            vals = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        elif t["dtype"] == "BF16":
            vals = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        elif t["dtype"] == "F16":
            vals = list(struct.unpack("<%de" % (len(raw) // 2), raw))
        else:
            raise SystemExit("%s: tensor %s has dtype %s (this reference reads F32, BF16, F16)"
                             % (path, name, t["dtype"]))
        shape = t["shape"]
        if len(shape) == 1:
            out[name] = vals
        else:
            rows, cols = shape
            out[name] = [vals[r * cols:(r + 1) * cols] for r in range(rows)]
    return out


def load(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(folder, f)))
    return w


def matvec(m, x):  # m: [out][in]
    return [sum(a * b for a, b in zip(row, x)) for row in m]


def rmsnorm(x, w, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * g for v, g in zip(x, w)]


def silu(v):
    return v / (1.0 + math.exp(-v))


def inv_freqs(cfg, D):
    theta = cfg.get("rope_theta", 10000.0)
    f = [theta ** (-2.0 * i / D) for i in range(D // 2)]
    s = cfg.get("rope_scaling")
    if not s or s.get("rope_type", s.get("type")) in (None, "default"):
        return f
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    L = s["original_max_position_embeddings"]
    out = []
    for v in f:
        wavelen = 2 * math.pi / v
        if wavelen < L / high:
            out.append(v)
        elif wavelen > L / low:
            out.append(v / factor)
        else:
            smooth = (L / wavelen - low) / (high - low)
            out.append((1 - smooth) * v / factor + smooth * v)
    return out


def rope(vec, pos, freqs):
    half = len(freqs)
    out = list(vec)
    for i, f in enumerate(freqs):
        c, s = math.cos(pos * f), math.sin(pos * f)
        x1, x2 = vec[i], vec[i + half]
        out[i] = x1 * c - x2 * s
        out[i + half] = x2 * c + x1 * s
    return out


def swiglu_mlp(w, prefix, x):
    g = matvec(w[prefix + "gate_proj.weight"], x)
    u = matvec(w[prefix + "up_proj.weight"], x)
    return matvec(w[prefix + "down_proj.weight"], [silu(a) * b for a, b in zip(g, u)])


def moe_mlp(cfg, w, prefix, x):
    logits = matvec(w[prefix + "gate.weight"], x)
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    z = sum(e)
    probs = [v / z for v in e]
    k = cfg["num_experts_per_tok"]
    top = sorted(range(len(probs)), key=lambda i: -probs[i])[:k]
    weights = [probs[i] for i in top]
    if cfg.get("norm_topk_prob", False):
        s = sum(weights)
        weights = [v / s for v in weights]
    out = [0.0] * len(x)
    for e_id, wt in zip(top, weights):
        y = swiglu_mlp(w, prefix + "experts.%d." % e_id, x)
        out = [a + wt * b for a, b in zip(out, y)]
    return out


def logprobs(folder, ids):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    arch = cfg["architectures"][0]
    assert arch in ("Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen3MoeForCausalLM"), arch
    w = load(folder)
    H, Hq = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", Hq)
    D = cfg.get("head_dim") or H // Hq
    eps = cfg.get("rms_norm_eps", 1e-6)
    qk_norm = arch != "LlamaForCausalLM"
    freqs = inv_freqs(cfg, D)
    sparse_step = cfg.get("decoder_sparse_step", 1)
    mlp_only = cfg.get("mlp_only_layers", [])
    T = len(ids)
    x = [list(w["model.embed_tokens.weight"][t]) for t in ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = [rmsnorm(v, w[p + "input_layernorm.weight"], eps) for v in x]
        q = [matvec(w[p + "self_attn.q_proj.weight"], v) for v in h]
        k = [matvec(w[p + "self_attn.k_proj.weight"], v) for v in h]
        v_ = [matvec(w[p + "self_attn.v_proj.weight"], v) for v in h]
        heads_q = [[q[t][j * D:(j + 1) * D] for j in range(Hq)] for t in range(T)]
        heads_k = [[k[t][j * D:(j + 1) * D] for j in range(Hkv)] for t in range(T)]
        heads_v = [[v_[t][j * D:(j + 1) * D] for j in range(Hkv)] for t in range(T)]
        for t in range(T):
            for j in range(Hq):
                qh = heads_q[t][j]
                if qk_norm:
                    qh = rmsnorm(qh, w[p + "self_attn.q_norm.weight"], eps)
                heads_q[t][j] = rope(qh, t, freqs)
            for j in range(Hkv):
                kh = heads_k[t][j]
                if qk_norm:
                    kh = rmsnorm(kh, w[p + "self_attn.k_norm.weight"], eps)
                heads_k[t][j] = rope(kh, t, freqs)
        attn = []
        for t in range(T):
            row = []
            for j in range(Hq):
                kv = j // (Hq // Hkv)
                s = [sum(a * b for a, b in zip(heads_q[t][j], heads_k[u][kv])) / math.sqrt(D)
                     for u in range(t + 1)]
                m = max(s)
                e = [math.exp(v - m) for v in s]
                z = sum(e)
                o = [sum(e[u] / z * heads_v[u][kv][d] for u in range(t + 1)) for d in range(D)]
                row += o
            attn.append(row)
        x = [[a + b for a, b in zip(x[t], matvec(w[p + "self_attn.o_proj.weight"], attn[t]))]
             for t in range(T)]
        h = [rmsnorm(v, w[p + "post_attention_layernorm.weight"], eps) for v in x]
        experts = (arch == "Qwen3MoeForCausalLM" and cfg["num_experts"] > 0
                   and l not in mlp_only and (l + 1) % sparse_step == 0)
        mlp = [moe_mlp(cfg, w, p + "mlp.", v) if experts else swiglu_mlp(w, p + "mlp.", v)
               for v in h]
        x = [[a + b for a, b in zip(x[t], mlp[t])] for t in range(T)]
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) \
        else w["lm_head.weight"]
    out = []
    for t in range(T - 1):
        logits = matvec(head, rmsnorm(x[t], w["model.norm.weight"], eps))
        m = max(logits)
        lse = m + math.log(sum(math.exp(v - m) for v in logits))
        out.append(logits[ids[t + 1]] - lse)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: hf_reference.py MODEL_DIR ID,ID,...")
    ids = [int(s) for s in sys.argv[2].split(",")]
    print(json.dumps({"logprobs": logprobs(sys.argv[1], ids)}))
