#!/usr/bin/python3
"""A client written from docs/protocol.md alone (Python + Debian's python3-zmq).

Launches a real `fp8rl worker`, says hello, starts a short demo run, reads telemetry, pauses,
changes a layer's precision, resumes, and stops; then checks the database shows the precision
event and the changed precision. Usage: test_worker_protocol.py FP8RL_BINARY SCENARIO
SCENARIO: drive | fuzz | crash.
"""
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

import zmq

FP8RL = sys.argv[1]
SCENARIO = sys.argv[2] if len(sys.argv) > 2 else "drive"


WORKERS = []


def fail(msg):
    print("FAIL:", msg)
    for w in WORKERS:  # a failed check must not leave a worker serving forever
        if w.poll() is None:
            w.kill()
    sys.exit(1)


def start_worker(db):
    w = subprocess.Popen([FP8RL, "worker", "--db", db, "--backend", "cpu"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    WORKERS.append(w)
    line = w.stdout.readline()
    if not line:
        fail("worker printed no endpoints")
    return w, json.loads(line)


class Client:
    def __init__(self, ep):
        self.ctx = zmq.Context()
        self.ctl = self.ctx.socket(zmq.DEALER)
        self.ctl.setsockopt(zmq.LINGER, 0)
        self.ctl.connect(ep["control"])
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(ep["telemetry"])
        self.n = 0

    def request(self, command, timeout=10.0, **fields):
        self.n += 1
        rid = "r%d" % self.n
        msg = {"protocol": 1}
        msg.update(fields)
        msg.update(id=rid, command=command)
        self.ctl.send_string(json.dumps(msg))
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.ctl.poll(int((deadline - time.time()) * 1000) + 1):
                reply = json.loads(self.ctl.recv_string())
                if reply.get("id") == rid:
                    return reply
        fail("no reply to %s within %.0f s" % (command, timeout))

    def next(self, timeout=10.0):
        if not self.sub.poll(int(timeout * 1000)):
            fail("no telemetry for %.0f s" % timeout)
        topic, payload = self.sub.recv_multipart()
        return topic.decode(), json.loads(payload)

    def wait_for(self, pred, timeout=60.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            topic, msg = self.next()
            if pred(topic, msg):
                return topic, msg
        fail("condition not met within %.0f s" % timeout)


def drive(db):
    w, ep = start_worker(db)
    c = Client(ep)
    hello = c.request("hello")
    if not hello["ok"] or hello["protocol"] != 1 or "backend" not in hello:
        fail("bad hello %r" % hello)
    bad = c.request("hello", protocol=2)
    if bad["ok"] or "protocol version mismatch" not in bad["error"]:
        fail("protocol mismatch not reported: %r" % bad)
    if c.request("pause")["ok"]:
        fail("pause before start accepted")
    r = c.request("start", preset="demo", set=["sft.steps=1", "grpo.steps=200", "grpo.prompts_per_step=4"])
    if not r["ok"]:
        fail("start refused: %r" % r)
    if c.request("start", preset="demo")["ok"]:
        fail("second start accepted")
    # Telemetry flows: a heartbeat and steps.
    c.wait_for(lambda t, m: t == "heartbeat")
    c.wait_for(lambda t, m: t == "step" and m["phase"] == "rl" and m["step"] >= 2)
    if not c.request("pause")["ok"]:
        fail("pause refused")
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "pause")
    if c.request("status")["state"] != "paused":
        fail("not paused")
    # Heartbeats continue while paused.
    c.wait_for(lambda t, m: t == "heartbeat" and m["state"] == "paused", timeout=5)
    bad = c.request("set_precision", overrides=["9.gate=bf16"])
    if bad["ok"] or "layer '9'" not in bad["error"]:
        fail("bad layer not refused: %r" % bad)
    if not c.request("set_precision", overrides=["0.gate=bf16"])["ok"]:
        fail("set_precision refused")
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "precision")
    if ev["map"][0]["gate"] != "bf16" or ev["map"][1]["gate"] != "fp8":
        fail("precision map in the event is wrong: %r" % ev["map"])
    if not c.request("set", key="lr", value=0.0002)["ok"]:
        fail("set lr refused")
    if c.request("set", key="learning_rate", value=1)["ok"]:
        fail("unknown setting accepted")
    if not c.request("resume")["ok"]:
        fail("resume refused")
    _, step = c.wait_for(lambda t, m: t == "step" and m["phase"] == "rl")
    if "bf16" not in step["precision"]:
        fail("next step's telemetry does not show the change: %r" % step["precision"])
    run_id = step["run_id"]
    if not c.request("stop")["ok"]:
        fail("stop refused")
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "stop")
    if w.wait(timeout=30) != 0:
        fail("worker exit code %d" % w.returncode)
    con = sqlite3.connect(db)
    status, summary, ckpt = con.execute(
        "SELECT status, precision_summary, checkpoint_dir FROM runs WHERE id=?", (run_id,)).fetchone()
    if status != "stopped" or "bf16" not in summary or not ckpt:
        fail("database row: %r %r %r" % (status, summary, ckpt))
    kinds = [k for (k,) in con.execute("SELECT kind FROM events WHERE run_id=? ORDER BY rowid", (run_id,))]
    for k in ("start", "pause", "precision", "resume", "checkpoint", "stop"):
        if k not in kinds:
            fail("event %s missing from the database: %r" % (k, kinds))
    maps = con.execute("SELECT map FROM precision_history WHERE run_id=?", (run_id,)).fetchall()
    if len(maps) < 2 or json.loads(maps[-1][0])[0]["gate"] != "bf16":
        fail("precision history: %r" % maps)
    print("drive: ok (%d events)" % len(kinds))


