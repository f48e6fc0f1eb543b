/* Helpers for the TE tests: a target engine in its own process (te_target, driven over a pipe),
 * data patterns and checksums. */
#ifndef TE_TEST_UTIL_H
#define TE_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct te_target {
    pid_t pid;
    int to_child;
    int from_child;
    char name[256];
    uint64_t plain_addr;
    uint64_t plain_len;
    uint64_t managed_addr;
    uint64_t managed_len;
} te_target_t;

/* Starts te_target: an engine named name (NULL: "127.0.0.1" with a picked port) using metadata,
 * with a plain registered buffer and a managed one, both filled with pattern seed 1 / 2.
 * Returns 0 once the target is serving. */
int te_target_start(te_target_t *t, const char *metadata, const char *name, size_t plain_len,
                    size_t managed_len);
/* te_target_start_ex flags */
#define TE_TARGET_FIXED_LAYOUT                                                                     \
    1 /* no address randomisation: a restarted target maps its buffers                             \
       * at the same addresses as before */
int te_target_start_ex(te_target_t *t, const char *metadata, const char *name, const char *proto,
                       size_t plain_len, size_t managed_len, int flags);
/* Sends one command line and reads the reply line (without "OK "); -1 on failure. */
int te_target_cmd(te_target_t *t, char *reply, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
uint64_t te_target_hash(te_target_t *t, uint64_t addr, uint64_t len);
int te_target_fill(te_target_t *t, uint64_t addr, uint64_t len, unsigned seed);
/* Asks it to exit cleanly and reaps it; returns its exit status (0 = clean, which under the
 * sanitizers also means no leak or error report), -1 if it had to be killed. */
int te_target_stop(te_target_t *t);
/* SIGKILL and reap. */
void te_target_kill(te_target_t *t);

void te_fill(void *p, size_t len, unsigned seed);
uint64_t te_hash(const void *p, size_t len);
uint64_t te_pattern_hash(size_t len, unsigned seed, size_t offset);
uint64_t te_now_ms(void);

/* The message te_target's write-ask handler understands (K 1): it sleeps sleep_ms, then returns
 * ret when nonzero, else answers answer_len bytes of te_ask_answer with the hash of [addr,
 * addr+len) in its memory. Any bytes may follow. */
typedef struct te_ask_msg {
    uint32_t answer_len;
    int32_t ret;
    uint32_t sleep_ms;
    uint32_t pad;
    uint64_t addr;
    uint64_t len;
} te_ask_msg_t;
/* n bytes: the payload's hash and the message's (as far as they fit), then a pattern. */
void te_ask_answer(uint8_t *out, size_t n, uint64_t payload_hash, uint64_t msg_hash);
#endif
