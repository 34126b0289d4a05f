"""examples/llm: the Llama-architecture decoder on opcore ops against a float32
PyTorch reference of the same model (the small "test" config), its linear
kernels against the same math in NumPy, GGUF export, and bad input."""
import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("gguf")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# examples/mlp has a model.py too (tests/python/test_mlp.py, often in the same
# pytest process): this one is loaded by path under a name of its own.
_spec = importlib.util.spec_from_file_location(
    "llm_model", os.path.join(ROOT, "examples", "llm", "model.py"))
model = importlib.util.module_from_spec(_spec)
sys.modules["llm_model"] = model
_spec.loader.exec_module(model)
import opcore.torch  # noqa: E402,F401

CFG = model.CONFIGS["test"]
PROMPT = [1, 17, 300, 42, 7, 99, 250, 3, 64, 128, 5, 411]
# Relative error of the logits, ||opcore - reference|| / ||reference||, against
# the float32 reference of the float32 weights (README: "Accuracy").
TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2, "q8_0": 3e-2, "q4_0": 3.5e-1}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    path = model.weights_file(CFG, str(tmp_path_factory.mktemp("llm")), seed=0)
    model.load_library()
    return model.load_weights(path)


def rel(a, b):
    return float((a - b).norm() / b.norm())


def run_both(m, ref, steps=6):
    """Prefill logits of every prompt token, then `steps` decode steps fed the
    reference's greedy tokens: ([len + steps, vocab], same) for both."""
    m.reset(), ref.reset()
    got, want = [m.forward(PROMPT, all_logits=True)], [ref.forward(PROMPT, all_logits=True)]
    for _ in range(steps):
        nxt = int(want[-1][-1].argmax()) if want[-1].ndim == 2 else int(want[-1].argmax())
        got.append(m.forward([nxt])[None]), want.append(ref.forward([nxt])[None])
    return torch.cat(got), torch.cat(want)


def test_weights_round_trip_safetensors(weights, tmp_path):
    again = model.make_weights(CFG, seed=0)
    assert sorted(again) == sorted(weights)
    for k in again:
        np.testing.assert_array_equal(again[k], weights[k])
    p = str(tmp_path / "w.safetensors")
    model.save_weights(weights, p)
    back = model.load_weights(p)
    np.testing.assert_array_equal(back["output.weight"], weights["output.weight"])
    other = model.make_weights(CFG, seed=1)
    assert not np.array_equal(other["output.weight"], weights["output.weight"])


def test_float32_logits_and_greedy_tokens_match_reference(weights):
    m, ref = model.OpcoreLlama(CFG, weights, "float32"), model.TorchLlama(CFG, weights, "float32")
    got, want = run_both(m, ref)
    assert got.shape == (len(PROMPT) + 6, CFG.vocab)
    assert rel(got, want) < TOLERANCE["float32"]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert m.generate(PROMPT, 24) == ref.generate(PROMPT, 24)


@pytest.mark.parametrize("fmt", ["bfloat16", "q8_0", "q4_0"])
def test_low_precision_logits(weights, fmt):
    """Against the reference run on the weights as `fmt` stores them (and,
    for Q8_0 / Q4_0, its inputs rounded to int8 blocks as the kernels do),
    only float32 rounding differs; against the float32 weights, the error
    is the format's (within its documented tolerance)."""
    m = model.OpcoreLlama(CFG, weights, fmt)
    same = model.TorchLlama(CFG, model.effective_weights(weights, fmt), "float32",
                            quant_acts=fmt.startswith("q"))
    got, want = run_both(m, same)
    # Q8_0 / Q4_0: an activation within float32 rounding of a rounding
    # boundary may round to the other int8 on either side (one step of its
    # block's scale); the linear kernels alone match to 1e-7 (below)
    assert rel(got, want) < (1e-5 if fmt == "bfloat16" else 1e-2), fmt
    exact = model.TorchLlama(CFG, weights, "float32")
    got, want = run_both(m, exact)
    err = rel(got, want)
    assert err < TOLERANCE[fmt], (fmt, err)
    assert err > 0  # the format does round the weights
    assert m.generate(PROMPT, 8) == same.generate(PROMPT, 8)


