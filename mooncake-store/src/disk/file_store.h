/* The shared-filesystem tier's files: one file per object under a directory every node can read
 * (the master's --root_fs_dir, in its --cluster_id subdirectory), as the reference lays out its
 * DISK replicas: DIR/<h1>/<h2>/<the key, escaped>, h1 and h2 one hex digit each of the key's
 * hash, so no directory holds more than a sixteenth of a sixteenth of the objects.
 *
 * A file holds exactly one bucket record (bucket_record.h: header, key, value, the CRC-32 of key
 * and value), its seq the version of the object the master gave the copy. A reader checks that
 * the file names the key it asked for, holds the version and the size the master said and passes
 * its checksum before a byte counts; a file cut short, a flipped byte, another key's file (a name
 * collision of two long keys) or another value of the key (two nodes writing it at once) is
 * refused, never delivered. Version 0 stands for "whatever the file holds": the copies a master
 * without a log adopts from the directory, whose versions it cannot know.
 *
 * Writes go to a hidden temporary file in the same directory and are renamed into place once
 * complete (and synced, unless the caller says not to), so a reader or a rescan never sees half
 * a file, whoever crashed. Every call is stateless and thread-safe: any process that can reach
 * DIR reads any object, whichever node wrote it. */
#ifndef MC_DISK_FILE_STORE_H
#define MC_DISK_FILE_STORE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Checks that dir is a directory this process can create files in (creating dir itself when its
 * parent exists). 0, or INVALID_PARAMS with a one-line reason in err. */
int mc__fstore_check(const char *dir, char *err, size_t cap);

/* The path of key's file: 0, or INVALID_PARAMS (too long for out, bad key). */
int mc__fstore_path(const char *dir, const char *key, char *out, size_t cap);

/* Stores len bytes of the object's version as key's file, replacing any (sync: fdatasync the file
 * and its directory before returning). 0, INVALID_KEY, or WRITE_FAIL. */
int mc__fstore_put(const char *dir, const char *key, const void *data, uint64_t len,
                   uint64_t version, int sync);
/* Deletes key's file if it holds version (0: any): another value written meanwhile stays. 0, or
 * OBJECT_NOT_FOUND. */
int mc__fstore_remove(const char *dir, const char *key, uint64_t version);
/* The value's size from key's file header (checked): 0, OBJECT_NOT_FOUND, CHECKSUM_MISMATCH. */
int mc__fstore_size(const char *dir, const char *key, uint64_t *len);
/* Reads key's value of version (0: any), which must be exactly size bytes, into iov (parts
 * holding size bytes in all), verified: 0, OBJECT_NOT_FOUND, CHECKSUM_MISMATCH (the file is
 * damaged, another key's, another version or of another size: the bytes in iov are not the
 * object), INVALID_READ (an I/O error). */
int mc__fstore_read(const char *dir, const char *key, const struct iovec *iov, size_t iovcnt,
                    uint64_t size, uint64_t version);

/* Calls fn for every object file whose header and key are intact (the value is not read:
 * readers check it), with the file's age in seconds. Temporary files are skipped. Returns 0 or
 * what fn returned (non-zero stops the walk). */
typedef int (*mc__fstore_visit_fn)(void *ctx, const char *key, uint64_t len, uint64_t age_s);
int mc__fstore_foreach(const char *dir, mc__fstore_visit_fn fn, void *ctx);
#endif
