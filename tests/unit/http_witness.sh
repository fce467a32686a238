#!/bin/bash
# http_witness.sh: a second parser as witness for gateway/parse/http_parse.c.
# tests/unit/http_gen makes near-valid HTTP/1.1 messages and prints those
# our parser accepts; Node's llhttp (the parser of Node's http module,
# which the agents use) must read each the same way: no error, one
# message, the same method, target, field count and decoded body, the
# message ending at the same byte, and keep-alive where we keep alive.
# Where they differ the gateway and an origin could frame a request
# differently (request smuggling).  Our parser refusing what llhttp takes
# is expected (it is stricter) and not checked here.  As Node's http
# client does (lib/_http_client.js), a 304's body is skipped by the
# caller, not by llhttp (before llhttp 8, in Debian 12's Node 18, llhttp
# reads a 304's or 204's Content-Length; a 204 with one is refused).
# Needs node (Debian: nodejs); no root, no network.
set -eu
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
gen=$B/tests/unit/http_gen
count=${HTTP_WITNESS_COUNT:-20000}
. "$(dirname "$0")/../lib.sh"
ksb_need node
[ -x "$gen" ] || { echo "FAIL: $gen not built"; exit 1; }
script='
let P;
try { P = process.binding("http_parser"); } catch (e) { P = null; }
if (!P || !P.HTTPParser || !P.methods) {
  console.log("SKIP: this node has no http_parser binding"); process.exit(77);
}
const { HTTPParser, methods } = P;
const rl = require("readline").createInterface({ input: process.stdin });
let n = 0, bad = 0;
function witness(j, buf) {
  const p = new HTTPParser();
  p.initialize(j.resp ? HTTPParser.RESPONSE : HTTPParser.REQUEST, {},
    1 << 20, 0);
  const res = { msgs: [], body: [], complete: 0, hdrs: [] };
  p[HTTPParser.kOnHeaders] = (h) => {
    if (!res.msgs.length) res.hdrs.push(...h); /* not the trailers */
  };
  p[HTTPParser.kOnHeadersComplete] = (vM, vm, h, method, url, status,
      smsg, upgrade, ka) => {
    if (h) res.hdrs.push(...h);
    res.msgs.push({ method: methods[method], url, status, upgrade, ka });
    return j.resp && status === 304 ? 1 : 0; /* 1: skip the body */
  };
  p[HTTPParser.kOnBody] = (b) => { res.body.push(Buffer.from(b)); };
  p[HTTPParser.kOnMessageComplete] = () => { res.complete++; };
  p[HTTPParser.kOnExecute] = () => {};
  const r = p.execute(buf);
  let err = r instanceof Error ? r.code + " " + (r.reason || "") : null;
  if (!err && j.resp && j.eof) {
    const f = p.finish();
    if (f instanceof Error) err = f.code;
  }
  const why = [];
  if (err) why.push("error " + err);
  if (res.msgs.length !== 1) return why.concat("messages " + res.msgs.length);
  const m = res.msgs[0];
  if (!j.resp) {
    if (m.method !== j.method) why.push("method " + m.method);
    if (Buffer.from(m.url || "", "latin1").toString("hex") !== j.url)
      why.push("target " + m.url);
    if (!!m.upgrade !== !!j.upgrade) why.push("upgrade " + m.upgrade);
  } else if (m.status !== j.status) why.push("status " + m.status);
  if (!j.close && !m.ka) why.push("keep-alive " + m.ka);
  if (res.hdrs.length / 2 !== j.nf) why.push("fields " + res.hdrs.length / 2);
  if (!m.upgrade && res.complete !== 1) why.push("complete " + res.complete);
  const body = Buffer.concat(res.body).toString("hex");
  if (body !== j.body) why.push("body " + body.length / 2 + " bytes");
  if (!err && !m.upgrade && r !== buf.length) why.push("consumed " + r);
  return why;
}
rl.on("line", (line) => {
  const j = JSON.parse(line), buf = Buffer.from(j.msg, "hex");
  const why = witness(j, buf);
  n++;
  if (why.length && ++bad <= 20)
    console.log("# differs: " + why.join("; ") + ": " +
      JSON.stringify(buf.toString("latin1").slice(0, 400)));
});
rl.on("close", () => {
  const min = Number(process.argv[1]);
  console.log((bad === 0 ? "ok 1" : "not ok 1") + " - llhttp reads the " +
    n + " messages we accept the same way (" + bad + " differ)");
  console.log((n >= min ? "ok 2" : "not ok 2") + " - at least " + min +
    " messages compared");
  console.log("1..2");
  process.exit(bad === 0 && n >= min ? 0 : 1);
});
'
# About a quarter of the generated messages are accepted.
"$gen" "$count" | node --no-deprecation -e "$script" "$((count / 10))"
