#!/usr/bin/env python3
"""A stand-in for `blockwise daisy-session` (docs/design/DAISY_API.md) for the Python package's
tests: JSON lines on stdin/stdout, 1-D pipelines only, every task "valid" with blocks one write
ROI apart and no dependencies. Each line received is appended to $FAKE_SESSION_LOG.

Ops: hello, open, acquire, release, states, close, run (serial: `check` and `block` events,
waiting for each answer; otherwise a `launch` event per task when $FAKE_SESSION_LAUNCH is set,
then progress events until `stop`), and `fail` (answers the error named by its `type` and
`message` fields). `die` exits with status 3 without answering.
"""

import json
import os
import struct
import sys
import threading

LOG = os.environ.get("FAKE_SESSION_LOG")


def log(message):
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(message) + "\n")


SEND_LOCK = threading.Lock()


def send(message):
    with SEND_LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def receive():
    line = sys.stdin.readline()
    if line == "":
        log({"eof": True})
        sys.exit(0)
    message = json.loads(line)
    log(message)
    return message


def n_blocks(task):
    size = task["writeRoi"]["shape"][0]
    return (task["totalRoi"]["shape"][0] - (task["readRoi"]["shape"][0] - size)) // size


def blocks_of(task):
    total = task["totalRoi"]
    write = task["writeRoi"]
    read = task["readRoi"]
    context = write["offset"][0] - read["offset"][0]
    size = write["shape"][0]
    n = n_blocks(task)
    out = []
    for i in range(n):
        w = total["offset"][0] + context + i * size
        out.append({"task": task["id"], "id": i, "position": i, "index": [i],
                    "readRoi": {"offset": [w - context], "shape": [read["shape"][0]]},
                    "writeRoi": {"offset": [w], "shape": [size]}, "attempt": 0})
    return out


def counters(total, completed=0, failed=0, processing=0):
    return {"total": total, "ready": total - completed - failed - processing,
            "processing": processing, "pending": 0, "completed": completed, "skipped": 0,
            "failed": failed, "orphaned": 0, "started": completed + failed + processing > 0,
            "done": completed + failed == total, "abandoned": False, "workerFailures": 0,
            "workerRestarts": 0}


handles = {}


def answer_request(m):
    op = m.get("op")
    if op == "hello":
        return {"version": "0.0.0-fake", "protocol": 1}
    if op == "fail":
        return {"error": {"type": m["type"], "message": m["message"]}}
    if op == "die":
        sys.exit(3)
    if op == "open":
        tasks = m["pipeline"]["tasks"]
        handle = len(handles) + 1
        handles[handle] = {t["id"]: {"blocks": blocks_of(t), "next": 0, "done": 0}
                           for t in tasks}
        return {"handle": handle, "tasks": [
            {"id": t["id"], "blocks": len(blocks_of(t)), "levels": 1, "roots": len(blocks_of(t))}
            for t in tasks]}
    if op == "acquire":
        if m["handle"] not in handles:
            return {"error": {"type": "ValueError", "message": "No open scheduler %s" % m["handle"]}}
        t = handles[m["handle"]][m["task"]]
        if t["next"] >= len(t["blocks"]):
            return {"block": None}
        t["next"] += 1
        return {"block": t["blocks"][t["next"] - 1]}
    if op == "release":
        handles[m["handle"]][m["task"]]["done"] += 1
        return {}
    if op == "states":
        return {"states": {tid: counters(len(t["blocks"]), t["done"], 0, t["next"] - t["done"])
                           for tid, t in handles[m["handle"]].items()}}
    if op == "close":
        handles.pop(m["handle"], None)
        return {}
    return {"error": {"type": "ValueError", "message": "Unknown request %r" % op}}


def wait_for(op, q=None):
    """Messages until one with `op` (and `q`); stop returns None."""
    while True:
        m = receive()
        if m.get("op") == op and (q is None or m.get("q") == q):
            return m
        if m.get("op") == "stop":
            return None


