#!/usr/bin/env python3
"""fake_metadata.py - a fake cloud metadata service for ckptd's preemption
notice pollers (ckptd/notice): AWS IMDSv2, GCP and Azure Scheduled Events on
one loopback port, driven by the test through a control endpoint. Standard
library only (python3 >= 3.7).

    python3 fake_metadata.py [--host 127.0.0.1] [--port 0] [--aws none]
        [--gcp none] [--azure none] [--azure-vm ckpt-vm] [--mode ok]
        [--token-ttl N] [--verbose]

The first line on stdout is the port it listens on (--port 0: a free one),
written as soon as it listens; nothing else goes to stdout. SIGTERM or
SIGINT end it. Requests from several pollers (several agents) at once are
fine: every client sees the same state.

Served as the clouds do:
  PUT /latest/api/token                       AWS IMDSv2 token. Needs
      X-aws-ec2-metadata-token-ttl-seconds: 1..21600 (else 400); refused (403)
      with X-Forwarded-For. Answers a token and the TTL granted in the same
      header (the asked TTL, or --token-ttl / "aws_token_ttl" if shorter).
  GET /latest/meta-data/spot/instance-action  Needs a live token in
      X-aws-ec2-metadata-token (else 401). aws "none": 404; "terminate",
      "stop", "hibernate": {"action": ..., "time": "2026-11-29T13:40:00Z"}.
  GET /latest/meta-data/iam/security-credentials/       AWS IMDSv2: the
      instance's role name (404 without "aws_role"); needs a live token (401).
  GET /latest/meta-data/iam/security-credentials/ROLE   that role's
      credentials, {"Code": "Success", "AccessKeyId", "SecretAccessKey",
      "Token", "Expiration": now + "aws_creds_ttl" s, ...} from "aws_creds"
      (for the S3 client's tests, storage/s3_cred.c); a live token needed.
  GET /computeMetadata/v1/instance/preempted  Needs Metadata-Flavor: Google
      (else 403). gcp "none": FALSE; "preempted": TRUE.
  GET /metadata/scheduledevents?api-version=V  Needs Metadata: true and an
      api-version (else 400). azure "none": no events; "preempt": one
      Preempt event for the "azure_resources" VMs.

Control (JSON in, JSON out):
  GET  /_control   {"state": {...}, "stats": {...}}: the state below, and
                   counters: "requests" and "status" per path, "token_puts",
                   "tokens_issued", "redirected" (requests that followed a
                   redirect: a poller must never make one).
  POST /_control   changes the keys given, answers like GET:
    "aws": "none"|"terminate"|"stop"|"hibernate"
    "aws_time": served as is (any string: hostile tests), or
    "aws_in": seconds from now (fixed when set; default 120 on arming)
    "gcp": "none"|"preempted"
    "azure": "none"|"preempt"
    "azure_event_id", "azure_status" ("Scheduled"), "azure_resources" (list)
    "azure_not_before": served as is ("" is allowed), or
    "azure_in": seconds from now (default 30 on arming)
    "mode": how the three data endpoints answer, for every source:
       "ok"          as above
       "garbage"     200 with bytes that are no answer at all
       "huge"        200 with a valid answer padded to "huge_bytes" (1 MiB),
                     with its Content-Length
       "huge_stream" the same without a length, until the connection closes
       "slow"        200 and headers at once, then the body a byte at a
                     time every "slow_byte_s" (0.5) seconds
       "hang"        reads the request and never answers (until the mode
                     changes, or 300 s)
       "redirect"    302 to /_redirected on this server, which serves a
                     notice
       "error"       500
    "aws_mode", "gcp_mode", "azure_mode": the same for one endpoint only
       ("" or null: follow "mode")
    "token_mode": the same for AWS's token endpoint ("mode" leaves it be)
    "aws_token_ttl": shortest TTL granted (null: as asked)
    "aws_role": the IAM role's name (null: none), "aws_creds": {"AccessKeyId":
       ..., "SecretAccessKey": ..., "Token": ...} served for it,
       "aws_creds_ttl": their Expiration, seconds from each answer (3600)
    "revoke_tokens": true: every token issued so far stops being valid
  POST /_reset     the state given on the command line, counters zeroed.
"""
import argparse
import email.utils
import json
import os
import secrets
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

