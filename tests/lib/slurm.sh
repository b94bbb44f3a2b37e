# A throw-away one-node Slurm cluster in a scratch directory, for the launch suites
# (source it from bash). Adapted from shared/reference/mpi-env.sh (slurm_up) and
# mpi-slurm.md section 6; copied here so that tests do not depend on ../shared.
#
#   slurm_up DIR [CPUS]   start munged, slurmctld and slurmd with everything under DIR;
#                         exports SLURM_CONF. On failure prints the logs and returns 1.
#   slurm_down            cancel jobs, stop the daemons (scontrol shutdown, then by pid),
#                         stop munged. Safe to call twice and from an EXIT trap.
#   slurm_logs            the tail of every daemon log (for a failure message).
#   slurm_job STATE LIMIT SBATCH_ARGS...  sbatch --parsable, then polls scontrol every
#                         0.2 s until the job leaves PENDING/RUNNING/COMPLETING (sbatch
#                         --wait polls slowly, 2-10 s late); writes `scontrol show job -o`
#                         to STATE. Past LIMIT seconds it cancels the job and returns 1.
#   slurm_up_hosts DIR N [CPUS]  the same over the simulated hosts of tests/lib/netns.sh
#                         (after netns_up): slurmctld and slurmd h1 in host 1, slurmd hI in
#                         host I. Clients must run in a host: netns_in_host 1 sbatch ...
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

# _slurm_munge_up DIR: a private munged on DIR/munge/sock.
_slurm_munge_up() {
    local dir=$1
    mkdir -p "$dir"/{state,log,munge} || return 1
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
}

