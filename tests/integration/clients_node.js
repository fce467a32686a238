// clients_node.js: Node's fetch through the credential swap.
//
//   NODE_PATH=/usr/share/nodejs node clients_node.js PROXY URL CAFILE \
//       PLACEHOLDER REALFILE
//
// Node's own global fetch (undici) with "Authorization: Bearer
// PLACEHOLDER", a GET and a POST of a JSON body, through the CONNECT
// proxy PROXY: Node 20's fetch takes no proxy from the environment, so
// the dispatcher is Debian's undici (node-undici) ProxyAgent, as agents
// that honour HTTPS_PROXY do.  Prints "METHOD status=N auth=A leak=no|yes"
// per request (as clients_py.py) and exits 0 only when each was 200,
// auth=ok and the real value (REALFILE, first line) appeared nowhere in
// what the client received.  REALFILE "dump:PATH" (in a guest, which
// never holds the value): those bytes are appended to PATH instead, for
// clients_leakscan.py, and leak=dumped.
"use strict";
const fs = require("fs");
const { ProxyAgent, setGlobalDispatcher } = require("undici");

const [proxy, url, cafile, ph, realfile] = process.argv.slice(2);
const dump = realfile.startsWith("dump:") ? realfile.slice(5) : null;
const real = dump ? null :
	fs.readFileSync(realfile, "latin1").split("\n")[0];
const ca = fs.readFileSync(cafile, "utf8");
setGlobalDispatcher(new ProxyAgent({ uri: proxy, requestTls: { ca } }));

(async () => {
	let ok = true;
	for (const method of ["GET", "POST"]) {
		const r = await fetch(url, {
			method,
			headers: { authorization: "Bearer " + ph,
				"content-type": "application/json" },
			body: method === "POST" ?
				JSON.stringify({ model: "x", input: "hi" }) :
				undefined,
		});
		const text = await r.text();
		let raw = r.statusText + text;
		for (const [k, v] of r.headers)
			raw += k + ": " + v + "\n";
		let auth = "unparsed";
		try {
			auth = JSON.parse(text).auth;
		} catch (e) {}
		let leak = false, word;
		if (dump) {
			fs.appendFileSync(dump, raw);
			word = "dumped";
		} else {
			leak = raw.includes(real);
			word = leak ? "yes" : "no";
		}
		console.log(`${method} status=${r.status} auth=${auth} ` +
			`leak=${word}`);
		ok = ok && r.status === 200 && auth === "ok" && !leak;
	}
	process.exit(ok ? 0 : 1);
})().catch((e) => {
	console.log("error " + (e.cause ? e.cause.message : e.message));
	process.exit(1);
});
