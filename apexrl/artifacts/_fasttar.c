/* apexrl.artifacts._fasttar: the C fast paths of apexrl.artifacts.archive_extract
   (extraction of plain archives), of apexrl.tasks.pack (the deterministic tar of a folder:
   see tar_dir below) and of the local environment's world copy (copy_tree, at the end).

   extract(raw, dest, strip, limits, compressed_size)  an uncompressed tar
   extract_gz(blob, dest, strip, limits)                a gzip tar, inflated here (zlib)
     limits = (max_members, max_member_bytes, max_total_bytes, max_ratio, ratio_floor, umask)
     -> (n_files, n_dirs, n_bytes) once the tree is written, or
     -> None, having written nothing, for anything it does not take as given.
   The GIL is released for all of it: unpack's threads run these side by side.

   It takes only what the Python extractor would write without a question: ustar/GNU
   headers whose checksum, octal fields and bounds are right, PAX records that set
   `path` or `size` (or keys extraction ignores), regular files and folders, names
   of ASCII components that are neither empty, ".", nor "..", within every limit.
   A leading "./" is dropped, as check_name does. Everything else (links, devices,
   long-name records, other spellings to normalise, a limit hit)
   is None, and the Python extractor, which names the member and the reason, runs
   instead. The check is a full pass over the headers before the first write.

   Writing never follows a link: every folder is made with mkdirat and opened with
   O_DIRECTORY|O_NOFOLLOW relative to its parent's descriptor, every file is made
   with O_CREAT|O_EXCL|O_NOFOLLOW. A write that fails part way (a duplicate name, a
   file where a folder goes, a full disk) raises OSError; the caller clears the
   folder (it was empty) and runs the Python extractor, which decides. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define NAME_CAP 4096 /* longer names: the Python path */
#define MAX_DEPTH 128 /* deeper trees: the Python path */

typedef struct {
    size_t name_off; /* into the names arena */
    size_t name_len;
    int is_dir;
    int exec;
    size_t data_off; /* into raw */
    size_t size;
} entry_t;

typedef struct {
    entry_t *items;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
} plan_t;

static void plan_free(plan_t *p) {
    free(p->items);
    free(p->names);
}

/* 0 ok, -1 out of memory */
static int plan_add(plan_t *p, const char *name, size_t len, int is_dir, int exec,
                    size_t data_off, size_t size) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        entry_t *items = realloc(p->items, cap * sizeof(entry_t));
        if (!items) return -1;
        p->items = items;
        p->cap = cap;
    }
    if (p->names_len + len > p->names_cap) {
        size_t cap = p->names_cap ? p->names_cap : 4096;
        while (cap < p->names_len + len) cap *= 2;
        char *names = realloc(p->names, cap);
        if (!names) return -1;
        p->names = names;
        p->names_cap = cap;
    }
    memcpy(p->names + p->names_len, name, len);
    entry_t *e = &p->items[p->n++];
    e->name_off = p->names_len;
    e->name_len = len;
    e->is_dir = is_dir;
    e->exec = exec;
    e->data_off = data_off;
    e->size = size;
    p->names_len += len;
    return 0;
}

/* A tar numeric field as archive_extract._octal reads it: up to the first NUL, spaces
   trimmed both ends, octal digits only (empty is 0). -1: not for this path. */
static int parse_octal(const unsigned char *f, size_t len, uint64_t *out) {
    size_t end = 0;
    while (end < len && f[end]) end++;
    size_t s = 0;
    while (s < end && f[s] == ' ') s++;
    size_t e = end;
    while (e > s && f[e - 1] == ' ') e--;
    uint64_t v = 0;
    for (size_t i = s; i < e; i++) {
        if (f[i] < '0' || f[i] > '7') return -1;
        if (v >> 58) return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    *out = v;
    return 0;
}

static size_t field_len(const unsigned char *f, size_t cap) {
    size_t n = 0;
    while (n < cap && f[n]) n++;
    return n;
}

/* A name the Python extractor writes as it is: ASCII without NUL or backslash, no
   leading '/', every '/'-separated part non-empty and neither "." nor "..", at most
   MAX_DEPTH parts. */
static int plain_name(const char *s, size_t len) {
    if (len == 0 || len >= NAME_CAP || s[0] == '/') return 0;
    size_t start = 0, parts = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len) {
            unsigned char c = (unsigned char)s[i];
            if (c == 0 || c >= 0x80 || c == '\\') return 0;
            if (c != '/') continue;
        }
        size_t part = i - start;
        if (part == 0 || part > 255) return 0;
        if (s[start] == '.' && (part == 1 || (part == 2 && s[start + 1] == '.'))) return 0;
        if (++parts > MAX_DEPTH) return 0; /* deeper trees: the Python path */
        start = i + 1;
    }
    return 1;
}

static int ignored_pax_key(const unsigned char *k, size_t n) {
    static const char *keys[] = {"mtime", "atime", "ctime", "uid",   "gid",
                                 "uname", "gname", "comment", NULL};
    for (int i = 0; keys[i]; i++)
        if (strlen(keys[i]) == n && memcmp(k, keys[i], n) == 0) return 1;
    return n >= 7 && memcmp(k, "SCHILY.", 7) == 0;
}

typedef struct {
    const unsigned char *path; /* NULL: no path record */
    size_t path_len;
    int has_size;
    uint64_t size;
} pax_t;

