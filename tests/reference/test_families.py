#!/usr/bin/env python3
"""Model families against an independent float64 reference: random folders of Qwen3, Llama 3.1
(with Llama 3's rope_scaling), Qwen3-MoE (experts in some layers, norm_topk_prob on and off) and
DeepSeek-V3 (Moonlight-like: latent attention without query compression, one group of routed
experts beside two shared ones; DeepSeek-V3-like: q_lora_rank, YaRN with both mscales, grouped
routing, moe_layer_freq, rope_interleave off; both with random score-correction biases)
written by `fp8rl init`, scored by `fp8rl score --precision fp32` and by hf_reference.py
(written from Hugging Face transformers' modeling code, sharing nothing with the engine); and
bad config.json files refused with one error naming the key.

    test_families.py FP8RL
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

FP8RL = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
IDS = [1, 5, 7, 9, 11, 13, 2, 40, 3, 17, 23, 29, 31, 37, 41, 43, 47, 4, 8]

BASE = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 48, "vocab_size": 50,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
FAMILIES = {
    "qwen3": dict(BASE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", rope_theta=1e6,
                  tie_word_embeddings=True),
    "llama": dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", rope_theta=5e5,
                  rms_norm_eps=1e-5, eos_token_id=[1, 2, 3],
                  # every band of Llama 3's scaling at these positions: an original context of 8
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8}),
    "qwen3_moe": dict(BASE, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                      rope_theta=1e6, num_experts=6, num_experts_per_tok=2,
                      moe_intermediate_size=16, norm_topk_prob=True, decoder_sparse_step=1,
                      mlp_only_layers=[1], router_aux_loss_coef=0.001),
    "qwen3_moe_unnormalised": dict(BASE, architectures=["Qwen3MoeForCausalLM"],
                                   model_type="qwen3_moe", rope_theta=1e6, num_experts=5,
                                   num_experts_per_tok=3, moe_intermediate_size=16,
                                   norm_topk_prob=False, decoder_sparse_step=2),
    "deepseek_v3_moonlight": dict(
        BASE, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
        rope_theta=5e4, rms_norm_eps=1e-5, num_key_value_heads=4, q_lora_rank=None,
        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
        n_routed_experts=6, num_experts_per_tok=2, moe_intermediate_size=12, n_shared_experts=2,
        routed_scaling_factor=2.446, n_group=1, topk_group=1, topk_method="noaux_tc",
        scoring_func="sigmoid", norm_topk_prob=True, first_k_dense_replace=1, moe_layer_freq=1,
        num_nextn_predict_layers=0, rope_scaling=None),
    "deepseek_v3_yarn": dict(
        BASE, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
        num_hidden_layers=4, rope_theta=100.0, num_key_value_heads=4, q_lora_rank=12,
        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
        n_routed_experts=8, num_experts_per_tok=3, moe_intermediate_size=12, n_shared_experts=1,
        routed_scaling_factor=2.5, n_group=4, topk_group=2, topk_method="noaux_tc",
        scoring_func="sigmoid", norm_topk_prob=True, first_k_dense_replace=1, moe_layer_freq=1,
        rope_interleave=False, max_position_embeddings=256,
        # every pair kind of YaRN (kept, blended, slowed) and both of its magnitude corrections
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                      "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.707}),
    "deepseek_v3_unnormalised": dict(
        BASE, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
        num_hidden_layers=4, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=12, n_shared_experts=0,
        routed_scaling_factor=1.5, n_group=2, topk_group=1, norm_topk_prob=False,
        first_k_dense_replace=0, moe_layer_freq=2),
}
BAD = [
    ("top-k larger than the experts",
     dict(FAMILIES["qwen3_moe"], num_experts_per_tok=7), "num_experts_per_tok (7) is larger than num_experts (6)"),
    ("a missing rope_scaling field",
     dict(FAMILIES["llama"], rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                           "low_freq_factor": 1.0,
                                           "original_max_position_embeddings": 8}),
     "rope_scaling (llama3) has no high_freq_factor"),
    ("an unknown rope type",
     dict(FAMILIES["llama"], rope_scaling={"rope_type": "yarn", "factor": 4.0}),
     "rope_scaling.rope_type \"yarn\" is not supported"),
    ("a Qwen3-MoE without experts' sizes",
     {k: v for k, v in FAMILIES["qwen3_moe"].items() if k != "moe_intermediate_size"},
     "has no moe_intermediate_size"),
    ("groups that do not divide the experts",
     dict(FAMILIES["deepseek_v3_moonlight"], n_group=4), "n_group (4) must divide the routed experts (6)"),
    ("a DeepSeek-V3 without its latent rank",
     {k: v for k, v in FAMILIES["deepseek_v3_moonlight"].items() if k != "kv_lora_rank"},
     "has no kv_lora_rank"),
    ("another router", dict(FAMILIES["deepseek_v3_moonlight"], topk_method="greedy"),
     "topk_method \"greedy\" is not supported"),
]


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def randomise_score_biases(folder):
    """Gives every e_score_correction_bias (F32, written as zeros) values in [-0.2, 0.2], so the
    choice differs from the weights' order."""
    path = os.path.join(folder, "model.safetensors")
    data = bytearray(open(path, "rb").read())
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    seed = 12345
    for name, t in header.items():
        if not name.endswith("e_score_correction_bias"):
            continue
        assert t["dtype"] == "F32", t
        b, e = t["data_offsets"]
        for i in range(8 + n + b, 8 + n + e, 4):
            seed = (seed * 1103515245 + 12345) % 2 ** 31
            data[i:i + 4] = struct.pack("<f", (seed / 2 ** 31 - 0.5) * 0.4)
    open(path, "wb").write(bytes(data))
    # Edited: no longer the folder fp8rl wrote (it would refuse the changed CRC-32C).
    if os.path.exists(os.path.join(folder, "checksums.json")):
        os.remove(os.path.join(folder, "checksums.json"))


