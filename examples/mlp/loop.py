"""The training, evaluation and inference loops shared by train_cpu.py,
train.py, inference.py, demo.py and the bench. They follow the seeds'
scripts: fixed-order batches, SGD, NLLLoss, WARMUP_STEPS steps at the start
of each epoch left out of the timing, throughput measured on the last epoch.
"""
import argparse
import json
import os
import sys
import time

import torch

import data

EPOCHS = 4
WARMUP_STEPS = 2
BATCH_SIZE = 32
LR = 0.01
SEED = 0


class Progress:
    """A tiny progress bar on stderr, redrawn at most every 0.2 s so it costs
    nothing measurable. Off when stderr is not a terminal (unless forced)."""

    def __init__(self, total, desc="", enabled=None, width=30):
        self.total, self.desc, self.width = total, desc, width
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.n, self.t0, self.last = 0, time.perf_counter(), 0.0
        self.postfix = ""

    def update(self, n=1, postfix=None):
        self.n += n
        if postfix is not None:
            self.postfix = postfix
        if self.enabled:
            now = time.perf_counter()
            if now - self.last >= 0.2 or self.n >= self.total:
                self.last = now
                self._draw(now)

    def _draw(self, now):
        frac = min(self.n / self.total, 1.0) if self.total else 1.0
        fill = int(frac * self.width)
        rate = self.n / max(now - self.t0, 1e-9)
        sys.stderr.write(f"\r{self.desc} |{'#' * fill}{'.' * (self.width - fill)}| "
                         f"{self.n}/{self.total} [{rate:7.1f} it/s] {self.postfix}\x1b[K")
        sys.stderr.flush()

    def close(self):
        if self.enabled:
            self._draw(time.perf_counter())
            sys.stderr.write("\n")
            sys.stderr.flush()


def make_optimizer(params, lr=LR, momentum=0.0, optimizer="torch"):
    """torch.optim.SGD, or 'opcore': the same SGD as one fused opcore op
    (fused_sgd.FusedSGD, examples/ops' nn_ops::sgd_momentum_)."""
    if optimizer == "opcore":
        from fused_sgd import FusedSGD

        return FusedSGD(params, lr=lr, momentum=momentum)
    if optimizer != "torch":
        raise ValueError(f"unknown optimizer {optimizer!r} (torch or opcore)")
    return torch.optim.SGD(params, lr=lr, momentum=momentum)


def train(model, batches, epochs=EPOCHS, lr=LR, warmup=WARMUP_STEPS, max_steps=None,
          progress=None, record_losses=False, desc="train", momentum=0.0, optimizer="torch"):
    """Train `model` in place. Returns a dict: throughput (iter/s of the last
    epoch, warm-up steps excluded, as the seeds compute it), final_loss,
    steps, seconds (whole run), losses (every step's loss when record_losses).
    max_steps caps the steps of each epoch (for tests and quick runs);
    optimizer/momentum pick the SGD (see make_optimizer)."""
    optimizer = make_optimizer(model.parameters(), lr, momentum, optimizer)
    loss_fn = torch.nn.NLLLoss()
    steps_per_epoch = len(batches) if max_steps is None else min(max_steps, len(batches))
    if steps_per_epoch <= warmup:
        raise ValueError(f"need more than {warmup} steps per epoch to time anything "
                         f"(have {steps_per_epoch})")
    losses = [] if record_losses else None
    model.train()
    t_all = time.perf_counter()
    for epoch in range(epochs):
        bar = Progress(steps_per_epoch, f"{desc} epoch {epoch + 1}/{epochs}", progress)
        start = time.perf_counter()
        for idx, (x, y) in enumerate(batches):
            if idx >= steps_per_epoch:
                break
            optimizer.zero_grad()
            output = model(x)
            loss = loss_fn(output, y)
            loss.backward()
            optimizer.step()
            if record_losses:
                losses.append(loss.detach().clone())
            if idx < warmup:  # skip warm-up iterations
                start = time.perf_counter()
            if bar.enabled:
                bar.update(1, f"loss {loss.item():.4f}")
        elapsed = time.perf_counter() - start
        bar.close()
    interval = idx - warmup  # as in the seeds: steps after the warm-up
    return dict(throughput=interval / elapsed, final_loss=float(loss.detach()),
                steps=epochs * steps_per_epoch, seconds=time.perf_counter() - t_all,
                losses=losses)


