/* Checking an op library file before dlopen (see elfcheck.h).
 *
 * The checks read the file into memory and never trust an offset or size
 * from it without bounds-checking it first, so any bytes at all give an
 * answer, never a crash (tests/fuzz/fuzz_elfcheck.c runs them on
 * arbitrary input). The checksum trailer is the real guarantee that the
 * file is the one `opcore build` wrote; the structural checks make reading
 * it safe and give a precise message for a file that was never sealed. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "library/elfcheck.h"
#include "opcore/library.h"

/* The trailer: a magic word, then the XXH3-128 of everything before it. */
static const char seal_magic[16] = "\x7fopcore-seal-1\n";
#define SEAL_SIZE (sizeof seal_magic + 16)

#define OC_ELF_MAX_SIZE ((size_t)1 << 30) /* larger than any op library */

#if defined(__x86_64__)
#define OC_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define OC_ELF_MACHINE EM_AARCH64
#elif defined(__riscv)
#define OC_ELF_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define OC_ELF_MACHINE EM_PPC64
#elif defined(__s390x__)
#define OC_ELF_MACHINE EM_S390
#elif defined(__i386__)
#define OC_ELF_MACHINE EM_386
#elif defined(__arm__)
#define OC_ELF_MACHINE EM_ARM
#endif

#if __ELF_NATIVE_CLASS == 64
#define OC_ELF_CLASS ELFCLASS64
#else
#define OC_ELF_CLASS ELFCLASS32
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define OC_ELF_DATA ELFDATA2LSB
#else
#define OC_ELF_DATA ELFDATA2MSB
#endif

typedef struct elf_file {
    const unsigned char *data;
    size_t size;
    const char *shown;
    const ElfW(Ehdr) *eh;
    const ElfW(Phdr) *ph;
    const ElfW(Shdr) *sh;
} elf_file;

static oc_status corrupt(const elf_file *f, const char *what)
{
    return oc_set_error(OC_EIO,
                        "cannot load op library %s: the file is damaged (%s); rebuild it with "
                        "`opcore build` or custom_op.load",
                        f->shown, what);
}

static oc_status foreign(const elf_file *f, const char *what)
{
    return oc_set_error(OC_EABI, "cannot load op library %s: %s", f->shown, what);
}

/* [off, off + len) lies inside the file (no overflow). */
static bool in_file(const elf_file *f, uint64_t off, uint64_t len)
{
    return off <= f->size && len <= f->size - off;
}

static bool sealed(const elf_file *f)
{
    return f->size >= SEAL_SIZE && memcmp(f->data + f->size - SEAL_SIZE, seal_magic, sizeof seal_magic) == 0;
}

static bool seal_matches(const elf_file *f)
{
    size_t body = f->size - SEAL_SIZE;
    XXH128_canonical_t want, got;
    XXH128_canonicalFromHash(&got, XXH3_128bits(f->data, body));
    memcpy(&want, f->data + body + sizeof seal_magic, sizeof want);
    return memcmp(&want, &got, sizeof want) == 0;
}

static oc_status check_header(elf_file *f)
{
    const ElfW(Ehdr) *eh = f->eh;
    char msg[256];
    if (eh->e_ident[EI_CLASS] != OC_ELF_CLASS)
        return foreign(f, OC_ELF_CLASS == ELFCLASS64 ? "it is not a 64-bit library; this process is 64-bit"
                                                     : "it is not a 32-bit library; this process is 32-bit");
    if (eh->e_ident[EI_DATA] != OC_ELF_DATA)
        return foreign(f, "its byte order is not this machine's");
    if (eh->e_ident[EI_VERSION] != EV_CURRENT || eh->e_version != EV_CURRENT)
        return corrupt(f, "unknown ELF version");
    if (eh->e_type != ET_DYN) {
        snprintf(msg, sizeof msg, "it is an ELF %s, not a shared library",
                 eh->e_type == ET_EXEC ? "executable" : eh->e_type == ET_REL ? "object file" : "file");
        return foreign(f, msg);
    }
#ifdef OC_ELF_MACHINE
    if (eh->e_machine != OC_ELF_MACHINE) {
        snprintf(msg, sizeof msg, "it was built for another machine (ELF machine %u, this one is %u)",
                 (unsigned)eh->e_machine, (unsigned)OC_ELF_MACHINE);
        return foreign(f, msg);
    }
#endif
    if (eh->e_ehsize != sizeof(ElfW(Ehdr)) || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
        (eh->e_shnum && eh->e_shentsize != sizeof(ElfW(Shdr))))
        return corrupt(f, "bad ELF header sizes");
    if (eh->e_phnum == 0 || eh->e_phnum == PN_XNUM) return corrupt(f, "no program headers");
    if (eh->e_phoff % sizeof(void *) || !in_file(f, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)))) {
        snprintf(msg, sizeof msg, "truncated or bad program header table: %u entries at byte %llu, "
                 "file has %zu bytes", eh->e_phnum, (unsigned long long)eh->e_phoff, f->size);
        return corrupt(f, msg);
    }
    if (eh->e_shnum == 0 || eh->e_shoff % sizeof(void *) ||
        !in_file(f, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr))) ||
        eh->e_shstrndx >= eh->e_shnum) {
        snprintf(msg, sizeof msg, "truncated or bad section table: %u entries at byte %llu, "
                 "file has %zu bytes", eh->e_shnum, (unsigned long long)eh->e_shoff, f->size);
        return corrupt(f, msg);
    }
    f->ph = (const ElfW(Phdr) *)(f->data + eh->e_phoff);
    f->sh = (const ElfW(Shdr) *)(f->data + eh->e_shoff);
    return OC_OK;
}

