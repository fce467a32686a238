#!/bin/bash
# otlp.sh: ksbctl audit export --otlp URL and --format ocsf (issue 18).  A
# real ksb-gatewayd in its own namespace writes the audit (a fake guest's
# refused CONNECTs); the exporter runs in that namespace against
# tests/integration/otlp_receiver.py on 127.0.0.1:4318 there.
#
#   1. --follow to a receiver that drops the connection mid-request and
#      answers one 503: every record arrives exactly once, in seq order;
#   2. the receiver is killed and comes back later while new records come:
#      the exporter retries (connection refused) and none is lost or sent
#      twice;
#   3. the exporter is stopped (SIGTERM) and started again: it resumes
#      after the last accepted seq (its state file);
#   4. a receiver answering 400: exit 1, the state file not advanced;
#   5. --format ocsf: one OCSF event per record, denials as Blocked.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need python3
HOLD=$KSB_BUILDDIR/tests/integration/ctlhold
KSBCTL=$KSB_BUILDDIR/ksbctl/ksbctl
RECV=$KSB_SRCDIR/tests/integration/otlp_receiver.py
[ -x "$HOLD" ] || ksb_fail "$HOLD not built (make check builds it)"
ksb_env
printf 'connection-rate = 100000\nconnection-rate-per-instance = 100000\n' \
	>> "$T/ksb.conf"
ksb_gateway
ksb_fake_guest 1 g1 default
URL=http://127.0.0.1:4318/v1/logs
fails=0
pass=0

