/* This process's id, for handles that must notice they were inherited across fork(). */
#ifndef MC_COMMON_PROC_H
#define MC_COMMON_PROC_H

/* getpid(), cached: a handle compares it with the pid that set it up on every call, and getpid()
 * is a system call (about 200 ns here, a few percent of a 4 KiB transfer). A fork handler
 * (pthread_atfork) forgets the cached value in every child, so a child never sees its parent's
 * pid. A child made without fork() (raw clone, vfork) must exec before it calls us. */
int mc__pid(void);
#endif
