#!/usr/bin/python3
"""A client written from docs/protocol.md alone (Python + Debian's python3-zmq).

Launches a real `fp8rl worker`, says hello, starts a short demo run, reads telemetry, pauses,
changes a layer's precision, resumes, and stops; then checks the database shows the precision
event and the changed precision. Usage: test_worker_protocol.py FP8RL_BINARY SCENARIO
SCENARIO: drive | fuzz | crash | multi (three workers on one database at once) | sockets (what
a worker listens on) | remote (a worker bound beyond loopback: CURVE, keys, refused clients) |
files (what a run leaves on disk is the user's alone; fp8rl doctor) | privacy (another account
of this machine can neither steer nor read a run; needs root to make that account) | disk_full
(a run that fills the disk says what to do, and resumes once space is freed) | sweep_steer (a
sweep's run paused, edited and stopped from a client) | autopilot_resume (the precision autopilot's
decision and memory survive kill -9; its settings edited live; a person's edit wins).
"""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

import zmq

FP8RL = sys.argv[1]
SCENARIO = sys.argv[2] if len(sys.argv) > 2 else "drive"
# This test's own CURVE keys (workers on shared sockets use them), never the user's.
KEYS = os.path.join(tempfile.mkdtemp(prefix="fp8rl-test-keys-"), "keys")
os.environ["FP8RL_KEYS"] = KEYS


WORKERS = []


def fail(msg):
    print("FAIL:", msg)
    for w in WORKERS:  # a failed check must not leave a worker serving forever
        if w.poll() is None:
            w.kill()
    sys.exit(1)


def start_worker(db, extra=(), env=None):
    """db "": extra says where the run is recorded (--db PATH or --no-db)."""
    w = subprocess.Popen([FP8RL, "worker", *(("--db", db) if db else ()), "--backend", "cpu", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    WORKERS.append(w)
    line = w.stdout.readline()
    if not line:
        fail("worker printed no endpoints")
    return w, json.loads(line)


class Client:
    def __init__(self, ep, curve="auto"):
        """curve: (server public key, client public key, client secret key), Z85 text; None: a
        plain client; "auto": this install's client key when the worker has a server key."""
        if curve == "auto":
            curve = (ep["server_key"],) + read_pair(os.path.join(KEYS, "client.key")) \
                if "server_key" in ep else None
        self.ctx = zmq.Context()
        self.ctl = self.ctx.socket(zmq.DEALER)
        self.sub = self.ctx.socket(zmq.SUB)
        for s in (self.ctl, self.sub):
            s.setsockopt(zmq.LINGER, 0)
            if curve:
                s.curve_serverkey, s.curve_publickey, s.curve_secretkey = (k.encode() for k in curve)
        self.ctl.connect(ep["control"])
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(ep["telemetry"])
        self.n = 0

    def answers(self, timeout=2.0):
        """Whether the worker answers a hello at all (a refused handshake: never)."""
        self.ctl.send_string(json.dumps({"id": "probe", "command": "hello", "protocol": 3}))
        return bool(self.ctl.poll(int(timeout * 1000)))

    def request(self, command, timeout=10.0, **fields):
        self.n += 1
        rid = "r%d" % self.n
        msg = {"protocol": 3}
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
    if not hello["ok"] or hello["protocol"] != 3 or "backend" not in hello:
        fail("bad hello %r" % hello)
    bad = c.request("hello", protocol=99)
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
    bad = c.request("edit", precision=["9.gate=bf16"])
    if bad["ok"] or "the model has 2 layers" not in bad["error"]:
        fail("bad layer not refused: %r" % bad)
    # One edit is refused whole: its valid part is not applied either.
    bad = c.request("edit", precision=["0.q=bf16"], settings={"is_max": 0.5})
    if bad["ok"] or "bad value for is_max" not in bad["error"]:
        fail("edit with a bad setting not refused: %r" % bad)
    r = c.request("edit", precision=["0.gate=bf16"], settings={"lr": 0.0002})
    if not r["ok"] or r["edit"] != {"precision": ["0.gate=bf16"], "settings": {"lr": 0.0002}}:
        fail("edit refused or not acknowledged with what it applies: %r" % r)
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "precision")
    if ev["data"][0]["gate"] != "bf16" or ev["data"][1]["gate"] != "fp8" or ev["data"][0]["q"] != "fp8":
        fail("precision map in the event is wrong: %r" % ev["data"])
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "set" and m["data"] == {"key": "lr", "value": 0.0002})
    st = c.request("status")
    if st["settings"]["lr"] != 0.0002 or st["precision_map"][0]["gate"] != "bf16":
        fail("status does not show the edit in force: %r" % st)
    # The one-part forms of protocol 2 are the same edit.
    if not c.request("set_precision", overrides=["1.up=bf16"])["ok"]:
        fail("set_precision refused")
    if not c.request("set", key="temperature", value=0.9)["ok"]:
        fail("set refused")
    if c.request("edit")["ok"] or c.request("edit", settings={"lr": "fast"})["ok"]:
        fail("empty or mistyped edit accepted")
    if c.request("set", key="learning_rate", value=1)["ok"]:
        fail("unknown setting accepted")
    # Values the run cannot take are refused when they arrive; the run goes on (these two were
    # once accepted and failed the whole run at the next step).
    for key, value, says in (("lr", 1e300, "bad value for lr"), ("is_min", 1e300, "bad value for is_min"),
                             ("is_max", 0.5, "bad value for is_max"), ("temperature", -1, "temperature"),
                             ("validation_every", 2.5, "whole number"), ("lr", "fast", "number")):
        r = c.request("set", key=key, value=value)
        if r["ok"] or says not in r.get("error", ""):
            fail("set %s=%r not refused with '%s': %r" % (key, value, says, r))
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


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


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
               b"x" * (2 << 20),
               # Well-formed JSON, wrong types and values, and commands out of order.
               b'{"id": 2, "command": "set", "key": "lr", "value": "fast"}',
               b'{"id": 2, "command": "set", "key": "lr", "value": 1e300}',
               b'{"id": 2, "command": "set", "key": "is_min", "value": -1}',
               b'{"id": 2, "command": "set_precision", "overrides": [1, 2]}',
               b'{"id": 2, "command": "set_precision", "overrides": ["99.q=bf16"]}',
               b'{"id": 2, "command": "edit", "precision": "0.q=bf16", "settings": []}',
               b'{"id": 2, "command": "edit", "settings": {"lr": 0.1, "is_max": 0.2}}',
               b'{"id": 2, "command": "edit", "precision": ["0.q=bf16"], "extra": 1}',
               b'{"id": 2, "command": "start", "preset": "demo"}',
               b'{"id": 2, "command": "resume"}', b'{"id": 2, "command": "hello", "protocol": "2"}',
               b'{"id": 2, "command": "status", "protocol": 1}',
               b'{"id": 2, "command": "start", "config": {"grpo": {"steps": -1}}}',
               b'{"id": [1, 2], "command": "status"}', b'{"command": "status"}',
               b'[' * 300 + b']' * 300]
    sent = 0
    rss_before = rss_kb(w.pid)
    deadline = time.time() + 8
    while time.time() < deadline or sent < 12000:
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
    if sent < 10000:
        fail("only %d messages sent" % sent)
    st = c.request("status")
    grown = (rss_kb(w.pid) - rss_before) / 1024.0
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
    # Bounded: the run's own growth over these seconds, not one copy per message kept.
    if grown > 100:
        fail("the worker's resident memory grew by %.0f MB during the fuzz" % grown)
    print("fuzz: ok (%d messages, %d steps recorded, %d dropped, resident memory %+.1f MB)"
          % (sent, len(steps), st["dropped_requests"], grown))


