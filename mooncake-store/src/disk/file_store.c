/* The shared-filesystem tier's files (see file_store.h). */
#include "disk/file_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk/bucket_record.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/crc32.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

#define MC__FS_PATH 4096u
/* An escaped name longer than this is cut and ends in the key's 64-bit hash instead (NAME_MAX is
 * 255; the reader checks the key inside the file, so two long keys never read each other). */
#define MC__FS_NAME 200u

static uint64_t mc__fs_hash64(const char *key, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)key[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* key as a file name: [A-Za-z0-9_-] as they are, every other byte as %XX (so no name starts
 * with '.', which is what temporary files do). */
static void mc__fs_name(const char *key, size_t len, char *out) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (size_t i = 0; i < len && n + 3 <= MC__FS_NAME; i++) {
        uint8_t c = (uint8_t)key[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
        if (n + 3 > MC__FS_NAME && i + 1 < len) {
            n += (size_t)snprintf(out + n, 24, "~%016llx",
                                  (unsigned long long)mc__fs_hash64(key, len));
            break;
        }
    }
    out[n] = '\0';
}

/* dir/h1/h2 into out (and the name into name, when asked): 0 or INVALID_PARAMS. */
static int mc__fs_dirs(const char *dir, const char *key, char *out, size_t cap, char *name) {
    size_t len = key ? strlen(key) : 0;
    uint32_t h;
    if (len == 0 || len > MC_BREC_MAX_KEY)
        return MC_ERR_INVALID_KEY;
    h = mc__crc32(0, key, len);
    if (name)
        mc__fs_name(key, len, name);
    if (snprintf(out, cap, "%s/%x/%x", dir, h & 15u, (h >> 4) & 15u) >= (int)cap)
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

int mc__fstore_path(const char *dir, const char *key, char *out, size_t cap) {
    char sub[MC__FS_PATH], name[MC__FS_NAME + 24];
    int rc = mc__fs_dirs(dir, key, sub, sizeof(sub), name);
    if (rc)
        return rc;
    return snprintf(out, cap, "%s/%s", sub, name) >= (int)cap ? MC_ERR_INVALID_PARAMS : 0;
}

int mc__fstore_check(const char *dir, char *err, size_t cap) {
    struct stat st;
    char probe[MC__FS_PATH];
    int fd;
    if (!dir || !*dir || strlen(dir) + 64 > MC__FS_PATH) {
        snprintf(err, cap, "the directory name is empty or too long");
        return MC_ERR_INVALID_PARAMS;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, cap, "%s: cannot create it: %s", dir, strerror(errno));
        return MC_ERR_INVALID_PARAMS;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, cap, "%s: not a directory", dir);
        return MC_ERR_INVALID_PARAMS;
    }
    snprintf(probe, sizeof(probe), "%s/.probe-%ld", dir, (long)getpid());
    fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, cap, "%s: cannot create files in it: %s", dir, strerror(errno));
        return MC_ERR_INVALID_PARAMS;
    }
    close(fd);
    unlink(probe);
    return 0;
}

