#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests: munge, slurmctld and
# slurmd started directly (no systemd), all state under DIR.
#   scripts/slurm-cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm-cluster.sh stop DIR    # stops the daemons it started, leaves none behind
# Needs root and Debian's slurmctld slurmd slurm-client munge (scripts/install-deps.sh).
set -euo pipefail
cmd=${1:?usage: slurm-cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: slurm-cluster.sh start|stop DIR}")
conf=$dir/slurm.conf

stop() {
  for d in slurmd slurmctld; do
    [[ -f $dir/$d.pid ]] && kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
  done
  [[ -f $dir/munged.pid ]] && kill "$(cat "$dir/munged.pid")" 2>/dev/null || true
  for _ in $(seq 50); do  # up to 5 s for them to exit
    alive=0
    for d in slurmd slurmctld munged; do
      [[ -f $dir/$d.pid ]] && kill -0 "$(cat "$dir/$d.pid")" 2>/dev/null && alive=1
    done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for d in slurmd slurmctld munged; do
    [[ -f $dir/$d.pid ]] && kill -9 "$(cat "$dir/$d.pid")" 2>/dev/null || true
    rm -f "$dir/$d.pid"
  done
}

if [[ $cmd == stop ]]; then stop; exit 0; fi
[[ $cmd == start ]] || { echo "slurm-cluster.sh: unknown command '$cmd' (start | stop)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "slurm-cluster.sh: needs root (the daemons run as root and munge)" >&2; exit 1; }
for b in munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || [[ -x /usr/sbin/$b ]] || { echo "slurm-cluster.sh: $b is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chown munge:munge "$dir/munge"
# munge: its own key and socket under DIR, run as the munge user.
if [[ ! -f $dir/munge/munge.key ]]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$dir/munge/munge.key"; chmod 400 "$dir/munge/munge.key"
fi
# The socket under DIR too, so that a munged of the system (or another test
# cluster) is left alone.
socket=$dir/munge/munge.socket
runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munge.seed" --socket="$socket" --force
cp "$dir/munge/munged.pid" "$dir/munged.pid"
host=$(hostname -s)
cpus=$(nproc)
# Two free ports (a Slurm already on this machine keeps 6817/6818).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ctld_port=$(( 20000 + RANDOM % 20000 ))
while ! port_free $ctld_port || ! port_free $((ctld_port + 1)); do ctld_port=$(( 20000 + RANDOM % 20000 )); done
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
cat > "$conf" <<CONF
ClusterName=kvlens-test
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=300
KillWait=5
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$conf
/usr/sbin/slurmctld -f "$conf"
/usr/sbin/slurmd -f "$conf"
for _ in $(seq 100); do  # up to 10 s for the node to come up
  state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
  [[ $state == idle* ]] && { echo "export SLURM_CONF=$conf"; exit 0; }
  sleep 0.1
done
echo "slurm-cluster.sh: the node did not come up (state '${state:-none}'); see $dir/slurmctld.log and $dir/slurmd.log" >&2
stop
exit 1