/* archive_extract._pax_records with the lean parser's key rules. 0 ok, -1 decline. */
static int parse_pax(const unsigned char *d, size_t n, pax_t *pax) {
    size_t pos = 0;
    memset(pax, 0, sizeof *pax);
    while (pos < n) {
        size_t lim = pos + 24 < n ? pos + 24 : n, space = pos;
        while (space < lim && d[space] != ' ') space++;
        if (space >= lim) return -1;
        uint64_t length = 0;
        if (space == pos) return -1;
        for (size_t i = pos; i < space; i++) {
            if (d[i] < '0' || d[i] > '9') return -1;
            length = length * 10 + (uint64_t)(d[i] - '0');
            if (length > n) return -1;
        }
        size_t end = pos + (size_t)length;
        if (length <= space - pos + 1 || end > n || d[end - 1] != '\n') return -1;
        const unsigned char *kv = d + space + 1;
        size_t kvlen = end - 1 - (space + 1);
        const unsigned char *eq = memchr(kv, '=', kvlen);
        if (!eq) return -1;
        size_t klen = (size_t)(eq - kv);
        const unsigned char *val = eq + 1;
        size_t vlen = kvlen - klen - 1;
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            pax->path = val;
            pax->path_len = vlen;
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t v = 0;
            if (vlen == 0) return -1;
            for (size_t i = 0; i < vlen; i++) {
                if (val[i] < '0' || val[i] > '9') return -1;
                if (v > (UINT64_MAX / 16)) return -1;
                v = v * 10 + (uint64_t)(val[i] - '0');
            }
            pax->has_size = 1;
            pax->size = v;
        } else if (!ignored_pax_key(kv, klen)) {
            return -1; /* linkpath, hdrcharset, GNU.sparse.*: the Python path */
        }
        pos = end;
    }
    return 0;
}

/* Pass 1: every header read and checked. 1 = the plan holds the whole archive,
   0 = decline, -1 = out of memory. */
static int plan_archive(const unsigned char *raw, size_t n, plan_t *plan) {
    size_t pos = 0;
    int pending_pax = 0;
    pax_t pax;
    char name[NAME_CAP + 260];
    memset(&pax, 0, sizeof pax);
    for (;;) {
        if (n < 512 || pos > n - 512) return 0; /* no end-of-archive block */
        const unsigned char *h = raw + pos;
        uint64_t chk, size, mode;
        unsigned long sum = 0;
        int zero = 1;
        for (int i = 0; i < 512; i++) {
            sum += (i >= 148 && i < 156) ? 32u : h[i];
            if (h[i]) zero = 0;
        }
        if (zero) return pending_pax ? 0 : 1;
        if (parse_octal(h + 148, 8, &chk) < 0 || chk != sum) return 0;
        int gnu = memcmp(h + 257, "ustar  \0", 8) == 0;
        if (!gnu && memcmp(h + 257, "ustar\0", 6) != 0) return 0;
        if (parse_octal(h + 124, 12, &size) < 0 || parse_octal(h + 100, 8, &mode) < 0) return 0;
        /* The other number fields are read by tarfile too, which stops at a header where
           one is not a number: uid, gid, mtime, device major and minor. */
        uint64_t ignored;
        if (parse_octal(h + 108, 8, &ignored) < 0 || parse_octal(h + 116, 8, &ignored) < 0 ||
            parse_octal(h + 136, 12, &ignored) < 0 || parse_octal(h + 329, 8, &ignored) < 0 ||
            parse_octal(h + 337, 8, &ignored) < 0)
            return 0;
        size_t data_at = pos + 512;
        if (size > n - data_at) return 0; /* truncated */
        size_t end = data_at + (size_t)size + ((512 - (size_t)size % 512) % 512);
        if (end > n) return 0;
        unsigned char type = h[156];
        if (type == 'x') {
            if (pending_pax) return 0;
            if (parse_pax(raw + data_at, (size_t)size, &pax) < 0) return 0;
            pending_pax = 1;
            pos = end;
            continue;
        }
        int is_dir;
        if (type == '0' || type == 0) is_dir = 0;
        else if (type == '5') is_dir = 1;
        else return 0; /* links, devices, GNU long names, sparse, global headers */
        size_t nlen = field_len(h, 100);
        size_t plen = field_len(h + 345, 155);
        if (plen && gnu) return 0; /* GNU keeps times there, others a name prefix: refused */
        /* An old-style folder: typeflag NUL and the header's own name ending in '/'
           (tarfile's rule, before PAX); a PAX path that disagrees is refused. */
        int by_slash = type == 0 && nlen && h[nlen - 1] == '/';
        if (by_slash) is_dir = 1;
        size_t len;
        if (pending_pax && pax.path) {
            if (pax.path_len >= NAME_CAP) return 0;
            if (type == 0 && by_slash != (pax.path_len && pax.path[pax.path_len - 1] == '/'))
                return 0;
            memcpy(name, pax.path, pax.path_len);
            len = pax.path_len;
        } else {
            len = 0;
            if (plen) {
                memcpy(name, h + 345, plen);
                name[plen] = '/';
                len = plen + 1;
            }
            memcpy(name + len, h, nlen);
            len += nlen;
        }
        if (pending_pax && pax.has_size) {
            size = pax.size;
            if (size > n - data_at) return 0;
            end = data_at + (size_t)size + ((512 - (size_t)size % 512) % 512);
            if (end > n) return 0;
        }
        pending_pax = 0;
        memset(&pax, 0, sizeof pax);
        if (is_dir) {
            if (size) return 0; /* data on a folder */
            while (len && name[len - 1] == '/') len--;
        }
        if (memchr(name, 0, len)) return 0;
        if (plan_add(plan, name, len, is_dir, (mode & 0100) != 0, data_at, (size_t)size) < 0)
            return -1;
        pos = end;
    }
}

typedef struct {
    int fd;
    size_t end; /* the folder's path is cur[0:end] */
} level_t;

typedef struct {
    int root;
    level_t lev[MAX_DEPTH];
    int depth;
    char cur[NAME_CAP];
} tree_t;

static void tree_close(tree_t *t) {
    while (t->depth > 0) close(t->lev[--t->depth].fd);
}

static int top_fd(tree_t *t) { return t->depth ? t->lev[t->depth - 1].fd : t->root; }

