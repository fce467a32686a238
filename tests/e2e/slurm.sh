#!/bin/bash
# e2e: ksb-run as a batch job under a real scheduler, Slurm (issue 33).
# One controller and one node on loopback, configured by the test in its
# temp dir (slurm.conf, a munge key and a munged on the test's own socket),
# started and stopped by the test.  A job array of three agent tasks: the
# real Claude Code (contrib/fetch-agents.sh) in headless agent mode, one
# turn each (ksb-run --agent --prompt --exit-after-turn), against
# tests/e2e/fakeapi.py as the model API through the gateway, its key a
# credential of the gateway (the guest holds a placeholder).  The fake's
# scripted turn makes the agent commit in the guest and push to its
# mirror; the host pushes each task's sandbox/<name> to one central bare
# repository (--push-to).  Task 3's tool prints "FAIL: 400", which the
# fake answers with a 400: the agent's turn fails and the job's exit code
# is the turn's outcome (1), its branch pushed all the same.  The
# instance names come from SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID and
# the gateway's audit rows carry them.  A job's overhead is measured on a
# plain command (`ksb-run -- sh -c ...', the same by hand).  Then a
# running task is cancelled (scancel: SIGTERM, SIGKILL after KillWait):
# the guest stops cleanly (the job script forwards the SIGTERM, QEMU
# ignores a job-wide one, ksb-run stops the guest) and no tap, lease,
# instance directory or QEMU is left.  The jobs run in cgroups
# (proctrack/cgroup, task/cgroup, ConstrainRAMSpace on cgroup v1): the
# running task's QEMU is in the job's memory cgroup, charged there, and
# the guest (--memory from --mem) fits the limit with no OOM kill.
# Accounting: slurmdbd on a MariaDB of the test's own (data dir, socket,
# port), so `sacct' shows each task's state, exit code and MaxRSS
# (jobacct_gather/linux, QEMU included; the running step's from sstat);
# the job completion log (jobcomp/filetxt) says the same.  Prints the figures: the array's time, a task's
# time under Slurm and the same ksb-run by hand.  Root, npm's registry
# or the agents in the cache; skips (77) naming what is missing.
set -eu
. "$(dirname "$0")/../lib.sh"

ksb_need_root
ksb_need qemu-system-x86_64 git slurmctld slurmd sbatch squeue sstat scontrol scancel munged mungekey
ksb_need slurmdbd sacct sacctmgr mariadbd mariadb-install-db mariadb
ksb_need python3 /usr/bin/git
ksb_need_built ksb-run ksb-guest-init ksb-gatewayd ksbctl/ksbctl
CACHE=${KSB_AGENTS_CACHE:-/var/cache/ksb/agents}
ksb_fetch_agents "$CACHE"
ksb_kernel
ksb_env

# The model API (tests/e2e/fakeapi.py) and its key, a credential of the
# gateway of a real key's format and length (108 characters).
ksb_fakeapi
KSBT_ANTHROPIC_KEY=sk-ant-api03-$(openssl rand -base64 96 | tr -dc 'A-Za-z0-9' | cut -c1-93)AA
export KSBT_ANTHROPIC_KEY
cat >> "$T/policy.d/test.policy" <<-'POL'
credential anthropic {
    host api.anthropic.com
    header x-api-key
    source env KSBT_ANTHROPIC_KEY
    secret ANTHROPIC_API_KEY
    placeholder-prefix sk-ant-api03-
}
profile creds extends default {
    credential anthropic
}
POL
printf 'upstream-ca-file = %s\n' "$T/api/ca.pem" >> "$T/ksb.conf"
ksb_gateway

ksb_host_repo # $P, one commit on main
C=$T/central.git
git init -q --bare "$C"

