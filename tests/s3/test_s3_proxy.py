#!/usr/bin/env python3
"""tests/s3/s3proxy.py itself: its request kinds (a table, and the gateway
log's), then, in front of a real gateway (the CTest run's shared one, or one
of this test's own), each fault it injects as a client sees it and as the
gateway does: errors before and after the gateway saw the request, resets and
closes at every point, stalls, holds released on command, truncated and
corrupted bodies (responses, and a request body the gateway then refuses), rule filters and counts, keep-alive, 100-continue, and its
own bounds (loopback only, gone with its owner). Exit 0 pass, 1 fail, 77 skip."""
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "s3proxy.py")
GW = os.path.join(HERE, "s3gw.sh")
sys.path.insert(0, HERE)
import s3proxy  # noqa: E402


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


# --- kinds, without a gateway --------------------------------------------
TABLE = [
    ("GET", "/", {}, "LIST_BUCKETS"),
    ("GET", "/b", {}, "LIST"),
    ("GET", "/b/", {}, "LIST"),
    ("GET", "/b?list-type=2&prefix=a%2F", {}, "LIST"),
    ("GET", "/b?delimiter=%2F&marker=x&max-keys=5", {}, "LIST"),
    ("GET", "/b?versions", {}, "LIST_VERSIONS"),
    ("GET", "/b?uploads=", {}, "LIST_UPLOADS"),
    ("GET", "/b?location", {}, "BUCKET_GET"),
    ("GET", "/b/k?uploadId=2~x", {}, "LIST_PARTS"),
    ("GET", "/b/k", {}, "GET"),
    ("GET", "/b/dir/k?versionId=3", {}, "GET"),
    ("GET", "/b/k", {"Range": "bytes=0-9"}, "GET_RANGE"),
    ("GET", "/b/k?acl", {}, "OBJECT_GET"),
    ("HEAD", "/b/k", {}, "HEAD"),
    ("HEAD", "/b", {}, "HEAD_BUCKET"),
    ("PUT", "/b", {}, "CREATE_BUCKET"),
    ("PUT", "/b?lifecycle", {}, "BUCKET_PUT"),
    ("PUT", "/b/k", {}, "PUT"),
    ("PUT", "/b/k", {"x-amz-copy-source": "/b/j"}, "COPY"),
    ("PUT", "/b/k?partNumber=3&uploadId=u", {}, "PUT_PART"),
    ("PUT", "/b/k?partNumber=3&uploadId=u", {"X-Amz-Copy-Source": "/b/j"}, "COPY_PART"),
    ("PUT", "/b/k?tagging", {}, "OBJECT_PUT"),
    ("POST", "/b/k?uploads", {}, "INIT_MPU"),
    ("POST", "/b/k?uploads=", {}, "INIT_MPU"),
    ("POST", "/b/k?uploadId=u", {}, "COMPLETE_MPU"),
    ("POST", "/b?delete", {}, "DELETE_MULTI"),
    ("DELETE", "/b/k?uploadId=u", {}, "ABORT_MPU"),
    ("DELETE", "/b/k", {}, "DELETE"),
    ("DELETE", "/b", {}, "DELETE_BUCKET"),
    ("PATCH", "/b/k", {}, "OTHER"),
    # virtual-host style: the bucket is in the Host header
    ("GET", "/", {"Host": "b.localhost:8000"}, "LIST"),
    ("GET", "/?list-type=2", {"Host": "b.localhost"}, "LIST"),
    ("GET", "/k", {"Host": "b.localhost:8000"}, "GET"),
    ("PUT", "/dir/k?partNumber=1&uploadId=u", {"Host": "b.localhost"}, "PUT_PART"),
    ("GET", "/", {"Host": "127.0.0.1:8000"}, "LIST_BUCKETS"),
]
for method, target, hdrs, want in TABLE:
    got = s3proxy.classify(method, target, hdrs, "localhost")
    check(got == want, "classify %s %s %s: %s, expected %s" % (method, target, hdrs, got, want))

