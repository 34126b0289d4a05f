"""extension-cpp's checks of its ops, run against the opcore port: results
against the PyTorch expression, gradients against autograd of that
expression, and torch's opcheck of the registrations (schema, fake kernel,
autograd, torch.compile's AOT dispatch)."""
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


class TestCompile(TestCase):
    def test_compile_custom_only(self):
        def model(x):
            return extension_cpp.ops.mymuladd(x, x, 1.0)

        x = torch.randn(1000)
        with torch.no_grad():
            torch.testing.assert_close(torch.compile(model, fullgraph=True)(x), model(x))


if __name__ == "__main__":
    unittest.main()
