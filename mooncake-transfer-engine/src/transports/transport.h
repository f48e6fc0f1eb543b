/* Transports as tables of functions, so a hardware transport (RDMA) can be added as one more
 * table. A transport starts validated tasks; it may finish them inline (memcpy transports) or
 * hand them to its own threads (tcp). */
#ifndef MC_TE_TRANSPORT_H
#define MC_TE_TRANSPORT_H

struct mc_engine;
struct mc__task;

enum mc__tp { MC__TP_LOCAL = 0, MC__TP_TCP, MC__TP_SHM, MC__TP_COUNT };

/* submit's answer when this transport cannot carry the task (the caller falls back to tcp) */
#define MC__TP_DECLINED 1

typedef struct mc__transport {
    const char *name;
    int (*init)(struct mc_engine *e);
    /* Returns 0 once the task is started (it will end through mc__task_finish),
     * MC__TP_DECLINED to let another transport carry it. */
    int (*submit)(struct mc_engine *e, struct mc__task *t);
    void (*close)(struct mc_engine *e);
} mc__transport_t;

extern const mc__transport_t mc__tp_local;
extern const mc__transport_t mc__tp_tcp;
extern const mc__transport_t mc__tp_shm;

const mc__transport_t *mc__transport_get(int id);
/* Counts a finished task's bytes for the transport's statistics. */
void mc__transport_account(struct mc_engine *e, int id, unsigned long long bytes);
#endif
