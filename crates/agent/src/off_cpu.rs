//! What the agent does to off-CPU traces besides the on-CPU ones'.

use profiler_trace::{Frame, FrameKind};

/// The scheduler function every switch goes through: an off-CPU stack's
/// kernel frames above it (leafward) are the tracepoint and the off-CPU
/// program itself, the profiler's own, not the thread's.
const SCHEDULE: &str = "__schedule";

/// Drops the kernel frames leafward of `__schedule` from an off-CPU
/// trace's frames (leaf first), so that the blocking call's frames
/// (`schedule`, `do_nanosleep`, `pipe_read`, ...) are at the leaf. Frames
/// stay as they are when `__schedule` is not named (no kallsyms).
pub(crate) fn trim_switch_frames(frames: &mut Vec<Frame>) {
    let kernel = frames.iter().take_while(|f| f.kind == FrameKind::Kernel).count();
    if let Some(at) = frames[..kernel].iter().position(|f| f.function_name() == Some(SCHEDULE)) {
        frames.drain(..at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_trace::SourceLine;

    fn frame(kind: FrameKind, name: &str) -> Frame {
        Frame {
            kind,
            address: 0,
            mapping: None,
            lines: vec![SourceLine { function: name.into(), file: None, line: 0, approximate: false }],
        }
    }

    fn names(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.function_name().unwrap_or("?")).collect()
    }

    #[test]
    fn the_blocking_call_is_at_the_leaf() {
        let k = |n| frame(FrameKind::Kernel, n);
        let mut frames = vec![
            k("bpf_prog_on_sched_switch"),
            k("bpf_trace_run4"),
            k("__traceiter_sched_switch"),
            k("__schedule"),
            k("schedule"),
            k("do_nanosleep"),
            frame(FrameKind::Native, "waiter"),
        ];
        trim_switch_frames(&mut frames);
        assert_eq!(names(&frames), ["__schedule", "schedule", "do_nanosleep", "waiter"]);
        // Unnamed kernel frames, or a user frame of that name: unchanged.
        let mut unnamed = vec![frame(FrameKind::Kernel, "?"), frame(FrameKind::Native, "__schedule")];
        trim_switch_frames(&mut unnamed);
        assert_eq!(names(&unnamed), ["?", "__schedule"]);
    }
}
