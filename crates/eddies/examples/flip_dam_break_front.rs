//! The 2D dam-break surge front against Martin & Moyce (1952) at a chosen resolution, for the convergence
//! study in docs/VALIDATION.md:
//!
//! ```sh
//! cargo run --release -p eddies --example flip_dam_break_front -- 48    # cells per column width a
//! ```

use eddies::validation::flip::{dam_break_fronts, MARTIN_MOYCE_T, MARTIN_MOYCE_Z};

fn main() {
    let cells = match std::env::args().nth(1).map(|s| s.parse::<usize>()) {
        None => 24,
        Some(Ok(n)) if n >= 4 => n,
        Some(_) => {
            eprintln!("error: the argument is the number of cells per column width, at least 4");
            std::process::exit(2);
        }
    };
    println!("{cells} cells per a");
    println!("    T  experiment  particle   error  floor cell   error");
    let mut worst = (0.0f64, 0.0f64);
    for ((t, zr), (z, floor)) in MARTIN_MOYCE_T
        .iter()
        .zip(MARTIN_MOYCE_Z)
        .zip(dam_break_fronts(cells))
    {
        let (e, ef) = ((z - zr) / zr, (floor - zr) / zr);
        worst = (worst.0.max(e.abs()), worst.1.max(ef.abs()));
        println!(
            "{t:5.2}  {zr:10.2}  {z:8.3}  {:+5.1}%  {floor:10.3}  {:+5.1}%",
            100.0 * e,
            100.0 * ef
        );
    }
    println!(
        "worst: rightmost particle {:.1}%, half-full floor cell {:.1}%",
        100.0 * worst.0,
        100.0 * worst.1
    );
}
