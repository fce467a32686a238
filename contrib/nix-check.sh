#!/bin/sh
# contrib/nix-check.sh: what can be checked of the Nix files without
# nixpkgs (this CI cannot fetch it), with Debian's nix-bin:
#   1. flake.nix and nix/*.nix parse (nix-instantiate --parse);
#   2. nix/check.nix: the NixOS module evaluated against a stub of the lib
#      functions and types it uses: the ksb.conf, policy, unit, users and
#      tmpfiles it renders;
#   3. nix/flakecheck.nix: flake.nix's outputs evaluated against a stub
#      nixpkgs: per system the package (source, build inputs, flags), the
#      dev shell, the apps' programs; the module is a function;
#   4. the policy nix/policy.nix renders from Nix attributes passes the
#      gateway's own parser (ksbctl policy check; needs the build).
# Not checked: that the flake evaluates with the real nixpkgs (inputs),
# that the package builds with Nix, the module under the real module
# system, the service on NixOS.  The guest's Nix over a Nix host's store
# is tests/e2e/nix.sh's.  Skips (77) naming the Debian package when nix
# is absent.
set -eu
cd "$(dirname "$0")/.."
command -v nix-instantiate >/dev/null 2>&1 || {
	echo "SKIP: needs nix-instantiate: install the Debian package nix-bin"
	exit 77
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# A store of its own (a chroot store, /nix/store inside $T/root): opening
# the default one would make /nix on a machine without Nix.
export NIX_REMOTE=$T/root HOME=$T NIX_CONF_DIR=$T
q() { grep -v "build-users-group" || true; }
for f in flake.nix nix/*.nix; do
	nix-instantiate --parse "$f" > /dev/null 2> "$T/err" ||
		{ q < "$T/err"; echo "nix-check: $f does not parse" >&2; exit 1; }
	echo "ok - $f parses"
done
r=$(nix-instantiate --eval --strict nix/check.nix 2> "$T/err") ||
	{ q < "$T/err"; echo "nix-check: nix/check.nix failed" >&2; exit 1; }
[ "$r" = true ] || { echo "nix-check: nix/check.nix gave $r" >&2; exit 1; }
echo "ok - nix/module.nix renders ksb.conf, policy, unit, users (nix/check.nix)"
r=$(nix-instantiate --eval --strict nix/flakecheck.nix 2> "$T/err") ||
	{ q < "$T/err"; echo "nix-check: nix/flakecheck.nix failed" >&2; exit 1; }
[ "$r" = true ] || { echo "nix-check: nix/flakecheck.nix gave $r" >&2; exit 1; }
echo "ok - flake.nix's outputs: package, dev shell, apps, module (nix/flakecheck.nix)"
KSBCTL=${KSBCTL:-ksbctl/ksbctl}
if [ ! -x "$KSBCTL" ]; then
	echo "nix-check: $KSBCTL not built (make first)" >&2
	exit 1
fi
nix-instantiate --eval --strict --json -E '
  import ./nix/policy.nix {
    default = { allow = [ "github.com" "*.githubusercontent.com" ]; };
    claude = { extends = [ "default" ]; allow = [ "api.anthropic.com" ];
      allowAddress = [ "10.20.0.0/16:443" ];
      limits = { connections = 32; rate = 20; }; };
  }' 2> "$T/err" | python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin))' \
	> "$T/nixos.policy"
# With a permanent grant in grants-dir, as ksbctl allow --permanent
# writes it (the module's grants-dir is /var/lib/ksb/grants.d).
mkdir "$T/grants.d"
printf 'extend profile claude {\n    allow registry.npmjs.org:443\n}\n' \
	> "$T/grants.d/claude.policy"
printf 'policy = %s/*.policy\nstate-dir = %s/state\ngrants-dir = %s/grants.d\n' \
	"$T" "$T" "$T" > "$T/ksb.conf"
"$KSBCTL" -f "$T/ksb.conf" policy check
"$KSBCTL" -f "$T/ksb.conf" policy test claude api.anthropic.com:443 | head -n 1
"$KSBCTL" -f "$T/ksb.conf" policy test claude registry.npmjs.org:443 | head -n 1
echo "ok - the policy rendered from Nix attributes passes ksbctl policy check"
echo "ok - ... with a permanent grant's drop-in"
