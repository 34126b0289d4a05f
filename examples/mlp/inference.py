"""Inference throughput of the MLP with hidden layers [4096, 2048] (seed
001), for each ReLU variant or the torch.relu baseline.

    python inference.py --variant elementwise|stream|tcm|multicore|baseline

Only one opcore variant can be loaded per process (they share a library
name), so run one variant per invocation, as the bench does.
"""
import torch

import loop

LAYERS = (4096, 2048)


def main(argv=None):
    import my_ops
    ap = loop.common_args("MLP [4096, 2048] inference throughput")
    ap.add_argument("--variant", default=my_ops.DEFAULT_VARIANT,
                    choices=list(my_ops.VARIANTS) + ["baseline"],
                    help="ReLU kernel from examples/relu/, or 'baseline' for torch.relu")
    ap.add_argument("--layers", default=",".join(map(str, LAYERS)),
                    help="hidden layer sizes (default 4096,2048)")
    ap.add_argument("--verbose", action="store_true", help="show the build commands")
    args = ap.parse_args(argv)
    loop.setup(args)
    layers = tuple(int(s) for s in args.layers.split(","))

    from model import MLP
    relu = None
    if args.variant != "baseline":
        my_ops.load(args.variant, verbose=args.verbose)
        relu = my_ops.Relu.apply
    test_b = loop.load_or_exit(args.data_dir, "test")
    torch.manual_seed(args.seed)
    model = MLP(layers=layers, relu=relu)

    # The variant must compute exactly what torch.relu does.
    x0, _ = next(iter(test_b))
    with torch.no_grad():
        ref = MLP(layers=layers)
        ref.load_state_dict(model.state_dict())
        diff = (model(x0) - ref(x0)).abs().max().item()
    if diff != 0.0:
        raise SystemExit(f"error: variant {args.variant} differs from torch.relu by {diff}")

    print("----------Inference ---------------", flush=True)
    r = loop.infer(model, test_b, epochs=args.epochs, max_steps=args.max_steps,
                   progress=args.progress, desc=args.variant)
    print("Inf throughput (iter/sec): {}".format(r["throughput"]))
    print("----------End Inference ---------------", flush=True)
    res = dict(label=args.variant, variant=args.variant, throughput=r["throughput"],
               layers=list(layers), epochs=args.epochs, steps=r["steps"],
               threads=torch.get_num_threads(),
               build_seconds=my_ops.build_seconds if relu else None)
    loop.write_json(args.json, res)
    return res


if __name__ == "__main__":
    main()
