//! Frames finished on a thread of their own: drawing a picture (a 3D one especially), annotating it,
//! encoding its PNG and writing it overlap the simulation's next steps. The simulation hands over what the
//! picture needs (fields copied out), so what is drawn does not depend on when it is drawn.
//!
//! At most one frame waits while another is drawn, so memory stays bounded; the simulation waits when both
//! places are taken. The first failure stops the thread and is reported at the next hand-over or at the end;
//! frames handed over before it are written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Work for the thread: one frame, or a signal that every frame before it is written.
type Job<E> = Box<dyn FnOnce() -> Result<(), E> + Send>;

/// The frame thread; frames fail with errors of type `E`.
pub struct FrameWriter<E: Send + 'static> {
    jobs: Option<SyncSender<Job<E>>>,
    thread: Option<JoinHandle<()>>,
    failure: Arc<Mutex<Option<E>>>,
    busy: Arc<Mutex<Duration>>,
    held: Duration,
}

/// What finishing frames cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameTimes {
    /// Time the simulation waited to hand frames over (the thread was busy with earlier ones).
    pub held: Duration,
    /// Time the thread spent on frames.
    pub busy: Duration,
}

impl<E: Send + 'static> FrameWriter<E> {
    /// Starts the thread.
    pub fn new() -> Self {
        // One frame waits while one is drawn.
        let (tx, rx) = sync_channel::<Job<E>>(1);
        let failure: Arc<Mutex<Option<E>>> = Arc::new(Mutex::new(None));
        let busy = Arc::new(Mutex::new(Duration::ZERO));
        let (f, b) = (Arc::clone(&failure), Arc::clone(&busy));
        let failed = AtomicBool::new(false);
        let thread = std::thread::Builder::new()
            .name("frames".into())
            .spawn(move || {
                for job in rx {
                    if failed.load(Ordering::Relaxed) {
                        continue;
                    }
                    let started = Instant::now();
                    let result = job();
                    *b.lock().unwrap() += started.elapsed();
                    if let Err(e) = result {
                        failed.store(true, Ordering::Relaxed);
                        *f.lock().unwrap() = Some(e);
                    }
                }
            })
            .expect("the operating system starts a thread");
        Self {
            jobs: Some(tx),
            thread: Some(thread),
            failure,
            busy,
            held: Duration::ZERO,
        }
    }

    /// Hands a frame over; waits while two are in hand.
    ///
    /// # Errors
    /// The failure of an earlier frame.
    pub fn submit(
        &mut self,
        job: impl FnOnce() -> Result<(), E> + Send + 'static,
    ) -> Result<(), E> {
        self.check()?;
        let started = Instant::now();
        if let Some(jobs) = &self.jobs {
            // The thread only ends when the sender is dropped: a send cannot fail while we hold it.
            let _ = jobs.send(Box::new(job));
        }
        self.held += started.elapsed();
        Ok(())
    }

    /// Waits until every frame handed over is written.
    ///
    /// # Errors
    /// The failure of a frame.
    pub fn flush(&mut self) -> Result<(), E> {
        let (tx, rx) = sync_channel::<()>(1);
        let started = Instant::now();
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(Box::new(move || {
                let _ = tx.send(());
                Ok(())
            }));
            let _ = rx.recv();
        }
        self.held += started.elapsed();
        self.check()
    }

    /// Writes the frames handed over, ends the thread and says what the frames cost.
    ///
    /// # Errors
    /// The failure of a frame.
    pub fn finish(&mut self) -> Result<FrameTimes, E> {
        let started = Instant::now();
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.held += started.elapsed();
        self.check()?;
        Ok(FrameTimes {
            held: self.held,
            busy: *self.busy.lock().unwrap(),
        })
    }

    fn check(&self) -> Result<(), E> {
        match self.failure.lock().unwrap().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<E: Send + 'static> Default for FrameWriter<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Send + 'static> Drop for FrameWriter<E> {
    /// Frames handed over are written even when the run ends in an error.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn frames_are_written_in_order_and_the_first_failure_is_reported() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut w = FrameWriter::<String>::new();
        for k in 0..5 {
            let order = Arc::clone(&order);
            w.submit(move || {
                std::thread::sleep(Duration::from_millis(2));
                order.lock().unwrap().push(k);
                Ok(())
            })
            .unwrap();
        }
        w.flush().unwrap();
        assert_eq!(
            *order.lock().unwrap(),
            vec![0, 1, 2, 3, 4],
            "all written, in order, by flush"
        );
        w.submit(|| Err("disk full".to_string())).unwrap();
        assert_eq!(w.flush().unwrap_err(), "disk full");
        // Frames after a failure are not written; the failure was reported once.
        let after = Arc::new(AtomicUsize::new(0));
        let a = Arc::clone(&after);
        w.submit(move || {
            a.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        w.finish().unwrap();
        assert_eq!(after.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn dropping_the_writer_writes_what_was_handed_over() {
        let done = Arc::new(AtomicUsize::new(0));
        {
            let mut w = FrameWriter::<String>::new();
            for _ in 0..3 {
                let d = Arc::clone(&done);
                w.submit(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    d.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            }
        }
        assert_eq!(done.load(Ordering::SeqCst), 3);
    }
}
