"""A consumer of a lockgen queue over the HTTP/JSON API, in Python with the
standard library only, as a program in another language would work a queue
that lockgen.yaml marks external. The Go test TestServeFeedsAPythonConsumer
starts `lockgen serve` and runs, in turn:

    python3 api_consumer.py BASE_URL WRITE_TOKEN push N    enqueue N runs
    python3 api_consumer.py BASE_URL WRITE_TOKEN hang      claim 3, then hang
    python3 api_consumer.py BASE_URL WRITE_TOKEN work N    work until N done

`hang` claims three runs with a 2 s lease, prints "claimed ID ID ID" and
sleeps until it is killed: its runs must be rescued and run again. `work`
long-polls, heartbeats its runs past the 3 s lease it claims them with, fails
the first attempt of run 5's image for a retry, completes the rest, and
checks that an outcome of a stale claim is refused with 409. The runs carry
the W3C trace context of the span that pushed them (TRACEPARENT) in their
headers, which every claim hands back, as a tracing consumer would link its
spans to the producer's. It prints one
line per check or run and exits 1 at the first failure.
"""
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

BASE, TOKEN, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
WORKER = "py-%s@%s:%d" % (MODE, socket.gethostname(), os.getpid())
# The producer's span, as an OpenTelemetry SDK would write it.
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def call(method, path, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, method=method, data=data)
    req.add_header("Authorization", "Bearer " + TOKEN)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def expect(cond, what, doc=None):
    if not cond:
        print("FAIL: %s: %s" % (what, json.dumps(doc)), flush=True)
        sys.exit(1)
    print("ok: " + what, flush=True)


def claim(limit, wait, lease):
    status, doc = call("POST", "/api/v1/queues/images/claim",
                       {"worker": WORKER, "limit": limit, "wait": wait, "lease": lease})
    expect(status == 200, "claim answers 200", doc)
    return doc["items"]


if MODE == "push":
    n = int(sys.argv[4])
    runs = [{"args": {"image_id": i + 1, "width": 640}, "headers": {"traceparent": TRACEPARENT}} for i in range(n)]
    status, doc = call("POST", "/api/v1/jobs/resize/runs/batch", {"runs": runs})
    expect(status == 201 and len(doc["items"]) == n, "pushed %d runs in one batch" % n, doc)
    print("pushed " + " ".join(str(p["id"]) for p in doc["items"]), flush=True)

elif MODE == "hang":
    items = claim(3, "10s", "2s")
    expect(len(items) == 3, "claimed 3 runs with a 2s lease", items)
    print("claimed " + " ".join(str(r["id"]) for r in items), flush=True)
    time.sleep(3600)  # killed by the test: its runs must be rescued

elif MODE == "work":
    want = int(sys.argv[4])
    done, deadline = set(), time.time() + 90
    while len(done) < want and time.time() < deadline:
        sent = time.monotonic()
        items = claim(10, "5s", "3s")
        for run in items:
            args = run["args"]
            expect(run["lease_ms"] >= 3000 and sent + run["lease_ms"] / 1000 > time.monotonic(),
                   "run %d's lease lasts lease_ms from the claim request" % run["id"], run)
            expect(run["job"] == "resize" and isinstance(args["image_id"], int) and args["width"] == 640,
                   "run %d has its typed args" % run["id"], run)
            expect(run.get("headers") == {"traceparent": TRACEPARENT},
                   "run %d carries its producer's trace context" % run["id"], run)
        # Work past the 3 s lease the claim took, heartbeating every second.
        for _ in range(4):
            time.sleep(1)
            for run in items:
                status, hb = call("POST", "/api/v1/runs/%d/heartbeat" % run["id"], {"claim": run["claim"], "lease": "3s"})
                expect(status == 200 and hb["claim"] == run["claim"] and hb["lease_ms"] >= 3000,
                       "heartbeat keeps run %d" % run["id"], hb)
        for run in items:
            rid, c = run["id"], run["claim"]
            if run["attempt"] > 1:
                status, err = call("POST", "/api/v1/runs/%d/complete" % rid, {"claim": c - 1})
                expect(status == 409 and err["error"]["code"] == "conflict",
                       "the outcome of run %d's earlier claim is refused with 409" % rid, err)
            if run["args"]["image_id"] == 5 and run["attempt"] == 1:
                status, r = call("POST", "/api/v1/runs/%d/fail" % rid, {"claim": c, "error": "thumbnailer busy"})
                expect(status == 200 and r["state"] == "available" and r["last_error"] == "thumbnailer busy",
                       "a failed attempt of run %d is retried" % rid, r)
                continue
            status, r = call("POST", "/api/v1/runs/%d/complete" % rid, {"claim": c})
            expect(status == 200 and r["state"] == "completed", "run %d completed" % rid, r)
            print("completed %d attempt %d" % (rid, run["attempt"]), flush=True)
            done.add(rid)
    expect(len(done) == want, "worked all %d runs" % want, sorted(done))
    print("all checks passed", flush=True)

else:
    print("unknown mode " + MODE)
    sys.exit(2)
