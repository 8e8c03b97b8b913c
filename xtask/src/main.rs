//! Project automation (`cargo xtask …`).
fn main() {}
