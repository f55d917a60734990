#!/usr/bin/env python3
"""s3-boto3.py - boto3's transfer manager (s3transfer) as tools/bench-s3.sh
runs it: every file at once through one TransferManager, its defaults
unless told (10 threads, 8 MiB parts), the way a user of boto3 moves a
checkpoint's shards.

    s3-boto3.py up   ENDPOINT BUCKET PREFIX FILE...        FILE -> PREFIX/basename
    s3-boto3.py down ENDPOINT BUCKET PREFIX DIR NAME...     PREFIX/NAME -> DIR/NAME
                                                            (DIR "-": thrown away)
    [--threads N] [--part BYTES]

Keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; region us-east-1.
"""
import argparse
import os
import sys

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from s3transfer.manager import TransferManager


class Null:
    """A seekable sink: downloads measured without a disk behind them."""
    def write(self, b):
        return len(b)

    def seek(self, *a):
        return 0

    def tell(self):
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op", choices=("up", "down"))
    ap.add_argument("endpoint")
    ap.add_argument("bucket")
    ap.add_argument("prefix")
    ap.add_argument("rest", nargs="+")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--part", type=int)
    a = ap.parse_args()
    kw = {}
    if a.threads:
        kw["max_concurrency"] = a.threads
    if a.part:
        kw["multipart_chunksize"] = a.part
        kw["multipart_threshold"] = a.part
    cfg = TransferConfig(**kw)
    # as many pooled connections as transfer threads (botocore's default, 10,
    # would make more threads wait for a connection)
    client = boto3.client("s3", endpoint_url=a.endpoint, region_name="us-east-1",
                          config=Config(max_pool_connections=max(10, cfg.max_request_concurrency),
                                        s3={"addressing_style": "path"}))
    futures = []
    with TransferManager(client, cfg) as tm:
        if a.op == "up":
            for f in a.rest:
                futures.append(tm.upload(f, a.bucket, a.prefix + os.path.basename(f)))
        else:
            d, names = a.rest[0], a.rest[1:]
            sinks = []
            for n in names:
                if d == "-":
                    sink = Null()
                else:
                    sink = open(os.path.join(d, n), "wb")
                sinks.append(sink)
                futures.append(tm.download(a.bucket, a.prefix + n, sink))
        for f in futures:
            f.result()
    return 0


if __name__ == "__main__":
    sys.exit(main())
