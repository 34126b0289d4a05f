"""Seed 004's profiling demo, ported to opcore.

Trains the seed's small MLP (10 -> 5 -> 5 -> 2) for EPOCHS steps with the
opcore ReLU (examples/relu/, built here with opcore.custom_op.load) inside
opcore.profiler.profile, with the named blocks model_build, loss_backward
and optimizer_step, and a step marker per iteration (the seed's
xm.mark_step()).

    python examples/profiler/demo.py [--logdir logs] [--profile-type trace|operator]
                                     [--ms-duration 15000] [--multicore] [--torch]

--torch also runs torch.profiler and puts PyTorch's own operators (the
Linear layers' addmm, the loss, autograd, the optimizer) on the same
timeline as opcore's kernels.

See README.md beside this file for opening what it writes.
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import opcore.custom_op
import opcore.profiler as profiler

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RELU = os.path.join(REPO, "examples", "relu")

# Global constants
EPOCHS = 10


def load_relu(multicore, build_directory):
    """Build (cached) and load the ReLU ops -> torch.ops.my_ops."""
    variant = "multicore" if multicore else "elementwise"
    os.makedirs(build_directory, exist_ok=True)
    opcore.custom_op.load(
        name="relu",
        compute_srcs=[os.path.join(RELU, variant, "relu.c")],
        shape_srcs=[os.path.join(RELU, "shape.c")],
        build_directory=build_directory,
        multicore=multicore,
    )
    return torch.ops.my_ops


class Relu(torch.autograd.Function):
    """forward and backward are opcore operators."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.ops.my_ops.relu_forward(x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return torch.ops.my_ops.relu_backward(grad, x)


# Declare 3-layer MLP Model
class MLP(nn.Module):
    def __init__(self, input_size=10, output_size=2, layers=(5, 5)):
        super().__init__()
        self.fc1 = nn.Linear(input_size, layers[0])
        self.fc2 = nn.Linear(layers[0], layers[1])
        self.fc3 = nn.Linear(layers[1], output_size)

    def forward(self, x):
        x = Relu.apply(self.fc1(x))
        x = Relu.apply(self.fc2(x))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logdir", default="logs")
    ap.add_argument("--profile-type", default="trace", choices=["trace", "operator"])
    ap.add_argument("--ms-duration", type=float, default=15000)
    ap.add_argument("--run-name", default=None)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--multicore", action="store_true", help="use the multicore ReLU kernel")
    ap.add_argument("--torch", action="store_true",
                    help="also record PyTorch's operators (torch.profiler) on the same timeline")
    ap.add_argument("--build-directory", default=os.path.join(REPO, "build", "profiler_demo"))
    args = ap.parse_args(argv)

    # Fix the random number generator seeds for reproducibility
    torch.manual_seed(0)

    # Start the profiler context-manager
    with profiler.profile(logdir=args.logdir, profile_type=args.profile_type,
                          ms_duration=args.ms_duration, run_name=args.run_name, torch=args.torch) as prof:
        # the ReLU library is built inside the profile, so the build shows too
        load_relu(args.multicore, args.build_directory)
        model = MLP()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = torch.nn.NLLLoss()

        # start training loop
        print('----------Training ---------------')
        model.train()
        for epoch in range(args.epochs):
            profiler.step(epoch)  # the seed's xm.mark_step()
            optimizer.zero_grad()
            train_x = torch.randn(1, 10)
            train_label = torch.tensor([1])

            with profiler.trace("model_build"):
                loss = loss_fn(model(train_x), train_label)
            with profiler.trace("loss_backward"):
                loss.backward()
            with profiler.trace("optimizer_step"):
                optimizer.step()

    print('----------End Training ---------------')
    print(f"Perfetto (https://ui.perfetto.dev, Open trace file): {prof.trace_path}")
    print(f"xprof:        xprof server --logdir {prof.logdir}   (run {prof.run_name}; `pip install xprof`, "
          "2.24 or later; or `pip install tensorboard xprof` and `tensorboard --logdir` the same folder)")
    print(f"HTML report:  {prof.html_path}")
    print(f"Summary:      {prof.summary_json_path}, {prof.summary_csv_path}")
    return prof


if __name__ == '__main__':
    main()