# ---- munge and Slurm on loopback ---------------------------------------------------
S=$T/slurm
mkdir -p "$S/state" "$S/spool" "$S/munge"
# The jobs' cgroups (cgroup v1: proctrack/cgroup, task/cgroup with
# ConstrainRAMSpace): Slurm's tree is <mountpoint>/<controller>/slurm, so
# each controller's ksbt-<pid> child is bound at $S/cg/<controller>, the
# mountpoint Slurm is given; a second run of the test has its own.  Where
# the host cannot (cgroup v2 only, no memory controller), the test runs
# with proctrack/linuxproc and says the cgroup checks are skipped (as it
# does with KSB_SLURM_LINUXPROC=1, where scancel's SIGTERM goes to every
# process of the job, not the batch script alone).
CG= cg_why=
cg_setup() {
	local c
	[ -z "${KSB_SLURM_LINUXPROC:-}" ] ||
		{ cg_why="KSB_SLURM_LINUXPROC is set: proctrack/linuxproc"; return 1; }
	[ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] ||
		{ cg_why="/sys/fs/cgroup is not cgroup v1 (Slurm's cgroup/v2 needs systemd's delegation here)"; return 1; }
	for c in memory freezer cpuset; do
		[ -e "/sys/fs/cgroup/$c/cgroup.procs" ] || { cg_why="no cgroup v1 $c controller at /sys/fs/cgroup/$c"; return 1; }
		mkdir -p "$S/cg/$c" && mkdir "/sys/fs/cgroup/$c/ksbt-$$" &&
			mount --bind "/sys/fs/cgroup/$c/ksbt-$$" "$S/cg/$c" ||
			{ cg_why="cannot make and bind /sys/fs/cgroup/$c/ksbt-$$"; return 1; }
	done
	cat /sys/fs/cgroup/cpuset/cpuset.cpus > "$S/cg/cpuset/cpuset.cpus" &&
		cat /sys/fs/cgroup/cpuset/cpuset.mems > "$S/cg/cpuset/cpuset.mems" ||
		{ cg_why="cannot set cpuset.cpus/mems of /sys/fs/cgroup/cpuset/ksbt-$$"; return 1; }
	cat > "$S/cgroup.conf" <<-CONF
	CgroupPlugin=cgroup/v1
	CgroupMountpoint=$S/cg
	CgroupAutomount=no
	ConstrainRAMSpace=yes
	ConstrainSwapSpace=no
	CONF
}
# After stop_slurm: what is left in the test's cgroups (a slurmstepd
# moves itself to the top one as it ends) is the test's: SIGKILL, then
# the tree goes.
cg_left() { find "/sys/fs/cgroup/memory/ksbt-$$" -name cgroup.procs -exec cat {} + 2>/dev/null; }
cg_empty() { [ -z "$(cg_left)" ]; }
cg_cleanup() {
	local c p
	[ -n "$CG" ] || return 0
	for p in $(cg_left); do kill -9 "$p" 2>/dev/null; done
	ksb_until 10 cg_empty
	for c in memory freezer cpuset; do
		mountpoint -q "$S/cg/$c" 2>/dev/null && umount "$S/cg/$c"
		find "/sys/fs/cgroup/$c/ksbt-$$" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}
if cg_setup; then
	CG=1
	echo "# the jobs' cgroups: v1 memory, freezer, cpuset bound at $S/cg"
	ptrack="ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup"
else
	echo "# SKIP (cgroup checks): $cg_why"
	ptrack="ProctrackType=proctrack/linuxproc
TaskPlugin=task/none"
fi
chmod 700 "$S/munge"
mungekey -c -k "$S/munge/munge.key" > /dev/null 2>&1 ||
	ksb_fail "mungekey -c failed"
munged -f --socket="$S/munge/sock" --key-file="$S/munge/munge.key" \
	--pid-file="$S/munge/munged.pid" --log-file="$S/munge/munged.log" \
	--seed-file="$S/munge/seed" > "$S/munge/out" 2>&1 ||
	{ cat "$S/munge/out" "$S/munge/munged.log" 2>/dev/null; ksb_fail "munged did not start"; }
