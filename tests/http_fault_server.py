#!/usr/bin/env python3
"""A fault-injecting HTTP server for tests/test_url.py (standard library only).

usage: http_fault_server.py DIR

Binds 127.0.0.1 on a free port, prints "port N" on stdout, and serves the files of
DIR as /MODE/NAME until it is killed. MODE says how the server behaves:

  plain         Content-Length, strong ETag, Last-Modified, Range and If-Range
  lm            as plain with Last-Modified only (no ETag)
  chunked       Transfer-Encoding: chunked, no Content-Length
  close         no Content-Length, the body ends when the connection closes
  lie-long      Content-Length 100 more than the file, then closes after the file
  lie-short     Content-Length 100 less than the file (and only that many bytes)
  drip          one byte every 2 ms (with Content-Length)
  trickle       two bytes a second (with Content-Length): never below a low-speed limit of
                1 byte/s, so only an overall deadline ends it
  drop          the first request of NAME closes after half the body; later ones are
                served as plain (so a Range request resumes it)
  drop-noval    as drop, without ETag or Last-Modified (cannot be resumed)
  drop-always   every response closes after half of what it should send
  drop-change   as drop, but the resumed answer is a 206 with another ETag
  drop-ifrange  as drop, but the file "changed": If-Range fails, so a 200 comes back
  stall         the first request sends 100 bytes and then nothing for 30 s; later
                ones are served as plain
  gzip          Content-Encoding: gzip, gzip-compressed body
  forever       the file, then zero bytes without end (no Content-Length)
  status404, status500   that status
  loop          a 302 to itself
  redirect      a 302 to /plain/NAME
  auth          as plain behind Basic authentication (user "u", password "p w")

Ranged fetch (several concurrent "bytes=A-B" requests after a first plain GET): in the
modes below the first Range request of NAME that starts in the middle half of the file
misbehaves (once); every other request is served as plain.

  rdrop         closes after half of that range's bytes (its resumption is served)
  rchange       that range's bytes with one flipped, under the same ETag
  rlie          that range's Content-Range starts one byte later than asked
  rslowone      that range sends one byte a second (only a deadline ends it)
  rslow         every Range request sends 1 KiB and then nothing for 60 s
  norange       Accept-Ranges: bytes, but every request gets 200 and the whole file

Delta reloads over HTTP (docs/adr/0053):

  rreplace      as plain for the first two Range requests of NAME (a delta's header and
                chunk table); from the third on the file is "replaced": another ETag, so
                If-Range fails and the whole new file comes back with 200

GET /sent/NAME answers the body bytes sent so far for NAME in every mode (text, a decimal
count; not counted itself), for the tests that count what a delta transfers.

S3 signing (docs/adr/0042):

  sigv4         as plain, for requests signed with AWS Signature V4 (header form) by key
                id AKIDFAULTSERVER with secret FAULTSERVERSECRET, region us-east-1, service
                s3; an x-amz-security-token, when sent, must be FAULTSERVERTOKEN and signed.
                Anything else is a 403 with an S3 error body (SignatureDoesNotMatch,
                InvalidAccessKeyId, AccessDenied, InvalidToken), checked by the server's
                own computation of the signature (the stdlib's hmac and hashlib)

Each request is logged on stderr as "MODE NAME RANGE".
"""
import base64
import email.utils
import gzip
import hashlib
import hmac
import urllib.parse
import http.server
import os
import socketserver
import sys
import threading
import time

ROOT = None
SEEN = {}
SEEN_LOCK = threading.Lock()


SENT = {}


def count_sent(name, n):
    with SEEN_LOCK:
        SENT[name] = SENT.get(name, 0) + n


def nth_time(key):
    with SEEN_LOCK:
        n = SEEN.get(key, 0)
        SEEN[key] = n + 1
        return n


def first_time(key):
    with SEEN_LOCK:
        n = SEEN.get(key, 0)
        SEEN[key] = n + 1
        return n == 0


SIGV4_KEY_ID = "AKIDFAULTSERVER"
SIGV4_SECRET = "FAULTSERVERSECRET"
SIGV4_TOKEN = "FAULTSERVERTOKEN"


