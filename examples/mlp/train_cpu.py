"""Baseline: train the MLP with plain PyTorch (torch.relu) on the CPU.

    python train_cpu.py [--data-dir DIR] [--epochs 4] [--max-steps N]
"""
import loop


def main(argv=None):
    ap = loop.common_args("train the MLP with torch.relu (baseline)")
    ap.add_argument("--save", metavar="PATH", help="save a checkpoint here")
    args = ap.parse_args(argv)
    return loop.run_training(args, relu=None, label="baseline")


if __name__ == "__main__":
    main()
