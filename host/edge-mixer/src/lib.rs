//! The mixing buffer of a group-singing room, shared by its members'
//! codec sessions: each writes its decoded audio at its own time offset,
//! adding to what others wrote, and reads the mix back at a later offset.
//!
//! # Concurrency
//!
//! The audio path takes no room-wide lock. Samples are fixed-point
//! (`i32`, 2^20 per full scale) in atomics, so concurrent writers *add*
//! and the sum is exact whatever the interleaving (it saturates rather
//! than wraps past ±2,048 full-scale voices). The ring is cut into chunks
//! (one codec frame each); a chunk's `RwLock` is taken shared by writers
//! and readers and exclusively only to recycle the chunk for a newer
//! position (zeroing what fell out of the window), once per chunk per trip
//! round the ring. Rooms are found through an `ArcSwap` map (lock-free
//! reads) and room state through an `ArcSwap` snapshot.
//!
//! # Memory
//!
//! A chunk's samples are allocated when it is first written (under its
//! exclusive lock), so a room nobody writes costs its ring of empty slots
//! (a few dozen bytes per chunk: 96 KB for 60 s of 20 ms frames) rather
//! than its whole window (up to 23 MB, once allocated at open), and freed
//! when the window passes them or the room goes. Everything a room
//! allocates is charged to two [`Budget`]s, the tenant's share and the
//! host's total, and released from them when it is freed: the ring (one
//! slot per chunk, and a fixed allowance for the room itself) when the
//! room is opened, which is refused ([`LimitError::OverBudget`]) if it
//! does not fit, and each chunk's samples with their allocation's own
//! overhead when first written; a write that would need a chunk past
//! either budget is refused ([`MixError::OverBudget`]) without adding
//! anything, and without touching any other tenant's rooms.
//!
//! # Lifetime
//!
//! Rooms belong to a tenant. A room nobody touched for its idle timeout is
//! removed ([`Mixer::evict_idle`], run by [`Mixer::spawn_janitor`]), and
//! [`Mixer::retain_tenants`] removes the rooms of tenants a reload took
//! away. Members are owned by whoever joined them (a codec session's
//! store, see [`MixerGrant`]), which takes them out when it goes.
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
use arc_swap::ArcSwapOption;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, Weak};
use std::time::{Duration, Instant};

/// A slot that never held a chunk.
const EMPTY: u64 = u64::MAX;

/// Bytes of one sample in a chunk.
const SAMPLE_BYTES: u64 = std::mem::size_of::<AtomicI32>() as u64;

/// What the allocator keeps beside each allocation, as charged.
const ALLOC_OVERHEAD: u64 = 16;

/// What a written chunk costs besides its samples: its `Arc<Samples>`
/// (the two counts, the slice's pointer and length, the accounts'
/// pointer) and the bookkeeping of its two allocations.
const CHUNK_OVERHEAD: u64 =
    (2 * std::mem::size_of::<usize>() + std::mem::size_of::<Samples>()) as u64 + 2 * ALLOC_OVERHEAD;

/// What a room costs before its ring: the `Room` in its `Arc`, its
/// accounts, state and name, and its entry in the mixer's map (a fixed
/// allowance; names are at most 128 bytes).
const ROOM_OVERHEAD: u64 = std::mem::size_of::<Room>() as u64 + 1024;

/// One slot of a room's ring, written or not.
const SLOT_BYTES: u64 = std::mem::size_of::<Chunk>() as u64;

/// The host's default budget for all mixing buffers (`mixer.max_total_bytes`).
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 512 << 20;

/// Fixed-point scale: 2^20 per full scale leaves room for ~2,000 voices at
/// full scale in an `i32`; past that the sum saturates.
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

    /// Bytes a room of this layout costs before anything is written (its
    /// ring of empty slots and the room itself), charged when it opens.
    pub fn ring_bytes(&self) -> u64 {
        ROOM_OVERHEAD + SLOT_BYTES * u64::from(self.chunks)
    }

    /// Bytes one written chunk costs: its samples and their allocation.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_len() * SAMPLE_BYTES + CHUNK_OVERHEAD
    }
}

/// A tenant's bounds on its rooms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Rooms open at once.
    pub max_rooms: usize,
    /// Members of one room.
    pub max_members: usize,
    /// A room nobody wrote, read or looked at for this long is removed.
    pub room_idle_timeout: Duration,
    /// Bytes of mixing buffer the tenant's rooms may hold together (its
    /// share of the host's [`Mixer`] budget).
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_rooms: 32,
            max_members: 64,
            room_idle_timeout: Duration::from_secs(300),
            max_bytes: DEFAULT_MAX_TOTAL_BYTES / 4,
        }
    }
}

/// A count of bytes of mixing buffer held, against a cap (a tenant's share
/// or the host's total). Rings are charged when their room opens and
/// chunks when allocated, each released when freed, so `used` is what is
/// allocated now.
#[derive(Debug)]
pub struct Budget {
    used: AtomicU64,
    max: AtomicU64,
    /// Writes refused because of this budget.
    refused: AtomicU64,
    /// When a refusal was last logged (ms since the mixer started; 0: never).
    logged_ms: AtomicU64,
}

impl Budget {
    fn new(max: u64) -> Self {
        Self {
            used: AtomicU64::new(0),
            max: AtomicU64::new(max),
            refused: AtomicU64::new(0),
            logged_ms: AtomicU64::new(0),
        }
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }

    /// The cap.
    pub fn max(&self) -> u64 {
        self.max.load(Relaxed)
    }

    /// Writes refused so far because of this budget.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Takes `n` bytes unless that passes the cap.
    fn take(&self, n: u64) -> bool {
        let max = self.max.load(Relaxed);
        self.used
            .fetch_update(Relaxed, Relaxed, |u| u.checked_add(n).filter(|t| *t <= max))
            .is_ok()
    }

    fn give(&self, n: u64) {
        self.used.fetch_sub(n, Relaxed);
    }
}

/// The budgets a room's chunks are charged to.
struct Accounts {
    host: Arc<Budget>,
    tenant: Arc<Budget>,
}

