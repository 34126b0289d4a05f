"""A Llama-architecture decoder (RMSNorm, RoPE, grouped-query attention over a
KV cache, SwiGLU) written as opcore ops (examples/llm/*.c), called from
PyTorch, beside a float32 PyTorch reference of the same model.

    import model
    cfg = model.CONFIGS["smollm-135m"]
    w = model.make_weights(cfg, seed=0)           # seeded random values
    model.save_weights(w, "w.safetensors"); w = model.load_weights("w.safetensors")
    m = model.OpcoreLlama(cfg, w, fmt="q8_0")      # float32 | bfloat16 | q8_0 | q4_0
    tokens = m.generate([1, 5, 7], 16)             # prefill, then greedy decode
    model.export_gguf(cfg, w, "w-q8_0.gguf", "q8_0")   # the same weights for llama.cpp

Weights use Meta's Llama layout (torch Linear: [out, in]) and its rotary
order (adjacent pairs), so they go to GGUF as they are.
"""
import math
import os
import sys
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ["linear.c", "attention.c", "swiglu.c", os.path.join("..", "tiles", "rmsnorm.c")]
FORMATS = ("float32", "bfloat16", "q8_0", "q4_0")
QK = 32  # weights per Q8_0 / Q4_0 block


@dataclass(frozen=True)
class Config:
    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab: int
    max_seq: int = 2048
    rope_base: float = 10000.0
    eps: float = 1e-5

    @property
    def head_dim(self):
        return self.dim // self.n_heads

    def n_params(self):
        d, f, kv = self.dim, self.ffn_dim, self.n_kv_heads * self.head_dim
        per_layer = d * (d + 2 * kv) + d * d + 3 * d * f + 2 * d
        return self.n_layers * per_layer + 2 * self.vocab * d + d


