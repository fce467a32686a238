#!/bin/bash
# fairshare.sh: set-up time of a new guest's tunnels while three greedy
# guests keep max-connections full (tests/integration/fairshare.sh with
# more rounds).  Not in `make check'.  Run from the build directory:
#   KSB_SRCDIR=. KSB_BUILDDIR=. tests/bench/fairshare.sh [ROUNDS]
# Prints the test's "# N/N tunnels, set-up p50 ... p99 ..." line.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export KSB_FAIR_ROUNDS=${1:-200}
"$here/../integration/fairshare.sh" | grep -E '^# [0-9]+/[0-9]+ tunnels|^not ok'