def crash(db):
    w, ep = start_worker(db)
    c = Client(ep)
    if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000", "grpo.prompts_per_step=2",
                                                  "checkpoint.every=2"])["ok"]:
        fail("start refused")
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= 5)
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
    if steps != list(range(1, last + 1)) or last < 5:
        fail("completed steps lost: last %r steps %r" % (last, steps))
    # On request the run resumes from its last checkpoint: the steps after it run again, once.
    ckpt = con.execute("SELECT checkpoint_step FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    con.close()
    if not ckpt or ckpt < 2:
        fail("no checkpoint recorded before the kill")
    end = ckpt + 3
    r = subprocess.run([FP8RL, "train", "--resume", str(run_id), "--db", db, "--backend", "cpu",
                        "--json", "--set", "grpo.steps=%d" % end], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("resume failed: %s" % r.stderr)
    con = sqlite3.connect(db)
    status, last2 = con.execute("SELECT status, last_step FROM runs WHERE id=?", (run_id,)).fetchone()
    steps = [s for (s,) in con.execute("SELECT step FROM scalars WHERE run_id=? AND key='reward/mean' ORDER BY step", (run_id,))]
    if status != "finished" or last2 != end or steps != list(range(1, end + 1)):
        fail("after resume: %s at %r, steps %r" % (status, last2, steps))
    print("crash: ok (last completed step %d kept; resumed from the step-%d checkpoint to %d)" % (last, ckpt, end))


def multi(db):
    """Three workers (runs) on one database at once, each with its own sockets: two on the
    default abstract ipc endpoints, one on tcp://127.0.0.1:*. Pausing one leaves the others
    running; every step of every run reaches the database."""
    eps, clients = [], []
    for extra in ((), (), ("--control", "tcp://127.0.0.1:*", "--telemetry", "tcp://127.0.0.1:*")):
        _, ep = start_worker(db, extra)
        eps.append(ep)
        clients.append(Client(ep))
    workers = WORKERS[-3:]
    if eps[2]["control"].endswith(":*") or not eps[2]["telemetry"].startswith("tcp://127.0.0.1:"):
        fail("tcp wildcard not resolved: %r" % eps[2])
    if len({e["control"] for e in eps} | {e["telemetry"] for e in eps}) != 6:
        fail("workers share endpoints: %r" % eps)
    n = len(clients)
    steps = [[] for _ in range(n)]  # RL step numbers seen on each worker's telemetry
    run_ids = [set() for _ in range(n)]  # run ids in each worker's step and heartbeat messages
    events = [[] for _ in range(n)]
    poller = zmq.Poller()
    for c in clients:
        poller.register(c.sub, zmq.POLLIN)

    def pump(timeout_ms):
        for sock, _ in poller.poll(timeout_ms):
            i = [c.sub for c in clients].index(sock)
            while clients[i].sub.poll(0):
                topic, payload = clients[i].sub.recv_multipart()
                topic, m = topic.decode(), json.loads(payload)
                if topic == "step":
                    run_ids[i].add(m["run_id"])
                    if m["phase"] == "rl":
                        steps[i].append(m["step"])
                    if m["step"] >= 2 and not m["scalars"].get("time/telemetry", -1) >= 0:
                        fail("worker %d step %d lacks time/telemetry" % (i, m["step"]))
                elif topic == "heartbeat":
                    run_ids[i].add(m["run_id"])
                elif topic == "event":
                    events[i].append(m["kind"])

    def wait(pred, what, timeout=30.0):
        deadline = time.time() + timeout
        while not pred():
            if time.time() > deadline:
                fail("%s not within %.0f s (steps seen %r)" % (what, timeout, [len(s) for s in steps]))
            pump(100)

    # Subscribed (a heartbeat arrived) before the runs start, so no step is missed.
    wait(lambda: all(-1 in r for r in run_ids), "a heartbeat from every worker")
    for c in clients:
        if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000",
                                                      "grpo.prompts_per_step=2", "validation.every=0"])["ok"]:
            fail("start refused")
    wait(lambda: all(len(s) >= 2 for s in steps), "two steps on every worker")
    ids = [c.request("status")["run_id"] for c in clients]
    if len(set(ids)) != n or min(ids) < 1:
        fail("run ids not distinct: %r" % ids)
    for i in range(n):
        if run_ids[i] - {-1, ids[i]}:
            fail("worker %d (run %d) published run ids %r" % (i, ids[i], run_ids[i]))

    # Pause the first worker: the others keep producing steps, it produces none.
    if not clients[0].request("pause")["ok"]:
        fail("pause refused")
    wait(lambda: "pause" in events[0], "the pause event")
    paused_at = len(steps[0])
    before = [len(s) for s in steps]
    wait(lambda: all(len(steps[i]) >= before[i] + 3 for i in range(1, n)), "steps of the others while one is paused")
    st = [c.request("status") for c in clients]
    if st[0]["state"] != "paused" or len(steps[0]) != paused_at:
        fail("the paused worker went on: %r, %d steps after the pause" % (st[0], len(steps[0]) - paused_at))
    if any(s["state"] != "running" for s in st[1:]):
        fail("pausing one worker paused another: %r" % [s["state"] for s in st])
    if not clients[0].request("resume")["ok"]:
        fail("resume refused")
    wait(lambda: len(steps[0]) > paused_at, "a step after resume")

    for c in clients:
        if not c.request("stop")["ok"]:
            fail("stop refused")
    wait(lambda: all("stop" in e for e in events), "the stop event of every worker")
    for i, w in enumerate(workers):
        if w.wait(timeout=30) != 0:
            fail("worker %d exit code %d" % (i, w.returncode))
    pump(0)

    con = sqlite3.connect(db)
    rows = con.execute("SELECT id, status, last_step, control_endpoint, telemetry_endpoint "
                       "FROM runs ORDER BY id").fetchall()
    if len(rows) != n:
        fail("%d runs in the database, expected %d" % (len(rows), n))
    by_id = {r[0]: r for r in rows}
    for i in range(n):
        _, status, last, control, telemetry = by_id[ids[i]]
        if status != "stopped" or (control, telemetry) != (eps[i]["control"], eps[i]["telemetry"]):
            fail("run %d row: %r, endpoints printed %r" % (ids[i], by_id[ids[i]], eps[i]))
        recorded = [s for (s,) in con.execute(
            "SELECT DISTINCT step FROM scalars WHERE run_id=? ORDER BY step", (ids[i],))]
        if recorded != list(range(1, last + 1)) or sorted(steps[i]) != recorded:
            fail("run %d: database steps %r, telemetry steps %r, last_step %r"
                 % (ids[i], recorded, sorted(steps[i]), last))
    endpoints = [r[3] for r in rows] + [r[4] for r in rows]
    if len(set(endpoints)) != 2 * n:
        fail("endpoints not distinct: %r" % endpoints)
    print("multi: ok (%s RL steps recorded)" % "/".join(str(len(s)) for s in steps))