def fuzz(db):
    w, ep = start_worker(db)
    c = Client(ep)
    if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000", "grpo.prompts_per_step=2"])["ok"]:
        fail("start refused")
    c.wait_for(lambda t, m: t == "step")
    rng = random.Random(7)
    raw = c.ctx.socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.connect(ep["control"])
    good = json.dumps({"id": 1, "command": "status"}).encode()
    samples = [b"", b"{", b"[]", b"null", b'{"id": {}}', b'{"id": 1}', b'{"id": 1, "command": 5}',
               b'{"id": 1, "command": "nope"}', b'{"id": 1, "command": "set", "key": 3}',
               b'{"id": 1, "command": "set_precision", "overrides": "x"}', b"\xff\xfe" * 10,
               b"x" * (2 << 20)]
    sent = 0
    deadline = time.time() + 8
    while time.time() < deadline:
        kind = rng.random()
        if kind < 0.4:
            msg = rng.choice(samples)
        elif kind < 0.8:
            b = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            msg = bytes(b)
        else:
            msg = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        frames = [msg] if rng.random() < 0.8 else [b"", msg, b"extra"]
        raw.send_multipart(frames)
        sent += 1
        while raw.poll(0):
            raw.recv_multipart()
    # Afterwards every well-formed request is answered, and no step was lost.
    st = c.request("status")
    if not st["ok"] or st["state"] not in ("running", "paused"):
        fail("status after fuzz: %r" % st)
    before = st["step"]
    c.wait_for(lambda t, m: t == "step" and m["step"] > before + 1)
    if not c.request("stop")["ok"]:
        fail("stop after fuzz refused")
    w.wait(timeout=30)
    con = sqlite3.connect(db)
    steps = [s for (s,) in con.execute(
        "SELECT DISTINCT step FROM scalars WHERE run_id=? ORDER BY step", (st["run_id"],))]
    if steps != list(range(1, len(steps) + 1)):
        fail("steps missing in the database: %r" % steps[:20])
    print("fuzz: ok (%d messages, %d steps recorded, %d dropped)" % (sent, len(steps), st["dropped_requests"]))


def crash(db):
    w, ep = start_worker(db)
    c = Client(ep)
    if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000", "grpo.prompts_per_step=2"])["ok"]:
        fail("start refused")
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= 3)
    run_id = m["run_id"]
    c.ctx.destroy(linger=0)  # the client goes away: the worker must not mind
    time.sleep(0.5)
    if w.poll() is not None:
        fail("worker died with its client")
    os.kill(w.pid, signal.SIGKILL)
    w.wait()
    check = subprocess.run([FP8RL, "runs", "check", "--db", db], capture_output=True, text=True)
    if check.stdout.strip() != "ok":
        fail("integrity: %r" % check.stdout)
    listing = subprocess.run([FP8RL, "runs", "list", "--db", db], capture_output=True, text=True).stdout
    if "crashed" not in listing:
        fail("run not marked crashed:\n" + listing)
    con = sqlite3.connect(db)
    last = con.execute("SELECT last_step FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    steps = [s for (s,) in con.execute("SELECT DISTINCT step FROM scalars WHERE run_id=? ORDER BY step", (run_id,))]
    if steps != list(range(1, last + 1)) or last < 3:
        fail("completed steps lost: last %r steps %r" % (last, steps))
    print("crash: ok (last completed step %d kept)" % last)


with tempfile.TemporaryDirectory() as d:
    {"drive": drive, "fuzz": fuzz, "crash": crash}[SCENARIO](os.path.join(d, "runs.sqlite"))
print("1 passed, 0 failed")
