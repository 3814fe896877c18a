#!/usr/bin/python3
"""TensorBoard event files made by an independent writer, through `fp8rl runs import`, and our
runs out through `fp8rl runs export --tensorboard`, read back by an independent reader.

The writer and reader here are Debian's python3-protobuf with TensorBoard's published .proto
definitions (proto/, compiled with protoc at test time) and a CRC-32C written from its
definition; the C++ side (engine/tblog) shares nothing with them. Checked: NeMo RL's layout
(simple_value scalars as PyTorch's add_scalar writes them, tensor scalars as TensorFlow 2 and
PyTorch's new_style write them, with the plugin metadata on the first value only, a histogram,
text, the hyperparameters PyTorch's add_hparams puts in a folder of their own), names mapped to
ours, a config.yaml beside a verl-style run, a file with a bad CRC and a truncated last record
(every intact record kept, one warning), `fp8rl compare` and `fp8rl report` on imported runs,
a run followed live while it grows, and export → independent read → import equal to the
original, bit for bit.

usage: test_tensorboard_files.py FP8RL_EXECUTABLE
"""
import json
import math
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["types.proto", "tensor_shape.proto", "resource_handle.proto", "tensor.proto",
          "histogram.proto", "summary.proto", "event.proto", "plugin_data.proto"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


# --- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord framing.
def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    return t


TABLE = _table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload):
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked(header)) + payload + struct.pack("<I", masked(payload))


def read_records(data):
    out, at = [], 0
    while at + 12 <= len(data):
        header = data[at:at + 8]
        check(struct.unpack("<I", data[at + 8:at + 12])[0] == masked(header), "length CRC")
        n = struct.unpack("<Q", header)[0]
        payload = data[at + 12:at + 12 + n]
        check(struct.unpack("<I", data[at + 12 + n:at + 16 + n])[0] == masked(payload), "data CRC")
        out.append(payload)
        at += 16 + n
    check(at == len(data), "trailing bytes after the last record")
    return out


