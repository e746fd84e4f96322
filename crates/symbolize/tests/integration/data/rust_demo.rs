// Rust names to demangle, legacy and v0: a free function, a method of a
// generic type, a trait method. Each records its return address.
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

static RAS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

extern "C" {
    static __executable_start: u8;
}

#[inline(always)]
fn return_address() -> usize {
    // Not available on stable: read it from the frame pointer chain,
    // which -C force-frame-pointers=yes keeps.
    let fp: usize;
    unsafe { std::arch::asm!("mov {}, rbp", out(reg) fp) };
    unsafe { *((fp + 8) as *const usize) }
}

#[inline(never)]
pub fn chain_leaf(x: u64) -> u64 {
    RAS[0].store(return_address(), Ordering::Relaxed);
    black_box(x) * 3
}

pub struct Holder<T>(pub T);

impl<T: Copy + Into<u64>> Holder<T> {
    #[inline(never)]
    pub fn get(&self) -> u64 {
        RAS[1].store(return_address(), Ordering::Relaxed);
        chain_leaf(black_box(self.0).into()) + 1 // GET_CALLS_LEAF
    }
}

pub trait Shape {
    fn area(&self) -> u64;
}

impl Shape for Holder<u32> {
    #[inline(never)]
    fn area(&self) -> u64 {
        self.get() * 2 // AREA_CALLS_GET
    }
}

fn main() {
    let h = Holder(black_box(7u32));
    let s: &dyn Shape = black_box(&h);
    let a = s.area();
    println!("base {:x}", unsafe { &__executable_start as *const u8 as usize });
    for ra in &RAS {
        println!("ra {:x}", ra.load(Ordering::Relaxed));
    }
    println!("{a}");
}