def listening(pid):
    """The TCP addresses ('host:port') process pid listens on, from /proc (what `ss -ltnp`
    shows): the sockets among its file descriptors in state LISTEN."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        if not os.path.exists(table):
            continue
        for line in open(table).read().splitlines()[1:]:
            parts = line.split()
            if parts[3] != "0A" or parts[9] not in inodes:  # 0A: LISTEN
                continue
            addr, port = parts[1].split(":")
            raw = bytes.fromhex(addr)
            # Each 32-bit word is in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            if v6:
                host = "[" + ":".join(raw[i:i + 2].hex() for i in range(0, 16, 2)) + "]"
            else:
                host = ".".join(str(b) for b in raw)
            found.append("%s:%d" % (host, int(port, 16)))
    return found


def private_folder(path):
    """Whether path is a folder of this user's that nobody else may enter (mode 0700)."""
    st = os.lstat(path)
    return st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0 and os.path.isdir(path)


def sockets(db):
    """By default a worker listens on no TCP port at all: its sockets are files in a folder only
    its user may enter. Asked for a free tcp port it binds loopback only, and like an abstract
    socket (which any local user can reach) it then speaks CURVE with this user's keys: a plain
    client gets no answer. Asked for another address without --allow-remote it refuses."""
    w, ep = start_worker(db)
    if listening(w.pid):
        fail("a default worker listens on TCP: %r" % listening(w.pid))
    folder = os.path.dirname(ep["control"][len("ipc://"):])
    if not ep["control"].startswith("ipc:///") or "server_key" in ep or not private_folder(folder) \
            or os.path.dirname(ep["telemetry"][len("ipc://"):]) != folder:
        fail("default endpoints: %r (folder mode %o)" % (ep, os.stat(folder).st_mode & 0o777))
    w2, ep2 = start_worker(db, ("--control", "tcp://127.0.0.1:*", "--telemetry", "tcp://127.0.0.1:*"))
    heard = listening(w2.pid)
    if len(heard) != 2 or any(not h.startswith("127.0.0.1:") for h in heard):
        fail("a loopback worker listens on %r" % heard)
    if shutil.which("ss"):  # the same seen by ss, where iproute2 is installed
        out = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
        mine = [l for l in out.splitlines() if "pid=%d," % w2.pid in l]
        if len(mine) != 2 or any("127.0.0.1:" not in l for l in mine):
            fail("ss -ltnp shows %r" % mine)
    name = "fp8rl-test-%d" % os.getpid()
    w3, ep3 = start_worker(db, ("--control", "ipc://@%s-control" % name,
                                "--telemetry", "ipc://@%s-telemetry" % name))
    for shared, e in (("loopback", ep2), ("abstract", ep3)):
        if len(e.get("server_key", "")) != 40:
            fail("a worker on %s sockets serves without CURVE: %r" % (shared, e))
        plain = Client(e, None)
        if plain.answers(1.0):
            fail("a plain client was answered on %s sockets" % shared)
        plain.ctx.destroy(linger=0)
    for bad in ("tcp://0.0.0.0:*", "tcp://*:*", "tcp://10.1.2.3:5555"):
        p = subprocess.run([FP8RL, "worker", "--no-db", "--control", bad], capture_output=True,
                           text=True, timeout=60)
        if p.returncode == 0 or "beyond loopback (pass --allow-remote" not in p.stderr:
            fail("bind to %s not refused: %r" % (bad, p.stderr))
    for x, e in ((w, ep), (w2, ep2), (w3, ep3)):
        if not Client(e).request("stop")["ok"]:
            fail("the owner's client was refused by %r" % e)
        x.wait(timeout=30)
    if any(os.path.exists(e[len("ipc://"):]) for e in (ep["control"], ep["telemetry"])):
        fail("a stopped worker left its socket files behind")
    print("sockets: ok (default: files in %s, no TCP; loopback: %s, CURVE; abstract: CURVE)"
          % (folder, ", ".join(heard)))


def mode(path):
    return os.lstat(path).st_mode & 0o7777


