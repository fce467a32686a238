// h2_node.js: Node's http2 module as a guest of tests/integration/h2.sh.
//
//   node h2_node.js PROXY HOST CAFILE PLACEHOLDER
//
// CONNECTs through the gateway (http.request, method CONNECT), then
// http2.connect over TLS on that socket (ALPN h2), sends three requests
// on the one session at once with x-api-key: PLACEHOLDER, and prints
// "alpn h2", then one "status N body" line per answer.
'use strict';
const http = require('http');
const http2 = require('http2');
const tls = require('tls');
const fs = require('fs');

const [proxy, host, ca, ph] = process.argv.slice(2);
const [phost, pport] = proxy.split(':');
const req = http.request({ host: phost, port: +pport, method: 'CONNECT',
	path: host + ':443', headers: { host: host + ':443' } });
req.on('connect', (res, sock) => {
	if (res.statusCode !== 200) {
		console.log('connect', res.statusCode);
		process.exit(1);
	}
	const t = tls.connect({ socket: sock, servername: host,
		ca: fs.readFileSync(ca), ALPNProtocols: ['h2'] });
	t.on('secureConnect', () => {
		console.log('alpn', t.alpnProtocol);
		const s = http2.connect('https://' + host, { createConnection: () => t });
		let left = 3;
		for (const p of ['/n1', '/n2', '/n3']) {
			const r = s.request({ ':path': p, 'x-api-key': ph });
			let body = '', status = 0;
			r.on('response', (h) => { status = h[':status']; });
			r.setEncoding('utf8');
			r.on('data', (d) => { body += d; });
			r.on('end', () => {
				console.log('status', status, body.trim());
				if (--left === 0) { s.close(); t.end(); }
			});
			r.end();
		}
	});
	t.on('error', (e) => { console.log('error', e.message); process.exit(1); });
});
req.on('error', (e) => { console.log('error', e.message); process.exit(1); });
req.setTimeout(20000, () => { console.log('timeout'); process.exit(1); });
req.end();
