//! The codec worker of a group-singing room (`wasi:http/proxy`). Each
//! singer's session is pinned to one instance, which keeps that singer's
//! Opus encoder and decoder (`opus-rs`); the shared mixing buffer and the
//! room state live in the host (`edge:platform/mixer`).
//!
//! # Who may act
//!
//! Every request carries `Authorization: Bearer TOKEN`, a join token from
//! the signer for the room in its path, checked before anything else (an
//! unknown endpoint is a 404 only for a valid token). The instance
//! verifies the token on its first request (signature with the signer's
//! public keys, `iss`, `aud`, `exp`/`nbf`, the room; `signing::join`) and
//! binds itself to that token, room and user: a later request with another
//! token, or for
//! another room, is refused (403). With `session_key = "bearer"` the host
//! pins one instance per token, so nobody reaches a session without its
//! token. The member id is the token's user (`context.user.id`, LiveKit
//! `sub`), the display name its name; leading needs `moderator`; a
//! LiveKit token without `canPublish` may not send audio, one without
//! `canSubscribe` may not read the mix.
//!
//! Variables: `join_keys` (the signer's key text: its public PEM blocks,
//! or its whole `keys`, of which only public halves are kept),
//! `join_issuer` (the signer's `issuer`), `join_audience` (default the
//! preset's: `jitsi`), `join_preset` (`jitsi` or `livekit`),
//! `join_leeway_seconds` (60).
//!
//! # Protocol
//!
//! Paths after the component's route (`spin-path-info`):
//!
//! | request | does |
//! |---|---|
//! | `POST /ROOM/join[?settings]` | joins (creating the room with the settings); answers the room state (JSON) |
//! | `POST /ROOM/leave` | leaves; answers the room state |
//! | `POST /ROOM/lead?song_start=N` | becomes the leader (moderators only), sets the song start (sample position) |
//! | `GET /ROOM/state` | the room state |
//! | `GET /ROOM/mix?read_at=R&read_frames=K` | `K` frames of the mix from `R` as raw PCM (16-bit little-endian, interleaved): for monitoring and tests |
//! | `POST /ROOM/chunk?write_at=W&read_at=R&read_frames=K` | see below |
//!
//! A chunk's body is the Opus packets the singer recorded, one per frame
//! (20 ms by default), each as a 2-byte big-endian length and the packet.
//! They are decoded with the session's decoder and added to the room's mix
//! from sample position `W`; then `K` frames of the mix from position `R`
//! are encoded with the session's encoder. The answer
//! (`application/octet-stream`) is a 4-byte big-endian length, that many
//! bytes of JSON (`{"state": {...}, "concealed": N, "frames": K}`), then
//! the `K` packets, each length-prefixed like the request's.
//!
//! A packet that does not decode (corrupt, truncated, the wrong frame
//! size) is concealed (Opus packet-loss concealment) and counted in
//! `concealed` and in the host's `/metrics`
//! (`edge_guest_counter_total{name="opus_packets_concealed"}`), never a trap. Offsets outside the room's window: 409 with
//! the window. A chunk or leave for a room nobody opened (or one closed
//! after its idle timeout), or before joining: 404 saying so. A full room
//! or a tenant at its room limit: 429.
//!
//! Room settings, given on the join that creates the room (query
//! parameters; later joins may repeat them or leave them out):
//! `sample_rate` (48000; 8000, 12000, 16000, 24000 or 48000), `channels`
//! (1 or 2), `frame_ms` (20; 10, 20, 40 or 60), `bitrate` (64000;
//! 6000-510000) and `complexity` (4; 0-10). The window is 60 s. Complexity 5 and up turn on CELT's pitch
//! pre-filter, whose correlation search is half of all encoding time in
//! wasm (no SIMD kernel in opus-rs there): at 4 this machine holds 200
//! simulated singers without a missed deadline, at 5 about 90.

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "edge:platform/codec-imports",
        generate_all,
        additional_derives: [PartialEq],
    });
}

