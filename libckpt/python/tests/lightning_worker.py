"""One rank of test_lightning.py (under torchrun: Lightning's DDP, gloo,
CPU): a small regression model trained for --epochs epochs of 4 steps,
checkpointed through ckpt.lightning.CheckpointIO by a ModelCheckpoint at
every epoch's end (the newest 2 kept by their epoch, plus last.ckpt),
resumed with ckpt_path="last" (--ref-root: first an uninterrupted run of
its own). --kill-at S: the rank --kill-rank kills
itself (-9) at the end of global step S. At the end, rank 0 writes every
parameter to --out and prints what the checkpoint folder holds."""
import argparse
import os
import signal
import sys
import time

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

import ckpt
import ckpt.lightning


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=0.02)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)]


class KillAt(pl.Callback):
    """Kills this rank at the end of a step, once a checkpoint is there to
    resume from: the first epoch's save is asynchronous, and on a loaded
    machine it may still be in flight a few steps later (a kill then
    rightly resumes from scratch, which would test nothing)."""

    def __init__(self, step, rank, ckpts):
        self.step, self.rank, self.last = step, rank, os.path.join(ckpts, "last.ckpt")

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step and trainer.global_rank == self.rank:
            deadline = time.monotonic() + 120
            while not os.path.exists(self.last) and time.monotonic() < deadline:
                time.sleep(0.05)
            print(f"rank {trainer.global_rank}: killed at step {self.step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


class Started(pl.Callback):
    def on_train_start(self, trainer, *args):
        print(f"rank {trainer.global_rank}: training from step {trainer.global_step}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--kill-at", type=int)
    p.add_argument("--kill-rank", type=int, default=0)
    p.add_argument("--ref-root", help="first an uninterrupted run there (its parameters to --ref-out)")
    p.add_argument("--ref-out")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.ref_root:  # the same process trains twice: one launch less for the test
        fit(a.ref_root, a.ref_out, a.epochs, None, 0)
    return fit(a.root, a.out, a.epochs, a.kill_at, a.kill_rank)


def fit(root, out, epochs, kill_at, kill_rank):
    pl.seed_everything(7, verbose=False)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(32, 8, generator=g)
    y = x.sum(1, keepdim=True).sin()
    data = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)  # 4 steps an epoch on each of 2 ranks
    io = ckpt.lightning.CheckpointIO(root=os.path.join(root, "data"), job="lt", chunk_bytes="64K")
    mc = pl.callbacks.ModelCheckpoint(dirpath=os.path.join(root, "ckpts"), filename="{epoch}-{step}",
                                      monitor="epoch", mode="max", save_top_k=2, save_last=True)
    callbacks = [mc, Started()] + ([KillAt(kill_at, kill_rank, os.path.join(root, "ckpts"))] if kill_at is not None else [])
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=epochs, plugins=[io],
                         callbacks=callbacks, logger=False, enable_progress_bar=False, enable_model_summary=False,
                         deterministic=True)
    model = Model()
    trainer.fit(model, data, ckpt_path="last")
    if trainer.global_rank == 0:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, out)
        files = sorted(os.listdir(os.path.join(root, "ckpts")))
        with ckpt.Checkpointer("lt", os.path.join(root, "data"), rank=0, world_size=1) as ck:
            vs = [(v.version, v.state) for v in ck.versions()]
        print(f"rank 0: {root}: done at step {trainer.global_step}; pointers {files}; versions {vs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