def main():
    exe = sys.argv[1]
    check(crc32c(b"123456789") == 0xE3069283, "the test's own CRC-32C")
    tmp = tempfile.mkdtemp(prefix="fp8rl-tblog-")
    gen = os.path.join(tmp, "pb")
    os.makedirs(gen)
    subprocess.run(["protoc", "-I", os.path.join(HERE, "proto"), "--python_out=" + gen] + PROTOS,
                   check=True)
    sys.path.insert(0, gen)
    import event_pb2  # noqa: E402
    import plugin_data_pb2  # noqa: E402
    import summary_pb2  # noqa: E402
    import types_pb2  # noqa: E402

    def event(wall, step, **kw):
        e = event_pb2.Event(wall_time=wall, step=step, **kw)
        return e

    def file_version(wall):
        return record(event(wall, 0, file_version="brain.Event:2").SerializeToString())

    def simple(wall, step, tag, value):
        e = event(wall, step)
        e.summary.value.add(tag=tag, simple_value=value)
        return record(e.SerializeToString())

    def tensor_scalar(wall, step, tag, value, dtype, with_metadata):
        e = event(wall, step)
        v = e.summary.value.add(tag=tag)
        if with_metadata:
            v.metadata.plugin_data.plugin_name = "scalars"
            v.metadata.data_class = summary_pb2.DATA_CLASS_SCALAR
        v.tensor.dtype = dtype
        if dtype == types_pb2.DT_FLOAT:
            v.tensor.tensor_content = struct.pack("<f", value)
        else:
            v.tensor.double_val.append(value)
        return record(e.SerializeToString())

    def db_rows(db, sql, *args):
        con = sqlite3.connect(db)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()

    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]

    # --- NeMo RL's layout: logs/exp_001/tensorboard/events…, hparams in a folder of their own.
    logs = os.path.join(tmp, "logs")
    tb = os.path.join(logs, "exp_001", "tensorboard")
    os.makedirs(os.path.join(tb, "1700000001.25"))
    t0 = 1700000000.0
    data = file_version(t0)
    expected = {}  # stored name → {step: value}
    for step in range(1, 6):
        wall = t0 + 10 * step
        for tag, ours, value in [("train/token_mult_prob_error", "token_mult_prob_error", 1 + 0.01 * step),
                                 ("train/gen_kl_error", "gen_kl_error", 0.001 * step),
                                 ("train/reward", "reward/mean", 0.1 * step),
                                 ("timing/train/total_step_time", "time/total_step", 3.25 + step),
                                 ("train/custom_metric", "train/custom_metric", -step / 3.0)]:
            data += simple(wall, step, tag, value)
            expected.setdefault(ours, {})[step] = f32(value)
        # TensorFlow 2 style: DT_DOUBLE, the plugin named on the tag's first value only.
        data += tensor_scalar(wall, step, "validation/accuracy", 0.5 + step / 7.0,
                              types_pb2.DT_DOUBLE, step == 1)
        expected.setdefault("accuracy/validation", {})[step] = 0.5 + step / 7.0
        # PyTorch's new_style: a DT_FLOAT tensor in tensor_content, metadata every time.
        data += tensor_scalar(wall, step, "train/new_style", step * 0.3, types_pb2.DT_FLOAT, True)
        expected.setdefault("train/new_style", {})[step] = f32(step * 0.3)
    # A histogram as PyTorch's add_histogram writes it (numpy bins; an empty first bucket).
    e = event(t0 + 60, 5)
    h = e.summary.value.add(tag="train/advantages").histo
    h.min, h.max, h.num = -1.0, 2.0, 10
    h.bucket_limit.extend([-1.0, 0.0, 1.0, 2.0])
    h.bucket.extend([0, 3, 5, 2])
    data += record(e.SerializeToString())
    # Text.
    e = event(t0 + 61, 5)
    v = e.summary.value.add(tag="samples/first")
    v.metadata.plugin_data.plugin_name = "text"
    v.tensor.dtype = types_pb2.DT_STRING
    v.tensor.string_val.append(b"What is 2+2? 4")
    data += record(e.SerializeToString())
    with open(os.path.join(tb, "events.out.tfevents.1700000000.node1.42.0"), "wb") as f:
        f.write(data)
    # add_hparams: a folder of its own holding the session start info.
    hp = plugin_data_pb2.HParamsPluginData(version=0)
    hp.session_start_info.hparams["policy.model_name"].string_value = "Qwen/Qwen3-0.6B"
    hp.session_start_info.hparams["grpo.num_generations_per_prompt"].number_value = 16
    hp.session_start_info.hparams["loss_fn.use_importance_sampling_correction"].bool_value = True
    e = event(t0 + 1.25, 0)
    v = e.summary.value.add(tag="_hparams_/session_start_info")
    v.metadata.plugin_data.plugin_name = "hparams"
    v.metadata.plugin_data.content = hp.SerializeToString()
    with open(os.path.join(tb, "1700000001.25", "events.out.tfevents.1700000001.node1.42.1"), "wb") as f:
        f.write(file_version(t0 + 1.25) + record(e.SerializeToString()))

    # verl-style: a config.yaml in the folder above the event files.
    verl = os.path.join(logs, "verl_gsm8k")
    os.makedirs(os.path.join(verl, "tensorboard_log"))
    with open(os.path.join(verl, "config.yaml"), "w") as f:
        f.write("actor_rollout_ref:\n  model:\n    path: Qwen/Qwen2.5-0.5B\n  rollout:\n"
                "    name: vllm\ntrainer:\n  total_epochs: 2\n")
    data = file_version(t0)
    for step in range(1, 4):
        data += simple(t0 + step, step, "critic/score/mean", 0.2 * step)
        data += simple(t0 + step, step, "val-core/openai/gsm8k/acc/mean@1", 0.3 * step)
        data += simple(t0 + step, step, "training/rollout_probs_diff_mean", 0.01 * step)
    with open(os.path.join(verl, "tensorboard_log", "events.out.tfevents.1700000000.node2.7.0"), "wb") as f:
        f.write(data)

    # A damaged file: a bad data CRC in the third record, and a truncated last record.
    bad = os.path.join(logs, "damaged")
    os.makedirs(bad)
    recs = [file_version(t0)] + [simple(t0 + s, s, "train/reward", s * 0.25) for s in range(1, 7)]
    corrupt = bytearray(recs[3])
    corrupt[-6] ^= 0x40  # a payload byte: the data CRC no longer holds
    recs[3] = bytes(corrupt)
    blob = b"".join(recs[:-1]) + recs[-1][:-7]  # the last record cut short
    with open(os.path.join(bad, "events.out.tfevents.1700000000.node3.9.0"), "wb") as f:
        f.write(blob)

    db = os.path.join(tmp, "runs.sqlite")
    r = subprocess.run([exe, "runs", "import", logs, "--db", db, "--tag", "nemo-rl", "--tag", "import-test"],
                       capture_output=True, text=True)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "import exit code %d" % r.returncode)
    warnings = [l for l in r.stderr.splitlines() if "warning" in l]
    check(len(warnings) == 1, "one warning (the damaged file), got %d" % len(warnings))
    check("bad CRC" in warnings[0] and "truncated" in warnings[0] and "damaged" in warnings[0],
          "the warning names the file, the bad CRC and the truncation: " + warnings[0])

    runs = {name: (rid, status, source, config, tags)
            for rid, name, status, source, config, tags in
            db_rows(db, "SELECT id, name, status, source, config, tags FROM runs")}
    check(set(runs) == {"exp_001", "verl_gsm8k/tensorboard_log", "damaged"},
          "runs imported: %s" % sorted(runs))
    rid, status, source, config, tags = runs["exp_001"]
    check(status == "finished" and source == "tensorboard", "exp_001 finished, from tensorboard")
    check(tags == "nemo-rl, import-test", "tags: " + tags)
    cfg = json.loads(config)
    check(cfg == {"policy": {"model_name": "Qwen/Qwen3-0.6B"},
                  "grpo": {"num_generations_per_prompt": 16},
                  "loss_fn": {"use_importance_sampling_correction": True}},
          "exp_001's configuration from its hyperparameters: " + config)
    for name, by_step in expected.items():
        got = db_rows(db, "SELECT step, value FROM scalars WHERE run_id = ? AND key = ? ORDER BY step",
                      rid, name)
        check(got == sorted(by_step.items()), "%s: %s, expected %s" % (name, got, sorted(by_step.items())))
    walls = db_rows(db, "SELECT DISTINCT wall FROM scalars WHERE run_id = ? AND step = 2", rid)
    check(walls == [(20.0,)], "wall time since the run started: %s" % walls)
    hist = db_rows(db, "SELECT step, edges, counts FROM histograms WHERE run_id = ?", rid)
    check(len(hist) == 1 and hist[0][0] == 5 and json.loads(hist[0][1]) == [-1, 0, 1, 2]
          and json.loads(hist[0][2]) == [0, 3, 5, 2, 0], "the histogram: %s" % hist)
    text = db_rows(db, "SELECT step, kind, message FROM events WHERE run_id = ?", rid)
    check(text == [(5, "text", "samples/first: What is 2+2? 4")], "the text: %s" % text)
    check(db_rows(db, "SELECT last_step, started_at, ended_at FROM runs WHERE id = ?", rid) ==
          [(5, t0, t0 + 61)], "last step, start and end")

    vid = runs["verl_gsm8k/tensorboard_log"][0]
    check(json.loads(runs["verl_gsm8k/tensorboard_log"][3])["actor_rollout_ref"]["rollout"]["name"] == "vllm",
          "verl's config.yaml read from the folder above")
    keys = [k for (k,) in db_rows(db, "SELECT DISTINCT key FROM scalars WHERE run_id = ? ORDER BY key", vid)]
    check(keys == ["accuracy/validation", "reward/mean", "training/rollout_probs_diff_mean"],
          "verl names mapped (a look-alike kept): %s" % keys)

    did = runs["damaged"][0]
    got = db_rows(db, "SELECT step FROM scalars WHERE run_id = ? ORDER BY step", did)
    check(got == [(1,), (2,), (4,), (5,)], "every intact record of the damaged file: %s" % got)

    # The verdict and the report read imported runs as they read ours.
    r = subprocess.run([exe, "compare", "--group", "runs:%d" % rid, "--group", "runs:%d" % vid,
                        "--json", "--db", db], capture_output=True, text=True)
    check(r.returncode == 0, "compare: " + r.stderr)
    groups = json.loads(r.stdout)["groups"]
    check(groups[0]["runs"][0]["final_validation"] == 0.5 + 5 / 7.0
          and groups[1]["runs"][0]["final_validation"] == f32(0.3 * 3)
          and groups[0]["runs"][0]["step_time"] == sum(f32(3.25 + s) for s in range(1, 6)) / 5,
          "compare's outcomes of imported runs: %s" % groups)
    report = os.path.join(tmp, "report.html")
    r = subprocess.run([exe, "report", "--group", "runs:%d" % rid, "--group", "runs:%d" % vid,
                        "--out", report, "--db", db], capture_output=True, text=True)
    check(r.returncode == 0 and "exp_001" in open(report).read(), "report: " + r.stderr)

    # Importing again adds nothing.
    r = subprocess.run([exe, "runs", "import", logs, "--db", db], capture_output=True, text=True)
    check(r.returncode == 0 and "no new records" in r.stdout, "a second import adds nothing: " + r.stdout)
    check(db_rows(db, "SELECT count(*) FROM scalars")[0][0] == 5 * 7 + 9 + 4, "no row twice")

    # --- Following a run that grows: live while followed, finished when stopped.
    live = os.path.join(tmp, "live")
    os.makedirs(live)
    live_db = os.path.join(tmp, "live.sqlite")
    path = os.path.join(live, "events.out.tfevents.1700000000.node4.1.0")
    first = file_version(t0) + b"".join(simple(t0 + s, s, "train/reward", s / 8.0) for s in range(1, 4))
    half = simple(t0 + 4, 4, "train/reward", 0.5)
    with open(path, "wb") as f:
        f.write(first + half[:10])  # a record still being written
    p = subprocess.Popen([exe, "runs", "import", live, "--follow", "--interval", "0.1", "--db", live_db],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for(cond, what, seconds=15):
        end = time.time() + seconds
        while time.time() < end:
            try:
                if cond():
                    return
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        p.kill()
        fail("timed out waiting for " + what)

    wait_for(lambda: db_rows(live_db, "SELECT status, last_step FROM runs") == [("running", 3)],
             "the followed run, live at step 3")
    with open(path, "ab") as f:
        f.write(half[10:] + simple(t0 + 5, 5, "train/reward", 0.625))
    wait_for(lambda: db_rows(live_db, "SELECT last_step FROM runs") == [(5,)], "steps 4 and 5")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=15)
    check(p.returncode == 0, "follow exit code %d: %s" % (p.returncode, err))
    check(err.strip() == "", "no warning for a record being written: " + err)
    check(db_rows(live_db, "SELECT status, ended_at FROM runs") == [("finished", t0 + 5)],
          "finished when no longer followed")
    check(db_rows(live_db, "SELECT step, value FROM scalars WHERE key = 'reward/mean' ORDER BY step") ==
          [(s, s / 8.0) for s in range(1, 6)], "every step of the followed run")

    # --- Export: read back by the independent reader, then imported again: the same rows.
    out_dir = os.path.join(tmp, "export")
    r = subprocess.run([exe, "runs", "export", str(rid), "--tensorboard", out_dir, "--db", db],
                       capture_output=True, text=True)
    check(r.returncode == 0, "export: " + r.stdout + r.stderr)
    files = [f for f in os.listdir(out_dir) if f.startswith("events.out.tfevents.")]
    check(len(files) == 1, "one event file exported: %s" % files)
    with open(os.path.join(out_dir, files[0]), "rb") as f:
        payloads = read_records(f.read())
    events = [event_pb2.Event.FromString(x) for x in payloads]
    check(events[0].file_version == "brain.Event:2", "the first record is the file version")
    read = {}
    hists = []
    for ev in events[1:]:
        for v in ev.summary.value:
            if v.HasField("histo"):
                hists.append((ev.step, v.tag, list(v.histo.bucket_limit), list(v.histo.bucket)))
            else:
                check(v.metadata.plugin_data.plugin_name == "scalars"
                      and v.tensor.dtype == types_pb2.DT_DOUBLE and len(v.tensor.double_val) == 1,
                      "a scalar as a DT_DOUBLE tensor of the scalars plugin")
                read.setdefault(v.tag, {})[ev.step] = v.tensor.double_val[0]
    for name, by_step in expected.items():
        check(read.get(name) == by_step, "exported %s: %s" % (name, read.get(name)))
    check(hists == [(5, "train/advantages", [-1.0, 0.0, 1.0, 2.0, sys.float_info.max], [0, 3, 5, 2, 0])],
          "exported histogram: %s" % hists)
    back_db = os.path.join(tmp, "back.sqlite")
    r = subprocess.run([exe, "runs", "import", out_dir, "--db", back_db], capture_output=True, text=True)
    check(r.returncode == 0 and "warning" not in r.stderr, "import of the export: " + r.stdout + r.stderr)
    q = "SELECT step, key, value, nonfinite FROM scalars WHERE run_id = ? ORDER BY key, step"
    (bid,) = db_rows(back_db, "SELECT id FROM runs")[0]
    check(db_rows(back_db, q, bid) == db_rows(db, q, rid), "scalars equal after export → import")
    qh = "SELECT step, name, edges, counts FROM histograms WHERE run_id = ? ORDER BY name, step"
    check(db_rows(back_db, qh, bid) == db_rows(db, qh, rid), "histograms equal after export → import")
    qr = "SELECT name, config, tags FROM runs WHERE id = ?"
    check(db_rows(back_db, qr, bid) == db_rows(db, qr, rid), "name, configuration and tags kept")
    qw = "SELECT wall FROM scalars WHERE run_id = ? ORDER BY key, step"
    for (a,), (b,) in zip(db_rows(back_db, qw, bid), db_rows(db, qw, rid)):
        check(abs(a - b) <= 1e-6, "wall times within a microsecond: %r %r" % (a, b))
    print("ok: %d runs imported, a run followed live, export read back and imported equal" % len(runs))


if __name__ == "__main__":
    main()
