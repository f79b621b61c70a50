//! SIGINT (Ctrl-C), SIGTERM and SIGHUP during a command that writes.
//!
//! The handler (the ctrlc crate runs it on a thread of its own, not in signal
//! context) looks at the command's [`Phase`] under a lock:
//! - before the command has written anything ([`Phase::Setup`], e.g. while opening
//!   the sources, which may block on a pipe), it ends the process at once with
//!   exit status 130: there is nothing to undo;
//! - while the library runs ([`Phase::Running`]), it sets the interrupt flag the
//!   library polls (at least every [`bcd_pipeline::INTERRUPT_POLL`], even while
//!   its source is blocked in a read); the library undoes its work and the command
//!   exits with 130;
//! - after the library has finished ([`Phase::Finished`], e.g. while a summary is
//!   stuck on a full pipe), it ends the process at once with 130, saying that the
//!   work was done.
//!
//! The lock makes the handoff exact: the main thread moves to `Running` only under
//! it, so the handler either ends the process before the library starts or sets
//! the flag the library will see.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result};

use crate::output::{say, EXIT_INTERRUPTED};

/// Where the command is, for the signal handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing written yet: a signal ends the process at once.
    Setup,
    /// The library is writing: a signal sets the interrupt flag.
    Running,
    /// The library has finished, having done what the text says ("the ingest
    /// was committed"): a signal ends the process at once, saying it.
    Finished(&'static str),
}

/// The installed handler's state.
pub struct Interrupts {
    flag: Arc<AtomicBool>,
    phase: Arc<Mutex<Phase>>,
}

impl Interrupts {
    /// Installs the handler for SIGINT, SIGTERM and SIGHUP, in [`Phase::Setup`].
    pub fn install() -> Result<Interrupts> {
        let flag = Arc::new(AtomicBool::new(false));
        let phase = Arc::new(Mutex::new(Phase::Setup));
        let (handler_flag, handler_phase) = (Arc::clone(&flag), Arc::clone(&phase));
        ctrlc::set_handler(move || {
            let phase = handler_phase.lock().unwrap_or_else(PoisonError::into_inner);
            match *phase {
                Phase::Setup => {
                    say!("bcd: interrupted; nothing was written");
                    exit_now();
                }
                Phase::Running => handler_flag.store(true, Ordering::Relaxed),
                Phase::Finished(done) => {
                    say!("bcd: interrupted; {done}");
                    exit_now();
                }
            }
        })
        .context("installing the handler of SIGINT and SIGTERM")?;
        Ok(Interrupts { flag, phase })
    }

    /// The flag a signal sets while the library runs, for its options.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }

    /// Moves to `phase`; a signal received from now on is handled as `phase` says.
    pub fn enter(&self, phase: Phase) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = phase;
    }
}

/// Ends the process with exit status 130 without running exit-time cleanup: the
/// flush of a stdout buffer could block on the full pipe that the user is
/// interrupting.
fn exit_now() -> ! {
    #[cfg(unix)]
    // SAFETY: _exit only ends the process; it touches no memory of this one.
    unsafe {
        libc::_exit(i32::from(EXIT_INTERRUPTED))
    }
    #[cfg(not(unix))]
    std::process::exit(i32::from(EXIT_INTERRUPTED))
}