impl Accounts {
    /// Charges `n` bytes to both, or to neither: the error names the
    /// budget that would pass its cap, and its cap.
    fn take(&self, n: u64) -> Result<(), (BudgetLimit, u64)> {
        if !self.tenant.take(n) {
            self.tenant.refused.fetch_add(1, Relaxed);
            return Err((BudgetLimit::Tenant, self.tenant.max()));
        }
        if !self.host.take(n) {
            self.tenant.give(n);
            self.host.refused.fetch_add(1, Relaxed);
            return Err((BudgetLimit::Host, self.host.max()));
        }
        Ok(())
    }
}

/// A chunk's samples, charged to its room's budgets while it lives.
struct Samples {
    samples: Box<[AtomicI32]>,
    accounts: Arc<Accounts>,
}

impl Samples {
    fn bytes(&self) -> u64 {
        self.samples.len() as u64 * SAMPLE_BYTES + CHUNK_OVERHEAD
    }
}

impl Drop for Samples {
    fn drop(&mut self) {
        let n = self.bytes();
        self.accounts.tenant.give(n);
        self.accounts.host.give(n);
    }
}

/// Which budget refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetLimit {
    /// The tenant's share (`mixer.max_bytes`).
    Tenant,
    /// The host's total (`mixer.max_total_bytes`).
    Host,
}

/// Why a write or read was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
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
    /// The chunk the write needs would pass a byte budget of the mixer's.
    /// The message names the key but not the host's figure (it reaches
    /// clients).
    #[error("{}", match limit {
        BudgetLimit::Tenant => format!("the tenant's mixing buffers are full: {max} bytes (the most allowed: mixer.max_bytes)"),
        BudgetLimit::Host => "the host's mixing buffers are full (the most allowed: mixer.max_total_bytes)".to_string(),
    })]
    OverBudget {
        /// Which budget.
        limit: BudgetLimit,
        /// Its cap in bytes.
        max: u64,
    },
}

/// Why a room could not be opened or joined.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitError {
    /// The tenant holds as many rooms as it may.
    #[error("the tenant already has {max} rooms open (the most allowed: mixer.max_rooms)")]
    TooManyRooms {
        /// The limit.
        max: usize,
    },
    /// The room holds as many members as it may.
    #[error("the room is full: {max} members (the most allowed: mixer.max_members)")]
    RoomFull {
        /// The limit.
        max: usize,
    },
    /// The tenant is no longer configured (a reload removed it).
    #[error("the tenant was removed")]
    TenantRemoved,
    /// The room's ring would pass a byte budget of the mixer's (the same
    /// words as [`MixError::OverBudget`]).
    #[error("{}", MixError::OverBudget { limit: *limit, max: *max })]
    OverBudget {
        /// Which budget.
        limit: BudgetLimit,
        /// Its cap in bytes.
        max: u64,
    },
}

struct Chunk {
    /// Which chunk of the stream (absolute index) the slot holds now.
    holds: RwLock<u64>,
    /// Its samples once written: replaced only under `holds`' exclusive
    /// lock, and read under its shared one. `None` reads as silence.
    samples: ArcSwapOption<Samples>,
}

/// A member of a room.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Session id (unique in the room).
    pub session: String,
    /// Display name.
    pub name: String,
    /// Who joined it (see [`Mixer::new_owner`]); only that owner's
    /// departure takes the member out.
    pub owner: u64,
}

/// Who is in a room and where the song is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomState {
    /// Members in joining order.
    pub members: Vec<Member>,
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
    /// Serializes state changes, so each is checked and applied once.
    updating: Mutex<()>,
    /// When it was last used, milliseconds since its mixer started.
    used_ms: AtomicU64,
    /// Its tenant's idle timeout when it was last opened, milliseconds.
    idle_ms: AtomicU64,
    /// Chunks below this absolute index were freed (or checked) as the
    /// window passed them.
    swept: AtomicU64,
    /// Bytes of the ring charged to `accounts` (0 once given back).
    ring: AtomicU64,
    accounts: Arc<Accounts>,
}

impl Drop for Room {
    fn drop(&mut self) {
        self.release_ring();
    }
}

impl Room {
    /// An empty room (of no tenant, with no byte budget).
    pub fn new(config: RoomConfig) -> Self {
        let accounts = Accounts {
            host: Arc::new(Budget::new(u64::MAX)),
            tenant: Arc::new(Budget::new(u64::MAX)),
        };
        Self::with_idle(config, Limits::default().room_idle_timeout, accounts)
            .expect("no budget to pass")
    }

    /// A room whose ring is charged to `accounts` first: refused, with
    /// nothing allocated, if it does not fit.
    fn with_idle(
        config: RoomConfig,
        idle: Duration,
        accounts: Accounts,
    ) -> Result<Self, LimitError> {
        let ring = config.ring_bytes();
        accounts
            .take(ring)
            .map_err(|(limit, max)| LimitError::OverBudget { limit, max })?;
        let chunks = (0..config.chunks)
            .map(|_| Chunk {
                holds: RwLock::new(EMPTY),
                samples: ArcSwapOption::empty(),
            })
            .collect();
        Ok(Self {
            config,
            chunks,
            head: AtomicU64::new(0),
            state: ArcSwap::from_pointee(RoomState::default()),
            updating: Mutex::new(()),
            used_ms: AtomicU64::new(0),
            idle_ms: AtomicU64::new(millis(idle)),
            swept: AtomicU64::new(0),
            ring: AtomicU64::new(ring),
            accounts: Arc::new(accounts),
        })
    }

    /// Bytes the room holds now, charged to its budgets: its ring (until
    /// the room is removed) and its written chunks.
    pub fn bytes(&self) -> u64 {
        self.ring.load(Relaxed)
            + self
                .chunks
                .iter()
                .map(|c| c.samples.load().as_ref().map_or(0, |s| s.bytes()))
                .sum::<u64>()
    }