/* Make (or enter) every folder of path p[0:len] and leave it open on top. 0 or -1. */
static int enter_dir(tree_t *t, const char *p, size_t len) {
    int k = 0;
    while (k < t->depth) {
        size_t e = t->lev[k].end;
        if (e > len || (e < len && p[e] != '/') || memcmp(p, t->cur, e) != 0) break;
        k++;
    }
    while (t->depth > k) close(t->lev[--t->depth].fd);
    size_t start = k ? t->lev[k - 1].end + 1 : 0;
    char part[256];
    while (start < len) {
        const char *slash = memchr(p + start, '/', len - start);
        size_t stop = slash ? (size_t)(slash - p) : len;
        size_t plen = stop - start;
        if (t->depth >= MAX_DEPTH || plen == 0 || plen > 255) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(part, p + start, plen);
        part[plen] = 0;
        int parent = top_fd(t);
        if (mkdirat(parent, part, 0755) < 0 && errno != EEXIST) return -1;
        int fd = openat(parent, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -1; /* a file or a link where the folder goes: ENOTDIR/ELOOP */
        memcpy(t->cur + start, p + start, plen);
        if (start) t->cur[start - 1] = '/';
        t->lev[t->depth].fd = fd;
        t->lev[t->depth].end = stop;
        t->depth++;
        start = stop + 1;
    }
    return 0;
}

static int write_all(int fd, const unsigned char *d, size_t n) {
    while (n) {
        ssize_t w = write(fd, d, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        d += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Pass 2. 0 or -1 with errno set. */
static int write_plan(tree_t *t, const plan_t *plan, const unsigned char *raw,
                      mode_t umask_bits, unsigned long long *n_files, unsigned long long *n_dirs,
                      unsigned long long *n_bytes) {
    for (size_t i = 0; i < plan->n; i++) {
        const entry_t *e = &plan->items[i];
        const char *name = plan->names + e->name_off;
        size_t len = e->name_len;
        if (e->is_dir) {
            if (enter_dir(t, name, len) < 0) return -1;
            (*n_dirs)++;
            continue;
        }
        const char *slash = NULL;
        for (size_t j = len; j > 0; j--)
            if (name[j - 1] == '/') {
                slash = name + j - 1;
                break;
            }
        size_t parent_len = slash ? (size_t)(slash - name) : 0;
        if (enter_dir(t, name, parent_len) < 0) return -1;
        char leaf[256];
        size_t leaf_len = len - (slash ? parent_len + 1 : 0);
        if (leaf_len == 0 || leaf_len > 255) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(leaf, slash ? slash + 1 : name, leaf_len);
        leaf[leaf_len] = 0;
        mode_t mode = e->exec ? 0755 : 0644;
        int fd = openat(top_fd(t), leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0) return -1; /* a duplicate or a folder of this name: the Python path */
        if (write_all(fd, raw + e->data_off, e->size) < 0 ||
            ((mode & umask_bits) && fchmod(fd, mode) < 0)) {
            int err = errno;
            close(fd);
            errno = err;
            return -1;
        }
        if (close(fd) < 0) return -1;
        (*n_files)++;
        *n_bytes += e->size;
    }
    return 0;
}

typedef struct {
    long long max_members, max_member_bytes, max_total_bytes, ratio_floor;
    double max_ratio;
    mode_t umask_bits;
} limits_t;

typedef struct {
    unsigned long long n_files, n_dirs, n_bytes;
    int err; /* errno of a failed write */
} outcome_t;

enum { DONE = 1, DECLINE = 0, FAILED = -1, NOMEM = -2 };

/* Plan and check one uncompressed tar: DONE with `plan` holding exactly the members
   extract_core writes (names after strip and the "./" rewrite), DECLINE, or NOMEM. The
   caller frees the plan either way. No Python object is touched. */
static int plan_checked(const unsigned char *raw, size_t n, const char *strip, size_t strip_len,
                        const limits_t *lim, long long compressed_size, plan_t *plan_out) {
    plan_t plan = *plan_out;
    int rc = plan_archive(raw, n, &plan);
    if (rc <= 0) {
        *plan_out = plan;
        return rc < 0 ? NOMEM : DECLINE;
    }
    /* tar_members' strip: a leading "<strip>/" shared by every member is removed and
       a member named "<strip>" itself is dropped. */
    size_t skip = 0;
    if (strip && strip_len > 0) {
        int all = 1;
        for (size_t i = 0; i < plan.n && all; i++) {
            const entry_t *e = &plan.items[i];
            const char *nm = plan.names + e->name_off;
            all = e->name_len >= strip_len && memcmp(nm, strip, strip_len) == 0 &&
                  (e->name_len == strip_len || nm[strip_len] == '/');
        }
        if (all) {
            size_t kept = 0;
            for (size_t i = 0; i < plan.n; i++)
                if (plan.items[i].name_len != strip_len) plan.items[kept++] = plan.items[i];
            plan.n = kept;
            skip = strip_len + 1;
        }
    }
    rc = DECLINE;
    if ((long long)plan.n > lim->max_members) goto out;
    /* check_name's one rewrite taken here: a leading "./" (as `tar czf -C dir .` writes)
       is dropped, and "." itself (that root) is no member; any other rewrite declines. */
    size_t kept = 0;
    for (size_t i = 0; i < plan.n; i++) {
        entry_t e = plan.items[i];
        e.name_off += skip;
        e.name_len -= skip;
        const char *nm = plan.names + e.name_off;
        while (e.name_len >= 2 && nm[0] == '.' && nm[1] == '/') {
            nm += 2;
            e.name_off += 2;
            e.name_len -= 2;
        }
        if (e.name_len == 1 && nm[0] == '.') continue;
        plan.items[kept++] = e;
    }
    plan.n = kept;
    unsigned long long total = 0;
    for (size_t i = 0; i < plan.n; i++) {
        const entry_t *e = &plan.items[i];
        if (!plain_name(plan.names + e->name_off, e->name_len)) goto out;
        if ((long long)e->size > lim->max_member_bytes) goto out;
        total += e->size;
    }
    if ((long long)total > lim->max_total_bytes) goto out;
    if (compressed_size > 0 && (double)total > (double)lim->ratio_floor &&
        (double)total > lim->max_ratio * (double)compressed_size)
        goto out;
    rc = DONE;
out:
    *plan_out = plan;
    return rc;
}

/* Plan, check and write one uncompressed tar; no Python object is touched (the
   caller has released the GIL). */
static int extract_core(const unsigned char *raw, size_t n, const char *dest, const char *strip,
                        size_t strip_len, const limits_t *lim, long long compressed_size,
                        outcome_t *out) {
    plan_t plan = {0};
    int rc = plan_checked(raw, n, strip, strip_len, lim, compressed_size, &plan);
    if (rc != DONE) goto out;
    tree_t *t = malloc(sizeof(tree_t));
    if (!t) {
        rc = NOMEM;
        goto out;
    }
    t->depth = 0;
    t->root = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    rc = DONE;
    if (t->root < 0 || write_plan(t, &plan, raw, lim->umask_bits, &out->n_files,
                                  &out->n_dirs, &out->n_bytes) < 0) {
        out->err = errno;
        rc = FAILED;
    }
    tree_close(t);
    if (t->root >= 0) close(t->root);
    free(t);
out:
    plan_free(&plan);
    return rc;
}

/* gunzip() of archive_extract.py: gzip members (zero padding after the last), the output
   held to `allowed` bytes. DONE with *raw (malloc'd), DECLINE for anything gunzip would
   refuse or that passes the bound (gunzip then names it), NOMEM. */
static int inflate_gz(const unsigned char *blob, size_t n, size_t allowed, unsigned char **raw,
                      size_t *raw_len) {
    size_t cap = n * 8 > 65536 ? n * 8 : 65536;
    if (cap > allowed + 1) cap = allowed + 1;
    unsigned char *buf = malloc(cap);
    if (!buf) return NOMEM;
    size_t have = 0, pos = 0;
    int rc = DECLINE;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        free(buf);
        return NOMEM;
    }
    while (pos < n) {
        z.next_in = (unsigned char *)blob + pos;
        z.avail_in = (uInt)((n - pos) > UINT32_MAX ? UINT32_MAX : (n - pos));
        int zr = Z_OK;
        while (zr != Z_STREAM_END) {
            if (have == cap) {
                if (cap > allowed) goto out; /* past the bound: gunzip's refusal */
                size_t grown = cap * 2 > allowed + 1 ? allowed + 1 : cap * 2;
                unsigned char *b = realloc(buf, grown);
                if (!b) {
                    rc = NOMEM;
                    goto out;
                }
                buf = b;
                cap = grown;
            }
            z.next_out = buf + have;
            z.avail_out = (uInt)((cap - have) > UINT32_MAX ? UINT32_MAX : (cap - have));
            uInt before = z.avail_out;
            zr = inflate(&z, Z_NO_FLUSH);
            have += before - z.avail_out;
            if (zr == Z_BUF_ERROR && z.avail_in == 0) goto out; /* truncated */
            if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) goto out;
        }
        if (have > allowed) goto out;
        pos = (size_t)(z.next_in - blob);
        while (pos < n && blob[pos] == 0) pos++; /* padding after the last member */
        if (pos < n && inflateReset(&z) != Z_OK) goto out;
    }
    rc = DONE;
out:
    inflateEnd(&z);
    if (rc == DONE) {
        *raw = buf;
        *raw_len = have;
    } else {
        free(buf);
    }
    return rc;
}

static int parse_limits(PyObject *seq, limits_t *lim) {
    unsigned int umask_bits;
    if (!PyArg_ParseTuple(seq, "LLLdLI", &lim->max_members, &lim->max_member_bytes,
                          &lim->max_total_bytes, &lim->max_ratio, &lim->ratio_floor, &umask_bits))
        return -1;
    lim->umask_bits = (mode_t)umask_bits;
    return 0;
}

/* gunzip's bound on a blob's output: the limits' total (plus 64 MiB of tar headers), and
   the ratio once past its floor. */
static size_t gz_bound(const limits_t *lim, Py_ssize_t blob_len) {
    double by_ratio = lim->max_ratio * (double)(blob_len > 0 ? blob_len : 1);
    double cap = (double)lim->max_total_bytes + 64.0 * 1024 * 1024;
    double allowed = by_ratio > (double)lim->ratio_floor ? by_ratio : (double)lim->ratio_floor;
    return (size_t)(allowed > cap ? cap : allowed);
}

static PyObject *outcome_value(int rc, const outcome_t *o, PyObject *dest_obj) {
    if (rc == DONE) return Py_BuildValue("(KKK)", o->n_files, o->n_dirs, o->n_bytes);
    if (rc == DECLINE) return Py_NewRef(Py_None);
    if (rc == NOMEM) return PyErr_NoMemory();
    errno = o->err;
    return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dest_obj);
}

/* extract() and extract_gz(): the same arguments but the last (extract's caller names the
   compressed size; extract_gz's blob is it) and the same outcome; `gz` inflates the blob
   first, within gunzip's bound, without the GIL like the extraction. */
static PyObject *extract_blob(PyObject *args, int gz) {
    Py_buffer blob;
    PyObject *dest_obj = NULL, *lim_obj;
    const char *strip = NULL;
    Py_ssize_t strip_len = 0;
    long long compressed_size = 0;
    limits_t lim;
    int parsed = gz ? PyArg_ParseTuple(args, "y*O&z#O!", &blob, PyUnicode_FSConverter,
                                       &dest_obj, &strip, &strip_len, &PyTuple_Type, &lim_obj)
                    : PyArg_ParseTuple(args, "y*O&z#O!L", &blob, PyUnicode_FSConverter,
                                       &dest_obj, &strip, &strip_len, &PyTuple_Type, &lim_obj,
                                       &compressed_size);
    if (!parsed) return NULL;
    if (gz) compressed_size = (long long)blob.len;
    PyObject *result = NULL;
    if (parse_limits(lim_obj, &lim) == 0) {
        outcome_t o = {0, 0, 0, 0};
        int rc = DONE;
        const char *dest = PyBytes_AS_STRING(dest_obj);
        Py_BEGIN_ALLOW_THREADS
        const unsigned char *raw = (const unsigned char *)blob.buf;
        size_t raw_len = (size_t)blob.len;
        unsigned char *inflated = NULL;
        if (gz) {
            rc = inflate_gz(raw, raw_len, gz_bound(&lim, blob.len), &inflated, &raw_len);
            raw = inflated;
        }
        if (rc == DONE)
            rc = extract_core(raw, raw_len, dest, strip, (size_t)strip_len, &lim,
                              compressed_size, &o);
        free(inflated);
        Py_END_ALLOW_THREADS
        result = outcome_value(rc, &o, dest_obj);
    }
    PyBuffer_Release(&blob);
    Py_XDECREF(dest_obj);
    return result;
}

static PyObject *fasttar_extract(PyObject *self, PyObject *args) {
    (void)self;
    return extract_blob(args, 0);
}

/* members(raw, strip=None, limits=None) -> [(name, is_dir, exec, data_offset, size)] | None:
   what extract() would write (the same plan and checks, nothing written), or None where
   it declines. For the differential tests against the Python parser. */
static PyObject *fasttar_members(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    const char *strip = NULL;
    Py_ssize_t strip_len = 0;
    PyObject *lim_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*|z#O", &raw, &strip, &strip_len, &lim_obj)) return NULL;
    limits_t lim = {LLONG_MAX, LLONG_MAX, LLONG_MAX, 0, LLONG_MAX, 0};
    if (lim_obj != Py_None && parse_limits(lim_obj, &lim) < 0) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    plan_t plan = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = plan_checked((const unsigned char *)raw.buf, (size_t)raw.len, strip, (size_t)strip_len,
                      &lim, 0, &plan);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc == NOMEM) {
        PyErr_NoMemory();
    } else if (rc != DONE) {
        result = Py_NewRef(Py_None);
    } else if ((result = PyList_New((Py_ssize_t)plan.n)) != NULL) {
        for (size_t i = 0; i < plan.n; i++) {
            const entry_t *e = &plan.items[i];
            PyObject *item = Py_BuildValue("(y#iinn)", plan.names + e->name_off,
                                           (Py_ssize_t)e->name_len, e->is_dir, e->exec,
                                           (Py_ssize_t)e->data_off, (Py_ssize_t)e->size);
            if (!item) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, (Py_ssize_t)i, item);
        }
    }
    plan_free(&plan);
    PyBuffer_Release(&raw);
    return result;
}

