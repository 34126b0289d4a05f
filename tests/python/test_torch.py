"""opcore ops as torch ops: eager CPU path, autograd, torch.compile,
torch.export, opcheck, errors, printf, threads, builds."""
import os
import subprocess
import sys
import textwrap
import threading

import pytest

torch = pytest.importorskip("torch")

import opcore  # noqa: E402
import opcore.torch as ot  # noqa: E402
from opcore import custom_op  # noqa: E402
from conftest import RELU, RELU_VARIANTS, REPO  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def ops_of(variant):
    return getattr(torch.ops, f"my_ops_{variant}")


def inputs():
    """Contiguous, transposed, strided-slice, expanded and requires_grad inputs."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(40, 30, generator=g)
    yield "contiguous", torch.randn(7, 9, generator=g)
    yield "one_element", torch.randn(1, 1, generator=g)
    yield "transposed", base.t()
    yield "sliced", base[::3, 1::2]
    yield "expanded", torch.randn(1, 13, generator=g).expand(5, 13)
    yield "requires_grad", torch.randn(6, 11, generator=g, requires_grad=True)
    yield "large", torch.randn(300, 257, generator=g)
    yield "empty", torch.empty(0, 5)


# ---- eager ------------------------------------------------------------------


@pytest.mark.parametrize("variant", RELU_VARIANTS)
def test_eager_forward_backward_match_torch(relu_libs, variant):
    ops = ops_of(variant)
    for label, x in inputs():
        y = ops.relu_forward(x)
        assert y.shape == x.shape and y.dtype == x.dtype and y.device.type == "cpu", label
        assert torch.equal(y, torch.relu(x.detach())), label
        grad = torch.randn(x.shape)
        gx = ops.relu_backward(grad, x)
        assert torch.equal(gx, torch.where(x.detach() > 0, grad, torch.zeros(()))), label
    # the input is viewed in place, never written
    x = torch.randn(8, 8)
    before = x.clone()
    ops.relu_forward(x)
    assert torch.equal(x, before)


def test_direct_op_object(relu_libs):
    lib = relu_libs["elementwise"]
    assert set(lib.ops) == {"relu_forward", "relu_backward"}
    op = lib.relu_forward
    assert op.qualname == "my_ops_elementwise::relu_forward"
    assert op.schema == "relu_forward(Tensor x) -> Tensor"
    assert op.args == [("x", "Tensor", False, None)]
    x = torch.randn(3, 4)
    assert torch.equal(op(x), torch.relu(x))
    assert op.infer(torch.empty(3, 4, device="meta")) == [((3, 4), "float32")]


def test_scalars_defaults_kwargs_and_other_dtypes(test_ops):
    T = torch.ops.oc_torch_test
    x = torch.randn(4, 5)
    assert torch.allclose(T.scale(x), 2 * x)
    assert torch.allclose(T.scale(x, 0.5), 0.5 * x)
    assert torch.allclose(T.scale(x, alpha=3, neg=True), -3 * x)
    s = T.sum_rows(x)
    assert s.dtype == torch.float64 and s.shape == (4,)
    assert torch.allclose(s, x.double().sum(1))
    assert test_ops.scale.args == [("x", "Tensor", False, None), ("alpha", "float", True, 2.0),
                                   ("neg", "bool", True, False)]


def test_load_library_again_is_a_noop(relu_libs):
    lib = relu_libs["tcm"]
    again = custom_op.load_library(lib.path)
    assert again.path == lib.path and again.name == lib.name
    x = torch.randn(3, 3)
    assert torch.equal(torch.ops.my_ops_tcm.relu_forward(x), torch.relu(x))


def test_load_library_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        custom_op.load_library(tmp_path / "libnothing.so")


def test_meta_tensors_use_the_shape_function(relu_libs, test_ops):
    y = torch.ops.my_ops_elementwise.relu_forward(torch.empty(3, 4, device="meta"))
    assert y.device.type == "meta" and y.shape == (3, 4)
    s = torch.ops.oc_torch_test.sum_rows(torch.empty(6, 2, device="meta"))
    assert s.device.type == "meta" and s.shape == (6,) and s.dtype == torch.float64


# ---- autograd ----------------------------------------------------------------


def seeds_relu_function(ops):
    class Relu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return ops.relu_forward(input)

        @staticmethod
        def backward(ctx, grad):
            input, = ctx.saved_tensors
            return ops.relu_backward(grad, input), None

    return Relu


def check_grad_vs_torch(fn, shape=(5, 7), seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, requires_grad=True)
    w = torch.randn(shape, generator=g)
    (fn(x) * w).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    (torch.relu(x2) * w).sum().backward()
    assert torch.equal(x.grad, x2.grad)


@pytest.mark.parametrize("variant", RELU_VARIANTS)
def test_seeds_autograd_function(relu_libs, variant):
    Relu = seeds_relu_function(ops_of(variant))
    check_grad_vs_torch(Relu.apply)


def test_register_autograd_one_liner(relu_libs):
    ot.register_autograd("my_ops_stream::relu_forward", "my_ops_stream::relu_backward")
    check_grad_vs_torch(torch.ops.my_ops_stream.relu_forward)
    # non-contiguous input and an expanded (stride 0) incoming gradient
    x = torch.randn(9, 4).t().requires_grad_()
    torch.ops.my_ops_stream.relu_forward(x).sum().backward()
    assert torch.equal(x.grad, (x.detach() > 0).float())


def test_register_autograd_with_a_callable(relu_libs):
    calls = []

    def backward(grad, x):
        calls.append(1)
        return torch.ops.my_ops_tcm.relu_backward(grad, x)

    ot.register_autograd(torch.ops.my_ops_tcm.relu_forward, backward)
    check_grad_vs_torch(torch.ops.my_ops_tcm.relu_forward)
    assert calls


def test_seeds_code_verbatim_in_subprocess(tmp_path):
    """Seed 000/002's Python, with the import changed, on the name my_ops."""
    script = tmp_path / "seed.py"
    script.write_text(textwrap.dedent(f"""
        import os
        import torch
        from opcore import custom_op

        custom_op.load(
            name='relu',
            compute_srcs=[{str(RELU / 'elementwise' / 'relu.c')!r}],
            shape_srcs=[{str(RELU / 'shape.c')!r}],
            build_directory=os.getcwd(),
        )
        custom_op.load_library(os.path.join(os.getcwd(), 'librelu.so'))

        class Relu(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input):
                ctx.save_for_backward(input)
                return torch.ops.my_ops.relu_forward(input)

            @staticmethod
            def backward(ctx, grad):
                input, = ctx.saved_tensors
                return torch.ops.my_ops.relu_backward(grad, input), None

        x = torch.randn(4, 6, requires_grad=True)
        Relu.apply(x).sum().backward()
        assert torch.equal(x.grad, (x > 0).float())
        print("seed ok")
    """))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "seed ok" in p.stdout
    assert (tmp_path / "librelu.so").exists()