def run_interleaved(models, batches, epochs=EPOCHS, block=50, lr=LR, warmup=WARMUP_STEPS,
                    max_steps=None, train=True, progress=None, desc="interleaved"):
    """Train (or, with train=False, run inference with) several models on the
    same batches, taking turns every `block` steps, the order rotating each
    turn. Each model's time is summed over its own turns, so a burst of
    other load on the machine slows every model alike and the ratios between
    them stay fair. Every model sees exactly the batches it would see alone,
    so the results (losses, weights) are those of separate runs.

    Returns {name: {throughput, final_loss, steps, turn_seconds}}: throughput
    is the last epoch's iter/s without each epoch's first `warmup` steps, as
    in train(); turn_seconds is the time of each of the last epoch's turns
    that had timed steps, in the same order for every model (entry i is the
    same chunk of batches for all), so the models' times can be paired turn
    by turn. Its sum is the time the throughput is computed from."""
    names = list(models)
    opt = {n: torch.optim.SGD(models[n].parameters(), lr=lr) for n in names} if train else {}
    loss_fn = torch.nn.NLLLoss()
    all_batches = list(batches)
    if max_steps is not None:
        all_batches = all_batches[:max_steps]
    if len(all_batches) <= warmup:
        raise ValueError(f"need more than {warmup} steps per epoch (have {len(all_batches)})")
    for m in models.values():
        m.train(train)
    out = {n: dict(final_loss=None, steps=0) for n in names}
    bar = Progress(epochs * len(all_batches) * len(names), desc, progress)
    ctx = torch.enable_grad() if train else torch.no_grad()
    with ctx:
        for epoch in range(epochs):
            turns = {n: [] for n in names}  # only the last epoch's are kept
            for turn, lo in enumerate(range(0, len(all_batches), block)):
                chunk = all_batches[lo:lo + block]
                k = turn % len(names)
                for n in names[k:] + names[:k]:
                    model = models[n]
                    # the first `warmup` steps of the epoch run untimed
                    skip = max(0, min(warmup - lo, len(chunk)))
                    for i, (x, y) in enumerate(chunk):
                        if i == skip:
                            t0 = time.perf_counter()
                        if train:
                            opt[n].zero_grad()
                            loss = loss_fn(model(x), y)
                            loss.backward()
                            opt[n].step()
                            out[n]["final_loss"] = loss.detach()
                        else:
                            model(x)
                    if skip < len(chunk):
                        turns[n].append(time.perf_counter() - t0)
                    out[n]["steps"] += len(chunk)
                    bar.update(len(chunk))
    bar.close()
    for n in names:
        out[n]["turn_seconds"] = turns[n]
        out[n]["throughput"] = (len(all_batches) - warmup) / sum(turns[n])
        if out[n]["final_loss"] is not None:
            out[n]["final_loss"] = float(out[n]["final_loss"])
    return out


@torch.no_grad()
def evaluate(model, batches):
    """Top-1 accuracy on `batches`: (accuracy in [0, 1], correct, total)."""
    model.eval()
    correct = total = 0
    for x, y in batches:
        correct += int((model(x).argmax(dim=1) == y).sum())
        total += len(y)
    return correct / total, correct, total


@torch.no_grad()
def infer(model, batches, epochs=EPOCHS, warmup=WARMUP_STEPS, max_steps=None,
          progress=None, desc="inference"):
    """The seeds' inference loop: forward passes only, throughput of the last
    epoch with the warm-up steps excluded."""
    model.eval()
    steps_per_epoch = len(batches) if max_steps is None else min(max_steps, len(batches))
    if steps_per_epoch <= warmup:
        raise ValueError(f"need more than {warmup} steps per epoch (have {steps_per_epoch})")
    for epoch in range(epochs):
        bar = Progress(steps_per_epoch, f"{desc} epoch {epoch + 1}/{epochs}", progress)
        start = time.perf_counter()
        for idx, (x, _) in enumerate(batches):
            if idx >= steps_per_epoch:
                break
            model(x)
            if idx < warmup:
                start = time.perf_counter()
            bar.update(1)
        elapsed = time.perf_counter() - start
        bar.close()
    return dict(throughput=(idx - warmup) / elapsed, steps=epochs * steps_per_epoch)


def common_args(description, epochs=EPOCHS):
    ap = argparse.ArgumentParser(description=description)
    data.add_data_args(ap)
    ap.add_argument("--epochs", type=int, default=epochs, help=f"epochs (default {epochs})")
    ap.add_argument("--max-steps", type=int, default=None,
                    help="stop each epoch after this many steps (quick runs, tests)")
    ap.add_argument("--seed", type=int, default=SEED, help=f"torch.manual_seed (default {SEED})")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: torch's choice)")
    ap.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                    default=None, help="no progress bars")
    ap.add_argument("--progress", dest="progress", action="store_const", const=True,
                    help="progress bars even when stderr is not a terminal")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    ap.add_argument("--optimizer", choices=("torch", "opcore"), default="torch",
                    help="torch.optim.SGD, or the same SGD as one fused opcore op (examples/ops)")
    ap.add_argument("--momentum", type=float, default=0.0, help="SGD momentum (default 0)")
    return ap


def setup(args):
    if args.threads:
        torch.set_num_threads(args.threads)


def load_or_exit(data_dir, split, limit=None):
    try:
        return data.batches(data_dir, split, BATCH_SIZE, limit)
    except data.DatasetError as e:
        raise SystemExit(f"error: {e}") from None


def write_json(path, obj):
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(obj, f, indent=2)


def run_training(args, relu=None, label="baseline", extra=None):
    """What train_cpu.py and train.py do: train with the seeds' settings,
    print the seeds' lines, then the test-set accuracy."""
    from model import MLP
    setup(args)
    train_b = load_or_exit(args.data_dir, "train")
    test_b = load_or_exit(args.data_dir, "test")
    torch.manual_seed(args.seed)
    model = MLP(relu=relu)
    print("----------Training ---------------", flush=True)
    r = train(model, train_b, epochs=args.epochs, max_steps=args.max_steps,
              progress=args.progress, desc=label, momentum=args.momentum, optimizer=args.optimizer)
    print("Train throughput (iter/sec): {}".format(r["throughput"]))
    print("Final loss is {:0.4f}".format(r["final_loss"]))
    if getattr(args, "save", None):
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        torch.save({"state_dict": model.state_dict()}, args.save)
    print("----------End Training ---------------")
    acc, correct, total = evaluate(model, test_b)
    print("Test accuracy: {:.2f}% ({}/{})".format(100 * acc, correct, total), flush=True)
    res = dict(label=label, throughput=r["throughput"], final_loss=r["final_loss"],
               accuracy=acc, epochs=args.epochs, steps=r["steps"], seconds=r["seconds"],
               threads=torch.get_num_threads(), optimizer=args.optimizer, momentum=args.momentum,
               **(extra or {}))
    write_json(args.json, res)
    return res
