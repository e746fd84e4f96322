/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Go pprof labels: the labels a goroutine carries (pprof.Do,
 * pprof.SetGoroutineLabels), attached to the samples of the thread that
 * runs it.
 *
 * The entry programs (on_cpu_sample, on_sched_switch) call
 * read_go_labels once per sample. A process without a
 * go_label_processes entry costs that one hash lookup. For a Go process:
 *  1. g: the thread's current g, in its TLS (thread pointer + tls_g; Go
 *     keeps it at -8 from fsbase, elsewhere in some builds: user space
 *     decodes runtime.stackcheck).
 *  2. g.m.curg: the user goroutine the thread runs (g may be g0, on the
 *     system stack, or gsignal); none (0) in the scheduler: no labels.
 *  3. curg.labels: 0 without labels; else a *labelMap, which is
 *     - Go 1.24+ (GO_LABELS_SLICE): a []{key, value string}, read in
 *       one go (GO_LABELS_MAX pairs at most);
 *     - Go 1.13-1.23 (GO_LABELS_HMAP): a map[string]string, whose
 *       buckets (GO_HMAP_MAX_BUCKETS at most) are read one at a time.
 *       Label maps are built once and not changed after, so no growth is
 *       under way; overflow buckets are not followed (counted).
 * The labels go to go_labels_scratch; send_sample_sized appends them to
 * the sample (SAMPLE_FLAG_GO_LABELS). Keys and values are cut to the
 * struct go_label sizes.
 *
 * x86-64 only (the thread pointer is fsbase, g at a negative offset from
 * it); other targets compile read_go_labels to nothing (arm64 Go keeps g
 * in x28, and in TLS only with cgo).
 */

/* Counters: COUNTER_GO_LABELS_* (types.h). */

/* Reads a Go string header's bytes into out (size bytes, NUL-ended). */
static __always_inline int read_go_string(char *out, u32 size, u64 ptr, u64 len)
{
	if (len > size - 1) {
		count(COUNTER_GO_LABELS_TRUNCATED);
		len = size - 1;
	}
	out[0] = 0;
	if (len == 0)
		return 0;
	/* Bound the length again where it is used: clang may keep a copy of
	 * it from before the clamp (on the stack), whose range the 5.10 and
	 * 6.1 verifiers do not learn from the clamp. The mask (sizes are powers
	 * of two) after a barrier, so that clang cannot drop it. */
	_Static_assert((GO_LABEL_KEY_LEN & (GO_LABEL_KEY_LEN - 1)) == 0 &&
			       (GO_LABEL_VALUE_LEN & (GO_LABEL_VALUE_LEN - 1)) == 0,
		       "label sizes are powers of two");
	barrier_var(len);
	len &= size - 1;
	if (bpf_probe_read_user(out, len, (const void *)ptr))
		return -1;
	out[len] = 0;
	return 0;
}

/* Go 1.24+: the pairs of the label slice at labels. */
static __always_inline int read_label_slice(struct go_labels_work *work, u64 labels)
{
	u64 slice[3];
	if (bpf_probe_read_user(slice, sizeof(slice), (const void *)labels))
		return -1;
	u64 n = slice[1];
	if (n > GO_LABELS_MAX) {
		count(COUNTER_GO_LABELS_TRUNCATED);
		n = GO_LABELS_MAX;
	}
	if (n == 0)
		return 0;
	/* 4 words per pair: key ptr, key len, value ptr, value len. Read a
	 * pair at a time, a constant size: a size computed from n is spilled
	 * and loses its bounds on 5.10 and 6.1's verifiers. */
	for (u32 i = 0; i < GO_LABELS_MAX; i++) {
		if (i >= n)
			break;
		if (bpf_probe_read_user(work->words, 32, (const void *)(slice[0] + 32 * (u64)i)))
			return -1;
		struct go_label *label = &work->labels.labels[i];
		if (read_go_string(label->key, GO_LABEL_KEY_LEN, work->words[0], work->words[1]) ||
		    read_go_string(label->value, GO_LABEL_VALUE_LEN, work->words[2], work->words[3]))
			return -1;
		work->labels.count = i + 1;
	}
	return 0;
}

/* The label to fill next, or NULL when GO_LABELS_MAX are filled. The
 * count is read back from the map value each time, not carried in a
 * register: the verifier then knows it only by its bound, and the paths
 * through the slots before (each empty or taken) merge instead of
 * multiplying by every count they could have reached. */
