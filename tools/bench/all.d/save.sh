# `ckpt save FILE` streamed through the staging pool, against fio's overwrite
# of an allocated file, and its peak RSS (tools/bench-save.sh;
# docs/benchmarks.md, "ckpt save FILE").
full=("$here/bench-save.sh" --dir "$dir" --size 1G --iters 5 --fio-reps 4)
smoke=("$here/bench-save.sh" --dir "$dir" --size 16M --iters 1 --fio-reps 1 --no-cold --no-gc)