KSB_PIDS="$KSB_PIDS $(cat "$S/munge/munged.pid")"
host=$(hostname -s)
port=$((20000 + $$ % 20000))
cat > "$S/slurm.conf" <<-CONF
ClusterName=ksbt
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
$ptrack
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobCompType=jobcomp/filetxt
JobCompLoc=$S/jobcomp.txt
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((port + 2))
AccountingStoragePass=$S/munge/sock
MpiDefault=none
ReturnToService=2
KillWait=20
SchedulerParameters=defer_batch
NodeName=ksbtnode NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=4000 State=UNKNOWN
PartitionName=ksbt Nodes=ksbtnode Default=YES MaxTime=30 State=UP
CONF
export SLURM_CONF=$S/slurm.conf
slurm_pids() { cat "$S/slurmctld.pid" "$S/slurmd.pid" "$S/slurmdbd.pid" 2>/dev/null; }
no_jobs() { [ -z "$(squeue -h 2>/dev/null)" ]; }
stop_slurm() {
	local p
	scancel -u root 2>/dev/null
	ksb_until 30 no_jobs
	for p in $(slurm_pids); do kill "$p" 2>/dev/null; done
	for p in $(slurm_pids); do ksb_wait_dead "$p" 20 || kill -9 "$p" 2>/dev/null; done
}
# ksb_cleanup exits with the status it finds: the test's, kept.
trap 'rc=$?; set +e; stop_slurm; cg_cleanup; (exit "$rc"); ksb_cleanup' EXIT
# ---- accounting: MariaDB on loopback, slurmdbd -----------------------------------
# The database is the test's: its own data dir, socket and port, root by
# its socket, slurmdbd's user by a password of its own.
DB=$S/db
dbport=$((port + 3))
dbpass=$(openssl rand -hex 16)
mkdir -p "$DB"
mariadb-install-db --no-defaults --datadir="$DB/data" --user=root \
	--auth-root-authentication-method=socket --skip-test-db > "$DB/install.out" 2>&1 ||
	{ tail -n 20 "$DB/install.out"; ksb_fail "mariadb-install-db failed"; }
mariadbd --no-defaults --datadir="$DB/data" --socket="$DB/sock" --port="$dbport" \
	--bind-address=127.0.0.1 --user=root --pid-file="$DB/pid" \
	--log-error="$DB/err.log" --skip-name-resolve --innodb-buffer-pool-size=16M \
	> "$DB/out" 2>&1 &
KSB_PIDS="$KSB_PIDS $!"
db_up() { mariadb --no-defaults --socket="$DB/sock" -u root -e 'SELECT 1' > /dev/null 2>&1; }
ksb_until 60 db_up || { tail -n 20 "$DB/err.log"; ksb_fail "mariadbd did not start"; }
mariadb --no-defaults --socket="$DB/sock" -u root -e "CREATE USER 'slurm'@'127.0.0.1'
	IDENTIFIED BY '$dbpass'; GRANT ALL ON ksbt_acct.* TO 'slurm'@'127.0.0.1';" ||
	ksb_fail "cannot make slurmdbd's database user"
# slurmdbd.conf: next to slurm.conf (SLURM_CONF), 0600, the SlurmUser's.
install -m 600 /dev/stdin "$S/slurmdbd.conf" <<-CONF
AuthType=auth/munge
AuthInfo=socket=$S/munge/sock
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=$((port + 2))
SlurmUser=root
PidFile=$S/slurmdbd.pid
LogFile=$S/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$dbport
StorageUser=slurm
StoragePass=$dbpass
StorageLoc=ksbt_acct
CONF
slurmdbd > "$S/dbd.out" 2>&1 ||
	{ cat "$S/dbd.out" "$S/slurmdbd.log"; ksb_fail "slurmdbd did not start"; }
dbd_up() { sacctmgr -n -P list cluster > /dev/null 2>&1; }
ksb_until 60 dbd_up || { tail -n 20 "$S/slurmdbd.log"; ksb_fail "slurmdbd does not answer"; }
sacctmgr -i add cluster ksbt > "$S/sacctmgr.out" 2>&1 ||
	{ cat "$S/sacctmgr.out"; ksb_fail "sacctmgr add cluster failed"; }
