# free-port.sh, sourced by the bench peers' scripts: free_port picks a
# loopback port nothing listens on.
#
# The port comes from below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range), so that no outgoing connection's local
# port takes it between this check and the peer's bind: a connect probe
# cannot see such a port, and the peer then fails to bind. It stays below
# 20000 too: internal/freeport hands out 20000-31999 to the processes that
# lock its blocks, and a peer started here would take a port of a block
# a test holds.
free_port() {
	local low=32768 high=60999 from=10000 to p
	if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
		read -r low high </proc/sys/net/ipv4/ip_local_port_range
	fi
	to=$((low < 20000 ? low : 20000))
	if [ "$low" -lt 11024 ]; then
		# The ephemeral range starts low: take ports above it instead.
		from=$((high + 1)) to=65536
	fi
	for _ in $(seq 1 100); do
		p=$((from + RANDOM % (to - from)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "$(basename "$0"): no free port found" >&2
	return 1
}
