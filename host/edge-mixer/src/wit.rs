//! `edge:platform/mixer` for components: rooms of the calling tenant.

use crate::{MixError, Mixer, RoomConfig, RoomState};
use std::sync::Arc;
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
/// Largest window a component may ask for: 60 s of 48 kHz stereo (23 MB).
const MAX_WINDOW_SAMPLES: u64 = 2 * 48_000 * 60;
/// Largest frame: 120 ms at 48 kHz (Opus's longest).
const MAX_FRAME_SAMPLES: u32 = 5_760;
/// Rooms one tenant may hold at once (each up to 23 MB).
const MAX_ROOMS_PER_TENANT: usize = 32;

/// The mixer as one tenant sees it.
#[derive(Clone)]
pub struct MixerGrant {
    mixer: Arc<Mixer>,
    tenant: Arc<str>,
}

impl MixerGrant {
    /// `tenant`'s rooms in `mixer`.
    pub fn new(mixer: Arc<Mixer>, tenant: &str) -> Self {
        Self {
            mixer,
            tenant: tenant.into(),
        }
    }

    fn key(&self, room: &str) -> Result<String, Error> {
        if room.is_empty() || room.len() > MAX_ROOM || room.contains('/') {
            return Err(Error::BadInput(format!(
                "room name {room:?}: 1 to {MAX_ROOM} bytes, no '/'"
            )));
        }
        Ok(format!("{}/{room}", self.tenant))
    }

    fn room(&self, room: &str) -> Result<Arc<crate::Room>, Error> {
        self.mixer
            .get(&self.key(room)?)
            .ok_or_else(|| Error::UnknownRoom(format!("no room {room:?}; open it first")))
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

fn wire_state(room: &crate::Room, s: &RoomState) -> api::RoomState {
    api::RoomState {
        members: s
            .members
            .iter()
            .map(|(session, name)| Member {
                session: session.clone(),
                name: name.clone(),
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
            || s.frame_samples == 0
            || s.frame_samples > MAX_FRAME_SAMPLES
            || s.window_frames < 2
            || !(8_000..=48_000).contains(&s.sample_rate)
            || config.window() > MAX_WINDOW_SAMPLES
            || s.complexity > 10
        {
            return Err(Error::BadInput(format!(
                "room settings {} Hz, {} channels, {} samples per frame, {} frames, complexity {}: allowed 8000-48000 Hz, 1-2 channels, a window of at most {MAX_WINDOW_SAMPLES} samples, complexity 0-10",
                s.sample_rate, s.channels, s.frame_samples, s.window_frames, s.complexity
            )));
        }
        let key = self.key(&room)?;
        if self.mixer.get(&key).is_none()
            && self.mixer.count_prefix(&format!("{}/", self.tenant)) >= MAX_ROOMS_PER_TENANT
        {
            return Err(Error::BadInput(format!(
                "this tenant already has {MAX_ROOMS_PER_TENANT} rooms"
            )));
        }
        let r = self.mixer.room(&key, config);
        Ok(wire_state(&r, &r.state()))
    }

    fn write(&mut self, room: String, at: u64, samples: Vec<f32>) -> Result<(), Error> {
        self.room(&room)?.write(at, &samples).map_err(mix_error)
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
        let s = r.update(|s| {
            s.members.retain(|(id, _)| *id != session);
            s.members.push((session.clone(), name.clone()));
        });
        Ok(wire_state(&r, &s))
    }

    fn leave(&mut self, room: String, session: String) -> Result<api::RoomState, Error> {
        let r = self.room(&room)?;
        let s = r.update(|s| {
            s.members.retain(|(id, _)| *id != session);
            if s.leader.as_deref() == Some(session.as_str()) {
                s.leader = None;
            }
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
            s.leader = Some(session.clone());
            s.song_start = song_start;
        });
        Ok(wire_state(&r, &s))
    }

    fn state(&mut self, room: String) -> Result<api::RoomState, Error> {
        let r = self.room(&room)?;
        Ok(wire_state(&r, &r.state()))
    }
}
