#!/usr/bin/env python3
"""fakeapi.py: a scripted fake model API over TLS for the real agents.

One server (one certificate, see fakeapi_certs.sh) answers for
api.anthropic.com, platform.claude.com and api.openai.com:

  POST /v1/messages            Anthropic Messages API, SSE when "stream": true
                               (Claude Code sends ?beta=true)
  POST /v1/responses           OpenAI Responses API, SSE (Codex)
  GET/HEAD /api/hello, /v1/oauth/hello    200 {}
  GET  /api/claude_code/policy_limits      200 {"restrictions": {}}
  GET  /api/claude_code/settings           404 (Claude Code's "no settings")
  POST /v1/oauth/token (platform.claude.com), /oauth/token (auth.openai.com)
                               the providers' token endpoints, with
                               --oauth-lifetime only (below)
  anything else                            404
Every response carries a request-id header, as Anthropic's do.

Script, per request: the current user turn (Claude: the last message after
skipping trailing role "system" messages; Codex: the user messages after the
last model output item) is searched for a line "RUN: <cmd>".
  - the request carries a tool result (tool_result / function_call_output)
    -> final text "done: <first 40 chars of the tool output>" (for Codex the
       metadata header of exec_command output, up to "Output:\\n", is dropped;
       newlines become spaces), end_turn / response.completed;
  - else a RUN: line and the request offers the shell tool (Bash /
    exec_command) -> a shell tool call running <cmd>;
  - else the text "ok".
Before that, a line "FAIL: <status>" (400..499) in the current user turn's
text or tool result makes the Messages API answer that HTTP status with an
invalid_request_error, as for a request the API refuses: the agent's turn
fails, after its tool ran when the tool printed it (tests/e2e/slurm.sh).

--log FILE gets one JSON line per request: ts, method, path, host, auth
({"header": name, "sha256": first 12 hex of sha256 of the credential, i.e.
the value without "Bearer "} or null), api, model, user_texts (texts of every
user message in the request, oldest first), tool_result (bool), reply
("tool", "text", or the HTTP status).

--oauth-lifetime S turns on the subscription logins' semantics, as the
providers have them: access tokens live S seconds, then (or unknown) a
Bearer on /v1/messages or /v1/responses gets 401; refresh tokens are single
use and rotate: a refresh (grant_type refresh_token, the agent's client_id)
spends the one it presents and answers a new pair with expires_in; a spent
or unknown one gets 400 invalid_grant (logged with "reuse": true for a
spent one).  --oauth-login DIR writes a fresh login for each agent, as the
agents store it: DIR/claude.json (~/.claude/.credentials.json) and
DIR/codex.json (~/.codex/auth.json; the access token a JWT with "exp").
Token requests are logged with api "oauth", "provider" and "refresh" (the
first 12 hex of sha256 of the refresh token presented).  POST
/fakeapi/expire (the test's control) ends every access token's life now,
as a provider revoking them early would; POST /fakeapi/fail-refresh
makes the next refresh fail with 503 temporarily_unavailable (the
refresh token not spent, as a provider's outage leaves it); GET /fakeapi/echo-auth answers
the Authorization field it got, as a careless API could.

--oauth-tokens FILE gets every token minted (access and refresh, one a
line, appended before it is handed out): the values a test then looks
for where they must never be (a guest's files, its memory).

--ready-file FILE is written (atomically, "ADDR PORT\\n") once listening.
Python 3 standard library only.
"""

import argparse
import gzip
import hashlib
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import sys
import threading
import time
import uuid
import zlib

RUN_RE = re.compile(r"^[ \t]*RUN:[ \t]*(.+?)[ \t]*$", re.M)
FAIL_RE = re.compile(r"^[ \t]*FAIL:[ \t]*(4[0-9][0-9])[ \t]*$", re.M)
# GET answers (status, body).  policy_limits needs "restrictions": Claude
# Code retries a bare {} four times with back-off (~6 s) before each turn.
# settings: 200 would need {uuid, checksum, settings} ({} is a logged parse
# error); 404 with a request-id header is the "no settings" answer.
GETS = {"/api/hello": (200, {}),
        "/v1/oauth/hello": (200, {}),
        "/api/claude_code/policy_limits": (200, {"restrictions": {}}),
        "/api/claude_code/settings": (404, {"type": "error", "error": {
            "type": "not_found_error", "message": "no settings"}})}
