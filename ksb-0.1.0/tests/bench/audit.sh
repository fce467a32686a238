#!/bin/bash
# audit.sh: committed decision rows per second through the audit writer
# with the durability promise on (an allowed row's callback runs only after
# its COMMIT; WAL, synchronous=FULL), at 1, 16 and 256 concurrent clients
# (or the counts given).  The database lives in DIR (default: a temp dir
# under /var/tmp, i.e. the disk, not a tmpfs).  Not part of `make check'.
#
#   tests/bench/audit.sh [-d DIR] [-t SECONDS] [N...]
set -eu
B=${KSB_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/bench/audit_bench
[ -x "$B" ] || { echo "$B not built (make tests/bench/audit_bench)" >&2; exit 1; }
dir= secs=5
while getopts d:t: o; do
	case $o in d) dir=$OPTARG ;; t) secs=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
if [ -z "$dir" ]; then
	dir=$(mktemp -d /var/tmp/ksb-audit-bench.XXXXXX)
	trap 'rm -rf "$dir"' EXIT
fi
echo "# $(df -hT "$dir" | awk 'NR == 2 { print $2 " on " $7 }'), $secs s per run"
[ $# -gt 0 ] || set -- 1 16 256
"$B" "$dir" "$secs" "$@"