    /// Gives the ring's bytes back to the budgets, once.
    fn release_ring(&self) {
        let n = self.ring.swap(0, Relaxed);
        if n > 0 {
            self.accounts.tenant.give(n);
            self.accounts.host.give(n);
        }
    }

    /// Frees every chunk and gives the ring's bytes back (the room was
    /// evicted or removed): its budgets get the bytes back now, not when
    /// the last user lets go.
    fn free(&self) {
        for chunk in self.chunks.iter() {
            let _holds = chunk.holds.write().unwrap_or_else(|e| e.into_inner());
            chunk.samples.store(None);
        }
        self.release_ring();
    }

    /// Frees the chunks the window passed since the last sweep (all of
    /// them below absolute chunk `low`). Each index is swept once, by the
    /// write that moved the head past it, so this is O(1) per chunk.
    fn sweep(&self, low: u64) {
        let prev = self.swept.fetch_max(low, Relaxed);
        if prev >= low {
            return;
        }
        let chunks = u64::from(self.config.chunks);
        for index in prev.max(low.saturating_sub(chunks))..low {
            let chunk = self.slot(index);
            let stale = |h: u64| h != EMPTY && h < low;
            {
                let holds = chunk.holds.read().unwrap_or_else(|e| e.into_inner());
                if !stale(*holds) || chunk.samples.load().is_none() {
                    continue;
                }
            }
            let holds = chunk.holds.write().unwrap_or_else(|e| e.into_inner());
            if stale(*holds) {
                chunk.samples.store(None);
            }
        }
    }

