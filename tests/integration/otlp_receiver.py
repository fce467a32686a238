#!/usr/bin/env python3
# otlp_receiver.py: an OTLP/HTTP JSON logs receiver for
# tests/integration/otlp.sh (a witness at the network edge, not product
# code).  POST /v1/logs: the body is checked as an ExportLogsServiceRequest
# (resourceLogs[].scopeLogs[].logRecords[], each with timeUnixNano, body
# and a ksb.seq intValue attribute), each record's seq appended to LOG
# (one line each, flushed) and 200 "{}" answered.
#
#   otlp_receiver.py ADDR PORT LOG READY [--drop-at N,..] [--fail-at N,..]
#                    [--reject]
#   --drop-at: on those requests (1-based), read half the body and close
#              the connection without an answer (dropped mid-stream);
#   --fail-at: answer those with 503 (retryable);
#   --reject:  answer every request 400 (not retryable).
# Exits after LIFETIME seconds.
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

LIFETIME = 600.0
args = sys.argv[1:]
addr, port, log, ready = args[0], int(args[1]), args[2], args[3]


def opt(name):
    if name in args:
        return {int(x) for x in args[args.index(name) + 1].split(",")}
    return set()


drop_at, fail_at, reject = opt("--drop-at"), opt("--fail-at"), "--reject" in args
count = 0


def seqs_of(req):
    out = []
    for rl in req["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for lr in sl["logRecords"]:
                int(lr["timeUnixNano"])
                json.loads(lr["body"]["stringValue"])
                attrs = {a["key"]: a["value"] for a in lr["attributes"]}
                out.append(int(attrs["ksb.seq"]["intValue"]))
    return out


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self, code, body=b"{}"):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global count
        count += 1
        n = int(self.headers.get("Content-Length", "0"))
        if count in drop_at:
            self.rfile.read(n // 2)
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        body = self.rfile.read(n)
        if reject:
            return self.answer(400, b'{"message":"rejected by the test"}')
        if count in fail_at:
            return self.answer(503)
        if self.path != "/v1/logs" or \
                self.headers.get("Content-Type") != "application/json":
            return self.answer(404)
        try:
            seqs = seqs_of(json.loads(body))
        except (ValueError, KeyError, TypeError) as e:
            return self.answer(400, json.dumps({"message": str(e)}).encode())
        with open(log, "a") as f:
            f.write("".join("%d\n" % s for s in seqs))
        self.answer(200)


srv = HTTPServer((addr, port), H)
threading.Timer(LIFETIME, lambda: srv.shutdown()).start()
with open(ready, "w") as f:
    f.write("ready\n")
srv.serve_forever()