# _slurm_conf DIR CTLD_HOST CTLD_ADDR SUFFIX: slurm.conf without the node lines. SUFFIX
# ("" or "/%n") makes spool, TmpFS and slurmd's pid and log per node.
_slurm_conf() {
    local dir=$1 host=$2 addr=$3 sfx=$4 ctld_port slurmd_port
    ctld_port=$(_slurm_free_port) && slurmd_port=$(_slurm_free_port) || {
        echo "slurm_up: no free port"; return 1; }
    [ "$ctld_port" = "$slurmd_port" ] && slurmd_port=$((ctld_port + 1))
    cat <<EOC
# written by tests/lib/slurm.sh: a throw-away cluster, everything under $dir
ClusterName=plaitci
SlurmctldHost=$host($addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/sock
MailProg=/bin/true
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool$sfx
TmpFS=$dir/tmp$sfx
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd${sfx:+.%n}.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd${sfx:+.%n}.log
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
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOC
}

_slurm_check_installed() {
    local i
    for i in slurmctld slurmd srun sbatch squeue scontrol sinfo munged; do
        command -v "$i" >/dev/null || [ -x "/usr/sbin/$i" ] ||
            { echo "slurm_up: $i is not installed (run scripts/setup.sh)"; return 1; }
    done
}

slurm_up() {
    local dir=$1 cpus=${2:-8} i n
    n=$(env -u OMP_NUM_THREADS nproc)
    [ "$cpus" -lt "$n" ] && cpus=$n
    _slurm_check_installed || return 1
    SLURM_DIR=$dir
    mkdir -p "$dir"/{spool,tmp} && _slurm_munge_up "$dir" || return 1
    { _slurm_conf "$dir" localhost 127.0.0.1 "" &&
        echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN"
    } >"$dir/slurm.conf" || return 1
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

slurm_job() {
    local statefile=$1 limit=$2 jid state deadline run=(); shift 2
    [ "$_SLURM_HOSTS" -gt 0 ] && run=(netns_in_host 1)
    rm -f "$statefile"
    jid=$("${run[@]}" timeout 30 sbatch --parsable "$@" 2>&1) || { echo "sbatch failed: $jid"; return 1; }
    jid=${jid%%;*}
    [[ $jid =~ ^[0-9]+$ ]] || { echo "sbatch --parsable printed '$jid'"; return 1; }
    echo "job $jid submitted"
    deadline=$((SECONDS + limit))
    while :; do
        state=$("${run[@]}" timeout 10 scontrol show job -o "$jid" 2>/dev/null | grep -oE 'JobState=[A-Z_]+')
        case ${state#JobState=} in
            PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED | "") ;;
            *) break ;;
        esac
        if [ $SECONDS -ge $deadline ]; then
            echo "job $jid not finished after $limit s ($state): cancelling"
            "${run[@]}" timeout 10 scancel "$jid"
            "${run[@]}" timeout 10 scontrol show job "$jid"
            slurm_logs
            return 1
        fi
        sleep 0.2
    done
    "${run[@]}" timeout 10 scontrol show job -o "$jid" >"$statefile"
    echo "job $jid: $state"
}

# Multi-node: the daemons run in the namespaces of tests/lib/netns.sh (source it first).
# Per-node spool and TmpFS: with a shared one, pmix fails ("spmix_appdir_...: File exists").
_SLURM_HOSTS=0
slurm_up_hosts() {
    local dir=$1 n=${2:-2} cpus=${3:-2} i
    _slurm_check_installed || return 1
    SLURM_DIR=$dir
    _SLURM_HOSTS=$n
    for i in $(seq 1 "$n"); do mkdir -p "$dir/spool/h$i" "$dir/tmp/h$i" || return 1; done
    _slurm_munge_up "$dir" || return 1
    { _slurm_conf "$dir" h1 "$NETNS_NET.1" "/%n" &&
        for i in $(seq 1 "$n"); do
            echo "NodeName=h$i NodeAddr=$NETNS_NET.$i CPUs=$cpus RealMemory=4000 State=UNKNOWN"
        done
    } >"$dir/slurm.conf" || return 1
    export SLURM_CONF=$dir/slurm.conf
    netns_in_host 1 slurmctld -f "$SLURM_CONF" || { echo "slurm_up_hosts: slurmctld failed"; slurm_logs; return 1; }
    for i in $(seq 1 "$n"); do
        netns_in_host "$i" slurmd -f "$SLURM_CONF" -N "h$i" ||
            { echo "slurm_up_hosts: slurmd h$i failed"; slurm_logs; return 1; }
    done
    for i in $(seq 1 100); do
        [ "$(netns_in_host 1 timeout 5 sinfo -h -N -o %T 2>/dev/null | grep -cx idle)" = "$n" ] && return 0
        sleep 0.2
    done
    echo "slurm_up_hosts: not all $n nodes idle in 20 s"
    netns_in_host 1 timeout 5 sinfo -N 2>&1
    slurm_logs
    return 1
}

slurm_down() {
    [ -n "$SLURM_DIR" ] || return 0
    local p i jobs f pids="" run=()
    [ "$_SLURM_HOSTS" -gt 0 ] && run=(netns_in_host 1)
    # The daemons' pids, read before shutdown: they remove their pid files before exiting.
    for f in "$SLURM_DIR"/slurmctld.pid "$SLURM_DIR"/slurmd*.pid; do
        [ -f "$f" ] && pids="$pids $(_slurm_pid "$(basename "$f" .pid)")"
    done
    if [ -n "$(_slurm_pid slurmctld)" ]; then
        jobs=$("${run[@]}" timeout 5 squeue -h -o %i 2>/dev/null)
        [ -n "$jobs" ] && "${run[@]}" timeout 5 scancel $jobs 2>/dev/null
        "${run[@]}" timeout 10 scontrol shutdown >/dev/null 2>&1
    fi
    # Wait for them to exit (up to 10 s), then kill what is left by its pid.
    for i in $(seq 1 100); do
        p=
        for f in $pids; do kill -0 "$f" 2>/dev/null && p=$f; done
        [ -z "$p" ] && break
        sleep 0.1
    done
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    if [ -n "$_slurm_munged_pid" ] && kill -0 "$_slurm_munged_pid" 2>/dev/null; then
        kill "$_slurm_munged_pid"
        for i in $(seq 1 20); do kill -0 "$_slurm_munged_pid" 2>/dev/null || break; sleep 0.1; done
    fi
    _slurm_munged_pid=
    _SLURM_HOSTS=0
    SLURM_DIR=
}