@pytest.mark.parametrize("fmt", model.FORMATS)
@pytest.mark.parametrize("m_rows", [1, 3, 37])
def test_linear_kernel_matches_numpy(fmt, m_rows):
    """Both kernel paths (skinny m <= 32, blocked) against x @ W^T in float64
    on the values the format stores (GGML's dequantisation), x rounded to
    int8 blocks for Q8_0 / Q4_0."""
    model.load_library()
    rng = np.random.default_rng(m_rows)
    n, k = 200, 320
    w = rng.standard_normal((n, k), dtype=np.float32)
    x = rng.standard_normal((m_rows, k), dtype=np.float32)
    wt = model._prepare_matrix(w, fmt)
    ops = torch.ops.llm
    op = {"q8_0": ops.linear_q8_0, "q4_0": ops.linear_q4_0}.get(fmt, ops.linear)
    got = op(torch.from_numpy(x), wt).numpy()
    xe = model.quantize_blocks(torch.from_numpy(x)).numpy() if fmt.startswith("q") else x
    want = xe.astype(np.float64) @ model.round_trip(w, fmt).astype(np.float64).T
    if fmt == "bfloat16" and m_rows >= 32:  # AMX-BF16 rounds x to bfloat16: tile.h's bound
        we = np.abs(model.round_trip(w, fmt).astype(np.float64))
        bound = (2.0**-8 + k * 2.0**-23) * (np.abs(x.astype(np.float64)) @ we.T)
        assert (np.abs(got - want) <= bound).all()
        return
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
@pytest.mark.parametrize("n", [8, 40, 203])
def test_packed_linear_has_the_bits_of_the_rows(fmt, n):
    """pack_q8_0 / pack_q4_0 then linear_packed against linear_q8_0 /
    linear_q4_0 on the GGUF rows: bit for bit, for decode (1-3 rows of x)
    and prefill shapes, n a multiple of 8 and not (the last group part
    padding); the packed bytes are the rows' plus a 128-byte header."""
    model.load_library()
    ops = torch.ops.llm
    rng = np.random.default_rng(n)
    k = 32 * 11
    w = model._prepare_matrix(rng.standard_normal((n, k), dtype=np.float32), fmt)
    pack, rows = (ops.pack_q8_0, ops.linear_q8_0) if fmt == "q8_0" else (ops.pack_q4_0,
                                                                         ops.linear_q4_0)
    wp = pack(w)
    assert wp.dtype == torch.uint8 and wp.ndim == 1
    assert wp.numel() == 128 + (n + 7) // 8 * 8 * w.shape[1]
    for m in (1, 2, 3, 4, 17, 40):
        x = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32))
        assert torch.equal(ops.linear_packed(x, wp, n), rows(x, w)), (fmt, n, m)
    # the packing itself: not the rows' bytes in order (8 rows interleaved)
    assert not torch.equal(wp[128:128 + w.shape[1]], w[0])


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_model_packed_and_rows_give_the_same_logits(weights, fmt):
    m, rows = model.OpcoreLlama(CFG, weights, fmt), model.OpcoreLlama(CFG, weights, fmt, pack=False)
    got, want = run_both(m, rows, steps=3)
    assert torch.equal(got, want)


def test_q_block_layout_is_ggml(weights):
    """The bytes the kernels read are GGML's: scale (float16) then 32 int8
    for Q8_0; scale then nibbles (low = weight i, high = weight i + 16)."""
    w = np.arange(64, dtype=np.float32).reshape(1, 64) - 31.5
    q8 = model.quantize(w, "q8_0")
    assert q8.shape == (1, 68)
    d = q8[0, :2].view(np.float16)[0]
    np.testing.assert_allclose(float(d), 31.5 / 127, rtol=1e-3)
    assert q8[0, 2:34].view(np.int8)[0] == -127
    q4 = model.quantize(w, "q4_0")
    assert q4.shape == (1, 36)
    lo, hi = int(q4[0, 2] & 15), int(q4[0, 2] >> 4)  # weights 0 and 16 of the first block
    d4 = float(q4[0, :2].view(np.float16)[0])
    np.testing.assert_allclose([(lo - 8) * d4, (hi - 8) * d4], [w[0, 0], w[0, 16]], atol=abs(d4))


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_gguf_export(weights, tmp_path, fmt):
    import gguf

    p = str(tmp_path / f"m-{fmt}.gguf")
    model.export_gguf(CFG, weights, p, fmt)
    r = gguf.GGUFReader(p)
    assert r.fields["general.architecture"].contents() == "llama"
    assert r.fields["llama.attention.head_count_kv"].contents() == CFG.n_kv_heads
    tensors = {t.name: t for t in r.tensors}
    assert len(tensors) == len(model.weight_names(CFG))
    t = tensors["blk.1.ffn_down.weight"]
    assert t.tensor_type == model._qtype(fmt)
    want = model.quantize(weights["layers.1.feed_forward.w2.weight"], fmt)
    np.testing.assert_array_equal(np.asarray(t.data).reshape(-1), want.reshape(-1))
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32