def read_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), 8 + n


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape, raw bytes)."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def check_deepseek_fp8(d):
    """DeepSeek-V3's published layout: every linear block-FP8 (kv_a_proj_with_mqa's 20 rows a
    partial tile), routers BF16, score-correction biases F32, a multi-token-prediction layer the
    loader skips with a note and convert passes through; FP8 -> FP8 gives the same bytes."""
    src = os.path.join(d, "deepseek_v3_yarn")
    ids = ",".join(map(str, IDS))
    before = run([FP8RL, "score", "--checkpoint", src, "--token-ids", ids, "--precision", "fp32",
                  "--backend", "cpu"])
    # A multi-token-prediction layer (layer 4 of a 4-layer decoder), as DeepSeek-V3 ships layer 61.
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["num_nextn_predict_layers"] = 1
    json.dump(cfg, open(os.path.join(src, "config.json"), "w"))
    path = os.path.join(src, "model.safetensors")
    header, start = read_header(path)
    data = open(path, "rb").read()
    tensors = {n: (t["dtype"], t["shape"], data[start + t["data_offsets"][0]:start + t["data_offsets"][1]])
               for n, t in header.items() if n != "__metadata__"}
    H = cfg["hidden_size"]
    tensors["model.layers.4.eh_proj.weight"] = ("F32", [H, 2 * H], struct.pack("<f", 0.5) * (2 * H * H))
    tensors["model.layers.4.enorm.weight"] = ("F32", [H], struct.pack("<f", 1.0) * H)
    write_safetensors(path, tensors)
    after = run([FP8RL, "score", "--checkpoint", src, "--token-ids", ids, "--precision", "fp32",
                 "--backend", "cpu"])
    ok = (before.returncode == 0 and after.returncode == 0
          and json.loads(after.stdout)["logprobs"] == json.loads(before.stdout)["logprobs"]
          and "multi-token-prediction layer" in after.stderr)
    a, b, c = (os.path.join(d, n) for n in ("ds-fp8", "ds-fp8-again", "ds-bf16"))
    r1 = run([FP8RL, "convert", "--checkpoint", src, "--to", "fp8", "--output", a])
    r2 = run([FP8RL, "convert", "--checkpoint", a, "--to", "fp8", "--output", b])
    r3 = run([FP8RL, "convert", "--checkpoint", a, "--to", "bf16", "--output", c])
    ok = ok and r1.returncode == 0 and r2.returncode == 0 and r3.returncode == 0
    if ok:
        h, _ = read_header(os.path.join(a, "model.safetensors"))
        hb, _ = read_header(os.path.join(c, "model.safetensors"))
        p = "model.layers.1."
        ok = (h[p + "self_attn.kv_a_proj_with_mqa.weight"]["dtype"] == "F8_E4M3"
              and h[p + "self_attn.kv_a_proj_with_mqa.weight_scale_inv"]["shape"] == [1, 1]
              and h[p + "self_attn.q_a_proj.weight"]["dtype"] == "F8_E4M3"
              and h[p + "mlp.shared_experts.up_proj.weight"]["dtype"] == "F8_E4M3"
              and h[p + "mlp.gate.weight"]["dtype"] == "BF16"
              and h[p + "mlp.gate.e_score_correction_bias"]["dtype"] == "F32"
              and h["model.layers.4.eh_proj.weight"]["dtype"] == "F32"
              and hb["model.layers.4.eh_proj.weight"]["dtype"] == "BF16"
              and hb[p + "mlp.gate.e_score_correction_bias"]["dtype"] == "F32"
              and open(os.path.join(a, "model.safetensors"), "rb").read()
              == open(os.path.join(b, "model.safetensors"), "rb").read())
    print("%s deepseek_v3 FP8 export: latent attention and experts FP8 (partial tiles), routers "
          "BF16, biases F32, the MTP layer skipped with a note and passed through, re-export "
          "identical %s" % ("ok  " if ok else "FAIL",
                            (after.stderr if not ok else "") + r1.stderr.strip()[:0]))
    return not ok