static oc_status check_segments(const elf_file *f)
{
    int loads = 0, dynamics = 0;
    uint64_t last_end = 0;
    for (unsigned i = 0; i < f->eh->e_phnum; i++) {
        const ElfW(Phdr) *p = &f->ph[i];
        if (p->p_type == PT_NULL) continue;
        if (!in_file(f, p->p_offset, p->p_filesz)) return corrupt(f, "a segment lies past the end of the file (truncated?)");
        if (p->p_type == PT_LOAD) {
            if (p->p_filesz > p->p_memsz || p->p_memsz > OC_ELF_MAX_SIZE)
                return corrupt(f, "a loadable segment has a bad size");
            if (p->p_align > 1 && ((p->p_align & (p->p_align - 1)) || (p->p_vaddr - p->p_offset) % p->p_align))
                return corrupt(f, "a loadable segment is misaligned");
            if (loads && p->p_vaddr < last_end) return corrupt(f, "loadable segments overlap or are out of order");
            last_end = p->p_vaddr + p->p_memsz;
            if (last_end < p->p_vaddr || last_end > OC_ELF_MAX_SIZE) return corrupt(f, "a loadable segment is out of range");
            loads++;
        } else if (p->p_type == PT_DYNAMIC) {
            dynamics++;
            if (p->p_filesz < sizeof(ElfW(Dyn)) || p->p_filesz % sizeof(ElfW(Dyn)) ||
                p->p_offset % sizeof(void *))
                return corrupt(f, "bad dynamic section size");
            const ElfW(Dyn) *d = (const ElfW(Dyn) *)(f->data + p->p_offset);
            size_t n = p->p_filesz / sizeof *d, k = 0;
            while (k < n && d[k].d_tag != DT_NULL) k++;
            if (k == n) return corrupt(f, "the dynamic section has no end");
        }
    }
    if (!loads) return corrupt(f, "no loadable segment");
    if (dynamics != 1) return corrupt(f, "not exactly one dynamic section");
    return OC_OK;
}

static oc_status check_sections(const elf_file *f)
{
    for (unsigned i = 0; i < f->eh->e_shnum; i++) {
        const ElfW(Shdr) *s = &f->sh[i];
        if (s->sh_type != SHT_NOBITS && s->sh_type != SHT_NULL && !in_file(f, s->sh_offset, s->sh_size))
            return corrupt(f, "a section lies past the end of the file (truncated?)");
        if (s->sh_link >= f->eh->e_shnum) return corrupt(f, "a section links to a section that does not exist");
    }
    return OC_OK;
}

/* File offset of `len` bytes at virtual address `addr`, or -1. */
static int64_t vaddr_offset(const elf_file *f, uint64_t addr, uint64_t len)
{
    for (unsigned i = 0; i < f->eh->e_phnum; i++) {
        const ElfW(Phdr) *p = &f->ph[i];
        if (p->p_type != PT_LOAD || addr < p->p_vaddr) continue;
        uint64_t rel = addr - p->p_vaddr;
        if (rel <= p->p_filesz && len <= p->p_filesz - rel) return (int64_t)(p->p_offset + rel);
    }
    return -1;
}

/* The dynamic symbol `name`, or NULL. Every table is bounds-checked. */
static const ElfW(Sym) *find_symbol(const elf_file *f, const char *name)
{
    for (unsigned i = 0; i < f->eh->e_shnum; i++) {
        const ElfW(Shdr) *s = &f->sh[i];
        if (s->sh_type != SHT_DYNSYM || s->sh_entsize != sizeof(ElfW(Sym)) || s->sh_offset % sizeof(void *))
            continue;
        const ElfW(Shdr) *str = &f->sh[s->sh_link];
        if (str->sh_type != SHT_STRTAB || str->sh_size == 0) continue;
        const char *strtab = (const char *)f->data + str->sh_offset;
        if (strtab[str->sh_size - 1] != '\0') continue;
        const ElfW(Sym) *syms = (const ElfW(Sym) *)(f->data + s->sh_offset);
        size_t n = s->sh_size / sizeof *syms, len = strlen(name);
        for (size_t k = 0; k < n; k++)
            if (syms[k].st_name < str->sh_size && syms[k].st_shndx != SHN_UNDEF &&
                strncmp(strtab + syms[k].st_name, name, len + 1) == 0)
                return &syms[k];
    }
    return NULL;
}

