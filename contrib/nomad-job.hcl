# contrib/nomad-job.hcl: a Nomad batch job that is one ksb-run per task
# (ksb-run(1), BATCH JOBS), the contract contrib/slurm-job.sh keeps under
# Slurm (tests/e2e/slurm.sh).  NOT RUN: written out, not tested here.
#
# One gateway per client node (ksb-gatewayd.service); the exec driver
# runs the task as root in the node's network namespace, with the
# client's chroot_env extended by /etc/ksb, /var/lib/ksb, /var/cache/ksb,
# /run/ksb, /dev and the project repository (or use raw_exec).  The
# instance name carries the job and allocation, so the audit names them;
# the guest's memory is the task's less 160 MiB for QEMU; the exit code
# is the agent turn's outcome (--exit-after-turn); kill_timeout is the
# grace between SIGTERM (ksb-run's graceful stop) and SIGKILL; the host
# pushes sandbox/<name> to the results repository.
job "ksb-task" {
  type = "batch"

  group "task" {
    count = 4

    task "ksb-run" {
      driver       = "exec"
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args = ["-c", <<-SH
          name=job-$(echo "$NOMAD_JOB_ID" | tr -c 'A-Za-z0-9\n' -)-$NOMAD_ALLOC_INDEX
          # SIGTERM reaches this shell only: forwarded, then wait again.
          trap 't=1; kill -TERM "$pid" 2>/dev/null' TERM
          ksb-run --name "$name" --memory $((NOMAD_MEMORY_LIMIT - 160)) \
            --repo /srv/proj --push-to /srv/results.git --profile claude \
            --agent claude --agent-mode headless --exit-after-turn \
            --prompt 'Fix the failing test, commit, git push origin sandbox/'"$name" \
            < /dev/null &
          pid=$! rc=125 t=1
          while [ "$t" = 1 ]; do t=0; wait "$pid"; st=$?; [ "$st" = 127 ] || rc=$st; done
          ksbctl rm "$name"
          exit $rc
          SH
        ]
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
