//! The interpreter unwinders, as `ebpf/runtimes.h` lists them
//! ([`InterpreterUnwinder`], generated from that list by
//! profiler-contract's build.rs), from which their programs
//! (`<name>_unwind`, `<name>_off_cpu`), maps (`<name>_files` or
//! `<name>_processes`) and counters (`<name>_*` of [`crate::Counters`])
//! are found by name. The tests below fail when the generated table
//! differs from the header (read here on its own), or when a runtime
//! lacks a program, a map or a counter on either side.

use crate::contract::c;
#[cfg(test)]
use profiler_contract::RUNTIME_COUNTERS;

/// What an interpreter unwinder's map is keyed by (the `map` column of
/// `ebpf/runtimes.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuntimeMap {
    /// `<name>_files`: file id -> how to walk the frames of a build.
    Files,
    /// `<name>_processes`: tgid -> what the unwinder needs of a process.
    Processes,
}

/// Declares [`InterpreterUnwinder`] from the lines of `ebpf/runtimes.h`
/// (`profiler_contract::runtimes_list!`): variant, slot constant, name,
/// map, the width of its frame words' payload
/// (`<NAME>_FRAME_PAYLOAD_BITS`); in the list's order.
macro_rules! runtimes {
    ($($variant:ident = $slot:ident, $name:literal, $map:ident, $payload:ident;)*) => {
        /// The interpreter unwinder programs, by their slot in the program
        /// arrays (`enum unwinder_program`, one per line of
        /// `ebpf/runtimes.h`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum InterpreterUnwinder {
            $(
                #[doc = concat!("`", stringify!($slot), "`: `", $name, "_unwind`.")]
                $variant = c::$slot as u8,
            )*
        }

        impl InterpreterUnwinder {
            /// Every interpreter unwinder.
            pub const ALL: [InterpreterUnwinder; [$(InterpreterUnwinder::$variant),*].len()] =
                [$(InterpreterUnwinder::$variant),*];

            /// Its name in programs, maps and counters (`python_unwind`,
            /// `python_files`, `python_frames`).
            pub fn name(self) -> &'static str {
                match self {
                    $(InterpreterUnwinder::$variant => $name,)*
                }
            }

            /// The bits of its frame words' payload its unwinder uses
            /// (`<NAME>_FRAME_PAYLOAD_BITS`, at most
            /// [`UserFrame::payload_bits`](profiler_trace::UserFrame::payload_bits)
            /// of its slot).
            pub fn frame_payload_bits(self) -> u32 {
                match self {
                    $(InterpreterUnwinder::$variant => c::$payload,)*
                }
            }

            /// Its map in the BPF object, and what that map is keyed by.
            pub(crate) fn map(self) -> (&'static str, RuntimeMap) {
                match self {
                    $(InterpreterUnwinder::$variant => runtimes!(@map $name, $map),)*
                }
            }
        }
    };
    (@map $name:literal, files) => { (concat!($name, "_files"), RuntimeMap::Files) };
    (@map $name:literal, processes) => { (concat!($name, "_processes"), RuntimeMap::Processes) };
}

// The table is ebpf/runtimes.h's list, turned into its lines by
// profiler-contract's build.rs: a runtime added there is an
// InterpreterUnwinder here, with no line of Rust.
profiler_contract::runtimes_list!(runtimes);