    /// The first absolute chunk still (partly) in the window.
    fn low_chunk(&self) -> u64 {
        self.head.load(Relaxed).saturating_sub(self.config.window()) / self.config.chunk_len()
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
        let chunk_len = self.config.chunk_len();
        // A write must fit in distinct slots: one that starts mid-chunk and
        // is a whole window long would reach its own first slot again and
        // recycle it, dropping what it had just added there.
        if write
            && len > 0
            && at.saturating_add(len as u64 - 1) / chunk_len - at / chunk_len
                >= u64::from(self.config.chunks)
        {
            return Err(MixError::TooLong {
                len,
                window: window - (at % chunk_len),
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

    fn slot(&self, index: u64) -> &Chunk {
        &self.chunks[(index % u64::from(self.config.chunks)) as usize]
    }

    /// Makes the slot of absolute chunk `index` hold it with samples,
    /// recycling (zeroing) them if it held an older chunk and allocating
    /// them if it had none. False if it holds a newer one already or the
    /// window passed `index` meanwhile; an error if the allocation would
    /// pass a budget.
    fn claim(&self, index: u64) -> Result<bool, MixError> {
        let chunk = self.slot(index);
        {
            let holds = chunk.holds.read().unwrap_or_else(|e| e.into_inner());
            if *holds == index && chunk.samples.load().is_some() {
                return Ok(true);
            }
            if *holds != EMPTY && *holds > index {
                return Ok(false);
            }
        }
        let mut holds = chunk.holds.write().unwrap_or_else(|e| e.into_inner());
        if *holds != EMPTY && *holds > index {
            return Ok(false);
        }
        let current = chunk.samples.load();
        match &*current {
            Some(_) if *holds == index => {}
            Some(samples) => {
                for s in samples.samples.iter() {
                    s.store(0, Relaxed);
                }
                *holds = index;
            }
            None => {
                // A sweep may have freed this index after the write was
                // admitted: it is out of the window, so refuse rather
                // than allocate a chunk nobody may read.
                if index < self.low_chunk() {
                    return Ok(false);
                }
                let len = self.config.chunk_len();
                self.accounts
                    .take(self.config.chunk_bytes())
                    .map_err(|(limit, max)| MixError::OverBudget { limit, max })?;
                let samples = Samples {
                    samples: (0..len).map(|_| AtomicI32::new(0)).collect(),
                    accounts: self.accounts.clone(),
                };
                chunk.samples.store(Some(Arc::new(samples)));
                *holds = index;
            }
        }
        Ok(true)
    }

    /// Adds interleaved `samples` (clamped to -1..1) at position `at`.
    /// All or nothing: a write refused partway (a slot it needs was taken
    /// by a newer lap meanwhile) has added nothing, so it can be retried.
    pub fn write(&self, at: u64, samples: &[f32]) -> Result<(), MixError> {
        self.admit(at, samples.len(), true)?;
        if samples.is_empty() {
            return Ok(());
        }
        let chunk_len = self.config.chunk_len();
        let first = at / chunk_len;
        let last = (at + samples.len() as u64 - 1) / chunk_len;
        let refused = || {
            let head = self.head.load(Relaxed);
            MixError::OutsideWindow {
                at,
                from: head.saturating_sub(self.config.window()),
                to: head.saturating_add(self.config.window()),
            }
        };
        // Claim every slot first, then hold them all shared while adding:
        // a slot recycled between claim and lock shows as a newer index,
        // and the write backs out before adding anything. Locks are taken
        // in slot order (claims hold none while waiting), so writers
        // holding several never wait on each other in a cycle.
        // Chunks the window passed go before new ones are taken, so a
        // room moving forward needs no more than its window.
        self.sweep(self.low_chunk());
        for index in first..=last {
            if !self.claim(index)? {
                return Err(refused());
            }
        }
        let mut order: Vec<u64> = (first..=last).collect();
        order.sort_by_key(|i| i % u64::from(self.config.chunks));
        let mut guards: Vec<(u64, RwLockReadGuard<'_, u64>, Arc<Samples>)> =
            Vec::with_capacity(order.len());
        for index in order {
            let chunk = self.slot(index);
            let guard = chunk.holds.read().unwrap_or_else(|e| e.into_inner());
            // Freed since the claim (a sweep): out of the window now.
            let Some(buf) = chunk.samples.load_full() else {
                return Err(refused());
            };
            if *guard != index {
                return Err(refused());
            }
            guards.push((index, guard, buf));
        }
        for (index, _guard, buf) in &guards {
            let start = (index * chunk_len).max(at);
            let end = ((index + 1) * chunk_len).min(at + samples.len() as u64);
            let offset = (start - index * chunk_len) as usize;
            let part = &samples[(start - at) as usize..(end - at) as usize];
            let slots = &buf.samples[offset..offset + part.len()];
            for (slot, s) in slots.iter().zip(part) {
                let add = (s.clamp(-1.0, 1.0) * SCALE) as i32;
                // Saturating: past ±2,048 full-scale voices a wrapping add
                // would flip a loud mix to its opposite sign.
                let _ = slot.fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_add(add)));
            }
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
            let chunk = self.slot(index);
            let holds = chunk.holds.read().unwrap_or_else(|e| e.into_inner());
            match &*chunk.samples.load() {
                Some(buf) if *holds == index => {
                    for (d, s) in dst.iter_mut().zip(&buf.samples[offset..offset + n]) {
                        *d = (s.load(Relaxed) as f32 / SCALE).clamp(-1.0, 1.0);
                    }
                }
                _ => dst.fill(0.0),
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

    /// Changes the state (join, leave, leader, song start) atomically: `f`
    /// runs once, on the current state; an error changes nothing.
    pub fn update<E>(
        &self,
        f: impl FnOnce(&mut RoomState) -> Result<(), E>,
    ) -> Result<Arc<RoomState>, E> {
        let _one = self.updating.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = (*self.state.load_full()).clone();
        f(&mut next)?;
        let next = Arc::new(next);
        self.state.store(next.clone());
        Ok(next)
    }

    /// Adds (or renames) member `session`, owned by `owner`, unless the
    /// room already holds `max` others.
    pub fn join(
        &self,
        session: &str,
        name: &str,
        owner: u64,
        max: usize,
    ) -> Result<Arc<RoomState>, LimitError> {
        self.update(|s| {
            s.members.retain(|m| m.session != session);
            if s.members.len() >= max {
                return Err(LimitError::RoomFull { max });
            }
            s.members.push(Member {
                session: session.into(),
                name: name.into(),
                owner,
            });
            Ok(())
        })
    }

    /// Takes member `session` out if `owner` joined it (any owner when
    /// `None`); the leader's seat goes with it.
    pub fn leave(&self, session: &str, owner: Option<u64>) -> Arc<RoomState> {
        let left = self.update(|s| {
            let before = s.members.len();
            s.members
                .retain(|m| m.session != session || owner.is_some_and(|o| o != m.owner));
            if s.members.len() == before {
                return Err(());
            }
            if s.leader.as_deref() == Some(session) {
                s.leader = None;
            }
            Ok(())
        });
        left.unwrap_or_else(|()| self.state())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A room's key: its tenant and name.
type RoomKey = (Arc<str>, String);

/// All rooms of a host, of every tenant.
pub struct Mixer {
    rooms: ArcSwap<HashMap<RoomKey, Arc<Room>>>,
    /// Tenants whose rooms may exist: `None` until the host first says.
    tenants: ArcSwap<Option<HashSet<Arc<str>>>>,
    started: Instant,
    next_owner: AtomicU64,
    /// All rooms' buffers together (`mixer.max_total_bytes`).
    host: Arc<Budget>,
    /// Each tenant's share (`mixer.max_bytes`), by tenant; taken only when
    /// a room is created.
    shares: Mutex<HashMap<Arc<str>, Arc<Budget>>>,
}

impl Default for Mixer {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TOTAL_BYTES)
    }
}

impl Mixer {
    /// A mixer whose rooms' buffers may hold `max_total_bytes` together.
    pub fn new(max_total_bytes: u64) -> Self {
        Self {
            rooms: ArcSwap::default(),
            tenants: ArcSwap::from_pointee(None),
            started: Instant::now(),
            next_owner: AtomicU64::new(1),
            host: Arc::new(Budget::new(max_total_bytes)),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// Changes the host's budget (a reload); chunks held past a lower one
    /// stay until freed, and new ones are refused meanwhile.
    pub fn set_max_total_bytes(&self, max: u64) {
        self.host.max.store(max, Relaxed);
    }

    /// All rooms' buffers together.
    pub fn budget(&self) -> &Budget {
        &self.host
    }

    /// `tenant`'s share, once it has opened a room.
    pub fn share(&self, tenant: &str) -> Option<Arc<Budget>> {
        let shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        shares.get(tenant).cloned()
    }

    /// `tenant`'s share with its cap set to `max`.
    fn share_of(&self, tenant: &Arc<str>, max: u64) -> Arc<Budget> {
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        let share = shares
            .entry(tenant.clone())
            .or_insert_with(|| Arc::new(Budget::new(max)));
        share.max.store(max, Relaxed);
        share.clone()
    }

    /// Whether a refusal by `budget` should be logged now: the first, then
    /// at most one a second per budget (a tenant retrying a full room
    /// must not flood the log).
    pub fn log_refusal(&self, budget: &Budget) -> bool {
        let now = self.now_ms().max(1);
        let last = budget.logged_ms.load(Relaxed);
        (last == 0 || now.saturating_sub(last) >= 1_000)
            && budget
                .logged_ms
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
    }

    fn now_ms(&self) -> u64 {
        millis(self.started.elapsed())
    }

    /// A new owner id for members (one per joining party).
    pub fn new_owner(&self) -> u64 {
        self.next_owner.fetch_add(1, Relaxed)
    }

    /// The room `name` (of no tenant), created with `config` if it does not
    /// exist; no limits apply but the host's byte budget.
    ///
    /// # Panics
    ///
    /// If the host's byte budget cannot hold the new room's ring.
    pub fn room(&self, name: &str, config: RoomConfig) -> Arc<Room> {
        let unlimited = Limits {
            max_rooms: usize::MAX,
            max_bytes: u64::MAX,
            ..Limits::default()
        };
        self.open("", name, config, &unlimited)
            .expect("the host's byte budget holds the room")
    }

    /// Whether rooms of `tenant` may exist (no reload removed it).
    fn live(&self, tenant: &str) -> bool {
        match &**self.tenants.load() {
            Some(live) => live.contains(tenant),
            None => true,
        }
    }

    /// `tenant`'s room `name`, created with `config` if it does not exist,
    /// the tenant has fewer than `limits.max_rooms` rooms and its share
    /// and the host's budget hold the room's ring
    /// ([`RoomConfig::ring_bytes`]). Opening counts as use and sets the
    /// room's idle timeout and the tenant's byte share to the tenant's.
    pub fn open(
        &self,
        tenant: &str,
        name: &str,
        config: RoomConfig,
        limits: &Limits,
    ) -> Result<Arc<Room>, LimitError> {
        if !self.live(tenant) {
            return Err(LimitError::TenantRemoved);
        }
        let key: RoomKey = (tenant.into(), name.to_string());
        let idle = millis(limits.room_idle_timeout);
        if let Some(r) = self.rooms.load().get(&key) {
            r.accounts.tenant.max.store(limits.max_bytes, Relaxed);
            r.idle_ms.store(idle, Relaxed);
            r.used_ms.store(self.now_ms(), Relaxed);
            return Ok(r.clone());
        }
        // Rooms past their idle time make way before the count is checked
        // (the janitor may not have run yet).
        self.evict_idle();
        // Made (and its ring charged) at most once, however often the
        // update is retried; one not inserted gives its ring back when
        // dropped.
        let mut created: Option<Arc<Room>> = None;
        let mut outcome = Err(LimitError::TooManyRooms {
            max: limits.max_rooms,
        });
        #[cfg(test)]
        tests::BEFORE_INSERT.with_borrow_mut(|hook| hook.as_mut().map(|f| f()));
        self.rooms.rcu(|rooms| {
            // Checked against the map this update replaces: a reload's
            // `retain_tenants` stores the live set before it replaces the
            // map, so either it sees this room and removes it, or this
            // update is retried after it and sees the tenant gone.
            if !self.live(tenant) {
                outcome = Err(LimitError::TenantRemoved);
                return rooms.clone();
            }
            if let Some(r) = rooms.get(&key) {
                outcome = Ok(r.clone());
                return rooms.clone();
            }
            let held = rooms.keys().filter(|(t, _)| **t == *tenant).count();
            if held >= limits.max_rooms {
                outcome = Err(LimitError::TooManyRooms {
                    max: limits.max_rooms,
                });
                return rooms.clone();
            }
            let room = match &created {
                Some(r) => r.clone(),
                None => {
                    let accounts = Accounts {
                        host: self.host.clone(),
                        tenant: self.share_of(&key.0, limits.max_bytes),
                    };
                    match Room::with_idle(config, limits.room_idle_timeout, accounts) {
                        Ok(r) => created.insert(Arc::new(r)).clone(),
                        Err(e) => {
                            outcome = Err(e);
                            return rooms.clone();
                        }
                    }
                }
            };
            outcome = Ok(room.clone());
            let mut next = (**rooms).clone();
            next.insert(key.clone(), room);
            Arc::new(next)
        });
        if matches!(outcome, Err(LimitError::TenantRemoved)) {
            // A share made for the room this refused must not outlive the
            // tenant's removal.
            let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
            if !self.live(tenant) {
                shares.remove(tenant);
            }
        }
        let room = outcome?;
        room.idle_ms.store(idle, Relaxed);
        room.used_ms.store(self.now_ms(), Relaxed);
        Ok(room)
    }

    /// `tenant`'s room `name`, if it exists; looking counts as use.
    pub fn get(&self, tenant: &str, name: &str) -> Option<Arc<Room>> {
        let rooms = self.rooms.load();
        let room = rooms.get(&(Arc::from(tenant), name.to_string()))?;
        room.used_ms.store(self.now_ms(), Relaxed);
        Some(room.clone())
    }

    /// How many rooms `tenant` has.
    pub fn count(&self, tenant: &str) -> usize {
        self.rooms
            .load()
            .keys()
            .filter(|(t, _)| **t == *tenant)
            .count()
    }

    /// Removes a room and frees its buffer.
    pub fn remove(&self, tenant: &str, name: &str) {
        let key: RoomKey = (tenant.into(), name.to_string());
        let mut gone = None;
        self.rooms.rcu(|rooms| {
            let mut next = (**rooms).clone();
            gone = next.remove(&key);
            next
        });
        if let Some(room) = gone {
            room.free();
        }
    }

    /// Removes the rooms nobody used for their idle timeout; returns them
    /// as (tenant, room name).
    pub fn evict_idle(&self) -> Vec<RoomKey> {
        let now = self.now_ms();
        let idle = |r: &Room| now.saturating_sub(r.used_ms.load(Relaxed)) > r.idle_ms.load(Relaxed);
        if !self.rooms.load().values().any(|r| idle(r)) {
            return Vec::new();
        }
        let mut gone = Vec::new();
        self.rooms.rcu(|rooms| {
            gone.clear();
            let mut next = HashMap::with_capacity(rooms.len());
            for (k, r) in rooms.iter() {
                if idle(r) {
                    gone.push((k.clone(), r.clone()));
                } else {
                    next.insert(k.clone(), r.clone());
                }
            }
            next
        });
        // Freed now: a session still holding the room for a moment must
        // not keep its bytes charged.
        gone.into_iter()
            .map(|(k, r)| {
                r.free();
                k
            })
            .collect()
    }

    /// Keeps the rooms of `tenants` only, and refuses to open rooms for
    /// any other tenant from now on (a reload removed it); returns how
    /// many rooms went.
    pub fn retain_tenants<'a>(&self, tenants: impl IntoIterator<Item = &'a str>) -> usize {
        let live: HashSet<Arc<str>> = tenants.into_iter().map(Arc::from).collect();
        let mut removed = Vec::new();
        self.tenants.store(Arc::new(Some(live.clone())));
        self.rooms.rcu(|rooms| {
            removed.clear();
            let mut next = HashMap::with_capacity(rooms.len());
            for (k, r) in rooms.iter() {
                if live.contains(&k.0) {
                    next.insert(k.clone(), r.clone());
                } else {
                    removed.push(r.clone());
                }
            }
            next
        });
        for room in &removed {
            room.free();
        }
        self.shares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t, _| live.contains(t));
        removed.len()
    }

    /// Evicts idle rooms every `every` on a thread of its own, for as long
    /// as `mixer` lives.
    pub fn spawn_janitor(mixer: &Arc<Mixer>, every: Duration) {
        let weak: Weak<Mixer> = Arc::downgrade(mixer);
        let spawned = std::thread::Builder::new()
            .name("edge-mixer-janitor".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    let Some(mixer) = weak.upgrade() else { return };
                    for (tenant, room) in mixer.evict_idle() {
                        tracing::info!(tenant = %tenant, room = %room, "idle mixing room removed");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start the mixer's janitor thread; idle rooms are evicted only when rooms are opened");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Injection hook: what happens, on this thread, between `open`'s
    /// first checks and its update of the rooms (a reload, say).
    type Hook = Option<Box<dyn FnMut()>>;
    thread_local! {
        pub(super) static BEFORE_INSERT: std::cell::RefCell<Hook> = const { std::cell::RefCell::new(None) };
    }

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
        a.join("s1", "Ada", 1, 8).unwrap();
        let s = a
            .update(|s| {
                s.leader = Some("s1".into());
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(s.leader.as_deref(), Some("s1"));
        assert_eq!(mixer.get("", "a").unwrap().state().members.len(), 1);
        mixer.remove("", "a");
        assert!(mixer.get("", "a").is_none());
    }

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        // 2^31 / 2^20 = 2,048 full-scale writes fill an i32; a wrapping add
        // turned the 2,049th into a full negative swing.
        let room = Room::new(small());
        for _ in 0..3_000 {
            room.write(0, &[1.0]).unwrap();
        }
        let mut one = [0.0; 1];
        room.read(0, &mut one).unwrap();
        assert_eq!(one, [1.0]);
        for _ in 0..6_000 {
            room.write(1, &[-1.0]).unwrap();
        }
        room.read(1, &mut one).unwrap();
        assert_eq!(one, [-1.0]);
    }

    #[test]
    fn a_write_refused_partway_adds_nothing_and_can_be_retried() {
        let room = Room::new(small()); // chunks of 4 samples, 8 slots
        room.write(0, &[0.0; 4]).unwrap();
        // As if another writer had taken slot 1 for a newer lap between
        // this write's window check and its second chunk.
        *room.chunks[1].holds.write().unwrap() = 9;
        assert!(matches!(
            room.write(2, &[0.5; 4]),
            Err(MixError::OutsideWindow { .. })
        ));
        let mut out = [9.0; 4];
        room.read(0, &mut out).unwrap();
        assert_eq!(out, [0.0; 4], "the first chunk's half was not added");
        *room.chunks[1].holds.write().unwrap() = EMPTY;
        room.write(2, &[0.5; 4]).unwrap();
        let mut out = [9.0; 6];
        room.read(0, &mut out).unwrap();
        assert_eq!(out, [0.0, 0.0, 0.5, 0.5, 0.5, 0.5], "added exactly once");
    }

    #[test]
    fn a_write_reaching_its_own_first_slot_again_is_refused() {
        let room = Room::new(small()); // window: 32 samples in 8 chunks
        room.write(0, &[0.0; 4]).unwrap();
        // 32 samples from 2 cover 9 chunks: the ninth is the first's slot.
        assert!(matches!(
            room.write(2, &[0.5; 32]),
            Err(MixError::TooLong { .. })
        ));
        room.write(4, &[0.5; 32]).unwrap();
        // Positions come from guests: the end of the timeline is refused,
        // not overflowed.
        assert!(matches!(
            room.write(u64::MAX - 1, &[0.5; 2]),
            Err(MixError::OutsideWindow { .. })
        ));
        let mut out = [0.0; 2];
        assert!(room.read(u64::MAX - 1, &mut out).is_err());
    }

    fn limits(max_rooms: usize, max_members: usize, idle_ms: u64) -> Limits {
        Limits {
            max_rooms,
            max_members,
            room_idle_timeout: Duration::from_millis(idle_ms),
            ..Limits::default()
        }
    }

    #[test]
    fn tenants_rooms_are_apart_and_bounded() {
        let mixer = Mixer::default();
        let l = limits(2, 2, 60_000);
        let a = mixer.open("a", "choir", small(), &l).unwrap();
        let b = mixer.open("b", "choir", small(), &l).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        a.write(0, &[0.5; 4]).unwrap();
        let mut out = [9.0; 4];
        b.read(0, &mut out).unwrap();
        assert_eq!(out, [0.0; 4]);
        mixer.open("a", "second", small(), &l).unwrap();
        assert_eq!(
            mixer.open("a", "third", small(), &l).err(),
            Some(LimitError::TooManyRooms { max: 2 })
        );
        a.join("s1", "one", 1, l.max_members).unwrap();
        a.join("s2", "two", 2, l.max_members).unwrap();
        // Joining again renames, and does not count twice.
        a.join("s1", "uno", 1, l.max_members).unwrap();
        assert_eq!(
            a.join("s3", "three", 3, l.max_members).err(),
            Some(LimitError::RoomFull { max: 2 })
        );
        assert_eq!(a.state().members.len(), 2);
        assert!(b.state().members.is_empty());
    }

    #[test]
    fn members_leave_only_by_their_owner() {
        let room = Room::new(small());
        room.join("s1", "Ada", 1, 8).unwrap();
        room.update(|s| {
            s.leader = Some("s1".into());
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(room.leave("s1", Some(2)).members.len(), 1);
        let s = room.leave("s1", Some(1));
        assert!(s.members.is_empty());
        assert_eq!(s.leader, None);
    }

    /// Limits with a byte share of `max_bytes`.
    fn share(max_bytes: u64) -> Limits {
        Limits {
            max_bytes,
            ..limits(8, 8, 60_000)
        }
    }

    /// Bytes of one written chunk of `small()`: its 4 samples and their
    /// allocation.
    const SMALL_CHUNK: u64 = 4 * SAMPLE_BYTES + CHUNK_OVERHEAD;

    /// Bytes of `small()`'s ring (8 empty slots and the room), charged
    /// when it opens.
    fn small_ring() -> u64 {
        small().ring_bytes()
    }

    #[test]
    fn a_room_costs_its_ring_until_written_and_frees_what_the_window_passes() {
        let mixer = Mixer::new(1 << 30);
        // The largest room the codec opens: 60 s of 48 kHz stereo.
        let big = RoomConfig {
            channels: 2,
            ..RoomConfig::default()
        };
        let room = mixer.open("t", "quiet", big, &Limits::default()).unwrap();
        // What an unwritten room holds, charged to the tenant and the host
        // at open: its slots and the room itself, not samples (about 0.5%
        // of the 23 MB window it used to allocate).
        let ring = big.ring_bytes();
        assert_eq!(ring, ROOM_OVERHEAD + SLOT_BYTES * u64::from(big.chunks));
        assert_eq!(
            (
                room.bytes(),
                mixer.budget().used(),
                mixer.share("t").unwrap().used()
            ),
            (ring, ring, ring)
        );
        let window = big.window() * SAMPLE_BYTES;
        assert!(
            ring * 100 <= window,
            "{ring} bytes idle for a {window}-byte window"
        );
        // Reads allocate nothing and return silence.
        let mut out = vec![9.0; 1920];
        room.read(0, &mut out).unwrap();
        assert!(out.iter().all(|s| *s == 0.0));
        assert_eq!(mixer.budget().used(), ring);
        // One frame written: one chunk charged, samples and allocation, to
        // the tenant and the host.
        room.write(1920 * 10, &[0.5; 1920]).unwrap();
        let chunk = big.chunk_bytes();
        assert_eq!(chunk, 1920 * SAMPLE_BYTES + CHUNK_OVERHEAD);
        assert_eq!(room.bytes(), ring + chunk);
        assert_eq!(mixer.budget().used(), ring + chunk);
        assert_eq!(mixer.share("t").unwrap().used(), ring + chunk);

        // In a small room (8 chunks of 4), chunks the window passes are
        // freed: writing a window ahead leaves only the new chunk.
        let small_room = mixer
            .open("t", "small", small(), &Limits::default())
            .unwrap();
        small_room.write(0, &[0.5; 16]).unwrap();
        assert_eq!(small_room.bytes(), small_ring() + 4 * SMALL_CHUNK);
        small_room.write(44, &[0.25; 4]).unwrap(); // head 48: window 16..48
        assert_eq!(small_room.bytes(), small_ring() + SMALL_CHUNK);
        let mut four = [9.0; 4];
        small_room.read(44, &mut four).unwrap();
        assert_eq!(four, [0.25; 4]);
        assert_eq!(
            mixer.budget().used(),
            ring + chunk + small_ring() + SMALL_CHUNK
        );
        // Laps round the ring recycle chunks and never hold more than the
        // window.
        for i in 0..40u64 {
            small_room.write(48 + i * 4, &[0.125; 4]).unwrap();
            assert!(small_room.bytes() <= small_ring() + 8 * SMALL_CHUNK);
        }
        assert_eq!(small_room.bytes(), small_ring() + 8 * SMALL_CHUNK);
        // Removing and evicting rooms gives everything back at once, ring
        // included, even while someone still holds the room.
        mixer.remove("t", "small");
        assert_eq!(small_room.bytes(), 0);
        assert_eq!(mixer.budget().used(), ring + chunk);
        assert_eq!(mixer.retain_tenants(["u"]), 1);
        assert_eq!(mixer.budget().used(), 0);
        drop((room, small_room));
        assert_eq!(mixer.budget().used(), 0);
    }

    #[test]
    fn concurrent_writers_are_charged_each_chunk_once() {
        let mixer = Mixer::new(1 << 30);
        let room = mixer.room("r", RoomConfig::default());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let room = room.clone();
                s.spawn(move || {
                    for r in 0..100u64 {
                        room.write(r * 960 + (t % 2) * 480, &[0.001; 960]).unwrap();
                    }
                });
            }
        });
        // Frames 0..=100 (the half-shifted writers reach into frame 100).
        let config = RoomConfig::default();
        assert_eq!(
            room.bytes(),
            config.ring_bytes() + 101 * config.chunk_bytes()
        );
        assert_eq!(mixer.budget().used(), room.bytes());
    }

    #[test]
    fn the_tenant_share_refuses_precisely_and_recovers_when_rooms_go() {
        let mixer = Mixer::new(1 << 20);
        let cap = 2 * small_ring() + 3 * SMALL_CHUNK;
        let l = share(cap);
        let one = mixer.open("a", "one", small(), &l).unwrap();
        let two = mixer.open("a", "two", small(), &l).unwrap();
        one.write(0, &[0.5; 8]).unwrap(); // chunks 0 and 1
        two.write(0, &[0.5; 4]).unwrap(); // the share, exactly
        let full = MixError::OverBudget {
            limit: BudgetLimit::Tenant,
            max: cap,
        };
        // A write reaching a fourth chunk is refused whole: its part in
        // the held chunk is not added either.
        assert_eq!(two.write(2, &[0.25; 4]), Err(full.clone()));
        assert_eq!(
            full.to_string(),
            format!(
                "the tenant's mixing buffers are full: {cap} bytes (the most allowed: mixer.max_bytes)"
            )
        );
        let mut out = [9.0; 8];
        two.read(0, &mut out).unwrap();
        assert_eq!(out, [0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0]);
        // Chunks already held still mix.
        two.write(0, &[0.25; 4]).unwrap();
        two.read(0, &mut out[..4]).unwrap();
        assert_eq!(out[..4], [0.75; 4]);
        let a = mixer.share("a").unwrap();
        assert_eq!((a.used(), a.refused()), (cap, 1));
        // A third room's ring does not fit: refused at open, in the same
        // words, charging nothing.
        let refused = mixer.open("a", "three", small(), &l).err().unwrap();
        assert_eq!(
            refused,
            LimitError::OverBudget {
                limit: BudgetLimit::Tenant,
                max: cap
            }
        );
        assert_eq!(refused.to_string(), full.to_string());
        assert_eq!((a.used(), a.refused()), (cap, 2));
        assert!(mixer.get("a", "three").is_none());
        // Another tenant is not touched.
        let b = mixer.open("b", "one", small(), &l).unwrap();
        b.write(0, &[0.5; 12]).unwrap();
        assert_eq!(mixer.share("b").unwrap().refused(), 0);
        // A room going frees the tenant's share (ring and chunks).
        mixer.remove("a", "one");
        assert_eq!(a.used(), small_ring() + SMALL_CHUNK);
        two.write(2, &[0.25; 4]).unwrap();
        two.read(0, &mut out).unwrap();
        assert_eq!(out, [0.75, 0.75, 1.0, 1.0, 0.25, 0.25, 0.0, 0.0]);
        // A reload lowering the share applies to chunks taken from then on.
        let l = share(small_ring() + SMALL_CHUNK);
        let two = mixer.open("a", "two", small(), &l).unwrap();
        assert_eq!(
            two.write(8, &[0.5; 4]),
            Err(MixError::OverBudget {
                limit: BudgetLimit::Tenant,
                max: small_ring() + SMALL_CHUNK
            })
        );
    }

    #[test]
    fn the_host_budget_refuses_across_tenants_and_recovers_when_rooms_are_evicted() {
        let cap = 2 * small_ring() + 4 * SMALL_CHUNK;
        let mixer = Mixer::new(cap);
        let quick = Limits {
            max_bytes: small_ring() + 3 * SMALL_CHUNK,
            ..limits(8, 8, 50)
        };
        let a = mixer.open("a", "r", small(), &quick).unwrap();
        a.write(0, &[0.5; 12]).unwrap();
        let b = mixer
            .open("b", "r", small(), &share(small_ring() + 4 * SMALL_CHUNK))
            .unwrap();
        b.write(0, &[0.5; 4]).unwrap(); // the host's budget, exactly
        let full = MixError::OverBudget {
            limit: BudgetLimit::Host,
            max: cap,
        };
        assert_eq!(b.write(4, &[0.5; 4]), Err(full.clone()));
        // The figure is the operator's (logged), not the client's.
        assert_eq!(
            full.to_string(),
            "the host's mixing buffers are full (the most allowed: mixer.max_total_bytes)"
        );
        // The refusal charged neither budget.
        assert_eq!(mixer.share("b").unwrap().used(), small_ring() + SMALL_CHUNK);
        assert_eq!(mixer.budget().used(), cap);
        assert_eq!(mixer.budget().refused(), 1);
        // a's room goes idle and is evicted: b may take its bytes.
        std::thread::sleep(Duration::from_millis(120));
        mixer.get("b", "r").unwrap();
        assert_eq!(mixer.evict_idle(), vec![(Arc::from("a"), "r".to_string())]);
        assert_eq!(mixer.budget().used(), small_ring() + SMALL_CHUNK);
        assert_eq!(mixer.share("a").unwrap().used(), 0);
        b.write(4, &[0.5; 8]).unwrap();
        assert_eq!(mixer.budget().used(), small_ring() + 3 * SMALL_CHUNK);
        // A reload lowering the host's budget refuses new chunks and rooms
        // only.
        mixer.set_max_total_bytes(SMALL_CHUNK);
        b.write(0, &[0.25; 12]).unwrap();
        assert!(matches!(
            b.write(12, &[0.5; 4]),
            Err(MixError::OverBudget {
                limit: BudgetLimit::Host,
                ..
            })
        ));
        assert_eq!(
            mixer.open("c", "r", small(), &share(1 << 20)).err(),
            Some(LimitError::OverBudget {
                limit: BudgetLimit::Host,
                max: SMALL_CHUNK
            })
        );
        assert_eq!(mixer.budget().used(), small_ring() + 3 * SMALL_CHUNK);
    }

    #[test]
    fn a_room_opened_while_a_reload_removes_its_tenant_does_not_stay() {
        // `open` checked the live tenants before it inserted the room, so
        // a reload removing the tenant in between left the room (and its
        // bytes) behind.
        let mixer = Arc::new(Mixer::new(1 << 30));
        mixer.retain_tenants(["a", "b"]);
        let reload = mixer.clone();
        BEFORE_INSERT.with_borrow_mut(|hook| {
            *hook = Some(Box::new(move || {
                reload.retain_tenants(["b"]);
            }))
        });
        let opened = mixer.open("a", "r", small(), &Limits::default());
        BEFORE_INSERT.with_borrow_mut(|hook| *hook = None);
        assert_eq!(opened.err(), Some(LimitError::TenantRemoved));
        assert_eq!(mixer.count("a"), 0);
        assert!(mixer.share("a").is_none());
        assert_eq!(mixer.budget().used(), 0);
        // Tenant b's rooms open as before.
        mixer.open("b", "r", small(), &Limits::default()).unwrap();
    }

    #[test]
    fn idle_rooms_are_evicted_and_removed_tenants_rooms_go() {
        let mixer = Mixer::default();
        let short = limits(1, 4, 50);
        let room = mixer.open("a", "quiet", small(), &short).unwrap();
        room.join("s1", "Ada", 1, 4).unwrap();
        let long = limits(8, 4, 60_000);
        mixer.open("b", "busy", small(), &long).unwrap();
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(
            mixer.evict_idle(),
            vec![(Arc::from("a"), "quiet".to_string())]
        );
        assert!(mixer.get("a", "quiet").is_none());
        // The tenant's one room slot is free again, and a room of the same
        // name starts empty.
        let again = mixer.open("a", "quiet", small(), &short).unwrap();
        assert!(again.state().members.is_empty());
        assert_eq!(mixer.retain_tenants(["b"]), 1);
        assert!(mixer.get("a", "quiet").is_none());
        assert!(mixer.get("b", "busy").is_some());
        assert_eq!(
            mixer.open("a", "quiet", small(), &short).err(),
            Some(LimitError::TenantRemoved)
        );
    }
}
