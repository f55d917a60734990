#!/usr/bin/env python3
"""s3proxy.py - a fault-injecting HTTP proxy for S3 tests: sits on loopback in
front of a real gateway (tests/s3/s3gw.sh), forwards every request unchanged
(the Host header too, so SigV4 signatures stay valid), counts requests by
kind, and on the test's command answers with errors, stalls, resets or
truncates. Standard library only (python3 >= 3.7).

    s3proxy.py --upstream HOST:PORT [--listen 127.0.0.1] [--port 0]
        [--port-file F] [--owner PID] [--max-seconds 3600] [--vhost-domain localhost]
        [--seed N] [--max-conns 256]
    s3proxy.py --classify-log RGW_LOG [--since BYTE_OFFSET] [--bucket B]
    s3proxy.py --classify METHOD TARGET [HEADER:VALUE...]

The first line on stdout is the port it listens on, written once it
listens (and to --port-file, whole or not at all); nothing else goes to
stdout. It ends on SIGTERM/SIGINT, when
--owner exits, or after --max-seconds. Only loopback addresses are accepted
for --listen and --upstream.

Kinds (what a request is, from its method, path, query and headers;
path-style /BUCKET/KEY, or virtual-host style BUCKET.<vhost-domain>/KEY):
  LIST          GET on a bucket: ListObjects / ListObjectsV2
  LIST_VERSIONS GET /BUCKET?versions     LIST_UPLOADS  GET /BUCKET?uploads
  LIST_PARTS    GET /BUCKET/KEY?uploadId LIST_BUCKETS  GET /
  GET, GET_RANGE (a Range header), HEAD, PUT, COPY (x-amz-copy-source),
  PUT_PART, COPY_PART, INIT_MPU (POST ?uploads), COMPLETE_MPU (POST
  ?uploadId), ABORT_MPU (DELETE ?uploadId), DELETE, DELETE_MULTI (POST
  /BUCKET?delete), CREATE_BUCKET, DELETE_BUCKET, HEAD_BUCKET, BUCKET_GET /
  BUCKET_PUT / OBJECT_GET / OBJECT_PUT (other subresources: ?acl,
  ?lifecycle, ...), OTHER. "lists" in the stats adds up the five LIST kinds.

Control, on the same port under /_proxy/ (no bucket can be named "_proxy"):
  GET  /_proxy/stats       {"requests": n, "kinds": {KIND: n}, "lists": n,
                            "status": {"KIND STATUS": n}, "faults": {rule id: n},
                            "in_flight": {KIND: n}, "log": [the last 2000
                            requests, oldest first]}
  GET  /_proxy/count?kind=K[&status=S]   one number: requests of kind K
                           done (with status S); K = lists, requests, held;
                           &arrived=1: counted as soon as their head is read
  POST /_proxy/rules       {"rules": [RULE...]} replaces the rules; answers
                            {"ids": [...]}
  POST /_proxy/rule        RULE: appends one; answers {"id": n}
  DELETE /_proxy/rules     no rules (held requests are released)
  POST /_proxy/reset       no rules, counters zeroed, held requests released
  POST /_proxy/release     lets every held request go on
  GET  /_proxy/wait?kind=K&count=N&timeout=S   answers 200 once N requests
                            of kind K have arrived (counted when their head
                            is read), 408 after S seconds (at most 600);
                            kind=held: N requests held by "hold" rules now

A RULE (JSON object; every key but "action" optional):
  "kind": KIND or [KIND...]   "method": "PUT"   "path": regex searched in
  the target (path and query)  "header": a header name that must be there
  "skip": let the first N matching requests through (0)
  "times": act on the next N matching requests, then stop (1; 0 = always)
  "prob": act on a matching request with this probability (1.0; --seed)
  "action":
    "status"    answer "status" (503) with an S3 error body whose Code is
                "code" (503 SlowDown, 500 InternalError, 400 BadRequest,
                403 AccessDenied, 404 NoSuchKey, else InternalError);
                "retry_after": a Retry-After header. "when": "before" (the
                gateway never sees the request) or "after" (it does; its
                answer is thrown away)
    "reset"     a TCP reset to the client. "when": "before" (request head
                read, nothing forwarded), "mid_request" (after "bytes" of the
                request body were forwarded), "mid_response" (after "bytes"
                of the response body were relayed), "after" (the gateway
                answered; nothing relayed)
    "close"     the same places, with an orderly close (FIN) instead
    "stall"     waits "seconds" (at most 600) "when": "before" or
                "mid_response" (after "bytes"), then goes on
    "hold"      waits, before forwarding, until /_proxy/release or the
                rules are cleared (at most "seconds", default 600)
    "truncate"  relays the response head and "bytes" (0) of its body, then
                closes: a short body
    "corrupt"   flips the byte at "offset" of the response body (default:
                its middle); "when": "request": of the request body instead
                (what reaches the gateway differs from what was signed)
A request matches the first rule whose filters all match and that still
has times left; "skip" and "times" count that rule's matches only.
"""
import argparse
import json
import os
import random
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from urllib.parse import parse_qsl, urlsplit

