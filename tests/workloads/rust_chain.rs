// A Rust release build (-C opt-level=2; no frame pointers by default).
use std::hint::black_box;

#[inline(never)]
fn rust_leaf(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = black_box(acc.wrapping_add(i * 7));
    }
    acc
}

#[inline(never)]
fn rust_middle(n: u64) -> u64 {
    black_box(rust_leaf(n)) + 1
}

#[inline(never)]
fn rust_outer(n: u64) -> u64 {
    black_box(rust_middle(n)) + 1
}

fn main() {
    let mut total = 0u64;
    loop {
        total = total.wrapping_add(rust_outer(black_box(100_000)));
        black_box(total);
    }
}
