// A C++ program with no Python that runs an AOTInductor package calling
// opcore ops (tests/python/test_ship_aoti.py builds and runs it):
//
//     host <op library> <torch kernel shim> <model.pt2>
//
// It loads the op library with libopcore, has the shim register the
// library's ops with torch's dispatcher (oc_torch_shim_register_library),
// runs the package on a fixed input with torch's AOTIModelPackageLoader and
// prints the result, one value a line.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

#include <opcore/host.h>

#include <dlfcn.h>

#include <cstdio>

int main(int argc, char **argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s LIBRARY SHIM PACKAGE\n", argv[0]);
        return 2;
    }
    oc_library *lib = nullptr;
    if (oc_library_load(argv[1], &lib) != OC_OK) {
        std::fprintf(stderr, "%s\n", oc_errmsg());
        return 1;
    }
    void *shim = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    auto reg = shim ? reinterpret_cast<int (*)(const oc_library *, char *, size_t)>(
                          dlsym(shim, "oc_torch_shim_register_library"))
                    : nullptr;
    char err[512] = "";
    if (!reg || reg(lib, err, sizeof err) < 0) {
        std::fprintf(stderr, "cannot register the ops: %s\n", shim ? err : dlerror());
        return 1;
    }
    torch::inductor::AOTIModelPackageLoader loader(argv[3]);
    torch::Tensor x = torch::arange(24, torch::kFloat).reshape({3, 8}).div(10).sub(1);
    std::vector<torch::Tensor> out = loader.run({x});
    torch::Tensor y = out.at(0).contiguous();
    for (int64_t i = 0; i < y.numel(); i++) std::printf("%.7g\n", y.data_ptr<float>()[i]);
    return 0;
}