def files(db):
    """What a run leaves on disk is the user's alone: the default run store's folder 0700, the
    database with its -wal and -shm 0600, checkpoints 0700 / 0600. An older store that others
    can read is reported by `fp8rl doctor` with the command that mends it, and mended by it."""
    base = os.path.dirname(db)
    share = os.path.join(base, "share")  # as ~/.local/share: made by someone else, 0755
    os.makedirs(share, mode=0o755)
    env = dict(os.environ, XDG_DATA_HOME=share)
    env.pop("FP8RL_DB", None)
    w, ep = start_worker("", ("--db", os.path.join(share, "fp8rl", "runs.sqlite")), env=env)
    c = Client(ep)
    if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000",
                                                  "grpo.prompts_per_step=2", "checkpoint.every=1"])["ok"]:
        fail("start refused")
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "checkpoint")
    data = os.path.join(share, "fp8rl")
    store = os.path.join(data, "runs.sqlite")
    want = {data: 0o700, store: 0o600, store + "-wal": 0o600, store + "-shm": 0o600}
    for root, dirs, names in os.walk(os.path.join(data, "checkpoints")):
        want[root] = 0o700
        want.update({os.path.join(root, n): 0o600 for n in names if not n.endswith(".tmp")})
    got = {p: mode(p) for p in want if os.path.exists(p)}
    if got != want or len(want) < 8:
        fail("modes %r, wanted %r" % ({p: oct(m) for p, m in got.items()}, {p: oct(m) for p, m in want.items()}))
    c.request("stop")
    w.wait(timeout=30)
    doctor = [FP8RL, "doctor", "--db", store]
    out = subprocess.run(doctor, capture_output=True, text=True, env=env).stdout
    if "run data:       private: " + store not in out:
        fail("doctor on a private store says:\n" + out)
    # A store made by an older version under a 022 umask.
    os.chmod(data, 0o755)
    os.chmod(store, 0o644)
    out = subprocess.run(doctor, capture_output=True, text=True, env=env).stdout
    line = [l for l in out.splitlines() if "fix: " in l]
    if "OPEN TO OTHER USERS" not in out or store + " (0644)" not in out or len(line) != 1:
        fail("doctor does not report the open store:\n" + out)
    subprocess.run(line[0].split("fix: ", 1)[1], shell=True, check=True)
    if mode(data) != 0o700 or mode(store) != 0o600:
        fail("doctor's fix left %o %o" % (mode(data), mode(store)))
    out = subprocess.run(doctor, capture_output=True, text=True, env=env).stdout
    if "run data:       private: " not in out:
        fail("after the fix doctor says:\n" + out)
    print("files: ok (%d paths 0700/0600; doctor reported and mended an open store)" % len(want))


# What another account runs: a plain client and one with keys of its own try status, stop and
# an edit on every endpoint, subscribe to telemetry, and open the database. Prints JSON.
OTHER_USER = r"""
import json, sqlite3, sys, zmq
eps, db = json.loads(sys.argv[1]), sys.argv[2]
report = {"answered": [], "telemetry": [], "db": None, "wal": None, "checkpoints": None}
ctx = zmq.Context()
pub, sec = zmq.curve_keypair()
for ep in eps:
    for curve in (None, "own"):
        ctl, sub = ctx.socket(zmq.DEALER), ctx.socket(zmq.SUB)
        for s in (ctl, sub):
            s.setsockopt(zmq.LINGER, 0)
            if curve and "server_key" in ep:
                s.curve_serverkey, s.curve_publickey, s.curve_secretkey = ep["server_key"].encode(), pub, sec
        ctl.connect(ep["control"])
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(ep["telemetry"])
        for i, msg in enumerate(({"command": "status"}, {"command": "edit", "settings": {"lr": 0.5}},
                                 {"command": "pause"}, {"command": "stop"})):
            msg.update(id="x%d" % i, protocol=3)
            try:
                ctl.send_string(json.dumps(msg), zmq.NOBLOCK)
            except zmq.Again:
                pass
        if ctl.poll(1500):
            report["answered"].append(ep["control"])
        if sub.poll(1500):
            report["telemetry"].append(ep["telemetry"])
        ctl.close(); sub.close()
for key, probe in (("db", lambda: sqlite3.connect("file:%s?mode=ro" % db, uri=True).execute(
                       "SELECT count(*) FROM runs").fetchone()),
                   ("wal", lambda: open(db + "-wal", "rb").read(1)),
                   ("checkpoints", lambda: __import__("os").listdir(__import__("os").path.dirname(db) + "/checkpoints"))):
    try:
        probe()
        report[key] = "read"
    except Exception as e:
        report[key] = type(e).__name__ + ": " + str(e)
print(json.dumps(report))
"""


