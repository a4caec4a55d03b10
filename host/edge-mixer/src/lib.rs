//! The mixing buffer of a group-singing room, shared by its members'
//! codec sessions: each writes its decoded audio at its own time offset,
//! adding to what others wrote, and reads the mix back at a later offset.
//!
//! # Concurrency
//!
//! The audio path takes no room-wide lock. Samples are fixed-point
//! (`i32`, 2^20 per full scale) in atomics, so concurrent writers *add*
//! with `fetch_add` and the sum is exact whatever the interleaving. The
//! ring is cut into chunks (one codec frame each); a chunk's `RwLock` is
//! taken shared by writers and readers and exclusively only to recycle
//! the chunk for a newer position (zeroing what fell out of the window),
//! once per chunk per trip round the ring. Rooms are found through an
//! `ArcSwap` map (lock-free reads) and room state through an `ArcSwap`
//! snapshot.
//!
//! ```
//! use edge_mixer::{Mixer, RoomConfig};
//! let mixer = Mixer::default();
//! let room = mixer.room("choir", RoomConfig::default());
//! room.write(48_000, &[0.25; 960]).unwrap();
//! room.write(48_000, &[0.5; 960]).unwrap();
//! let mut mix = [0.0; 960];
//! room.read(48_000, &mut mix).unwrap();
//! assert_eq!(mix[0], 0.75);
//! ```
#![deny(missing_docs)]

mod wit;
pub use wit::{MixerGrant, MixerView, add_to_linker};

use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

/// A slot that never held a chunk.
const EMPTY: u64 = u64::MAX;

/// Fixed-point scale: 2^20 per full scale leaves room for ~2,000 voices at
/// full scale in an `i32` without overflow.
const SCALE: f32 = (1 << 20) as f32;

/// How a room's buffer is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomConfig {
    /// Samples per second (per channel).
    pub sample_rate: u32,
    /// Interleaved channels.
    pub channels: u16,
    /// Samples (per channel) in one chunk: a codec frame (20 ms at 48 kHz = 960).
    pub chunk_frames: u32,
    /// Chunks in the ring: the window (3,000 × 20 ms = 60 s).
    pub chunks: u32,
    /// Encoder bitrate for the room's codec sessions (bits per second).
    pub bitrate: u32,
    /// Encoder complexity for the room's codec sessions (0-10).
    pub complexity: u8,
}

impl Default for RoomConfig {
    fn default() -> Self {
        Self {
            sample_rate: 48_000,
            channels: 1,
            chunk_frames: 960,
            chunks: 3_000,
            bitrate: 64_000,
            complexity: 4,
        }
    }
}

impl RoomConfig {
    fn chunk_len(&self) -> u64 {
        u64::from(self.chunk_frames) * u64::from(self.channels)
    }

    /// The window in samples (interleaved). Saturates: an absurd layout
    /// must fail validation, not wrap into a small one.
    pub fn window(&self) -> u64 {
        self.chunk_len().saturating_mul(u64::from(self.chunks))
    }
}

/// Why a write or read was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MixError {
    /// The position is outside the window around the room's newest one.
    #[error("offset {at} is outside the window: the room holds {from}..{to}")]
    OutsideWindow {
        /// The position asked for.
        at: u64,
        /// Oldest position still held.
        from: u64,
        /// One past the newest position that may be written.
        to: u64,
    },
    /// More samples than the window holds.
    #[error("{len} samples is more than the window of {window}")]
    TooLong {
        /// Samples given or asked for.
        len: usize,
        /// The window.
        window: u64,
    },
    /// A sample count that is not a whole number of frames.
    #[error("{len} samples is not a multiple of {channels} channels")]
    PartialFrame {
        /// Samples given.
        len: usize,
        /// Channels of the room.
        channels: u16,
    },
}

struct Chunk {
    /// Which chunk of the stream (absolute index) the slot holds now.
    holds: RwLock<u64>,
    samples: Box<[AtomicI32]>,
}

/// Who is in a room and where the song is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomState {
    /// Members by session id, with display names.
    pub members: Vec<(String, String)>,
    /// The session leading the song, if any.
    pub leader: Option<String>,
    /// Where the song started (absolute sample position), if it did.
    pub song_start: Option<u64>,
}

/// One room: the ring and its state.
pub struct Room {
    config: RoomConfig,
    chunks: Box<[Chunk]>,
    /// One past the newest sample position written or read.
    head: AtomicU64,
    state: ArcSwap<RoomState>,
}

impl Room {
    /// An empty room.
    pub fn new(config: RoomConfig) -> Self {
        let len = config.chunk_len() as usize;
        let chunks = (0..config.chunks)
            .map(|_| Chunk {
                holds: RwLock::new(EMPTY),
                samples: (0..len).map(|_| AtomicI32::new(0)).collect(),
            })
            .collect();
        Self {
            config,
            chunks,
            head: AtomicU64::new(0),
            state: ArcSwap::from_pointee(RoomState::default()),
        }
    }

