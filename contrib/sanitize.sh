#!/bin/sh
# contrib/sanitize.sh: the unit and integration tests built and run under
# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer.
# A build of its own (configure --enable-sanitizers: -fsanitize=address,
# undefined -fno-omit-frame-pointer -fno-sanitize-recover=all) in
# ${KSB_SANITIZE_DIR:-/tmp/ksb-sanitize}, from this tree's `make distdir'
# when the tree is configured in place (automake refuses a VPATH build next
# to one), else from the tree itself.  Any sanitizer report fails its test.
# Not run: tests/e2e (a QEMU guest under TCG, the static guest init has no
# sanitizer), tests/fuzz/run.sh (builds its own ASan/UBSan fuzzers),
# tests/unit/static.sh and tree.sh (look at the sources, run no code).
# Root for the integration tests (network namespaces); CI runs it (.ci/run).
set -eu
cd "$(dirname "$0")/.."
top=$PWD
src=$PWD
dir=${KSB_SANITIZE_DIR:-/tmp/ksb-sanitize}
rm -rf "$dir"
mkdir -p "$dir/build"
if [ -f config.status ]; then
	make -s distdir distdir="$dir/src" >/dev/null
	src=$dir/src
elif [ ! -x configure ]; then
	autoreconf -fi
fi
cd "$dir/build"
"$src/configure" -q --sysconfdir=/etc --localstatedir=/var --enable-sanitizers
make -s -j2
# The tests to run, from Makefile.am's TESTS.
tests=$(printf 'ksb-print-tests:\n\t@echo $(TESTS)\n' |
	make -s -f Makefile -f - ksb-print-tests | tr ' ' '\n' |
	grep -E '^tests/(unit|integration)/' |
	grep -vxE 'tests/unit/(static|tree)\.sh' | tr '\n' ' ')
# A report ends the process with an error (UBSan: -fno-sanitize-recover);
# the stack trace goes to the test's log.
# Full stacks for allocations (fast_unwind_on_malloc=0): libgit2 and pcre2
# have no frame pointers, and contrib/lsan.supp names their functions.
ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:print_summary=1
LSAN_OPTIONS=suppressions=$top/contrib/lsan.supp:print_suppressions=0
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
KSB_NEED_STRICT=1
# Tests whose timing a sanitized build cannot keep read it (credential.sh).
KSB_SANITIZED=1
export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS KSB_NEED_STRICT KSB_SANITIZED
rc=0
start=$(date +%s)
make -j2 check TESTS="$tests" || rc=$?
pass=$(grep -h '^:test-result: PASS' tests/*/*.trs | wc -l)
fail=$(grep -hE '^:test-result: (FAIL|ERROR|XPASS)' tests/*/*.trs | wc -l)
skip=$(grep -h '^:test-result: SKIP' tests/*/*.trs | wc -l)
[ "$rc" = 0 ] || cat test-suite.log
echo "sanitize: $pass passed, $fail failed, $skip skipped (ASan, UBSan;" \
	"tests $(($(date +%s) - start)) s)"
exit $rc
