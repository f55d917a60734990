# Shared by the benchmark scripts (tools/bench*.sh): sourced after the
# script sets `bench_name`. log/die print to stderr under that name;
# to_bytes turns "512M"/"1G"/"64K"/"4096" into bytes.
log() { echo "$bench_name: $*" >&2; }
die() { log "$*"; exit 1; }

to_bytes() {
	local s=$1 n u
	n=${s%[KkMmGg]}
	u=${s#"$n"}
	case "$u" in
	"") echo "$n" ;;
	[Kk]) echo $((n << 10)) ;;
	[Mm]) echo $((n << 20)) ;;
	[Gg]) echo $((n << 30)) ;;
	esac
}

# Prints the report, and writes it to $2 too when that is set.
emit_report() {
	echo "$1"
	if [ -n "$2" ]; then
		printf '%s\n' "$1" >"$2"
		log "report written to $2"
	fi
}
