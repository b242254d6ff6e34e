//! Ctrl-C and SIGTERM during a run: the first signal asks the run to stop between two steps, so that it
//! can flush `stats.jsonl`, say what was kept and exit with 128 + the signal's number (130 for SIGINT, 143
//! for SIGTERM, the shell's convention); a second signal of either kind ends the process at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Watches for SIGINT and SIGTERM while it lives (on Unix; elsewhere it never reports one). Dropping it
/// gives both signals back their default action.
pub struct Interrupt {
    signal: Arc<AtomicUsize>,
    #[cfg(unix)]
    ids: Vec<signal_hook::SigId>,
}

impl Interrupt {
    /// Starts watching. Where the handlers cannot be installed, the run goes on without them (the signals
    /// then end it the default way).
    pub fn watch() -> Self {
        let signal = Arc::new(AtomicUsize::new(0));
        #[cfg(unix)]
        {
            use signal_hook::consts::{SIGINT, SIGTERM};
            use signal_hook::flag;
            use std::sync::atomic::AtomicBool;
            let armed = Arc::new(AtomicBool::new(false));
            let mut ids = Vec::new();
            for sig in [SIGINT, SIGTERM] {
                // The shutdown is registered first, so that it sees `armed` as the previous signal left it.
                let registered = [
                    flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&armed)),
                    flag::register(sig, Arc::clone(&armed)),
                    flag::register_usize(sig, Arc::clone(&signal), sig as usize),
                ];
                ids.extend(registered.into_iter().filter_map(Result::ok));
            }
            Self { signal, ids }
        }
        #[cfg(not(unix))]
        Self { signal }
    }

    /// The signal that arrived, if one did.
    pub fn received(&self) -> Option<Signal> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Signal(n as i32)),
        }
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        #[cfg(unix)]
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// A termination signal, by its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(pub i32);

impl Signal {
    /// SIGINT (Ctrl-C).
    pub const INT: Signal = Signal(2);
    /// SIGTERM.
    pub const TERM: Signal = Signal(15);

    /// The exit code a shell reports for a process ended by this signal: 128 + its number.
    pub fn exit_code(self) -> i32 {
        128 + self.0
    }

    /// Its name, e.g. `SIGINT`.
    pub fn name(self) -> String {
        match self {
            Signal::INT => "SIGINT (Ctrl-C)".into(),
            Signal::TERM => "SIGTERM".into(),
            Signal(n) => format!("signal {n}"),
        }
    }
}