echo "# accounting: mariadbd on 127.0.0.1:$dbport, slurmdbd on 127.0.0.1:$((port + 2))"
slurmctld -f "$S/slurm.conf" -c -i > "$S/ctld.out" 2>&1 ||
	{ cat "$S/ctld.out" "$S/slurmctld.log"; ksb_fail "slurmctld did not start"; }
slurmd -f "$S/slurm.conf" -N ksbtnode > "$S/d.out" 2>&1 ||
	{ cat "$S/d.out" "$S/slurmd.log"; ksb_fail "slurmd did not start"; }
node_up() { scontrol show node ksbtnode 2>/dev/null | grep -Eq 'State=(IDLE|MIXED|ALLOCATED)'; }
ksb_until 60 node_up || { tail -n 20 "$S/slurmctld.log" "$S/slurmd.log"; ksb_fail "the node did not come up"; }
ksb_check "slurmctld and slurmd up, the node idle" node_up

# ---- the array: one agent turn per job (contrib/slurm-job.sh) ----------------------
# The job's environment goes with sbatch (--export=ALL).
export KSB_NETNS=$GW KSB_CONF=$T/ksb.conf KSB_REPO=$P KSB_PUSH_TO=$C \
	PATH=$KSB_BUILDDIR:$KSB_BUILDDIR/ksbctl:$PATH
JOB=$KSB_SRCDIR/contrib/slurm-job.sh
# The fake API runs the RUN: line with the agent's shell tool: a commit,
# pushed to the mirror; task 3's prints the FAIL: line too.
PROMPT='Commit the task file.
RUN: cd ~/work && echo "task $KSB_INSTANCE" > task.txt && git add task.txt && git -c user.name=agent -c user.email=agent@example.invalid commit -qm "$KSB_INSTANCE" && git push -q origin "HEAD:refs/heads/sandbox/$KSB_INSTANCE" && case $KSB_INSTANCE in *-3) printf "FAIL: 400\n" ;; esac; echo pushed'
# Named instances, so that the audit names the job; the job removes its
# instance directory after ksb-run (`ksbctl rm').
t0=$(date +%s%N)
jid=$(KSB_AGENT=/opt/ksb-agents/node_modules/.bin/claude KSB_PROFILE=creds \
	KSB_RUN_ARGS="--ca-file $T/api/ca.pem --share-ro $CACHE:/opt/ksb-agents --disk-size 1G" \
	sbatch --parsable --array=1-3 --mem=1200 -c 1 -o "$S/out-%A-%a.txt" \
	-e "$S/err-%A-%a.txt" "$JOB" -- "$PROMPT") || ksb_fail "sbatch failed"
echo "# array job $jid"
done_jobs() { [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ]; }
ksb_until 600 done_jobs || true
t1=$(date +%s%N)
echo "# array of 3 agent tasks (2 CPUs, TCG): $(((t1 - t0) / 1000000)) ms submit to all done"
ksb_check "the array finished" done_jobs
for i in 1 2 3; do
	grep -v '^$' "$S/err-$jid-$i.txt" 2>/dev/null | sed "s/^/# task $i: /" | tail -n 8
