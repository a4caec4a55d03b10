//! `edge:platform/mixer` for components: rooms of the calling tenant.

use crate::{BudgetLimit, LimitError, Limits, MixError, Mixer, Room, RoomConfig, RoomState};
use std::sync::{Arc, Mutex, Weak};
use wasmtime::component::{HasData, Linker};

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "edge:platform/mixer-imports",
    });
}

use generated::edge::platform::mixer::{self as api, Error, Member, RoomSettings};

/// Longest room name.
const MAX_ROOM: usize = 128;
/// Longest session id and display name.
const MAX_MEMBER: usize = 256;
/// Largest window a component may ask for: 60 s of 48 kHz stereo (23 MB).
const MAX_WINDOW_SAMPLES: u64 = 2 * 48_000 * 60;
/// Largest frame: 120 ms at 48 kHz (Opus's longest).
const MAX_FRAME_SAMPLES: u32 = 5_760;
/// Shortest frame: 2.5 ms (Opus's shortest), as a divisor of the rate.
const MIN_FRAME_PER_SECOND: u32 = 400;
/// Most frames in a window: 60 s of 2.5 ms frames. Each is a slot of the
/// ring, allocated (and charged) when the room opens.
const MAX_WINDOW_FRAMES: u32 = 24_000;

/// The mixer as one tenant's instance sees it.
///
/// Each store holds its own grant: members it joins belong to it (its
/// owner id) and leave when it is dropped, so a session instance that is
/// evicted, traps or is replaced by a reload is no longer listed. A clone
/// is another store's grant: same mixer, tenant and limits, a new owner
/// with no members.
pub struct MixerGrant {
    mixer: Arc<Mixer>,
    tenant: Arc<str>,
    limits: Limits,
    owner: u64,
    /// The members this grant's store joined, by room.
    joined: Mutex<Vec<(Weak<Room>, String)>>,
}

impl Clone for MixerGrant {
    fn clone(&self) -> Self {
        Self::new(self.mixer.clone(), &self.tenant, self.limits)
    }
}

impl Drop for MixerGrant {
    fn drop(&mut self) {
        let joined = std::mem::take(self.joined.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (room, session) in joined {
            // A room evicted meanwhile is gone; one re-created under the
            // same name is another room and keeps its members.
            if let Some(room) = room.upgrade() {
                room.leave(&session, Some(self.owner));
            }
        }
    }
}

impl MixerGrant {
    /// `tenant`'s rooms in `mixer`, bounded by `limits`.
    pub fn new(mixer: Arc<Mixer>, tenant: &str, limits: Limits) -> Self {
        let owner = mixer.new_owner();
        Self {
            mixer,
            tenant: tenant.into(),
            limits,
            owner,
            joined: Mutex::new(Vec::new()),
        }
    }

    fn check_name(room: &str) -> Result<(), Error> {
        if room.is_empty() || room.len() > MAX_ROOM || room.contains('/') {
            return Err(Error::BadInput(format!(
                "room name {room:?}: 1 to {MAX_ROOM} bytes, no '/'"
            )));
        }
        Ok(())
    }

    fn room(&self, room: &str) -> Result<Arc<Room>, Error> {
        Self::check_name(room)?;
        self.mixer.get(&self.tenant, room).ok_or_else(|| {
            Error::UnknownRoom(format!(
                "no room {room:?}; open it first (a room idle too long is closed)"
            ))
        })
    }

    fn limit(&self, room: &str, e: LimitError) -> Error {
        match e {
            LimitError::TenantRemoved => Error::UnknownRoom("the tenant was removed".into()),
            e => {
                tracing::warn!(tenant = %self.tenant, room, limit = %e, "mixer limit reached");
                Error::Full(e.to_string())
            }
        }
    }
}

/// Store data that carries a [`MixerGrant`].
pub trait MixerView: Send {
    /// The mixer as this store's tenant sees it.
    fn mixer(&mut self) -> &MixerGrant;
}

struct HasMixer;
impl HasData for HasMixer {
    type Data<'a> = &'a MixerGrant;
}

/// Adds `edge:platform/mixer` to a linker.
pub fn add_to_linker<T: MixerView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    api::add_to_linker::<T, HasMixer>(linker, |t: &mut T| t.mixer())
}

fn wire_state(room: &Room, s: &RoomState) -> api::RoomState {
    api::RoomState {
        members: s
            .members
            .iter()
            .map(|m| Member {
                session: m.session.clone(),
                name: m.name.clone(),
            })
            .collect(),
        leader: s.leader.clone(),
        song_start: s.song_start,
        settings: {
            let c = room.config();
            RoomSettings {
                sample_rate: c.sample_rate,
                channels: c.channels,
                frame_samples: c.chunk_frames,
                window_frames: c.chunks,
                bitrate: c.bitrate,
                complexity: c.complexity,
            }
        },
    }
}

