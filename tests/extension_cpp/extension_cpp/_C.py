"""In place of extension-cpp's compiled _C module: loads the op library
built into this package (libextension_cpp.so) and registers its ops as
torch.ops.extension_cpp.*; rebuilt from the shipped sources only if the
prebuilt one does not fit this machine."""
import opcore

library = opcore.load_packaged(__package__, "extension_cpp")