static int mc__fs_mkdirs(const char *sub) {
    char p[MC__FS_PATH];
    char *slash = NULL;
    snprintf(p, sizeof(p), "%s", sub);
    if (mkdir(p, 0755) == 0 || errno == EEXIST)
        return 0;
    slash = strrchr(p, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return -1;
    return mkdir(sub, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static int mc__fs_sync_dir(const char *sub) {
    int fd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0)
        return -1;
    if (fsync(fd) != 0)
        rc = -1;
    close(fd);
    return rc;
}

int mc__fstore_put(const char *dir, const char *key, const void *data, uint64_t len,
                   uint64_t version, int sync) {
    static _Atomic uint64_t seq;
    char sub[MC__FS_PATH], name[MC__FS_NAME + 24], tmp[MC__FS_PATH], path[MC__FS_PATH];
    uint8_t hdr[MC_BREC_HDR];
    struct mc__brec r;
    struct iovec iov[3];
    size_t klen = key ? strlen(key) : 0;
    uint64_t done = 0, total;
    int fd = -1, rc = mc__fs_dirs(dir, key, sub, sizeof(sub), name);
    if (rc)
        return rc;
    if (!data && len)
        return MC_ERR_INVALID_PARAMS;
    if (snprintf(path, sizeof(path), "%s/%s", sub, name) >= (int)sizeof(path) ||
        snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%llu", sub, (long)getpid(),
                 (unsigned long long)atomic_fetch_add(&seq, 1)) >= (int)sizeof(tmp))
        return MC_ERR_INVALID_PARAMS;
    if (mc__fs_mkdirs(sub) != 0)
        return MC_ERR_WRITE_FAIL;
    memset(&r, 0, sizeof(r));
    r.magic = MC_BREC_LIVE;
    r.key_len = (uint32_t)klen;
    r.value_len = len;
    r.seq = version;
    r.data_crc = mc__crc32(mc__crc32(0, key, klen), data, (size_t)len);
    mc__brec_encode(&r, hdr);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return MC_ERR_WRITE_FAIL;
    total = mc__brec_size(klen, len);
    rc = MC_ERR_WRITE_FAIL;
    while (done < total) {
        /* The parts still to write, from where the last (maybe short) write stopped. */
        const uint8_t *part[3] = {hdr, (const uint8_t *)key, (const uint8_t *)data};
        uint64_t plen[3] = {MC_BREC_HDR, klen, len}, skip = done;
        int n = 0;
        for (int i = 0; i < 3; i++) {
            if (skip >= plen[i]) {
                skip -= plen[i];
                continue;
            }
            iov[n].iov_base = (void *)(part[i] + skip);
            iov[n++].iov_len = (size_t)(plen[i] - skip);
            skip = 0;
        }
        ssize_t w = pwritev(fd, iov, n, (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto out;
        done += (uint64_t)w;
    }
    if (sync && fdatasync(fd) != 0)
        goto out;
    if (close(fd) != 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto out;
    if (sync && mc__fs_sync_dir(sub) != 0)
        goto out;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc)
        unlink(tmp);
    return rc;
}

/* Opens key's file and checks its header and key: the fd (and *r), or a negative code. */
static int mc__fs_open(const char *dir, const char *key, struct mc__brec *r, char *path,
                       size_t cap) {
    uint8_t hdr[MC_BREC_HDR];
    size_t klen = strlen(key);
    char *kbuf = NULL;
    int fd, rc = mc__fstore_path(dir, key, path, cap);
    if (rc)
        return rc;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? MC_ERR_OBJECT_NOT_FOUND : MC_ERR_INVALID_READ;
    rc = MC_ERR_CHECKSUM_MISMATCH;
    kbuf = mc__malloc(klen + 1);
    if (!kbuf) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    if (pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) || mc__brec_decode(hdr, r) != 0 ||
        r->magic != MC_BREC_LIVE || r->key_len != klen ||
        pread(fd, kbuf, klen, MC_BREC_HDR) != (ssize_t)klen || memcmp(kbuf, key, klen) != 0)
        goto fail;
    mc__free(kbuf);
    return fd;
fail:
    mc__free(kbuf);
    close(fd);
    return rc;
}

int mc__fstore_remove(const char *dir, const char *key, uint64_t version) {
    static _Atomic uint64_t seq;
    char path[MC__FS_PATH], tmp[MC__FS_PATH + 64];
    struct mc__brec r;
    int fd, rc = mc__fstore_path(dir, key, path, sizeof(path));
    if (rc)
        return rc;
    if (version == 0)
        return unlink(path) == 0 ? 0 : MC_ERR_OBJECT_NOT_FOUND;
    /* Taken out of place first (atomically), so that a value written meanwhile is never the one
     * deleted: it is checked where nobody else writes. */
    snprintf(tmp, sizeof(tmp), "%.*s.del-%ld-%llu", (int)(strrchr(path, '/') - path + 1), path,
             (long)getpid(), (unsigned long long)atomic_fetch_add(&seq, 1));
    if (rename(path, tmp) != 0)
        return MC_ERR_OBJECT_NOT_FOUND;
    fd = open(tmp, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        uint8_t hdr[MC_BREC_HDR];
        if (pread(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr) &&
            mc__brec_decode(hdr, &r) == 0 && r.seq != version) {
            /* Another value: back in place, unless a newer write took the name meanwhile. */
            close(fd);
            if (link(tmp, path) != 0 && errno != EEXIST)
                MC_WARN("shared fs tier: cannot put %s back in place: %s", path, strerror(errno));
            unlink(tmp);
            return MC_ERR_OBJECT_NOT_FOUND;
        }
        close(fd);
    }
    unlink(tmp);
    return 0;
}

int mc__fstore_size(const char *dir, const char *key, uint64_t *len) {
    char path[MC__FS_PATH];
    struct mc__brec r;
    int fd = mc__fs_open(dir, key, &r, path, sizeof(path));
    if (fd < 0)
        return fd;
    close(fd);
    *len = r.value_len;
    return 0;
}

int mc__fstore_read(const char *dir, const char *key, const struct iovec *iov, size_t iovcnt,
                    uint64_t size, uint64_t version) {
    char path[MC__FS_PATH];
    struct mc__brec r;
    struct stat st;
    uint64_t off, left = size;
    uint32_t crc;
    int rc = MC_ERR_CHECKSUM_MISMATCH;
    int fd = mc__fs_open(dir, key, &r, path, sizeof(path));
    if (fd < 0)
        goto out;
    off = MC_BREC_HDR + r.key_len;
    /* The whole record and nothing after it: a file cut short or grown is not this object. */
    if (r.value_len != size || (version != 0 && r.seq != version) || fstat(fd, &st) != 0 ||
        (uint64_t)st.st_size != off + size)
        goto out;
    crc = mc__crc32(0, key, r.key_len);
    for (size_t i = 0; i < iovcnt && left > 0; i++) {
        size_t n = iov[i].iov_len < left ? iov[i].iov_len : (size_t)left;
        size_t got = 0;
        while (got < n) {
            ssize_t k = pread(fd, (uint8_t *)iov[i].iov_base + got, n - got, (off_t)(off + got));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                rc = k == 0 ? MC_ERR_CHECKSUM_MISMATCH : MC_ERR_INVALID_READ;
                goto out;
            }
            got += (size_t)k;
        }
        crc = mc__crc32(crc, iov[i].iov_base, n);
        off += n;
        left -= n;
    }
    if (left != 0) {
        rc = MC_ERR_INVALID_PARAMS; /* the caller's parts hold less than size */
        goto out;
    }
    rc = crc == r.data_crc ? 0 : MC_ERR_CHECKSUM_MISMATCH;
out:
    if (fd >= 0)
        close(fd);
    else
        rc = fd;
    if (rc == MC_ERR_CHECKSUM_MISMATCH)
        MC_WARN("shared fs tier: %s is damaged or not the object the master describes (key %.64s, "
                "%llu bytes, version %llu): not served",
                path, key, (unsigned long long)size, (unsigned long long)version);
    return rc;
}

/* One object file: its key and size when the header and the key (and the key's name) check. */
static int mc__fs_visit(const char *path, const char *name, time_t now, mc__fstore_visit_fn fn,
                        void *ctx) {
    uint8_t hdr[MC_BREC_HDR];
    char want[MC__FS_NAME + 24];
    char *key = NULL;
    struct mc__brec r;
    struct stat st;
    int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) != 0 || pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
        mc__brec_decode(hdr, &r) != 0 || r.magic != MC_BREC_LIVE ||
        (uint64_t)st.st_size != mc__brec_size(r.key_len, r.value_len))
        goto out;
    key = mc__malloc(r.key_len + 1);
    if (!key || pread(fd, key, r.key_len, MC_BREC_HDR) != (ssize_t)r.key_len)
        goto out;
    key[r.key_len] = '\0';
    if (strlen(key) != r.key_len)
        goto out;
    mc__fs_name(key, r.key_len, want);
    if (strcmp(want, name) != 0)
        goto out; /* not where this key lives: never announced */
    rc = fn(ctx, key, r.value_len, now > st.st_mtime ? (uint64_t)(now - st.st_mtime) : 0);
out:
    mc__free(key);
    close(fd);
    return rc;
}

int mc__fstore_foreach(const char *dir, mc__fstore_visit_fn fn, void *ctx) {
    char path[MC__FS_PATH];
    time_t now = time(NULL);
    int rc = 0;
    for (unsigned a = 0; a < 16 && rc == 0; a++) {
        for (unsigned b = 0; b < 16 && rc == 0; b++) {
            DIR *d;
            struct dirent *de;
            snprintf(path, sizeof(path), "%s/%x/%x", dir, a, b);
            d = opendir(path);
            if (!d)
                continue;
            while (rc == 0 && (de = readdir(d)) != NULL) {
                char file[MC__FS_PATH];
                if (de->d_name[0] == '.')
                    continue; /* ., .. and temporary files */
                if (snprintf(file, sizeof(file), "%s/%s", path, de->d_name) >= (int)sizeof(file))
                    continue;
                rc = mc__fs_visit(file, de->d_name, now, fn, ctx);
            }
            closedir(d);
        }
    }
    return rc;
}