static PyObject *fasttar_extract_gz(PyObject *self, PyObject *args) {
    (void)self;
    return extract_blob(args, 1);
}

/* --- many tasks in one call, on threads of its own ------------------------------------ */

typedef struct {
    Py_buffer blob;
    PyObject *dest; /* bytes (PyUnicode_FSConverter) */
    const char *strip;
    Py_ssize_t strip_len;
    int rc;
    outcome_t o;
} job_t;

typedef struct {
    job_t *jobs;
    size_t n;
    size_t next; /* taken with an atomic add */
    limits_t lim;
} batch_t;

static void run_gz_job(job_t *j, const limits_t *lim) {
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    j->rc = inflate_gz((const unsigned char *)j->blob.buf, (size_t)j->blob.len,
                       gz_bound(lim, j->blob.len), &raw, &raw_len);
    if (j->rc != DONE) return;
    j->rc = extract_core(raw, raw_len, PyBytes_AS_STRING(j->dest), j->strip,
                         (size_t)j->strip_len, lim, (long long)j->blob.len, &j->o);
    free(raw);
}

static void *batch_worker(void *arg) {
    batch_t *b = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        if (i >= b->n) return NULL;
        run_gz_job(&b->jobs[i], &b->lim);
    }
}

static void release_jobs(job_t *jobs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        PyBuffer_Release(&jobs[i].blob);
        Py_XDECREF(jobs[i].dest);
    }
    PyMem_Free(jobs);
}

