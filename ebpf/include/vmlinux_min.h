/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types the eBPF programs use, so that building needs no
 * bpftool and no kernel headers. Struct fields read from kernel memory
 * carry preserve_access_index: libbpf relocates their offsets against the
 * running kernel's BTF (CO-RE), so only the fields named here must exist,
 * not this exact layout. Values and layouts are the kernel's UAPI, the
 * registers and thread_struct per architecture (arch.h uses them).
 */
#ifndef EP_VMLINUX_MIN_H
#define EP_VMLINUX_MIN_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* include/uapi/linux/bpf.h */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PROG_ARRAY = 3,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LPM_TRIE = 11,
	BPF_MAP_TYPE_ARRAY_OF_MAPS = 12,
	BPF_MAP_TYPE_HASH_OF_MAPS = 13,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_F_NO_PREALLOC = 1,
	BPF_F_INNER_MAP = 4096,
};

/* flags for bpf_get_stack */
enum {
	BPF_F_SKIP_FIELD_MASK = 0xff,
	BPF_F_USER_STACK = 256,
	BPF_F_USER_BUILD_ID = 2048,
};

/* flags for bpf_ringbuf_output, and bpf_ringbuf_query's question */
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
};

#if defined(__TARGET_ARCH_x86)
/* arch/x86/include/uapi/asm/ptrace.h (x86-64): the layout the
 * perf_event program context exposes; fixed ABI, not relocated. */
struct pt_regs {
	unsigned long r15;
	unsigned long r14;
	unsigned long r13;
	unsigned long r12;
	unsigned long bp;
	unsigned long bx;
	unsigned long r11;
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long ax;
	unsigned long cx;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
	unsigned long ip;
	unsigned long cs;
	unsigned long flags;
	unsigned long sp;
	unsigned long ss;
};

typedef struct pt_regs bpf_user_pt_regs_t;
#elif defined(__TARGET_ARCH_arm64)
/* arch/arm64/include/uapi/asm/ptrace.h: the perf_event program context's
 * registers (bpf_user_pt_regs_t), and the start of the kernel's struct
 * pt_regs (the user registers are its first member); fixed ABI. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};

typedef struct user_pt_regs bpf_user_pt_regs_t;

/* Named by bpf_task_pt_regs's prototype; only its start is read, as a
 * struct user_pt_regs. */
struct pt_regs {
	struct user_pt_regs user_regs;
};
#else
#error "define __TARGET_ARCH_x86 or __TARGET_ARCH_arm64"
#endif

/* include/uapi/linux/bpf_perf_event.h */
struct bpf_perf_event_data {
	bpf_user_pt_regs_t regs;
	__u64 sample_period;
	__u64 addr;
};

/* Kernel-internal, read through CO-RE. */
typedef struct {
	int counter;
} atomic_t;

struct mm_struct {
} __attribute__((preserve_access_index));

struct signal_struct {
	/* threads of the group not yet exited (do_exit decrements it
	 * before the sched_process_exit tracepoint) */
	atomic_t live;
} __attribute__((preserve_access_index));

#if defined(__TARGET_ARCH_x86)
struct thread_struct {
	/* the user fs base: the thread pointer (glibc's struct pthread) */
	unsigned long fsbase;
} __attribute__((preserve_access_index));
#elif defined(__TARGET_ARCH_arm64)
/* thread_struct.uw, the user-visible part (hardened usercopy region);
 * CO-RE matches members by name, not this struct's name. */
struct thread_struct_user {
	/* TPIDR_EL0: the thread pointer */
	unsigned long tp_value;
} __attribute__((preserve_access_index));

struct thread_struct {
	struct thread_struct_user uw;
} __attribute__((preserve_access_index));
#endif

/* A task's ids, one per PID namespace level from the init namespace
 * (level 0) to the task's own (include/linux/pid.h). */
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct pid_namespace {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct upid {
	int nr;
	struct pid_namespace *ns;
} __attribute__((preserve_access_index));

struct pid {
	unsigned int level;
	struct upid numbers[];
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_struct thread;
	/* PF_* */
	unsigned int flags;
	int pid;
	int tgid;
	void *stack;
	struct mm_struct *mm;
	struct signal_struct *signal;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	char comm[16];
} __attribute__((preserve_access_index));

#endif