    /// Its layout.
    pub fn config(&self) -> RoomConfig {
        self.config
    }

    /// Checks `at..at + len` against the window; a write moves the head
    /// (reads do not: a reader must not push the singers out of the window).
    fn admit(&self, at: u64, len: usize, write: bool) -> Result<(), MixError> {
        let window = self.config.window();
        if len as u64 > window {
            return Err(MixError::TooLong { len, window });
        }
        let channels = usize::from(self.config.channels);
        if !len.is_multiple_of(channels) || !at.is_multiple_of(channels as u64) {
            return Err(MixError::PartialFrame {
                len,
                channels: self.config.channels,
            });
        }
        let head = self.head.load(Relaxed);
        // Writes may run ahead of the head by up to a window (a client
        // ahead of the others); reads and writes may lag by a window.
        let from = head.saturating_sub(window);
        let to = head.saturating_add(window);
        let end = at.saturating_add(len as u64);
        if at < from || end > to {
            return Err(MixError::OutsideWindow { at, from, to });
        }
        if write {
            self.head.fetch_max(end, Relaxed);
        }
        Ok(())
    }

    /// Runs `f` on the slot of absolute chunk `index`, recycling the slot
    /// (zeroing it) if it held an older chunk; `None` if it already holds a
    /// newer one (this index fell out of the window).
    fn with_chunk<R>(&self, index: u64, f: impl FnOnce(&Chunk) -> R) -> Option<R> {
        let chunk = &self.chunks[(index % u64::from(self.config.chunks)) as usize];
        let mut f = Some(f);
        loop {
            {
                let holds = chunk.holds.read().unwrap_or_else(|e| e.into_inner());
                if *holds == index {
                    return f.take().map(|f| f(chunk));
                }
                if *holds != EMPTY && *holds > index {
                    return None;
                }
            }
            let mut holds = chunk.holds.write().unwrap_or_else(|e| e.into_inner());
            if *holds == EMPTY || *holds < index {
                for s in chunk.samples.iter() {
                    s.store(0, Relaxed);
                }
                *holds = index;
            }
            // Take the shared lock again: another writer may have moved on.
        }
    }

    /// Adds interleaved `samples` (clamped to -1..1) at position `at`.
    pub fn write(&self, at: u64, samples: &[f32]) -> Result<(), MixError> {
        self.admit(at, samples.len(), true)?;
        let chunk_len = self.config.chunk_len();
        let mut pos = at;
        let mut rest = samples;
        while !rest.is_empty() {
            let index = pos / chunk_len;
            let offset = (pos % chunk_len) as usize;
            let n = rest.len().min(chunk_len as usize - offset);
            let (part, tail) = rest.split_at(n);
            let written = self.with_chunk(index, |c| {
                for (slot, s) in c.samples[offset..offset + n].iter().zip(part) {
                    slot.fetch_add((s.clamp(-1.0, 1.0) * SCALE) as i32, Relaxed);
                }
            });
            if written.is_none() {
                return Err(MixError::OutsideWindow {
                    at: pos,
                    from: self.head.load(Relaxed).saturating_sub(self.config.window()),
                    to: self.head.load(Relaxed) + self.config.window(),
                });
            }
            pos += n as u64;
            rest = tail;
        }
        Ok(())
    }

    /// Reads the mix at `at` into `out` (clamped to -1..1; silence where
    /// nothing was written).
    pub fn read(&self, at: u64, out: &mut [f32]) -> Result<(), MixError> {
        self.admit(at, out.len(), false)?;
        let chunk_len = self.config.chunk_len();
        let mut pos = at;
        let mut done = 0;
        while done < out.len() {
            let index = pos / chunk_len;
            let offset = (pos % chunk_len) as usize;
            let n = (out.len() - done).min(chunk_len as usize - offset);
            let dst = &mut out[done..done + n];
            let chunk = &self.chunks[(index % u64::from(self.config.chunks)) as usize];
            let holds = chunk.holds.read().unwrap_or_else(|e| e.into_inner());
            if *holds == index {
                for (d, s) in dst.iter_mut().zip(&chunk.samples[offset..offset + n]) {
                    *d = (s.load(Relaxed) as f32 / SCALE).clamp(-1.0, 1.0);
                }
            } else {
                dst.fill(0.0);
            }
            pos += n as u64;
            done += n;
        }
        Ok(())
    }

    /// The room's state now.
    pub fn state(&self) -> Arc<RoomState> {
        self.state.load_full()
    }