def run(m):
    tasks = m["pipeline"]["tasks"]
    options = m["options"]
    states = {t["id"]: counters(n_blocks(t)) for t in tasks}
    q = 0
    stopped = False
    send({"ev": "progress", "kind": "start", "states": states})
    if options.get("serial"):
        for task in tasks:
            done = 0
            for block in blocks_of(task):
                if task.get("check"):
                    q += 1
                    send({"ev": "check", "q": q, "block": block})
                    checked = wait_for("checked", q)
                    if checked is None:
                        stopped = True
                        break
                    if checked["done"]:
                        done += 1
                        continue
                q += 1
                send({"ev": "block", "q": q, "block": block})
                ran = wait_for("ran", q)
                if ran is None or ran.get("stop"):
                    stopped = True
                    break
                if ran["ok"]:
                    done += 1
            states[task["id"]] = counters(len(blocks_of(task)), done)
            if stopped:
                break
    elif os.environ.get("FAKE_SESSION_LAUNCH") == "server":
        WorkerServer(m, tasks).run()
        return
    else:
        if os.environ.get("FAKE_SESSION_LAUNCH"):
            for task in tasks:
                send({"ev": "launch", "task": task["id"], "worker": 0,
                      "env": {"BLOCKWISE_CONNECT": "127.0.0.1:1"}})
        # Runs until told to stop (progress every 20 ms).
        import select
        while not stopped:
            ready = select.select([sys.stdin], [], [], 0.02)[0]
            if ready:
                got = receive()
                if got.get("op") == "stop":
                    stopped = True
            else:
                send({"ev": "progress", "kind": "progress", "states": states})
    send({"ev": "progress", "kind": "finish", "states": states})
    send({"re": m["id"], "states": states, "stats": {"process": {}, "per_task": {},
                                                       "per_worker": []},
          "code": 130 if stopped else 0, "failures": []})


# ---- a worker server: the worker protocol's scheduler end, for one run ------------------------


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "workers", "python"))
import blockwise_worker as wp  # noqa: E402