/* extract_gz_many([(blob, dest, strip), ...], limits, threads) -> [outcome, ...]
   outcome: (n_files, n_dirs, n_bytes) | None (declined, nothing written) | errno (int,
   a write failed part way: the caller empties dest). */
static PyObject *fasttar_extract_gz_many(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *lim_obj;
    int threads;
    batch_t b;
    memset(&b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "O!O!i", &PyList_Type, &items, &PyTuple_Type, &lim_obj, &threads))
        return NULL;
    if (parse_limits(lim_obj, &b.lim) < 0) return NULL;
    size_t n = (size_t)PyList_GET_SIZE(items);
    job_t *jobs = PyMem_Calloc(n ? n : 1, sizeof(job_t));
    if (!jobs) return PyErr_NoMemory();
    size_t ready = 0;
    for (; ready < n; ready++) {
        job_t *j = &jobs[ready];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(items, ready), "y*O&z#", &j->blob,
                              PyUnicode_FSConverter, &j->dest, &j->strip, &j->strip_len)) {
            release_jobs(jobs, ready);
            return NULL;
        }
    }
    b.jobs = jobs;
    b.n = n;
    if (threads < 1) threads = 1;
    if (threads > 16) threads = 16;
    if ((size_t)threads > n) threads = n ? (int)n : 1;
    pthread_t tids[16];
    int started = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; started < threads - 1; started++)
        if (pthread_create(&tids[started], NULL, batch_worker, &b) != 0) break;
    batch_worker(&b); /* this thread works too; a thread that did not start is no loss */
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    Py_END_ALLOW_THREADS
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        job_t *j = &jobs[i];
        PyObject *v;
        if (j->rc == DONE) v = Py_BuildValue("(KKK)", j->o.n_files, j->o.n_dirs, j->o.n_bytes);
        else if (j->rc == FAILED) v = PyLong_FromLong(j->o.err ? j->o.err : EIO);
        else if (j->rc == NOMEM) v = PyLong_FromLong(ENOMEM);
        else v = Py_NewRef(Py_None);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    release_jobs(jobs, n);
    return out;
}

/* --- packing: the deterministic tar of a folder ------------------------------------------

   tar_dir(path) -> (tar, {"task.toml": bytes, "archipelago.json": bytes}) | None
   The bytes of tasks.pack.tar_task_dir: archive_write.walk_sorted's order (a folder's
   entries sorted by name, then each sub-folder's in turn), archive_write.tar_header's
   ustar blocks (PAX `path` records for names over 100 bytes), mtime 0, modes 0755/0644,
   1024 zero bytes at the end. None for what the Python path reports or spells otherwise: a link, a
   special file, a non-ASCII name, a file of 8 GiB or more, any error on the way. */

typedef struct {
    unsigned char *buf;
    size_t len, cap;
} out_t;

static int out_reserve(out_t *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 65536;
    while (cap < o->len + more) cap *= 2;
    unsigned char *b = realloc(o->buf, cap);
    if (!b) return -1;
    o->buf = b;
    o->cap = cap;
    return 0;
}

