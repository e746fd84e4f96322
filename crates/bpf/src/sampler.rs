//! Loading the programs and attaching them to the perf events.

use crate::events::ProcessEventReader;
use crate::go_labels::GoLabelMaps;
use crate::interpreter_maps::InterpreterMaps;
use crate::late_unwind::MapTables;
use crate::perf::{online_cpus, open_cpu_clock};
use crate::pid_namespace::PidNamespace;
use crate::preflight::{check_kernel_features, check_privileges, has_task_pt_regs};
use crate::reader::SampleReader;
use crate::sample::STACK_COPY_MAX;
use crate::sampling_switch::{dup_event, SamplingSwitch};
use crate::selection::PidSelection;
use crate::skel::{OpenProfilerSkel, ProfilerSkel, ProfilerSkelBuilder};
use crate::types::{InterpreterUnwinder, UnwindStop};
use crate::unwind_maps::UnwindMaps;
use crate::BpfError;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, OpenObject};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// How to set up sampling.
#[derive(Clone, Debug)]
pub struct SamplerOptions {
    /// Samples per second per CPU.
    pub samples_per_second: u32,
    /// Only sample these processes (tgids); `None` samples every process.
    pub pids: Option<Vec<u32>>,
    /// With `pids`: the selection follows processes. New processes of
    /// selected ones are selected at their fork, exited ones unselected,
    /// and every exec is reported so that user space may select more
    /// ([`Sampler::pid_selection`]).
    pub follow_selection: bool,
    /// Size of the sample ring buffer in bytes (a power of two, at least
    /// one page).
    pub ring_buffer_bytes: u32,
    /// Find the user registers of tasks sampled in the kernel at the top
    /// of their kernel stack even when `bpf_task_pt_regs` exists (the
    /// fallback for kernels before 5.15; for tests).
    pub user_regs_from_stack: bool,
    /// Off-CPU profiling: a switch-out is sampled with probability
    /// `(off_cpu_threshold + 1) / 2^32` (the reference agent's fraction
    /// scaled to `u32::MAX`); 0 turns it off (its programs are not
    /// loaded).
    pub off_cpu_threshold: u32,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            samples_per_second: 20,
            pids: None,
            follow_selection: false,
            ring_buffer_bytes: 4 << 20,
            user_regs_from_stack: false,
            off_cpu_threshold: 0,
        }
    }
}