def privacy(db):
    """Another account of this machine can neither steer nor read this user's runs: on the
    default sockets (files in a private folder), on loopback tcp and on abstract sockets (both
    CURVE with this user's keys), its clients — plain, or with keys of their own — get no answer
    to status, edit, pause or stop, no telemetry, and the run goes on; it cannot open the run
    database, its WAL or the checkpoints. The owner's client works throughout."""
    if os.geteuid() != 0:
        print("SKIP: making a second account to test with needs root (useradd); as another user "
              "this scenario cannot run")
        sys.exit(77)
    if not shutil.which("useradd"):
        print("SKIP: useradd is not installed (Debian's passwd package)")
        sys.exit(77)
    other = "fp8rl-t%d" % os.getpid()
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", other],
                   check=True)
    try:
        # Where the data would be for a user: under a folder others may enter (as a home is).
        base = os.path.dirname(db)
        os.chmod(base, 0o755)
        share = os.path.join(base, "share")
        os.makedirs(share, mode=0o755)
        store = os.path.join(share, "fp8rl", "runs.sqlite")
        env = dict(os.environ, XDG_DATA_HOME=share)
        env.pop("FP8RL_DB", None)
        name = "fp8rl-privacy-%d" % os.getpid()
        w, ep = start_worker("", ("--db", store), env=env)
        w2, ep2 = start_worker("", ("--no-db", "--control", "tcp://127.0.0.1:*",
                                    "--telemetry", "tcp://127.0.0.1:*"), env=env)
        w3, ep3 = start_worker("", ("--no-db", "--control", "ipc://@%s-control" % name,
                                    "--telemetry", "ipc://@%s-telemetry" % name), env=env)
        c = Client(ep)
        if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000",
                                                      "grpo.prompts_per_step=2", "checkpoint.every=2"])["ok"]:
            fail("start refused")
        c.wait_for(lambda t, m: t == "event" and m["kind"] == "checkpoint")
        r = subprocess.run(["/usr/bin/python3", "-c", OTHER_USER, json.dumps([ep, ep2, ep3]), store],
                           user=other, group=other, extra_groups=[], capture_output=True, text=True,
                           timeout=120, cwd="/")
        if r.returncode != 0:
            fail("the other account's client failed: %s" % r.stderr)
        seen = json.loads(r.stdout)
        if seen["answered"] or seen["telemetry"]:
            fail("another account reached a worker: %r" % seen)
        if any(v == "read" for k, v in seen.items() if k in ("db", "wal", "checkpoints")):
            fail("another account read the run data: %r" % seen)
        # No effect: the run goes on, unchanged; the idle workers still serve their owner.
        st = c.request("status")
        _, m = c.wait_for(lambda t, m: t == "step" and m["step"] > st["step"])
        if st["state"] != "running" or st["settings"]["lr"] == 0.5:
            fail("the other account's requests took effect: %r" % st)
        for e in (ep2, ep3):
            if Client(e).request("status")["state"] != "idle":
                fail("an idle worker changed state")
        for x, e in ((w, ep), (w2, ep2), (w3, ep3)):
            Client(e).request("stop")
            x.wait(timeout=60)
        print("privacy: ok (account %s: no answer on 3 endpoints x 2 clients, no telemetry, "
              "database: %s)" % (other, seen["db"]))
    finally:
        subprocess.run(["userdel", other], capture_output=True)


def disk_full(db):
    """A run that fills its disk stops with an error that says what to do — free space, then
    `fp8rl train --resume ID` — and keeps every step recorded; once space is freed, --resume
    continues from the last checkpoint and records each step once. The disk: a small tmpfs
    filled up by another file (as root), else a file size limit (RLIMIT_FSIZE) above the
    checkpoint's largest file, so that the store's log hits it first."""
    import resource

    base = os.path.dirname(db)
    disk = os.path.join(base, "disk")
    os.makedirs(disk)
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", disk], capture_output=True).returncode == 0
    try:
        db = os.path.join(disk, "runs.sqlite")
        filler = os.path.join(disk, "filler")
        if mounted:  # room for a checkpoint and a few hundred kB of steps
            with open(filler, "wb") as f:
                f.write(b"\0" * (3 * 1024 * 1024 - 2 * 640 * 1024 - 300 * 1024))

        def full_disk():
            if mounted:
                return
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead
            limit = 640 * 1024 + 777
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        run = [FP8RL, "train", "--preset", "demo", "--db", db, "--backend", "cpu", "--set",
               "model.hidden_size=32", "--set", "sft.steps=0", "--set", "checkpoint.every=5", "--set",
               "validation.every=0"]
        p = subprocess.run(run + ["--set", "grpo.steps=100000"], preexec_fn=full_disk, capture_output=True,
                           text=True, timeout=240)
        errors = [l for l in p.stderr.splitlines() if ": error: " in l]
        if p.returncode == 0 or len(errors) != 1:
            fail("a full disk did not end the run with one error: %r" % p.stderr[-2000:])
        con = sqlite3.connect(db)
        run_id, last, ckpt = con.execute("SELECT id, last_step, checkpoint_step FROM runs").fetchone()
        steps = [s for (s,) in con.execute("SELECT step FROM scalars WHERE key='reward/mean' ORDER BY step")]
        con.close()
        says = errors[0]
        cause = "database or disk is full" if mounted else "File too large"
        for want in (cause, "free space", "fp8rl train --resume %d" % run_id, "step-%d checkpoint" % ckpt):
            if want not in says:
                fail("the error does not say %r: %s" % (want, says))
        if not ckpt or steps != list(range(1, last + 1)):
            fail("after the full disk: checkpoint %r, steps %r, last %r" % (ckpt, steps, last))
        if mounted:
            os.remove(filler)  # space freed
        end = ckpt + 3
        p = subprocess.run(run[:2] + ["--resume", str(run_id), "--db", db, "--backend", "cpu",
                                      "--set", "grpo.steps=%d" % end], capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            fail("resume after freeing space failed: %s" % p.stderr)
        con = sqlite3.connect(db)
        status, last2 = con.execute("SELECT status, last_step FROM runs WHERE id=?", (run_id,)).fetchone()
        steps = [s for (s,) in con.execute("SELECT step FROM scalars WHERE key='reward/mean' ORDER BY step")]
        con.close()
        if status != "finished" or last2 != end or steps != list(range(1, end + 1)):
            fail("after resume: %s at %r, steps %r" % (status, last2, steps))
        print("disk_full: ok (%s; full at step %d, %d steps kept, resumed from the step-%d checkpoint to "
              "%d)\n  %s" % ("a 3 MiB tmpfs" if mounted else "RLIMIT_FSIZE", last + 1, last, ckpt, end, says))
    finally:
        if mounted:
            subprocess.run(["umount", "-l", disk], capture_output=True)


def sweep_steer(db):
    """A sweep's runs are ordinary workers: each point runs as `fp8rl worker --sweep-point`,
    records its endpoints, and a client (the studio) pauses it, edits it live and stops it like
    any run. The runner leaves a run a client stopped and finishes the others."""
    sweep = os.path.join(os.path.dirname(db), "steer.yaml")
    with open(sweep, "w") as f:
        # Point 0 runs far longer than the steering takes on any machine (a demo step with 2
        # prompts takes milliseconds; the client stops it), point 1 finishes soon.
        f.write("name: steer\npreset: demo\nset:\n  - sft.steps=0\n"
                "  - grpo.prompts_per_step=2\n  - validation.every=0\n  - checkpoint.every=5\n"
                "concurrency: 2\naxes:\n  grpo.steps: [20000, 10]\n")
    runner = subprocess.Popen([FP8RL, "sweep", sweep, "--db", db], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    WORKERS.append(runner)
    deadline = time.time() + 120
    row = None
    while time.time() < deadline and row is None:
        time.sleep(0.2)
        if not os.path.exists(db):
            continue
        con = sqlite3.connect(db)
        row = con.execute("SELECT r.id, r.control_endpoint, r.telemetry_endpoint, r.server_key, p.point "
                          "FROM runs r JOIN sweep_points p ON p.run_id = r.id "
                          "WHERE r.status = 'running' AND r.control_endpoint != '' "
                          "AND p.point = 0").fetchone()
        con.close()
    if row is None:
        fail("no sweep run served its endpoints within 120 s")
    run_id, control, telemetry, server_key, point = row
    ep = {"control": control, "telemetry": telemetry}
    if server_key:
        ep["server_key"] = server_key
    c = Client(ep)
    if c.request("status")["run_id"] != run_id:
        fail("the endpoints of run %d answer for another run" % run_id)
    if not c.request("pause")["ok"]:
        fail("pause refused")
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "pause")
    if not c.request("edit", settings={"lr": 0.0002})["ok"]:
        fail("live edit refused")
    if not c.request("resume")["ok"]:
        fail("resume refused")
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "set" and m["data"]["value"] == 0.0002)
    # The edit may apply while the run is still paused, before the resume arrives: a stop sent
    # then would end the paused run without a resume.
    c.wait_for(lambda t, m: t == "event" and m["kind"] == "resume")
    if not c.request("stop")["ok"]:
        fail("stop refused")
    out, err = runner.communicate(timeout=240)
    con = sqlite3.connect(db)
    statuses = dict(con.execute("SELECT p.point, r.status FROM sweep_points p JOIN runs r ON r.id = p.run_id"))
    timeline = con.execute("SELECT step, kind, message FROM events WHERE run_id=? ORDER BY rowid",
                           (run_id,)).fetchall()
    events = [k for (_, k, _) in timeline]
    sets = [json.loads(d) for (d,) in con.execute(
        "SELECT data FROM events WHERE run_id=? AND kind='set'", (run_id,))]
    con.close()
    other = 1 - point
    if statuses.get(point) != "stopped" or statuses.get(other) != "finished":
        fail("after the stop: %r\n%s" % (statuses, err))
    if "stopped by a client" not in err or "1 point(s) stopped by a client" not in out:
        fail("the runner did not say it left the stopped run:\n%s\n%s" % (out, err))
    if not {"pause", "resume", "set", "stop"} <= set(events) or sets != [{"key": "lr", "value": 0.0002}]:
        fail("the run's events %r, settings %r" % (timeline, sets))
    print("sweep_steer: ok (point %d's run %d paused, edited, stopped from a client; point %d finished)"
          % (point, run_id, other))


