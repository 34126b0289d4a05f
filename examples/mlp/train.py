"""Train the MLP with the opcore ReLU (my_ops.Relu: an autograd.Function
calling torch.ops.my_ops.relu_forward / relu_backward).

    python train.py [--variant elementwise] [--data-dir DIR] [--epochs 4]
"""
import loop
import my_ops


def main(argv=None):
    ap = loop.common_args("train the MLP with the opcore ReLU")
    ap.add_argument("--variant", default=my_ops.DEFAULT_VARIANT, choices=list(my_ops.VARIANTS),
                    help=f"which examples/relu/ kernel (default {my_ops.DEFAULT_VARIANT})")
    ap.add_argument("--save", metavar="PATH", help="save a checkpoint here")
    ap.add_argument("--verbose", action="store_true", help="show the build commands")
    args = ap.parse_args(argv)
    my_ops.load(args.variant, verbose=args.verbose)
    return loop.run_training(args, relu=my_ops.Relu.apply, label=f"opcore-{args.variant}",
                             extra=dict(variant=args.variant, build_seconds=my_ops.build_seconds))


if __name__ == "__main__":
    main()