fn mix_error(e: MixError) -> Error {
    match e {
        MixError::OutsideWindow { .. } => Error::OutsideWindow(e.to_string()),
        MixError::OverBudget { .. } => Error::Full(e.to_string()),
        _ => Error::BadInput(e.to_string()),
    }
}

impl api::Host for &MixerGrant {
    fn open_room(&mut self, room: String, s: RoomSettings) -> Result<api::RoomState, Error> {
        let config = RoomConfig {
            sample_rate: s.sample_rate,
            channels: s.channels,
            chunk_frames: s.frame_samples,
            chunks: s.window_frames,
            bitrate: s.bitrate,
            complexity: s.complexity,
        };
        if !(1..=2).contains(&s.channels)
            || !(8_000..=48_000).contains(&s.sample_rate)
            || s.frame_samples < s.sample_rate / MIN_FRAME_PER_SECOND
            || s.frame_samples > MAX_FRAME_SAMPLES
            || !(2..=MAX_WINDOW_FRAMES).contains(&s.window_frames)
            || config.window() > MAX_WINDOW_SAMPLES
            || s.complexity > 10
        {
            return Err(Error::BadInput(format!(
                "room settings {} Hz, {} channels, {} samples per frame, {} frames, complexity {}: allowed 8000-48000 Hz, 1-2 channels, frames of 2.5 ms (rate / {MIN_FRAME_PER_SECOND} samples) to {MAX_FRAME_SAMPLES} samples, 2 to {MAX_WINDOW_FRAMES} frames and at most {MAX_WINDOW_SAMPLES} samples in the window, complexity 0-10",
                s.sample_rate, s.channels, s.frame_samples, s.window_frames, s.complexity
            )));
        }
        MixerGrant::check_name(&room)?;
        let r = self
            .mixer
            .open(&self.tenant, &room, config, &self.limits)
            .map_err(|e| self.limit(&room, e))?;
        Ok(wire_state(&r, &r.state()))
    }

    fn write(&mut self, room: String, at: u64, samples: Vec<f32>) -> Result<(), Error> {
        let r = self.room(&room)?;
        r.write(at, &samples).map_err(|e| {
            if let MixError::OverBudget { limit, max } = e {
                let budget = match limit {
                    BudgetLimit::Tenant => &*r.accounts.tenant,
                    BudgetLimit::Host => &*r.accounts.host,
                };
                // Once a second at most per tenant (whichever budget): a
                // tenant at its share may retry every frame, and one
                // tenant's refusals must not hide another's.
                if self.mixer.log_refusal(&r.accounts.tenant) {
                    let key = match limit {
                        BudgetLimit::Tenant => "mixer.max_bytes",
                        BudgetLimit::Host => "mixer.max_total_bytes",
                    };
                    tracing::warn!(
                        tenant = %self.tenant,
                        room,
                        limit = key,
                        max_bytes = max,
                        used_bytes = budget.used(),
                        refused = budget.refused(),
                        "mixer byte budget reached: write refused"
                    );
                }
            }
            mix_error(e)
        })
    }

    fn read(&mut self, room: String, at: u64, len: u32) -> Result<Vec<f32>, Error> {
        let r = self.room(&room)?;
        // Check before allocating: `len` comes from the guest.
        if u64::from(len) > r.config().window() {
            return Err(Error::BadInput(format!(
                "{len} samples is more than the window of {}",
                r.config().window()
            )));
        }
        let mut out = vec![0.0; len as usize];
        r.read(at, &mut out).map_err(mix_error)?;
        Ok(out)
    }

    fn join(
        &mut self,
        room: String,
        session: String,
        name: String,
    ) -> Result<api::RoomState, Error> {
        let r = self.room(&room)?;
        if session.is_empty() || session.len() > MAX_MEMBER || name.len() > MAX_MEMBER {
            return Err(Error::BadInput(format!(
                "a session id is 1 to {MAX_MEMBER} bytes, a name at most {MAX_MEMBER}"
            )));
        }
        let s = r
            .join(&session, &name, self.owner, self.limits.max_members)
            .map_err(|e| self.limit(&room, e))?;
        let mut joined = self.joined.lock().unwrap_or_else(|e| e.into_inner());
        joined.retain(|(w, id)| {
            w.strong_count() > 0 && !(*id == session && w.ptr_eq(&Arc::downgrade(&r)))
        });
        joined.push((Arc::downgrade(&r), session));
        Ok(wire_state(&r, &s))
    }