done
# jobcomp/filetxt writes one line per job: JobId, ..., ExitCode=rc:sig.
jc_line() { grep -E "$1" "$S/jobcomp.txt" 2>/dev/null | head -n 1; }
jc_rc() { jc_line "ArrayJobId=$jid ArrayTaskId=$1 " | grep -o " ExitCode=[0-9]*:[0-9]*" | cut -c2-; }
sed 's/^/# jobcomp: /' "$S/jobcomp.txt" 2>/dev/null | cut -c1-400 | head -n 6
KEY_SHA=$(printf %s "$KSBT_ANTHROPIC_KEY" | sha256sum | cut -c1-12)
for i in 1 2 3; do
	want=0; [ "$i" = 3 ] && want=1
	ksb_check "task $i: the turn ended (ksb-run --exit-after-turn)" \
		'grep -q "instance job-$jid-$i: turn 1 ended (exit $want): stopping the guest" "$S/err-$jid-$i.txt"'
	ksb_check "task $i: exit code $want, the turn's outcome, in the job completion log ($(jc_rc $i))" \
		'[ "$(jc_rc $i)" = "ExitCode=$want:0" ]'
	ksb_check "task $i: sandbox/job-$jid-$i in the central repo, the agent's commit, pushed by the host" \
		'git -C "$C" cat-file -p "refs/heads/sandbox/job-$jid-$i:task.txt" 2>/dev/null | grep -qx "task job-$jid-$i"'
	ksb_check "task $i: the audit names it (registrations)" \
		'ksb_sql_is 1 "SELECT count(*) FROM registrations WHERE instance = '"'job-$jid-$i'"'"'
	ksb_check "task $i: the agent reached the model API through the gateway, with the credential" \
		'ksb_sql_is 1 "SELECT count(*) > 0 FROM requests WHERE credential IS NOT NULL AND conn_id IN (SELECT id FROM connections WHERE instance = '"'job-$jid-$i'"' AND host = '"'api.anthropic.com'"')"'
	ksb_check "task $i: the host said it pushed" 'grep -q "instance job-$jid-$i: pushed sandbox/job-$jid-$i" "$S/err-$jid-$i.txt"'
done
echo "# fake API: $(grep -c '"api": "anthropic"' "$T/api.log") Messages requests, $(grep -c '"reply": 400' "$T/api.log") answered 400"
ksb_check "the fake API saw the credential's key, never a placeholder" \
	'grep "\"api\": \"anthropic\"" "$T/api.log" | grep -q "\"sha256\": \"$KEY_SHA\"" &&
	 ! grep "\"api\": \"anthropic\"" "$T/api.log" | grep -v -q "\"sha256\": \"$KEY_SHA\""'
ksb_check "the fake answered task 3's tool result with a 400 (its FAIL: line)" \
	'grep -q "\"reply\": 400" "$T/api.log"'
ksb_check "the central repo has exactly the three branches" \
	'[ "$(git -C "$C" for-each-ref --format=x refs/heads/sandbox | wc -l)" = 3 ]'
# sacct (slurmdbd): each task's state and exit code, its batch step's
# MaxRSS (jobacct_gather/linux: QEMU included), once slurmctld sent them.
acct() { sacct -n -P -j "$jid" --format=JobID,State,ExitCode,MaxRSS 2>/dev/null; }
acct_rss() { # KiB
	acct | awk -F'|' -v id="${jid}_$1.batch" '$1 == id && match($4, /^[0-9.]+[KMG]$/) {
		u = substr($4, length($4)); v = substr($4, 1, length($4) - 1)
		printf "%d\n", v * (u == "K" ? 1 : u == "M" ? 1024 : 1048576) }'
}
acct_all() { local i; for i in 1 2 3; do [ -n "$(acct_rss $i)" ] || return 1; done; }
ksb_until 60 acct_all || true
acct | sed 's/^/# sacct: /'
for i in 1 2 3; do
	want=0 st=COMPLETED; [ "$i" = 3 ] && want=1 st=FAILED
	ksb_check "sacct: task $i $st, exit code $want:0" \
		'acct | grep -qx "${jid}_$i|$st|$want:0|"'
	ksb_check "sacct: task $i's memory, QEMU included ($(acct_rss $i) KiB > 100 MiB)" \
		'[ -n "$(acct_rss $i)" ] && [ "$(acct_rss $i)" -gt 102400 ]'
done

# Plain command jobs from here on.
WORK='cd ~/work && echo "task $KSB_INSTANCE" > task.txt && git add task.txt &&
	git -c user.name=agent -c user.email=agent@example.invalid commit -qm "$KSB_INSTANCE" &&
	git push -q origin "sandbox/$KSB_INSTANCE"'

# ---- a job's overhead over the same ksb-run by hand ------------------------------------
# One job alone (submit to gone from squeue: sbatch --wait polls at
# growing intervals), then the same by hand.
t0=$(date +%s%N)
jidw=$(sbatch --parsable --mem=600 -c 1 -o "$S/out-w.txt" -e "$S/err-w.txt" \
	"$JOB" -- /bin/sh -c "$WORK")
