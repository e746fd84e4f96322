//! Lists the code blobs of a running JVM with what the BPF unwinder reads
//! of them to unwind a frame sampled before it is built or after it is
//! torn down: frame size, frame completion, verified entry, and the first
//! code bytes there. A tool to check the prologue templates of
//! `ebpf/runtimes/hotspot/unwinder.bpf.h` against a JDK (root; `--max N` blobs).
//!
//!     cargo run -p profiler-interpreters --example hotspot_blobs -- PID [--max N]

use profiler_elf::ElfFile;
use profiler_interpreters::hotspot::{attach, detect, CodeBounds, CodeCache, Detection, NmethodEntries};
use profiler_interpreters::{PidMemory, ProcessMemory};

fn bytes(memory: &dyn ProcessMemory, address: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0; len];
    memory.read(address, &mut buf).then_some(buf)
}

fn word(memory: &dyn ProcessMemory, address: u64, width: usize) -> Option<u64> {
    let b = bytes(memory, address, width)?;
    let mut w = [0u8; 8];
    w[..width].copy_from_slice(&b);
    Some(u64::from_le_bytes(w))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pid: u32 = args.get(1).and_then(|p| p.parse().ok()).expect("usage: hotspot_blobs PID [--max N]");
    let max: usize = args.iter().position(|a| a == "--max").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(200);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let line = maps
        .lines()
        .find(|l| l.ends_with("/libjvm.so") && l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
        .expect("no libjvm.so");
    let f: Vec<&str> = line.split_whitespace().collect();
    let start = u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap();
    let offset = u64::from_str_radix(f[2], 16).unwrap();
    let path = f[5];
    let elf = ElfFile::open(format!("/proc/{pid}/root{path}")).expect("libjvm.so");
    let Detection::Hotspot(symbols) = detect(&elf, path) else { panic!("not a HotSpot libjvm.so") };
    let bias = elf.load_segments().executable_bias(start, offset).expect("bias");
    let memory = PidMemory(pid);
    let l = attach(&memory, &symbols, bias).expect("attach");
    let cache = CodeCache::read(&memory, &l, bias).expect("code cache");
    let mut shown = 0;
    for heap in &cache.heaps {
        let segment = 1u64 << heap.log2_segment_size;
        let mut pc = heap.low;
        while pc < heap.high && shown < max {
            let Some(blob) = cache.find_blob(&memory, &l, pc) else {
                pc += segment;
                if bytes(&memory, heap.segmap + ((pc - heap.low) >> heap.log2_segment_size), 1).is_none() {
                    break;
                }
                continue;
            };
            let Some(info) = cache.read_blob(&memory, &l, blob) else { break };
            let frame_size = word(&memory, blob + u64::from(l.code_blob_frame_size), 4).unwrap_or(0) as i32;
            let complete = match l.code_blob_frame_complete_size {
                2 => word(&memory, blob + u64::from(l.code_blob_frame_complete), 2).unwrap_or(0) as i16 as i64,
                _ => word(&memory, blob + u64::from(l.code_blob_frame_complete), 4).unwrap_or(0) as i32 as i64,
            };
            let begin = info.code_begin;
            let verified = match (info.kind, l.nmethod_entries) {
                (
                    profiler_interpreters::hotspot::BlobKind::Nmethod,
                    NmethodEntries::Pointers { verified_entry, .. },
                ) => word(&memory, blob + u64::from(verified_entry), 8),
                (profiler_interpreters::hotspot::BlobKind::Nmethod, NmethodEntries::Offsets { verified_entry, .. }) => {
                    word(&memory, blob + u64::from(verified_entry), 2).map(|o| begin + o)
                }
                _ => None,
            };
            let start = verified.unwrap_or(begin);
            let code = bytes(&memory, start, 24).unwrap_or_default();
            let _ = matches!(l.code_blob_code, CodeBounds::Pointers { .. });
            println!(
                "{blob:#x} {:?} {:?} frame {frame_size} complete {complete} entry +{} code {}",
                info.name,
                info.kind,
                start - begin,
                hex(&code)
            );
            shown += 1;
            let next = (blob + u64::from(info.size) + segment - 1) & !(segment - 1);
            pc = next.max(pc + segment);
        }
    }
}