use bindings::edge::platform::mixer::{self, RoomSettings, RoomState};
use bindings::wasi::config::store as config;
use opus_rs::{Application, OpusDecoder, OpusEncoder};
use serde_json::{Value, json};
use signing::join::{JoinVerifier, Preset};
use signing::jwt::VerifyError;
use std::cell::RefCell;
use std::rc::Rc;
use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

/// Largest request body.
const MAX_BODY: usize = 1 << 20;
/// Largest Opus packet accepted: 1,275 bytes per 20 ms (RFC 6716), for
/// frames of up to 60 ms.
const MAX_PACKET: usize = 3 * 1275;

/// A room's settings as this component uses them.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Layout {
    sample_rate: u32,
    channels: u16,
    /// Samples per channel in one frame.
    frame: usize,
    bitrate: i32,
    complexity: i32,
}

impl Layout {
    fn of(s: &RoomSettings) -> Self {
        Self {
            sample_rate: s.sample_rate,
            channels: s.channels,
            frame: s.frame_samples as usize,
            bitrate: s.bitrate as i32,
            complexity: i32::from(s.complexity),
        }
    }
}

/// Room settings from a join's query (defaults where absent), checked.
fn settings_from(query: &str) -> Result<(RoomSettings, bool), String> {
    let get = |name: &str| param(query, name);
    let given = [
        "sample_rate",
        "channels",
        "frame_ms",
        "bitrate",
        "complexity",
    ]
    .iter()
    .any(|n| get(n).is_some());
    let num = |name: &str, default: u32| -> Result<u32, String> {
        match get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("{name} is {v:?}, not a whole number")),
        }
    };
    let sample_rate = num("sample_rate", 48_000)?;
    if ![8_000, 12_000, 16_000, 24_000, 48_000].contains(&sample_rate) {
        return Err(format!(
            "sample_rate {sample_rate}: allowed 8000, 12000, 16000, 24000, 48000"
        ));
    }
    let channels = num("channels", 1)?;
    if !(1..=2).contains(&channels) {
        return Err(format!("channels {channels}: allowed 1 or 2"));
    }
    let frame_ms = num("frame_ms", 20)?;
    if ![10, 20, 40, 60].contains(&frame_ms) {
        return Err(format!("frame_ms {frame_ms}: allowed 10, 20, 40, 60"));
    }
    let bitrate = num("bitrate", 64_000)?;
    if !(6_000..=510_000).contains(&bitrate) {
        return Err(format!("bitrate {bitrate}: allowed 6000 to 510000"));
    }
    let complexity = num("complexity", 4)?;
    if complexity > 10 {
        return Err(format!("complexity {complexity}: allowed 0 to 10"));
    }
    Ok((
        RoomSettings {
            sample_rate,
            channels: channels as u16,
            frame_samples: sample_rate / 1000 * frame_ms,
            window_frames: 60_000 / frame_ms,
            bitrate,
            complexity: complexity as u8,
        },
        given,
    ))
}

/// One singer's codec state, alive as long as the session's instance.
struct Session {
    room: String,
    id: String,
    layout: Layout,
    encoder: OpusEncoder,
    decoder: OpusDecoder,
}

/// Whom this instance serves: fixed by the first request's verified token.
struct Bound {
    token: String,
    room: String,
    user: String,
    name: String,
    moderator: bool,
    /// LiveKit `canPublish`/`canSubscribe` (always true for Jitsi).
    can_publish: bool,
    can_subscribe: bool,
    expires_at: i64,
}

/// The verifier and its leeway, or why the component is not configured.
type Verifier = Result<Rc<(JoinVerifier, i64)>, String>;

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
    static BOUND: RefCell<Option<Rc<Bound>>> = const { RefCell::new(None) };
    /// Read once per instance: variables never change under a running
    /// instance (a config change gives the component fresh instances).
    static VERIFIER: std::cell::OnceCell<Verifier> = const { std::cell::OnceCell::new() };
}

fn var(name: &str) -> Result<Option<String>, String> {
    config::get(name)
        .map(|v| v.filter(|v| !v.trim().is_empty()))
        .map_err(|e| format!("reading variable {name}: {e:?}"))
}

