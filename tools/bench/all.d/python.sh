# From Python: ckpt.Checkpointer and DCP through ckpt.torch beside torch.save,
# safetensors and DCP's FileSystemWriter (tools/bench/torch-vs-ckpt.py, the
# test environment's python): sourced by tools/bench-all.sh.
py=${CKPT_PY:-$(cd "$here/.." && pwd)/.venv/bin/python}
full=("$py" "$here/bench/torch-vs-ckpt.py" --dir "$dir" --size 1G --tensors 64 --iters 3 --bench-rows)
smoke=("$py" "$here/bench/torch-vs-ckpt.py" --dir "$dir" --size 4M --tensors 4 --iters 1 --only ckpt,dcp-ckpt
       --bench-rows)
