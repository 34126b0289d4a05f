"""extension-cpp's checks of its ops, run against the opcore port: results
against the PyTorch expression, gradients against autograd of that
expression, and torch's opcheck of the registrations (schema, fake kernel,
autograd, torch.compile's AOT dispatch). TestLLTM is the LLTM of
extension-cpp's history (commit 015c15d): its checks on CPU, plus float32,
strides and errors."""
import unittest

import torch
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.optests import opcheck

import extension_cpp


def _inputs(shapes_and_grads, extra):
    out = []
    for (shape_a, grad_a, shape_b, grad_b), c in zip(shapes_and_grads, extra):
        out.append([torch.randn(shape_a, requires_grad=grad_a), torch.randn(shape_b, requires_grad=grad_b), c])
    return out


class TestMyMulAdd(TestCase):
    def samples(self, requires_grad=False):
        g = requires_grad
        return _inputs([((3,), g, (3,), g), ((20,), g, (20,), g), ((20,), g, (20,), False),
                        ((2, 3), False, (2, 3), g)], [1, 3.14, -123, -0.3])

    def test_correctness_cpu(self):
        for a, b, c in self.samples():
            torch.testing.assert_close(extension_cpp.ops.mymuladd(a, b, c), a * b + c)

    def test_non_contiguous_cpu(self):
        a, b = torch.randn(4, 6).t(), torch.randn(6, 4)
        torch.testing.assert_close(extension_cpp.ops.mymuladd(a, b, 2.0), a * b + 2.0)

    def test_gradients_cpu(self):
        for args in self.samples(requires_grad=True):
            wrt = [t for t in args[:2] if t.requires_grad]
            out = extension_cpp.ops.mymuladd(*args)
            grad_out = torch.randn_like(out)
            got = torch.autograd.grad(out, wrt, grad_out)
            want = torch.autograd.grad(args[0] * args[1] + args[2], wrt, grad_out)
            torch.testing.assert_close(got, want)

    def test_opcheck_cpu(self):
        for args in self.samples(requires_grad=True) + self.samples():
            opcheck(torch.ops.extension_cpp.mymuladd.default, args)

    def test_bad_input_is_refused(self):
        with self.assertRaisesRegex(Exception, "shape"):
            extension_cpp.ops.mymuladd(torch.randn(3), torch.randn(4), 1.0)


class TestMyAddOut(TestCase):
    def samples(self, requires_grad=False):
        return [[torch.randn(n, requires_grad=requires_grad) for _ in range(3)] for n in (3, 20)]

    def test_correctness_cpu(self):
        for a, b, out in self.samples():
            extension_cpp.ops.myadd_out(a, b, out)
            torch.testing.assert_close(out, a + b)

    def test_opcheck_cpu(self):
        for args in self.samples(requires_grad=True) + self.samples():
            opcheck(torch.ops.extension_cpp.myadd_out.default, args)


def lltm_inputs(*, dtype=torch.float64, requires_grad=False, batch=3, features=17, state=5):
    """input, weights, bias, old_h, old_cell, as upstream's sample_inputs makes them."""
    kw = {"dtype": dtype, "requires_grad": requires_grad}
    return (torch.randn(batch, features, **kw), torch.randn(3 * state, features + state, **kw),
            torch.randn(1, 3 * state, **kw), torch.randn(batch, state, **kw), torch.randn(batch, state, **kw))


class TestLLTM(TestCase):
    def test_correctness_cpu(self):
        args = lltm_inputs()
        result = extension_cpp.ops.lltm(*args)
        self.assertEqual(len(result), 2)
        torch.testing.assert_close(result, extension_cpp.ops.reference_lltm(*args))

    def test_float32_and_other_sizes_cpu(self):
        for batch, features, state in ((1, 1, 1), (4, 3, 8), (2, 30, 2)):
            args = lltm_inputs(dtype=torch.float32, batch=batch, features=features, state=state)
            result = extension_cpp.ops.lltm(*args)
            self.assertEqual(result[0].dtype, torch.float32)
            torch.testing.assert_close(result, extension_cpp.ops.reference_lltm(*args))

    def test_saved_results_cpu(self):
        # the five further results feed lltm_backward: each must be what it is named
        x, w, b, h, c = lltm_inputs()
        new_h, new_cell, input_gate, output_gate, candidate_cell, X, gate_weights = \
            torch.ops.extension_cpp.lltm_forward.default(x, w, b, h, c)
        torch.testing.assert_close(X, torch.cat([h, x], dim=1))
        torch.testing.assert_close(gate_weights, torch.nn.functional.linear(X, w, b))
        gates = gate_weights.chunk(3, dim=1)
        torch.testing.assert_close(input_gate, torch.sigmoid(gates[0]))
        torch.testing.assert_close(output_gate, torch.sigmoid(gates[1]))
        torch.testing.assert_close(candidate_cell, torch.nn.functional.elu(gates[2]))

    def test_non_contiguous_cpu(self):
        x, w, b, h, c = lltm_inputs()
        args = (x.t().contiguous().t(), w.t().contiguous().t(), b.reshape(-1), h[:, :], c.t().contiguous().t())
        torch.testing.assert_close(extension_cpp.ops.lltm(*args), extension_cpp.ops.reference_lltm(*args))

    def test_gradients_cpu(self):
        torch.autograd.gradcheck(extension_cpp.ops.lltm, lltm_inputs(requires_grad=True))

    def test_gradients_against_autograd_cpu(self):
        args = lltm_inputs(requires_grad=True)
        got_h, got_cell = extension_cpp.ops.lltm(*args)
        want_h, want_cell = extension_cpp.ops.reference_lltm(*args)
        seeds = torch.randn_like(got_h), torch.randn_like(got_cell)
        got = torch.autograd.grad((got_h, got_cell), args, seeds)
        want = torch.autograd.grad((want_h, want_cell), args, seeds)
        torch.testing.assert_close(got, want)

    def test_opcheck_cpu(self):
        opcheck(torch.ops.extension_cpp.lltm_forward.default, lltm_inputs())

    def test_compile_cpu(self):
        args = lltm_inputs()
        with torch.no_grad():
            torch.testing.assert_close(torch.compile(extension_cpp.ops.lltm, fullgraph=True)(*args),
                                       extension_cpp.ops.reference_lltm(*args))

    def test_bad_input_is_refused(self):
        x, w, b, h, c = lltm_inputs()
        with self.assertRaisesRegex(Exception, r"lltm_forward: weights must be \[15, 22\]"):
            extension_cpp.ops.lltm(x, w[:, 1:], b, h, c)
        with self.assertRaisesRegex(Exception, "lltm_forward: old_h is float32 but input is float64"):
            extension_cpp.ops.lltm(x, w, b, h.float(), c)
        with self.assertRaisesRegex(Exception, "lltm_forward: input must be float32 or float64, got int64"):
            extension_cpp.ops.lltm(x.long(), w, b, h, c)


class TestCompile(TestCase):
    def test_compile_custom_only(self):
        def model(x):
            return extension_cpp.ops.mymuladd(x, x, 1.0)

        x = torch.randn(1000)
        with torch.no_grad():
            torch.testing.assert_close(torch.compile(model, fullgraph=True)(x), model(x))


if __name__ == "__main__":
    unittest.main()
