# A throw-away one-node Slurm cluster in a scratch directory, for the launch suites
# (source it from bash). Adapted from shared/reference/mpi-env.sh (slurm_up) and
# mpi-slurm.md section 6; copied here so that tests do not depend on ../shared.
#
#   slurm_up DIR [CPUS]   start munged, slurmctld and slurmd with everything under DIR;
#                         exports SLURM_CONF. On failure prints the logs and returns 1.
#   slurm_down            cancel jobs, stop the daemons (scontrol shutdown, then by pid),
#                         stop munged. Safe to call twice and from an EXIT trap.
#   slurm_logs            the tail of every daemon log (for a failure message).
#
# Isolation from anything else on the machine (other test runs, a real Slurm):
#   - a private munged with its own socket (DIR/munge/sock, AuthInfo=socket=...),
#     so the system's /run/munge is neither needed nor touched;
#   - slurmctld and slurmd ports picked free at start-up, not 6817/6818;
#   - state, spool, TmpFS (pmix's spmix_appdir_*), pid and log files under DIR.
# The node declares CPUs=max(CPUS, nproc) with SlurmdParameters=config_overrides: a
# job asking for more tasks than the machine has cores must start (oversubscribed)
# instead of pending forever with "Requested partition configuration not available now".
# Needs root and the packages slurmctld slurmd slurm-client munge (scripts/setup.sh).

SLURM_DIR=
_slurm_munged_pid=

# _slurm_free_port: a TCP port nobody listens on (checked with ss).
_slurm_free_port() {
    local p i
    for i in $(seq 1 50); do
        p=$((20000 + RANDOM % 20000))
        [ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
    done
    return 1
}

# _slurm_pid NAME: the pid in DIR/NAME.pid if that process is alive.
_slurm_pid() {
    local f=$SLURM_DIR/$1.pid p
    [ -f "$f" ] || return 1
    p=$(cat "$f" 2>/dev/null)
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

slurm_logs() {
    local f
    for f in "$SLURM_DIR"/log/*.log "$SLURM_DIR"/munge/munged.log; do
        [ -f "$f" ] || continue
        echo "--- $f"
        tail -n 25 "$f"
    done
}

slurm_up() {
    local dir=$1 cpus=${2:-8} ctld_port slurmd_port i
    local n; n=$(nproc)
    [ "$cpus" -lt "$n" ] && cpus=$n
    for i in slurmctld slurmd srun sbatch squeue scontrol sinfo munged; do
        command -v "$i" >/dev/null || [ -x "/usr/sbin/$i" ] ||
            { echo "slurm_up: $i is not installed (run scripts/setup.sh)"; return 1; }
    done
    SLURM_DIR=$dir
    mkdir -p "$dir"/{state,spool,log,tmp,munge} || return 1
    # munged runs as user munge: it must reach DIR/munge (mktemp -d makes 0700 parents;
    # adding search permission only, never removing anything).
    chmod go+x "$dir" "$(dirname "$dir")"
    chown munge:munge "$dir/munge" && chmod 711 "$dir/munge"
    runuser -u munge -- /usr/sbin/munged -S "$dir/munge/sock" --pid-file="$dir/munge/munged.pid" \
        --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" ||
        { echo "slurm_up: munged did not start"; slurm_logs; return 1; }
    _slurm_munged_pid=$(cat "$dir/munge/munged.pid")
    munge -S "$dir/munge/sock" -n | unmunge -S "$dir/munge/sock" >/dev/null ||
        { echo "slurm_up: munge round trip failed"; slurm_logs; return 1; }

    ctld_port=$(_slurm_free_port) && slurmd_port=$(_slurm_free_port) || {
        echo "slurm_up: no free port"; return 1; }
    [ "$ctld_port" = "$slurmd_port" ] && slurmd_port=$((ctld_port + 1))
    cat >"$dir/slurm.conf" <<EOF
# written by tests/lib/slurm.sh: a one-node cluster, everything under $dir
ClusterName=plaitci
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/sock
MailProg=/bin/true
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
KillOnBadExit=1
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -f "$SLURM_CONF" || { echo "slurm_up: slurmctld failed"; slurm_logs; return 1; }
    slurmd -f "$SLURM_CONF" -N localhost || { echo "slurm_up: slurmd failed"; slurm_logs; return 1; }
    for i in $(seq 1 100); do
        timeout 5 sinfo -h -o %T 2>/dev/null | grep -qx idle && return 0
        sleep 0.1
    done
    echo "slurm_up: the node did not become idle in 10 s"
    timeout 5 sinfo 2>&1
    slurm_logs
    return 1
}

slurm_down() {
    [ -n "$SLURM_DIR" ] || return 0
    local p i jobs
    if [ -n "$(_slurm_pid slurmctld)" ]; then
        jobs=$(timeout 5 squeue -h -o %i 2>/dev/null)
        [ -n "$jobs" ] && timeout 5 scancel $jobs 2>/dev/null
        timeout 10 scontrol shutdown >/dev/null 2>&1
    fi
    # Wait for both daemons (up to 5 s), then kill what is left by its pid.
    for i in $(seq 1 50); do
        [ -z "$(_slurm_pid slurmctld)$(_slurm_pid slurmd)" ] && break
        sleep 0.1
    done
    for p in $(_slurm_pid slurmctld) $(_slurm_pid slurmd); do kill -9 "$p" 2>/dev/null; done
    if [ -n "$_slurm_munged_pid" ] && kill -0 "$_slurm_munged_pid" 2>/dev/null; then
        kill "$_slurm_munged_pid"
        for i in $(seq 1 20); do kill -0 "$_slurm_munged_pid" 2>/dev/null || break; sleep 0.1; done
    fi
    _slurm_munged_pid=
    SLURM_DIR=
}