def test_bad_input_names_op_and_next_call_works(weights):
    model.load_library()
    x = torch.randn(2, 64)
    with pytest.raises(Exception, match=r"linear_q8_0.*w's rows must be 68 elements.*got 36"):
        torch.ops.llm.linear_q8_0(x, torch.zeros(8, 36, dtype=torch.uint8))
    with pytest.raises(Exception, match=r"linear_q4_0.*multiple of Q4_0's block of 32"):
        torch.ops.llm.linear_q4_0(torch.randn(2, 40), torch.zeros(8, 18, dtype=torch.uint8))
    with pytest.raises(Exception, match=r"linear_q8_0.*must be uint8"):
        torch.ops.llm.linear_q8_0(x, torch.zeros(8, 68))
    with pytest.raises(Exception, match=r"linear.*float32 or bfloat16, got float16"):
        torch.ops.llm.linear(x, torch.zeros(8, 64, dtype=torch.float16))
    kc = torch.zeros(2, 16, 32)
    cos, sin = torch.zeros(16, 16), torch.zeros(16, 16)
    with pytest.raises(Exception, match=r"attention.*positions \[15, 17\).*16"):
        torch.ops.llm.attention(torch.randn(2, 8 * 32), kc, kc.clone(), cos, sin, 15, 4)
    with pytest.raises(Exception, match=r"attention.*multiple of the cache's kv_heads"):
        torch.ops.llm.attention(torch.randn(2, 7 * 32), kc, kc.clone(), cos, sin, 0, 3)
    m = model.OpcoreLlama(CFG, weights, "q8_0", max_seq=16)
    with pytest.raises(ValueError, match="OpcoreLlama.forward.*max_seq 16"):
        m.forward(list(range(17)))
    with pytest.raises(ValueError, match=r"OpcoreLlama.forward: token ids must be in \[0, 512\)"):
        m.forward([1, 512])
    with pytest.raises(ValueError, match="OpcoreLlama: max_seq must be"):
        model.OpcoreLlama(CFG, weights, "q8_0", max_seq=CFG.max_seq + 1)
    w4 = torch.from_numpy(model.quantize(np.ones((16, 64), np.float32), "q4_0"))
    with pytest.raises(Exception, match=r"pack_q4_0.*w's rows \(35 bytes\) must be whole Q4_0 "
                       r"blocks of 18 bytes"):
        torch.ops.llm.pack_q4_0(w4[:, :35].contiguous())
    with pytest.raises(Exception, match=r"pack_q8_0.*must be contiguous 2-D uint8"):
        torch.ops.llm.pack_q8_0(torch.zeros(8, 68))
    wp = torch.ops.llm.pack_q4_0(w4)
    with pytest.raises(Exception, match=r"linear_packed.*w holds q4_0-packed weights 16 x 64, "
                       r"but n is 15 and x has 64 columns"):
        torch.ops.llm.linear_packed(x, wp, 15)
    with pytest.raises(Exception, match=r"linear_packed.*w holds q4_0-packed weights 16 x 64, "
                       r"but n is 16 and x has 96 columns"):
        torch.ops.llm.linear_packed(torch.randn(2, 96), wp, 16)
    with pytest.raises(Exception, match=r"linear_packed.*q4_0-packed weights 16 x 64 are "
                       rf"{wp.numel()} bytes, got a buffer of {wp.numel() - 18}"):
        torch.ops.llm.linear_packed(x, wp[:-18].clone(), 16)
    with pytest.raises(Exception, match=r"linear_packed.*not packed weights"):
        torch.ops.llm.linear_packed(x, w4.reshape(-1).clone(), 16)
    with pytest.raises(Exception, match=r"linear_packed.*1-D uint8 bytes pack_q8_0 / pack_q4_0"):
        torch.ops.llm.linear_packed(x, w4, 16)
    torch.testing.assert_close(torch.ops.llm.linear_packed(x, wp, 16),
                               torch.ops.llm.linear_q4_0(x, w4), rtol=0, atol=0)
    w = model._prepare_matrix(np.full((8, 64), 127.0, np.float32), "q8_0")  # scale 1, q 127
    torch.testing.assert_close(torch.ops.llm.linear_q8_0(torch.ones(1, 64), w),
                               torch.full((1, 8), 64.0 * 127))
    assert len(m.generate(PROMPT, 3)) == 3