    /// Changes the state (join, leave, leader, song start) atomically.
    pub fn update(&self, f: impl Fn(&mut RoomState)) -> Arc<RoomState> {
        self.state.rcu(|s| {
            let mut next = (**s).clone();
            f(&mut next);
            next
        });
        self.state.load_full()
    }
}

/// All rooms of a host.
#[derive(Default)]
pub struct Mixer {
    rooms: ArcSwap<HashMap<String, Arc<Room>>>,
}

impl Mixer {
    /// The room `name`, created with `config` if it does not exist.
    pub fn room(&self, name: &str, config: RoomConfig) -> Arc<Room> {
        if let Some(r) = self.rooms.load().get(name) {
            return r.clone();
        }
        let mut created = None;
        self.rooms.rcu(|rooms| {
            let mut next = (**rooms).clone();
            next.entry(name.to_string()).or_insert_with(|| {
                created
                    .get_or_insert_with(|| Arc::new(Room::new(config)))
                    .clone()
            });
            next
        });
        self.rooms.load().get(name).cloned().expect("just inserted")
    }

    /// How many rooms have names starting with `prefix`.
    pub fn count_prefix(&self, prefix: &str) -> usize {
        self.rooms
            .load()
            .keys()
            .filter(|k| k.starts_with(prefix))
            .count()
    }

    /// The room `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<Room>> {
        self.rooms.load().get(name).cloned()
    }

    /// Removes a room (its buffer goes when its last user lets go).
    pub fn remove(&self, name: &str) {
        self.rooms.rcu(|rooms| {
            let mut next = (**rooms).clone();
            next.remove(name);
            next
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> RoomConfig {
        RoomConfig {
            chunk_frames: 4,
            chunks: 8,
            ..RoomConfig::default()
        }
    }

    #[test]
    fn overlapping_writes_sum_and_reads_return_the_window_asked_for() {
        let room = Room::new(small());
        room.write(2, &[0.5, 0.5, 0.5, 0.5]).unwrap();
        room.write(4, &[0.25, 0.25, 0.25]).unwrap();
        let mut out = [9.0; 8];
        room.read(0, &mut out).unwrap();
        assert_eq!(out, [0.0, 0.0, 0.5, 0.5, 0.75, 0.75, 0.25, 0.0]);
        let mut one = [0.0; 1];
        room.read(5, &mut one).unwrap();
        assert_eq!(one, [0.75]);
        // Sums clamp at full scale when read, not when stored.
        room.write(2, &[1.0]).unwrap();
        room.write(2, &[-0.5]).unwrap();
        room.read(2, &mut one).unwrap();
        assert_eq!(one, [1.0]);
    }

    #[test]
    fn slots_that_fall_out_of_the_window_are_cleared_and_refused() {
        let room = Room::new(small()); // window: 32 samples
        room.write(0, &[0.5; 4]).unwrap();
        room.write(32, &[0.25; 4]).unwrap(); // same slot, next lap
        let mut out = [9.0; 4];
        room.read(32, &mut out).unwrap();
        assert_eq!(out, [0.25; 4], "the old lap was cleared, not added to");
        assert!(matches!(
            room.read(0, &mut out),
            Err(MixError::OutsideWindow { .. })
        ));
        assert!(matches!(
            room.write(36 + 32, &[0.1]),
            Err(MixError::OutsideWindow { .. })
        ));
        assert!(matches!(
            room.write(0, &[0.0; 33]),
            Err(MixError::TooLong { .. })
        ));
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let room = Arc::new(Room::new(RoomConfig::default()));
        let threads = 8;
        let rounds = 200;
        std::thread::scope(|s| {
            for t in 0..threads {
                let room = room.clone();
                s.spawn(move || {
                    for r in 0..rounds {
                        // Every thread writes every frame; offsets overlap
                        // by half a frame between threads.
                        let at = (r * 960 + (t % 2) * 480) as u64;
                        room.write(at, &[1.0 / 1024.0; 960]).unwrap();
                    }
                });
            }
        });
        let mut out = vec![0.0; 960];
        room.read(960 * 100, &mut out).unwrap();
        // Each sample got 8 writes of 1/1024 (4 aligned, 4 half-shifted).
        for s in &out {
            assert_eq!(*s, 8.0 / 1024.0);
        }
    }

    #[test]
    fn rooms_and_state() {
        let mixer = Mixer::default();
        let a = mixer.room("a", small());
        assert!(Arc::ptr_eq(&a, &mixer.room("a", RoomConfig::default())));
        let s = a.update(|s| {
            s.members.push(("s1".into(), "Ada".into()));
            s.leader = Some("s1".into());
        });
        assert_eq!(s.leader.as_deref(), Some("s1"));
        assert_eq!(mixer.get("a").unwrap().state().members.len(), 1);
        mixer.remove("a");
        assert!(mixer.get("a").is_none());
    }
}
