"""extension-cpp's setup.py with opcore in place of torch.utils.cpp_extension:
OpLibrary for CppExtension, BuildOpLibraries for BuildExtension. The op
library is built when the wheel is built and installed inside the package."""
from setuptools import find_packages, setup

from opcore.setuptools import BuildOpLibraries, OpLibrary

library_name = "extension_cpp"

setup(
    name=library_name,
    version="0.0.1",
    packages=find_packages(exclude=["test"]),
    ext_modules=[
        OpLibrary(library_name, compute_srcs=["extension_cpp/csrc/muladd.c", "extension_cpp/csrc/lltm.c"],
                  shape_srcs=["extension_cpp/csrc/shape.c"], package=library_name)
    ],
    install_requires=["torch", "opcore"],
    description="Example of PyTorch custom ops written in C with opcore",
    cmdclass={"build_ext": BuildOpLibraries},
)