gone_w() { [ -z "$(squeue -h -j "$jidw" 2>/dev/null)" ]; }
ksb_until 300 gone_w || true
t1=$(date +%s%N)
SLURM_JOB_ID=hand SLURM_MEM_PER_NODE=600 "$JOB" -- /bin/sh -c "$WORK" \
	> "$T/hand.out" 2> "$T/hand.err" || true
t2=$(date +%s%N)
job_ms=$(((t1 - t0) / 1000000)) hand_ms=$(((t2 - t1) / 1000000))
echo "# one job: ${job_ms} ms submit to end, ${hand_ms} ms the same by hand ($((job_ms - hand_ms)) ms overhead)"
# Where the overhead goes: the job script's own time (its last line) and
# Slurm's submit, start and end (sacct, whole seconds).
in_ms() { sed -n 's/^slurm-job: .*: exit [0-9]* in \([0-9]*\) ms$/\1/p' "$1" | tail -n 1; }
echo "# one job: the job script ran $(in_ms "$S/err-w.txt") ms (by hand $(in_ms "$T/hand.err") ms); sacct Submit|Start|End: $(sacct -n -P -X -j "$jidw" --format=Submit,Start,End 2>/dev/null)"
ksb_check "the job alone and by hand both pushed" \
	'[ "$(git -C "$C" for-each-ref --format=x refs/heads/sandbox | wc -l)" = 5 ]'

# ---- scancel of a running task ---------------------------------------------------------------
ip netns exec "$GW" nft list sets > "$T/sets.before"
jid2=$(sbatch --parsable --mem=600 -c 1 -o "$S/out-c.txt" -e "$S/err-c.txt" \
	"$JOB" -- /bin/sleep 600)
name2=job-$jid2-0
running() { grep -q "instance $name2: command started" "$S/err-c.txt" 2>/dev/null; }
ksb_until 300 running || true
ksb_check "the task to cancel runs its command" running
qemu_of() { pgrep -f "ksb.id=$name2( |,|$)" > /dev/null; }
ksb_check "its QEMU runs" qemu_of
# QEMU is the job's: the batch step's accounting counts it (sstat reads
# slurmd's jobacct_gather/linux figures of the job's processes).
rss() { sstat -n -P -a -j "$jid2" --format=MaxRSS 2>/dev/null | sed -n 's/^\([0-9]*\)K$/\1/p' | sort -n | tail -n 1; }
have_rss() { [ -n "$(rss)" ] && [ "$(rss)" -gt 102400 ]; }
ksb_until 30 have_rss || true
echo "# the running task's MaxRSS (sstat, QEMU included): $(rss) KiB"
ksb_check "the running task's memory counts QEMU ($(rss) KiB > 100 MiB)" have_rss
# QEMU's memory is charged to the job's cgroup (task/cgroup,
# ConstrainRAMSpace=yes: the limit is --mem), and the guest (--memory:
# the job's less 160 MiB) fits it: no OOM kill in the job's cgroup.
if [ -n "$CG" ]; then
	qpid=$(pgrep -f "ksb.id=$name2( |,|$)" | head -n 1)
	# Slurm's tree: slurm/ or, as Debian builds it, slurm_<node>/.
	jcg=$(ls -d "$S/cg/memory"/slurm*/uid_0/"job_$jid2" 2>/dev/null | head -n 1) || true
	echo "# QEMU ${qpid:-?}: $(grep -E '^[0-9]+:memory:' "/proc/$qpid/cgroup" 2>/dev/null)"
	ksb_check "QEMU is in the job's memory cgroup" \
		'grep -Eq "^[0-9]+:memory:/ksbt-$$/slurm[^/]*/uid_0/job_$jid2/" "/proc/$qpid/cgroup"'
	lim=$(cat "$jcg/memory.limit_in_bytes" 2>/dev/null) || true
	# Its anonymous memory (the guest's RAM, TCG's buffers) is charged
	# where it was touched; file pages (QEMU's binary, the libraries) go
	# to whoever read them first.
	qrss=$(awk '/^RssAnon:/ { print $2 * 1024 }' "/proc/$qpid/status" 2>/dev/null) || true
	use=$(cat "$jcg/memory.usage_in_bytes" 2>/dev/null) || true
	max=$(cat "$jcg/memory.max_usage_in_bytes" 2>/dev/null) || true
	ooms=$(awk '$1 == "oom_kill" { print $2 }' "$jcg/memory.oom_control" 2>/dev/null) || true
	echo "# job cgroup: limit ${lim:-?} B, usage ${use:-?} B, max ${max:-?} B, QEMU RssAnon ${qrss:-?} B, oom_kill ${ooms:-?}"
	ksb_check "the job's memory limit is --mem=600 ($lim B)" '[ "$lim" = $((600 * 1048576)) ]'
	ksb_check "the job's cgroup is charged QEMU's memory (usage $use B >= its RssAnon $qrss B)" \
		'[ -n "$use" ] && [ -n "$qrss" ] && [ "$use" -ge "$qrss" ]'
	ksb_check "the guest fits the job's limit (max $max B <= $lim B, no OOM kill)" \
		'[ -n "$max" ] && [ "$max" -le "$lim" ] && [ "${ooms:-x}" = 0 ]'
