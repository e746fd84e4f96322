//! Loading the programs and attaching them to the perf events.

use crate::events::ProcessEventReader;
use crate::interpreter_maps::InterpreterMaps;
use crate::late_unwind::MapTables;
use crate::perf::{online_cpus, open_cpu_clock};
use crate::preflight::{check_kernel_features, check_privileges, has_task_pt_regs};
use crate::reader::SampleReader;
use crate::sample::STACK_COPY_MAX;
use crate::skel::{OpenProfilerSkel, ProfilerSkel, ProfilerSkelBuilder};
use crate::types::UnwindStop;
use crate::unwind_maps::UnwindMaps;
use crate::BpfError;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, OpenObject};
use std::mem::MaybeUninit;

/// How to set up sampling.
#[derive(Clone, Debug)]
pub struct SamplerOptions {
    /// Samples per second per CPU.
    pub samples_per_second: u32,
    /// Only sample these processes (tgids); `None` samples every process.
    pub pids: Option<Vec<u32>>,
    /// Size of the sample ring buffer in bytes (a power of two, at least
    /// one page).
    pub ring_buffer_bytes: u32,
    /// Find the user registers of tasks sampled in the kernel at the top
    /// of their kernel stack even when `bpf_task_pt_regs` exists (the
    /// fallback for kernels before 5.15; for tests).
    pub user_regs_from_stack: bool,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions { samples_per_second: 20, pids: None, ring_buffer_bytes: 4 << 20, user_regs_from_stack: false }
    }
}

/// The counters the eBPF programs keep (`enum counter_id` in
/// `ebpf/types.h`), summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Times the perf event fired.
    pub triggered: u64,
    /// Samples sent to user space.
    pub sent: u64,
    /// Samples lost because the ring buffer was full.
    pub lost_ring_buffer: u64,
    /// Ticks on an idle CPU (nothing to sample).
    pub idle: u64,
    /// Ticks of processes outside the pid filter.
    pub filtered: u64,
    /// Kernel stacks that could not be read.
    pub kernel_stack_errors: u64,
    /// Retired (frame-pointer stacks that could not be read); always 0.
    pub user_stack_errors: u64,
    /// Process events sent to the process manager.
    pub process_events: u64,
    /// Process events lost (their ring buffer was full).
    pub process_events_lost: u64,
    /// Process events not sent because one of their kind for the pid
    /// went out just before.
    pub process_events_rate_limited: u64,
    /// User frames unwound.
    pub user_frames: u64,
    /// Tail calls into the native unwinder.
    pub native_tail_calls: u64,
    /// CPython frames recorded.
    pub python_frames: u64,
    /// Tail calls into the Python unwinder (hand-overs included).
    pub python_tail_calls: u64,
    /// Samples in a CPython evaluation loop whose thread state was not
    /// found (their loops stay native frames).
    pub python_no_thread_state: u64,
    /// CPython frames that could not be read (the rest of their stack's
    /// loops stay native frames).
    pub python_read_errors: u64,
    /// Samples sent with a copy of their user stack (their process or pc
    /// was not loaded yet).
    pub stack_copies: u64,
    /// Samples that needed a stack copy and went without (the per-CPU
    /// budget was spent, or the ring buffer was filling up).
    pub stack_copies_skipped: u64,
    /// Samples that needed a stack copy and no window could be read.
    pub stack_copies_failed: u64,
    /// Bytes of user stack copied.
    pub stack_copy_bytes: u64,
    /// Time the kernel spent in the programs for samples, ns (the entry
    /// program and its tail calls); 0 unless `kernel.bpf_stats_enabled`.
    pub bpf_run_time_ns: u64,
    /// Runs of the entry program counted in `bpf_run_time_ns`.
    pub bpf_runs: u64,
    /// How user stacks ended, by [`UnwindStop`] (index = its raw value).
    pub unwind_stops: [u64; UnwindStop::ALL.len()],
}

impl Counters {
    /// How many user stacks ended for `reason`.
    pub fn unwind_stop(&self, reason: UnwindStop) -> u64 {
        self.unwind_stops.get(usize::from(reason.raw())).copied().unwrap_or(0)
    }
}

