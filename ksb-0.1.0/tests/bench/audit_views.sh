#!/bin/bash
# audit_views.sh: query times on a large audit database (ksb-audit(5),
# PERFORMANCE): each view with a typical filter, `ksbctl audit' with each
# filter, `audit summary', and `audit verify' throughput.  The database is
# generated through the real writer (chained, with totals) by
# `audit_bench -g', in DIR (default: a temp dir under /var/tmp, removed at
# the end: 10 M rows take about 5 GB).  Times are the best of 3 runs, warm
# page cache.  Not part of `make check'.
#
#   tests/bench/audit_views.sh [-d DIR] [-n ROWS] [-V]	(-V: skip verify)
set -eu
top=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=$top/tests/bench/audit_bench
K=$top/ksbctl/ksbctl
[ -x "$B" ] || { echo "$B not built (make tests/bench/audit_bench)" >&2; exit 1; }
[ -x "$K" ] || { echo "$K not built" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "needs the sqlite3 shell" >&2; exit 1; }
dir= rows=10000000 verify=1
while getopts d:n:V o; do
	case $o in d) dir=$OPTARG ;; n) rows=$OPTARG ;; V) verify=0 ;; *) exit 2 ;; esac
done
if [ -z "$dir" ]; then
	dir=$(mktemp -d /var/tmp/ksb-audit-views.XXXXXX)
	trap 'rm -rf "$dir"' EXIT
fi
db=$dir/audit.db
[ -s "$db" ] || "$B" -g "$db" "$rows"
export KSB_CONF=$dir/ksb.conf
echo "audit-db = $db" > "$KSB_CONF"
n=$(sqlite3 "$db" "SELECT count(*) FROM connections")
echo "# $n decision rows, $(du -h "$db" | cut -f1), $(nproc) cores"

# best of 3, in seconds
best() {
	local i t0 t1 b=
	for i in 1 2 3; do
		t0=$(date +%s%N)
		"$@" > /dev/null
		t1=$(date +%s%N)
		t=$(( (t1 - t0) / 1000000 ))
		if [ -z "$b" ] || [ "$t" -lt "$b" ]; then b=$t; fi
	done
	printf '%8.3f s  %s\n' "$(echo "$b / 1000" | bc -l)" "$label"
}
q() { label=$1; best sqlite3 "$db" "$1"; }
k() { label="ksbctl $*"; best "$K" "$@"; }

now=$(( $(date +%s) * 1000 ))
q "SELECT * FROM denials WHERE instance = 'inst-07' ORDER BY ts_ms DESC LIMIT 100"
q "SELECT * FROM denials WHERE ts_ms >= $((now - 3600000))"
q "SELECT * FROM egress_by_host WHERE instance = 'inst-07' ORDER BY bytes_down DESC LIMIT 20"
q "SELECT * FROM egress_by_host ORDER BY bytes_down DESC LIMIT 20"
q "SELECT * FROM active_tunnels"
q "SELECT * FROM instance_totals"
q "SELECT * FROM instance_totals WHERE instance = 'inst-07'"
echo "# for comparison, the version 2 instance_totals (aggregating the rows):"
q "SELECT instance, count(*), sum(decision = 'allow'), sum(decision = 'deny'), sum(coalesce(bytes_up, 0)), sum(coalesce(bytes_down, 0)), min(ts_ms), max(ts_ms) FROM connections GROUP BY instance"
k audit
k audit --instance inst-07
k audit --host h0003.example.com
k audit --host h1999.example.com
k audit --host '*7.example.com'
k audit --host '*.nowhere.test' --since 1d
k audit --since 1h
k audit --since 7d --until 6d
k audit --denied
k audit --instance inst-07 --denied
k audit --instance inst-07 --host h1999.example.com
k audit --instance inst-07 --since 1d --denied
k audit --limit 10000 --csv
k audit summary
k audit summary --instance inst-07
k audit summary --host '*7.example.com'
k audit summary --since 1h
k audit summary --since 1d
k audit summary --instance inst-07 --since 1d --denied
if [ "$verify" = 1 ]; then
	t0=$(date +%s%N)
	"$K" audit verify
	t1=$(date +%s%N)
	rec=$(sqlite3 "$db" "SELECT (SELECT count(*) FROM connections) + (SELECT count(*) FROM closes) + (SELECT count(*) FROM policy_versions) + (SELECT count(*) FROM registrations) + (SELECT count(*) FROM unregistrations)")
	echo "verify: $rec records in $(( (t1 - t0) / 1000000 )) ms, $(( rec * 1000 / ((t1 - t0) / 1000000 + 1) )) records/s"
fi
