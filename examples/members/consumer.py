#!/usr/bin/env python3
"""A member of a DeltaBus consumer group, in Python with the standard
library only.

Members of one group share its events: each event goes to one member at a
time, and the events of one key come one after the other, in commit order.
Start as many members as the handler needs; stop or kill them at any time:
what a member did not acknowledge is handed to another once its lease ends.

    python3 consumer.py --url http://127.0.0.1:8089 --group billing \
        --topic orders --member "$(hostname)-1" [--token-file F]

Each handled event is printed as one JSON line. Replace handle() with your
own work; an exception gives the event back to be handed out again.
"""
import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request


class Group:
    """The HTTP API of `relay serve` for one group of one topic."""

    def __init__(self, url, group, topic, token=None):
        self.base = f"{url.rstrip('/')}/v1/groups/{group}/topics/{topic}"
        self.token = token

    def _post(self, op, body, timeout=90):
        req = urllib.request.Request(self.base + "/" + op, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.load(resp)

    def receive(self, member, max=10, wait_ms=5000, visibility_ms=30000):
        body = {"member": member, "max": max, "wait_ms": wait_ms, "visibility_ms": visibility_ms}
        return self._post("receive", body)["messages"]

    def ack(self, ack_ids):
        return self._post("ack", {"ack_ids": ack_ids})

    def nack(self, ack_ids, retry_after_ms=1000):
        return self._post("nack", {"ack_ids": ack_ids, "retry_after_ms": retry_after_ms})


def now_ns():
    return time.time_ns()


def ack_within_lease(group, ack_ids, lease_end):
    """Acknowledges, retrying while the server cannot be reached and the
    leases hold: an acknowledgement repeated after one that landed succeeds
    again, so a retry after a server restart loses nothing. Returns None
    when the leases ended first; the events are then handed out again."""
    backoff = 0.1
    while True:
        try:
            return group.ack(ack_ids)
        except urllib.error.HTTPError as e:
            if e.code < 500:
                raise
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() + backoff > lease_end:
            return None
        time.sleep(backoff)
        backoff = min(backoff * 2, 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default=os.environ.get("DELTABUS_SERVE_URL", "http://127.0.0.1:8089"))
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--member", required=True)
    p.add_argument("--token-file", help="a file holding the bearer token")
    p.add_argument("--max", type=int, default=10)
    p.add_argument("--visibility-ms", type=int, default=30000, help="an event not acknowledged this long is handed out again")
    p.add_argument("--handle-ms", type=float, default=0, help="pretend each event takes this long")
    p.add_argument("--trace", action="store_true", help="add receive and ack times to each line (tests)")
    args = p.parse_args()
    token = open(args.token_file).read().split()[0] if args.token_file else None
    group = Group(args.url, args.group, args.topic, token)

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    backoff = 0.1
    while not stopping:
        try:
            asked = time.monotonic()
            msgs = group.receive(args.member, max=args.max, wait_ms=2000, visibility_ms=args.visibility_ms)
            received = now_ns()
        except urllib.error.HTTPError as e:
            if e.code < 500:  # our request is wrong: retrying cannot help
                print(f"consumer.py: {e.code}: {json.load(e).get('error')}", file=sys.stderr)
                return 1
            time.sleep(backoff)
            backoff = min(backoff * 2, 5)
            continue
        except (urllib.error.URLError, OSError):  # the server restarts
            time.sleep(backoff)
            backoff = min(backoff * 2, 5)
            continue
        backoff = 0.1
        done, lines = [], []
        for m in msgs:
            ev = m["event"]
            if args.handle_ms:
                time.sleep(args.handle_ms / 1000)
            line = {"member": args.member, "delivery": m["delivery"], "event_id": ev["event_id"], "key": ev["key"],
                    "version": ev["version"], "offset": ev["offset"], "payload": ev["payload"]}
            if args.trace:
                line["received_ns"] = received
            lines.append(line)
            done.append(m["ack_id"])
        if not done:
            continue
        sent = now_ns()
        if args.trace:  # the acknowledgement may land and this member die before it hears so
            for line in lines:
                print(json.dumps({"member": args.member, "event_id": line["event_id"], "delivery": line["delivery"],
                                  "acking": True, "ack_sent_ns": sent}), flush=True)
        # The leases were granted after the request was sent: they end no
        # earlier than its sending plus the visibility.
        try:
            res = ack_within_lease(group, done, asked + args.visibility_ms / 1000)
        except urllib.error.HTTPError as e:  # our request is wrong: retrying cannot help
            print(f"consumer.py: {e.code}: {json.load(e).get('error')}", file=sys.stderr)
            return 1
        if res is None:
            continue  # not acknowledged: handed out again now that the leases ended
        failed = {f["ack_id"] for f in res.get("failed", [])}
        for ack_id, line in zip(done, lines):
            if args.trace:
                line["ack_sent_ns"] = sent
                line["acked"] = ack_id not in failed
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