def test_torch_int8_weight_only_peer(weights):
    """The bench's torch int8 weight-only peer computes the same model."""
    got, want = run_both(model.TorchLlama(CFG, weights, "int8"), model.TorchLlama(CFG, weights))
    assert rel(got, want) < TOLERANCE["q8_0"]


def test_generate_cli(tmp_path):
    import subprocess

    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "llm", "generate.py"),
                        "--config", "test", "--format", "q4_0", "--tokens", "6", "--check",
                        "--prompt", "1,5,300,7",
                        "--weights-dir", str(tmp_path), "--gguf", str(tmp_path / "t.gguf")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "generated [" in r.stdout and "same tokens: True" in r.stdout
    assert (tmp_path / "t.gguf").stat().st_size > 0


def test_every_core_split_gives_the_same_logits(tmp_path):
    """3 engine cores splitting every launch (even the small test model's):
    the linear layers' rows and attention's key/value heads (2, so one core
    has none) split unevenly; logits still match the reference."""
    import subprocess

    code = ("import sys; sys.path.insert(0, %r); import model, opcore.torch, test_llm as T; "
            "w = model.load_weights(model.weights_file(T.CFG, %r)); model.load_library()\n"
            "for f in ('float32', 'q8_0'):\n"
            "    same = model.TorchLlama(T.CFG, model.effective_weights(w, f),\n"
            "                            quant_acts=f != 'float32')\n"
            "    got, want = T.run_both(model.OpcoreLlama(T.CFG, w, f), same)\n"
            "    assert T.rel(got, want) < 1e-5, (f, T.rel(got, want))\n"
            "print('ok')") % (os.path.dirname(os.path.abspath(__file__)), str(tmp_path))
    env = dict(os.environ, OC_NUM_CORES="3", OC_MIN_SPLIT_BYTES="0", OC_STRAGGLER_US="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600, cwd=os.path.join(ROOT, "examples", "llm"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# ---- torch.library.opcheck: schema, fake tensors, autograd registration, AOT dispatch ----

def _strided(x):
    """x (2-D) as three other layouts of the same values: transposed storage,
    every other column of a wider tensor, and (for one row) expanded."""
    t = x.t().contiguous().t()
    wide = torch.zeros(x.shape[0], 2 * x.shape[1])
    wide[:, ::2] = x
    out = [t, wide[:, ::2]]
    if x.shape[0] == 1:
        out.append(x.expand(3, x.shape[1]))
    return out


OPCHECK_WARN = "ignore:.*an autograd kernel was not registered:UserWarning"


@pytest.mark.filterwarnings(OPCHECK_WARN)
@pytest.mark.parametrize("fmt", model.FORMATS)
def test_opcheck_linear(fmt):
    """Each linear op under opcheck, x contiguous, requiring grad, strided and
    expanded; the strided ones give the contiguous x's bits."""
    model.load_library()
    ops = torch.ops.llm
    op = {"q8_0": ops.linear_q8_0, "q4_0": ops.linear_q4_0}.get(fmt, ops.linear)
    rng = np.random.default_rng(3)
    w = model._prepare_matrix(rng.standard_normal((40, 64), dtype=np.float32), fmt)
    for m in (1, 5, 37):  # the decoding kernels, the packed / blocked ones
        x = torch.from_numpy(rng.standard_normal((m, 64), dtype=np.float32))
        want = op(x, w)
        torch.library.opcheck(op.default, (x, w))
        torch.library.opcheck(op.default, (x.clone().requires_grad_(), w))
        for xs in _strided(x):
            assert not xs.is_contiguous() or m == 1  # one row: contiguous either way
            torch.library.opcheck(op.default, (xs, w))
            got = op(xs, w)
            assert torch.equal(got, want.expand_as(got)), (fmt, m, xs.stride())


@pytest.mark.filterwarnings(OPCHECK_WARN)
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_opcheck_packed_linear(fmt):
    """pack_q8_0 / pack_q4_0 and linear_packed under opcheck, x contiguous,
    requiring grad, strided and expanded (the contiguous x's bits)."""
    model.load_library()
    ops = torch.ops.llm
    pack = ops.pack_q8_0 if fmt == "q8_0" else ops.pack_q4_0
    rng = np.random.default_rng(5)
    w = model._prepare_matrix(rng.standard_normal((44, 64), dtype=np.float32), fmt)
    torch.library.opcheck(pack.default, (w,))
    wp = pack(w)
    for m in (1, 5, 37):
        x = torch.from_numpy(rng.standard_normal((m, 64), dtype=np.float32))
        want = ops.linear_packed(x, wp, 44)
        torch.library.opcheck(ops.linear_packed.default, (x, wp, 44))
        torch.library.opcheck(ops.linear_packed.default, (x.clone().requires_grad_(), wp, 44))
        for xs in _strided(x):
            torch.library.opcheck(ops.linear_packed.default, (xs, wp, 44))
            got = ops.linear_packed(xs, wp, 44)
            assert torch.equal(got, want.expand_as(got)), (fmt, m, xs.stride())


@pytest.mark.filterwarnings(OPCHECK_WARN)
def test_opcheck_rmsnorm_swiglu_attention():
    model.load_library()
    ops = torch.ops.llm
    x, w = torch.randn(3, 32), torch.randn(32) + 1
    torch.library.opcheck(ops.rmsnorm.default, (x, w, 1e-5))
    torch.library.opcheck(ops.rmsnorm.default,
                          (x.clone().requires_grad_(), w.clone().requires_grad_(), 1e-5))
    gu = torch.randn(3, 64)
    want = ops.swiglu(gu)
    torch.library.opcheck(ops.swiglu.default, (gu,))
    torch.library.opcheck(ops.swiglu.default, (gu.clone().requires_grad_(),))
    for g in _strided(gu) + [gu[:1].expand(3, 64)]:
        torch.library.opcheck(ops.swiglu.default, (g,))
        assert torch.equal(ops.swiglu(g), ops.swiglu(g.contiguous()))
    assert torch.equal(ops.swiglu(_strided(gu)[0]), want)
    # attention writes its caches in place (Tensor(a!) in its schema): opcheck
    # checks that it says so, and that fake tensors get the right result
    cos, sin = model.rope_tables(model.Config("t", 128, 1, 4, 2, 64, 16, max_seq=16))
    for t, pos in ((3, 0), (1, 5)):
        kc, vc = torch.randn(2, 16, 32), torch.randn(2, 16, 32)
        qkv = torch.randn(t, 8 * 32)
        torch.library.opcheck(ops.attention.default, (qkv, kc, vc, cos, sin, pos, 4))
        torch.library.opcheck(ops.attention.default,
                              (qkv.clone().requires_grad_(), kc, vc, cos, sin, pos, 4))


@pytest.mark.filterwarnings(OPCHECK_WARN)
def test_opcheck_bench_lowp_linear():
    """bench/kernels/lowp_linear.c's op (bench/lowp_bench.py), Q8_0 and Q4_0."""
    model.load_library()  # the llm ops it is compared with
    spec = importlib.util.spec_from_file_location(
        "lowp_bench_for_llm", os.path.join(ROOT, "bench", "lowp_bench.py"))
    lb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lb)
    ops = lb.load_ops()
    rng = np.random.default_rng(4)
    none = torch.zeros(1)
    for fmt in ("q8_0", "q4_0"):
        w = model._prepare_matrix(rng.standard_normal((24, 64), dtype=np.float32), fmt)
        for m in (1, 6):
            x = torch.from_numpy(rng.standard_normal((m, 64), dtype=np.float32))
            torch.library.opcheck(ops.lowp_linear.default, (x, w, none, lb.W[fmt]))
            torch.library.opcheck(ops.lowp_linear.default,
                                  (x.clone().requires_grad_(), w, none, lb.W[fmt]))
            torch.testing.assert_close(ops.lowp_linear(x, w, none, lb.W[fmt]),
                                       torch.ops.llm.linear_q8_0(x, w) if fmt == "q8_0"
                                       else torch.ops.llm.linear_q4_0(x, w), rtol=0, atol=0)