static __always_inline struct go_label *next_label(struct go_labels_work *work)
{
	u32 taken = *(volatile u8 *)&work->labels.count;
	if (taken >= GO_LABELS_MAX)
		return NULL;
	return &work->labels.labels[taken];
}

/* Go 1.13-1.23: the entries of the label map at labels (a *labelMap: a
 * pointer to the hmap). */
static __always_inline int read_label_map(struct go_labels_work *work, u64 labels)
{
	u64 hmap = 0;
	if (read_user_u64(&hmap, labels))
		return -1;
	if (!hmap)
		return 0;
	u64 head[3];
	if (bpf_probe_read_user(head, sizeof(head), (const void *)hmap))
		return -1;
	u64 entries = head[GO_HMAP_COUNT / 8];
	u8 log2_buckets = (u8)(head[GO_HMAP_LOG2_BUCKETS / 8] >> (8 * (GO_HMAP_LOG2_BUCKETS % 8)));
	u64 buckets = head[GO_HMAP_BUCKETS / 8];
	if (entries == 0 || !buckets)
		return 0;
	u32 bucket_count = log2_buckets < 8 ? 1U << log2_buckets : 256;
	if (bucket_count > GO_HMAP_MAX_BUCKETS) {
		count(COUNTER_GO_LABELS_TRUNCATED);
		bucket_count = GO_HMAP_MAX_BUCKETS;
	}
	for (u32 b = 0; b < GO_HMAP_MAX_BUCKETS; b++) {
		if (b >= bucket_count)
			break;
		if (bpf_probe_read_user(work->words, GO_BUCKET_SIZE, (const void *)(buckets + b * GO_BUCKET_SIZE)))
			return -1;
		u8 *tophash = (u8 *)work->words;
		/* keys: words 1..16, values: words 17..32, overflow: 33 */
		if (work->words[GO_BUCKET_SIZE / 8 - 1])
			count(COUNTER_GO_LABELS_TRUNCATED);
		for (u32 i = 0; i < GO_BUCKET_SLOTS; i++) {
			/* below minTopHash (5): an empty (or evacuated) slot */
			if (tophash[i] < 5)
				continue;
			struct go_label *label = next_label(work);
			if (!label) {
				count(COUNTER_GO_LABELS_TRUNCATED);
				return 0;
			}
			if (read_go_string(label->key, GO_LABEL_KEY_LEN, work->words[1 + 2 * i], work->words[2 + 2 * i]) ||
			    read_go_string(label->value, GO_LABEL_VALUE_LEN, work->words[17 + 2 * i],
					   work->words[18 + 2 * i]))
				return -1;
			work->labels.count++;
		}
	}
	return 0;
}

/* The labels of the goroutine the current thread of tgid runs, into
 * go_labels_scratch; sets SAMPLE_FLAG_GO_LABELS in event when there are
 * some. */
static __always_inline void read_go_labels(struct sample_event *event, u32 tgid)
{
#if defined(__TARGET_ARCH_x86)
	struct go_labels_process *go = bpf_map_lookup_elem(&go_label_processes, &tgid);
	if (!go)
		return;
	u32 zero = 0;
	struct go_labels_work *work = bpf_map_lookup_elem(&go_labels_scratch, &zero);
	if (!work)
		return;
	work->labels.count = 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	u64 fsbase = arch_thread_pointer(task);
	u64 g = 0, m = 0, curg = 0, labels = 0;
	if (!fsbase || read_user_u64(&g, fsbase + (s64)go->tls_g) || !g || read_user_u64(&m, g + go->g_m) || !m ||
	    read_user_u64(&curg, m + go->m_curg)) {
		count(COUNTER_GO_LABELS_NO_G);
		return;
	}
	/* No user goroutine (the scheduler): no labels. */
	if (!curg)
		return;
	if (read_user_u64(&labels, curg + go->g_labels)) {
		count(COUNTER_GO_LABELS_READ_ERRORS);
		return;
	}
	if (!labels)
		return;
	int err = go->layout == GO_LABELS_SLICE ? read_label_slice(work, labels) : read_label_map(work, labels);
	if (err) {
		/* Half a label set would mislead: none. */
		work->labels.count = 0;
		count(COUNTER_GO_LABELS_READ_ERRORS);
		return;
	}
	if (work->labels.count)
		event->flags |= SAMPLE_FLAG_GO_LABELS;
#endif
}