class Connection(object):
    """One worker's byte stream: frames in and out."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.start = 0

    def send(self, kind, body):
        self.sock.sendall(wp.HEADER.pack(len(body) + 1, kind) + body)

    def send_json(self, kind, value):
        self.send(kind, json.dumps(value).encode())

    def frame(self):
        """(kind, body), or None at EOF."""
        while True:
            buffer, start = self.buffer, self.start
            if len(buffer) - start >= 5:
                length, kind = wp.HEADER.unpack_from(buffer, start)
                if len(buffer) - start >= 4 + length:
                    self.start = start + 4 + length
                    return kind, buffer[start + 5:start + 4 + length]
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                data = b""
            if not data:
                return None
            self.buffer = buffer[start:] + data
            self.start = 0


class WorkerServer(object):
    """Launches maxWorkers worker threads per task (launch events), hands out every block once
    (batches of BATCH), takes results; a worker that ends without stop counts as a worker
    failure and is replaced up to maxWorkerRestarts times. Answers the run when every block is
    reported (or nobody is left to run the rest)."""

    BATCH = 256

    def __init__(self, request, tasks):
        import socket
        import threading
        self.request = request
        self.tasks = {t["id"]: t for t in tasks}
        self.lock = threading.Lock()
        self.queue = {t["id"]: list(range(n_blocks(t))) for t in tasks}
        self.counts = {t["id"]: {"completed": 0, "failed": 0, "failures": 0, "restarts": 0,
                                 "alive": 0} for t in tasks}
        self.secret = os.urandom(32).hex()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.slots = {}
        self.next_worker = 0
        self.answered = False
        self.errors = []
        self.connected = set()

    def launch(self, task_id):
        slot = os.urandom(8).hex()
        worker = self.next_worker
        self.next_worker += 1
        self.slots[slot] = (task_id, worker)
        self.counts[task_id]["alive"] += 1
        send({"ev": "launch", "task": task_id, "worker": worker,
              "env": {"BLOCKWISE_CONNECT": "127.0.0.1:%d" % self.port,
                      "BLOCKWISE_SECRET": self.secret, "BLOCKWISE_WORKER_SLOT": slot}})

    def run(self):
        import threading
        with self.lock:
            for task_id, task in self.tasks.items():
                for _ in range(task["maxWorkers"]):
                    self.launch(task_id)
        threading.Thread(target=self.accept, daemon=True).start()
        # The main thread keeps reading the session's input (exited, stop) until answered.
        while not self.answered:
            import select
            if select.select([sys.stdin], [], [], 0.05)[0]:
                m = receive()
                if m.get("op") == "stop":
                    with self.lock:
                        self.finish(130)
                elif m.get("op") == "exited":
                    with self.lock:
                        key = (m["task"], m["worker"])
                        if key not in self.connected:
                            self.worker_ended(m["task"], m["ok"])

    def accept(self):
        import threading
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(sock,), daemon=True).start()

    def serve(self, sock):
        c = Connection(sock)
        kind, body = c.frame()
        hello = json.loads(body)
        theirs = os.urandom(32).hex()
        c.send_json(wp.CHALLENGE, {"nonce": theirs, "proof": wp.mac(
            self.secret, ["blockwise scheduler", hello["nonce"], theirs])})
        kind, body = c.frame()
        slot = hello["slot"]
        assert json.loads(body)["mac"] == wp.mac(
            self.secret, ["blockwise worker", theirs, hello["nonce"], slot])
        task_id, worker = self.slots[slot]
        with self.lock:
            self.connected.add((task_id, worker))
        task = self.tasks[task_id]
        c.send_json(wp.INIT, {"protocol": 1, "taskId": task_id, "workerId": worker,
                              "layout": {k: task[k] for k in
                                         ("totalRoi", "readRoi", "writeRoi", "fit",
                                          "readWriteConflict")},
                              "measure": False, "outputs": [], "runId": "fake", "params": {}})
        frame = c.frame()
        assert frame is not None and frame[0] == wp.READY, frame
        clean = False
        pending = set()
        while True:
            # Two batches in flight at most: the worker never waits for the next one.
            batch = []
            if len(pending) < self.BATCH:
                with self.lock:
                    batch = self.queue[task_id][:self.BATCH]
                    del self.queue[task_id][:self.BATCH]
            if batch:
                pending.update(batch)
                c.send(wp.BLOCKS, struct.pack("<I%dd" % (2 * len(batch)), len(batch),
                                              *[x for p in batch for x in (p, 0)]))
            if not pending:
                c.send(wp.STOP, b"")
                clean = True
                break
            if batch and len(pending) < self.BATCH:
                continue
            frame = c.frame()
            if frame is None or frame[0] == wp.CLOSING:
                with self.lock:
                    self.queue[task_id][:0] = sorted(pending)
                break
            kind, body = frame
            if kind != wp.RESULTS:
                continue
            count, stride, _cpu = struct.unpack_from("<IId", body)
            records = struct.unpack_from("<%dd" % (count * stride), body, 16)
            tail = body[16 + 8 * count * stride:]
            if tail:
                self.errors.extend(json.loads(tail))
            completed = failed = 0
            for i in range(count):
                position, status = records[i * stride], records[i * stride + 1]
                pending.discard(int(position))
                if status:
                    failed += 1
                else:
                    completed += 1
            with self.lock:
                self.counts[task_id]["completed"] += completed
                self.counts[task_id]["failed"] += failed
        sock.close()
        with self.lock:
            self.worker_ended(task_id, clean)

    def worker_ended(self, task_id, clean):
        counts = self.counts[task_id]
        counts["alive"] -= 1
        if not clean:
            counts["failures"] += 1
            if self.queue[task_id] and counts["restarts"] < self.tasks[task_id]["maxWorkerRestarts"]:
                counts["restarts"] += 1
                self.launch(task_id)
        if all(self.counts[t]["alive"] == 0 for t in self.tasks):
            self.finish(0)

    def finish(self, code):
        if self.answered:
            return
        self.answered = True
        self.listener.close()
        states = {}
        for task_id, task in self.tasks.items():
            counts = self.counts[task_id]
            total = n_blocks(task)
            state = counters(total, counts["completed"], counts["failed"])
            state["orphaned"] = total - counts["completed"] - counts["failed"]
            state["ready"] = 0
            state["workerFailures"] = counts["failures"]
            state["workerRestarts"] = counts["restarts"]
            states[task_id] = state
        log({"errors": self.errors})
        send({"ev": "progress", "kind": "finish", "states": states})
        send({"re": self.request["id"], "states": states, "stats": {
            "process": {}, "per_task": {}, "per_worker": []}, "code": code, "failures": []})


def main():
    while True:
        m = receive()
        if m.get("op") == "run":
            run(m)
            continue
        if "id" not in m:
            continue  # stop, exited, checked, ran outside a run
        body = answer_request(m)
        body["re"] = m["id"]
        send(body)


if __name__ == "__main__":
    main()
