# Simulated hosts for multi-host MPI tests (source it from bash): network namespaces
# joined by veth pairs to a bridge, and an ssh stand-in that runs a command "on" a host.
# Adapted from shared/reference/mpi-env.sh (netns_up, mpi_run_hosts) and mpi-slurm.md 5;
# copied so that tests do not depend on ../shared. Needs root and iproute2.
#
#   netns_up DIR NHOSTS [SLOTS]  hosts h1..hN = namespaces ${NETNS_PREFIX}1..N, each with an
#                                interface mpinet0 at $NETNS_NET.i/24, plugged into bridge
#                                br0 in namespace ${NETNS_PREFIX}sw. Writes DIR/nsrsh (the
#                                agent) and DIR/hosts.ompi ("hI slots=SLOTS" lines).
#   netns_down                   deletes this run's namespaces (and with them the veths).
#   netns_bytes I                "RX TX" byte counters of host I's mpinet0.
#   netns_exec I CMD...          CMD inside host I's namespace.
#
# Namespace names carry this shell's pid (plh<pid>1, plh<pid>sw), so concurrent runs do
# not collide; netns_reap removes namespaces of earlier runs whose shell is gone (a run
# killed with SIGKILL cannot run its trap). The subnet exists only inside the namespaces.
NETNS_PREFIX=plh$$
NETNS_NET=${NETNS_NET:-10.213.77}
NETNS_DIR=

netns_reap() { # namespaces plh<pid>... whose pid is no longer running
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^plh[0-9]+([0-9]|sw)$'); do
        pid=$(sed -E 's/^plh([0-9]+)sw$/\1/; t; s/^plh([0-9]+)[0-9]$/\1/' <<<"$ns")
        [ "$pid" = "$$" ] && continue
        kill -0 "$pid" 2>/dev/null || ip netns del "$ns" 2>/dev/null
    done
}

netns_up() {
    local dir=$1 n=${2:-2} slots=${3:-2} i p=$NETNS_PREFIX
    [ "$n" -le 9 ] || { echo "netns_up: at most 9 hosts"; return 1; }
    command -v ip >/dev/null || { echo "netns_up: ip (iproute2) is not installed"; return 1; }
    NETNS_DIR=$dir
    mkdir -p "$dir" || return 1
    ip netns add ${p}sw && ip -n ${p}sw link add br0 type bridge && ip -n ${p}sw link set br0 up ||
        { echo "netns_up: cannot create the switch namespace ${p}sw"; return 1; }
    for i in $(seq 1 "$n"); do
        ip netns add $p$i && ip link add $p${i}a type veth peer name $p${i}b &&
            ip link set $p${i}a netns $p$i && ip link set $p${i}b netns ${p}sw &&
            ip -n $p$i link set $p${i}a name mpinet0 &&
            ip -n $p$i addr add $NETNS_NET.$i/24 dev mpinet0 &&
            ip -n $p$i link set lo up && ip -n $p$i link set mpinet0 up &&
            ip -n ${p}sw link set $p${i}b master br0 && ip -n ${p}sw link set $p${i}b up ||
            { echo "netns_up: cannot set up host h$i (namespace $p$i)"; return 1; }
    done
    # The ssh stand-in: [options] HOST COMMAND... runs COMMAND in HOST's namespace with its
    # own hostname (unshare --uts), as `ssh HOST COMMAND` would. `ip netns exec` (not
    # nsenter) also mounts the namespace's own /sys/class/net.
    cat >"$dir/nsrsh" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
h=\$1; shift
case "\$h" in h[0-9]*) i=\${h#h};; $NETNS_NET.*) i=\${h##*.};; *) echo "nsrsh: unknown host \$h" >&2; exit 255;; esac
exec ip netns exec $p\$i unshare --uts sh -c "hostname h\$i; \$*"
EOF
    chmod +x "$dir/nsrsh"
    : >"$dir/hosts.ompi"
    for i in $(seq 1 "$n"); do echo "h$i slots=$slots" >>"$dir/hosts.ompi"; done
}

netns_down() {
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NETNS_PREFIX([0-9]|sw)\$"); do
        ip netns del "$ns"
    done
    return 0
}

netns_exec() { local i=$1; shift; ip netns exec "$NETNS_PREFIX$i" "$@"; }

netns_bytes() {
    echo "$(ip netns exec "$NETNS_PREFIX$1" cat /sys/class/net/mpinet0/statistics/rx_bytes)" \
         "$(ip netns exec "$NETNS_PREFIX$1" cat /sys/class/net/mpinet0/statistics/tx_bytes)"
}

# netns_in_host I CMD...: CMD in host I's namespace with hostname hI and, because
# `ip netns exec` remounts /sys, cgroup v1 hierarchies mounted again inside (slurmd dies
# without them: "No filesystem mounted on /sys/fs/cgroup"). The mounts live in the
# private mount namespace of that `ip netns exec`, not on the machine.
netns_in_host() {
    local i=$1; shift
    ip netns exec "$NETNS_PREFIX$i" unshare --uts sh -c '
        hostname "h$0"
        if ! mountpoint -q /sys/fs/cgroup; then
            mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
            for c in cpu cpuacct cpuset memory devices freezer pids; do
                mkdir -p /sys/fs/cgroup/$c; mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c 2>/dev/null
            done
            mkdir -p /sys/fs/cgroup/systemd
            mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
        fi
        exec "$@"' "$i" "$@"
}
