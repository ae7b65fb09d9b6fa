"""A client of lockgen's HTTP/JSON API in Python, standard library only, as a
program in another language would use it. The Go test TestServeAnswersAPythonClient
starts `lockgen serve` and runs:

    python3 api_client.py BASE_URL WRITE_TOKEN

It reads the overview and the runs, pauses and resumes a queue, cancels and
retries a run, and checks that writes without the token and bad input are
refused with the documented status and error document. It prints one "ok:"
line per check and exits 1 at the first failure.
"""
import json
import sys
import urllib.error
import urllib.request

BASE, TOKEN = sys.argv[1], sys.argv[2]


def call(method, path, token=None, body=None):
    req = urllib.request.Request(BASE + path, method=method, data=body)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def expect(cond, what, doc=None):
    if not cond:
        print("FAIL: %s: %s" % (what, json.dumps(doc)))
        sys.exit(1)
    print("ok: " + what)


status, st = call("GET", "/api/v1/status")
expect(status == 200, "GET /api/v1/status answers 200", st)
expect([l["lock"] for l in st["leaders"]] == ["master"], "the leader is master", st)
queues = {q["name"]: q for q in st["queues"]}
expect(queues["mail"]["counts"]["due"] == 2, "queue mail has 2 runs due", st)

status, page = call("GET", "/api/v1/runs?job=send_receipt&limit=1")
expect(status == 200 and len(page["items"]) == 1 and page.get("next"), "runs page 1 of send_receipt has a next cursor", page)
newest = page["items"][0]["id"]
status, page = call("GET", "/api/v1/runs?job=send_receipt&limit=1&after=%s" % page["next"])
expect(status == 200 and page["items"][0]["id"] < newest, "runs page 2 holds an older run", page)

status, run = call("GET", "/api/v1/runs/%d" % newest)
expect(status == 200 and run["args"] == {"order_id": 2}, "a run's args are JSON", run)

status, err = call("POST", "/api/v1/queues/mail/pause")
expect(status == 401 and err["error"]["code"] == "unauthorized", "a pause without the token is 401", err)
status, err = call("POST", "/api/v1/queues/mail/pause", token="wrong")
expect(status == 401, "a pause with a wrong token is 401", err)
status, q = call("POST", "/api/v1/queues/mail/pause", token=TOKEN)
expect(status == 200 and q["paused"] is True, "a pause with the token pauses mail", q)
status, qs = call("GET", "/api/v1/queues")
expect({q["name"]: q["paused"] for q in qs["items"]}["mail"] is True, "GET /api/v1/queues shows mail paused", qs)
status, q = call("POST", "/api/v1/queues/mail/resume", token=TOKEN)
expect(status == 200 and q["paused"] is False, "resume lifts the pause", q)

status, run = call("POST", "/api/v1/runs/%d/cancel" % newest, token=TOKEN)
expect(status == 200 and run["state"] == "cancelled", "cancel cancels a waiting run", run)
status, err = call("POST", "/api/v1/runs/%d/cancel" % newest, token=TOKEN)
expect(status == 409 and err["error"]["code"] == "conflict", "cancelling it again is 409", err)
status, run = call("POST", "/api/v1/runs/%d/retry" % newest, token=TOKEN)
expect(status == 200 and run["state"] == "available", "retry makes it available again", run)
status, run = call("GET", "/api/v1/runs/%d" % newest)
expect([e["event"] for e in run.get("history", [])] == ["cancelled", "retried"] and run["history"][0]["at"].endswith("Z"),
       "the run's history has the cancel and the retry, in order", run)

status, pushed = call("POST", "/api/v1/jobs/send_receipt/runs", token=TOKEN,
                      body=json.dumps({"args": {"order_id": 99}, "delay": "30s", "unique_key": "py-99"}).encode())
expect(status == 201 and pushed["existing"] is False, "a push answers 201 with the new run's id", pushed)
status, again = call("POST", "/api/v1/jobs/send_receipt/runs", token=TOKEN,
                     body=json.dumps({"args": {"order_id": 99}, "unique_key": "py-99"}).encode())
expect(status == 200 and again == {"id": pushed["id"], "existing": True}, "the same unique key answers the existing run", again)
status, batch = call("POST", "/api/v1/jobs/send_receipt/runs/batch", token=TOKEN,
                    body=json.dumps({"runs": [{"args": {"order_id": 100}}, {"args": {"order_id": 101}, "unique_key": "py-99"}]}).encode())
expect(status == 201 and len(batch["items"]) == 2 and batch["items"][1] == {"id": pushed["id"], "existing": True},
       "a batch push answers each run in order, the repeated unique key with the existing run", batch)
status, err = call("POST", "/api/v1/jobs/send_receipt/runs/batch", token=TOKEN,
                   body=json.dumps({"runs": [{"args": {"order_id": 102}}, {"args": {"order_id": "x"}}]}).encode())
expect(status == 400 and err["error"]["field"] == "runs[1].args.order_id", "a batch with one bad run is 400 naming runs[1].args.order_id", err)
status, run = call("GET", "/api/v1/runs/%d" % pushed["id"])
expect(status == 200 and run["args"] == {"order_id": 99} and run["queue"] == "mail", "the pushed run has its args and its job's queue", run)
status, err = call("POST", "/api/v1/jobs/send_receipt/runs", token=TOKEN, body=b'{"args": {"order_id": "x"}}')
expect(status == 400 and err["error"]["field"] == "args.order_id", "a push with a wrong type is 400 naming args.order_id", err)
status, err = call("POST", "/api/v1/jobs/send_receipt/runs", body=b'{"args": {"order_id": 1}}')
expect(status == 401, "a push without the token is 401", err)

for path, code, field in [
    ("/api/v1/runs?limit=abc", 400, "limit"),
    ("/api/v1/runs?state=nope", 400, "state"),
    ("/api/v1/runs?job=nope", 400, "job"),
    ("/api/v1/runs/abc", 400, "id"),
    ("/api/v1/runs/999999999", 404, "id"),
]:
    status, err = call("GET", path)
    expect(status == code and err["error"].get("field") == field, "GET %s is %d naming %s" % (path, code, field), err)
status, err = call("POST", "/api/v1/queues/nope/pause", token=TOKEN)
expect(status == 400 and err["error"]["field"] == "queue", "pausing an unknown queue is 400 naming queue", err)
print("all checks passed")
