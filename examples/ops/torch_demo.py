"""Train a small classifier built from the nn_ops example library in PyTorch:
linear (a Tensor? bias) -> layer_norm (three results, three gradients) ->
ReLU -> linear, on Fashion-MNIST, with the fused SGD-with-momentum op as the
optimizer -- next to the same model written with torch's own ops and
torch.optim.SGD, on the same batches from the same initial weights.

    python examples/ops/torch_demo.py [--steps 300] [--data-dir DIR] [--compile]

Prints both models' losses as they train and their test accuracy; the two
agree to float rounding (kernels sum in another order than torch's).
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "mlp"))
import nn_ops  # noqa: E402


class Net(torch.nn.Module):
    """784 -> 128 -> layer norm -> ReLU -> 10; `ops` picks opcore's or torch's."""

    def __init__(self, opcore_ops):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 128)
        self.norm = torch.nn.LayerNorm(128)
        self.fc2 = torch.nn.Linear(128, 10)
        self.opcore = opcore_ops

    def forward(self, x):
        if self.opcore:
            ops = torch.ops.nn_ops
            h = ops.linear(x, self.fc1.weight, self.fc1.bias)
            h = ops.layer_norm(h, [128], self.norm.weight, self.norm.bias)[0]
            return F.log_softmax(ops.linear(torch.relu(h), self.fc2.weight, self.fc2.bias), dim=1)
        h = F.layer_norm(F.linear(x, self.fc1.weight, self.fc1.bias), [128], self.norm.weight, self.norm.bias)
        return F.log_softmax(F.linear(torch.relu(h), self.fc2.weight, self.fc2.bias), dim=1)


def train(args, batches, test):
    nn_ops.load()
    torch.manual_seed(0)
    mine, ref = Net(True), Net(False)
    ref.load_state_dict(mine.state_dict())
    from fused_sgd import FusedSGD

    opt_mine = FusedSGD(mine.parameters(), lr=args.lr, momentum=0.9)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=args.lr, momentum=0.9)
    step_mine = torch.compile(mine) if args.compile else mine
    losses = []
    for step, (x, y) in enumerate(list(batches)[:args.steps]):
        pair = []
        for model, opt in ((step_mine, opt_mine), (ref, opt_ref)):
            opt.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            opt.step()
            pair.append(loss.item())
        losses.append(pair)
        if step % args.every == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss opcore {pair[0]:.4f}  torch {pair[1]:.4f}", flush=True)
    acc = []
    with torch.no_grad():
        for model in (mine, ref):
            correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in test)
            acc.append(correct / sum(len(y) for _, y in test))
    print(f"test accuracy: opcore {acc[0]:.4f}  torch {acc[1]:.4f}")
    return losses, acc


def main(argv=None):
    import data

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data.add_data_args(ap)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--every", type=int, default=50, help="print every N steps")
    ap.add_argument("--compile", action="store_true", help="train the opcore model under torch.compile")
    args = ap.parse_args(argv)
    try:
        batches = data.batches(args.data_dir, "train", 64, limit=args.steps * 64)
        test = data.batches(args.data_dir, "test", 500, limit=2000)
    except data.DatasetError as e:
        raise SystemExit(f"error: {e}") from None
    return train(args, batches, test)


if __name__ == "__main__":
    main()