with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "rgw.log")
    with open(log, "w") as f:
        f.write('2026-01-01T00:00:00.000+0000 7f 1 beast: 0x7f: 127.0.0.1 - u [01/Jan/2026:00:00:00.000 +0000] '
                '"GET /b?list-type=2&prefix=x HTTP/1.1" 200 100 - "curl" - latency=0.0s\n'
                'some other line\n'
                '2026-01-01T00:00:00.000+0000 7f 1 beast: 0x7f: 127.0.0.1 - u [01/Jan/2026:00:00:00.000 +0000] '
                '"PUT /b/k?partNumber=1&uploadId=u HTTP/1.1" 200 0 - "curl" - latency=0.0s\n'
                '2026-01-01T00:00:00.000+0000 7f 1 beast: 0x7f: 127.0.0.1 - u [01/Jan/2026:00:00:00.000 +0000] '
                '"GET /c/k HTTP/1.1" 404 0 - "curl" - latency=0.0s\n')
    c = s3proxy.classify_log(log)
    check(c["kinds"] == {"LIST": 1, "PUT_PART": 1, "GET": 1} and c["lists"] == 1
          and c["status"]["GET 404"] == 1, "classify_log: %s" % c)
    c = s3proxy.classify_log(log, bucket="b")
    check(c["requests"] == 2 and "GET" not in c["kinds"], "classify_log --bucket: %s" % c)
    first = open(log, "rb").readline()
    check(s3proxy.classify_log(log, since=len(first))["requests"] == 2, "classify_log --since")

# --- bounds: loopback only -----------------------------------------------
r = subprocess.run([sys.executable, PROXY, "--upstream", "10.1.2.3:80"], capture_output=True, text=True, timeout=30)
check(r.returncode != 0 and "loopback" in r.stderr, "a non-loopback upstream was accepted: %s" % r.stderr)
r = subprocess.run([sys.executable, PROXY, "--upstream", "127.0.0.1:80", "--listen", "0.0.0.0"],
                   capture_output=True, text=True, timeout=30)
check(r.returncode != 0 and "loopback" in r.stderr, "a non-loopback listen address was accepted")

# --- a gateway -------------------------------------------------------------
rc = subprocess.run(["bash", GW, "check"]).returncode
if rc != 0:
    sys.exit(rc)
tmp = tempfile.mkdtemp(prefix="ckpt-s3p-", dir=os.environ.get("TMPDIR", "/tmp"))
envfile = os.environ.get("CKPT_S3GW_ENV", "")
own = None
if not (envfile and os.path.exists(envfile)):
    envfile = os.path.join(tmp, "s3gw.env")
    with open(envfile, "w") as f:
        rc = subprocess.run(["bash", GW, "start", "--dir", os.path.join(tmp, "gw"), "--owner", str(os.getpid())],
                            stdout=f).returncode
    if rc != 0:
        sys.exit(77 if rc == 77 else 1)
    own = os.path.join(tmp, "gw")
env = dict(line.strip().split("=", 1) for line in open(envfile) if "=" in line)
gwdir = env["S3GW_DIR"]
procs = []


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if own:
        subprocess.run(["bash", GW, "stop", own])
    if not os.environ.get("CKPT_TEST_KEEP"):
        subprocess.run(["rm", "-rf", tmp])


def start_proxy(*extra):
    pf = open(os.path.join(tmp, "proxy-%d.port" % len(procs)), "w+")
    p = subprocess.Popen([sys.executable, PROXY, "--upstream", "127.0.0.1:" + env["S3GW_PORT"],
                          "--owner", str(os.getpid())] + list(extra),
                         stdout=pf, stderr=open(os.path.join(tmp, "proxy.log"), "a"))
    procs.append(p)
    for _ in range(400):
        pf.seek(0)
        s = pf.read()
        if s.endswith("\n"):
            return p, int(s)
        check(p.poll() is None, "s3proxy.py exited at start")
        time.sleep(0.05)
    fail("s3proxy.py did not say its port")