// Indexes of enum counter_id (ebpf/types.h). Never renumber.
const COUNTER_SAMPLES_TRIGGERED: u32 = 0;
const COUNTER_SAMPLES_SENT: u32 = 1;
const COUNTER_SAMPLES_LOST_RINGBUF: u32 = 2;
const COUNTER_SAMPLES_IDLE: u32 = 3;
const COUNTER_SAMPLES_FILTERED: u32 = 4;
const COUNTER_KERNEL_STACK_ERROR: u32 = 5;
const COUNTER_USER_STACK_ERROR: u32 = 6;
const COUNTER_PROCESS_EVENTS_SENT: u32 = 7;
const COUNTER_PROCESS_EVENTS_LOST: u32 = 8;
const COUNTER_PROCESS_EVENTS_RATE_LIMITED: u32 = 9;
const COUNTER_USER_FRAMES: u32 = 10;
const COUNTER_NATIVE_TAIL_CALLS: u32 = 11;
const COUNTER_PYTHON_FRAMES: u32 = 12;
const COUNTER_PYTHON_TAIL_CALLS: u32 = 13;
const COUNTER_PYTHON_NO_THREAD_STATE: u32 = 14;
const COUNTER_PYTHON_READ_ERRORS: u32 = 15;
const COUNTER_STACK_COPIES: u32 = 16;
const COUNTER_STACK_COPY_SKIPPED: u32 = 17;
const COUNTER_STACK_COPY_FAILED: u32 = 18;
const COUNTER_STACK_COPY_BYTES: u32 = 19;
const COUNTER_UNWIND_STOP_BASE: u32 = 32;

/// The loaded and attached eBPF programs. Dropping it detaches them.
pub struct Sampler {
    // Field order matters: links are dropped (detached) before the
    // skeleton (programs and maps).
    perf_links: Vec<Link>,
    exit_link: Option<Link>,
    exec_link: Option<Link>,
    skel: ProfilerSkel<'static>,
    cpus: Vec<u32>,
    frequency: u32,
}

impl Sampler {
    fn load_programs(options: &SamplerOptions) -> Result<Sampler, BpfError> {
        check_privileges()?;
        check_kernel_features()?;

        // The skeleton borrows its object storage for its whole life; one
        // small allocation per load is leaked to give it a 'static home
        // (OpenObject is a pointer; libbpf's object itself is freed when
        // the skeleton drops).
        let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open: OpenProfilerSkel<'static> =
            ProfilerSkelBuilder::default().open(storage).map_err(BpfError::Load)?;
        let task_pt_regs = has_task_pt_regs() && !options.user_regs_from_stack;
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.filter_pids = options.pids.is_some();
            rodata.have_task_pt_regs = task_pt_regs;
            rodata.stack_copy_budget_bytes = u64::from(options.samples_per_second) * STACK_COPY_MAX as u64;
        }
        open.maps
            .samples
            .set_max_entries(options.ring_buffer_bytes)
            .map_err(|source| BpfError::Map { map: "samples", source })?;
        crate::preflight::preallocate_hash_maps_if_needed(open.open_object_mut())?;
        let skel = open.load().map_err(classify_load_error)?;

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