# ---- torch.compile / torch.export / opcheck --------------------------------


def op_targets(graph):
    return [n.target for n in graph.nodes if n.op == "call_function"]


def is_opcore_node(target, ns, name):
    return str(target) in (f"{ns}.{name}", f"{ns}.{name}.default")


@pytest.mark.parametrize("variant", ["elementwise", "multicore"])
def test_compile_fullgraph_has_the_op_node(relu_libs, variant):
    ops = ops_of(variant)
    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @torch.compile(fullgraph=True, backend=recording_backend)
    def f(a):
        return ops.relu_forward(a * 2) + 1

    a = torch.randn(6, 5)
    assert torch.allclose(f(a), torch.relu(a * 2) + 1)
    assert graphs, "the backend never saw a graph"
    targets = op_targets(graphs[0].graph)
    assert any(is_opcore_node(t, f"my_ops_{variant}", "relu_forward") for t in targets), targets


def test_compile_inductor_and_seeds_function(relu_libs):
    Relu = seeds_relu_function(torch.ops.my_ops_elementwise)
    f = torch.compile(lambda a: Relu.apply(a) * 3, fullgraph=True)
    a = torch.randn(4, 4)
    assert torch.allclose(f(a), torch.relu(a) * 3)


def test_compile_training_with_one_liner(relu_libs):
    ot.register_autograd("my_ops_elementwise::relu_forward", "my_ops_elementwise::relu_backward")
    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    f = torch.compile(lambda a: torch.ops.my_ops_elementwise.relu_forward(a).sum(), fullgraph=True,
                      backend=recording_backend)
    x = torch.randn(5, 3, requires_grad=True)
    f(x).backward()
    assert torch.equal(x.grad, (x.detach() > 0).float())
    assert any(is_opcore_node(t, "my_ops_elementwise", "relu_forward") for t in op_targets(graphs[0].graph))


def test_compile_fake_output_dtype_and_shape(test_ops):
    f = torch.compile(lambda a: torch.ops.oc_torch_test.sum_rows(a) * 2, fullgraph=True, backend="aot_eager")
    a = torch.randn(3, 4)
    out = f(a)
    assert out.dtype == torch.float64 and torch.allclose(out, a.double().sum(1) * 2)