/* archive_write._ustar_block into o->buf + at (512 bytes). */
static void ustar_block(unsigned char *h, const char *name, size_t name_len, unsigned long mode,
                        unsigned long long size, char typeflag) {
    memset(h, 0, 512);
    memcpy(h, name, name_len > 100 ? 100 : name_len);
    snprintf((char *)h + 100, 8, "%07lo", mode);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", size);
    memcpy(h + 136, "00000000000", 12);
    h[156] = (unsigned char)typeflag;
    memcpy(h + 257, "ustar\0" "00", 8);
    unsigned long sum = 256; /* the checksum field counted as eight spaces */
    for (int i = 0; i < 512; i++)
        if (i < 148 || i >= 156) sum += h[i];
    snprintf((char *)h + 148, 7, "%06lo", sum);
    h[155] = ' ';
}

/* archive_write.tar_header(name, size, mode, kind) appended to o (names are ASCII here). */
static int put_header(out_t *o, const char *name, size_t name_len, unsigned long mode,
                      unsigned long long size, char typeflag) {
    if (name_len > 100) {
        /* _pax_record("path", name): "<len> path=<name>\n", len counting itself */
        size_t body = 1 + 4 + 1 + name_len + 1, length = body, digits;
        for (;;) {
            char tmp[32];
            digits = (size_t)snprintf(tmp, sizeof tmp, "%zu", length);
            if (digits + body == length) break;
            length = digits + body;
        }
        size_t padded = length + ((512 - length % 512) % 512);
        if (out_reserve(o, 512 + padded + 512) < 0) return -1;
        ustar_block(o->buf + o->len, "././@PaxHeader", 14, 0644, length, 'x');
        o->len += 512;
        unsigned char *r = o->buf + o->len;
        memset(r, 0, padded);
        int n = snprintf((char *)r, 32, "%zu path=", length);
        memcpy(r + n, name, name_len);
        r[n + name_len] = '\n';
        o->len += padded;
    } else if (out_reserve(o, 512) < 0) {
        return -1;
    }
    ustar_block(o->buf + o->len, name, name_len, mode, size, typeflag);
    o->len += 512;
    return 0;
}

static int ascii_name(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80) return 0;
    return 1;
}

typedef struct {
    char *name;
    unsigned char type; /* d_type */
} dirent_t;

static int cmp_names(const void *a, const void *b) {
    return strcmp(((const dirent_t *)a)->name, ((const dirent_t *)b)->name);
}

typedef struct {
    char *rel; /* the folder's name relative to the root ("" for the root) */
} pending_dir_t;

typedef struct {
    out_t out;
    const char *root;
    pending_dir_t *stack;
    size_t n, cap;
    unsigned char *keep_toml, *keep_arch; /* copies of the top-level metadata files */
    size_t keep_toml_len, keep_arch_len;
    int have_toml, have_arch;
} packer_t;

static int push_dir(packer_t *p, const char *rel) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 32;
        pending_dir_t *st = realloc(p->stack, cap * sizeof *st);
        if (!st) return -1;
        p->stack = st;
        p->cap = cap;
    }
    p->stack[p->n].rel = strdup(rel);
    if (!p->stack[p->n].rel) return -1;
    p->n++;
    return 0;
}

/* One regular file: header, then its bytes read to their end. 0, or -1 (decline). */
static int pack_file(packer_t *p, int dirfd, const char *leaf, const char *rel, size_t rel_len) {
    int fd = openat(dirfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    /* Reserve the header's room, read the bytes after it, then write the header. */
    /* room for the header: a PAX path record is at most the name plus 40 bytes */
    size_t header = rel_len > 100 ? 1024 + ((rel_len + 40 + 511) / 512) * 512 : 512;
    size_t want = (size_t)st.st_size + 1;
    if (out_reserve(&p->out, header + want) < 0) {
        close(fd);
        return -1;
    }
    size_t at = p->out.len + header, got = 0;
    for (;;) {
        if (out_reserve(&p->out, header + got + 65536) < 0) {
            close(fd);
            return -1;
        }
        ssize_t r = read(fd, p->out.buf + at + got, p->out.cap - at - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            close(fd);
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
        at = p->out.len + header; /* out_reserve may have moved the buffer */
    }
    close(fd);
    if ((unsigned long long)got >= (1ULL << 33)) return -1; /* 8 GiB: a PAX size record */
    unsigned long mode = (st.st_mode & 0111) ? 0755 : 0644;
    /* Move the data to right after the real header, which may be shorter than reserved. */
    size_t start = p->out.len;
    out_t hdr = {0};
    if (put_header(&hdr, rel, rel_len, mode, got, '0') < 0) {
        free(hdr.buf);
        return -1;
    }
    memmove(p->out.buf + start + hdr.len, p->out.buf + start + header, got);
    memcpy(p->out.buf + start, hdr.buf, hdr.len);
    free(hdr.buf);
    p->out.len = start + hdr.len + got;
    size_t pad = (512 - got % 512) % 512;
    if (out_reserve(&p->out, pad) < 0) return -1;
    memset(p->out.buf + p->out.len, 0, pad);
    unsigned char *data = p->out.buf + start + hdr.len;
    p->out.len += pad;
    if (strchr(rel, '/') == NULL) { /* a top-level metadata file: its bytes kept */
        unsigned char **slot = NULL;
        size_t *slot_len = NULL;
        int *have = NULL;
        if (strcmp(rel, "task.toml") == 0) {
            slot = &p->keep_toml, slot_len = &p->keep_toml_len, have = &p->have_toml;
        } else if (strcmp(rel, "archipelago.json") == 0) {
            slot = &p->keep_arch, slot_len = &p->keep_arch_len, have = &p->have_arch;
        }
        if (slot) {
            *slot = malloc(got ? got : 1);
            if (!*slot) return -1;
            memcpy(*slot, data, got);
            *slot_len = got;
            *have = 1;
        }
    }
    return 0;
}

/* One folder's entries (sorted), its sub-folders pushed for later. 0 or -1. */
static int pack_folder(packer_t *p, const char *rel) {
    size_t rel_len = strlen(rel);
    char path[NAME_CAP * 2];
    int dirfd;
    if (rel_len == 0) {
        dirfd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } else {
        if (strlen(p->root) + 1 + rel_len >= sizeof path) return -1;
        snprintf(path, sizeof path, "%s/%s", p->root, rel);
        dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (dirfd < 0) return -1;
    int listfd = dup(dirfd);
    DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
    if (!d) {
        if (listfd >= 0) close(listfd);
        close(dirfd);
        return -1;
    }
    dirent_t *names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            dirent_t *nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
        }
        names[n].name = strdup(e->d_name);
        names[n].type = e->d_type;
        if (!names[n].name) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == 0 && n) qsort(names, n, sizeof *names, cmp_names);
    size_t first_sub = p->n;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *leaf = names[i].name;
        int is_dir = names[i].type == DT_DIR, is_reg = names[i].type == DT_REG;
        if (!ascii_name(leaf)) {
            rc = -1;
            break;
        }
        if (names[i].type == DT_UNKNOWN) { /* a filesystem without d_type: ask */
            struct stat st;
            if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                rc = -1;
                break;
            }
            is_dir = S_ISDIR(st.st_mode);
            is_reg = S_ISREG(st.st_mode);
        }
        size_t child_len = (rel_len ? rel_len + 1 : 0) + strlen(leaf);
        if (child_len + 2 >= NAME_CAP) {
            rc = -1;
            break;
        }
        char child[NAME_CAP];
        if (rel_len) snprintf(child, sizeof child, "%s/%s", rel, leaf);
        else snprintf(child, sizeof child, "%s", leaf);
        if (is_dir) {
            char dname[NAME_CAP];
            snprintf(dname, sizeof dname, "%s/", child);
            if (put_header(&p->out, dname, child_len + 1, 0755, 0, '5') < 0 ||
                push_dir(p, child) < 0)
                rc = -1;
        } else if (is_reg) { /* pack_file checks the opened file is still regular */
            if (pack_file(p, dirfd, leaf, child, child_len) < 0) rc = -1;
        } else {
            rc = -1; /* a link or a special file: the Python path names it */
        }
    }
    /* The sub-folders go next, the first name first: reverse this folder's pushes. */
    for (size_t a = first_sub, b = p->n ? p->n - 1 : 0; rc == 0 && a < b; a++, b--) {
        pending_dir_t t = p->stack[a];
        p->stack[a] = p->stack[b];
        p->stack[b] = t;
    }
    for (size_t i = 0; i < n; i++) free(names[i].name);
    free(names);
    close(dirfd);
    return rc;
}