        Ok(Sampler {
            perf_links: Vec::new(),
            exit_link: Some(exit_link),
            exec_link: Some(exec_link),
            skel,
            cpus: Vec::new(),
            frequency: options.samples_per_second,
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
        for &cpu in &cpus {
            let fd = open_cpu_clock(cpu, self.frequency)?;
            // libbpf's link takes ownership of the fd and closes it.
            let link = self.skel.progs.on_cpu_sample.attach_perf_event(fd).map_err(|e| {
                // SAFETY: fd is ours and was not taken over (attach failed).
                unsafe { libc::close(fd) };
                BpfError::PerfEvent { cpu, source: std::io::Error::other(e.to_string()) }
            })?;
            links.push(link);
        }
        self.perf_links = links;
        self.cpus = cpus;
        Ok(())
    }

    /// Stops sampling: closes the perf events and the process tracepoints.
    /// The maps stay readable.
    pub fn detach(&mut self) {
        self.perf_links.clear();
        self.exit_link = None;
        self.exec_link = None;
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
            handle(&maps.pid_mappings, "pid_mappings")?,
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
            handle(&maps.pid_mappings, "pid_mappings")?,
            handle(&maps.delta_pages, "delta_pages")?,
            handle(&maps.file_deltas, "file_deltas")?,
            handle(&maps.unwind_rules, "unwind_rules")?,
        ))
    }

    /// Handles on the interpreter unwinders' maps, for the process
    /// manager. Make one: it keeps the bookkeeping of what it loads.
    pub fn interpreter_maps(&self) -> Result<InterpreterMaps, BpfError> {
        let maps = &self.skel.maps;
        let files =
            MapHandle::try_from(&maps.python_files).map_err(|source| BpfError::Map { map: "python_files", source })?;
        let threads = MapHandle::try_from(&maps.python_thread_states)
            .map_err(|source| BpfError::Map { map: "python_thread_states", source })?;
        Ok(InterpreterMaps::new(files, threads))
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
        use std::os::fd::{AsFd, AsRawFd};
        let fd = self.skel.progs.on_cpu_sample.as_fd().as_raw_fd();
        let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: info is a writable bpf_prog_info of len bytes.
        let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info as *mut _ as *mut _, &mut len) };
        if rc != 0 {
            return (0, 0);
        }
        (info.run_time_ns, info.run_cnt)
    }

    /// Entries in the native unwinder's maps, counted by iterating their
    /// keys: (pid_mappings, delta_pages, file_deltas).
    pub fn count_unwind_map_entries(&self) -> Result<(usize, usize, usize), BpfError> {
        let maps = &self.skel.maps;
        Ok((maps.pid_mappings.keys().count(), maps.delta_pages.keys().count(), maps.file_deltas.keys().count()))
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
        let mut unwind_stops = [0u64; UnwindStop::ALL.len()];
        for (i, slot) in unwind_stops.iter_mut().enumerate() {
            *slot = read(COUNTER_UNWIND_STOP_BASE + i as u32)?;
        }
        let (bpf_run_time_ns, bpf_runs) = self.entry_program_run_stats();
        Ok(Counters {
            bpf_run_time_ns,
            bpf_runs,
            triggered: read(COUNTER_SAMPLES_TRIGGERED)?,
            sent: read(COUNTER_SAMPLES_SENT)?,
            lost_ring_buffer: read(COUNTER_SAMPLES_LOST_RINGBUF)?,
            idle: read(COUNTER_SAMPLES_IDLE)?,
            filtered: read(COUNTER_SAMPLES_FILTERED)?,
            kernel_stack_errors: read(COUNTER_KERNEL_STACK_ERROR)?,
            user_stack_errors: read(COUNTER_USER_STACK_ERROR)?,
            process_events: read(COUNTER_PROCESS_EVENTS_SENT)?,
            process_events_lost: read(COUNTER_PROCESS_EVENTS_LOST)?,
            process_events_rate_limited: read(COUNTER_PROCESS_EVENTS_RATE_LIMITED)?,
            user_frames: read(COUNTER_USER_FRAMES)?,
            native_tail_calls: read(COUNTER_NATIVE_TAIL_CALLS)?,
            python_frames: read(COUNTER_PYTHON_FRAMES)?,
            python_tail_calls: read(COUNTER_PYTHON_TAIL_CALLS)?,
            python_no_thread_state: read(COUNTER_PYTHON_NO_THREAD_STATE)?,
            python_read_errors: read(COUNTER_PYTHON_READ_ERRORS)?,
            stack_copies: read(COUNTER_STACK_COPIES)?,
            stack_copies_skipped: read(COUNTER_STACK_COPY_SKIPPED)?,
            stack_copies_failed: read(COUNTER_STACK_COPY_FAILED)?,
            stack_copy_bytes: read(COUNTER_STACK_COPY_BYTES)?,
            unwind_stops,
        })
    }
}

fn classify_load_error(e: libbpf_rs::Error) -> BpfError {
    use libbpf_rs::ErrorKind;
    match e.kind() {
        ErrorKind::PermissionDenied => BpfError::NotPrivileged { what: format!("loading the programs: {e}") },
        _ => BpfError::Load(e),
    }
}