def test_export_has_the_op_node(relu_libs):
    class M(torch.nn.Module):
        def forward(self, a):
            return torch.ops.my_ops_tcm.relu_forward(a + 1)

    a = torch.randn(3, 8)
    ep = torch.export.export(M(), (a,))
    assert any(is_opcore_node(t, "my_ops_tcm", "relu_forward") for t in op_targets(ep.graph))
    assert torch.allclose(ep.module()(a), torch.relu(a + 1))


def opcheck_cases():
    for variant in RELU_VARIANTS:
        yield variant, "relu_forward"
        yield variant, "relu_backward"


@pytest.mark.parametrize("variant,opname", list(opcheck_cases()))
def test_opcheck(relu_libs, variant, opname):
    ns = f"my_ops_{variant}"
    op = getattr(getattr(torch.ops, ns), opname).default
    x = torch.randn(5, 6)
    if opname == "relu_forward":
        ot.register_autograd(f"{ns}::relu_forward", f"{ns}::relu_backward")
        samples = [(x.requires_grad_(),), (torch.randn(7, 3).t(),)]
    else:
        samples = [(torch.randn(5, 6), x), (torch.randn(4, 4).t(), torch.randn(4, 4))]
    for args in samples:
        result = torch.library.opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), result


def test_opcheck_test_ops(test_ops):
    x = torch.randn(4, 5)
    for op, args, kwargs in [(torch.ops.oc_torch_test.scale.default, (x, 1.5), {"neg": True}),
                             (torch.ops.oc_torch_test.sum_rows.default, (x,), {}),
                             (torch.ops.oc_torch_test.add.default, (x, x.t().contiguous().t()), {})]:
        result = torch.library.opcheck(op, args, kwargs)
        assert all(v == "SUCCESS" for v in result.values()), result


# ---- errors: each followed by a successful call ---------------------------------


def assert_works(ops=None):
    ops = ops or torch.ops.my_ops_elementwise
    x = torch.randn(3, 4)
    assert torch.equal(ops.relu_forward(x), torch.relu(x))


def test_error_wrong_arity(relu_libs):
    op = relu_libs["elementwise"].relu_forward
    with pytest.raises(opcore.OpArgumentError, match="my_ops_elementwise::relu_forward.*takes 1 argument"):
        op(torch.randn(2, 2), torch.randn(2, 2))
    with pytest.raises(opcore.OpArgumentError, match="relu_forward.*missing argument 1 'x'"):
        op()
    with pytest.raises(RuntimeError, match="relu_forward.*missing value for argument 'x'"):
        torch.ops.my_ops_elementwise.relu_forward()  # torch's own schema check
    assert_works()


def test_error_wrong_argument_type(relu_libs, test_ops):
    op = relu_libs["elementwise"].relu_forward
    with pytest.raises(TypeError, match="relu_forward.*argument 1 'x': expected a Tensor .*got float"):
        op(1.5)
    with pytest.raises(opcore.OpArgumentError, match="scale.*argument 3 'neg': expected bool"):
        test_ops.scale(torch.randn(2), 2.0, neg=3)
    with pytest.raises(opcore.OpArgumentError, match="unexpected keyword argument 'beta'"):
        test_ops.scale(torch.randn(2), beta=1.0)
    assert_works()


def test_error_wrong_dtype_kernel_check(relu_libs):
    with pytest.raises(opcore.OpError, match="my_ops_elementwise::relu_forward.*takes float32, got float64") as e:
        torch.ops.my_ops_elementwise.relu_forward(torch.randn(2, 3, dtype=torch.float64))
    assert e.value.status == "OC_EKERNEL" and e.value.op == "my_ops_elementwise::relu_forward"
    with pytest.raises(opcore.OpArgumentError, match="relu_forward.*complex32"):
        relu_libs["elementwise"].relu_forward(torch.zeros(2, 2, dtype=torch.complex32))
    assert_works()


def test_status_and_dtype_lists_come_from_c(relu_libs):
    """Python reads the status and dtype vocabularies from _C (OC_STATUS_MAP, OC_DTYPE_MAP)."""
    names = opcore._C.status_names()
    assert names[:3] == ("OC_OK", "OC_ERROR", "OC_EINVAL") and names[-1] == "OC_EMETA"
    with pytest.raises(opcore.OpError) as e:
        torch.ops.my_ops_elementwise.relu_forward(torch.randn(2, 3, dtype=torch.float64))
    assert names[e.value.code] == e.value.status == "OC_EKERNEL"
    assert opcore.torch.to_torch_dtype("bfloat16") is torch.bfloat16
    assert opcore.torch.to_torch_dtype("bool") is torch.bool
    assert len(opcore._C.dtype_names()) == 12
    assert opcore.torch.to_torch_dtype("complex128") is torch.complex128


