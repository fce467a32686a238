#!/bin/bash
# contrib/demo.sh: the main job, for a person to watch.  Sets everything up
# (contrib/bootstrap.sh), then in private network namespaces starts
# ksb-gatewayd and a TLS origin serving allowed.test and denied.test, boots
# a QEMU guest with ksb-run, shows an allowed and a denied connection from
# inside it, and prints the audit rows.  Removes everything on exit.
set -eu
cd "$(dirname "$0")/.."
contrib/bootstrap.sh
KSB_BUILDDIR=$PWD
KSB_SRCDIR=$PWD
. tests/lib.sh
ksb_need_root
ksb_kernel
KSB_TEST_TEMPLATE=default # ksb-run's own default start, as a user gets it
ksb_env
ksb_origin
ksb_gateway
cp contrib/demo-guest.sh "$T/share/guest.sh"
chmod 755 "$T/share/guest.sh"

ksb_say "policy ($T/policy.d/test.policy)"
cat "$T/policy.d/test.policy"
ksb_say "ksb-run -- /bin/sh /ksb-test/guest.sh"
ip netns exec "$GW" "$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" \
	--state-dir "$T/state" --share-ro "$T/share:/ksb-test" \
	-- /bin/sh /ksb-test/guest.sh || true
ksb_say "ksbctl audit"
ip netns exec "$GW" "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" audit
echo "  (ksb-selftest.invalid: the guest's enforcement self-test, refused on"
echo "  purpose before the command started; see ksb-run(1))"
ksb_say "sqlite3 $T/state/audit.db 'SELECT ... FROM connections'"
sqlite3 -header -column "$T/state/audit.db" \
	"SELECT id, instance, host, port, sni, upstream_addr, decision, reason, bytes_up, bytes_down FROM connections"
