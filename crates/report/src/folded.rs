//! Folded stacks.