static int pack_tree(packer_t *p) {
    if (push_dir(p, "") < 0) return -1;
    while (p->n) {
        char *rel = p->stack[--p->n].rel;
        int rc = pack_folder(p, rel);
        free(rel);
        if (rc < 0) return -1;
    }
    if (out_reserve(&p->out, 1024) < 0) return -1;
    memset(p->out.buf + p->out.len, 0, 1024);
    p->out.len += 1024;
    return 0;
}

static void packer_free(packer_t *p) {
    while (p->n) free(p->stack[--p->n].rel);
    free(p->stack);
    free(p->out.buf);
    free(p->keep_toml);
    free(p->keep_arch);
}

static PyObject *fasttar_tar_dir(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *root_obj = NULL;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &root_obj)) return NULL;
    packer_t p;
    memset(&p, 0, sizeof p);
    p.root = PyBytes_AS_STRING(root_obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pack_tree(&p);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc < 0) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *tar = PyBytes_FromStringAndSize((const char *)p.out.buf, (Py_ssize_t)p.out.len);
        PyObject *keep = PyDict_New();
        int ok = tar && keep;
        if (ok && p.have_toml) {
            PyObject *v = PyBytes_FromStringAndSize((const char *)p.keep_toml,
                                                    (Py_ssize_t)p.keep_toml_len);
            ok = v && PyDict_SetItemString(keep, "task.toml", v) == 0;
            Py_XDECREF(v);
        }
        if (ok && p.have_arch) {
            PyObject *v = PyBytes_FromStringAndSize((const char *)p.keep_arch,
                                                    (Py_ssize_t)p.keep_arch_len);
            ok = v && PyDict_SetItemString(keep, "archipelago.json", v) == 0;
            Py_XDECREF(v);
        }
        if (ok) result = PyTuple_Pack(2, tar, keep);
        Py_XDECREF(tar);
        Py_XDECREF(keep);
    }
    packer_free(&p);
    Py_DECREF(root_obj);
    return result;
}

/* ---- copy_tree: a local trial's world copy (apexrl.envs.local.environment._copy_world) --

   copy_tree(src, dst, uid) -> n_files | None
   Every folder and regular file of src into the folder dst, merged as
   shutil.copytree(dirs_exist_ok=True) merges: folders made or reused, files created or
   overwritten, each given its source's permission bits (mode & 0777) and times, and
   owned by uid (-1: left as made). Nothing in dst is followed: each folder is opened
   O_DIRECTORY|O_NOFOLLOW relative to its parent, each file O_NOFOLLOW. None when src
   holds anything but folders and regular files, or is deeper than COPY_MAX_DEPTH: the
   caller's copytree then runs over what was written (the same end state). A failure
   (a file where a folder goes, a full disk) raises OSError. The GIL is released. */

#define COPY_MAX_DEPTH 128
#define COPY_DECLINE (-2)
#define COPY_BUF (1 << 17)

typedef struct {
    int uid;
    long n_files;
    int err;
    char *buf;
} copy_t;

static int copy_fail(copy_t *c) {
    c->err = errno ? errno : EIO;
    return -1;
}

static int copy_attrs(copy_t *c, int fd, const struct stat *st) {
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    if (fchmod(fd, st->st_mode & 0777) < 0 || futimens(fd, times) < 0) return copy_fail(c);
    if (c->uid >= 0 && fchown(fd, (uid_t)c->uid, (gid_t)c->uid) < 0) return copy_fail(c);
    return 0;
}

