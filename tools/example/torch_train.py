"""A small character-level transformer language model trained with DDP over
gloo, checkpointed with ckpt: it resumes from the newest committed version
after a kill -9, and on SIGTERM (torchrun, Slurm, Kubernetes) saves the
current step once and exits, so that the relaunch resumes from there.

    torchrun --nproc-per-node 4 tools/example/torch_train.py --root /tmp/ck --steps 200

The text it learns is the project's own documentation (docs/*.md), shipped
in the repository. Batches are a function of (seed, step, rank) alone and
the RNG state is part of the checkpoint, so a resumed run computes exactly
what an uninterrupted one does: the same loss lines, bit for bit, and the
same final parameters and optimizer state (--final writes them).
"""
import argparse
import glob
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import ckpt
import ckpt.torch  # noqa: F401  (tensors in the state)

HERE = os.path.dirname(os.path.abspath(__file__))


def corpus(pattern):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"no text matches {pattern}")
    text = "\n".join(open(f, encoding="utf-8", errors="replace").read() for f in files)
    chars = sorted(set(text))
    idx = {c: i for i, c in enumerate(chars)}
    return torch.tensor([idx[c] for c in text], dtype=torch.long), len(chars)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CharLM(nn.Module):
    def __init__(self, vocab, d=64, heads=4, layers=2, ctx=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def batch(data, step, rank, args):
    """The batch of (step, rank): the same in every run."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 101 + rank)
    starts = torch.randint(0, len(data) - args.ctx - 1, (args.batch,), generator=g)
    x = torch.stack([data[s:s + args.ctx] for s in starts])
    y = torch.stack([data[s + 1:s + args.ctx + 1] for s in starts])
    return x, y


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True, help="checkpoint root")
    p.add_argument("--job", default="charlm")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--text", default=os.path.join(HERE, "..", "..", "docs", "*.md"))
    p.add_argument("--loss-log", help="rank 0 appends 'step N loss X' lines here (else stdout)")
    p.add_argument("--final", help="rank 0 writes the final model and optimizer state here (torch.save)")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep per step (tests)")
    args = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data, vocab = corpus(args.text)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = CharLM(vocab, ctx=args.ctx)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))

    # Rank and world size come from torch.distributed; the rest from the
    # command line or CKPT_* variables.
    ck = ckpt.Checkpointer(args.job, args.root, staging_bytes="16M")
    ck.install_preemption_handlers()   # SIGTERM / SIGUSR1: save this step, then leave
    start = 0
    sd = ck.load()                     # the newest committed version, or None
    if sd is not None:
        model.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optim"])
        sched.load_state_dict(sd["sched"])
        torch.set_rng_state(sd["rng"])
        start = sd["step"]
        if rank == 0:
            print(f"resumed from step {start}", flush=True)
    log = open(args.loss_log, "a") if args.loss_log and rank == 0 else None

    def state(step):
        return {"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
                "rng": torch.get_rng_state(), "step": step}

    # DDP lays its gradient buckets out again after its first iteration,
    # and the layout decides the order in which gloo sums each gradient.
    # One pass that changes nothing (no optimizer step) settles the layout
    # before training, the same way in a fresh and in a resumed run: their
    # gradients are then the same bits.
    x, y = batch(data, 0, rank, args)
    (F.cross_entropy(ddp(x).reshape(-1, vocab), y.reshape(-1)) * 0).backward()
    opt.zero_grad(set_to_none=True)

    handle = None
    for step in range(start + 1, args.steps + 1):
        x, y = batch(data, step, rank, args)
        loss = F.cross_entropy(ddp(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        line = f"step {step} loss {(mean / world).item():.10f}"
        if rank == 0:
            print(line, file=log or sys.stdout, flush=True)
        # A signal reaches the ranks at different moments: they agree on
        # the step to save with one all-reduce of ckpt's answers.
        act = torch.tensor([{"continue": 0, "save": 1, "exit": 2}[ck.step(step)]])
        dist.all_reduce(act, op=dist.ReduceOp.MAX)
        preempted = act.item() > 0
        if preempted or step % args.save_every == 0 or step == args.steps:
            if handle is not None:
                handle.wait()
            handle = ck.save(step, state(step))
        if preempted:
            handle.wait()
            dist.barrier()             # every rank's shard durable: committed
            print(f"rank {rank}: preempted, saved step {step}, exiting", flush=True)
            ck.close()
            dist.destroy_process_group()
            return 0
        if args.step_sleep:
            time.sleep(args.step_sleep)
    if handle is not None:
        handle.wait()
    if rank == 0 and args.final:
        torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, args.final)
    ck.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