fn load_verifier() -> Result<(JoinVerifier, i64), String> {
    let keys = var("join_keys")?
        .ok_or("no join_keys variable: give the codec the signer's public keys")?;
    let preset_name = var("join_preset")?.unwrap_or_else(|| "jitsi".into());
    let preset = Preset::parse(preset_name.trim()).ok_or_else(|| {
        format!("variable join_preset is {preset_name:?} (allowed: jitsi, livekit)")
    })?;
    let issuer = var("join_issuer")?.ok_or("no join_issuer variable: the signer's issuer")?;
    let audience = var("join_audience")?.unwrap_or_else(|| preset.default_audience().into());
    let leeway = match var("join_leeway_seconds")? {
        None => 60,
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("variable join_leeway_seconds is {v:?}, not a whole number"))?,
    };
    let verifier =
        JoinVerifier::from_key_text(&keys, preset, issuer.trim(), audience.trim(), leeway)
            .map_err(|e| format!("join token settings: {e}"))?;
    Ok((verifier, leeway))
}

fn verifier() -> Verifier {
    VERIFIER.with(|v| v.get_or_init(|| load_verifier().map(Rc::new)).clone())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Equal without an early exit: how long the comparison takes says
/// nothing about how much of a guessed token was right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0, |d, (x, y)| d | (x ^ y)) == 0
}

/// The bearer token of `Authorization`, if any.
fn bearer(headers: &[(String, Vec<u8>)]) -> Option<String> {
    let value = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| std::str::from_utf8(v).ok())?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

/// Who may make this request: the instance's bound token, or the first
/// request's token verified and bound now. Refusals are 401 (no token or
/// an invalid one) and 403 (a valid token for something else), in fixed
/// words; the reason goes to the log.
fn admit(token: Option<String>, room: &str) -> Result<Rc<Bound>, Answer> {
    let Some(token) = token else {
        return Err(refused(
            401,
            "a join token is needed (Authorization: Bearer)",
        ));
    };
    if let Some(b) = BOUND.with_borrow(|b| b.clone()) {
        if !same(&b.token, &token) {
            return Err(refused(403, "this session belongs to another join token"));
        }
        if b.room != room {
            return Err(refused(403, "the join token is not for this room"));
        }
        let leeway = verifier().map_or(0, |v| v.1);
        if now() - leeway >= b.expires_at {
            return Err(refused(401, "the join token has expired"));
        }
        return Ok(b);
    }
    let v = match verifier() {
        Ok(v) => v,
        Err(why) => {
            eprintln!("codec misconfigured: {why}");
            return Err(error(503, "the codec is not configured"));
        }
    };
    match v.0.verify_for_room(&token, room, now()) {
        Ok(t) => {
            let b = Rc::new(Bound {
                token,
                room: room.to_string(),
                name: if t.name.is_empty() {
                    t.user_id.clone()
                } else {
                    t.name
                },
                user: t.user_id,
                moderator: t.moderator,
                can_publish: t.can_publish,
                can_subscribe: t.can_subscribe,
                expires_at: t.expires_at,
            });
            BOUND.with_borrow_mut(|slot| *slot = Some(b.clone()));
            Ok(b)
        }
        Err(e) => {
            eprintln!("join token refused for room {room:?}: {e}");
            // Valid but not for this room: forbidden; anything else is no
            // valid credential at all.
            let status = if matches!(e, VerifyError::WrongRoom { .. }) {
                403
            } else {
                401
            };
            Err(refused(
                status,
                &format!("join token refused: {}", e.code()),
            ))
        }
    }
}

fn refused(status: u16, message: &str) -> Answer {
    bindings::edge::platform::metrics::counter_add("join_tokens_refused", 1);
    error(status, message)
}

struct Codec;