else
	echo "# SKIP: QEMU in the job's memory cgroup, the guest under its limit: $cg_why"
fi
scancel "$jid2"
gone() { [ -z "$(squeue -h -j "$jid2" 2>/dev/null)" ] && ! qemu_of; }
ksb_until 60 gone || true
ksb_check "scancel: the job ended, no QEMU left" gone
ksb_check "scancel: no tap left in the gateway's namespace" \
	'[ -z "$(ip -n "$GW" -o link show type tun 2>/dev/null)" ]'
ksb_check "scancel: no lease left (ksbctl list)" \
	'! "$KSB_BUILDDIR/ksbctl/ksbctl" -f "$T/ksb.conf" list 2>/dev/null | grep -q "^$name2 .*running"'
ksb_check "scancel: the gateway unregistered it" \
	'ksb_sql_is 1 "SELECT count(*) FROM unregistrations u JOIN registrations r ON u.reg_id = r.id WHERE r.instance = '"'$name2'"'"'
ksb_check "scancel: the job completion log says CANCELLED" \
	'jc_line "^JobId=$jid2 " | grep -q " JobState=CANCELLED "'
cancelled() { sacct -n -P -X -j "$jid2" --format=JobID,State 2>/dev/null | grep -q "^$jid2|CANCELLED"; }
ksb_until 30 cancelled || true
sacct -n -P -j "$jid2" --format=JobID,State,ExitCode,MaxRSS 2>/dev/null | sed 's/^/# sacct: /'
ksb_check "scancel: sacct says CANCELLED" cancelled
ksb_check "scancel: no set entry left (nft list sets as before the job)" \
	'ip netns exec "$GW" nft list sets > "$T/sets.after" && cmp -s "$T/sets.before" "$T/sets.after" || diff "$T/sets.before" "$T/sets.after"'
ksb_check "scancel: no instance directory left" '[ ! -e "$T/state/instances/$name2" ]'
# The job-wide SIGTERM reached QEMU too, which runs with it blocked: the
# guest stopped its command and powered off (ksb-run's orderly stop).
ksb_check "scancel: ksb-run got the job's SIGTERM" \
	'grep -q "got signal 15: stopping the guest" "$S/err-c.txt"'
ksb_check "scancel: the guest stopped cleanly (its status, its poweroff)" \
	'grep -q "instance $name2: stopped cleanly" "$S/err-c.txt"'
ksb_check "scancel: QEMU did not die of the job's SIGTERM" \
	'! grep -q "terminating on signal" "$S/err-c.txt"'
tail -n 5 "$S/err-c.txt" | sed 's/^/# cancelled: /'
[ "${fails:-0}" = 0 ]