static int copy_bytes(copy_t *c, int in, int out, off_t size) {
    off_t left = size;
    while (left > 0) {  /* sendfile: any regular file to any file, across file systems */
        ssize_t k = sendfile(out, in, NULL, left > (1 << 30) ? (1 << 30) : (size_t)left);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EINVAL || errno == ENOSYS)) break;
        if (k < 0) return copy_fail(c);
        if (k == 0) break; /* the source shrank: copy what is there, as copyfile does */
        left -= k;
    }
    for (;;) { /* the rest (or all, where sendfile does not apply) */
        ssize_t k = read(in, c->buf, COPY_BUF);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return copy_fail(c);
        if (k == 0) return 0;
        if (write_all(out, (const unsigned char *)c->buf, (size_t)k) < 0) return copy_fail(c);
    }
}

static int copy_file(copy_t *c, int sdir, int ddir, const char *name, const struct stat *st) {
    int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0) return copy_fail(c);
    int out = openat(ddir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        copy_fail(c);
        close(in);
        return -1;
    }
    int rc = copy_bytes(c, in, out, st->st_size);
    if (rc == 0) rc = copy_attrs(c, out, st);
    close(in);
    if (close(out) < 0 && rc == 0) rc = copy_fail(c);
    if (rc == 0) c->n_files++;
    return rc;
}

static int copy_folder(copy_t *c, int sdir, int ddir, int depth) {
    if (depth > COPY_MAX_DEPTH) return COPY_DECLINE;
    int lfd = dup(sdir);
    if (lfd < 0) return copy_fail(c);
    DIR *d = fdopendir(lfd);
    if (d == NULL) {
        copy_fail(c);
        close(lfd);
        return -1;
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            if (errno) rc = copy_fail(c);
            break;
        }
        const char *n = e->d_name;
        if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
        struct stat st;
        if (fstatat(sdir, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = copy_fail(c);
            break;
        }
        if (S_ISREG(st.st_mode)) {
            rc = copy_file(c, sdir, ddir, n, &st);
        } else if (S_ISDIR(st.st_mode)) {
            if (mkdirat(ddir, n, 0700) < 0 && errno != EEXIST) {
                rc = copy_fail(c);
                break;
            }
            int dsub = openat(ddir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (dsub < 0) { /* a file or a link where the folder goes */
                rc = copy_fail(c);
                break;
            }
            int ssub = openat(sdir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (ssub < 0) {
                rc = copy_fail(c);
                close(dsub);
                break;
            }
            rc = copy_folder(c, ssub, dsub, depth + 1);
            if (rc == 0) rc = copy_attrs(c, dsub, &st); /* after its contents, as copytree */
            close(ssub);
            close(dsub);
        } else {
            rc = COPY_DECLINE; /* a link or a special file: copytree decides */
        }
        if (rc) break;
    }
    closedir(d);
    return rc;
}

static PyObject *fasttar_copy_tree(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *src_obj = NULL, *dst_obj = NULL;
    int uid = -1;
    if (!PyArg_ParseTuple(args, "O&O&i", PyUnicode_FSConverter, &src_obj,
                          PyUnicode_FSConverter, &dst_obj, &uid))
        return NULL;
    copy_t c = {uid, 0, 0, NULL};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    c.buf = malloc(COPY_BUF);
    int sfd = -1, dfd = -1;
    struct stat st;
    if (c.buf == NULL) {
        errno = ENOMEM;
        rc = copy_fail(&c);
    } else if ((sfd = open(PyBytes_AS_STRING(src_obj), O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                          O_CLOEXEC)) < 0 ||
               (dfd = open(PyBytes_AS_STRING(dst_obj), O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                          O_CLOEXEC)) < 0 ||
               fstat(sfd, &st) < 0) {
        rc = copy_fail(&c);
    } else {
        rc = copy_folder(&c, sfd, dfd, 0);
        if (rc == 0) rc = copy_attrs(&c, dfd, &st);
    }
    if (sfd >= 0) close(sfd);
    if (dfd >= 0) close(dfd);
    free(c.buf);
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (rc == COPY_DECLINE) {
        result = Py_NewRef(Py_None);
    } else if (rc < 0) {
        errno = c.err;
        result = PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dst_obj);
    } else {
        result = PyLong_FromLong(c.n_files);
    }
    Py_DECREF(src_obj);
    Py_DECREF(dst_obj);
    return result;
}

static PyMethodDef fasttar_methods[] = {
    {"extract", fasttar_extract, METH_VARARGS,
     "extract(raw, dest, strip, limits, compressed_size) -> (n_files, n_dirs, n_bytes) | None\n"
     "limits: (max_members, max_member_bytes, max_total_bytes, max_ratio, ratio_floor, umask)"},
    {"members", fasttar_members, METH_VARARGS,
     "members(raw, strip=None, limits=None) -> [(name, is_dir, exec, data_offset, size)] | None: "
     "what extract() would write, nothing written; None where it declines"},
    {"extract_gz", fasttar_extract_gz, METH_VARARGS,
     "extract_gz(blob, dest, strip, limits) -> (n_files, n_dirs, n_bytes) | None: a gzip tar, "
     "inflated here within gunzip's bound"},
    {"extract_gz_many", fasttar_extract_gz_many, METH_VARARGS,
     "extract_gz_many([(blob, dest, strip), ...], limits, threads) -> [outcome, ...]: "
     "outcome (n_files, n_dirs, n_bytes) | None (declined) | errno (failed part way)"},
    {"tar_dir", fasttar_tar_dir, METH_VARARGS,
     "tar_dir(path) -> (tar, {top-level task.toml / archipelago.json: bytes}) | None: "
     "the bytes of tasks.pack.tar_task_dir"},
    {"copy_tree", fasttar_copy_tree, METH_VARARGS,
     "copy_tree(src, dst, uid) -> n_files | None: folders and regular files of src merged "
     "into dst (copytree(dirs_exist_ok=True)), owned by uid (-1: unchanged); None: not plain"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fasttar_module = {
    PyModuleDef_HEAD_INIT, "_fasttar", "The C fast paths of tar extraction and packing (apexrl.artifacts.archive_extract, apexrl.tasks.pack).", -1,
    fasttar_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fasttar(void) { return PyModule_Create(&fasttar_module); }
