//! The `eddies` program; everything is in the `eddies_cli` library so that it can be tested.

fn main() {
    // Mesa's device-selection layer connects to a Wayland display while the GPUs are listed, and on a
    // machine without one prints `error: XDG_RUNTIME_DIR is invalid` on every start. eddies ranks the
    // adapters itself (`eddies info`), so the layer is turned off, here, before any thread exists.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    std::process::exit(eddies_cli::cli::main());
}
