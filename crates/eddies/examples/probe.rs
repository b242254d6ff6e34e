fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    for c in eddies::validation::cases() {
        if !c.name.contains(&filter) { continue; }
        let t = std::time::Instant::now();
        let m = (c.run)(false);
        println!("{:40} measured {:.4e} ref {:.3e} tol {:.1e} pass {}  ({:.1}s)", m.case, m.measured, m.reference, m.tolerance, m.pass, t.elapsed().as_secs_f64());
    }
}