HEAD_MAX = 64 * 1024
BUF = 256 * 1024
LOG_KEEP = 2000
LIST_KINDS = ("LIST", "LIST_VERSIONS", "LIST_UPLOADS", "LIST_PARTS", "LIST_BUCKETS")
ERROR_CODES = {503: "SlowDown", 500: "InternalError", 400: "BadRequest",
               403: "AccessDenied", 404: "NoSuchKey"}
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           408: "Request Timeout", 500: "Internal Server Error", 503: "Service Unavailable"}
# Query keys of a ListObjects (v1/v2): a GET on a bucket with only these is a LIST.
LIST_KEYS = {"list-type", "prefix", "delimiter", "marker", "max-keys", "encoding-type",
             "continuation-token", "start-after", "fetch-owner", "allow-unordered"}


def classify(method, target, headers=None, vhost_domain=None):
    """The kind of an S3 request (see the module's docstring)."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    parts = urlsplit(target)
    path = parts.path or "/"
    q = {k for k, _ in parse_qsl(parts.query, keep_blank_values=True)}
    host = headers.get("host", "").rsplit(":", 1)[0].lower()
    segs = path.lstrip("/").split("/", 1)
    bucket, key = segs[0], (segs[1] if len(segs) > 1 else "")
    if vhost_domain and host.endswith("." + vhost_domain.lower()):
        bucket, key = host[: -len(vhost_domain) - 1], path.lstrip("/")
    method = method.upper()
    if not bucket:
        return "LIST_BUCKETS" if method == "GET" else "OTHER"
    if not key:
        if method == "GET":
            if "versions" in q:
                return "LIST_VERSIONS"
            if "uploads" in q:
                return "LIST_UPLOADS"
            return "LIST" if q <= LIST_KEYS else "BUCKET_GET"
        if method == "HEAD":
            return "HEAD_BUCKET"
        if method == "PUT":
            return "CREATE_BUCKET" if not q else "BUCKET_PUT"
        if method == "DELETE":
            return "DELETE_BUCKET" if not q else "OTHER"
        if method == "POST" and "delete" in q:
            return "DELETE_MULTI"
        return "OTHER"
    copy = "x-amz-copy-source" in headers
    if method == "GET":
        if "uploadId" in q:
            return "LIST_PARTS"
        if q - {"versionId", "partNumber"} - {k for k in q if k.startswith("response-")}:
            return "OBJECT_GET"
        return "GET_RANGE" if "range" in headers else "GET"
    if method == "HEAD":
        return "HEAD"
    if method == "PUT":
        if "partNumber" in q and "uploadId" in q:
            return "COPY_PART" if copy else "PUT_PART"
        if q:
            return "OBJECT_PUT"
        return "COPY" if copy else "PUT"
    if method == "POST":
        if "uploads" in q:
            return "INIT_MPU"
        if "uploadId" in q:
            return "COMPLETE_MPU"
        return "OTHER"
    if method == "DELETE":
        return "ABORT_MPU" if "uploadId" in q else "DELETE"
    return "OTHER"


# The access log of radosgw's beast frontend (debug rgw >= 1):
#   ... beast: 0x...: 127.0.0.1 - user [date] "PUT /b/k?partNumber=1&uploadId=x HTTP/1.1" 200 ...
LOG_LINE = re.compile(r' beast: \S+ \S+ - \S+ \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) ')


def in_bucket(target, bucket):
    path = urlsplit(target).path
    return path == "/" + bucket or path.startswith("/" + bucket + "/")


def classify_log(path, since=0, bucket=None):
    """Counts the requests of a gateway log from byte offset since (only
    those on bucket, if given: a gateway that other tests share). Headers
    are not in the log: a ranged GET counts as GET, and virtual-host-style
    requests are not told apart (the tests use path-style)."""
    kinds, status, n = {}, {}, 0
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        f = None
    if f:
        with f:
            f.seek(since)
            for raw in f:
                m = LOG_LINE.search(raw.decode("utf-8", "replace"))
                if not m or (bucket and not in_bucket(m.group(2), bucket)):
                    continue
                k = classify(m.group(1), m.group(2))
                kinds[k] = kinds.get(k, 0) + 1
                s = "%s %s" % (k, m.group(3))
                status[s] = status.get(s, 0) + 1
                n += 1
    return {"requests": n, "kinds": kinds, "status": status,
            "lists": sum(kinds.get(k, 0) for k in LIST_KINDS)}


class Closed(Exception):
    pass


class Abort(Exception):
    """Ends the client connection: reset (RST) or an orderly close."""
    def __init__(self, rst):
        super().__init__("reset" if rst else "close")
        self.rst = rst


class Reader:
    """Buffered reads from a socket with bounded head sizes."""
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        d = self.sock.recv(BUF)
        if not d:
            raise Closed()
        self.buf += d

    def head(self):
        """Bytes up to and including the blank line; None on a clean EOF first."""
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                h, self.buf = self.buf[: i + 4], self.buf[i + 4:]
                return h
            if len(self.buf) > HEAD_MAX:
                raise ValueError("head over %d bytes" % HEAD_MAX)
            try:
                self.fill()
            except Closed:
                if not self.buf:
                    return None
                raise

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                ln, self.buf = self.buf[: i + 2], self.buf[i + 2:]
                return ln
            if len(self.buf) > HEAD_MAX:
                raise ValueError("line over %d bytes" % HEAD_MAX)
            self.fill()

    def some(self, n):
        """Up to n bytes (at least 1)."""
        if not self.buf:
            self.fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d


def parse_head(raw):
    lines = raw.decode("latin-1").split("\r\n")
    first = lines[0]
    hdrs = []
    for ln in lines[1:]:
        if not ln:
            continue
        if ":" not in ln:
            raise ValueError("bad header line %r" % ln[:80])
        k, v = ln.split(":", 1)
        hdrs.append((k.strip(), v.strip()))
    return first, hdrs


def hget(hdrs, name):
    name = name.lower()
    for k, v in hdrs:
        if k.lower() == name:
            return v
    return None


def body_framing(hdrs):
    """('chunked', None), ('length', n) or ('none', 0) for a request."""
    te = hget(hdrs, "transfer-encoding")
    if te and "chunked" in te.lower():
        return "chunked", None
    cl = hget(hdrs, "content-length")
    if cl is not None:
        n = int(cl)
        if n < 0:
            raise ValueError("negative Content-Length")
        return "length", n
    return "none", 0


class Proxy:
    def __init__(self, args):
        self.args = args
        self.upstream = args.upstream_addr
        self.vhost = args.vhost_domain
        self.rng = random.Random(args.seed)
        self.lock = threading.Condition()
        self.rules = []
        self.next_id = 1
        self.release_gen = 0
        self.held = 0
        self.conns = 0
        self.reset_counters()

    def reset_counters(self):
        self.requests = 0
        self.kinds = {}
        self.arrived = {}
        # What is in flight now is not a counter: requests that arrived
        # before a reset still end after it.
        self.in_flight = {k: n for k, n in getattr(self, "in_flight", {}).items() if n}
        self.status = {}
        self.faults = {}
        self.log = []

    # --- rules -------------------------------------------------------------
    def add_rule(self, r):
        if not isinstance(r, dict) or r.get("action") not in (
                "status", "reset", "close", "stall", "hold", "truncate", "corrupt"):
            raise ValueError("a rule needs an action: status, reset, close, stall, hold, truncate or corrupt")
        r = dict(r)
        if isinstance(r.get("kind"), str):
            r["kind"] = [r["kind"]]
        if "path" in r:
            r["_re"] = re.compile(r["path"])
        for k in ("seconds",):
            if k in r and not 0 <= float(r[k]) <= 600:
                raise ValueError("seconds: 0..600")
        r.setdefault("skip", 0)
        r.setdefault("times", 1)
        r["_seen"] = 0
        r["_done"] = 0
        r["id"] = self.next_id
        self.next_id += 1
        self.rules.append(r)
        return r["id"]

    def pick(self, method, target, hdrs, kind):
        """The rule acting on this request (or None); under the lock."""
        for r in self.rules:
            if r.get("kind") and kind not in r["kind"]:
                continue
            if r.get("method") and r["method"].upper() != method.upper():
                continue
            if "_re" in r and not r["_re"].search(target):
                continue
            if r.get("header") and hget(hdrs, r["header"]) is None:
                continue
            if r["times"] and r["_done"] >= r["times"]:
                continue
            r["_seen"] += 1
            if r["_seen"] <= r["skip"]:
                continue
            if self.rng.random() >= float(r.get("prob", 1.0)):
                continue
            r["_done"] += 1
            self.faults[r["id"]] = self.faults.get(r["id"], 0) + 1
            return dict(r)
        return None

    # --- control -----------------------------------------------------------
    def control(self, method, target, body):
        u = urlsplit(target)
        q = dict(parse_qsl(u.query))
        p = u.path
        with self.lock:
            if p == "/_proxy/stats" and method == "GET":
                return 200, {"requests": self.requests, "kinds": self.kinds,
                             "lists": sum(self.kinds.get(k, 0) for k in LIST_KINDS),
                             "status": self.status, "in_flight": self.in_flight,
                             "faults": {str(k): v for k, v in self.faults.items()},
                             "held": self.held, "log": self.log}
            if p == "/_proxy/count" and method == "GET":
                kind = q.get("kind", "")
                if kind == "lists":
                    n = sum(self.kinds.get(k, 0) for k in LIST_KINDS)
                elif kind == "requests":
                    n = self.requests
                elif kind == "held":
                    n = self.held
                elif "status" in q:
                    n = self.status.get("%s %s" % (kind, q["status"]), 0)
                elif q.get("arrived"):
                    n = self.arrived.get(kind, 0)
                else:
                    n = self.kinds.get(kind, 0)
                return 200, n
            if p == "/_proxy/rules" and method == "GET":
                return 200, {"rules": [{k: v for k, v in r.items() if not k.startswith("_")} for r in self.rules]}
            if p == "/_proxy/rules" and method == "POST":
                rules = json.loads(body or b"{}").get("rules", [])
                self.rules = []
                self.release_gen += 1
                self.lock.notify_all()
                return 200, {"ids": [self.add_rule(r) for r in rules]}
            if p == "/_proxy/rule" and method == "POST":
                return 200, {"id": self.add_rule(json.loads(body or b"{}"))}
            if p == "/_proxy/rules" and method == "DELETE":
                self.rules = []
                self.release_gen += 1
                self.lock.notify_all()
                return 200, {}
            if p == "/_proxy/reset" and method == "POST":
                self.rules = []
                self.release_gen += 1
                self.reset_counters()
                self.lock.notify_all()
                return 200, {}
            if p == "/_proxy/release" and method == "POST":
                self.release_gen += 1
                self.lock.notify_all()
                return 200, {}
            if p == "/_proxy/wait" and method == "GET":
                kind = q.get("kind", "")
                count = int(q.get("count", "1"))
                deadline = time.monotonic() + min(float(q.get("timeout", "30")), 600)

                def now_count():
                    return self.held if kind == "held" else self.arrived.get(kind, 0)
                while now_count() < count:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return 408, {"kind": kind, "count": now_count()}
                    self.lock.wait(min(left, 1.0))
                return 200, {"kind": kind, "count": now_count()}
        return 404, {"error": "no such control endpoint: %s %s" % (method, p)}

    # --- one client connection ---------------------------------------------
    def serve(self, csock):
        conn = Conn()
        try:
            csock.settimeout(self.args.idle_seconds)
            cr = Reader(csock)
            while True:
                raw = cr.head()
                if raw is None:
                    return
                first, hdrs = parse_head(raw)
                try:
                    method, target, version = first.split(" ", 2)
                except ValueError:
                    raise ValueError("bad request line %r" % first[:80])
                if target.startswith("/_proxy/"):
                    kind, n = body_framing(hdrs)
                    body = b""
                    if kind == "length":
                        while len(body) < n:
                            body += cr.some(n - len(body))
                    try:
                        code, obj = self.control(method, target, body)
                    except (ValueError, KeyError, TypeError) as e:
                        code, obj = 400, {"error": str(e)}
                    data = json.dumps(obj).encode()
                    csock.sendall(("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                                   "Content-Length: %d\r\n\r\n" % (code, REASONS.get(code, "X"), len(data))).encode() + data)
                    continue
                keep = self.one(csock, cr, conn, method, target, hdrs, raw)
                if not keep:
                    return
        except Abort as a:
            if a.rst:
                csock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except (Closed, OSError, ValueError):
            pass
        finally:
            for s in (csock, conn.up):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass
            with self.lock:
                self.conns -= 1

    def connect_up(self):
        s = socket.create_connection(self.upstream, timeout=self.args.upstream_seconds)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def error_response(self, rule, method, target):
        code = int(rule.get("status", 503))
        ecode = rule.get("code") or ERROR_CODES.get(code, "InternalError")
        body = ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code>'
                '<Message>injected by s3proxy.py</Message><Resource>%s</Resource>'
                '<RequestId>s3proxy</RequestId></Error>' % (ecode, target.split("?")[0])).encode()
        extra = "Retry-After: %s\r\n" % rule["retry_after"] if "retry_after" in rule else ""
        if method == "HEAD":
            body_out = b""
        else:
            body_out = body
        head = ("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n%s"
                "x-amz-request-id: s3proxy\r\n\r\n" % (code, REASONS.get(code, "Error"), len(body), extra))
        return code, head.encode() + body_out

    def one(self, csock, cr, conn, method, target, hdrs, raw):
        """One request: forwards it (or the fault), relays the answer.
        True: the client connection can take another request."""
        kind = classify(method, target, dict(hdrs), self.vhost)
        t0 = time.monotonic()
        with self.lock:
            self.arrived[kind] = self.arrived.get(kind, 0) + 1
            self.in_flight[kind] = self.in_flight.get(kind, 0) + 1
            self.lock.notify_all()
            rule = self.pick(method, target, hdrs, kind)
        act = rule["action"] if rule else None
        when = (rule or {}).get("when", "before")
        rec = {"method": method, "target": target, "kind": kind, "status": None,
               "fault": ("%s:%s#%d" % (act, when, rule["id"])) if rule else None,
               "bytes_in": 0, "bytes_out": 0}
        framing, clen = body_framing(hdrs)
        expect = (hget(hdrs, "expect") or "").lower() == "100-continue"
        keep = True
        try:
            if act == "hold":
                self.hold(float(rule.get("seconds", 600)))
            if act == "stall" and when == "before":
                time.sleep(float(rule.get("seconds", 5)))
            if act in ("reset", "close") and when == "before":
                raise Abort(act == "reset")
            if act == "status" and when == "before":
                if expect:
                    keep = False  # the body was never sent: the connection cannot go on
                else:
                    rec["bytes_in"] = self.drain(cr, framing, clen)
                code, out = self.error_response(rule, method, target)
                if not keep:
                    out = out.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
                csock.sendall(out)
                rec["status"] = code
                return keep
            if conn.up is not None and stale(conn.up):
                conn.up.close()
                conn.up = None
            if conn.up is None:
                conn.up = self.connect_up()
            up = conn.up
            up.sendall(raw)
            ur = Reader(up)
            if expect:
                # Relay the gateway's interim answer; a final one ends here.
                st, uh, uraw = self.read_response_head(ur)
                if st == 100:
                    csock.sendall(uraw)
                else:
                    rec["status"] = st
                    self.relay_body(csock, ur, method, st, uh, uraw, rule, rec)
                    return False
            rec["bytes_in"] = self.forward_body(cr, up, framing, clen, rule)
            while True:
                st, uh, uraw = self.read_response_head(ur)
                if st != 100:
                    break
            rec["status"] = st
            if act in ("reset", "close") and when == "after":
                self.discard_body(ur, method, st, uh)
                raise Abort(act == "reset")
            if act == "status" and when == "after":
                self.discard_body(ur, method, st, uh)
                code, out = self.error_response(rule, method, target)
                csock.sendall(out)
                rec["status"] = code
                return True
            if not self.relay_body(csock, ur, method, st, uh, uraw, rule, rec):
                up.close()
                conn.up = None
            return (hget(hdrs, "connection") or "").lower() != "close" and not version_is_10(raw)
        finally:
            rec["ms"] = round((time.monotonic() - t0) * 1000, 1)
            with self.lock:
                self.in_flight[kind] -= 1
                self.requests += 1
                self.kinds[kind] = self.kinds.get(kind, 0) + 1
                s = "%s %s" % (kind, rec["status"] if rec["status"] is not None else "none")
                self.status[s] = self.status.get(s, 0) + 1
                self.log.append(rec)
                del self.log[:-LOG_KEEP]
                self.lock.notify_all()

    def hold(self, seconds):
        deadline = time.monotonic() + seconds
        with self.lock:
            gen = self.release_gen
            self.held += 1
            self.lock.notify_all()
            try:
                while self.release_gen == gen:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.lock.wait(min(left, 1.0))
            finally:
                self.held -= 1

    def drain(self, cr, framing, clen):
        n = 0
        for d in self.body_pieces(cr, framing, clen):
            n += len(d)
        return n

    def forward_body(self, cr, up, framing, clen, rule):
        act = (rule or {}).get("action")
        mid = act in ("reset", "close") and rule.get("when") == "mid_request"
        limit = int(rule.get("bytes", 0)) if mid else None
        flip = None
        if act == "corrupt" and rule.get("when") == "request":
            flip = int(rule["offset"]) if "offset" in rule else (clen // 2 if framing == "length" and clen else 0)
        n = 0
        for d in self.body_pieces(cr, framing, clen):
            if flip is not None and n <= flip < n + len(d):
                b = bytearray(d)
                b[flip - n] ^= 0x01
                d = bytes(b)
            if limit is not None and n + len(d) >= limit:
                up.sendall(d[: max(limit - n, 0)])
                raise Abort(act == "reset")
            up.sendall(d)
            n += len(d)
        if limit is not None:
            raise Abort(act == "reset")
        return n

    def body_pieces(self, r, framing, clen):
        """The raw bytes of a message body as they come (chunked: with its
        framing, relayed as is)."""
        if framing == "length":
            left = clen
            while left > 0:
                d = r.some(min(left, BUF))
                left -= len(d)
                yield d
        elif framing == "chunked":
            while True:
                ln = r.line()
                yield ln
                size = int(ln.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, up to the blank line
                        t = r.line()
                        yield t
                        if t == b"\r\n":
                            return
                left = size + 2
                while left > 0:
                    d = r.some(min(left, BUF))
                    left -= len(d)
                    yield d
        elif framing == "eof":
            while True:
                try:
                    d = r.some(BUF)
                except Closed:
                    return
                yield d

    def read_response_head(self, ur):
        raw = ur.head()
        if raw is None:
            raise Closed()
        first, uh = parse_head(raw)
        parts = first.split(" ", 2)
        return int(parts[1]), uh, raw

    def response_framing(self, method, st, uh):
        if method == "HEAD" or st in (204, 304) or 100 <= st < 200:
            return "length", 0
        f, n = body_framing(uh)
        if f == "none":
            return "eof", None
        return f, n

    def discard_body(self, ur, method, st, uh):
        f, n = self.response_framing(method, st, uh)
        for _ in self.body_pieces(ur, f, n):
            pass

    def relay_body(self, csock, ur, method, st, uh, uraw, rule, rec):
        """Relays a response body; True if the upstream connection can be reused."""
        act = (rule or {}).get("action")
        f, n = self.response_framing(method, st, uh)
        csock.sendall(uraw)
        sent = 0
        cut = None
        if act in ("reset", "close", "stall") and rule.get("when") == "mid_response":
            cut = int(rule.get("bytes", 0))
        if act == "truncate":
            cut = int(rule.get("bytes", 0))
        flip = None
        if act == "corrupt" and rule.get("when") != "request":
            flip = int(rule["offset"]) if "offset" in rule else (n // 2 if f == "length" and n else 0)
        for d in self.body_pieces(ur, f, n):
            if flip is not None and sent <= flip < sent + len(d):
                b = bytearray(d)
                b[flip - sent] ^= 0x01
                d = bytes(b)
            if cut is not None and sent + len(d) >= cut:
                csock.sendall(d[: max(cut - sent, 0)])
                rec["bytes_out"] = cut
                if act == "stall":
                    time.sleep(float(rule.get("seconds", 5)))
                    csock.sendall(d[max(cut - sent, 0):])
                    sent += len(d)
                    cut = None
                    continue
                raise Abort(act == "reset")
            csock.sendall(d)
            sent += len(d)
        rec["bytes_out"] = sent
        if cut is not None and act != "stall":
            raise Abort(act == "reset")
        return f != "eof" and (hget(uh, "connection") or "").lower() != "close"

    # --- the listener ------------------------------------------------------
    def run(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((self.args.listen, self.args.port))
        ls.listen(128)
        port = ls.getsockname()[1]
        if self.args.port_file:
            tmp = self.args.port_file + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d\n" % port)
            os.rename(tmp, self.args.port_file)
        print(port, flush=True)
        while True:
            c, _ = ls.accept()
            with self.lock:
                if self.conns >= self.args.max_conns:
                    c.close()
                    continue
                self.conns += 1
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()


class Conn:
    """A client connection's upstream connection, kept across its requests."""
    up = None


