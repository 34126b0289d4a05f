"""Greedy generation with the opcore Llama decoder, and the tokens/s it ran at.

    python examples/llm/generate.py                          # SmolLM-135M's shapes, Q8_0
    python examples/llm/generate.py --format q4_0 --tokens 64
    python examples/llm/generate.py --config tinyllama-1.1b --gguf out.gguf

Weights are seeded random values (nothing is downloaded), made once and kept
as safetensors in --weights-dir; --gguf also writes them for llama.cpp, in the
same format. The tokens are ids: the model has no tokenizer.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description="greedy decoding on opcore ops")
    p.add_argument("--config", default="smollm-135m", choices=sorted(model.CONFIGS))
    p.add_argument("--format", default="q8_0", choices=model.FORMATS)
    p.add_argument("--prompt", default="1,450,4996,17354,1701,432",
                   help="comma-separated token ids")
    p.add_argument("--tokens", type=int, default=32, help="tokens to generate")
    p.add_argument("--threads", type=int, default=None,
                   help="engine cores and torch threads (default: all usable CPUs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights-dir", default=os.path.join(
        os.environ.get("OPCORE_CACHE_DIR", os.path.expanduser("~/.cache/opcore")), "llm-example"))
    p.add_argument("--gguf", help="also write the weights to this GGUF file (for llama.cpp)")
    p.add_argument("--check", action="store_true", help="compare with the PyTorch reference")
    args = p.parse_args(argv)
    if args.threads:
        os.environ["OC_NUM_CORES"] = str(args.threads)
    import torch

    import opcore.torch  # noqa: F401

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = model.CONFIGS[args.config]
    path = model.weights_file(cfg, args.weights_dir, args.seed)
    weights = model.load_weights(path)
    print(f"{cfg.name}: {cfg.n_params() / 1e6:.0f}M parameters, weights {path}")
    if args.gguf:
        model.export_gguf(cfg, weights, args.gguf, args.format)
        print(f"wrote {args.gguf} ({args.format})")
    max_seq = min(512, cfg.max_seq)
    m = model.OpcoreLlama(cfg, weights, args.format, max_seq=max_seq)
    prompt = [int(t) for t in args.prompt.split(",")]
    m.reset()
    t0 = time.perf_counter()
    logits = m.forward(prompt)
    t1 = time.perf_counter()
    out = [int(logits.argmax())]
    while len(out) < args.tokens:
        out.append(int(m.forward([out[-1]]).argmax()))
    t2 = time.perf_counter()
    print(f"prompt {prompt}")
    print(f"generated {out}")
    print(f"prefill {len(prompt) / (t1 - t0):.1f} tokens/s, "
          f"decode {(args.tokens - 1) / (t2 - t1):.1f} tokens/s "
          f"({args.format}, {opcore_cores()} engine cores)")
    if args.check:
        ref = model.TorchLlama(cfg, model.effective_weights(weights, args.format), max_seq=max_seq,
                               quant_acts=args.format.startswith("q"))
        same = ref.generate(prompt, args.tokens) == out
        print(f"PyTorch reference on the same weights gives the same tokens: {same}")
        return 0 if same else 1
    return 0


def opcore_cores():
    import opcore

    return opcore.engine_num_cores() if hasattr(opcore, "engine_num_cores") else os.environ.get(
        "OC_NUM_CORES", len(os.sched_getaffinity(0)))


if __name__ == "__main__":
    sys.exit(main())