/// The unwinders' off-CPU programs and their slots: the native one, then
/// one per interpreter unwinder.
pub(crate) fn off_cpu_programs() -> impl Iterator<Item = (String, u32)> {
    std::iter::once(("native_off_cpu".to_string(), c::UNWINDER_NATIVE))
        .chain(InterpreterUnwinder::ALL.iter().map(|u| (format!("{}_off_cpu", u.name()), u32::from(*u as u8))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::tests::RUST_ENUMS;
    use crate::skel::ProfilerSkelBuilder;
    use libbpf_rs::skel::SkelBuilder;
    use std::collections::BTreeSet;
    use std::mem::MaybeUninit;

    /// One line of `ebpf/runtimes.h`: name, NAME, slot, map.
    #[derive(Debug, PartialEq, Eq)]
    struct Line {
        name: String,
        upper: String,
        slot: i64,
        map: RuntimeMap,
    }

    fn bpf_list() -> Vec<Line> {
        let header = include_str!("../../../ebpf/runtimes.h");
        let lines: Vec<Line> = header
            .lines()
            .filter_map(|l| l.trim().trim_end_matches('\\').trim_end().strip_prefix("RUNTIME(")?.strip_suffix(')'))
            .map(str::to_owned)
            .map(|args| {
                let args: Vec<&str> = args.split(',').map(str::trim).collect();
                assert_eq!(args.len(), 4, "RUNTIME(name, NAME, slot, map): {args:?}");
                Line {
                    name: args[0].to_string(),
                    upper: args[1].to_string(),
                    slot: args[2].parse().unwrap_or_else(|_| panic!("slot of {}: {}", args[0], args[2])),
                    map: match args[3] {
                        "files" => RuntimeMap::Files,
                        "processes" => RuntimeMap::Processes,
                        other => panic!("map of {}: {other}", args[0]),
                    },
                }
            })
            .collect();
        assert!(lines.len() >= 6, "ebpf/runtimes.h lists the runtimes: {lines:?}");
        lines
    }

    fn rust_list() -> Vec<Line> {
        InterpreterUnwinder::ALL
            .iter()
            .map(|&u| {
                let (map_name, map) = u.map();
                let suffix = match map {
                    RuntimeMap::Files => "_files",
                    RuntimeMap::Processes => "_processes",
                };
                assert_eq!(map_name, format!("{}{suffix}", u.name()));
                Line { name: u.name().to_string(), upper: u.name().to_uppercase(), slot: i64::from(u as u8), map }
            })
            .collect()
    }

    /// The Rust list is the BPF one: same runtimes, names, slots and
    /// maps, in the same order.
    #[test]
    fn rust_runtimes_are_the_bpf_list() {
        assert_eq!(rust_list(), bpf_list(), "InterpreterUnwinder (runtimes.rs) and ebpf/runtimes.h");
    }

    /// `enum unwinder_program` as bindgen saw it: native, then each
    /// runtime's UNWINDER_<NAME> at its slot, then the count.
    #[test]
    fn unwinder_slots_are_the_lists() {
        let (_, slots) = RUST_ENUMS.iter().find(|(n, _)| *n == "unwinder_program").expect("enum unwinder_program");
        let list = bpf_list();
        let mut expected = vec![("UNWINDER_NATIVE".to_string(), 0)];
        expected.extend(list.iter().map(|l| (format!("UNWINDER_{}", l.upper), l.slot)));
        expected.push(("UNWINDER_COUNT".to_string(), list.len() as i64 + 1));
        let slots: Vec<(String, i64)> = slots.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        assert_eq!(slots, expected);
        let dense: BTreeSet<i64> = list.iter().map(|l| l.slot).collect();
        assert_eq!(dense, (1..=list.len() as i64).collect(), "slots are dense from 1");
    }

    /// Every runtime's frame words fit the one format: its slot is one a
    /// word can name, distinct from every other runtime's, and its
    /// payload fits that slot's payload bits (the BPF side asserts the
    /// same at compile time, types.h).
    #[test]
    fn every_runtime_fits_the_frame_word() {
        use profiler_trace::UserFrame;
        let mut slots = BTreeSet::new();
        for unwinder in InterpreterUnwinder::ALL {
            let slot = unwinder as u8;
            assert!(slot != 0 && slots.insert(slot), "{}: slot {slot}", unwinder.name());
            let bits = unwinder.frame_payload_bits();
            assert!(
                bits > 0 && bits <= UserFrame::payload_bits(slot),
                "{}: a {bits}-bit payload in slot {slot} ({} bits)",
                unwinder.name(),
                UserFrame::payload_bits(slot)
            );
            let payload = (1u64 << bits) - 1;
            assert_eq!(
                UserFrame::decode(UserFrame::interpreted_word(slot, payload)),
                UserFrame::Interpreted { slot, payload },
                "{}",
                unwinder.name()
            );
        }
    }

    /// Every runtime has its counters on both sides: its counters.h's
    /// COUNTER_<NAME>_FRAMES and _TAIL_CALLS among the header's runtime
    /// counters, reported under its name; and every runtime counter is
    /// one runtime's.
    #[test]
    fn every_runtime_has_its_counters() {
        let counters = crate::Counters::default();
        let list = bpf_list();
        for line in &list {
            for counter in ["frames", "tail_calls"] {
                let id = format!("{}_{counter}", line.name);
                assert!(RUNTIME_COUNTERS.iter().any(|(n, _)| *n == id), "{id} is not among the runtime counters");
            }
            let unwinder = InterpreterUnwinder::ALL.iter().find(|u| u.name() == line.name).expect("in the Rust list");
            let names: Vec<&str> = counters.interpreter(*unwinder).iter().map(|(n, _)| *n).collect();
            assert!(names.contains(&"frames") && names.contains(&"tail_calls"), "{}: {names:?}", line.name);
        }
        for (name, _) in RUNTIME_COUNTERS {
            let owners = list.iter().filter(|l| name.starts_with(&format!("{}_", l.name))).count();
            assert_eq!(owners, 1, "counter {name} belongs to one runtime of the list");
        }
        let total: usize = InterpreterUnwinder::ALL.iter().map(|u| counters.interpreter(*u).len()).sum();
        assert_eq!(total, RUNTIME_COUNTERS.len());
    }

    /// The runtime counters are numbered by the header after the shared
    /// ones, without gaps, in the order of the list.
    #[test]
    fn runtime_counters_follow_the_list() {
        let ids: Vec<u32> = RUNTIME_COUNTERS.iter().map(|(_, id)| *id).collect();
        let expected: Vec<u32> = (c::COUNTER_RUNTIMES_BASE..c::COUNTER_MAX).collect();
        assert_eq!(ids, expected);
        let list = bpf_list();
        let owners: Vec<usize> = RUNTIME_COUNTERS
            .iter()
            .map(|(name, _)| {
                list.iter().position(|l| name.starts_with(&format!("{}_", l.name))).expect("a runtime's counter")
            })
            .collect();
        assert!(
            owners.windows(2).all(|w| w[0] <= w[1]),
            "each runtime's counters together, in the list's order: {owners:?}"
        );
    }

    /// Each runtime of the list has its BPF folder with its three files,
    /// and ebpf/runtimes/ holds no folder the list does not name.
    #[test]
    fn every_runtime_has_its_bpf_folder() {
        let ebpf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ebpf");
        let list = bpf_list();
        for line in &list {
            for file in ["types.h", "counters.h", "unwinder.bpf.h"] {
                let path = ebpf.join("runtimes").join(&line.name).join(file);
                assert!(path.is_file(), "{} is missing", path.display());
            }
        }
        let folders: BTreeSet<String> = std::fs::read_dir(ebpf.join("runtimes"))
            .expect("ebpf/runtimes/")
            .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
            .collect();
        let named: BTreeSet<String> = list.iter().map(|l| l.name.clone()).collect();
        assert_eq!(folders, named, "the folders of ebpf/runtimes/ and the lines of ebpf/runtimes.h");
    }

    /// No shared file of ebpf/ names a runtime: only runtimes.h's list
    /// does, and each runtime's own folder.
    #[test]
    fn no_shared_bpf_file_names_a_runtime() {
        let ebpf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ebpf");
        let list = bpf_list();
        let mut checked = 0;
        for entry in std::fs::read_dir(&ebpf).expect("ebpf/") {
            let path = entry.expect("dir entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !path.is_file() || !(name.ends_with(".h") || name.ends_with(".c")) || name == "runtimes.h" {
                continue;
            }
            checked += 1;
            let text = std::fs::read_to_string(&path).expect("read").to_lowercase();
            for line in &list {
                // Whole words, and as the prefix of an identifier
                // (python_files, COUNTER_PYTHON_...).
                let named = text.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| word == line.name);
                let prefixed = text.contains(&format!("{}_", line.name));
                assert!(!named && !prefixed, "{name} names the runtime {}", line.name);
            }
        }
        assert!(checked >= 10, "the shared files of ebpf/: {checked}");
    }

    /// The BPF object has each runtime's two programs and its map, and no
    /// unwinder program that is not in the list.
    #[test]
    fn every_runtime_has_its_programs_and_map() {
        let mut storage = MaybeUninit::uninit();
        let open = ProfilerSkelBuilder::default().open(&mut storage).expect("open (not load) the BPF object");
        let object = libbpf_rs::skel::OpenSkel::open_object(&open);
        let programs: BTreeSet<String> = object.progs().map(|p| p.name().to_string_lossy().into_owned()).collect();
        let maps: BTreeSet<String> = object.maps().map(|m| m.name().to_string_lossy().into_owned()).collect();
        let list = bpf_list();
        let mut unwinders: BTreeSet<String> = ["native_unwind".to_string(), "native_off_cpu".to_string()].into();
        for line in &list {
            unwinders.insert(format!("{}_unwind", line.name));
            unwinders.insert(format!("{}_off_cpu", line.name));
        }
        let found: BTreeSet<String> =
            programs.iter().filter(|p| p.ends_with("_unwind") || p.ends_with("_off_cpu")).cloned().collect();
        assert_eq!(found, unwinders, "the unwinder programs of the BPF object");
        let off_cpu: BTreeSet<String> = off_cpu_programs().map(|(name, _)| name).collect();
        assert_eq!(off_cpu, unwinders.iter().filter(|p| p.ends_with("_off_cpu")).cloned().collect());
        for unwinder in InterpreterUnwinder::ALL {
            let (map, _) = unwinder.map();
            assert!(maps.contains(map), "map {map} is not in the BPF object");
        }
    }
}
