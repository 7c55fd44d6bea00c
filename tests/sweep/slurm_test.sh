#!/usr/bin/env bash
# The Slurm back end against a real single-node cluster: a 40-probe needle
# sweep on the bundled model run locally (2 workers) and through
# `sweep submit --slurm` (4 array tasks) gives the same merged cells; one
# array task cancelled mid-run (scancel) leaves its finished probes, and
# submitting again runs only that shard's missing probes. The cluster is
# stopped at the end and no daemon is left behind.
# Usage: slurm_test.sh KVLENS_CLI WORKDIR. Exit 77 (skipped) without root or
# Slurm, unless CI is set: CI installs Slurm, so there it must run.
set -euo pipefail
cli=$(realpath "$1")
work=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../scripts/slurm-cluster.sh

skip() {
  if [[ -n ${CI:-} ]]; then echo "FAIL: $1 (CI installs Slurm and runs as root)"; exit 1; fi
  echo "SKIP: $1"; exit 77
}
[[ $(id -u) == 0 ]] || skip "the test cluster's daemons need root"
[[ -x /usr/sbin/slurmctld && -x /usr/sbin/slurmd && -x /usr/sbin/munged ]] || skip "Slurm is not installed (scripts/install-deps.sh)"

rm -rf "$work" && mkdir -p "$work"
cd "$work"
trap 'bash "$cluster" stop "$work/cluster"' EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }
t0=$(ms)
env=$(bash "$cluster" start "$work/cluster") || { echo "FAIL: the test cluster did not start"; exit 1; }
eval "$env"
echo "cluster up in $(( $(ms) - t0 )) ms"

sweep() {  # NAME: the same grid, its own output folder
  cat > "$1.json" <<JSON
{"format": "kvlens-sweep", "version": 1, "name": "$1", "output": "$1.out", "task": "needle",
 "policies": ["streaming", "h2o", "snapkv"], "budgets": ["25%"],
 "contexts": [192, 256], "depths": [0, 25, 50, 75, 100], "seeds": [1, 2, 3, 4],
 "run": {"threads": 1}, "shards": 4}
JSON
}
fail() { echo "FAIL: $*"; exit 1; }
lines() { [[ -f $1 ]] && grep -c . "$1" || echo 0; }

sweep local; sweep slurm; sweep killed
s=$(ms)
"$cli" sweep run local.json --workers 2 --quiet > local.log
echo "local, 2 workers: $(( $(ms) - s )) ms"
s=$(ms)
"$cli" sweep submit slurm.json --slurm --poll 0.2 --quiet > slurm.log || { cat slurm.log; fail "sweep submit"; }
echo "slurm, 4 array tasks: $(( $(ms) - s )) ms"
grep -q "submitted job" slurm.log || fail "no job submitted: $(cat slurm.log)"
grep -q "160 of 160 cells" slurm.log || fail "the Slurm sweep did not finish every cell: $(cat slurm.log)"
cmp local.out/merged.csv slurm.out/merged.csv || fail "the Slurm sweep's cells differ from the local ones"
[[ $(ls slurm.out/results | wc -l) == 4 ]] || fail "expected 4 shard files, got $(ls slurm.out/results)"

# Cancel one array task mid-run: after its first probe is written, before its last.
out=$("$cli" sweep submit killed.json --slurm --no-wait)
job=$(sed -n 's/^submitted job \([0-9]*\):.*/\1/p' <<< "$out")
[[ -n $job ]] || fail "no job id in: $out"
shard0=killed.out/results/shard-0000-of-0004.jsonl
for _ in $(seq 600); do [[ $(lines $shard0) -ge 1 ]] && break; sleep 0.05; done
scancel "${job}_0"
[[ $(lines $shard0) -ge 1 ]] || fail "shard 0 wrote nothing in 30 s"
for _ in $(seq 600); do [[ -z $(squeue -h -j "$job" -o %T) ]] && break; sleep 0.1; done
[[ -z $(squeue -h -j "$job" -o %T) ]] || fail "job $job is still queued after 60 s"
state=$(scontrol show job "${job}_0" | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p' | head -1)
[[ $state == CANCELLED ]] || fail "array task 0 ended $state, not CANCELLED"
done0=$(lines $shard0)
(( done0 >= 1 && done0 < 10 )) || fail "the cancelled shard holds $done0 of its 10 probes: not cancelled mid-run"
"$cli" sweep status killed.json > status.log
grep -q "; $(( 10 - done0 )) probes missing, 0 failed" status.log || fail "status: $(cat status.log)"
before=$(cat killed.out/results/shard-000[123]-of-0004.jsonl | md5sum)
"$cli" sweep submit killed.json --slurm --poll 0.2 --quiet > resubmit.log || { cat resubmit.log; fail "resubmit"; }
grep -q "1 array task(s) of 4 shards" resubmit.log || fail "the resubmission ran more than the missing shard: $(cat resubmit.log)"
grep -q "^#SBATCH --array=0$" killed.out/slurm/sweep.sbatch || fail "the resubmitted array is not shard 0 alone"
[[ $(lines $shard0) == 10 ]] || fail "shard 0 holds $(lines $shard0) probes after the resubmission, not 10"
[[ $(cat killed.out/results/shard-000[123]-of-0004.jsonl | md5sum) == "$before" ]] || fail "finished shards were run again"
cmp local.out/merged.csv killed.out/merged.csv || fail "the resubmitted sweep's cells differ from the local ones"

bash "$cluster" stop "$work/cluster"
trap - EXIT
for d in slurmctld slurmd munged; do
  pgrep -f "$work/cluster" >/dev/null && fail "a daemon is still running: $(pgrep -af "$work/cluster")"
done
echo "PASS: local and Slurm sweeps agree cell for cell; a cancelled array task resumed to the same cells"