# what `s3gw.sh curl` runs, without a shell per request
SIGNED = ["curl", "-sS", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
          env["S3GW_ACCESS_KEY"] + ":" + env["S3GW_SECRET_KEY"], "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]


def s3curl(*args, timeout=120):
    """Signed curl; returns (exit code, stdout bytes, stderr text)."""
    r = subprocess.run(SIGNED + list(args), capture_output=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def code_of(*args, **kw):
    rc, out, err = s3curl("-o", os.devnull, "-w", "%{http_code}", *args, **kw)
    return rc, out.decode()


def ctl(method, path, body=None):
    req = urllib.request.Request(PURL + path, method=method, data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=660) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def rule(**r):
    st, ans = ctl("POST", "/_proxy/rule", r)
    check(st == 200, "rule %s: %s %s" % (r, st, ans))
    return ans["id"]


def count(kind, status=None):
    return ctl("GET", "/_proxy/count?kind=%s%s" % (kind, "&status=%s" % status if status else ""))[1]


try:
    proxy, port = start_proxy()
    PURL = "http://127.0.0.1:%d" % port
    rng = random.Random(7)
    bucket = "proxy-%d-%06x" % (os.getpid(), rng.getrandbits(24))
    check(subprocess.run(["bash", GW, "bucket", gwdir, bucket], capture_output=True).returncode == 0, "bucket")
    B = PURL + "/" + bucket
    data = os.urandom(3 << 20)
    src = os.path.join(tmp, "obj")
    open(src, "wb").write(data)
    back = os.path.join(tmp, "back")
    mark = subprocess.run(["bash", GW, "mark", gwdir], capture_output=True, text=True).stdout.strip()

    # --- a clean pass: bytes and kinds -----------------------------------
    rc, code = code_of("-T", src, B + "/a")  # 3 MiB: curl sends Expect: 100-continue
    check(rc == 0 and code == "200", "PUT through the proxy: %s %s" % (rc, code))
    rc, out, _ = s3curl(B + "/a")
    check(rc == 0 and out == data, "GET through the proxy: other bytes")
    rc, out, _ = s3curl("-r", "100-199", B + "/a")
    check(out == data[100:200], "ranged GET: other bytes")
    check(code_of("-I", B + "/a")[1] == "200", "HEAD")
    check(code_of(B + "?list-type=2&prefix=a")[1] == "200", "LIST")
    # a multipart upload: two parts (the first at the 5 MiB minimum)
    part1, part2 = os.urandom(5 << 20), os.urandom(12345)
    open(src + ".1", "wb").write(part1)
    open(src + ".2", "wb").write(part2)
    rc, out, _ = s3curl("-X", "POST", B + "/mp?uploads=")
    uid = re.search(rb"<UploadId>([^<]+)</UploadId>", out).group(1).decode()
    q = urllib.parse.quote(uid, safe="")
    etags = []
    for n, f in ((1, src + ".1"), (2, src + ".2")):
        rc, out, _ = s3curl("-D", "-", "-o", os.devnull, "-T", f, "%s/mp?partNumber=%d&uploadId=%s" % (B, n, q))
        etags.append(re.search(rb"(?i)etag: *(\S+)", out).group(1).decode())
    check(code_of("%s?uploads=" % B)[1] == "200", "LIST_UPLOADS")
    xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (i + 1, e) for i, e in enumerate(etags))
    check(code_of("-X", "POST", "--data-binary", xml, "%s/mp?uploadId=%s" % (B, q))[1] == "200", "COMPLETE")
    rc, out, _ = s3curl(B + "/mp")
    check(out == part1 + part2, "the multipart object is not its parts")
    check(code_of("-X", "DELETE", B + "/mp")[1] == "204", "DELETE")
    st = ctl("GET", "/_proxy/stats")[1]
    want = {"PUT": 1, "GET": 2, "GET_RANGE": 1, "HEAD": 1, "LIST": 1, "INIT_MPU": 1, "PUT_PART": 2,
            "LIST_UPLOADS": 1, "COMPLETE_MPU": 1, "DELETE": 1}
    check(st["kinds"] == want, "kinds through the proxy: %s" % st["kinds"])
    check(st["lists"] == 2 and count("lists") == 2, "lists: %s" % st["lists"])
    check(count("PUT_PART", 200) == 2 and count("requests") == 12, "count endpoint")
    check(len(st["log"]) == 12 and st["log"][0]["kind"] == "PUT" and st["log"][0]["bytes_in"] == len(data),
          "the request log: %s" % st["log"][:1])
    time.sleep(0.3)
    g = json.loads(subprocess.run(["bash", GW, "requests", gwdir, "--since", mark, "--bucket", bucket],
                                  capture_output=True, text=True).stdout)
    check(g["requests"] == 12 and g["lists"] == 2, "the gateway saw other requests than the proxy: %s" % g)
    ctl("POST", "/_proxy/reset")
    check(count("requests") == 0, "reset did not zero the counters")

    # --- status before: the gateway never sees it ------------------------
    mark = subprocess.run(["bash", GW, "mark", gwdir], capture_output=True, text=True).stdout.strip()
    rule(kind="PUT", action="status", status=503, times=2, retry_after="1")
    small = os.path.join(tmp, "small")
    open(small, "wb").write(b"x" * 1000)
    for i in range(2):
        rc, out, _ = s3curl("-D", "-", "-T", small, B + "/s")
        check(b" 503 " in out.split(b"\r\n")[0] and b"<Code>SlowDown</Code>" in out and b"Retry-After: 1" in out,
              "injected 503: %r" % out[:300])
    rc, code = code_of("-T", small, B + "/s")
    check(code == "200", "the third PUT (rule spent): %s" % code)
    check(code_of("-T", src, B + "/s2")[1] == "200", "a big PUT after the rule was spent")
    rule(kind="PUT", action="status", status=500)
    rc, out, _ = s3curl("-T", src, B + "/big503")  # Expect: 100-continue: answered without the body
    check(b"<Code>InternalError</Code>" in out, "a 500 to a 100-continue PUT: %r" % out[:200])
    check(code_of(B + "/big503")[1] == "404", "the refused PUT reached the gateway")
    time.sleep(0.3)
    g = json.loads(subprocess.run(["bash", GW, "requests", gwdir, "--since", mark, "--bucket", bucket],
                                  capture_output=True, text=True).stdout)
    check(g["status"].get("PUT 200") == 2 and "PUT 503" not in g["status"], "the gateway saw the 503s: %s" % g)
    check(count("PUT", 503) == 2 and count("PUT", 500) == 1, "status counts")

    # --- status after: the gateway did it, the client was told otherwise --
    rule(kind="PUT", action="status", status=500, when="after")
    rc, code = code_of("-T", small, B + "/after")
    check(code == "500", "status after: %s" % code)
    check(code_of(B + "/after")[1] == "200", "status after: the PUT did not reach the gateway")

    # --- resets and closes ---------------------------------------------
    rule(kind="GET", action="reset")
    rc, code = code_of(B + "/a")
    check(rc == 56, "reset before: curl exit %d" % rc)
    rule(kind="PUT", action="reset", when="mid_request", bytes=1 << 20)
    rc, code = code_of("-T", src, B + "/midreq")
    check(rc != 0, "reset mid-request: the PUT succeeded")
    check(code_of(B + "/midreq")[1] == "404", "reset mid-request: a partial object was stored")
    rule(kind="GET", action="reset", when="mid_response", bytes=100000)
    rc, out, _ = s3curl(B + "/a")
    check(rc == 56 and len(out) == 100000 and out == data[:100000], "reset mid-response: %d %d" % (rc, len(out)))
    rule(kind="PUT", action="reset", when="after")
    rc, code = code_of("-T", small, B + "/rafter")
    check(rc == 56, "reset after: curl exit %d" % rc)
    check(code_of(B + "/rafter")[1] == "200", "reset after: the gateway did not store it")
    rule(kind="GET", action="close")
    rc, code = code_of(B + "/a")
    check(rc == 52, "close before: curl exit %d (52: empty reply)" % rc)
    rule(kind="GET", action="truncate", bytes=4096)
    rc, out, err = s3curl(B + "/a")
    check(rc == 18 and len(out) == 4096, "truncate: %d %d" % (rc, len(out)))

    # --- corrupt: one byte, the middle -----------------------------------
    rule(kind="GET", action="corrupt")
    rc, out, _ = s3curl(B + "/a")
    diff = [i for i in range(len(data)) if out[i] != data[i]] if len(out) == len(data) else None
    check(rc == 0 and diff == [len(data) // 2], "corrupt: %s" % (diff[:5] if diff else len(out)))
    rule(kind="GET_RANGE", action="corrupt", offset=3)
    rc, out, _ = s3curl("-r", "0-9", B + "/a")
    check(out[:3] == data[:3] and out[3] == data[3] ^ 1 and out[4:] == data[4:10], "corrupt at offset 3")
    # A request body's byte flipped on its way: the gateway checks the
    # signed payload hash (x-amz-content-sha256) and stores nothing.
    body = open(small, "rb").read()
    hashed = SIGNED[:-2] + ["-H", "x-amz-content-sha256: " + hashlib.sha256(body).hexdigest()]
    rule(kind="PUT", action="corrupt", when="request", offset=10)
    r = subprocess.run(hashed + ["-w", " %{http_code}", "-T", small, B + "/flipped"], capture_output=True, timeout=120)
    check(b"XAmzContentSHA256Mismatch" in r.stdout and r.stdout.endswith(b" 400"),
          "a flipped request byte: %r" % r.stdout[-200:])
    check(code_of(B + "/flipped")[1] == "404", "the gateway stored the flipped body")
    r = subprocess.run(hashed + ["-o", os.devnull, "-w", "%{http_code}", "-T", small, B + "/flipped"],
                       capture_output=True, timeout=120)
    check(r.stdout == b"200", "the same PUT, not flipped: %r" % r.stdout)

    # --- stalls -----------------------------------------------------------
    rule(kind="HEAD", action="stall", seconds=2)
    t = time.monotonic()
    check(code_of("-I", B + "/a")[1] == "200", "stall before")
    check(time.monotonic() - t >= 1.9, "stall before: no stall")
    rule(kind="HEAD", action="stall", seconds=5)
    rc, code = code_of("-I", "--max-time", "1", B + "/a")
    check(rc == 28, "a stalled HEAD did not time out the client: %d" % rc)
    rule(kind="GET", action="stall", when="mid_response", bytes=65536, seconds=2)
    t = time.monotonic()
    rc, out, _ = s3curl(B + "/a")
    check(rc == 0 and out == data and time.monotonic() - t >= 1.9, "stall mid-response")
    ctl("DELETE", "/_proxy/rules")

    # --- hold until released; wait ---------------------------------------
    rule(kind="PUT", action="hold", path="/held$")
    p = subprocess.Popen(SIGNED + ["-o", os.devnull, "-w", "%{http_code}", "-T", small, B + "/held"],
                         stdout=subprocess.PIPE)
    st, ans = ctl("GET", "/_proxy/wait?kind=held&count=1&timeout=30")
    check(st == 200 and ans["count"] == 1, "wait held: %s %s" % (st, ans))
    check(code_of(B + "/held")[1] == "404", "a held PUT reached the gateway")
    check(count("held") == 1 and ctl("GET", "/_proxy/stats")[1]["in_flight"]["PUT"] == 1, "held count")
    ctl("POST", "/_proxy/release")
    out, _ = p.communicate(timeout=60)
    check(out == b"200" and code_of(B + "/held")[1] == "200", "the released PUT: %s" % out)
    t = time.monotonic()
    st, ans = ctl("GET", "/_proxy/wait?kind=PUT&count=1000&timeout=1")
    check(st == 408 and time.monotonic() - t < 5, "wait timeout: %s" % st)
    st, ans = ctl("GET", "/_proxy/wait?kind=LIST&count=1&timeout=0")
    check(st == 408, "wait with timeout 0")

    # --- filters: skip, times, prob, path, method, header ----------------
    ctl("POST", "/_proxy/reset")
    rule(kind=["GET", "GET_RANGE"], action="status", status=503, skip=1, times=2)
    codes = [code_of(B + "/a")[1] for _ in range(4)]
    check(codes == ["200", "503", "503", "200"], "skip 1 times 2: %s" % codes)
    rule(action="status", status=404, method="GET", path=r"/victim$", times=0)
    check(code_of("-T", small, B + "/victim")[1] == "200", "a PUT matched a GET rule")
    check([code_of(B + "/victim")[1] for _ in range(3)] == ["404"] * 3, "times 0: always")
    check(code_of(B + "/a")[1] == "200", "a path rule hit another key")
    ctl("DELETE", "/_proxy/rules")
    rule(action="status", status=503, header="Range", times=0)
    check(code_of(B + "/a")[1] == "200" and code_of("-r", "0-1", B + "/a")[1] == "503", "header filter")
    ctl("DELETE", "/_proxy/rules")
    rule(kind="HEAD", action="status", status=503, prob=0.5, times=0)
    n503 = sum(code_of("-I", B + "/a")[1] == "503" for _ in range(20))
    check(3 <= n503 <= 17, "prob 0.5: %d of 20" % n503)
    ctl("DELETE", "/_proxy/rules")

    # --- keep-alive: several requests on one connection --------------------
    rc, out, _ = s3curl("-o", os.devnull, "-o", os.devnull, "-o", os.devnull, "-w", "%{num_connects} ",
                        B + "/a", B + "/a", B + "/s")
    check(rc == 0 and out.decode().split() == ["1", "0", "0"], "keep-alive: %s" % out)

    # --- a chunked upload is relayed as it is sent -------------------------
    direct = "http://127.0.0.1:%s/%s" % (env["S3GW_PORT"], bucket)
    want = code_of("-H", "Transfer-Encoding: chunked", "-T", small, direct + "/chunk-direct")[1]
    got = code_of("-H", "Transfer-Encoding: chunked", "-T", small, B + "/chunk-proxy")[1]
    check(got == want, "chunked PUT: %s through the proxy, %s direct" % (got, want))
    print("chunked PUT: %s direct and through the proxy" % got)

    # --- control errors ---------------------------------------------------
    check(ctl("POST", "/_proxy/rule", {"action": "explode"})[0] == 400, "a bad rule was accepted")
    check(ctl("POST", "/_proxy/rule", {"action": "stall", "seconds": 9999})[0] == 400, "an unbounded stall")
    check(ctl("GET", "/_proxy/nothing")[0] == 404, "an unknown control path")

    # --- the proxy goes with its owner -----------------------------------
    owner = subprocess.Popen(["sleep", "600"])
    p2 = subprocess.Popen([sys.executable, PROXY, "--upstream", "127.0.0.1:" + env["S3GW_PORT"],
                           "--owner", str(owner.pid)], stdout=subprocess.PIPE)
    procs.append(p2)
    p2.stdout.readline()
    owner.kill()
    owner.wait()
    try:
        p2.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fail("the proxy outlived its owner by 10 s")
    p3 = subprocess.Popen([sys.executable, PROXY, "--upstream", "127.0.0.1:" + env["S3GW_PORT"],
                           "--max-seconds", "1"], stdout=subprocess.PIPE)
    procs.append(p3)
    try:
        p3.wait(timeout=15)
    except subprocess.TimeoutExpired:
        fail("the proxy outlived --max-seconds")
    print("PASS")
finally:
    cleanup()