NOT_FOUND = {"type": "error", "error": {"type": "not_found_error",
                                        "message": "not found"}}

log_lock = threading.Lock()
log_file = None

CLIENT_IDS = {"claude": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
              "codex": "app_EMoamEEZ73f0CkXaXp7hrann"}
TOKEN_PATHS = {"/v1/oauth/token": "claude", "/oauth/token": "codex"}


class OAuth:
    """Tokens of the fake providers: access -> (provider, expiry),
    live refresh -> provider, spent refresh tokens."""

    def __init__(self, lifetime):
        self.lifetime = lifetime
        self.lock = threading.Lock()
        self.access = {}
        self.refresh = {}
        self.spent = set()
        self.fail_next = 0
        self.tokens_file = None

    @staticmethod
    def b64(obj):
        import base64
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    def mint(self, provider):
        exp = time.time() + self.lifetime
        if provider == "codex":
            acc = "%s.%s.fakesig" % (self.b64({"alg": "none"}),
                                     self.b64({"exp": int(exp), "jti": uuid.uuid4().hex}))
        else:
            acc = "sk-ant-oat01-" + uuid.uuid4().hex
        ref = ("sk-ant-ort01-" if provider == "claude" else "rt_") + uuid.uuid4().hex
        with self.lock:
            self.access[acc] = (provider, exp)
            self.refresh[ref] = provider
            if self.tokens_file:
                with open(self.tokens_file, "a") as f:
                    f.write("%s\n%s\n" % (acc, ref))
        return acc, ref, exp

    def live(self, token):
        with self.lock:
            a = self.access.get(token)
        return a is not None and time.time() < a[1]

    def spend(self, provider, token):
        """0: spent now; 1: reused; 2: unknown."""
        with self.lock:
            if self.refresh.get(token) == provider:
                del self.refresh[token]
                self.spent.add(token)
                return 0
            return 1 if token in self.spent else 2

    def write_logins(self, d):
        os.makedirs(d, exist_ok=True)
        acc, ref, exp = self.mint("claude")
        with open(os.path.join(d, "claude.json"), "w") as f:
            json.dump({"claudeAiOauth": {"accessToken": acc, "refreshToken": ref,
                                         "expiresAt": int(exp * 1000),
                                         "scopes": ["user:inference"],
                                         "subscriptionType": "max"}}, f)
        acc, ref, exp = self.mint("codex")
        with open(os.path.join(d, "codex.json"), "w") as f:
            json.dump({"OPENAI_API_KEY": None,
                       "tokens": {"id_token": self.b64({"alg": "none"}) + ".e30.sig",
                                  "access_token": acc, "refresh_token": ref,
                                  "account_id": "acct-fake"},
                       "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)


oauth = None


def sha12(s):
    return hashlib.sha256(s.encode()).hexdigest()[:12]


def log(rec):
    if log_file is None:
        return
    line = json.dumps(rec, sort_keys=True) + "\n"
    with log_lock:
        log_file.write(line)
        log_file.flush()


def find_run(texts):
    """The command of the last RUN: line in the last text that has one."""
    for t in reversed(texts):
        m = RUN_RE.findall(t)
        if m:
            return m[-1]
    return None


def summary(out):
    out = out or ""
    i = out.find("Output:\n")
    if i == 0 or (i > 0 and out[i - 1] == "\n"):
        out = out[i + len("Output:\n"):]
    out = " ".join(out.split())
    return "done: " + out[:40]


# ---- Anthropic --------------------------------------------------------------

def block_texts(content, want):
    """Texts of content (a string or a list of blocks) of type want."""
    if isinstance(content, str):
        return [content] if want == "text" else []
    res = []
    for b in content or []:
        if isinstance(b, dict) and b.get("type") == want:
            if want == "text":
                res.append(b.get("text", ""))
            else:
                c = b.get("content", "")
                res.append(c if isinstance(c, str) else
                           "".join(x.get("text", "") for x in c
                                   if isinstance(x, dict)))
    return res


def anthropic_plan(body):
    msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    user_texts = []
    for m in msgs:
        if m.get("role") == "user":
            user_texts.extend(block_texts(m.get("content"), "text"))
    while msgs and msgs[-1].get("role") == "system":
        msgs.pop()
    last = msgs[-1] if msgs else {}
    results = (block_texts(last.get("content"), "tool_result")
               if last.get("role") == "user" else [])
    tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    cur = results + (block_texts(last.get("content"), "text")
                     if last.get("role") == "user" else [])
    fail = [c for t in cur for c in FAIL_RE.findall(t)]
    if fail:
        plan = (int(fail[-1]), None)
    elif results:
        plan = ("text", summary(results[-1]))
    else:
        cmd = find_run(block_texts(last.get("content"), "text")
                       if last.get("role") == "user" else [])
        if cmd is not None and "Bash" in tools:
            plan = ("tool", cmd)
        else:
            plan = ("text", "ok")
    return plan, user_texts, bool(results)


def anthropic_events(model, plan):
    mid = "msg_" + uuid.uuid4().hex[:24]
    usage = {"input_tokens": 10, "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield "message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": usage}}
    kind, arg = plan
    if kind == "tool":
        yield "content_block_start", {
            "type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24],
                "name": "Bash", "input": {}}}
        inp = json.dumps({"command": arg, "description": "Run the requested command"})
        for i in range(0, len(inp), 32):
            yield "content_block_delta", {
                "type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": inp[i:i + 32]}}
        stop = "tool_use"
    else:
        yield "content_block_start", {
            "type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}
        yield "content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": arg}}
        stop = "end_turn"
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


