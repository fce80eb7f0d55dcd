/* Callgrind client requests for rlpace's count tier, loaded with ctypes.
 *
 * Each function issues one client request from <valgrind/callgrind.h>; outside
 * Valgrind a client request is a handful of no-op instructions, so loading this
 * library in a plain interpreter is harmless. Built by rlpace.bench.counts.client.
 */
#include <valgrind/callgrind.h>

int rlpace_running_on_valgrind(void) { return (int)RUNNING_ON_VALGRIND; }
void rlpace_start_instrumentation(void) { CALLGRIND_START_INSTRUMENTATION; }
void rlpace_stop_instrumentation(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void rlpace_zero_stats(void) { CALLGRIND_ZERO_STATS; }
void rlpace_dump_stats_at(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