def main():
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        for name, cfg in FAMILIES.items():
            path = os.path.join(d, name + ".json")
            json.dump(cfg, open(path, "w"))
            folder = os.path.join(d, name)
            r = run([FP8RL, "init", "--config", path, "--output", folder, "--init-std", "0.3",
                     "--seed", "3"])
            if r.returncode != 0:
                print("FAIL %s: init: %s" % (name, r.stderr.strip()))
                failed += 1
                continue
            randomise_score_biases(folder)
            ids = ",".join(map(str, IDS))
            r = run([FP8RL, "score", "--checkpoint", folder, "--token-ids", ids, "--precision",
                     "fp32", "--backend", "cpu"])
            ref = run([sys.executable, os.path.join(HERE, "hf_reference.py"), folder, ids])
            if r.returncode != 0 or ref.returncode != 0:
                print("FAIL %s: %s %s" % (name, r.stderr.strip(), ref.stderr.strip()))
                failed += 1
                continue
            got = json.loads(r.stdout)["logprobs"]
            want = json.loads(ref.stdout)["logprobs"]
            err = max(abs(a - b) for a, b in zip(got, want))
            spread = max(want) - min(want)
            ok = len(got) == len(want) and err < 1e-4 and spread > 0.5
            print("%s %s: max |fp8rl − reference| %.2e over %d log-probs (spread %.2f)"
                  % ("ok  " if ok else "FAIL", name, err, len(got), spread))
            failed += not ok
        # Qwen3-MoE in the layout of Qwen3-30B-A3B-FP8: each expert's linears block-FP8 with
        # their own scales, the routers BF16 and listed unconverted; exporting the export again
        # gives the same bytes.
        moe = os.path.join(d, "qwen3_moe")
        a, b = os.path.join(d, "moe-fp8"), os.path.join(d, "moe-fp8-again")
        r1 = run([FP8RL, "convert", "--checkpoint", moe, "--to", "fp8", "--output", a])
        r2 = run([FP8RL, "convert", "--checkpoint", a, "--to", "fp8", "--output", b])
        ok = r1.returncode == 0 and r2.returncode == 0
        if ok:
            with open(os.path.join(a, "model.safetensors"), "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(n))
            q = json.load(open(os.path.join(a, "config.json")))["quantization_config"]
            ok = (header["model.layers.0.mlp.experts.5.up_proj.weight"]["dtype"] == "F8_E4M3"
                  and "model.layers.0.mlp.experts.5.up_proj.weight_scale_inv" in header
                  and header["model.layers.0.mlp.gate.weight"]["dtype"] == "BF16"
                  and "model.layers.0.mlp.gate" in q["modules_to_not_convert"]
                  and open(os.path.join(a, "model.safetensors"), "rb").read()
                  == open(os.path.join(b, "model.safetensors"), "rb").read())
        print("%s qwen3_moe FP8 export: experts FP8 with their scales, routers BF16, re-export "
              "identical %s" % ("ok  " if ok else "FAIL", (r1.stderr + r2.stderr).strip()))
        failed += not ok
        failed += check_deepseek_fp8(d)
        for what, cfg, says in BAD:
            path = os.path.join(d, "bad.json")
            json.dump(cfg, open(path, "w"))
            r = run([FP8RL, "init", "--config", path, "--output", os.path.join(d, "bad")])
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            ok = r.returncode != 0 and len(lines) == 1 and says in lines[0]
            print("%s %s: %s" % ("ok  " if ok else "FAIL", what, lines[0] if lines else "(no error)"))
            failed += not ok
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)


main()