impl wasi::exports::http::incoming_handler::Guest for Codec {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let headers = request.headers().entries();
        let full = guest_http::path_info(&request)
            .unwrap_or_else(|| request.path_with_query().unwrap_or_default());
        let query = request
            .path_with_query()
            .and_then(|p| p.split_once('?').map(|(_, q)| q.to_string()))
            .unwrap_or_default();
        let path = full.split('?').next().unwrap_or("").to_string();
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let method = request.method();
        let known = matches!(
            (&method, parts.as_slice()),
            (Method::Get, [_, "state" | "mix"])
                | (Method::Post, [_, "join" | "leave" | "lead" | "chunk"])
        );
        // The token first, whatever the path: a refusal (401/403) on a
        // session's first request ends it at once, so made-up tokens on
        // unknown paths cannot hold sessions either.
        let room = parts.first().copied().unwrap_or("");
        let answer = match admit(bearer(&headers), room) {
            Err(refusal) => refusal,
            Ok(_) if !known => error(
                404,
                &format!("no endpoint {method:?} {path} (see the codec protocol in docs/CODEC.md)"),
            ),
            Ok(who) => match (&method, parts[1]) {
                (Method::Get, "state") => json_answer(mixer::state(room)),
                (Method::Get, _) if !who.can_subscribe => {
                    refused(403, "this join token may not listen")
                }
                (Method::Get, _) => mix_pcm(room, &query),
                (_, "join") => join(room, &who, &query),
                (_, "leave") => leave(room, &who),
                (_, "lead") => lead(room, &who, &query),
                _ => match guest_http::read_body(request, MAX_BODY) {
                    Ok(body) if !body.is_empty() && !who.can_publish => {
                        refused(403, "this join token may not send audio")
                    }
                    Ok(_)
                        if !who.can_subscribe
                            && param(&query, "read_frames").is_some_and(|k| k != "0") =>
                    {
                        refused(403, "this join token may not listen")
                    }
                    Ok(body) => chunk(room, &who.user, &query, &body),
                    Err(e) => error(400, &e),
                },
            },
        };
        respond(out, answer);
    }
}

wasi::http::proxy::export!(Codec);

