"""Data-parallel training of tutorial 1's MLP with the opcore ReLU:
torch.distributed (gloo) and DistributedDataParallel, one process per rank.

    torchrun --standalone --nproc-per-node 2 examples/ddp/train.py \
        [--variant elementwise|stream|tcm|multicore] [--epochs N] [--max-steps N]

Each rank trains on its own shard of the training set (every world-th
sample, as DistributedSampler without shuffling; all shards the same size,
so every rank runs the same steps) with batches of 32; DDP averages the
gradients across ranks, so the replicas stay identical. The script checks
that at the end (an all_gather of every rank's parameters), prints the test
accuracy from rank 0 and exits 1 if the replicas differ.

Several ranks on one machine share its CPUs. By default each rank's opcore
engine takes one core per CPU of the process (as does torch's intra-op
pool), so N ranks would run N times as many busy threads as there are CPUs.
Before opcore starts, this script sets OC_NUM_CORES (unless already set) and
torch's thread count to CPUs / local ranks, at least 1: the recommended
setting (docs/python.md, "Several processes").
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "mlp"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import data  # noqa: E402
import loop  # noqa: E402
import my_ops  # noqa: E402
from model import MLP  # noqa: E402


def cores_per_rank():
    """CPUs of this process / ranks on this machine (torchrun's
    LOCAL_WORLD_SIZE), at least 1."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, len(os.sched_getaffinity(0)) // max(1, local))


def shard(images, labels, rank, world):
    """Every world-th sample from `rank` on, cut to one length for all ranks."""
    n = len(labels) // world
    return data.Batches(images[rank::world][:n], labels[rank::world][:n], loop.BATCH_SIZE)


def main(argv=None):
    ap = loop.common_args("train the MLP with the opcore ReLU on several processes (DDP)", epochs=1)
    ap.add_argument("--variant", default=my_ops.DEFAULT_VARIANT, choices=list(my_ops.VARIANTS),
                    help=f"which examples/relu/ kernel (default {my_ops.DEFAULT_VARIANT})")
    args = ap.parse_args(argv)
    if "RANK" not in os.environ:
        raise SystemExit("error: run this under torchrun, e.g. "
                         "`torchrun --standalone --nproc-per-node 2 examples/ddp/train.py`")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    # Before the first op call starts opcore's engine: share the CPUs.
    cores = cores_per_rank()
    os.environ.setdefault("OC_NUM_CORES", str(cores))
    torch.set_num_threads(args.threads or cores)

    dist.init_process_group("gloo")
    try:
        my_ops.load(args.variant)  # ranks building at once: one compiles, the others reuse it
        try:
            images, labels = data.load_split(args.data_dir, "train")
            test = loop.load_or_exit(args.data_dir, "test")
        except data.DatasetError as e:
            raise SystemExit(f"error: {e}") from None
        torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts them)
        model = DDP(MLP(relu=my_ops.Relu.apply))
        r = loop.train(model, shard(images, labels, rank, world), epochs=args.epochs, max_steps=args.max_steps,
                       progress=args.progress if rank == 0 else False, desc=f"rank {rank}")

        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        identical = all(torch.equal(gathered[0], g) for g in gathered[1:])
        losses = [None] * world
        dist.all_gather_object(losses, r["final_loss"])
        if rank == 0:
            acc, correct, total = loop.evaluate(model.module, test)
            print(f"{world} ranks x {os.environ['OC_NUM_CORES']} opcore core(s) "
                  f"(OC_NUM_CORES), {torch.get_num_threads()} torch thread(s) each; "
                  f"opcore ReLU '{args.variant}'")
            print(f"Steps per rank: {r['steps']}, global batch {loop.BATCH_SIZE * world}")
            print("Final loss per rank: " + ", ".join(f"{v:.4f}" for v in losses))
            print(f"Test accuracy: {100 * acc:.2f}% ({correct}/{total})")
            print(f"Replicas identical: {'yes' if identical else 'NO'}", flush=True)
            loop.write_json(args.json, dict(world=world, identical=identical, steps=r["steps"],
                                            final_losses=losses, accuracy=acc, variant=args.variant,
                                            oc_num_cores=int(os.environ["OC_NUM_CORES"]),
                                            torch_threads=torch.get_num_threads()))
        dist.barrier()  # every rank done before any tears the connections down
    finally:
        # Release DDP and the collectives' results while the group is alive:
        # gloo's threads may otherwise abort the process at teardown (a
        # PyTorch race, with or without opcore ops).
        model = gathered = None  # noqa: F841
        import gc
        gc.collect()
        dist.destroy_process_group()
    # Leave without interpreter finalization, where gloo's threads can still
    # abort the process (pytorch#179291). Reached only on success.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if identical else 1)


if __name__ == "__main__":
    main()
