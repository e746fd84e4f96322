/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Everything the eBPF programs assume about the CPU architecture, for
 * x86-64 (__TARGET_ARCH_x86, the agent's build) and arm64
 * (__TARGET_ARCH_arm64, `make bpf-arm64`: it compiles and loads; see
 * docs/kernels.md for what a full arm64 agent still needs):
 *  - the user registers in a pt_regs (the perf context, or the ones a
 *    task saved on entering the kernel) and whether they are user mode;
 *  - the thread pointer in the kernel's thread_struct, and where glibc
 *    keeps the DTV relative to it;
 *  - which native unwinding rules apply (the rule format of types.h is
 *    the x86-64 CFI: return address at CFA - 8, the PLT formula, the
 *    x86-64 signal frame).
 * Shared by both, so not here: the frame record a frame pointer points
 * at ([fp] the caller's fp, [fp + 8] the return address, the caller's sp
 * at fp + 16), which the JIT and interpreter unwinders walk; it
 * is the same on arm64 (AAPCS64: x29 points at the {x29, x30} pair).
 * vmlinux_min.h holds the pt_regs and thread_struct of each.
 */
#ifndef EP_ARCH_H
#define EP_ARCH_H

#if defined(__TARGET_ARCH_x86)

/* Bytes of the kernel's pt_regs at the top of a task's kernel stack
 * (x86-64 has no TOP_OF_KERNEL_STACK_PADDING). */
#define ARCH_SAVED_REGS_SIZE sizeof(struct pt_regs)

/* The privilege level of the interrupted code: 3 is user mode. */
static __always_inline bool arch_user_mode(const bpf_user_pt_regs_t *regs)
{
	return (regs->cs & 3) == 3;
}

#define arch_regs_pc(r) ((r)->ip)
#define arch_regs_sp(r) ((r)->sp)
#define arch_regs_fp(r) ((r)->bp)
#define arch_regs_bx(r) ((r)->bx)

/* The thread pointer: the user fs base (glibc's struct pthread). */
#define arch_thread_pointer(task) BPF_CORE_READ(task, thread.fsbase)
/* glibc's tcbhead_t.dtv: the word after the thread pointer's self
 * pointer. */
#define ARCH_TLS_DTV_OFFSET 8

/* The native rules' PLT formula and signal frame are x86-64's. */
#define ARCH_HAS_X86_PLT_RULE 1
#define ARCH_HAS_X86_SIGNAL_FRAME 1

#elif defined(__TARGET_ARCH_arm64)

/* Bytes of the kernel's struct pt_regs (arch/arm64/include/asm/ptrace.h,
 * 5.10 to 6.1: user_pt_regs, orig_x0, syscallno, 8 more words). Only
 * used without bpf_task_pt_regs, i.e. before 5.15, where it is right. */
#define ARCH_SAVED_REGS_SIZE 336

/* PSTATE.M: EL0t (0) is user mode (the kernel's user_mode(); a 32-bit
 * task's PSR_MODE32_BIT is outside the mask). */
#define ARCH_PSR_MODE_MASK 0xfULL
#define ARCH_PSR_MODE_EL0T 0x0ULL
static __always_inline bool arch_user_mode(const bpf_user_pt_regs_t *regs)
{
	return (regs->pstate & ARCH_PSR_MODE_MASK) == ARCH_PSR_MODE_EL0T;
}

#define arch_regs_pc(r) ((r)->pc)
#define arch_regs_sp(r) ((r)->sp)
/* x29, the frame pointer (AAPCS64); the link register x30 is
 * regs[30] and is not read yet: see docs/kernels.md. */
#define arch_regs_fp(r) ((r)->regs[29])
/* (A JIT's registers in rbx are read on x86-64 only.) */
#define arch_regs_bx(r) 0

/* The thread pointer: TPIDR_EL0, saved in thread_struct.uw.tp_value
 * (glibc: it points at the TCB, after struct pthread). */
#define arch_thread_pointer(task) BPF_CORE_READ(task, thread.uw.tp_value)
/* glibc aarch64 (TLS variant I): tcbhead_t.dtv is the TCB's first word. */
#define ARCH_TLS_DTV_OFFSET 0

/* AArch64 PLT stubs leave the return address in x30, and its signal
 * frame differs: such frames stop with UNWIND_STOP_ARCH_UNSUPPORTED. */
#define ARCH_HAS_X86_PLT_RULE 0
#define ARCH_HAS_X86_SIGNAL_FRAME 0

#else
#error "define __TARGET_ARCH_x86 or __TARGET_ARCH_arm64"
#endif

/* The return address of a frame the rules unwind is at CFA - 8: pushed by
 * call on x86-64; on arm64 x30 stored by the prologue's
 * stp x29, x30, [sp, #-16]! (only once the prologue ran). */
#define ARCH_RETURN_ADDRESS_BELOW_CFA 8

#endif
