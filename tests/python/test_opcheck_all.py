"""Every example op against torch (issue 20, item 2): torch.library.opcheck
with inputs that require grad, in four layouts (contiguous, non-contiguous,
expanded with stride 0, and 0-size), and `.sum().backward()` giving torch's
gradients, for examples/ops (nn_ops), examples/relu (the four variants the
MLP example trains with), examples/activations, examples/tiles,
examples/seed003, the tiles bench's floor kernels
(bench/kernels/norm_floor.c) and the lowp bench's read ceiling
(lowp_widen), their backwards registered here. Views are
taken of leaf tensors, so the gradients checked are those of the leaves
(an expanded input's gradient is summed back)."""
import sys
import zlib

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.library import opcheck  # noqa: E402

import opcore.torch as ot  # noqa: E402
from conftest import REPO, RELU_VARIANTS, load_lib  # noqa: E402

for d in ("ops", "tiles"):
    sys.path.insert(0, str(REPO / "examples" / d))
import nn_ops  # noqa: E402
import tiles_ops  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LAYOUTS = ("contiguous", "non_contiguous", "expanded", "empty")
B = "B"  # the batch dim of a shape: 4, or 0 for the empty layout


@pytest.fixture(scope="module")
def libs(opcore_build_dir, relu_libs, seed003):
    nn_ops.load(build_directory=str(opcore_build_dir / "nn_ops"))
    tiles_ops.load(build_directory=str(opcore_build_dir / "tiles"))
    act = REPO / "examples" / "activations"
    load_lib(opcore_build_dir, "act_ops", act / "activations.c", act / "shape.c")
    ot.register_autograd("act_ops::silu", "act_ops::silu_backward")
    ot.register_autograd("act_ops::softmax", "act_ops::softmax_backward")
    ot.register_autograd("act_ops::softmax_plain", "act_ops::softmax_backward")
    ot.register_autograd("add_ops::tensor_add", lambda dy, a, b: (dy, dy))  # the seed's AddFunc backward
    for v in RELU_VARIANTS:
        ot.register_autograd(f"my_ops_{v}::relu_forward", f"my_ops_{v}::relu_backward")
    from opcore import custom_op

    bk = REPO / "bench" / "kernels"
    custom_op.loaded_libraries().get("norm_floor") or load_lib(
        opcore_build_dir, "norm_floor", bk / "norm_floor.c", bk / "norm_floor_shape.c",
        multicore=True)
    ot.register_autograd("norm_floor::one_pass", tiles_ops._rmsnorm_backward)
    ot.register_autograd("norm_floor::scale",
                         lambda g, x, w: (g * w, (g * x).reshape(-1, x.shape[-1]).sum(0)))
    ot.register_autograd("norm_floor::exp_rows", lambda g, x: g * x.exp())
    ot.register_autograd("norm_floor::copy", lambda g, x: g)
    custom_op.loaded_libraries().get("lowp") or load_lib(
        opcore_build_dir, "lowp", bk / "lowp_linear.c", bk / "lowp_shape.c")
    ot.register_autograd("lowp::lowp_widen", lambda g, w: g[:, None].expand(w.shape).clone())
    return True