/// Status, content type, body.
type Answer = (u16, &'static str, Vec<u8>);

fn error(status: u16, message: &str) -> Answer {
    (
        status,
        "application/json",
        json!({"error": message}).to_string().into_bytes(),
    )
}

fn state_json(s: &RoomState) -> Value {
    json!({
        "members": s.members.iter().map(|m| json!({"session": m.session, "name": m.name})).collect::<Vec<_>>(),
        "leader": s.leader,
        "song_start": s.song_start,
        "settings": {
            "sample_rate": s.settings.sample_rate,
            "channels": s.settings.channels,
            "frame_samples": s.settings.frame_samples,
            "window_frames": s.settings.window_frames,
            "bitrate": s.settings.bitrate,
            "complexity": s.settings.complexity,
        },
    })
}

fn mixer_error(e: mixer::Error) -> Answer {
    match e {
        mixer::Error::OutsideWindow(m) => error(409, &m),
        mixer::Error::BadInput(m) => error(400, &m),
        mixer::Error::UnknownRoom(m) => error(404, &m),
        mixer::Error::Full(m) => {
            // One counter per limit (the host's message names it).
            let counter = if m.contains("max_members") {
                "mixer_refused_max_members"
            } else if m.contains("max_total_bytes") {
                "mixer_refused_max_total_bytes"
            } else if m.contains("max_bytes") {
                "mixer_refused_max_bytes"
            } else {
                "mixer_refused_max_rooms"
            };
            bindings::edge::platform::metrics::counter_add(counter, 1);
            error(429, &m)
        }
    }
}

fn json_answer(r: Result<RoomState, mixer::Error>) -> Answer {
    match r {
        Ok(s) => (
            200,
            "application/json",
            state_json(&s).to_string().into_bytes(),
        ),
        Err(e) => mixer_error(e),
    }
}

fn join(room: &str, who: &Bound, query: &str) -> Answer {
    let (settings, given) = match settings_from(query) {
        Ok(s) => s,
        Err(e) => return error(400, &e),
    };
    let state = match mixer::open_room(room, settings) {
        Ok(s) => s,
        Err(e) => return mixer_error(e),
    };
    if given && state.settings != settings {
        return error(
            409,
            &format!(
                "room {room:?} exists with other settings: {}",
                state_json(&state)["settings"]
            ),
        );
    }
    json_answer(mixer::join(room, &who.user, &who.name))
}

fn is_member(room: &str, who: &Bound) -> Result<bool, Answer> {
    match mixer::state(room) {
        Ok(s) => Ok(s.members.iter().any(|m| m.session == who.user)),
        Err(e) => Err(mixer_error(e)),
    }
}

fn leave(room: &str, who: &Bound) -> Answer {
    match is_member(room, who) {
        Ok(true) => json_answer(mixer::leave(room, &who.user)),
        Ok(false) => error(404, &format!("you are not in room {room:?}")),
        Err(a) => a,
    }
}

fn lead(room: &str, who: &Bound, query: &str) -> Answer {
    if !who.moderator {
        return refused(403, "leading a room needs a moderator's join token");
    }
    match is_member(room, who) {
        Ok(true) => {
            let start = param(query, "song_start").and_then(|v| v.parse().ok());
            json_answer(mixer::lead(room, &who.user, start))
        }
        Ok(false) => error(
            404,
            &format!("you are not in room {room:?}: POST /{room}/join first"),
        ),
        Err(a) => a,
    }
}

/// Raw PCM of the mix (no codec): 16-bit little-endian, interleaved.
fn mix_pcm(room: &str, query: &str) -> Answer {
    let num = |name: &str| param(query, name).and_then(|v| v.parse::<u64>().ok());
    let (Some(read_at), Some(frames)) = (num("read_at"), num("read_frames")) else {
        return error(400, "mix needs read_at and read_frames (whole numbers)");
    };
    if frames > 6_000 {
        return error(400, "read_frames is at most 6000");
    }
    let state = match mixer::state(room) {
        Ok(s) => s,
        Err(e) => return mixer_error(e),
    };
    let len = frames * u64::from(state.settings.frame_samples) * u64::from(state.settings.channels);
    // At most 60 s of 48 kHz mono per call: the samples cross into this
    // instance's memory.
    if len > 2_880_000 {
        return error(
            400,
            &format!("{len} samples asked for; at most 2880000 per call"),
        );
    }
    match mixer::read(room, read_at, len as u32) {
        Ok(samples) => (
            200,
            "application/octet-stream",
            samples
                .iter()
                .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
                .collect(),
        ),
        Err(e) => mixer_error(e),
    }
}

/// The session's codec state, created on first use (or when the instance
/// is asked to serve another session after a restart).
fn with_session<R>(
    room: &str,
    id: &str,
    l: Layout,
    f: impl FnOnce(&mut Session) -> R,
) -> Result<R, String> {
    SESSION.with_borrow_mut(|slot| {
        if slot
            .as_ref()
            .is_none_or(|s| s.room != room || s.id != id || s.layout != l)
        {
            let mut encoder =
                OpusEncoder::new(l.sample_rate as i32, l.channels.into(), Application::Audio)
                    .map_err(|e| format!("encoder: {e}"))?;
            encoder.bitrate_bps = l.bitrate;
            encoder.complexity = l.complexity;
            let decoder = OpusDecoder::new(l.sample_rate as i32, l.channels.into())
                .map_err(|e| format!("decoder: {e}"))?;
            *slot = Some(Session {
                room: room.into(),
                id: id.into(),
                layout: l,
                encoder,
                decoder,
            });
        }
        Ok(f(slot.as_mut().expect("just set")))
    })
}

fn chunk(room: &str, session: &str, query: &str, body: &[u8]) -> Answer {
    let num = |name: &str| param(query, name).and_then(|v| v.parse::<u64>().ok());
    let (Some(write_at), Some(read_at), Some(read_frames)) =
        (num("write_at"), num("read_at"), num("read_frames"))
    else {
        return error(
            400,
            "chunk needs write_at, read_at and read_frames (whole numbers)",
        );
    };
    if read_frames > 500 {
        return error(400, "read_frames is at most 500");
    }
    let packets = match split_packets(body) {
        Ok(p) => p,
        Err(e) => return error(400, &e),
    };
    let l = match mixer::state(room) {
        Ok(s) if s.members.iter().any(|m| m.session == session) => Layout::of(&s.settings),
        Ok(_) => {
            return error(
                404,
                &format!("you have not joined room {room:?}: POST /{room}/join first"),
            );
        }
        Err(e) => return mixer_error(e),
    };
    let frame_samples = l.frame * usize::from(l.channels);
    // At most 60 s of packets per chunk, checked before anything is
    // allocated (a 1 MiB body of empty packets is 524,288 of them).
    let max_packets = 60_000 * l.sample_rate as usize / 1000 / l.frame;
    if packets.len() > max_packets {
        return error(
            400,
            &format!(
                "{} packets; at most {max_packets} (60 s) per chunk",
                packets.len()
            ),
        );
    }
    let result = with_session(room, session, l, |s| {
        // Decode: every packet becomes exactly one frame, concealed if bad.
        let mut pcm = vec![0.0f32; packets.len() * frame_samples];
        let mut concealed = 0;
        for (p, out) in packets.iter().zip(pcm.chunks_mut(frame_samples)) {
            match s.decoder.decode(p, l.frame, out) {
                Ok(n) if n == l.frame => {}
                _ => {
                    concealed += 1;
                    let _ = s.decoder.decode(&[], l.frame, out);
                }
            }
        }
        if !pcm.is_empty() {
            mixer::write(room, write_at, &pcm)?;
        }
        let mix = mixer::read(room, read_at, (read_frames as usize * frame_samples) as u32)?;
        let mut encoded = Vec::with_capacity(read_frames as usize);
        let mut buf = vec![0u8; MAX_PACKET];
        for frame in mix.chunks(frame_samples) {
            let n = s.encoder.encode(frame, l.frame, &mut buf).unwrap_or(0);
            encoded.push(buf[..n].to_vec());
        }
        Ok::<_, mixer::Error>((concealed, encoded))
    });
    let (concealed, encoded) = match result {
        Ok(Ok(r)) => {
            // The host's /metrics: edge_guest_counter_total{name=...}.
            bindings::edge::platform::metrics::counter_add(
                "opus_packets_decoded",
                packets.len() as u64,
            );
            if r.0 > 0 {
                bindings::edge::platform::metrics::counter_add(
                    "opus_packets_concealed",
                    r.0 as u64,
                );
            }
            bindings::edge::platform::metrics::counter_add("opus_frames_encoded", r.1.len() as u64);
            r
        }
        Ok(Err(e)) => return mixer_error(e),
        Err(e) => return error(500, &e),
    };
    let state = match mixer::state(room) {
        Ok(s) => state_json(&s),
        Err(e) => return mixer_error(e),
    };
    let head = json!({"state": state, "concealed": concealed, "frames": encoded.len()}).to_string();
    let mut body =
        Vec::with_capacity(4 + head.len() + encoded.iter().map(|p| p.len() + 2).sum::<usize>());
    body.extend_from_slice(&(head.len() as u32).to_be_bytes());
    body.extend_from_slice(head.as_bytes());
    for p in &encoded {
        body.extend_from_slice(&(p.len() as u16).to_be_bytes());
        body.extend_from_slice(p);
    }
    (200, "application/octet-stream", body)
}

/// Splits a body of 2-byte-length-prefixed packets.
fn split_packets(mut body: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    while !body.is_empty() {
        if body.len() < 2 {
            return Err(format!(
                "packet {}: a length needs 2 bytes, 1 is left",
                out.len() + 1
            ));
        }
        let n = u16::from_be_bytes([body[0], body[1]]) as usize;
        if n > MAX_PACKET {
            return Err(format!(
                "packet {}: {n} bytes, more than an Opus packet holds ({MAX_PACKET})",
                out.len() + 1
            ));
        }
        if body.len() < 2 + n {
            return Err(format!(
                "packet {}: {n} bytes announced, {} left",
                out.len() + 1,
                body.len() - 2
            ));
        }
        out.push(&body[2..2 + n]);
        body = &body[2 + n..];
    }
    Ok(out)
}

fn param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.replace("%20", " "))
}

fn respond(out: ResponseOutparam, (status, content_type, body): Answer) {
    let mut headers = vec![("content-type", content_type)];
    if status == 401 {
        headers.push(("www-authenticate", "Bearer"));
    }
    guest_http::respond(out, status, &headers, &body);
}