/// Declares [`Counters`] from one table: field, `enum counter_id`
/// constant. The contract test checks that every counter of the header
/// is in it.
macro_rules! counters {
    ($($(#[$doc:meta])* $field:ident = $id:ident;)*) => {
        /// The counters the eBPF programs keep (`enum counter_id` in
        /// `ebpf/types.h`), summed over CPUs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Counters {
            $($(#[$doc])* pub $field: u64,)*
            /// Time the kernel spent in the programs for samples, ns (the entry
            /// program and its tail calls); 0 unless `kernel.bpf_stats_enabled`.
            pub bpf_run_time_ns: u64,
            /// Runs of the entry program counted in `bpf_run_time_ns`.
            pub bpf_runs: u64,
            /// How user stacks ended, by [`UnwindStop`] (index = its raw value).
            pub unwind_stops: [u64; UnwindStop::ALL.len()],
            /// Each runtime's counters (`ebpf/runtimes/<name>/counters.h`), by
            /// their place in [`RUNTIME_COUNTERS`]: see [`Counters::interpreter`].
            runtimes: [u64; RUNTIME_COUNTERS.len()],
        }

        impl Default for Counters {
            fn default() -> Self {
                Counters {
                    $($field: 0,)*
                    bpf_run_time_ns: 0,
                    bpf_runs: 0,
                    unwind_stops: [0; UnwindStop::ALL.len()],
                    runtimes: [0; RUNTIME_COUNTERS.len()],
                }
            }
        }

        /// The `enum counter_id` constants [`Counters`] reads, by name.
        #[cfg(test)]
        pub(crate) const COUNTER_IDS: &[(&str, u32)] = &[$((stringify!($id), c::$id)),*];

        impl Counters {
            /// Fills the table's fields with `read(id)`.
            fn read_all(mut read: impl FnMut(u32) -> Result<u64, BpfError>) -> Result<Counters, BpfError> {
                let mut counters = Counters::default();
                $(counters.$field = read(c::$id)?;)*
                for (i, slot) in counters.unwind_stops.iter_mut().enumerate() {
                    *slot = read(c::COUNTER_UNWIND_STOP_BASE + i as u32)?;
                }
                for (slot, (_, id)) in counters.runtimes.iter_mut().zip(RUNTIME_COUNTERS) {
                    *slot = read(*id)?;
                }
                Ok(counters)
            }
        }
    };
}

counters! {
    /// Times the perf event fired.
    triggered = COUNTER_SAMPLES_TRIGGERED;
    /// Samples sent to user space.
    sent = COUNTER_SAMPLES_SENT;
    /// Samples lost because the ring buffer was full.
    lost_ring_buffer = COUNTER_SAMPLES_LOST_RINGBUF;
    /// Ticks on an idle CPU (nothing to sample).
    idle = COUNTER_SAMPLES_IDLE;
    /// Ticks of processes outside the pid filter.
    filtered = COUNTER_SAMPLES_FILTERED;
    /// Kernel stacks that could not be read.
    kernel_stack_errors = COUNTER_KERNEL_STACK_ERROR;
    /// Retired (frame-pointer stacks that could not be read); always 0.
    user_stack_errors = COUNTER_USER_STACK_ERROR;
    /// Process events sent to the process manager.
    process_events = COUNTER_PROCESS_EVENTS_SENT;
    /// Process events lost (their ring buffer was full).
    process_events_lost = COUNTER_PROCESS_EVENTS_LOST;
    /// Process events not sent because one of their kind for the pid
    /// went out just before.
    process_events_rate_limited = COUNTER_PROCESS_EVENTS_RATE_LIMITED;
    /// User frames unwound.
    user_frames = COUNTER_USER_FRAMES;
    /// Tail calls into the native unwinder.
    native_tail_calls = COUNTER_NATIVE_TAIL_CALLS;
    /// Samples sent with a copy of their user stack (their process or pc
    /// was not loaded yet).
    stack_copies = COUNTER_STACK_COPIES;
    /// Samples that needed a stack copy and went without (the per-CPU
    /// budget was spent, or the ring buffer was filling up).
    stack_copies_skipped = COUNTER_STACK_COPY_SKIPPED;
    /// Samples that needed a stack copy and no window could be read.
    stack_copies_failed = COUNTER_STACK_COPY_FAILED;
    /// Bytes of user stack copied.
    stack_copy_bytes = COUNTER_STACK_COPY_BYTES;
    /// New processes of selected ones that could not be selected
    /// (`selected_pids` full).
    selected_pids_full = COUNTER_SELECTED_PIDS_FULL;
    /// Ticks of tasks the agent's PID namespace does not see (the agent
    /// runs in a nested one).
    other_pid_namespace = COUNTER_SAMPLES_OTHER_PID_NS;

    /// Scheduler switches seen (off-CPU profiling on).
    off_cpu_switches = COUNTER_OFF_CPU_SWITCHES;
    /// Switch-outs of user threads sampled: their stack was taken.
    off_cpu_sampled = COUNTER_OFF_CPU_SAMPLED;
    /// Ends of off-CPU periods sent (the sampled thread ran again).
    off_cpu_ends = COUNTER_OFF_CPU_ENDS_SENT;
    /// Ends of off-CPU periods lost (the ring buffer was full).
    off_cpu_ends_lost = COUNTER_OFF_CPU_ENDS_LOST;
    /// Samples of Go processes sent with their goroutine's pprof labels.
    go_labels_samples = COUNTER_GO_LABELS_SAMPLES;
    /// Samples of Go processes whose current goroutine could not be
    /// found (TLS, g, g.m or m.curg unreadable).
    go_labels_no_g = COUNTER_GO_LABELS_NO_G;
    /// Go label sets that could not be read (the sample goes without).
    go_labels_read_errors = COUNTER_GO_LABELS_READ_ERRORS;
    /// Go label sets cut short (more than `GO_LABELS_MAX` labels, map
    /// buckets beyond those read, keys or values cut).
    go_labels_truncated = COUNTER_GO_LABELS_TRUNCATED;
    /// Stacks followed from `runtime.morestack` on the system stack to
    /// the goroutine growing its stack.
    go_morestack_followed = COUNTER_GO_MORESTACK_FOLLOWED;
    /// Stacks followed from `runtime.mcall` or `runtime.morestack` on the
    /// system stack, with no goroutine to follow, to the thread's root
    /// (`m.g0.sched`).
    go_scheduler_roots = COUNTER_GO_SCHEDULER_ROOTS;
}

impl Counters {
    /// The counters of one interpreter unwinder: those of its
    /// `counters.h`, `COUNTER_<NAME>_<COUNTER>`, as `<counter>`
    /// (`<name>_<counter>` in the agent's stats).
    pub fn interpreter(&self, unwinder: InterpreterUnwinder) -> Vec<(&'static str, u64)> {
        let name = unwinder.name();
        RUNTIME_COUNTERS
            .iter()
            .zip(self.runtimes)
            .filter_map(|((counter, _), value)| Some((counter.strip_prefix(name)?.strip_prefix('_')?, value)))
            .collect()
    }

    /// How many user stacks ended for `reason`.
    pub fn unwind_stop(&self, reason: UnwindStop) -> u64 {
        self.unwind_stops.get(usize::from(reason.raw())).copied().unwrap_or(0)
    }
}

use crate::contract::c;
use profiler_contract::RUNTIME_COUNTERS;

/// The loaded and attached eBPF programs. Dropping it detaches them.
pub struct Sampler {
    // Field order matters: links are dropped (detached) before the
    // skeleton (programs and maps).
    perf_links: Vec<Link>,
    // Second descriptors of the perf events, for SamplingSwitch; dropped
    // with the links.
    perf_events: Arc<Vec<OwnedFd>>,
    exit_link: Option<Link>,
    exec_link: Option<Link>,
    fork_link: Option<Link>,
    off_cpu_link: Option<Link>,
    skel: ProfilerSkel<'static>,
    cpus: Vec<u32>,
    frequency: u32,
    off_cpu: OffCpuState,
    pid_namespace: PidNamespace,
}

/// Whether off-CPU profiling runs.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OffCpuState {
    Off,
    Loaded,
    /// Asked for, and the kernel refused its programs: why.
    Unavailable(String),
}

impl Sampler {
    fn load_programs(options: &SamplerOptions) -> Result<Sampler, BpfError> {
        check_privileges()?;
        check_kernel_features()?;
        if options.off_cpu_threshold == 0 {
            return Self::load_object(options, OffCpuState::Off);
        }
        match Self::load_object(options, OffCpuState::Loaded) {
            Ok(sampler) => Ok(sampler),
            // A kernel without what the off-CPU programs need
            // (tp_btf/sched_switch) still profiles on-CPU.
            Err(BpfError::Load(e)) => {
                let mut sampler = Self::load_object(options, OffCpuState::Off)?;
                sampler.off_cpu = OffCpuState::Unavailable(e.to_string());
                Ok(sampler)
            }
            Err(e) => Err(e),
        }
    }

    /// Opens and loads the object (the off-CPU programs only when
    /// `off_cpu` is `Loaded`) and attaches the process tracepoints.
    fn load_object(options: &SamplerOptions, off_cpu: OffCpuState) -> Result<Sampler, BpfError> {
        let off_cpu_on = off_cpu == OffCpuState::Loaded;

        // The skeleton borrows its object storage for its whole life; one
        // small allocation per load is leaked to give it a 'static home
        // (OpenObject is a pointer; libbpf's object itself is freed when
        // the skeleton drops).
        let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open: OpenProfilerSkel<'static> =
            ProfilerSkelBuilder::default().open(storage).map_err(BpfError::Load)?;
        let task_pt_regs = has_task_pt_regs() && !options.user_regs_from_stack;
        let pid_namespace = PidNamespace::of_agent()?;
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.pid_ns_inum = if pid_namespace.is_init() { 0 } else { pid_namespace.inode };
            rodata.filter_pids = options.pids.is_some();
            rodata.select_descendants = options.pids.is_some() && options.follow_selection;
            rodata.have_task_pt_regs = task_pt_regs;
            rodata.stack_copy_budget_bytes = u64::from(options.samples_per_second) * STACK_COPY_MAX as u64;
            rodata.off_cpu_threshold = options.off_cpu_threshold;
        }
        if !off_cpu_on {
            // Not verified, not loaded: the unwinders' second entries
            // would double the load time.
            // Off-CPU programs: on_sched_switch and every unwinder's
            // <name>_off_cpu entry.
            for mut program in open.open_object_mut().progs_mut() {
                if program.section() == "tp_btf/sched_switch" {
                    program.set_autoload(false);
                }
            }
            open.maps
                .off_cpu_starts
                .set_max_entries(1)
                .map_err(|source| BpfError::Map { map: "off_cpu_starts", source })?;
        }
        open.maps
            .samples
            .set_max_entries(options.ring_buffer_bytes)
            .map_err(|source| BpfError::Map { map: "samples", source })?;
        crate::preflight::preallocate_hash_maps_if_needed(open.open_object_mut())?;
        let skel = open.load().map_err(classify_load_error)?;
        if off_cpu_on {
            fill_off_cpu_programs(&skel)?;
        }

        if let Some(pids) = &options.pids {
            for pid in pids {
                skel.maps
                    .selected_pids
                    .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
                    .map_err(|source| BpfError::Map { map: "selected_pids", source })?;
            }
        }

        // Exits first, so that no process is loaded without its exit
        // being seen.
        let exit_link = skel.progs.on_process_exit.attach().map_err(BpfError::Load)?;
        let exec_link = skel.progs.on_process_exec.attach().map_err(BpfError::Load)?;
        let fork_link = match options.pids.is_some() && options.follow_selection {
            true => Some(skel.progs.on_process_fork.attach().map_err(BpfError::Load)?),
            false => None,
        };

        Ok(Sampler {
            perf_links: Vec::new(),
            perf_events: Arc::default(),
            exit_link: Some(exit_link),
            exec_link: Some(exec_link),
            fork_link,
            off_cpu_link: None,
            skel,
            cpus: Vec::new(),
            frequency: options.samples_per_second,
            off_cpu,
            pid_namespace,
        })
    }

    /// Checks, loads and attaches everything but the perf events:
    /// [`Sampler::start_sampling`] starts sampling. In between, the
    /// unwinder's maps can be filled so that the first samples unwind.
    pub fn open(options: &SamplerOptions) -> Result<Sampler, BpfError> {
        Self::load_programs(options)
    }

    /// Checks privileges and kernel features, loads the programs and
    /// attaches them to a cpu-clock event on every online CPU.
    pub fn load(options: &SamplerOptions) -> Result<Sampler, BpfError> {
        let mut sampler = Self::load_programs(options)?;
        sampler.start_sampling()?;
        Ok(sampler)
    }

    /// Attaches the entry program to a cpu-clock event on every online
    /// CPU (once).
    pub fn start_sampling(&mut self) -> Result<(), BpfError> {
        if !self.perf_links.is_empty() {
            return Ok(());
        }
        let cpus = online_cpus()?;
        let mut links = Vec::with_capacity(cpus.len());
        let mut events = Vec::with_capacity(cpus.len());
        for &cpu in &cpus {
            let fd = open_cpu_clock(cpu, self.frequency)?;
            events.push(dup_event(fd).map_err(|source| {
                // SAFETY: fd is ours and was not handed to a link yet.
                unsafe { libc::close(fd) };
                BpfError::PerfEvent { cpu, source }
            })?);
            // libbpf's link takes ownership of the fd and closes it.
            let link = self.skel.progs.on_cpu_sample.attach_perf_event(fd).map_err(|e| {
                // SAFETY: fd is ours and was not taken over (attach failed).
                unsafe { libc::close(fd) };
                BpfError::PerfEvent { cpu, source: std::io::Error::other(e.to_string()) }
            })?;
            links.push(link);
        }
        if self.off_cpu == OffCpuState::Loaded {
            self.off_cpu_link = Some(self.skel.progs.on_sched_switch.attach().map_err(BpfError::Load)?);
        }
        self.perf_links = links;
        self.perf_events = Arc::new(events);
        self.cpus = cpus;
        Ok(())
    }

    /// The PID namespace whose pids the programs report (the agent's).
    pub fn pid_namespace(&self) -> PidNamespace {
        self.pid_namespace
    }

    /// Why off-CPU profiling was asked for and does not run (the kernel
    /// refused its programs); `None` when it runs or was not asked for.
    pub fn off_cpu_unavailable(&self) -> Option<&str> {
        match &self.off_cpu {
            OffCpuState::Unavailable(why) => Some(why),
            _ => None,
        }
    }

    /// Stops sampling: closes the perf events and the process tracepoints.
    /// The maps stay readable.
    pub fn detach(&mut self) {
        self.perf_links.clear();
        self.perf_events = Arc::default();
        self.off_cpu_link = None;
        self.exit_link = None;
        self.exec_link = None;
        self.fork_link = None;
    }

    /// A handle that pauses and resumes sampling on every CPU (after
    /// [`Sampler::start_sampling`]; it does nothing once detached).
    pub fn sampling_switch(&self) -> SamplingSwitch {
        SamplingSwitch::new(&self.perf_events)
    }

    /// The CPUs being sampled.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// A reader for the sample ring buffer, to be moved to its own thread.
    pub fn sample_reader(&self) -> Result<SampleReader, BpfError> {
        let map =
            MapHandle::try_from(&self.skel.maps.samples).map_err(|source| BpfError::Map { map: "samples", source })?;
        Ok(SampleReader::new(map))
    }

    /// The processes sampled under a pid filter (`selected_pids`), for
    /// user space to select processes as they appear.
    pub fn pid_selection(&self) -> Result<PidSelection, BpfError> {
        let map = MapHandle::try_from(&self.skel.maps.selected_pids)
            .map_err(|source| BpfError::Map { map: "selected_pids", source })?;
        Ok(PidSelection::new(map))
    }

    /// A reader for the process events ring buffer, for the process
    /// manager's thread.
    pub fn process_event_reader(&self) -> Result<ProcessEventReader, BpfError> {
        let map = MapHandle::try_from(&self.skel.maps.process_events)
            .map_err(|source| BpfError::Map { map: "process_events", source })?;
        Ok(ProcessEventReader::new(map))
    }

    /// Handles on the native unwinder's maps, for the process manager.
    /// Make one: it keeps the bookkeeping of what it loads.
    pub fn unwind_maps(&self) -> Result<UnwindMaps, BpfError> {
        let handle = |map: &libbpf_rs::Map<'_>, name: &'static str| {
            MapHandle::try_from(map).map_err(|source| BpfError::Map { map: name, source })
        };
        let maps = &self.skel.maps;
        Ok(UnwindMaps::new(
            handle(&maps.process_ranges, "process_ranges")?,
            handle(&maps.process_range_chunks, "process_range_chunks")?,
            handle(&maps.unwind_rules, "unwind_rules")?,
            handle(&maps.delta_pages, "delta_pages")?,
            handle(&maps.file_deltas, "file_deltas")?,
        ))
    }

    /// Read-only handles on the native unwinder's tables, for unwinding
    /// stack copies in user space.
    pub fn map_tables(&self) -> Result<MapTables, BpfError> {
        let handle = |map: &libbpf_rs::Map<'_>, name: &'static str| {
            MapHandle::try_from(map).map_err(|source| BpfError::Map { map: name, source })
        };
        let maps = &self.skel.maps;
        Ok(MapTables::new(
            handle(&maps.process_ranges, "process_ranges")?,
            handle(&maps.process_range_chunks, "process_range_chunks")?,
            handle(&maps.delta_pages, "delta_pages")?,
            handle(&maps.file_deltas, "file_deltas")?,
            handle(&maps.unwind_rules, "unwind_rules")?,
            handle(&maps.v8_processes, "v8_processes")?,
            handle(&maps.hotspot_processes, "hotspot_processes")?,
        ))
    }

    /// Handles on the interpreter unwinders' maps, for the process
    /// manager. Make one: it keeps the bookkeeping of what it loads.
    pub fn interpreter_maps(&self) -> Result<InterpreterMaps, BpfError> {
        let object = self.skel.object();
        let handle = |name: &'static str| {
            let map = object.maps().find(|m| m.name() == name).ok_or_else(|| BpfError::Map {
                map: name,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such map in the BPF object").into(),
            })?;
            MapHandle::try_from(&map).map_err(|source| BpfError::Map { map: name, source })
        };
        let mut runtime_maps = Vec::with_capacity(InterpreterUnwinder::ALL.len());
        for unwinder in InterpreterUnwinder::ALL {
            let (name, kind) = unwinder.map();
            runtime_maps.push((name, kind, handle(name)?));
        }
        Ok(InterpreterMaps::new(runtime_maps, vec![handle("python_thread_states")?]))
    }

    /// The map of Go processes whose pprof labels the programs read, for
    /// the process manager. Make one: it keeps what it loads.
    pub fn go_label_maps(&self) -> Result<GoLabelMaps, BpfError> {
        let map = MapHandle::try_from(&self.skel.maps.go_label_processes)
            .map_err(|source| BpfError::Map { map: "go_label_processes", source })?;
        Ok(GoLabelMaps::new(map))
    }

    /// The keys in the interpreter unwinders' maps, read by iterating
    /// them: (python_files: file ids, python_thread_states: `tgid << 32 |
    /// tid`). For tests and checks.
    pub fn interpreter_map_keys(&self) -> (Vec<u64>, Vec<u64>) {
        let maps = &self.skel.maps;
        let keys = |m: &libbpf_rs::Map<'_>| -> Vec<u64> {
            m.keys().filter_map(|k| k.get(..8).map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))).collect()
        };
        (keys(&maps.python_files), keys(&maps.python_thread_states))
    }

    /// The entry program's run statistics from the kernel: (total run
    /// time in ns, runs). Tail calls run inside their caller's run, so
    /// this is the whole BPF cost of the samples. Both are 0 unless the
    /// `kernel.bpf_stats_enabled` sysctl is 1.
    pub fn entry_program_run_stats(&self) -> (u64, u64) {
        program_run_stats(&self.skel.progs.on_cpu_sample)
    }

    /// As [`Sampler::entry_program_run_stats`], for the off-CPU entry
    /// (every scheduler switch, the sampled ones' unwinding included);
    /// (0, 0) when off-CPU profiling is off.
    pub fn off_cpu_program_run_stats(&self) -> (u64, u64) {
        if self.off_cpu != OffCpuState::Loaded {
            return (0, 0);
        }
        program_run_stats(&self.skel.progs.on_sched_switch)
    }

    /// Entries in the native unwinder's maps, counted by iterating their
    /// keys: (process_ranges + process_range_chunks, delta_pages,
    /// file_deltas).
    pub fn count_unwind_map_entries(&self) -> Result<(usize, usize, usize), BpfError> {
        let maps = &self.skel.maps;
        let processes = maps.process_ranges.keys().count() + maps.process_range_chunks.keys().count();
        Ok((processes, maps.delta_pages.keys().count(), maps.file_deltas.keys().count()))
    }

    /// The programs' counters, summed over CPUs.
    pub fn counters(&self) -> Result<Counters, BpfError> {
        let read = |id: u32| -> Result<u64, BpfError> {
            let per_cpu = self
                .skel
                .maps
                .counters
                .lookup_percpu(&id.to_ne_bytes(), MapFlags::ANY)
                .map_err(|source| BpfError::Map { map: "counters", source })?
                .unwrap_or_default();
            Ok(per_cpu.iter().filter_map(|v| v.get(..8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()))).sum())
        };
        let (bpf_run_time_ns, bpf_runs) = self.entry_program_run_stats();
        Ok(Counters { bpf_run_time_ns, bpf_runs, ..Counters::read_all(read)? })
    }
}

