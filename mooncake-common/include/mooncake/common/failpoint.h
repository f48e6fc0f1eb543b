/* Fault injection for tests: named points on paths where a real process can stall (between
 * getting a placement from the master and moving its bytes, say), so that multi-process tests
 * can stop a client exactly there instead of racing a signal against a fast copy.
 *
 * MC_FAILPOINTS in the environment lists the armed points, comma-separated, each as
 * "name=stop": the process sends itself SIGSTOP the first time it reaches that point (once: a
 * retry that passes the point again goes on), and goes on when the test sends SIGCONT. Unset
 * (the normal case) every point costs one pthread_once check. */
#ifndef MC_COMMON_FAILPOINT_H
#define MC_COMMON_FAILPOINT_H

/* Stops the process here when `name` is armed. */
void mc__failpoint(const char *name);
#endif
