/* hash.h — the keyed hash of every index whose keys come from input
 * (names in graph text and model files, vocabulary pieces, merge pairs,
 * node labels).
 *
 * An unkeyed hash lets a file choose keys that all land in one probe
 * chain, which makes loading it quadratic. This one is SipHash-1-3 under a
 * key drawn once per process from the system's random source, so which
 * keys collide cannot be known from outside the process. Values differ
 * from run to run: never store them or let output depend on them.
 */
#ifndef RLX_IR_HASH_H
#define RLX_IR_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

uint64_t ir_hash_bytes(const void *p, size_t n);
uint64_t ir_hash_u64(uint64_t v);
static inline uint64_t ir_hash_str(const char *s) { return ir_hash_bytes(s, strlen(s)); }

#endif