static oc_status check_build_info(const elf_file *f)
{
    char msg[512];
    const ElfW(Sym) *info = find_symbol(f, "oc_build_info_entry");
    if (!info)
        return foreign(f, "it was not built by `opcore build` (no build info): rebuild it");
    uint32_t abi;
    size_t at = offsetof(oc_build_info, abi_version);
    int64_t off = vaddr_offset(f, info->st_value + at, sizeof abi);
    if (off < 0 || info->st_size < at + sizeof abi) return corrupt(f, "its build info is out of place");
    memcpy(&abi, f->data + off, sizeof abi);
    if (abi != OC_ABI_VERSION) {
        snprintf(msg, sizeof msg, "it was built for opcore ABI %u but this runtime is ABI %u: rebuild it",
                 abi, OC_ABI_VERSION);
        return foreign(f, msg);
    }
    return OC_OK;
}

oc_status oc__elf_check(const unsigned char *data, size_t size, const char *shown)
{
    elf_file f = {.data = data, .size = size, .shown = shown};
    char msg[256];
    if (size == 0)
        return oc_set_error(OC_EIO, "cannot load op library %s: the file is empty (0 bytes; an "
                                    "interrupted build or copy?): rebuild it", shown);
    if (size < SELFMAG || memcmp(data, ELFMAG, SELFMAG) != 0)
        return foreign(&f, "it is not a shared library (no ELF header)");
    if (size < sizeof(ElfW(Ehdr))) {
        snprintf(msg, sizeof msg, "truncated: %zu bytes, shorter than an ELF header", size);
        return corrupt(&f, msg);
    }
    /* A sealed file whose bytes changed since: say so before anything the
     * changed bytes might make us say. */
    bool has_seal = sealed(&f);
    if (has_seal && !seal_matches(&f))
        return corrupt(&f, "its contents do not match the checksum `opcore build` recorded: "
                           "bit flips, or a partial or mixed copy");
    f.eh = (const ElfW(Ehdr) *)data;
    oc_status st = check_header(&f);
    if (!st) st = check_segments(&f);
    if (!st) st = check_sections(&f);
    if (!st) st = check_build_info(&f);
    if (!st && !has_seal)
        st = corrupt(&f, "it has no checksum from `opcore build`: it was truncated or changed "
                         "after the build (strip, objcopy?)");
    return st;
}

oc_status oc__elf_check_file(const char *path, const char *shown)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return oc_set_error(errno == ENOENT ? OC_ENOTFOUND : OC_EIO, "cannot load op library %s: %s", shown,
                            strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return oc_set_error(OC_EIO, "cannot load op library %s: not a regular file", shown);
    }
    if ((uint64_t)st.st_size > OC_ELF_MAX_SIZE) {
        close(fd);
        return oc_set_error(OC_EABI, "cannot load op library %s: %lld bytes is too large for an op library",
                            shown, (long long)st.st_size);
    }
    /* Read, not mmap: a file truncated while we look would be a SIGBUS. */
    size_t size = (size_t)st.st_size, got = 0;
    unsigned char *data = oc__malloc(size ? size : 1);
    if (!data) {
        close(fd);
        return oc_set_error(OC_ENOMEM, "out of memory reading %s", shown);
    }
    while (got < size) {
        ssize_t n = read(fd, data + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    oc_status result = oc__elf_check(data, got, shown);
    oc__free(data);
    return result;
}

oc_status oc__elf_seal(const char *path)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return oc_set_error(OC_EIO, "cannot seal %s: %s", path, strerror(errno));
    XXH3_state_t *s = XXH3_createState();
    unsigned char buf[1 << 16];
    size_t n;
    bool ok = s && XXH3_128bits_reset(s) == XXH_OK;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = XXH3_128bits_update(s, buf, n) == XXH_OK;
    ok = ok && !ferror(f);
    if (ok) {
        XXH128_canonical_t h;
        XXH128_canonicalFromHash(&h, XXH3_128bits_digest(s));
        ok = fseek(f, 0, SEEK_END) == 0 && fwrite(seal_magic, 1, sizeof seal_magic, f) == sizeof seal_magic &&
             fwrite(&h, 1, sizeof h, f) == sizeof h;
    }
    XXH3_freeState(s);
    if (fclose(f) != 0) ok = false;
    return ok ? OC_OK : oc_set_error(OC_EIO, "cannot seal %s: %s", path, strerror(errno));
}