def anthropic_message(model, plan):
    kind, arg = plan
    if kind == "tool":
        content = [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24],
                    "name": "Bash", "input": {"command": arg,
                                              "description": "Run the requested command"}}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": arg}]
        stop = "end_turn"
    return {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message",
            "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


# ---- OpenAI Responses ---------------------------------------------------------

def item_text(item):
    c = item.get("content")
    if isinstance(c, str):
        return [c]
    return [p.get("text", "") for p in c or []
            if isinstance(p, dict) and p.get("type") in ("input_text", "text")]


def output_text(out):
    if isinstance(out, str):
        return out
    if isinstance(out, dict):
        return output_text(out.get("content", out.get("output", "")))
    if isinstance(out, list):
        return "".join(p.get("text", "") for p in out if isinstance(p, dict))
    return ""


def is_input_msg(it):
    return (it.get("type", "message") == "message"
            and it.get("role") in ("user", "developer", "system"))


def openai_plan(body):
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    items = [i for i in items if isinstance(i, dict)]
    user_texts = []
    for it in items:
        if it.get("type", "message") == "message" and it.get("role") == "user":
            user_texts.extend(item_text(it))
    k = len(items)
    while k > 0 and is_input_msg(items[k - 1]):
        k -= 1
    trailing = [t for it in items[k:] if it.get("role") == "user"
                for t in item_text(it)]
    prev = items[k - 1] if k > 0 else {}
    tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    has_result = prev.get("type") == "function_call_output"
    if trailing:
        cmd = find_run(trailing)
        if cmd is not None and "exec_command" in tools:
            plan = ("tool", cmd, "exec_command")
        elif cmd is not None and "shell" in tools:
            plan = ("tool", cmd, "shell")
        else:
            plan = ("text", "ok")
    elif has_result:
        plan = ("text", summary(output_text(prev.get("output"))))
    else:
        plan = ("text", "ok")
    return plan, user_texts, has_result


def openai_events(model, plan):
    rid = "resp_" + uuid.uuid4().hex[:24]
    created = int(time.time())
    seq = [0]

    def ev(kind, **data):
        d = {"type": kind, "sequence_number": seq[0]}
        d.update(data)
        seq[0] += 1
        return kind, d

    def resp(status, output, usage=None):
        r = {"id": rid, "object": "response", "created_at": created,
             "status": status, "model": model, "output": output,
             "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}
        if usage:
            r["usage"] = usage
        return r

    yield ev("response.created", response=resp("in_progress", []))
    yield ev("response.in_progress", response=resp("in_progress", []))
    if plan[0] == "tool":
        cmd, tool = plan[1], plan[2]
        args = json.dumps({"cmd": cmd} if tool == "exec_command"
                          else {"command": ["bash", "-lc", cmd]})
        iid = "fc_" + uuid.uuid4().hex[:24]
        call = "call_" + uuid.uuid4().hex[:24]
        item = {"id": iid, "type": "function_call", "status": "in_progress",
                "call_id": call, "name": tool, "arguments": ""}
        yield ev("response.output_item.added", output_index=0, item=item)
        for i in range(0, len(args), 32):
            yield ev("response.function_call_arguments.delta", item_id=iid,
                     output_index=0, delta=args[i:i + 32])
        yield ev("response.function_call_arguments.done", item_id=iid,
                 output_index=0, arguments=args)
        done = dict(item, status="completed", arguments=args)
    else:
        text = plan[1]
        iid = "msg_" + uuid.uuid4().hex[:24]
        item = {"id": iid, "type": "message", "status": "in_progress",
                "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        yield ev("response.output_item.added", output_index=0, item=item)
        yield ev("response.content_part.added", item_id=iid, output_index=0,
                 content_index=0, part=part)
        yield ev("response.output_text.delta", item_id=iid, output_index=0,
                 content_index=0, delta=text, logprobs=[])
        yield ev("response.output_text.done", item_id=iid, output_index=0,
                 content_index=0, text=text, logprobs=[])
        part = dict(part, text=text)
        yield ev("response.content_part.done", item_id=iid, output_index=0,
                 content_index=0, part=part)
        done = dict(item, status="completed", content=[part])
    yield ev("response.output_item.done", output_index=0, item=done)
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    yield ev("response.completed", response=resp("completed", [done], usage))


# ---- HTTP ---------------------------------------------------------------------

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakeapi"
    sys_version = ""
    timeout = 120

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("fakeapi: %s\n" % (fmt % args))

    def auth(self):
        for name in ("x-api-key", "authorization"):
            v = self.headers.get(name)
            if v is not None:
                cred = v[7:] if v.lower().startswith("bearer ") else v
                return {"header": name,
                        "sha256": hashlib.sha256(cred.encode()).hexdigest()[:12]}
        return None

    def body(self):
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("content-length") or 0))
        enc = (self.headers.get("content-encoding") or "").lower()
        if enc == "gzip":
            data = gzip.decompress(data)
        elif enc == "deflate":
            data = zlib.decompress(data)
        elif enc not in ("", "identity"):
            raise ValueError("unsupported content-encoding " + enc)
        return data

    def rec(self, **kw):
        r = {"ts": round(time.time(), 3), "method": self.command,
             "path": self.path, "host": self.headers.get("host"),
             "auth": self.auth()}
        r.update(kw)
        return r

    def send_response(self, code, message=None):
        super().send_response(code, message)
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:24])

    def send(self, code, obj=None, head=False):
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def stream(self, events):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in events:
            self.chunk(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self, head=False):
        path = self.path.split("?", 1)[0]
        if oauth is not None and path == "/fakeapi/echo-auth":
            # A careless API reflecting the credential it got.
            log(self.rec(api="control", reply=200))
            return self.send(200, {"authorization": self.headers.get("authorization")}, head)
        code, obj = GETS.get(path, (404, NOT_FOUND))
        log(self.rec(reply=code))
        self.send(code, obj, head)

    def do_HEAD(self):
        # Claude Code's TUI probes HEAD /api/hello when nonessential
        # traffic is not disabled.
        self.do_GET(head=True)

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        try:
            raw = self.body()
        except Exception as e:  # noqa: BLE001
            log(self.rec(reply=400, error=str(e)))
            self.close_connection = True
            return self.send(400, {"error": str(e)})
        if oauth is not None and path in TOKEN_PATHS:
            return self.token(TOKEN_PATHS[path], raw)
        if oauth is not None and path == "/fakeapi/expire":
            with oauth.lock:
                oauth.access = {k: (v[0], 0) for k, v in oauth.access.items()}
            log(self.rec(api="control", reply=200))
            return self.send(200, {})
        if oauth is not None and path == "/fakeapi/fail-refresh":
            with oauth.lock:
                oauth.fail_next += 1
            log(self.rec(api="control", reply=200))
            return self.send(200, {})
        if path not in ("/v1/messages", "/v1/responses"):
            log(self.rec(reply=404))
            return self.send(404, NOT_FOUND)
        try:
            body = json.loads(raw or b"{}")
        except ValueError as e:
            log(self.rec(reply=400, error="bad json"))
            return self.send(400, {"error": "bad json: %s" % e})
        model = body.get("model") or "unknown"
        stream = bool(body.get("stream"))
        bearer = self.headers.get("authorization") or ""
        if oauth is not None and bearer.lower().startswith("bearer ") \
                and not oauth.live(bearer[7:].strip()):
            log(self.rec(api="oauth-check", reply=401))
            return self.send(401, {"type": "error", "error": {
                "type": "authentication_error",
                "message": "OAuth token has expired"}})
        if path == "/v1/messages":
            plan, texts, res = anthropic_plan(body)
            log(self.rec(api="anthropic", model=model, stream=stream,
                         user_texts=texts, tool_result=res, reply=plan[0]))
            if isinstance(plan[0], int):
                return self.send(plan[0], {"type": "error", "error": {
                    "type": "invalid_request_error",
                    "message": "refused by the test (a FAIL: line)"}})
            if stream:
                self.stream(anthropic_events(model, plan))
            else:
                self.send(200, anthropic_message(model, plan))
        else:
            plan, texts, res = openai_plan(body)
            log(self.rec(api="openai", model=model, stream=stream,
                         user_texts=texts, tool_result=res, reply=plan[0]))
            events = list(openai_events(model, plan))
            if stream:
                self.stream(events)
            else:
                self.send(200, events[-1][1]["response"])


    def token(self, provider, raw):
        """The provider's token endpoint (RFC 6749 §6, rotating)."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        ref = body.get("refresh_token") or ""
        rec = dict(api="oauth", provider=provider, refresh=sha12(ref))
        if body.get("grant_type") != "refresh_token" or \
                body.get("client_id") != CLIENT_IDS[provider]:
            log(self.rec(reply=400, **rec))
            return self.send(400, {"error": "invalid_request"})
        with oauth.lock:
            fail, oauth.fail_next = oauth.fail_next > 0, max(0, oauth.fail_next - 1)
        if fail:
            log(self.rec(reply=503, **rec))
            return self.send(503, {"error": "temporarily_unavailable"})
        r = oauth.spend(provider, ref)
        if r != 0:
            log(self.rec(reply=400, reuse=(r == 1), **rec))
            return self.send(400, {"error": "invalid_grant",
                                   "error_description": "refresh token is invalid or was used"})
        acc, new, exp = oauth.mint(provider)
        log(self.rec(reply=200, new_refresh=sha12(new), access=sha12(acc), **rec))
        ans = {"access_token": acc, "refresh_token": new, "token_type": "Bearer",
               "expires_in": int(round(exp - time.time()))}
        if provider == "codex":
            ans["id_token"] = OAuth.b64({"alg": "none"}) + ".e30.sig"
        else:
            ans["scope"] = "user:inference"
        self.send(200, ans)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, ctx, verbose):
        self.ctx = ctx
        self.verbose = verbose
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the connection's thread, not in accept().
        conn = request
        try:
            request.settimeout(Handler.timeout)
            if self.ctx is not None:
                conn = self.ctx.wrap_socket(request, server_side=True)
            Handler(conn, client_address, self)
        except (OSError, ssl.SSLError, ValueError) as e:
            if self.verbose:
                sys.stderr.write("fakeapi: %s: %s\n" % (client_address[0], e))
        finally:
            if conn is not request:
                try:
                    conn.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        if self.verbose:
            sys.stderr.write("fakeapi: error from %s: %s\n"
                             % (client_address[0], sys.exc_info()[1]))


def main():
    global log_file
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cert", help="server certificate chain (PEM); omit for plain HTTP")
    ap.add_argument("--key", help="server key (PEM)")
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=443, help="0: any free port")
    ap.add_argument("--log", help="append one JSON line per request")
    ap.add_argument("--ready-file", help="written as 'ADDR PORT' once listening")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--oauth-lifetime", type=float,
                    help="seconds an access token lives (turns OAuth on)")
    ap.add_argument("--oauth-login", help="write fresh logins into DIR")
    ap.add_argument("--oauth-tokens", help="append every minted token to FILE")
    a = ap.parse_args()
    global oauth
    if a.oauth_lifetime:
        oauth = OAuth(a.oauth_lifetime)
        oauth.tokens_file = a.oauth_tokens
        if a.oauth_login:
            oauth.write_logins(a.oauth_login)

    ctx = None
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(a.cert, a.key)
        ctx.set_alpn_protocols(["http/1.1"])
    if a.log:
        log_file = open(a.log, "a", encoding="utf-8")
    srv = Server((a.addr, a.port), ctx, a.verbose)
    port = srv.server_address[1]
    if a.ready_file:
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%s %d\n" % (a.addr, port))
        os.rename(tmp, a.ready_file)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    main()
