# The rs:K+M peer scheme (tools/bench-ec.sh): sourced by tools/bench-all.sh.
full=("$here/bench-ec.sh" --size 256M --k 8 --m 2 --iters 3)
smoke=("$here/bench-ec.sh" --size 8M --k 8 --m 2 --iters 1)
