#!/bin/bash
# start_repo.sh: ksb-run to guest command start by repository size
# (issue 16).
# Not in make check: it generates up to ~1.3 GiB of repositories and boots
# ~30 guests.  For each size (an empty directory, and repositories of
# 10 MB, 200 MB and 1 GiB, about 20 KiB per file, so the 1 GiB one has
# 50,000 files; random contents, made with the git CLI as a witness) three
# runs of each of:
#   first  a new named instance (--disk-size 4G), the checkout cache of
#          its commit removed first (what a new commit costs)
#   warm   a new named instance on a commit another instance already used
#   resume the same named instance again (its disk and mirror kept)
#   next   a new named instance on the next commit (an empty commit made
#          on the repository's HEAD: its checkout links every file from
#          the cache of the commit before)
# The time is from ksb-run's exec to the first line the guest command
# prints (`echo started', read on the host by a timestamping reader),
# and the CPU time QEMU and ksb-run used until then (the steadier figure
# when the machine is shared: a TCG guest's work is QEMU's CPU, the
# host's checkout is ksb-run's).  Medians of KSB_BENCH_RUNS (default 3)
# runs, in seconds, as WALL/CPU.
#   tests/bench/start_repo.sh [SIZE...]   sizes: empty 10M 200M 1G
#                                         (default all)
#   KSB_BENCH_REPOS=DIR keeps the generated repositories between runs.
#   KSB_BENCH_OTHER=DIR also runs the ksb-run of another built tree (e.g.
#   a worktree of main), alternating with this one run by run, so both see
#   the same load; its row is marked `other'.
#   KSB_BENCH_READS=1 also times, after each size, the first reads in a
#   new instance: one file, `git status' twice (the first looks every file
#   up in the lazy tree, the second finds them cached), `find' of the tree.
# ksb-run runs with -v: after each size, the medians of its start-time
# breakdown (vmrunner/boottime.c: host phases, the guest's stages) for
# this tree's first starts and resumes.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
command -v qemu-system-x86_64 >/dev/null || ksb_skip "needs qemu-system-x86_64"
command -v git >/dev/null || ksb_skip "needs git"
command -v python3 >/dev/null || ksb_skip "needs python3 (repository generator)"
ksb_kernel
ksb_env
ksb_gateway

sizes=${*:-empty 10M 200M 1G}
R=${KSB_BENCH_REPOS:-$T/repos}
mkdir -p "$R"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$T/gitconfig \
	GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b.invalid \
	GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b.invalid

