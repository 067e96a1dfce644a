#!/bin/bash
# Runs under `ip netns exec NODE-NETNS`, which gave it a private (slave) mount
# namespace with a fresh /sys. Makes the node's filesystem view — nothing of
# the machine outside the node directory is written — then anchors the mount
# namespace for every process of the node (they join it with nsenter).
# Arguments: the node directory, the node name, the node address.
set -euo pipefail
dir=$1 name=$2 addr=$3
# The cgroup hierarchies, hidden by ip netns exec's /sys remount: PID 1's again.
mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
while read -r _ mnt fstype opts _; do
	case $fstype in
	cgroup)
		o=$(tr ',' '\n' <<<"$opts" | grep -vE '^(rw|ro|relatime|nosuid|nodev|noexec)$' | paste -sd,)
		mkdir -p "$mnt" && mount -t cgroup -o "$o" cgroup "$mnt" ;;
	cgroup2) mkdir -p "$mnt" && mount -t cgroup2 cgroup2 "$mnt" ;;
	esac
done < <(grep -E ' cgroup2? ' /proc/1/mounts)
# A private /run; overlays whose writes land in the node directory.
mount -t tmpfs -o mode=755 yurtdns-run /run
for d in etc var opt usr; do
	mkdir -p "$dir/overlay/$d/upper" "$dir/overlay/$d/work"
	mount -t overlay "yurtdns-$d" -o "lowerdir=/$d,upperdir=$dir/overlay/$d/upper,workdir=$dir/overlay/$d/work" "/$d"
done
# The cluster's state on the node directory's real filesystem.
for d in etc/kubernetes etc/cni/net.d var/lib/kubelet var/lib/etcd var/lib/cni var/log/pods var/log/containers var/log/kubernetes var/lib/openyurt var/lib/yurthub; do
	mkdir -p "$dir/state/${d//\//_}" "/$d" && mount --bind "$dir/state/${d//\//_}" "/$d"
done
mkdir -p /opt/cni/bin /usr/lib/modules && mount --bind /usr/lib/cni /opt/cni/bin
mount --make-rshared /var/lib/kubelet
# The node's own names (hostNetwork pods, the apiserver among them, get a copy
# of /etc/hosts: names of other nodes must come from DNS), with the loopback
# line Debian's installer writes for the hostname (127.0.1.1: the apiserver's
# node proxy then refuses this node by name), and a resolver on the node's
# own address that answers NXDOMAIN for everything, so CoreDNS's forward
# never sends a query off the machine.
rm -f /etc/resolv.conf /etc/hosts
echo "nameserver $addr" >/etc/resolv.conf
printf '127.0.0.1 localhost\n127.0.1.1 %s\n%s %s\n' "$name" "$addr" "$name" >/etc/hosts
echo ready
exec sleep infinity