def read_pair(path):
    pair = {}
    for line in open(path):
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            pair[k.strip()] = v.strip()
    return pair["public-key"], pair["secret-key"]


def remote(db):
    """A worker bound beyond loopback speaks CURVE: it answers only a client that knows its key
    and holds a key its install authorized; traffic and telemetry flow for that client only."""
    keys = tempfile.mkdtemp()
    env = dict(os.environ, FP8RL_KEYS=os.path.join(keys, "k"))
    w, ep = start_worker(db, ("--control", "tcp://0.0.0.0:*", "--telemetry", "tcp://0.0.0.0:*",
                              "--allow-remote"), env=env)
    server_key = ep.get("server_key", "")
    if len(server_key) != 40:
        fail("no server key in %r" % ep)
    kdir = env["FP8RL_KEYS"]
    if os.stat(kdir).st_mode & 0o777 != 0o700:
        fail("keys folder mode %o" % (os.stat(kdir).st_mode & 0o777))
    for f in ("server.key", "client.key"):
        if os.stat(os.path.join(kdir, f)).st_mode & 0o777 != 0o600:
            fail("%s mode %o" % (f, os.stat(os.path.join(kdir, f)).st_mode & 0o777))
    if read_pair(os.path.join(kdir, "server.key"))[0] != server_key:
        fail("the printed key is not the install's worker key")
    heard = listening(w.pid)
    if len(heard) != 2 or any(not h.startswith("0.0.0.0:") for h in heard):
        fail("listening on %r" % heard)
    local = {k: v.replace("0.0.0.0", "127.0.0.1") for k, v in ep.items() if isinstance(v, str)}

    # Refused: a plain client, a CURVE client with a key nobody authorized, one with the wrong
    # server key. None gets an answer.
    stranger_pub, stranger_sec = (k.decode() for k in zmq.curve_keypair())
    other_pub, _ = (k.decode() for k in zmq.curve_keypair())
    for who, curve in (("a plain client", None),
                       ("an unauthorized key", (server_key, stranger_pub, stranger_sec)),
                       ("a wrong server key", (other_pub,) + read_pair(os.path.join(kdir, "client.key")))):
        c = Client(local, curve)
        if c.answers(2.0):
            fail("%s was answered" % who)
        c.ctx.destroy(linger=0)

    # Admitted: this install's client key; the run goes and telemetry arrives encrypted.
    c = Client(local, (server_key,) + read_pair(os.path.join(kdir, "client.key")))
    hello = c.request("hello")
    if not hello["ok"]:
        fail("hello: %r" % hello)
    if not c.request("start", preset="demo", set=["sft.steps=0", "grpo.steps=100000", "grpo.prompts_per_step=2"])["ok"]:
        fail("start refused")
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= 2)
    # The stranger, once authorized (fp8rl keys authorize), is admitted by the next worker; this
    # one keeps the list it started with.
    r = subprocess.run([FP8RL, "keys", "authorize", stranger_pub, "--comment", "test"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0 or "authorized" not in r.stdout:
        fail("keys authorize: %r %r" % (r.stdout, r.stderr))
    if os.stat(os.path.join(kdir, "authorized_clients")).st_mode & 0o777 != 0o600:
        fail("authorized_clients is not 0600")
    if not c.request("stop")["ok"]:
        fail("stop refused")
    if w.wait(timeout=30) != 0:
        fail("worker exit %d" % w.returncode)
    con = sqlite3.connect(db)
    row = con.execute("SELECT server_key, control_endpoint FROM runs WHERE id=?", (m["run_id"],)).fetchone()
    if row[0] != server_key:
        fail("the run row's server_key is %r" % row[0])
    w2, ep2 = start_worker(db, ("--control", "tcp://0.0.0.0:*", "--telemetry", "tcp://0.0.0.0:*",
                                "--allow-remote"), env=env)
    c2 = Client({k: v.replace("0.0.0.0", "127.0.0.1") for k, v in ep2.items() if isinstance(v, str)},
                (ep2["server_key"], stranger_pub, stranger_sec))
    if not c2.request("hello")["ok"]:
        fail("the authorized stranger was refused")
    c2.request("stop")
    w2.wait(timeout=30)
    # A key file others can read is refused, naming it.
    os.chmod(os.path.join(kdir, "client.key"), 0o644)
    p = subprocess.run([FP8RL, "worker", "--no-db", "--control", "tcp://0.0.0.0:*", "--allow-remote"],
                       env=env, capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "client.key is open to other users" not in p.stderr:
        fail("a readable key file was accepted: %r" % p.stderr)
    print("remote: ok (3 refused clients, 2 admitted; run %d recorded with its server key)" % m["run_id"])


def live_resume(db):
    """Live edits survive a crash: precision and settings edited live, the worker killed, the
    run resumed in a new worker (start {"resume": id}) continues with them; edited again, killed
    again, resumed by `fp8rl train --resume`: the same. The store holds one timeline."""
    tiny = ["sft.steps=0", "grpo.steps=100000", "grpo.prompts_per_step=2", "checkpoint.every=1",
            "optimizer.schedule=constant", "optimizer.warmup_steps=0", "validation.every=0",
            "task.validation_size=8"]

    def kill_and_check(w, run_id, applied_at):
        # A checkpoint written after the edit applied, then kill -9.
        deadline = time.time() + 60
        while time.time() < deadline:
            con = sqlite3.connect(db)
            ckpt = con.execute("SELECT checkpoint_step FROM runs WHERE id=?", (run_id,)).fetchone()[0]
            con.close()
            if ckpt is not None and ckpt > applied_at:
                break
            time.sleep(0.05)
        os.kill(w.pid, signal.SIGKILL)
        w.wait()
        listing = subprocess.run([FP8RL, "runs", "list", "--db", db], capture_output=True, text=True).stdout
        if "crashed" not in listing:
            fail("run not marked crashed:\n" + listing)
        con = sqlite3.connect(db)
        ckpt, ckpt_dir = con.execute("SELECT checkpoint_step, checkpoint_dir FROM runs WHERE id=?",
                                     (run_id,)).fetchone()
        con.close()
        return ckpt, ckpt_dir

    def lr_by_step(run_id):
        con = sqlite3.connect(db)
        rows = con.execute("SELECT step, value FROM scalars WHERE run_id=? AND key='lr' ORDER BY step",
                           (run_id,)).fetchall()
        con.close()
        return dict(rows)

    # 1. A live edit, a checkpoint after it, kill -9.
    w, ep = start_worker(db)
    c = Client(ep)
    if not c.request("start", preset="demo", set=tiny)["ok"]:
        fail("start refused")
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= 2)
    run_id = m["run_id"]
    r = c.request("edit", precision=["0.gate=bf16", "*.down=bf16"],
                  settings={"lr": 0.0003, "temperature": 0.8, "is_max": 3})
    if not r["ok"]:
        fail("edit refused: %r" % r)
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "precision")
    first_edit = ev["step"]
    ckpt, ckpt_dir = kill_and_check(w, run_id, first_edit)
    state = json.load(open(os.path.join(ckpt_dir, "trainer_state.json")))
    if (state["config"]["optimizer"]["lr"] != 0.0003 or state["config"]["grpo"]["temperature"] != 0.8
            or state["live"]["settings"]["is_max"] != 3 or state["live"]["precision"][0]["gate"] != "bf16"
            or state["live"]["precision"][1]["down"] != "bf16" or state["live"]["precision"][1]["gate"] != "fp8"):
        fail("the checkpoint does not carry the live state: %r" % {k: state[k] for k in ("live",)})

    # 2. Resumed in a new worker: the steps after the checkpoint use the edited values.
    w, ep = start_worker(db)
    c = Client(ep)
    if c.request("start", resume=run_id, preset="demo")["ok"]:
        fail("resume with a preset accepted")
    if c.request("start", resume=999)["ok"]:
        fail("resume of an unknown run accepted")
    r = c.request("start", resume=run_id)
    if not r["ok"]:
        fail("resume refused: %r" % r)
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= ckpt + 2)
    if "bf16" not in m["precision"]:
        fail("resumed steps run without the precision edit: %r" % m["precision"])
    st = c.request("status")
    if st["run_id"] != run_id or st["settings"]["lr"] != 0.0003 or st["settings"]["temperature"] != 0.8:
        fail("resumed worker's status: %r" % st)
    if not c.request("edit", settings={"lr": 0.0004})["ok"]:
        fail("second edit refused")
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "set" and m["data"]["value"] == 0.0004)
    second_edit = ev["step"]
    ckpt2, _ = kill_and_check(w, run_id, second_edit)

    # 3. Resumed by fp8rl train --resume: the second edit and the first edit's map hold.
    end = ckpt2 + 3
    p = subprocess.run([FP8RL, "train", "--resume", str(run_id), "--db", db, "--backend", "cpu", "--json",
                        "--set", "grpo.steps=%d" % end], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("train --resume failed: %s" % p.stderr)
    lr = lr_by_step(run_id)
    if sorted(lr) != list(range(1, end + 1)):
        fail("steps lost or doubled: %r" % sorted(lr))
    want = {s: (0.001 if s <= first_edit else 0.0003 if s <= second_edit else 0.0004) for s in lr}
    if any(abs(lr[s] - want[s]) > 1e-12 for s in lr):
        fail("learning rate by step %r, wanted %r" % (lr, want))
    con = sqlite3.connect(db)
    status, summary = con.execute("SELECT status, precision_summary FROM runs WHERE id=?", (run_id,)).fetchone()
    maps = con.execute("SELECT step, map FROM precision_history WHERE run_id=? ORDER BY step", (run_id,)).fetchall()
    events = con.execute("SELECT step, kind, message FROM events WHERE run_id=? ORDER BY rowid", (run_id,)).fetchall()
    con.close()
    if status != "finished" or "bf16" not in summary:
        fail("run row after the resumes: %r %r" % (status, summary))
    if json.loads(maps[-1][1])[0]["gate"] != "bf16" or [s for s, _ in maps] != sorted({s for s, _ in maps}):
        fail("precision history: %r" % maps)
    kinds = [k for _, k, _ in events]
    if kinds.count("precision") != 1 or [m for _, k, m in events if k == "set"] != \
            ["is_max = 3", "lr = 0.0003", "temperature = 0.8", "lr = 0.0004"]:
        fail("the events are not one timeline: %r" % events)
    print("live_resume: ok (edits at steps %d and %d, checkpoints %d and %d, resumed in a worker and by train "
          "--resume to step %d)" % (first_edit, second_edit, ckpt, ckpt2, end))


def autopilot_resume(db):
    """The precision autopilot in a worker: dead MLP channels injected into layer 1 make FP8
    hurt there; the autopilot moves L1.down to BF16 (an `autopilot` event with its evidence);
    its budget is edited live (a typed setting); kill -9 after a checkpoint; resumed in a new
    worker the map, the settings and the autopilot's memory hold (no second move of L1.down);
    a person's edit returning L1.down to FP8 wins (it is pinned: the autopilot never moves it
    again)."""
    sets = ["sft.steps=10", "grpo.steps=100000", "grpo.prompts_per_step=2", "grpo.group_size=4",
            "checkpoint.every=1", "validation.every=0", "task.validation_size=8",
            'outliers.linears=["1.down"]', "precision.autopilot=true",
            "autopilot.metric=fp8/policy_kl", "autopilot.threshold=0.001", "autopilot.patience=1",
            "autopilot.cooldown=1"]

    def events(run_id, kind):
        con = sqlite3.connect(db)
        rows = con.execute("SELECT step, message, data FROM events WHERE run_id=? AND kind=? ORDER BY rowid",
                           (run_id, kind)).fetchall()
        con.close()
        return [(st, m, json.loads(d)) for st, m, d in rows]

    w, ep = start_worker(db)
    c = Client(ep)
    if not c.request("start", preset="demo", set=sets)["ok"]:
        fail("start refused")
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "autopilot")
    if ev["data"]["linears"] != ["L1.down"] or ev["data"]["action"] != "move" \
            or ev["data"]["ranking"][0]["linear"] != "L1.down":
        fail("the autopilot's first decision: %r" % ev)
    run_id = c.request("status")["run_id"]
    moved_at = ev["step"]
    r = c.request("edit", settings={"autopilot_budget": 0.2, "autopilot_confirm": True})
    if not r["ok"] or r["edit"]["settings"] != {"autopilot_budget": 0.2, "autopilot_confirm": True}:
        fail("typed autopilot settings refused: %r" % r)
    if c.request("edit", settings={"autopilot": 1})["ok"]:
        fail("a number accepted for the autopilot's switch")
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "set" and m["data"]["key"] == "autopilot_confirm")
    edited_at = ev["step"]
    deadline = time.time() + 60
    while time.time() < deadline:
        con = sqlite3.connect(db)
        ckpt = con.execute("SELECT checkpoint_step FROM runs WHERE id=?", (run_id,)).fetchone()[0]
        con.close()
        if ckpt is not None and ckpt > edited_at:
            break
        time.sleep(0.05)
    os.kill(w.pid, signal.SIGKILL)
    w.wait()
    con = sqlite3.connect(db)
    ckpt, ckpt_dir = con.execute("SELECT checkpoint_step, checkpoint_dir FROM runs WHERE id=?",
                                 (run_id,)).fetchone()
    con.close()
    state = json.load(open(os.path.join(ckpt_dir, "trainer_state.json")))
    held = state["autopilot"]["held"]
    if [(h["layer"], h["module"]) for h in held] != [(1, "down")] or held[0]["step"] != moved_at:
        fail("the checkpoint does not carry the autopilot's memory: %r" % state["autopilot"])
    if state["live"]["settings"]["autopilot_budget"] != 0.2 or state["live"]["settings"]["autopilot"] is not True:
        fail("the checkpoint does not carry the typed settings: %r" % state["live"]["settings"])

    w, ep = start_worker(db)
    c = Client(ep)
    if not c.request("start", resume=run_id)["ok"]:
        fail("resume refused")
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= ckpt + 2)
    st = c.request("status")
    if st["precision_map"][1]["down"] != "bf16" or st["settings"]["autopilot_budget"] != 0.2 \
            or st["settings"]["autopilot"] is not True or st["settings"]["autopilot_confirm"] is not True:
        fail("resumed worker's status: %r" % st)
    # A person returns L1.down to FP8: it is theirs now, whatever the metric says.
    if not c.request("edit", precision=["1.down=fp8"])["ok"]:
        fail("a person's edit refused")
    _, ev = c.wait_for(lambda t, m: t == "event" and m["kind"] == "precision")
    _, m = c.wait_for(lambda t, m: t == "step" and m["step"] >= ev["step"] + 4)
    c.request("stop")
    w.wait(timeout=60)
    moves = events(run_id, "autopilot")
    if [d["linears"] for _, _, d in moves if d["action"] == "move"].count(["L1.down"]) != 1:
        fail("L1.down moved again after the resume or after the person's edit: %r" % moves)
    con = sqlite3.connect(db)
    final = json.loads(con.execute("SELECT map FROM precision_history WHERE run_id=? ORDER BY step DESC, rowid DESC",
                                   (run_id,)).fetchone()[0])
    con.close()
    if final[1]["down"] != "fp8":
        fail("the person's edit did not win: %r" % final)
    print("autopilot_resume: ok (moved L1.down after step %d, checkpoint %d, resumed; decisions: %s)"
          % (moved_at, ckpt, "; ".join("%d %s" % (st, msg[:60]) for st, msg, _ in moves)))


with tempfile.TemporaryDirectory() as d:
    {"drive": drive, "fuzz": fuzz, "crash": crash, "multi": multi, "sockets": sockets,
     "remote": remote, "live_resume": live_resume, "files": files, "privacy": privacy,
     "disk_full": disk_full, "sweep_steer": sweep_steer,
     "autopilot_resume": autopilot_resume}[SCENARIO](os.path.join(d, "runs.sqlite"))
print("1 passed, 0 failed")