/// A loaded program's (run time ns, runs) from the kernel.
fn program_run_stats(program: &libbpf_rs::Program<'_>) -> (u64, u64) {
    use std::os::fd::{AsFd, AsRawFd};
    let fd = program.as_fd().as_raw_fd();
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a writable bpf_prog_info of len bytes.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info as *mut _ as *mut _, &mut len) };
    if rc != 0 {
        return (0, 0);
    }
    (info.run_time_ns, info.run_cnt)
}

/// Puts the unwinders' off-CPU entries in `off_cpu_programs`, by their
/// `enum unwinder_program` slot (as `programs` is filled at load).
fn fill_off_cpu_programs(skel: &ProfilerSkel<'static>) -> Result<(), BpfError> {
    use std::os::fd::{AsFd, AsRawFd};
    for (name, slot) in crate::runtimes::off_cpu_programs() {
        let program = skel.object().progs().find(|p| p.name() == name.as_str()).ok_or_else(|| {
            let missing = std::io::Error::new(std::io::ErrorKind::NotFound, format!("no program {name}"));
            BpfError::Map { map: "off_cpu_programs", source: missing.into() }
        })?;
        let fd = program.as_fd().as_raw_fd();
        skel.maps
            .off_cpu_programs
            .update(&slot.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| BpfError::Map { map: "off_cpu_programs", source })?;
    }
    Ok(())
}

fn classify_load_error(e: libbpf_rs::Error) -> BpfError {
    use libbpf_rs::ErrorKind;
    match e.kind() {
        ErrorKind::PermissionDenied => BpfError::NotPrivileged { what: format!("loading the programs: {e}") },
        _ => BpfError::Load(e),
    }
}
