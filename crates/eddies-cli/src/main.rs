//! The `eddies` program; everything is in the `eddies_cli` library so that it can be tested.

fn main() {
    std::process::exit(eddies_cli::cli::main());
}
