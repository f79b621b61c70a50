//! A batch of values decoded into one buffer on scoped threads: slot `i` of
//! the buffer is value `i`'s, each thread takes the next value from a shared
//! counter (values differ in cost), and the outcomes come back in order. Both
//! the images and the audio clips of a batch are decoded this way.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

/// Runs `one(i, slot, scratch)` for `i` in `0..count`, slot `i` being
/// `out[i * each..(i + 1) * each]`, on up to `threads` scoped threads (each
/// with its own `scratch`), and returns the outcomes by position. `out` holds
/// exactly `count * each` items.
pub(crate) fn fill<T, R, S>(
    count: usize,
    each: usize,
    out: &mut [T],
    threads: usize,
    one: &(dyn Fn(usize, &mut [T], &mut S) -> R + Sync),
) -> Vec<R>
where
    T: Send,
    R: Send,
    S: Default,
{
    assert_eq!(out.len(), count * each, "one output slot per value");
    let threads = threads.clamp(1, count.max(1));
    if threads == 1 || each == 0 {
        let mut scratch = S::default();
        if each == 0 {
            return (0..count).map(|i| one(i, &mut [], &mut scratch)).collect();
        }
        return out
            .chunks_exact_mut(each)
            .enumerate()
            .map(|(i, slot)| one(i, slot, &mut scratch))
            .collect();
    }
    // Each slot is handed out once, through its own lock.
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<&mut [T]>>> = out
        .chunks_exact_mut(each)
        .map(|slot| Mutex::new(Some(slot)))
        .collect();
    let done: Vec<Vec<(usize, R)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut scratch = S::default();
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        let slot = slots[i].lock().unwrap_or_else(|p| p.into_inner()).take();
                        let slot = slot.expect("each slot is taken once");
                        mine.push((i, one(i, slot, &mut scratch)));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut outcomes: Vec<Option<R>> = (0..count).map(|_| None).collect();
    for (i, outcome) in done.into_iter().flatten() {
        outcomes[i] = Some(outcome);
    }
    outcomes
        .into_iter()
        .map(|outcome| outcome.expect("every value is decoded once"))
        .collect()
}