def _flash_ref(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _rms_ref(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# name -> (op "ns::name", [tensor shapes, or a list of shapes for a Tensor[]], the other arguments
# (after the tensors, or {position: value}), the torch reference taking the op's arguments)
CASES = {
    "nn_ops.layer_norm": ("nn_ops::layer_norm", [(B, 3, 8), (8,), (8,)], {1: [8]},
                          lambda x, shape, w, b: F.layer_norm(x, shape, w, b)),
    "nn_ops.avg_pool2d": ("nn_ops::avg_pool2d", [(B, 2, 6, 6)], ([2, 2], [2, 2]),
                          lambda x, k, s: F.avg_pool2d(x, k, s)),
    "nn_ops.linear": ("nn_ops::linear", [(B, 10), (3, 10), (3,)], (), F.linear),
    "nn_ops.global_sum": ("nn_ops::global_sum", [(B, 5)], (), lambda x: x.sum()),
    "nn_ops.concat": ("nn_ops::concat", [[(B, 3), (B, 2)]], (1,), lambda xs, d: torch.cat(xs, d)),
    **{f"relu.{v}": (f"my_ops_{v}::relu_forward", [(B, 7)], (), torch.relu) for v in RELU_VARIANTS},
    "activations.silu": ("act_ops::silu", [(B, 7)], (), F.silu),
    "activations.softmax": ("act_ops::softmax", [(B, 7)], (), lambda x: x.softmax(-1)),
    "activations.softmax_plain": ("act_ops::softmax_plain", [(B, 7)], (), lambda x: x.softmax(-1)),
    "tiles.tensor_add": ("tiles::tensor_add", [(B, 37), (B, 37)], (), torch.add),
    "tiles.matmul": ("tiles::matmul", [(B, 9), (9, 5)], (), torch.matmul),
    "tiles.rmsnorm": ("tiles::rmsnorm", [(B, 16), (16,)], (1e-6,), _rms_ref),
    "tiles.layer_norm": ("tiles::layer_norm", [(B, 16), (16,), (16,)], (1e-5,),
                         lambda x, w, b, eps: F.layer_norm(x, [16], w, b, eps)),
    "tiles.softmax": ("tiles::softmax", [(B, 16)], (), lambda x: x.softmax(-1)),
    "tiles.flash_attention": ("tiles::flash_attention", [(1, 2, B, 8)] * 3, (False,), _flash_ref),
    "tiles.flash_attention_causal": ("tiles::flash_attention", [(1, 2, B, 8)] * 3, (True,), _flash_ref),
    "seed003.tensor_add": ("add_ops::tensor_add", [(B, 5), (B, 5)], (), torch.add),
    "norm_floor.one_pass": ("norm_floor::one_pass", [(B, 64), (64,)], (1e-6,), _rms_ref),
    "norm_floor.scale": ("norm_floor::scale", [(B, 64), (64,)], (), torch.mul),
    "norm_floor.exp_rows": ("norm_floor::exp_rows", [(B, 64)], (), torch.exp),
    "norm_floor.copy": ("norm_floor::copy", [(B, 64)], (), torch.clone),
    "lowp.widen": ("lowp::lowp_widen", [(B, 64)], (), lambda w: w.sum(1)),
}


def _leaf(shape, layout, g):
    """(leaf, view): the view (of `layout`) is what the op gets; the leaf's
    gradient is what is compared."""
    shape = tuple(0 if s == B and layout == "empty" else 4 if s == B else s for s in shape)
    if layout == "non_contiguous" and len(shape) >= 2:
        leaf = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=g).requires_grad_()
        return leaf, leaf.transpose(-1, -2)
    if layout == "non_contiguous":
        leaf = torch.randn(2 * shape[0], generator=g).requires_grad_()
        return leaf, leaf[::2]
    if layout == "expanded":  # stride 0 along the first dim of size > 1 (rows stay distinct: no constant row
        # for a norm to divide by ~0)
        d = next((i for i, s in enumerate(shape) if s > 1), 0)
        leaf = torch.randn(*shape[:d], 1, *shape[d + 1:], generator=g).requires_grad_()
        return leaf, leaf.expand(shape)
    leaf = torch.randn(*shape, generator=g).requires_grad_()
    return leaf, leaf


def inputs(name, layout):
    """(leaves, op args): every tensor input in `layout`, requiring grad."""
    _, shapes, others, _ = CASES[name]
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    leaves, args = [], []
    for s in shapes:
        if isinstance(s, list):
            made = [_leaf(x, layout, g) for x in s]
            leaves += [m[0] for m in made]
            args.append([m[1] for m in made])
        else:
            leaf, view = _leaf(s, layout, g)
            leaves.append(leaf)
            args.append(view)
    if isinstance(others, dict):
        for pos, value in sorted(others.items()):
            args.insert(pos, value)
        return leaves, args
    return leaves, args + list(others)


def op_of(name):
    ns, op = CASES[name][0].split("::")
    return getattr(getattr(torch.ops, ns), op).default


def first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(CASES))
def test_opcheck(libs, name, layout):
    _, args = inputs(name, layout)
    opcheck(op_of(name), args)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(CASES))
def test_sum_backward_matches_torch(libs, name, layout):
    reference = CASES[name][3]
    leaves, args = inputs(name, layout)
    first(op_of(name)(*args)).sum().backward()
    mine = [leaf.grad for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    reference(*args).sum().backward()
    for i, (m, leaf) in enumerate(zip(mine, leaves)):
        assert m is not None, f"{name}: no gradient for tensor input {i}"
        torch.testing.assert_close(m, leaf.grad, atol=2e-4, rtol=2e-4, msg=lambda s: f"{name} input {i}: {s}")


@pytest.mark.parametrize("layout", ["contiguous", "non_contiguous", "empty"])
def test_opcheck_sgd_in_place(libs, layout):
    """The in-place op (no gradient flows through it); an expanded parameter
    would be refused, as torch refuses writing into one."""
    g = torch.Generator().manual_seed(3)

    def tensors():
        return [_leaf(s, layout, g)[1].detach() for s in ((B, 3), (5,))]

    params, bufs, grads = tensors(), [torch.zeros_like(p) for p in tensors()], tensors()
    opcheck(torch.ops.nn_ops.sgd_momentum_.default, (params, bufs, grads, 0.1, 0.9))


def test_sgd_writes_non_contiguous_parameters_back(libs):
    p = torch.randn(3, 4)
    view, want = p.t(), p.t().clone()
    buf, grad = torch.zeros(4, 3), torch.randn(4, 3)
    torch.ops.nn_ops.sgd_momentum_([view], [buf], [grad], 0.5)
    opt = torch.optim.SGD([want.requires_grad_()], lr=0.5)
    want.grad = grad
    opt.step()
    torch.testing.assert_close(p.t(), want.detach())


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "requires_grad"])
def test_meta_tensors_after_register_autograd(libs, grad):
    """An op with register_autograd's fast path still answers meta tensors
    from its shape function (the fast path calls the C op only for CPU
    tensors), forward and backward."""
    for v in RELU_VARIANTS:
        x = torch.empty(3, 4, device="meta", requires_grad=grad)
        y = getattr(torch.ops, f"my_ops_{v}").relu_forward(x)
        assert y.device.type == "meta" and y.shape == (3, 4), v
        if grad:
            y.sum().backward()
            assert x.grad.device.type == "meta" and x.grad.shape == (3, 4), v