def sigv4_refusal(handler):
    """None when the request is signed right (AWS Signature V4, header form), else the S3
    error code and message to answer with."""
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "AccessDenied", "Access Denied (the request is not signed)"
    fields = {}
    for part in auth[len("AWS4-HMAC-SHA256 "):].split(","):
        k, _, v = part.strip().partition("=")
        fields[k] = v
    try:
        key_id, date, region, service, term = fields["Credential"].split("/")
        signed = fields["SignedHeaders"].split(";")
        given = fields["Signature"]
    except (KeyError, ValueError):
        return "AuthorizationHeaderMalformed", "The authorization header is malformed"
    if key_id != SIGV4_KEY_ID:
        return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist"
    token = handler.headers.get("x-amz-security-token")
    if token is not None and (token != SIGV4_TOKEN or "x-amz-security-token" not in signed):
        return "InvalidToken", "The provided token is malformed or otherwise invalid"
    path, _, query = handler.path.partition("?")
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    cquery = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"),
                                 urllib.parse.quote(v, safe="-_.~")) for k, v in pairs)
    headers = "".join("%s:%s\n" % (h, " ".join((handler.headers.get(h) or "").split()))
                      for h in signed)
    payload = handler.headers.get("x-amz-content-sha256", hashlib.sha256(b"").hexdigest())
    canonical = "\n".join([handler.command, path, cquery, headers, ";".join(signed), payload])
    amz_date = handler.headers.get("x-amz-date", "")
    scope = "/".join([date, region, service, term])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + SIGV4_SECRET).encode()
    for part in (date, region, service, term):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    if os.environ.get("SIGV4_DEBUG"):
        sys.stderr.write("canonical request:\n%s\n" % canonical)
    if not hmac.compare_digest(want, given) or region != "us-east-1" or service != "s3":
        return ("SignatureDoesNotMatch", "The request signature we calculated does not match "
                "the signature you provided. Check your key and signing method.")
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_body(self, data, limit=None):
        try:
            out = data if limit is None else data[:limit]
            count_sent(getattr(self, "sent_name", ""), len(out))
            self.wfile.write(out)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def drop(self):
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(2)
        except OSError:
            pass

    def do_GET(self):
        # A query (a presigned URL's signature) selects nothing here, as on object stores.
        parts = self.path.split("?", 1)[0].split("/", 2)
        if len(parts) != 3:
            self.send_error(404)
            return
        mode, name = parts[1], parts[2]
        if mode == "sent":
            with SEEN_LOCK:
                body = str(SENT.get(name, 0)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.sent_name = name
        rng = self.headers.get("Range")
        sys.stderr.write("%s %s %s\n" % (mode, name, rng or "-"))
        sys.stderr.flush()
        if mode == "sigv4":
            refusal = sigv4_refusal(self)
            if refusal is not None:
                body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                        "<Message>%s</Message><AWSAccessKeyId>%s</AWSAccessKeyId>"
                        "<StringToSign>(echoed)</StringToSign></Error>" % (
                            refusal[0], refusal[1], SIGV4_KEY_ID)).encode()
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.send_body(body)
                return
            mode = "plain"
        if mode == "loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "/plain/" + name)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode.startswith("status"):
            code = int(mode[6:])
            body = b"error page\n"
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.send_body(body)
            return
        path = os.path.join(ROOT, os.path.basename(name))
        if not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        if mode == "auth":
            want = "Basic " + base64.b64encode(b"u:p w").decode()
            if self.headers.get("Authorization") != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="t"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            mode = "plain"
        etag = '"%s"' % hashlib.sha1(data).hexdigest()[:16]
        mtime = email.utils.formatdate(os.path.getmtime(path), usegmt=True)
        key = (mode, name)
        fresh = first_time(key)
        if mode in ("drop", "stall") and not fresh:
            mode = "plain"
        if mode == "drop-change" and not fresh:
            self.send_range(data, rng, '"changed"', mtime, validators=True, ignore_if_range=True)
            return
        if mode == "drop-ifrange" and not fresh:
            mode = "plain"
            etag = '"changed"'
        if mode == "drop-always":
            self.send_range(data, rng, etag, mtime, validators=True, cut=True)
            return
        if mode == "rreplace":
            if rng and nth_time((mode, name, "range")) >= 2:
                etag = '"replaced"'
            mode = "plain"
        if mode in ("rdrop", "rchange", "rlie", "rslowone", "rslow", "norange"):
            fault = None
            if rng and mode == "norange":
                fault = "norange"
            elif rng and mode == "rslow":
                fault = "rslow"
            elif (rng and rng.startswith("bytes=") and
                  len(data) // 4 <= int(rng[6:].split("-")[0]) < len(data) * 3 // 4 and
                  first_time((mode, name, "fault"))):
                fault = mode
            self.send_range(data, rng, etag, mtime, validators=True, fault=fault)
            return
        if mode in ("plain", "lm") or (mode == "drop-noval" and not fresh):
            self.send_range(data, rng, None if mode == "lm" else etag, mtime,
                            validators=mode != "drop-noval")
            return
        if mode in ("drop", "drop-noval", "drop-change", "drop-ifrange", "stall"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            if mode != "drop-noval":
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", mtime)
            self.end_headers()
            if mode == "stall":
                self.send_body(data, 100)
                time.sleep(30)
            else:
                self.send_body(data, len(data) // 2)
            self.drop()
            return
        if mode == "chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            step = 4096
            for i in range(0, len(data), step):
                piece = data[i:i + step]
                self.send_body(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self.send_body(b"0\r\n\r\n")
            return
        if mode in ("close", "forever"):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.send_body(data)
            if mode == "forever":
                zeros = bytes(65536)
                try:
                    while True:
                        self.wfile.write(zeros)
                except (BrokenPipeError, ConnectionResetError):
                    pass
            self.drop()
            return
        if mode in ("lie-long", "lie-short"):
            n = len(data) + (100 if mode == "lie-long" else -100)
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            self.send_body(data, n)
            self.drop()
            return
        if mode == "drip":
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                for i in range(len(data)):
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.002)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if mode == "trickle":
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                for i in range(0, len(data), 2):
                    self.wfile.write(data[i:i + 2])
                    self.wfile.flush()
                    time.sleep(1.0)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if mode == "gzip":
            body = gzip.compress(data)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.send_body(body)
            return
        self.send_error(404)

    def send_range(self, data, rng, etag, mtime, validators, cut=False, ignore_if_range=False,
                   fault=None):
        start, end = 0, len(data)  # [start, end)
        ranged = False
        if rng and rng.startswith("bytes=") and fault != "norange":
            a, _, b = rng[6:].partition("-")
            start = int(a)
            end = min(int(b) + 1, len(data)) if b else len(data)
            ranged = True
        if_range = self.headers.get("If-Range")
        if not ignore_if_range and if_range is not None and if_range not in (etag, mtime):
            start, end, ranged = 0, len(data), False  # the validator failed: the whole file
        if ranged and (start >= len(data) or start >= end):
            self.send_response(416)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start:end]
        if fault == "rchange":
            body = bytes([body[0] ^ 0x55]) + body[1:]
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(len(body)))
        if ranged:
            shown = start + 1 if fault == "rlie" else start
            self.send_header("Content-Range", "bytes %d-%d/%d" % (shown, end - 1, len(data)))
        self.send_header("Accept-Ranges", "bytes")
        if validators:
            if etag:
                self.send_header("ETag", etag)
            self.send_header("Last-Modified", mtime)
        self.end_headers()
        if cut or fault == "rdrop":
            self.send_body(body, len(body) // 2)
            self.drop()
        elif fault == "rslowone":
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1.0)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif fault == "rslow":
            self.send_body(body, 1024)
            time.sleep(60)
            self.drop()
        else:
            self.send_body(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ROOT
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    ROOT = sys.argv[1]
    srv = Server(("127.0.0.1", 0), Handler)
    print("port %d" % srv.server_address[1], flush=True)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