# gen NAME FILES: a repository of FILES files of 20 KiB (+-4 KiB), in
# directories of 500, one commit.
gen() {
	local d=$R/$1
	[ -d "$d/.git" ] && return 0
	rm -rf "$d"
	mkdir -p "$d"
	python3 - "$d" "$2" <<-'PY'
	import os, random, sys
	d, n = sys.argv[1], int(sys.argv[2])
	rnd = random.Random(16)
	for i in range(n):
	    sub = os.path.join(d, "d%03d" % (i // 500))
	    os.makedirs(sub, exist_ok=True)
	    with open(os.path.join(sub, "f%05d.bin" % i), "wb") as f:
	        f.write(os.urandom(20480 + rnd.randint(-4096, 4096)))
	PY
	git -C "$d" init -q
	git -C "$d" -c core.compression=0 -c core.looseCompression=0 add -A
	git -C "$d" -c gc.auto=0 commit -qm "bench $1"
	git -C "$d" -c pack.window=0 -c pack.compression=0 repack -adq
}

# one TREE DIR NAME: seconds from exec to the guest's first line.
one() {
	local dir=$2 name=$3
	( cd "$dir" && exec python3 - "$1/ksb-run" "$T" "$GW" "$name" <<-'PY'
	import os, subprocess, sys, time
	run, t, gw, name = sys.argv[1:5]
	argv = ["timeout", "-k", "10", "900", "ip", "netns", "exec", gw, run,
	        "-f", t + "/ksb.conf", "--state-dir", t + "/state",
	        "--name", name, "--disk-size", "4G", "-v", "--", "echo",
	        "started"]
	t0 = time.monotonic()
	p = subprocess.Popen(argv, stdout=subprocess.PIPE,
	                     stderr=open(t + "/last.err", "wb"))
	first = None
	for line in p.stdout:
	    if first is None and line.strip() == b"started":
	        first = time.monotonic() - t0
	        # CPU seconds so far of QEMU and ksb-run (the steadier figure
	        # on a shared machine): their pids from the instance's state.
	        cpu = 0.0
	        st = open(t + "/state/instances/" + name + "/state").read()
	        for k in ("pid=", "qemu_pid="):
	            pid = [l[len(k):] for l in st.split("\n") if l.startswith(k)][0]
	            try:
	                f = open("/proc/%s/stat" % pid).read()
	            except OSError:
	                cpu = float("nan")
	                break
	            f = f.rsplit(")", 1)[1].split()
	            cpu += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
	rc = p.wait()
	if first is None or rc != 0:
	    sys.stderr.write("%s: exit %d, no start; see %s/run.err\n"
	                     % (name, rc, t))
	print("%.2f %.2f" % (first, cpu) if first is not None and rc == 0
	      else "fail fail")
	PY
	)
}

# run TREE DIR NAME KIND K I: one, its result appended to $T/KIND$K and
# its breakdown's rows ("label|seconds") kept in $T/rows.KIND$K.I.
run() {
	one "$1" "$2" "$3" >> "$T/$4$5"
	cat "$T/last.err" >> "$T/run.err"
	sed -n '/start time/,/QEMU CPU time/p' "$T/last.err" |
		sed -n 's/^ksb-run:  *\(.*[^ ]\)  *\([0-9.-]*\) s$/\1|\2/p' \
		> "$T/rows.$4$5.$6"
}

# stages KIND: the median of each breakdown row over each tree's runs.
stages() {
	local label r k
	printf '  %s, median breakdown (s): %s\n' "$1" \
		"$([ -n "${KSB_BENCH_OTHER:-}" ] && echo "this, other" || echo this)"
	for r in $(seq 1 "$runs"); do cut -d'|' -f1 "$T/rows.${1}1.$r"; done |
		awk '!seen[$0]++' | while read -r label; do
		printf '    %-40s' "$label"
		for k in $(seq 1 "$(echo $trees | wc -w)"); do
			printf ' %6s' "$(for r in $(seq 1 "$runs"); do
				awk -F'|' -v l="$label" '$1 == l { print $2; exit }' \
					"$T/rows.${1}$k.$r"
			done | sort -g |
				awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')"
		done
		echo
	done
}

# reads DIR NAME: the first reads of a new instance (KSB_BENCH_READS),
# in milliseconds of the guest's clock.
reads() {
	( cd "$1" && timeout -k 10 900 ip netns exec "$GW" \
		"$KSB_BUILDDIR/ksb-run" -f "$T/ksb.conf" --state-dir "$T/state" \
		--name "$2" --disk-size 4G -- sh -c '
	t() {
		s=$(date +%s%N); "$@" > /dev/null 2>&1; e=$(date +%s%N)
		echo "read: $* $(( (e - s) / 1000000 )) ms"
	}
	t cat d000/f00000.bin; t git status --porcelain
	t git status --porcelain; t find . -type f' ) \
		2>> "$T/run.err" | grep '^read:' | sed 's/^/  /'
	KSBCTL rm "$2" > /dev/null || true
}

# median COL < FILE: the median of column COL (1 wall, 2 CPU).
median() {
	awk -v c="$1" '{print $c}' | sort -n |
		awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
mcol() { echo "$(median 1 < "$1")/$(median 2 < "$1")"; }
KSBCTL() { "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" "$@"; }
runs=${KSB_BENCH_RUNS:-3}
trees="$KSB_BUILDDIR${KSB_BENCH_OTHER:+ $KSB_BENCH_OTHER}"

printf '%-8s %-6s %12s %12s %12s %12s   (wall/CPU s)\n' size tree first \
	warm resume next
for s in $sizes; do
	case $s in
	empty) dir=$R/empty; mkdir -p "$dir" ;;
	10M) gen 10M 500; dir=$R/10M ;;
	200M) gen 200M 10000; dir=$R/200M ;;
	1G) gen 1G 50000; dir=$R/1G ;;
	*) ksb_fail "unknown size $s" ;;
	esac
	l=$(echo "$s" | tr A-Z a-z)
	k=0
	for tree in $trees; do
		k=$((k + 1))
		: > "$T/first$k"; : > "$T/warm$k"; : > "$T/resume$k"
		: > "$T/next$k"
	done
	for i in $(seq 1 "$runs"); do
		k=0
		for tree in $trees; do
			k=$((k + 1))
			rm -rf "$T/state/checkouts"
			run "$tree" "$dir" "b$k$l-$i" first "$k" "$i"
			run "$tree" "$dir" "w$k$l-$i" warm "$k" "$i"
			run "$tree" "$dir" "b$k$l-$i" resume "$k" "$i"
			# The next commit (an empty one: every file linked
			# from the cache of the one before).
			[ "$s" = empty ] ||
				git -C "$dir" commit -q --allow-empty -m "next $i"
			run "$tree" "$dir" "n$k$l-$i" next "$k" "$i"
			KSBCTL rm "b$k$l-$i" >/dev/null || tail -n 5 "$T/run.err"
			KSBCTL rm "w$k$l-$i" >/dev/null || true
			KSBCTL rm "n$k$l-$i" >/dev/null || true
		done
	done
	k=0
	for tree in $trees; do
		k=$((k + 1))
		printf '%-8s %-6s %12s %12s %12s %12s\n' "$s" \
			"$([ "$k" = 1 ] && echo this || echo other)" \
			"$(mcol "$T/first$k")" "$(mcol "$T/warm$k")" \
			"$(mcol "$T/resume$k")" "$(mcol "$T/next$k")"
		echo "  runs: $(tr '\n' , < "$T/first$k") / $(tr '\n' , < "$T/warm$k")" \
			"/ $(tr '\n' , < "$T/resume$k") / $(tr '\n' , < "$T/next$k")"
	done
	stages first
	stages resume
	[ "${KSB_BENCH_READS:-0}" != 1 ] || [ "$s" = empty ] || reads "$dir" "r$l"
done
