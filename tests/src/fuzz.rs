//! What the fuzz targets that play a tenant's server at random share: a
//! seeded generator, and a count of panics on every thread.

use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A small deterministic generator (xorshift64*): a case is its seed
/// (which must not be 0).
pub struct Dice(pub u64);

impl Dice {
    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Panics seen so far on any thread of the process, counted from the first
/// call (which puts the counting hook in front of the default one). A
/// client under test may run on runtimes of its own, and the host turns
/// some panics into errors: counted where they happen, each is a bug.
pub fn panics_so_far() -> usize {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            report(info);
        }));
    });
    PANICS.load(Ordering::SeqCst)
}