    fn leave(&mut self, room: String, session: String) -> Result<api::RoomState, Error> {
        let r = self.room(&room)?;
        let s = r.leave(&session, Some(self.owner));
        // No longer this store's to take out when it goes: join/leave
        // loops must not grow the list (nor make each join walk it).
        let mut joined = self.joined.lock().unwrap_or_else(|e| e.into_inner());
        joined.retain(|(w, id)| {
            w.strong_count() > 0 && !(*id == session && w.ptr_eq(&Arc::downgrade(&r)))
        });
        Ok(wire_state(&r, &s))
    }

    fn lead(
        &mut self,
        room: String,
        session: String,
        song_start: Option<u64>,
    ) -> Result<api::RoomState, Error> {
        let r = self.room(&room)?;
        let s = r.update(|s| {
            if !s.members.iter().any(|m| m.session == session) {
                return Err(Error::BadInput(format!(
                    "session {session:?} is not a member of room {room:?}"
                )));
            }
            s.leader = Some(session.clone());
            s.song_start = song_start;
            Ok(())
        })?;
        Ok(wire_state(&r, &s))
    }

    fn state(&mut self, room: String) -> Result<api::RoomState, Error> {
        let r = self.room(&room)?;
        Ok(wire_state(&r, &r.state()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::Host;

    fn settings() -> RoomSettings {
        RoomSettings {
            sample_rate: 48_000,
            channels: 1,
            frame_samples: 960,
            window_frames: 50,
            bitrate: 64_000,
            complexity: 4,
        }
    }

    fn members(mixer: &Mixer, tenant: &str, room: &str) -> Vec<String> {
        mixer
            .get(tenant, room)
            .map(|r| {
                r.state()
                    .members
                    .iter()
                    .map(|m| m.session.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn members_leave_with_the_store_that_joined_them() {
        let mixer = Arc::new(Mixer::default());
        let template = MixerGrant::new(mixer.clone(), "t", Limits::default());
        let (a, b) = (template.clone(), template.clone());
        (&a).open_room("r".into(), settings()).unwrap();
        (&a).join("r".into(), "ada".into(), "Ada".into()).unwrap();
        (&b).join("r".into(), "bo".into(), "Bo".into()).unwrap();
        // Another store's leave does not take Ada out.
        (&b).leave("r".into(), "ada".into()).unwrap();
        assert_eq!(members(&mixer, "t", "r"), ["ada", "bo"]);
        drop(a);
        assert_eq!(members(&mixer, "t", "r"), ["bo"]);
        // A room re-created under the same name is another room: the old
        // store's departure leaves it alone.
        mixer.remove("t", "r");
        let c = template.clone();
        (&c).open_room("r".into(), settings()).unwrap();
        (&c).join("r".into(), "bo".into(), "Bo".into()).unwrap();
        drop(b);
        assert_eq!(members(&mixer, "t", "r"), ["bo"]);
    }

    #[test]
    fn leaving_forgets_the_member() {
        // Every join added an entry to the store's list and leave kept it:
        // join/leave loops grew host memory without bound.
        let mixer = Arc::new(Mixer::default());
        let g = MixerGrant::new(mixer.clone(), "t", Limits::default());
        (&g).open_room("r".into(), settings()).unwrap();
        for i in 0..10_000 {
            let session = format!("s{i}");
            (&g).join("r".into(), session.clone(), "Ada".into())
                .unwrap();
            (&g).leave("r".into(), session).unwrap();
        }
        assert!(g.joined.lock().unwrap().len() <= 1);
        // Members still joined are still taken out when the store goes.
        (&g).join("r".into(), "kept".into(), "Bo".into()).unwrap();
        (&g).join("r".into(), "gone".into(), "Cy".into()).unwrap();
        (&g).leave("r".into(), "gone".into()).unwrap();
        assert_eq!(g.joined.lock().unwrap().len(), 1);
        assert_eq!(members(&mixer, "t", "r"), ["kept"]);
        drop(g);
        assert!(members(&mixer, "t", "r").is_empty());
    }

    #[test]
    fn limits_are_the_full_error_and_tenants_are_apart() {
        let mixer = Arc::new(Mixer::default());
        let limits = Limits {
            max_rooms: 1,
            max_members: 1,
            ..Limits::default()
        };
        let g = MixerGrant::new(mixer.clone(), "t", limits);
        (&g).open_room("r".into(), settings()).unwrap();
        (&g).join("r".into(), "ada".into(), "Ada".into()).unwrap();
        assert!(matches!(
            (&g).join("r".into(), "bo".into(), "Bo".into()),
            Err(Error::Full(m)) if m.contains("mixer.max_members")
        ));
        assert!(matches!(
            (&g).open_room("s".into(), settings()),
            Err(Error::Full(m)) if m.contains("mixer.max_rooms")
        ));
        let other = MixerGrant::new(mixer.clone(), "u", limits);
        assert!(matches!(
            (&other).state("r".into()),
            Err(Error::UnknownRoom(_))
        ));
        (&other).open_room("r".into(), settings()).unwrap();
        assert!((&other).state("r".into()).unwrap().members.is_empty());
    }

    #[test]
    fn byte_budgets_are_the_full_error_and_tenants_are_apart() {
        // A room's ring and two frames of 960 mono samples: the tenant's
        // share.
        let config = RoomConfig {
            chunk_frames: 960,
            chunks: 50,
            ..RoomConfig::default()
        };
        let (ring, frame) = (config.ring_bytes(), config.chunk_bytes());
        let mixer = Arc::new(Mixer::new(2 * ring + 3 * frame));
        let limits = Limits {
            max_bytes: ring + 2 * frame,
            ..Limits::default()
        };
        let g = MixerGrant::new(mixer.clone(), "t", limits);
        (&g).open_room("r".into(), settings()).unwrap();
        (&g).write("r".into(), 0, vec![0.5; 1920]).unwrap();
        assert!(matches!(
            (&g).write("r".into(), 1920, vec![0.5; 960]),
            Err(Error::Full(m)) if m.contains("mixer.max_bytes")
        ));
        // Another tenant mixes on, up to the host's budget.
        let u = MixerGrant::new(mixer.clone(), "u", limits);
        (&u).open_room("r".into(), settings()).unwrap();
        (&u).write("r".into(), 0, vec![0.25; 960]).unwrap();
        assert_eq!((&u).read("r".into(), 0, 960).unwrap(), vec![0.25; 960]);
        assert!(matches!(
            (&u).write("r".into(), 960, vec![0.25; 960]),
            Err(Error::Full(m)) if m.contains("mixer.max_total_bytes") && !m.contains(&(2 * ring + 3 * frame).to_string())
        ));
    }

    #[test]
    fn a_rooms_ring_is_bounded_and_charged_when_it_opens() {
        // One-sample frames in a 5,760,000-frame window passed the old
        // checks: 5.76 million empty slots (~184 MB) per room, 32 rooms a
        // tenant, none of it charged to any budget.
        let mixer = Arc::new(Mixer::default());
        let g = MixerGrant::new(mixer.clone(), "t", Limits::default());
        let tiny = RoomSettings {
            frame_samples: 1,
            window_frames: 5_760_000,
            ..settings()
        };
        assert!(matches!(
            (&g).open_room("r".into(), tiny),
            Err(Error::BadInput(m)) if m.contains("2.5 ms")
        ));
        // The shortest frames allowed (2.5 ms), but more of them than 60 s.
        let long = RoomSettings {
            frame_samples: 120,
            window_frames: MAX_WINDOW_FRAMES + 1,
            ..settings()
        };
        assert!(matches!(
            (&g).open_room("r".into(), long),
            Err(Error::BadInput(_))
        ));
        assert!(mixer.get("t", "r").is_none());
        assert!(mixer.share("t").is_none_or(|s| s.used() == 0));
        // The most slots a room may have: charged to the tenant's share
        // and the host's budget at open, before anything is written.
        let most = RoomSettings {
            frame_samples: 120,
            window_frames: MAX_WINDOW_FRAMES,
            ..settings()
        };
        (&g).open_room("r".into(), most).unwrap();
        let ring = mixer.get("t", "r").unwrap().config().ring_bytes();
        assert!(ring >= u64::from(MAX_WINDOW_FRAMES) * 24, "{ring}");
        assert_eq!(mixer.share("t").unwrap().used(), ring);
        assert_eq!(mixer.budget().used(), ring);
        // A share that cannot hold another ring refuses the room.
        let small = MixerGrant::new(
            mixer.clone(),
            "u",
            Limits {
                max_bytes: ring - 1,
                ..Limits::default()
            },
        );
        assert!(matches!(
            (&small).open_room("r".into(), most),
            Err(Error::Full(m)) if m.contains("mixer.max_bytes")
        ));
        assert!(mixer.get("u", "r").is_none());
        assert_eq!(mixer.share("u").unwrap().used(), 0);
        assert_eq!(mixer.budget().used(), ring);
        // Closing the room gives it all back.
        mixer.remove("t", "r");
        assert_eq!(mixer.share("t").unwrap().used(), 0);
        assert_eq!(mixer.budget().used(), 0);
    }
}