CONFIGS = {
    # TinyLlama-1.1B's shapes
    "tinyllama-1.1b": Config("tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000),
    # SmolLM-135M's shapes (a Llama architecture, 30 layers, 9 query / 3 key-value heads)
    "smollm-135m": Config("smollm-135m", 576, 30, 9, 3, 1536, 49152),
    # a small model for tests
    "test": Config("test", 128, 2, 4, 2, 352, 512, max_seq=256),
}


# ---- weights --------------------------------------------------------------------

def weight_names(cfg):
    names = ["tok_embeddings.weight", "norm.weight", "output.weight"]
    for i in range(cfg.n_layers):
        names += [f"layers.{i}.{n}.weight" for n in
                  ("attention_norm", "attention.wq", "attention.wk", "attention.wv",
                   "attention.wo", "ffn_norm", "feed_forward.w1", "feed_forward.w3",
                   "feed_forward.w2")]
    return names


def weight_shape(cfg, name):
    d, f, kv = cfg.dim, cfg.ffn_dim, cfg.n_kv_heads * cfg.head_dim
    last = name.split(".")[-2]
    return {"tok_embeddings": (cfg.vocab, d), "output": (cfg.vocab, d), "norm": (d,),
            "attention_norm": (d,), "ffn_norm": (d,), "wq": (d, d), "wk": (kv, d), "wv": (kv, d),
            "wo": (d, d), "w1": (f, d), "w3": (f, d), "w2": (d, f)}[last]


def make_weights(cfg, seed=0):
    """Seeded random float32 weights: N(0, 0.02) matrices (the usual
    initialisation), norms around 1. The same seed gives the same bits."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in weight_names(cfg):
        shape = weight_shape(cfg, name)
        if len(shape) == 1:
            out[name] = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        else:
            out[name] = (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    return out


def save_weights(weights, path):
    from safetensors.numpy import save_file

    save_file(weights, path)


def load_weights(path):
    from safetensors.numpy import load_file

    return load_file(path)


def weights_file(cfg, directory, seed=0):
    """The config's seeded weights as a safetensors file in `directory`
    (made on first use, then loaded from there)."""
    path = os.path.join(directory, f"{cfg.name}-seed{seed}.safetensors")
    if not os.path.exists(path):
        os.makedirs(directory, exist_ok=True)
        save_weights(make_weights(cfg, seed), path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


# ---- Q8_0 / Q4_0 (GGML's blocks, through the gguf package's reference code) -------

def _qtype(fmt):
    from gguf import GGMLQuantizationType as T

    return {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "float32": T.F32, "bfloat16": T.BF16}[fmt]


def quantize(w, fmt):
    """float32 [n, k] -> uint8 [n, k / 32 * bytes per block], the GGUF bytes."""
    import gguf.quants

    return gguf.quants.quantize(np.ascontiguousarray(w, dtype=np.float32), _qtype(fmt))


def dequantize(q, fmt):
    import gguf.quants

    return gguf.quants.dequantize(q, _qtype(fmt)).astype(np.float32)


def round_trip(w, fmt):
    """The float32 values the model computes with when stored as `fmt`."""
    if fmt == "float32":
        return w
    if fmt == "bfloat16":
        import torch

        return torch.from_numpy(w).to(torch.bfloat16).float().numpy()
    return dequantize(quantize(w, fmt), fmt)


def effective_weights(weights, fmt):
    """Every matrix as the model in `fmt` sees it (norms stay float32)."""
    return {k: (round_trip(v, fmt) if v.ndim == 2 else v) for k, v in weights.items()}


# ---- GGUF for llama.cpp -------------------------------------------------------------

GGUF_NAMES = {"attention_norm": "attn_norm", "attention.wq": "attn_q", "attention.wk": "attn_k",
              "attention.wv": "attn_v", "attention.wo": "attn_output", "ffn_norm": "ffn_norm",
              "feed_forward.w1": "ffn_gate", "feed_forward.w3": "ffn_up",
              "feed_forward.w2": "ffn_down"}


def gguf_name(name):
    top = {"tok_embeddings.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
           "output.weight": "output.weight"}
    if name in top:
        return top[name]
    _, i, rest = name.split(".", 2)
    return f"blk.{i}.{GGUF_NAMES[rest[:-len('.weight')]]}.weight"


def export_gguf(cfg, weights, path, fmt):
    """Write the weights as a llama.cpp GGUF file: matrices in `fmt`
    (Q8_0 / Q4_0 in GGML's block layout, or float32 / bfloat16), norms in
    float32, and a placeholder vocabulary (byte tokens, then t<i>) so that
    llama.cpp loads it; token ids go in and out as they are."""
    import gguf

    ftype = {"float32": gguf.LlamaFileType.ALL_F32, "bfloat16": gguf.LlamaFileType.MOSTLY_BF16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[fmt]
    w = gguf.GGUFWriter(path + ".tmp", "llama")
    w.add_name(f"opcore-example-{cfg.name}")
    w.add_context_length(cfg.max_seq)
    w.add_embedding_length(cfg.dim)
    w.add_block_count(cfg.n_layers)
    w.add_feed_forward_length(cfg.ffn_dim)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_head_count(cfg.n_heads)
    w.add_head_count_kv(cfg.n_kv_heads)
    w.add_layer_norm_rms_eps(cfg.eps)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_vocab_size(cfg.vocab)
    w.add_file_type(ftype)
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    tokens += [f"t{i}".encode() for i in range(len(tokens), cfg.vocab)]
    tokens = tokens[:cfg.vocab]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (cfg.vocab - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * cfg.vocab)
    w.add_token_types(types[:cfg.vocab])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    for name in weight_names(cfg):
        t = weights[name]
        if t.ndim == 1 or fmt == "float32":
            w.add_tensor(gguf_name(name), t)
        else:
            w.add_tensor(gguf_name(name), quantize(t, fmt), raw_dtype=_qtype(fmt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


# ---- shared pieces --------------------------------------------------------------------

def rope_tables(cfg):
    """cos and sin [max_seq, head_dim / 2] float32 (pair i of a head turns
    by pos * base^(-2i / head_dim))."""
    import torch

    half = cfg.head_dim // 2
    inv = 1.0 / (cfg.rope_base ** (torch.arange(half, dtype=torch.float64) * 2 / cfg.head_dim))
    ang = torch.arange(cfg.max_seq, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float().contiguous(), torch.sin(ang).float().contiguous()


# ---- the opcore model -------------------------------------------------------------------

_lib = None


def load_library(build_directory=None, verbose=False, extra_cflags=None):
    """Build (cached: a no-op when unchanged) and load the `llm` op library;
    torch.ops.llm.* once torch is imported. extra_cflags: after the default
    -march=native (the bench's --isa avx2 adds -mno-avx512f -mno-avxvnni)."""
    global _lib
    from opcore import custom_op

    if _lib is None:
        _lib = custom_op.loaded_libraries().get("llm") or custom_op.load(
            name="llm", compute_srcs=[os.path.join(HERE, k) for k in KERNELS],
            shape_srcs=[os.path.join(HERE, "shape.c")], build_directory=build_directory,
            multicore=True, verbose=verbose, extra_cflags=extra_cflags)
    return _lib


def _prepare_matrix(w, fmt):
    import torch

    if fmt == "float32":
        return torch.from_numpy(np.ascontiguousarray(w))
    if fmt == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(w)).to(torch.bfloat16)
    return torch.from_numpy(quantize(w, fmt))


class OpcoreLlama:
    """The decoder on opcore ops: per layer rmsnorm -> one linear for
    q, k, v (stacked) -> attention (RoPE, KV cache write, causal GQA) ->
    linear -> residual; rmsnorm -> one linear for gate and up -> swiglu ->
    linear -> residual. Linear layers in `fmt`; everything else float32.
    Q8_0 / Q4_0 weights are packed once, here, 8 rows a group
    (oc_weights_pack; llama.cpp repacks its weights the same way) and
    read by linear_packed: the same bits as linear_q8_0 / linear_q4_0 on
    GGUF's rows, faster (pack=False keeps the rows)."""

    def __init__(self, cfg, weights, fmt="float32", max_seq=None, pack=True):
        import torch

        assert fmt in FORMATS, f"fmt must be one of {FORMATS}, got {fmt!r}"
        load_library()
        self.cfg, self.fmt = cfg, fmt
        self.max_seq = max_seq or cfg.max_seq
        if not 0 < self.max_seq <= cfg.max_seq:
            raise ValueError(f"OpcoreLlama: max_seq must be in [1, {cfg.max_seq}] for "
                             f"{cfg.name}, got {max_seq}")
        ops = torch.ops.llm
        self._linear = {"float32": ops.linear, "bfloat16": ops.linear, "q8_0": ops.linear_q8_0,
                        "q4_0": ops.linear_q4_0}[fmt]
        self._pack = {"q8_0": ops.pack_q8_0, "q4_0": ops.pack_q4_0}.get(fmt) if pack else None
        if self._pack:
            self._linear = ops.linear_packed
        self._rmsnorm, self._attention, self._swiglu = ops.rmsnorm, ops.attention, ops.swiglu
        emb = weights["tok_embeddings.weight"]
        # the embedding is looked up, not multiplied: rows of the table as `fmt` stores them
        self.embed = torch.from_numpy(round_trip(emb, fmt))
        self.norm = torch.from_numpy(weights["norm.weight"])
        self.output = self._matrix(weights["output.weight"])
        self.layers = []
        for i in range(cfg.n_layers):
            p = f"layers.{i}."
            qkv = np.concatenate([weights[p + f"attention.w{n}.weight"] for n in "qkv"])
            gu = np.concatenate([weights[p + "feed_forward.w1.weight"],
                                 weights[p + "feed_forward.w3.weight"]])
            self.layers.append({
                "attn_norm": torch.from_numpy(weights[p + "attention_norm.weight"]),
                "ffn_norm": torch.from_numpy(weights[p + "ffn_norm.weight"]),
                "qkv": self._matrix(qkv),
                "wo": self._matrix(weights[p + "attention.wo.weight"]),
                "gu": self._matrix(gu),
                "w2": self._matrix(weights[p + "feed_forward.w2.weight"])})
        self.cos, self.sin = rope_tables(cfg)
        self.cos = self.cos[:self.max_seq].contiguous()
        self.sin = self.sin[:self.max_seq].contiguous()
        self.reset()

    def _matrix(self, w):
        """w (float32 [n, k]) as the linear op reads it: (tensor,) or, packed,
        (bytes, n)."""
        t = _prepare_matrix(w, self.fmt)
        return (self._pack(t), w.shape[0]) if self._pack else (t,)

    def reset(self):
        import torch

        shape = (self.cfg.n_kv_heads, self.max_seq, self.cfg.head_dim)
        self.kv = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(self.cfg.n_layers)]
        self.pos = 0

    def forward(self, tokens, all_logits=False):
        """Run the tokens (a list or 1-D tensor of ids) at the next
        positions, filling the KV cache; return the logits of the last
        token [vocab] (all_logits: of every token, [len, vocab])."""
        import torch

        ids = torch.as_tensor(tokens, dtype=torch.long)
        if ids.ndim != 1 or len(ids) == 0:
            raise ValueError(f"OpcoreLlama.forward: tokens must be a non-empty list of ids, "
                             f"got shape {tuple(ids.shape)}")
        if int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab:
            raise ValueError(f"OpcoreLlama.forward: token ids must be in [0, {self.cfg.vocab}), "
                             f"got {int(ids.min())}..{int(ids.max())}")
        if self.pos + len(ids) > self.max_seq:
            raise ValueError(f"OpcoreLlama.forward: positions up to {self.pos + len(ids)} "
                             f"exceed max_seq {self.max_seq}")
        cfg, op = self.cfg, self._linear

        def lin(x, w):
            return op(x, *w)

        x = self.embed[ids]
        for layer, (kc, vc) in zip(self.layers, self.kv):
            h = self._rmsnorm(x, layer["attn_norm"], cfg.eps)
            a = self._attention(lin(h, layer["qkv"]), kc, vc, self.cos, self.sin, self.pos,
                                cfg.n_heads)
            x = x + lin(a, layer["wo"])
            h = self._rmsnorm(x, layer["ffn_norm"], cfg.eps)
            x = x + lin(self._swiglu(lin(h, layer["gu"])), layer["w2"])
        self.pos += len(ids)
        if not all_logits:
            x = x[-1:]
        return lin(self._rmsnorm(x.contiguous(), self.norm, cfg.eps), self.output).squeeze(0)

    def generate(self, prompt, n_new):
        """Greedy decoding from a fresh cache: the prompt's logits in one
        pass (prefill), then one token at a time. Returns the new ids."""
        return greedy(self, prompt, n_new)


def greedy(m, prompt, n_new):
    m.reset()
    out = []
    logits = m.forward(prompt)
    for _ in range(n_new):
        nxt = int(logits.argmax())
        out.append(nxt)
        if len(out) == n_new:
            break
        logits = m.forward([nxt])
    return out


# ---- the PyTorch reference -------------------------------------------------------------

def quantize_blocks(x):
    """x (float32, last dim a multiple of 32) rounded to int8 blocks of 32
    and back: d = absmax / 127 per block, q = round(x / d) (nearest even)."""
    import torch

    b = x.reshape(*x.shape[:-1], -1, QK)
    d = b.abs().amax(-1, keepdim=True) / 127
    q = torch.where(d > 0, torch.round(b / torch.where(d > 0, d, 1)), 0)
    return (q * d).reshape(x.shape)


class TorchLlama:
    """The same model in plain PyTorch (the reference the tests compare
    against, and the bench's eager / torch.compile peer): float32 or
    bfloat16 weights and activations, or int8 weight-only linears
    (dtype="int8": torch's _weight_int8pack_mm, per-row scales). The KV cache
    has a fixed size and positions come as a tensor, so one compiled decode
    step serves every position. quant_acts: round each linear layer's input
    to int8 blocks of 32 first (d = absmax / 127, nearest even), as Q8_0 and
    Q4_0 layers on opcore (and llama.cpp) do: with effective_weights(w,
    "q8_0") this is the same math as the opcore model in Q8_0."""

    def __init__(self, cfg, weights, dtype="float32", max_seq=None, quant_acts=False):
        import torch

        self.cfg, self.max_seq, self.quant_acts = cfg, max_seq or cfg.max_seq, quant_acts
        self.int8 = dtype == "int8"
        self.dtype = torch.float32 if self.int8 else getattr(torch, dtype)
        t = {k: torch.from_numpy(v).to(self.dtype) for k, v in weights.items()}
        self.w = t
        if self.int8:
            self.q = {}
            for k, v in weights.items():
                if v.ndim == 2 and k != "tok_embeddings.weight":
                    wt = torch.from_numpy(v)
                    s = wt.abs().amax(1).clamp(min=1e-12) / 127
                    self.q[k] = ((wt / s[:, None]).round().clamp(-127, 127).to(torch.int8), s)
        cos, sin = rope_tables(cfg)
        self.cos, self.sin = cos[:self.max_seq], sin[:self.max_seq]
        self.step_fn = self.step  # torch.compile(m.step) may take its place
        self.reset()

    def reset(self):
        import torch

        shape = (1, self.cfg.n_kv_heads, self.max_seq, self.cfg.head_dim)
        self.kv = [(torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype))
                   for _ in range(self.cfg.n_layers)]
        self.pos = 0

    def linear(self, x, name):
        import torch

        if self.int8 and name in self.q:
            w, s = self.q[name]
            y = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, x.shape[-1]), w, s)
            return y.reshape(*x.shape[:-1], -1)
        if self.quant_acts:
            x = quantize_blocks(x)
        return torch.nn.functional.linear(x, self.w[name])

    def rope(self, x, pos):
        """x [1, heads, t, d]: turn each adjacent pair by its position's angle."""
        import torch

        c, s = self.cos[pos].to(x.dtype)[None, None], self.sin[pos].to(x.dtype)[None, None]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)

    def rmsnorm(self, x, w):
        import torch

        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps)).to(x.dtype) * w

    def step(self, ids, pos):
        """ids [t] at positions `pos` [t] (a tensor): logits [t, vocab]."""
        import torch
        import torch.nn.functional as F

        cfg, t = self.cfg, ids.shape[0]
        hd, H, G = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
        x = self.w["tok_embeddings.weight"][ids][None]
        keys = torch.arange(self.max_seq)
        mask = keys[None, :] <= pos[:, None]  # [t, max_seq]: causal over the cache
        for i in range(cfg.n_layers):
            p = f"layers.{i}."
            h = self.rmsnorm(x, self.w[p + "attention_norm.weight"])
            q = self.linear(h, p + "attention.wq.weight").view(1, t, H, hd).transpose(1, 2)
            k = self.linear(h, p + "attention.wk.weight").view(1, t, G, hd).transpose(1, 2)
            v = self.linear(h, p + "attention.wv.weight").view(1, t, G, hd).transpose(1, 2)
            q, k = self.rope(q, pos), self.rope(k, pos)
            kc, vc = self.kv[i]
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask[None, None],
                                               enable_gqa=True)
            x = x + self.linear(a.transpose(1, 2).reshape(1, t, H * hd), p + "attention.wo.weight")
            h = self.rmsnorm(x, self.w[p + "ffn_norm.weight"])
            g = F.silu(self.linear(h, p + "feed_forward.w1.weight"))
            g = g * self.linear(h, p + "feed_forward.w3.weight")
            x = x + self.linear(g, p + "feed_forward.w2.weight")
        x = self.rmsnorm(x, self.w["norm.weight"])
        return self.linear(x, "output.weight")[0]

    def forward(self, tokens, all_logits=False):
        import torch

        ids = torch.as_tensor(tokens, dtype=torch.long)
        pos = torch.arange(self.pos, self.pos + len(ids))
        if self.pos + len(ids) > self.max_seq:
            raise ValueError(f"TorchLlama.forward: positions up to {self.pos + len(ids)} "
                             f"exceed max_seq {self.max_seq}")
        with torch.no_grad():
            logits = self.step_fn(ids, pos)
        self.pos += len(ids)
        return (logits if all_logits else logits[-1]).float()

    def generate(self, prompt, n_new):
        return greedy(self, prompt, n_new)


if __name__ == "__main__":
    sys.exit("run examples/llm/generate.py")