def stale(sock):
    """Has the gateway closed this idle connection (readable at EOF)?"""
    r, _, _ = select.select([sock], [], [], 0)
    if not r:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def version_is_10(raw):
    return raw.split(b"\r\n", 1)[0].endswith(b"HTTP/1.0")


def loopback(host):
    try:
        return socket.inet_aton(host)[0] == 127
    except OSError:
        return False


def watchdog(owner, max_seconds):
    t_end = time.monotonic() + max_seconds
    while time.monotonic() < t_end:
        if owner:
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass
        time.sleep(0.5)
    print("s3proxy: --max-seconds passed", file=sys.stderr)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream")
    ap.add_argument("--listen", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--owner", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=3600)
    ap.add_argument("--idle-seconds", type=float, default=120)
    ap.add_argument("--upstream-seconds", type=float, default=300)
    ap.add_argument("--vhost-domain", default="localhost")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-conns", type=int, default=256)
    ap.add_argument("--classify-log")
    ap.add_argument("--since", type=int, default=0)
    ap.add_argument("--bucket")
    ap.add_argument("--classify", nargs="+")
    a = ap.parse_args()
    if a.classify_log:
        print(json.dumps(classify_log(a.classify_log, a.since, a.bucket), sort_keys=True))
        return 0
    if a.classify:
        hdrs = dict(h.split(":", 1) for h in a.classify[2:])
        print(classify(a.classify[0], a.classify[1], {k.strip(): v.strip() for k, v in hdrs.items()}, a.vhost_domain))
        return 0
    if not a.upstream:
        ap.error("--upstream HOST:PORT is needed")
    host, _, port = a.upstream.rpartition(":")
    if not loopback(host) or not loopback(a.listen):
        ap.error("loopback addresses only (127.0.0.0/8)")
    a.upstream_addr = (host, int(port))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    threading.Thread(target=watchdog, args=(a.owner, a.max_seconds), daemon=True).start()
    Proxy(a).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
