//! The 3D dam break's volume deviation (`flip/dam-break-volume-3d`) against the grid size over 1 s, and how
//! much of it is there after the first step (jittered seeding): the numbers behind the quick case's bound
//! (`eddies::validation::flip::QUICK_VOLUME_BOUND`). `cargo run --release --example flip_volume_grid`; takes
//! a few seconds.

use eddies::validation::flip::dam_break_volume_drift;

fn main() {
    for n in [16, 24, 32] {
        let res = [n, n / 2, n];
        let start = dam_break_volume_drift(res, 1e-3, 1.0).fluid;
        let one = dam_break_volume_drift(res, 1.0, 1.0).fluid;
        println!(
            "{n} x {} x {n}: worst relative volume deviation after one step {:.2}%, over 1 s {:.2}%",
            n / 2,
            100.0 * start,
            100.0 * one
        );
    }
}