def test_error_non_cpu_tensor(relu_libs):
    op = relu_libs["elementwise"].relu_forward
    with pytest.raises(opcore.OpArgumentError, match=r"relu_forward.*argument 1 'x' is on device 'meta'"):
        op(torch.empty(2, 2, device="meta"))
    assert_works()


def test_error_shape_function(test_ops):
    with pytest.raises(opcore.OpError, match="oc_torch_test::only_1d.*only_1d takes a 1-D tensor, got 2 dims"):
        torch.ops.oc_torch_test.only_1d(torch.randn(2, 2))
    with pytest.raises(opcore.OpError, match="oc_torch_test::add.*one shape"):
        torch.ops.oc_torch_test.add(torch.randn(2, 2), torch.randn(3))
    x = torch.randn(5)
    assert torch.equal(torch.ops.oc_torch_test.only_1d(x), x)
    assert_works(torch.ops.my_ops_stream) if hasattr(torch.ops, "my_ops_stream") else None


def test_error_kernel_fault(test_ops):
    for _ in range(3):
        with pytest.raises(opcore.OpError, match="oc_torch_test::fault.*(Segmentation fault|SIGSEGV)") as e:
            torch.ops.oc_torch_test.fault(torch.randn(3))
        assert e.value.status == "OC_EFAULT"
        x = torch.randn(4)
        assert torch.allclose(torch.ops.oc_torch_test.scale(x), 2 * x)


def test_error_stack_overflow(stack_ops):
    x = torch.randn(3, 3)
    assert stack_ops.stack_size == 32768
    with pytest.raises(opcore.OpError, match="oc_torch_stack::recurse.*stack overflow") as e:
        torch.ops.oc_torch_stack.recurse(x, 1_000_000)
    assert e.value.status == "OC_ESTACK"
    assert torch.equal(torch.ops.oc_torch_stack.recurse(x, 10), x)


def test_build_error_carries_compiler_message(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("#include <opcore/kernel.h>\n"
                   "oc_tensor *relu_forward(const oc_tensor *x) { return not_declared_anywhere(x); }\n"
                   "oc_tensor *relu_backward(const oc_tensor *g, const oc_tensor *x) { return 0; }\n")
    with pytest.raises(opcore.BuildError, match="not_declared_anywhere") as e:
        custom_op.load(name="bad_relu", compute_srcs=[str(bad)], shape_srcs=[str(RELU / "shape.c")],
                       build_directory=str(tmp_path))
    assert "bad.c" in str(e.value)


# ---- printf, threads ------------------------------------------------------------


def test_kernel_printf_reaches_stdout(test_ops, capfd):
    x = torch.randn(2, 3)
    y = torch.ops.oc_torch_test.hello(x)
    assert torch.equal(y, x)
    out, _ = capfd.readouterr()
    assert "hello from an opcore kernel: 6 elements" in out


def run_threads(worker, n):
    """Run worker(0..n-1) on n threads at once and wait for them."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.parametrize("variant", RELU_VARIANTS)
def test_concurrent_calls_from_threads(relu_libs, variant):
    ops = ops_of(variant)
    errors = []

    def worker(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            for i in range(40):
                x = torch.randn(17 + seed, 33 + i % 7, generator=g)
                if i % 2:
                    x = x.t()
                if not torch.equal(ops.relu_forward(x), torch.relu(x)):
                    errors.append(f"thread {seed} call {i}: wrong result")
                grad = torch.randn(x.shape, generator=g)
                if not torch.equal(ops.relu_backward(grad, x), torch.where(x > 0, grad, torch.zeros(()))):
                    errors.append(f"thread {seed} call {i}: wrong backward")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    run_threads(worker, 6)
    assert not errors, errors[:5]


def test_backward_from_several_threads(relu_libs):
    ot.register_autograd("my_ops_multicore::relu_forward", "my_ops_multicore::relu_backward")
    Relu = seeds_relu_function(torch.ops.my_ops_tcm)
    errors = []

    def worker(seed):
        try:
            for fn in (torch.ops.my_ops_multicore.relu_forward, Relu.apply) * 10:
                check_grad_vs_torch(fn, shape=(31, 9 + seed), seed=seed)
        except Exception as e:  # pragma: no cover
            errors.append(repr(e))

    run_threads(worker, 4)
    assert not errors, errors[:5]


def test_import_opcore_does_not_import_torch():
    code = "import sys, opcore, opcore.custom_op; assert 'torch' not in sys.modules; print('ok')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr


def test_package_layout_serves_the_build_tool():
    lib_dir = opcore.lib_dir()
    inc_dir = opcore.include_dir()
    assert os.path.exists(os.path.join(lib_dir, "libopcore.so"))
    assert os.path.exists(os.path.join(inc_dir, "opcore", "library.h"))
    assert REPO.exists()
