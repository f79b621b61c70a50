//! The queue between the ingest's reader thread and its writer: bounded by the
//! bytes it holds as well as by its batches.
//!
//! A queue of one batch (what the ingest had) starves the writer when records
//! are small: a batch of 512 short records is a few tens of kilobytes, and a
//! source that decodes in bursts (a Parquet page of three columns, a JSON Lines
//! read) leaves the writer waiting for each one. Measured on 4 million
//! 46-byte records from Parquet with three fields, the writer waited 0.4-0.8 s
//! of a 2.3 s ingest. Bounding the queue by bytes lets it hold many small
//! batches and still no more memory than one full batch, so large records
//! behave as before.

use std::collections::VecDeque;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The sending half of [`bounded`]; the queue is closed when it is dropped.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving half of [`bounded`]; dropping it makes every send fail.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Signalled when an item arrives or the sender is gone.
    filled: Condvar,
    /// Signalled when an item leaves or the receiver is gone.
    drained: Condvar,
    max_items: usize,
    max_bytes: usize,
}

struct State<T> {
    items: VecDeque<(T, usize)>,
    bytes: usize,
    sender_gone: bool,
    receiver_gone: bool,
}

/// A queue holding at most `max_items` items (at least one) and, beyond its
/// first item, at most `max_bytes` bytes of them as each send counts them: an
/// item larger than `max_bytes` goes through alone.
pub(crate) fn bounded<T>(max_items: usize, max_bytes: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            bytes: 0,
            sender_gone: false,
            receiver_gone: false,
        }),
        filled: Condvar::new(),
        drained: Condvar::new(),
        max_items: max_items.max(1),
        max_bytes,
    });
    (
        Sender {
            shared: Arc::clone(&shared),
        },
        Receiver { shared },
    )
}

impl<T> Shared<T> {
    /// The state; a thread that panicked holding the lock left it consistent
    /// (every change is one step), so the poison is ignored.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Whether an item of `bytes` may join the queue now: always into an empty
    /// one, otherwise within both bounds.
    fn admits(&self, state: &State<T>, bytes: usize) -> bool {
        state.items.is_empty()
            || (state.items.len() < self.max_items
                && state.bytes.saturating_add(bytes) <= self.max_bytes)
    }
}

impl<T> Sender<T> {
    /// Queues `item`, counted as `bytes`, waiting while the queue is full;
    /// gives the item back if the receiver is gone.
    pub(crate) fn send(&self, item: T, bytes: usize) -> Result<(), T> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        loop {
            if state.receiver_gone {
                return Err(item);
            }
            if shared.admits(&state, bytes) {
                break;
            }
            state = shared
                .drained
                .wait(state)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        state.bytes += bytes;
        state.items.push_back((item, bytes));
        drop(state);
        shared.filled.notify_one();
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.lock().sender_gone = true;
        self.shared.filled.notify_one();
    }
}

impl<T> Receiver<T> {
    /// The next item, waiting at most `timeout`: `Timeout` if none came,
    /// `Disconnected` once the queue is empty and the sender gone.
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let shared = &*self.shared;
        let deadline = Instant::now() + timeout;
        let mut state = shared.lock();
        loop {
            if let Some((item, bytes)) = state.items.pop_front() {
                state.bytes -= bytes;
                drop(state);
                shared.drained.notify_one();
                return Ok(item);
            }
            if state.sender_gone {
                return Err(RecvTimeoutError::Disconnected);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RecvTimeoutError::Timeout);
            }
            state = shared
                .filled
                .wait_timeout(state, left)
                .unwrap_or_else(|poison| poison.into_inner())
                .0;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // What is queued is freed now, not when the sender notices.
        let items = {
            let mut state = self.shared.lock();
            state.receiver_gone = true;
            state.bytes = 0;
            std::mem::take(&mut state.items)
        };
        self.shared.drained.notify_one();
        drop(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn items_arrive_in_order_then_the_queue_reports_its_end() {
        let (sender, receiver) = bounded(4, 100);
        let writer = thread::spawn(move || {
            for i in 0..2000usize {
                sender.send(i, i % 70).unwrap();
            }
        });
        let got: Vec<usize> = (0..2000)
            .map(|_| receiver.recv_timeout(LONG).unwrap())
            .collect();
        writer.join().unwrap();
        assert_eq!(got, (0..2000).collect::<Vec<_>>());
        assert_eq!(
            receiver.recv_timeout(LONG),
            Err(RecvTimeoutError::Disconnected)
        );
    }

    #[test]
    fn an_empty_queue_times_out() {
        let (_sender, receiver) = bounded::<u8>(4, 100);
        assert_eq!(
            receiver.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Timeout)
        );
    }

    #[test]
    fn the_queue_admits_within_both_bounds_and_one_item_of_any_size() {
        let (sender, receiver) = bounded::<u8>(3, 100);
        let shared = &sender.shared;
        // Empty: anything, even past the byte bound.
        assert!(shared.admits(&shared.lock(), 1_000_000));
        sender.send(0, 60).unwrap();
        assert!(shared.admits(&shared.lock(), 40));
        assert!(!shared.admits(&shared.lock(), 41));
        sender.send(1, 40).unwrap();
        assert!(!shared.admits(&shared.lock(), 1));
        assert_eq!(receiver.recv_timeout(LONG), Ok(0));
        // 40 bytes held: room for 60 more, and a third item.
        assert!(shared.admits(&shared.lock(), 60));
        sender.send(2, 0).unwrap();
        sender.send(3, 0).unwrap();
        // Three items: full whatever their bytes.
        assert!(!shared.admits(&shared.lock(), 0));
        assert_eq!(shared.lock().bytes, 40);
    }

    /// A reader that sends faster than the writer takes: the writer, at each
    /// receive, finds the queue within its bounds, and finds it holding more
    /// than one item at some point (the reader ran ahead, as intended).
    #[test]
    fn a_fast_sender_fills_the_queue_to_its_bounds_and_no_further() {
        let (max_items, max_bytes) = (8, 1000);
        let (sender, receiver) = bounded::<usize>(max_items, max_bytes);
        let writer = thread::spawn(move || {
            for i in 0..5000usize {
                sender.send(i, (i * 37) % 300).unwrap();
            }
        });
        let mut deepest = 0;
        for i in 0..5000usize {
            // Wait for the sender to fill the queue as far as its rule allows
            // (or to finish): polls the state, no timer.
            loop {
                let state = receiver.shared.lock();
                let held = state.items.len();
                assert!(held <= max_items);
                assert!(
                    held <= 1 || state.bytes <= max_bytes,
                    "{} bytes held",
                    state.bytes
                );
                let next = i + held;
                let full = next == 5000 || !receiver.shared.admits(&state, (next * 37) % 300);
                drop(state);
                if full {
                    deepest = deepest.max(held);
                    break;
                }
                thread::yield_now();
            }
            assert_eq!(receiver.recv_timeout(LONG), Ok(i));
        }
        writer.join().unwrap();
        assert!(deepest > 1);
    }

    /// Whether the sender is already waiting when the receiver goes depends on
    /// the scheduler; either way its send must fail, and one left waiting
    /// (no wake-up) would hang the test.
    #[test]
    fn a_send_fails_once_the_receiver_is_gone() {
        let (sender, receiver) = bounded::<usize>(1, 10);
        sender.send(0, 5).unwrap();
        // The queue is full: the next send waits until the receiver goes.
        let writer = thread::spawn(move || sender.send(1, 5));
        drop(receiver);
        assert_eq!(writer.join().unwrap(), Err(1));
    }
}
