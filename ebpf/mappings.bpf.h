/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a process has mapped at an address: two binary searches over the
 * sorted ranges user space wrote (struct process_ranges, types.h), first
 * over the chunks' first addresses, then inside one chunk. Two hash
 * lookups a frame, where an LPM trie walked its nodes; one entry or two
 * a process to write, where the trie took one per aligned block.
 */
#ifndef EP_MAPPINGS_H
#define EP_MAPPINGS_H

enum mapping_lookup {
	MAPPING_FOUND = 0,
	/* No entry for the pid: user space has not read its mappings. */
	MAPPING_UNKNOWN_PID = 1,
	/* The pid is known, the address is in none of its ranges. */
	MAPPING_UNKNOWN_PC = 2,
};

_Static_assert(RANGES_PER_CHUNK == 64 && RANGE_CHUNKS_MAX == 64, "the searches run over 64 slots");

/* All-ones when start <= pc, else zero, without a branch: addresses are
 * below 2^63, so pc - start has the sign of the comparison. The shift is
 * written in assembly: clang would turn it back into a compare and
 * branch, and the verifier would then walk both sides of every step. */
static __always_inline u64 at_or_below(u64 start, u64 pc)
{
	u64 sign = pc - start;
	asm volatile("%[sign] s>>= 63" : [sign] "+r"(sign));
	return ~sign;
}

/* index & 63, masked in assembly so that the verifier sees the bound at
 * the access (clang folds a C mask into ors and xors that 5.10's and
 * 6.1's verifiers cannot bound). */
static __always_inline u32 slot_of(u32 index)
{
	asm volatile("%[index] &= 63" : [index] "+r"(index));
	return index;
}

/* The last of 64 sorted slots whose start is at or below pc, slot 0's
 * being so. No branch: the verifier walks one path, not 64, for each of
 * the up to 32 frames a program run unwinds. */
#define LAST_AT_OR_BELOW(start_of, pc)                                  \
	({                                                              \
		u32 lo_ = 0;                                            \
		_Pragma("unroll") for (u32 step_ = 32; step_ > 0; step_ /= 2) \
			lo_ += step_ & at_or_below(start_of(slot_of(lo_ + step_)), pc); \
		slot_of(lo_);                                           \
	})

/* Looks pc up in pid's ranges; on MAPPING_FOUND *out points at the
 * mapping (a map value: valid for this program run). */
static __always_inline enum mapping_lookup lookup_mapping(u32 pid, u64 pc, struct pid_mapping **out)
{
	struct process_ranges *process = bpf_map_lookup_elem(&process_ranges, &pid);
	if (!process)
		return MAPPING_UNKNOWN_PID;
	u32 count = process->count;
	if (count == 0 || count > PROCESS_RANGES_MAX)
		return MAPPING_UNKNOWN_PC;
	if (pc < process->chunk_start[0])
		return MAPPING_UNKNOWN_PC;
#define CHUNK_START(i) process->chunk_start[i]
	u32 chunk = LAST_AT_OR_BELOW(CHUNK_START, pc);
#undef CHUNK_START
	struct range_chunk_key key = {
		.pid = pid,
		.chunk = (process->generation & 1) << 16 | chunk,
	};
	struct range_chunk *ranges = bpf_map_lookup_elem(&process_range_chunks, &key);
	if (!ranges)
		return MAPPING_UNKNOWN_PC; /* being rewritten */
#define RANGE_START(i) ranges->ranges[i].start
	u32 at = LAST_AT_OR_BELOW(RANGE_START, pc);
#undef RANGE_START
	struct process_range *range = &ranges->ranges[at];
	if (pc < range->start || pc >= range->end)
		return MAPPING_UNKNOWN_PC;
	*out = &range->mapping;
	return MAPPING_FOUND;
}

#endif /* EP_MAPPINGS_H */