AWS_TOKEN = "/latest/api/token"
AWS_ACTION = "/latest/meta-data/spot/instance-action"
AWS_ROLES = "/latest/meta-data/iam/security-credentials/"
GCP_PREEMPTED = "/computeMetadata/v1/instance/preempted"
AZURE_EVENTS = "/metadata/scheduledevents"
MODES = ("ok", "garbage", "huge", "huge_stream", "slow", "hang", "redirect", "error")


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def rfc1123(t):
    return email.utils.formatdate(t, usegmt=True)


class State:
    """Everything a request reads or a control call changes, under one lock."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.reset()

    def reset(self):
        a = self.args
        self.s = {
            "aws": a.aws, "aws_time": None, "gcp": a.gcp, "azure": a.azure,
            "azure_event_id": "602d9444-d2cd-49c7-8624-8643e7171297",
            "azure_status": "Scheduled", "azure_resources": [a.azure_vm],
            "azure_not_before": None, "mode": a.mode, "aws_mode": None,
            "gcp_mode": None, "azure_mode": None, "token_mode": None,
            "aws_token_ttl": a.token_ttl, "huge_bytes": 1 << 20, "slow_byte_s": 0.5,
            "aws_role": None, "aws_creds": None, "aws_creds_ttl": 3600,
        }
        self.tokens = {}  # token -> expiry (time.monotonic())
        self.stats = {"requests": {}, "status": {}, "token_puts": 0,
                      "tokens_issued": 0, "redirected": 0}
        self.generation = 0
        self.arm_defaults()

    def arm_defaults(self):
        s, now = self.s, time.time()
        if s["aws"] != "none" and s["aws_time"] is None:
            s["aws_time"] = rfc3339(now + 120)
        if s["azure"] != "none" and s["azure_not_before"] is None:
            s["azure_not_before"] = rfc1123(now + 30)

    def control(self, req):
        s, now = self.s, time.time()
        for k, v in req.items():
            if k == "aws_in":
                s["aws_time"] = rfc3339(now + float(v))
            elif k == "azure_in":
                s["azure_not_before"] = rfc1123(now + float(v))
            elif k == "revoke_tokens":
                if v:
                    self.tokens.clear()
            elif k in s:
                if k.endswith("mode") and v not in MODES and v not in ("", None):
                    raise ValueError("unknown mode %r" % v)
                s[k] = v if v != "" or not k.endswith("_mode") else None
            else:
                raise ValueError("unknown key %r" % k)
        self.arm_defaults()
        self.generation += 1
        self.changed.notify_all()

    def mode(self, which):
        if which == "token":  # the token is hostile only when asked by name
            return self.s["token_mode"] or "ok"
        return self.s.get(which + "_mode") or self.s["mode"]

    def view(self):
        return {"state": dict(self.s), "stats": json.loads(json.dumps(self.stats))}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-metadata/1"

    def log_message(self, fmt, *args):
        if self.server.state.args.verbose:
            sys.stderr.write("fake_metadata: " + (fmt % args) + "\n")

    # ---------------------------------------------------------------- plumbing

    def count(self, path, status):
        st = self.server.state.stats
        st["requests"][path] = st["requests"].get(path, 0) + 1
        key = "%s %d" % (path, status)
        st["status"][key] = st["status"].get(key, 0) + 1

    def send(self, status, body=b"", ctype="text/plain", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def body_in(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # ---------------------------------------------------------------- hostile answers

    def hostile(self, mode, good, ctype):
        """Answers a data request in mode; good is the valid body."""
        state = self.server.state
        if mode == "ok":
            return self.send(200, good, ctype)
        if mode == "garbage":
            return self.send(200, b"\x89PNG\r\n\x1a\n\x00\xff{[\"" + os.urandom(64), "application/octet-stream")
        if mode == "error":
            return self.send(500, "internal error")
        if mode == "redirect":
            loc = "http://%s:%d/_redirected" % self.server.server_address[:2]
            return self.send(302, "", headers=(("Location", loc),))
        if mode in ("huge", "huge_stream"):
            with state.lock:
                n = int(state.s["huge_bytes"])
            pad = b" " * max(0, n - len(good))
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            if mode == "huge":
                self.send_header("Content-Length", str(len(good) + len(pad)))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            # The valid part last: only a client reading all of it sees a notice.
            for i in range(0, len(pad), 65536):
                self.wfile.write(pad[i:i + 65536])
            self.wfile.write(good)
            return None
        if mode == "slow":
            with state.lock:
                gap = float(state.s["slow_byte_s"])
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(good)))
            self.end_headers()
            self.wfile.flush()
            for i in range(len(good)):
                time.sleep(gap)
                self.wfile.write(good[i:i + 1])
                self.wfile.flush()
            return None
        if mode == "hang":
            self.close_connection = True
            with state.lock:
                gen, until = state.generation, time.monotonic() + 300
                while state.generation == gen and time.monotonic() < until:
                    state.changed.wait(1.0)
            return None
        return self.send(500, "unknown mode")

    # ---------------------------------------------------------------- the clouds

    def aws_token(self):
        state = self.server.state
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        with state.lock:
            state.stats["token_puts"] += 1
            mode = state.mode("token")
            cap = state.s["aws_token_ttl"]
        if self.headers.get("X-Forwarded-For"):
            self.count(AWS_TOKEN, 403)
            return self.send(403, "Forbidden")
        try:
            ttl = int(ttl)
        except (TypeError, ValueError):
            ttl = 0
        if not 1 <= ttl <= 21600:
            self.count(AWS_TOKEN, 400)
            return self.send(400, "Bad Request")
        if cap:
            ttl = min(ttl, int(cap))
        tok = secrets.token_urlsafe(30)
        with state.lock:
            state.tokens[tok] = time.monotonic() + ttl
            state.stats["tokens_issued"] += 1
        self.count(AWS_TOKEN, 200)
        if mode != "ok":
            return self.hostile(mode, tok.encode(), "text/plain")
        return self.send(200, tok, headers=(("X-aws-ec2-metadata-token-ttl-seconds", str(ttl)),))

    def aws_action(self):
        state = self.server.state
        tok = self.headers.get("X-aws-ec2-metadata-token", "")
        with state.lock:
            live = state.tokens.get(tok, 0) > time.monotonic()
            s = dict(state.s)
            mode = state.mode("aws")
        if not live:
            self.count(AWS_ACTION, 401)
            return self.send(401, "Unauthorized")
        if mode == "ok" and s["aws"] == "none":
            self.count(AWS_ACTION, 404)
            return self.send(404, "<html><body>404 - Not Found</body></html>", "text/html")
        self.count(AWS_ACTION, 200)
        good = json.dumps({"action": s["aws"] if s["aws"] != "none" else "terminate",
                           "time": s["aws_time"] or rfc3339(time.time() + 120)})
        return self.hostile(mode, good.encode(), "application/json")

    def aws_role(self, path):
        """The role list, or a role's credentials (path below AWS_ROLES)."""
        state = self.server.state
        tok = self.headers.get("X-aws-ec2-metadata-token", "")
        name = path[len(AWS_ROLES):]
        with state.lock:
            live = state.tokens.get(tok, 0) > time.monotonic()
            role, creds, ttl = state.s["aws_role"], state.s["aws_creds"], state.s["aws_creds_ttl"]
        if not live:
            self.count(path, 401)
            return self.send(401, "Unauthorized")
        if not role or (name and name != role):
            self.count(path, 404)
            return self.send(404, "Not Found")
        self.count(path, 200)
        if not name:
            return self.send(200, role)
        body = {"Code": "Success", "LastUpdated": rfc3339(time.time()), "Type": "AWS-HMAC",
                "Expiration": rfc3339(time.time() + float(ttl))}
        body.update(creds or {})
        return self.send(200, json.dumps(body), "application/json")

    def gcp_preempted(self):
        state = self.server.state
        with state.lock:
            s = dict(state.s)
            mode = state.mode("gcp")
        if self.headers.get("Metadata-Flavor") != "Google" or self.headers.get("X-Forwarded-For"):
            self.count(GCP_PREEMPTED, 403)
            return self.send(403, "Forbidden")
        self.count(GCP_PREEMPTED, 200)
        good = b"TRUE" if s["gcp"] == "preempted" or mode != "ok" else b"FALSE"
        return self.hostile(mode, good, "application/text")

    def azure_events(self, query):
        state = self.server.state
        with state.lock:
            s = dict(state.s)
            mode = state.mode("azure")
        if self.headers.get("Metadata") != "true":
            self.count(AZURE_EVENTS, 400)
            return self.send(400, json.dumps({"error": "Bad request. Required metadata header not specified"}),
                             "application/json")
        if not parse_qs(query).get("api-version"):
            self.count(AZURE_EVENTS, 400)
            return self.send(400, json.dumps({"error": "Bad request. api-version was not specified"}),
                             "application/json")
        self.count(AZURE_EVENTS, 200)
        events = []
        if s["azure"] == "preempt" or mode != "ok":
            events.append({
                "EventId": s["azure_event_id"], "EventType": "Preempt",
                "ResourceType": "VirtualMachine", "Resources": s["azure_resources"],
                "EventStatus": s["azure_status"],
                "NotBefore": s["azure_not_before"] if s["azure_not_before"] is not None else rfc1123(time.time() + 30),
                "Description": "", "EventSource": "Platform", "DurationInSeconds": -1,
            })
        good = json.dumps({"DocumentIncarnation": state.generation, "Events": events})
        return self.hostile(mode, good.encode(), "application/json")

    # ---------------------------------------------------------------- dispatch

    def do_PUT(self):
        self.body_in()
        if urlsplit(self.path).path == AWS_TOKEN:
            return self.aws_token()
        return self.send(404, "Not Found")

    def do_GET(self):
        u = urlsplit(self.path)
        state = self.server.state
        if u.path == AWS_ACTION:
            return self.aws_action()
        if u.path.startswith(AWS_ROLES):
            return self.aws_role(u.path)
        if u.path == GCP_PREEMPTED:
            return self.gcp_preempted()
        if u.path == AZURE_EVENTS:
            return self.azure_events(u.query)
        if u.path == "/_control":
            with state.lock:
                return self.send(200, json.dumps(state.view()), "application/json")
        if u.path == "/_redirected":
            with state.lock:
                state.stats["redirected"] += 1
            return self.send(200, json.dumps({"action": "terminate", "time": rfc3339(time.time() + 60)}),
                             "application/json")
        return self.send(404, "Not Found")

    def do_POST(self):
        u = urlsplit(self.path)
        state = self.server.state
        body = self.body_in()
        if u.path == "/_reset":
            with state.lock:
                state.reset()
                state.changed.notify_all()
                return self.send(200, json.dumps(state.view()), "application/json")
        if u.path == "/_control":
            try:
                req = json.loads(body or b"{}")
                if not isinstance(req, dict):
                    raise ValueError("not an object")
                with state.lock:
                    state.control(req)
                    return self.send(200, json.dumps(state.view()), "application/json")
            except ValueError as e:
                return self.send(400, json.dumps({"error": str(e)}), "application/json")
        return self.send(404, "Not Found")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A poller that gave up on a slow, huge or hanging answer closes its
        # end: expected here, not worth a traceback.
        e = sys.exc_info()[1]
        if isinstance(e, (BrokenPipeError, ConnectionResetError)) and not self.state.args.verbose:
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description="fake cloud metadata service (see the module docstring)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--aws", default="none", choices=("none", "terminate", "stop", "hibernate"))
    ap.add_argument("--gcp", default="none", choices=("none", "preempted"))
    ap.add_argument("--azure", default="none", choices=("none", "preempt"))
    ap.add_argument("--azure-vm", default="ckpt-vm")
    ap.add_argument("--mode", default="ok", choices=MODES)
    ap.add_argument("--token-ttl", type=int, default=None)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    srv = Server((args.host, args.port), Handler)
    srv.state = State(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stdout.write("%d\n" % srv.server_address[1])
    sys.stdout.flush()
    try:
        srv.serve_forever(poll_interval=0.2)
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()
