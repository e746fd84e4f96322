/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Writing user frame words (their format: types.h, FRAME_INTERPRETED).
 * Every unwinder builds its frame's payload and appends the word with
 * append_user_frame; an interpreter's word is frame_word_interpreted of
 * its slot and payload.
 *
 * Included once by profiler.bpf.c, after helpers.h.
 */
#ifndef EP_FRAME_WORD_H
#define EP_FRAME_WORD_H

/* The frame word of an interpreter's frame: unwinder slot `slot` (a
 * compile-time constant at every call, so the branches fold into one OR)
 * and `payload`, cut to the slot's FRAME_PAYLOAD_BITS. */
static __always_inline u64 frame_word_interpreted(u32 slot, u64 payload)
{
	payload &= (1ULL << FRAME_PAYLOAD_BITS(slot)) - 1;
	if (slot == FRAME_WIDE_SLOT)
		return FRAME_INTERPRETED | FRAME_WIDE | payload;
	if (slot == FRAME_PLAIN_SLOT)
		return FRAME_INTERPRETED | payload;
	if (slot < FRAME_EXTENDED_SLOT_MIN)
		return FRAME_INTERPRETED | FRAME_COMPACT | ((u64)slot << FRAME_COMPACT_SLOT_SHIFT) | payload;
	return FRAME_INTERPRETED | FRAME_COMPACT | ((u64)(slot & FRAME_EXTENDED_SLOT_MASK) << FRAME_EXTENDED_SLOT_SHIFT) |
	       payload;
}

/* Appends a user frame word to the sample; false when the sample holds
 * MAX_USER_FRAMES user frames already (the caller ends the stack with
 * UNWIND_STOP_MAX_FRAMES). */
static __always_inline bool append_user_frame(struct sample_event *event, u64 word)
{
	u32 n = event->user_frames;
	if (n >= MAX_USER_FRAMES)
		return false;
	/* Bounds the index for the verifier (kernel_frames is at most
	 * MAX_KERNEL_FRAMES). */
	u32 slot = event->kernel_frames + n;
	if (slot >= MAX_KERNEL_FRAMES + MAX_USER_FRAMES)
		return false;
	event->frames[slot] = word;
	event->user_frames = n + 1;
	return true;
}

#endif