# denials N: N refused CONNECTs from g1 (one audit record each), then
# until the audit writer has committed them (<= 30 s): it writes after
# the answer, and an export started before would miss them.
denials() {
	local before
	before=$(db_seqs | wc -l)
	ip netns exec "ksbt-$$-g1" timeout 120 python3 - "$1" <<'PY'
import socket, sys
for i in range(int(sys.argv[1])):
    s = socket.create_connection(("10.77.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
    while b"\r\n\r\n" not in s.recv(4096):
        pass
    s.close()
PY
	ksb_until 30 db_has "$((before + $1))" || ksb_fail \
		"the audit has $(db_seqs | wc -l) records, want $((before + $1))"
}
db_has() { [ "$(db_seqs | wc -l)" -ge "$1" ]; }
# db_seqs: every chained record's seq, in order (the --jsonl export).
db_seqs() {
	"$KSBCTL" -f "$T/ksb.conf" audit export --jsonl |
		python3 -c 'import json,sys; [print(json.loads(l)["seq"]) for l in sys.stdin]'
}
# receiver [OPTS]: (re)start the receiver, appending to $T/recv.log.
receiver() {
	rm -f "$T/recv.ready"
	ip netns exec "$GW" python3 "$RECV" 127.0.0.1 4318 "$T/recv.log" \
		"$T/recv.ready" "$@" 2>>"$T/recv.err" &
	RECV_PID=$!
	KSB_PIDS="$KSB_PIDS $RECV_PID"
	ksb_until 30 test -s "$T/recv.ready" || ksb_fail "receiver did not start"
}
# all_once: the receiver has every record of the database exactly once,
# in seq order (the same list).
all_once() { [ "$(db_seqs)" = "$(cat "$T/recv.log" 2>/dev/null)" ]; }
# wait_all: until all_once (<= 60 s); says what differs if not.
wait_all() {
	ksb_until 60 all_once && return 0
	db_seqs > "$T/db.seqs"
	echo "# db $(wc -l < "$T/db.seqs") records, receiver $(wc -l < "$T/recv.log")," \
		"repeated: $(sort "$T/recv.log" | uniq -d | head -n 5 | tr '\n' ' ')" >&2
	diff "$T/db.seqs" "$T/recv.log" | head -n 5 | sed 's/^/# /' >&2
	return 1
}
exporter() {
	ip netns exec "$GW" "$KSBCTL" -f "$T/ksb.conf" audit export --otlp "$URL" \
		--state "$T/otlp.seq" "$@" 2>>"$T/export.err" &
	EXP_PID=$!
	KSB_PIDS="$KSB_PIDS $EXP_PID"
}
last_seq() { db_seqs | tail -n 1; }
state_is() { [ "$(cat "$T/otlp.seq" 2>/dev/null)" = "$1" ]; }

ksb_say "1. --follow; the receiver drops a request mid-stream, answers a 503"
denials 700
ksb_check "the audit has the records (> 2 batches of 512)" \
	'ksb_until 30 eval "[ \$(db_seqs | wc -l) -ge 700 ]"'
receiver --drop-at 2 --fail-at 3
exporter --follow
ksb_check "every record arrives exactly once, in seq order" wait_all
ksb_check "the exporter said it sent a batch again" \
	'grep -q "again in .* ms (attempt 2)" "$T/export.err"'
ksb_check "the state file holds the last seq" 'ksb_until 10 state_is "$(last_seq)"'

ksb_say "2. the receiver goes away and comes back"
kill -9 "$RECV_PID"
ksb_wait_dead "$RECV_PID"
denials 50
ksb_check "the exporter retries while it is gone" \
	'ksb_until 30 grep -q "Could not connect\|Couldn.t connect" "$T/export.err"'
receiver
ksb_check "after it is back, every record exactly once, in order" wait_all

ksb_say "3. the exporter restarts and resumes"
kill -TERM "$EXP_PID"
ksb_check "SIGTERM stops it cleanly (exit 0)" 'wait "$EXP_PID"'
ksb_check "it says where it stopped" 'grep -q "accepted up to seq $(last_seq) .*stopped" "$T/export.err"'
denials 20
exporter
ksb_check "the one-shot export exits 0" 'wait "$EXP_PID"'
ksb_check "only the new records were sent: every record once, in order" wait_all
ksb_check "the state file follows" 'state_is "$(last_seq)"'

ksb_say "4. a receiver that refuses (400)"
kill "$RECV_PID"
ksb_wait_dead "$RECV_PID"
receiver --reject
cp "$T/otlp.seq" "$T/otlp.seq.before"
denials 5
set +e
ip netns exec "$GW" "$KSBCTL" -f "$T/ksb.conf" audit export --otlp "$URL" \
	--state "$T/otlp.seq" 2> "$T/reject.err"
rc=$?
set -e
ksb_check "exit 1, naming the answer" \
	'[ $rc = 1 ] && grep "HTTP 400 for records seq .*not retried: .*rejected by the test" "$T/reject.err" || { cat "$T/reject.err"; false; }'
ksb_check "the state file did not move" 'cmp -s "$T/otlp.seq" "$T/otlp.seq.before"'

ksb_say "5. --format ocsf"
"$KSBCTL" -f "$T/ksb.conf" audit export --format ocsf > "$T/ocsf.jsonl"
ksb_check "one OCSF event per record, metadata.uid = seq, denials Blocked" \
	'python3 - "$T/ocsf.jsonl" "$(db_seqs | wc -l)" <<"PY"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
assert len(evs) == int(sys.argv[2]), (len(evs), sys.argv[2])
deny = 0
for e in evs:
    u = e["unmapped"]
    assert e["metadata"]["uid"] == str(u["seq"])
    assert e["metadata"]["product"]["name"] == "ksb"
    assert e["type_uid"] == e["class_uid"] * 100 + e["activity_id"]
    assert e["time"] == u["ts_ms"]
    if u["kind"] == "connection":
        assert e["class_uid"] == 4001 and e["activity_id"] == 1
        assert e["dst_endpoint"]["hostname"] == u["host"]
        if u["decision"] == "deny":
            assert e["disposition_id"] == 2
            deny += 1
    else:
        assert e["class_uid"] in (0, 4001)
assert deny >= 775, deny
PY'

echo "# $pass passed, $fails failed"
[ "$fails" = 0 ]
