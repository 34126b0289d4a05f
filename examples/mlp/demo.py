"""`make demo`: opcore's main job in one command.

Builds the opcore ReLU operator (examples/relu/), trains the seeds' MLP with
it on Fashion-MNIST (batch 32, SGD lr 0.01, 4 epochs, 2 warm-up steps), then
trains the torch.relu baseline the same way in the same run, and prints
throughput, final loss and test accuracy of both, and their ratio.

    python examples/mlp/demo.py [--variant elementwise] [--epochs 4] [--data-dir DIR]

Takes about 15 s of training on an idle 2-core machine with the default 4 epochs
and one torch thread (its default here: --threads N to change it).
The two models take turns every 50 steps (see loop.run_interleaved), so the
ratio is fair even when other work shares the machine.
"""
import time

import torch

import loop
import my_ops
from model import MLP


def main(argv=None):
    ap = loop.common_args("opcore demo: train the MLP with the opcore ReLU and the baseline")
    ap.add_argument("--variant", default=my_ops.DEFAULT_VARIANT,
                    choices=[v for v, c in my_ops.VARIANTS.items() if not c["multicore"]],
                    help="ReLU kernel to train with (default element-wise)")
    ap.add_argument("--verbose", action="store_true", help="show the build commands")
    # One torch thread unless asked: the MLP's matmuls (batch 32, 784x512)
    # are too small to gain from more, and on a machine other work shares,
    # torch's default (a thread per CPU) oversubscribes it: measured at load
    # 7-12 on 2 cores, 38 iter/s (14 min) with the default, 19 s with one.
    ap.set_defaults(threads=1)
    args = ap.parse_args(argv)
    loop.setup(args)
    print(f"torch threads: {torch.get_num_threads()} (--threads N to change; the figures in README.md use 1)")

    train_b = loop.load_or_exit(args.data_dir, "train")
    test_b = loop.load_or_exit(args.data_dir, "test")
    print(f"Data: {args.data_dir}: {len(train_b.y)} training and {len(test_b.y)} test images")

    t0 = time.perf_counter()
    my_ops.load(args.variant, verbose=args.verbose)
    total = time.perf_counter() - t0
    how = ("up to date (cached build)" if my_ops.build_cached
           else f"built in {my_ops.build_seconds:.2f} s" if my_ops.build_seconds is not None else "built")
    print(f"opcore ReLU ({args.variant}: examples/relu/{args.variant}/relu.c + shape.c): {how}, "
          f"loaded in {total:.2f} s in all -> torch.ops.my_ops.relu_forward / relu_backward")

    # Both models train in the same run, taking turns every 50 steps on the
    # same batches: each one's result is exactly that of a separate run, and a
    # burst of other load on the machine slows both alike, so the ratio is fair.
    torch.manual_seed(args.seed)
    models = {"opcore": MLP(relu=my_ops.Relu.apply)}
    torch.manual_seed(args.seed)
    models["baseline"] = MLP()
    print(f"\nTraining the opcore model and the baseline together (taking turns every 50 steps), "
          f"{args.epochs} epoch(s) of {min(len(train_b), args.max_steps or len(train_b))} steps each", flush=True)
    runs = loop.run_interleaved(models, train_b, epochs=args.epochs, max_steps=args.max_steps,
                                progress=args.progress, desc="opcore + baseline")
    results = {}
    for label, title in (("opcore", "opcore ReLU (torch.ops.my_ops via autograd.Function)"),
                         ("baseline", "baseline (torch.relu)")):
        r = runs[label]
        print(f"\n== {title} ==")
        print("----------Training ---------------")
        print("Train throughput (iter/sec): {}".format(r["throughput"]))
        print("Final loss is {:0.4f}".format(r["final_loss"]))
        print("----------End Training ---------------")
        acc, correct, total = loop.evaluate(models[label], test_b)
        print("Test accuracy: {:.2f}% ({}/{})".format(100 * acc, correct, total), flush=True)
        results[label] = dict(r, accuracy=acc,
                              params=[p.detach() for p in models[label].parameters()])

    o, b = results["opcore"], results["baseline"]
    same = all(torch.equal(p, q) for p, q in zip(o["params"], b["params"]))
    ratio = o["throughput"] / b["throughput"]
    print("\n== Summary ==")
    print(f"{'':10s} {'iter/s':>10s} {'final loss':>11s} {'test acc':>9s}")
    for label, r in (("opcore", o), ("baseline", b)):
        print(f"{label:10s} {r['throughput']:10.1f} {r['final_loss']:11.4f} {100 * r['accuracy']:8.2f}%")
    print(f"Throughput opcore / baseline: {ratio:.3f}x")
    print(f"Trained weights identical to the baseline's: {'yes' if same else 'NO'}")
    loop.write_json(args.json, dict(
        variant=args.variant, epochs=args.epochs, ratio=ratio, identical=same,
        **{f"{k}_{m}": results[k][m] for k in results for m in ("throughput", "final_loss", "accuracy")}))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
