#!/usr/bin/env python3
"""An independent float64 reference of the decoders the engine runs, written from Hugging Face
transformers' modeling code (Qwen3ForCausalLM, LlamaForCausalLM, Qwen3MoeForCausalLM,
DeepseekV3ForCausalLM) in plain
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
  - DeepSeek-V3 (modeling_deepseek_v3.py): multi-head latent attention — q = q_proj(x) or
    q_b_proj(RMSNorm(q_a_proj(x))), [c | k_rot] = kv_a_proj_with_mqa(x), [k_nope | v] per head
    = kv_b_proj(RMSNorm(c)) (both low-rank norms with eps 1e-6), RoPE on q's and k's rope parts
    (rope_interleave: the pairwise features permuted first, apply_rotary_pos_emb_interleave),
    YaRN's inv_freq and attention factor (_compute_yarn_parameters), the scale
    qk_head_dim^-0.5 · mscale(factor, mscale_all_dim)²; DeepSeekMoE from first_k_dense_replace
    on (every moe_layer_freq-th layer): sigmoid scores, the score-correction bias for the choice,
    the topk_group groups with the largest sums of their two best biased scores, top k of those
    (other groups excluded), weights the chosen scores ÷ (their sum + 1e-20) when norm_topk_prob,
    × routed_scaling_factor, plus the shared experts' MLP;
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


def yarn(cfg, dim):
    """inv_freq and attention factor of YaRN (transformers' _compute_yarn_parameters)."""
    s = cfg["rope_scaling"]
    base = cfg.get("rope_theta", 10000.0)
    factor = s["factor"]
    original = s.get("original_max_position_embeddings") or cfg["max_position_embeddings"]

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    mscale, mscale_all_dim = s.get("mscale"), s.get("mscale_all_dim")
    if mscale and mscale_all_dim:
        attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    else:
        attention_factor = get_mscale(factor)
    beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        pos_freq = base ** (2 * i / dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        extrapolation = 1 - ramp
        out.append(1 / (factor * pos_freq) * (1 - extrapolation) + 1 / pos_freq * extrapolation)
    return out, attention_factor


def deepseek_rope(vec, pos, freqs, factor, interleave):
    if interleave:  # apply_rotary_pos_emb_interleave: pairs (2i, 2i+1) brought to (i, i + d/2)
        vec = vec[0::2] + vec[1::2]
    return [v * factor for v in rope(vec, pos, freqs)]


def deepseek_moe(cfg, w, prefix, x):
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    scores = [1.0 / (1.0 + math.exp(-v)) for v in matvec(w[prefix + "gate.weight"], x)]
    bias = w.get(prefix + "gate.e_score_correction_bias", [0.0] * E)
    choice = [a + b for a, b in zip(scores, bias)]
    n_group, topk_group = cfg.get("n_group", 1), cfg.get("topk_group", 1)
    per = E // n_group
    group_scores = [sum(sorted(choice[g * per:(g + 1) * per], reverse=True)[:2])
                    for g in range(n_group)]
    groups = sorted(range(n_group), key=lambda g: -group_scores[g])[:topk_group]
    allowed = [i for g in groups for i in range(g * per, (g + 1) * per)]
    top = sorted(allowed, key=lambda i: -choice[i])[:k]
    weights = [scores[i] for i in top]
    if cfg.get("norm_topk_prob", True):  # DeepseekV3Config's default
        total = sum(weights) + 1e-20
        weights = [v / total for v in weights]
    weights = [v * cfg.get("routed_scaling_factor", 1.0) for v in weights]
    out = swiglu_mlp(w, prefix + "shared_experts.", x) if cfg.get("n_shared_experts") \
        else [0.0] * len(x)
    for e_id, wt in zip(top, weights):
        y = swiglu_mlp(w, prefix + "experts.%d." % e_id, x)
        out = [a + wt * b for a, b in zip(out, y)]
    return out


def deepseek_logprobs(cfg, w, ids):
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    eps = cfg.get("rms_norm_eps", 1e-6)
    dn, dr, dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    R, q_lora = cfg["kv_lora_rank"], cfg.get("q_lora_rank")
    interleave = cfg.get("rope_interleave", True)
    scaling = (dn + dr) ** -0.5
    if cfg.get("rope_scaling"):
        freqs, factor = yarn(cfg, dr)
        m = cfg["rope_scaling"].get("mscale_all_dim", 0)
        if m:
            ms = 0.1 * m * math.log(cfg["rope_scaling"]["factor"]) + 1.0
            scaling *= ms * ms
    else:
        freqs, factor = [cfg.get("rope_theta", 10000.0) ** (-2.0 * i / dr)
                         for i in range(dr // 2)], 1.0
    T = len(ids)
    x = [list(w["model.embed_tokens.weight"][t]) for t in ids]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        h = [rmsnorm(v, w[p + "input_layernorm.weight"], eps) for v in x]
        if q_lora:
            q = [matvec(w[a + "q_b_proj.weight"],
                        rmsnorm(matvec(w[a + "q_a_proj.weight"], v), w[a + "q_a_layernorm.weight"],
                                1e-6)) for v in h]
        else:
            q = [matvec(w[a + "q_proj.weight"], v) for v in h]
        ckv = [matvec(w[a + "kv_a_proj_with_mqa.weight"], v) for v in h]
        kv = [matvec(w[a + "kv_b_proj.weight"], rmsnorm(c[:R], w[a + "kv_a_layernorm.weight"], 1e-6))
              for c in ckv]
        k_rot = [deepseek_rope(c[R:], t, freqs, factor, interleave) for t, c in enumerate(ckv)]
        qh = [[q[t][j * (dn + dr):j * (dn + dr) + dn]
               + deepseek_rope(q[t][j * (dn + dr) + dn:(j + 1) * (dn + dr)], t, freqs, factor,
                               interleave) for j in range(heads)] for t in range(T)]
        kh = [[kv[t][j * (dn + dv):j * (dn + dv) + dn] + k_rot[t] for j in range(heads)]
              for t in range(T)]
        vh = [[kv[t][j * (dn + dv) + dn:(j + 1) * (dn + dv)] for j in range(heads)]
              for t in range(T)]
        attn = []
        for t in range(T):
            row = []
            for j in range(heads):
                s = [sum(u * v for u, v in zip(qh[t][j], kh[u_][j])) * scaling
                     for u_ in range(t + 1)]
                m = max(s)
                e = [math.exp(v - m) for v in s]
                z = sum(e)
                row += [sum(e[u] / z * vh[u][j][d] for u in range(t + 1)) for d in range(dv)]
            attn.append(row)
        x = [[u + v for u, v in zip(x[t], matvec(w[a + "o_proj.weight"], attn[t]))]
             for t in range(T)]
        h = [rmsnorm(v, w[p + "post_attention_layernorm.weight"], eps) for v in x]
        experts = (cfg.get("n_routed_experts") and l >= cfg.get("first_k_dense_replace", 0)
                   and l % cfg.get("moe_layer_freq", 1) == 0)
        mlp = [deepseek_moe(cfg, w, p + "mlp.", v) if experts else swiglu_mlp(w, p + "mlp.", v)
               for v in h]
        x = [[u + v for u, v in zip(x[t], mlp[t])] for t in range(T)]
    return x


def logprobs(folder, ids):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    arch = cfg["architectures"][0]
    assert arch in ("Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen3MoeForCausalLM",
                    "DeepseekV3ForCausalLM"), arch
    w = load(folder)
    if arch == "DeepseekV3ForCausalLM":
        return final_logprobs(cfg, w, deepseek_logprobs(cfg, w, ids), ids)
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
    return final_logprobs(cfg, w, x, ids)


def final_logprobs(cfg, w, x, ids):
    eps = cfg.get("rms_norm_eps", 1e-6)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) \
        else w["lm_head.weight"]
    out = []
    for t in range(len(ids) - 1):
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
