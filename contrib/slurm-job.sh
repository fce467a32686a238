#!/bin/bash
# contrib/slurm-job.sh: a Slurm batch script that is one ksb-run (ksb-run(1),
# BATCH JOBS; run by tests/e2e/slurm.sh).  Submit it with the command:
#
#   sbatch --array=1-8 --mem=1G -c 1 \
#       --export=ALL,KSB_REPO=/srv/proj,KSB_PUSH_TO=/srv/results.git \
#       contrib/slurm-job.sh -- make check
#
# or, an agent's turn (KSB_AGENT: agent mode, headless by default):
#
#   sbatch --array=1-8 --mem=1200 -c 1 \
#       --export=ALL,KSB_REPO=/srv/proj,KSB_PUSH_TO=/srv/results.git,KSB_AGENT=claude \
#       contrib/slurm-job.sh -- "Fix issue 12, commit, push sandbox/\$KSB_INSTANCE."
#
# The instance is named job-<array job>-<task> (or job-<job>-0), so the
# gateway's audit rows name the job; the guest gets the job's memory less
# 160 MiB for QEMU (SLURM_MEM_PER_NODE, MiB); the job's exit status is the
# command's, or with KSB_AGENT the turn's outcome (ksb-run
# --exit-after-turn: 0 done, N a headless turn's exit status, 1 another
# end), 125 ksb-run's own failure or a --push-to that failed; the
# guest's sandbox/<name> is pushed by the host to KSB_PUSH_TO.  On scancel
# (SIGTERM, SIGKILL after KillWait) ksb-run stops the guest cleanly and
# unregisters; this script then removes the named instance's directory.
#
# Environment: KSB_REPO (the project repository, required with
# KSB_PUSH_TO), KSB_PUSH_TO (a path or URL), KSB_PROFILE (default
# "default"), KSB_CONF (default /etc/ksb/ksb.conf), KSB_AGENT (an agent
# command: the operands are its prompt, text or @file), KSB_AGENT_MODE
# (default headless), KSB_RUN_ARGS (more ksb-run arguments, split on
# blanks), KSB_NETNS (run ksb-run in that network namespace, where the
# gateway is; tests only).
set -u
[ "${1:-}" = -- ] && shift
[ "$#" -gt 0 ] || { echo "slurm-job: no command (sbatch ... slurm-job.sh -- CMD...)" >&2; exit 2; }
name=job-${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:?not under Slurm}}-${SLURM_ARRAY_TASK_ID:-0}
mem=$((${SLURM_MEM_PER_NODE:-672} - 160))
conf=${KSB_CONF:-/etc/ksb/ksb.conf}
args=(-f "$conf" --name "$name" --memory "$mem" --profile "${KSB_PROFILE:-default}")
[ -n "${KSB_REPO:-}" ] && args+=(--repo "$KSB_REPO")
[ -n "${KSB_PUSH_TO:-}" ] && args+=(--push-to "$KSB_PUSH_TO")
[ -n "${SLURM_CPUS_PER_TASK:-}" ] && args+=(--cpus "$SLURM_CPUS_PER_TASK")
read -ra extra <<< "${KSB_RUN_ARGS:-}"
args+=("${extra[@]}")
# An agent's turn: the operands are the prompt; ksb-run stops the guest
# when the turn ends and exits with its outcome.
if [ -n "${KSB_AGENT:-}" ]; then
	args+=(--agent "$KSB_AGENT" --agent-mode "${KSB_AGENT_MODE:-headless}"
		--prompt "$*" --exit-after-turn)
	set --
else
	set -- -- "$@"
fi
run=(ksb-run)
[ -n "${KSB_NETNS:-}" ] && run=(ip netns exec "$KSB_NETNS" "${run[@]}")
# scancel's SIGTERM reaches this script only under proctrack/cgroup (the
# batch step's task), every process of the job under proctrack/linuxproc:
# the script forwards it to ksb-run (which takes the same signal twice
# within 1 s as one stop), waits for its status, then cleans up.  QEMU
# ignores the SIGTERM (ksb-run(1), SIGNALS); SIGKILL after KillWait ends
# everything.
termed=0
trap 'termed=1; echo "slurm-job: $name: SIGTERM: stopping ksb-run" >&2; kill -TERM "$pid" 2>/dev/null' TERM
start=$(date +%s%N)
"${run[@]}" "${args[@]}" "$@" < /dev/null &
pid=$!
rc=125
# wait returns early (>128) when the trap ran: wait again for the status.
termed=1
while [ "$termed" = 1 ]; do
	termed=0
	wait "$pid"
	st=$?
	[ "$st" = 127 ] || rc=$st
done
ksbctl -f "$conf" rm "$name" >&2 || [ "$rc" != 0 ] || rc=125
echo "slurm-job: $name: exit $rc in $((($(date +%s%N) - start) / 1000000)) ms" >&2
exit "$rc"
