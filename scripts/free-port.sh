# free-port.sh, sourced by the bench peers' scripts: free_port picks a
# loopback port nothing listens on.
free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "$(basename "$0"): no free port found" >&2
	return 1
}
